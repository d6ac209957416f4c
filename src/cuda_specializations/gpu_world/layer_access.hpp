// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: what moonep::cuda::GpuWorldLayer reads of its GpuWorld that users
// do not: the world's processes (to make the layer's symmetric memory with
// them and to agree on its arguments) and the bound on every wait for
// another rank (the layer's barriers wait no longer than the planner's).
#pragma once

#include "moonep/gpu_world.hpp"
#include "peers.hpp"

namespace moonep::cuda::impl {

struct LayerAccess {
  // The world's processes; null when this process holds every rank.
  static WorldPeers* peers(GpuWorld& world);
  // WorldOptions::timeout_s of the world.
  static double timeout_s(const GpuWorld& world);
};

}  // namespace moonep::cuda::impl
