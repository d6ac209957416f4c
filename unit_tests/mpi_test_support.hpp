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

// True on every process iff `mine` is true on every process: a check whose
// failure on one rank every rank must see (so no rank walks on alone).
inline bool everyone(bool mine, MPI_Comm comm = MPI_COMM_WORLD) {
  int in = mine ? 1 : 0, out = 0;
  MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LAND, comm);
  return out != 0;
}

}  // namespace moonep_test
