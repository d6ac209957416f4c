// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private to the command-line tools run as one MPI process per rank
// (moonep-plan --world mpi or gpu, moonep-layer --world mpi): MPI for the
// run, its start and end bounded.
#pragma once

#include <string>

#include "moonep/mpi_world.hpp"

namespace moonep::tools {

// moonep-layer's bound on every wait for another process:
// $MOONEP_MPI_TIMEOUT (default_mpi_timeout). A bad value gives the default
// and its error text in `*bad`, for the first stage to report, so that
// every process stops with the same line.
double env_mpi_timeout(std::string* bad);

// MPI for the lifetime of the object (moonep-plan may also be run as a
// singleton without mpirun: one process, one rank). MPI_Init and
// MPI_Finalize, which wait for every process of the job, are bounded by
// `timeout_s` (bound_mpi_call, watchdog.hpp; `words` says how the user set
// it, for the error line).
class MpiSession {
 public:
  explicit MpiSession(double timeout_s = kDefaultMpiTimeout, std::string words = "--mpi-timeout");
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

 private:
  bool owner_ = false;
  double timeout_s_;
  std::string words_;
};

}  // namespace moonep::tools
