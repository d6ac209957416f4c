// Shared by the MPI test binaries (run under mpirun, every process runs
// every test case): the worlds to test and small MPI helpers.
#pragma once

#include <mpi.h>

#include <memory>
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
inline std::vector<moonep::MpiWorldKind> world_kinds() {
  return {moonep::MpiWorldKind::shared, moonep::MpiWorldKind::rma};
}

// True on every process iff `mine` is true on every process: a check whose
// failure on one rank every rank must see (so no rank walks on alone).
inline bool everyone(bool mine, MPI_Comm comm = MPI_COMM_WORLD) {
  int in = mine ? 1 : 0, out = 0;
  MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LAND, comm);
  return out != 0;
}

}  // namespace moonep_test
