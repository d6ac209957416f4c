// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Bounded waits for MPI requests (moonep/mpi_world.hpp): MPI's blocking
// collectives wait forever for a peer that never comes, so the worlds and
// moonep-plan start the nonblocking form and poll it against a deadline.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

#include "moonep/mpi_world.hpp"

namespace moonep {

double default_mpi_timeout() {
  const char* env = std::getenv("MOONEP_MPI_TIMEOUT");
  if (!env || !*env) return kDefaultMpiTimeout;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  if (*end != '\0' || !std::isfinite(v) || v <= 0) {
    throw RuntimeError(std::string("MOONEP_MPI_TIMEOUT: expected a positive number of seconds, got '") +
                       printable(env) + "'");
  }
  return v;
}

bool mpi_wait_for(MPI_Request& request, double timeout_s, int* rc) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::duration_cast<clock::duration>(
                                           std::chrono::duration<double>(timeout_s));
  // Spin briefly (a barrier among running processes completes in
  // microseconds), then back off to 1 ms sleeps: a rank waiting for a slow
  // peer on an oversubscribed node must not take its core.
  auto pause = std::chrono::microseconds(0);
  for (int polls = 0;; ++polls) {
    int done = 0;
    const int result = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (result != MPI_SUCCESS || done) {
      if (rc) *rc = result;
      return true;
    }
    if (clock::now() >= deadline) return false;
    if (polls > 200) {
      pause = std::min(std::chrono::microseconds(1000), pause + std::chrono::microseconds(20));
      std::this_thread::sleep_for(pause);
    }
  }
}

}  // namespace moonep
