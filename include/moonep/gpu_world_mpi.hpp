// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/gpu_world_mpi.hpp — the GPU world with one MPI process per rank
// (moonep/gpu_world.hpp): process r of `comm` plans rank r on `device`.
// Only when MoonEP was built with CUDA and MPI.
//
// Each process creates its own rank's chunk on its device and hands it to
// the others as a file descriptor (cuMemExportToShareableHandle) over a
// Unix socket; each maps every rank's chunk back to back, as the world of
// one process does. So every process must be on one node (the processes
// may share a GPU: each has its own context, and time slicing lets their
// launches meet). Collective: every process of `comm` constructs the world
// together, and calls check() (and destroys it) together. Every wait for
// another process, in the constructor and in check(), is bounded by
// options.timeout_s: a process that does not come is a RuntimeError, not
// a hang. With options.multicast (every process must ask the same) rank 0
// creates the multicast object and hands it over the same way; the
// refusals (gpu_world.hpp) hold for the whole world, so every process
// throws the same RuntimeError (two processes on one GPU: refused).
#pragma once

#include <mpi.h>

#include <memory>

#include "moonep/gpu_world.hpp"

namespace moonep::cuda {

// InputError when comm's size is not config.ranks or the device does not
// exist; RuntimeError when the processes span nodes or do not all come.
std::unique_ptr<GpuWorld> make_mpi_gpu_world(const Config& config, MPI_Comm comm, int device,
                                             const WorldOptions& options = WorldOptions());

}  // namespace moonep::cuda
