// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: what the ranks of a GpuWorld must agree on before any chunk
// exists: that this process's devices reach each other's memory, and the
// one launch every rank runs (with one process per rank, agreed between
// the processes, as is whether multicast is asked for).
#pragma once

#include <string>
#include <vector>

#include "../launch_setup.hpp"
#include "moonep/gpu_world.hpp"
#include "peers.hpp"

namespace moonep::cuda::impl {

// RuntimeError naming two of this process's devices (`devices` by rank,
// `local` its ranks) of which one cannot access the other's memory.
void check_peer_access(const std::vector<int>& devices, const std::vector<int>& local, const std::string& who);

// Every rank's launch is the same kernel with the same blocks (the
// counters count R*bpr arrivals), chosen for the device that holds the
// most of this process's ranks (their blocks must all be resident there at
// once). Processes agree on the smallest blocks per rank any of them can
// run, with rank 0's kernel, and must all ask for multicast or all not
// (its set-up is collective); RuntimeError otherwise. (A world of
// different GPU models would need the choice per device.)
LaunchChoice agreed_launch(const Config& config, const WorldOptions& options, const std::vector<int>& devices,
                           const std::vector<int>& local, WorldPeers* peers, const std::string& who);

}  // namespace moonep::cuda::impl
