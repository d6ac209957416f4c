// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// MPI for a tool's run; see mpi_session.hpp.
#include "mpi_session.hpp"

#include <mpi.h>

#include <utility>

#include "moonep/error.hpp"
#include "watchdog.hpp"

namespace moonep::tools {

double env_mpi_timeout(std::string* bad) {
  try {
    return default_mpi_timeout();
  } catch (const RuntimeError& e) {
    *bad = e.what();
    return kDefaultMpiTimeout;
  }
}

MpiSession::MpiSession(double timeout_s, std::string words) : timeout_s_(timeout_s), words_(std::move(words)) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // A process of the job that never calls MPI_Init (it stopped, or was
    // never started) keeps the others in it forever.
    const Watchdog bound = bound_mpi_call(timeout_s_, "start-up (MPI_Init)", words_);
    if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) throw RuntimeError("MPI_Init failed");
    owner_ = true;
  }
}

MpiSession::~MpiSession() {
  if (!owner_) return;
  const Watchdog bound = bound_mpi_call(timeout_s_, "shut-down (MPI_Finalize)", words_);
  MPI_Finalize();
}

}  // namespace moonep::tools
