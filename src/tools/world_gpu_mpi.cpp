// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// --world gpu under an MPI launch: moonep-plan as one MPI process per rank
// over one GPU world (moonep::cuda::make_mpi_gpu_world),
//   mpirun -np R moonep-plan --world gpu --input problem.json --output plan.json
// Process r plans rank r with its own cooperative launch on GPU
// devices[r mod n] (--devices, else the visible GPUs in turn); every
// process must be on one node. The stages (read, plan, write), their
// agreement and their bounds are --world mpi's (mpi_run.hpp). Every
// process maps every rank's outputs, so each copies the whole plan out of
// the world (a collective check of the last step) and rank 0 writes the
// same plan file as the other worlds; nothing is gathered over MPI.
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <algorithm>
#include <memory>
#include <chrono>
#include <string>
#include <vector>

#include "moonep/backend.hpp"
#include "moonep/gpu_world.hpp"
#include "memory_budget.hpp"
#include "moonep/error.hpp"
#include "moonep/gpu_world_mpi.hpp"
#include "moonep/host_plan.hpp"
#include "mpi_run.hpp"
#include "mpi_stages.hpp"
#include "plan_worlds.hpp"

namespace moonep::tools {
namespace {

// The GPU world's own bound on every wait (its kernels' waits for another
// rank, and its collectives at three times that, plus a second) within the
// stages' --mpi-timeout, so that a rank that never comes is named by the
// world before rank 0 gives up on the stage; at most the world's default.
double world_timeout(double stage_timeout) { return std::min(cuda::WorldOptions().timeout_s, stage_timeout / 4); }

int device_of(const PlanOptions& o, int rank) {
  std::string why;
  if (!cuda::device_available(&why)) throw RuntimeError("--world gpu: " + why);
  int visible = 0;
  if (cudaGetDeviceCount(&visible) != cudaSuccess || visible < 1) {
    throw RuntimeError("--world gpu: cudaGetDeviceCount failed");
  }
  if (o.devices.empty()) return rank % visible;
  return o.devices[static_cast<std::size_t>(rank) % o.devices.size()];
}

}  // namespace

int run_mpi_gpu_world(const PlanOptions& o, const char* /*program*/) {
  std::string bad_timeout;
  const double timeout = mpi_timeout_of(o, &bad_timeout);
  MpiSession session(timeout, mpi_timeout_words(o));
  MpiStages mpi(timeout, mpi_timeout_words(o));
  const int rank = mpi.rank();

  // Stage 1: the options and the problem.
  MpiWorldShape shape;
  shape.option = "--world gpu under MPI";
  shape.backend = Backend::cuda;
  shape.kind = "gpu";
  shape.every_rank_holds_the_plan = true;
  shape.check_options = [&] {
    if (!o.mpi_world.empty()) throw UsageError("--mpi-world is for --world mpi, not --world gpu");
  };
  MpiRun run;
  if (int s = read_problem_stage(mpi, o, bad_timeout, shape, &run)) return s;
  const Problem& problem = run.problem;

  // Stage 2: this process's rank, o.steps times, every process stepping
  // together (the world's check is collective); the time of a step is the
  // slowest rank's. Bad input is refused here by every process alike (each
  // validates the whole problem), before any launch.
  HostPlan plan;
  std::vector<double> seconds;
  std::string ran;
  if (int s = mpi.run("planning", [&] {
        cuda::WorldOptions wo;
        wo.timeout_s = world_timeout(timeout);
        wo.multicast = o.multicast;
        const std::unique_ptr<HostPlanner> planner =
            cuda::make_host_planner(cuda::make_mpi_gpu_world(problem.config, MPI_COMM_WORLD, device_of(o, rank), wo));
        planner->load(problem.routing, problem.tokens_per_expert ? &*problem.tokens_per_expert : nullptr,
                     problem.tokens_per_rank ? &*problem.tokens_per_rank : nullptr);
        for (int i = 0; i < o.steps; ++i) {
          mpi.barrier("planning");
          const auto t0 = std::chrono::steady_clock::now();
          planner->step();
          const double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          seconds.push_back(mpi.max(mine, "planning"));
        }
        plan = planner->result();
        if (rank != 0) plan = HostPlan{};
        ran = planner->details();
      })) {
    return s;
  }
  release_freed_memory();  // the world's staging

  // Stage 3: rank 0 writes; everyone learns whether it worked.
  return write_plan_stage(
      mpi, o, run, [&] { return std::move(plan); },
      [&](RunInfo& info) {
        info.backend = to_string(Backend::cuda);
        info.ran = ran;
        info.mpi_world = "gpu";
        info.step_seconds = seconds;
      });
}

}  // namespace moonep::tools
