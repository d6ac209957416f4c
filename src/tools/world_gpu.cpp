// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// --world gpu: every rank its own cooperative launch on its own GPU
// (moonep::cuda::GpuWorld), the problem staged from host memory; the plan
// file and summary as for --world inprocess. Under an MPI launch of several
// processes, one process per rank instead (world_gpu_mpi.cpp).
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "moonep/backend.hpp"
#include "moonep/gpu_world.hpp"
#include "moonep/error.hpp"
#include "mpi_launch.hpp"
#include "plan_worlds.hpp"

namespace moonep::tools {

int run_gpu_world(const PlanOptions& o, const char* program) {
  if (detect_mpi_launch().size > 1) return run_mpi_gpu_world(o, program);
  std::string why;
  if (!cuda::device_available(&why)) throw RuntimeError("--world gpu: " + why);
  int visible = 0;
  if (cudaGetDeviceCount(&visible) != cudaSuccess) throw RuntimeError("--world gpu: cudaGetDeviceCount failed");
  std::vector<int> listed = o.devices;
  if (listed.empty()) {
    for (int d = 0; d < visible; ++d) listed.push_back(d);
  }
  cuda::WorldOptions wo;
  wo.multicast = o.multicast;
  return run_in_this_process(o, program, Backend::cuda, [listed, wo](const Config& c) {
    std::vector<int> devices;
    for (int r = 0; r < c.ranks; ++r) devices.push_back(listed[static_cast<std::size_t>(r) % listed.size()]);
    return cuda::make_host_planner(std::make_unique<cuda::GpuWorld>(c, devices, wo));
  });
}

}  // namespace moonep::tools
