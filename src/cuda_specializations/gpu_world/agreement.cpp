// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// What a GpuWorld's ranks agree on (agreement.hpp).
#include "agreement.hpp"

#include <algorithm>
#include <set>

#include "../host_checks.hpp"

namespace moonep::cuda::impl {

void check_peer_access(const std::vector<int>& devices, const std::vector<int>& local, const std::string& who) {
  std::set<int> here;
  for (int r : local) here.insert(devices[r]);
  for (int a : here) {
    for (int b : here) {
      int can = 1;
      if (a != b) check_cuda(cudaDeviceCanAccessPeer(&can, a, b), "cudaDeviceCanAccessPeer");
      if (!can) {
        throw RuntimeError(who + ": device " + std::to_string(a) + " cannot access device " + std::to_string(b) +
                           "'s memory (no peer access): its ranks cannot meet");
      }
    }
  }
}

LaunchChoice agreed_launch(const Config& config, const WorldOptions& options, const std::vector<int>& devices,
                           const std::vector<int>& local, WorldPeers* peers, const std::string& who) {
  const int R = config.ranks;
  std::set<int> here;
  for (int r : local) here.insert(devices[r]);
  int busiest = devices[local[0]], most = 0;
  for (int d : here) {
    int n = 0;
    for (int r : local) n += devices[r] == d ? 1 : 0;
    if (n > most) most = n, busiest = d;
  }
  DeviceScope current(busiest);
  LaunchChoice choice = choose_launch(config, Options{options.blocks_per_rank, options.kernel}, busiest, most,
                                      Launches::one_per_rank, who.c_str());
  if (!peers) return choice;
  const int mine[3] = {choice.bpr, static_cast<int>(choice.kernel), options.multicast ? 1 : 0};
  std::vector<int> all(3 * static_cast<std::size_t>(R));
  peers->allgather(mine, sizeof mine, all.data());
  std::vector<int> on, off;
  for (int r = 0; r < R; ++r) (all[3 * r + 2] ? on : off).push_back(r);
  if (!on.empty() && !off.empty()) {
    throw RuntimeError(who + ": WorldOptions::multicast is on for " + ranks_text(on) + " and off for " +
                       ranks_text(off) + " (every process must ask for the same); no multicast object was created");
  }
  int bpr = choice.bpr;
  for (int r = 0; r < R; ++r) bpr = std::min(bpr, all[3 * r]);
  const Kernel kernel = static_cast<Kernel>(all[1]);
  if (bpr != choice.bpr || kernel != choice.kernel) {
    choice = choose_launch(config, Options{bpr, kernel}, busiest, most, Launches::one_per_rank, who.c_str());
  }
  if (choice.bpr != bpr) {
    throw RuntimeError(who + ": the processes' devices cannot run the same launch (" + std::to_string(bpr) +
                       " blocks per rank of the " + kernel_name(kernel) + " kernel)");
  }
  return choice;
}

}  // namespace moonep::cuda::impl
