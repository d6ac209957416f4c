// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Shared by the MPI test binaries (run under mpirun, every process runs
// every test case): the worlds to test and small MPI helpers.
#pragma once

#include <mpi.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "moonep/mpi_world.hpp"

namespace moonep_test {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// Both implementations. The tests run on one node, where both can be built:
// shared (what auto picks here) and the forced rma world.
// MOONEP_TEST_MPI_WORLDS=rma restricts the tests to the rma world (for runs
// whose MPI offers no shared-memory windows, e.g. Open MPI with
// --mca osc pt2pt, which sends every MPI_Put as a message).
inline std::vector<moonep::MpiWorldKind> world_kinds() {
  const char* only = std::getenv("MOONEP_TEST_MPI_WORLDS");
  if (only && std::string(only) == "rma") return {moonep::MpiWorldKind::rma};
  return {moonep::MpiWorldKind::shared, moonep::MpiWorldKind::rma};
}
inline bool shared_windows() { return world_kinds().front() == moonep::MpiWorldKind::shared; }

// True when RMA windows on disjoint communicators of one node can corrupt
// each other here: Open MPI before 5.0 whose osc/rdma component may be
// used. osc/rdma names a window's node-local segment after the
// communicator's context id, which the disjoint communicators of one
// MPI_Comm_split share, so two groups creating windows at once map the same
// memory (open-mpi/ompi#9492, fixed in 5.0 by #9525). The *_rma_pt2pt tests
// run those cases with osc/pt2pt instead.
inline bool rma_split_hazard() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  const std::string version(text, static_cast<std::size_t>(len));
  const auto at = version.find("Open MPI v");
  if (at == std::string::npos) return false;
  if (std::atoi(version.c_str() + at + 10) >= 5) return false;
  const char* osc = std::getenv("OMPI_MCA_osc");  // --mca osc LIST, as mpirun passes it on
  if (!osc || !*osc) return true;
  const std::string list(osc);
  const bool names_rdma = list.find("rdma") != std::string::npos;
  return list[0] == '^' ? !names_rdma : names_rdma;
}

// True on every process iff `mine` is true on every process: a check whose
// failure on one rank every rank must see (so no rank walks on alone).
inline bool everyone(bool mine, MPI_Comm comm = MPI_COMM_WORLD) {
  int in = mine ? 1 : 0, out = 0;
  MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LAND, comm);
  return out != 0;
}

}  // namespace moonep_test
