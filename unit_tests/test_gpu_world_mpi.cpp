// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The GPU world with one MPI process per rank (moonep/gpu_world_mpi.hpp),
// under mpirun: process r plans rank r on GPU r mod (visible GPUs), all on
// one GPU where there is one (each process its own context). Every process
// checks the whole plan against the reference (it maps every rank's
// chunk), for full steps and a ragged one (each process its rank's count
// on its device); bad input on one rank fails the step on every process; a process
// that does not launch its part is named by every process within the
// bound, and the next step plans; multicast (not built, or with every
// process on one GPU) is refused by every process (no multicast object is
// ever created here).
#include <mpi.h>

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "catch2_compat.hpp"
#include "moonep/error.hpp"
#include "moonep/gpu_world_mpi.hpp"
#include "moonep/planner.hpp"
#include "moonep/moonep_config.hpp"
#include "moonep/reference.hpp"
#include "moonep/synthetic.hpp"
#include "support/cuda_test_support.hpp"
#include "support/gpu_world_mpi_support.hpp"

namespace {

using gpu_world_mpi_test::my_device;
using gpu_world_mpi_test::world_rank;
using gpu_world_mpi_test::world_size;
using moonep::Config;
using moonep::Routing;
using moonep::cuda::GpuWorld;
using moonep::cuda::WorldOptions;

// This process's rank's routing on its device.
class MyRouting {
 public:
  MyRouting(const Config& c, const Routing& routing) : ptrs_(static_cast<std::size_t>(c.ranks), nullptr) {
    const int me = world_rank();
    moonep::test::cuda_ok(cudaSetDevice(my_device()));
    moonep::test::cuda_ok(cudaMalloc(reinterpret_cast<void**>(&mine_), routing[me].size() * 4 + 4));
    set(routing[me]);
    ptrs_[me] = mine_;
  }
  ~MyRouting() { cudaFree(mine_); }
  void set(const std::vector<int32_t>& ids) {
    moonep::test::cuda_ok(cudaMemcpy(mine_, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
  }
  void set(int64_t index, int32_t value) {
    moonep::test::cuda_ok(cudaMemcpy(mine_ + index, &value, 4, cudaMemcpyHostToDevice));
  }
  const int32_t* const* ptrs() const { return ptrs_.data(); }

 private:
  int32_t* mine_ = nullptr;
  std::vector<const int32_t*> ptrs_;
};

}  // namespace

TEST_CASE("mpi gpu world: one process per rank plans like the reference, step after step", "[gpu_world][mpi]") {
  const int R = world_size(), me = world_rank();
  const Config c{R, 8 * R, 4, 512, 4, 8};
  auto world = moonep::cuda::make_mpi_gpu_world(c, MPI_COMM_WORLD, my_device());
  REQUIRE(world->process_rank() == me);
  REQUIRE(world->system_scope());
  const Routing a = moonep::synthetic_routing(c, 1.0, 5), b = moonep::synthetic_routing(c, 3.0, 6);
  const moonep::HostPlan ref_a = moonep::plan_reference(c, a), ref_b = moonep::plan_reference(c, b);
  MyRouting mine(c, a);
  for (int step = 0; step < 4; ++step) {
    mine.set((step % 2 ? b : a)[me]);
    world->plan(mine.ptrs(), nullptr, nullptr);
    REQUIRE(moonep::plan_difference(world->copy_out(), step % 2 ? ref_b : ref_a) == "");
  }
  // Only this process's rank is launched here.
  REQUIRE_THROWS_AS(world->plan_rank((me + 1) % R == me ? R : (me + 1) % R, mine.ptrs()[me], nullptr, nullptr),
                    moonep::InputError);
}

// A ragged step (docs/spec/planning.md "Ragged steps"): each process writes
// its rank's count into a word on its own device, which its kernel reads;
// every process holds the whole plan, the reference's for the counts.
TEST_CASE("mpi gpu world: a ragged step plans like the reference", "[gpu_world][mpi][ragged]") {
  const int R = world_size(), me = world_rank();
  const Config c{R, 8 * R, 4, 256, 4, 8};
  auto world = moonep::cuda::make_mpi_gpu_world(c, MPI_COMM_WORLD, my_device());
  const moonep::TokensPerRank tokens = moonep::test::ragged_tokens_with_extremes(c, 11);
  const Routing cut = moonep::test::cut_to_tokens(c, moonep::synthetic_routing(c, 1.0, 9), tokens);
  MyRouting mine(c, moonep::test::padded_to_full(c, cut));
  moonep::test::DeviceCounts count(c, tokens);  // on my device (MyRouting made it current)
  std::vector<const int32_t*> counts(static_cast<std::size_t>(R), nullptr);
  counts[me] = count.data() + me;
  world->plan(mine.ptrs(), nullptr, nullptr, counts.data());
  const moonep::HostPlan got = world->copy_out();
  REQUIRE(got.tokens_per_rank == std::optional<moonep::TokensPerRank>(tokens));
  REQUIRE(moonep::plan_difference(got, moonep::plan_reference(c, cut, nullptr, &tokens)) == "");
}

TEST_CASE("mpi gpu world: bad input on one rank fails the step on every process", "[gpu_world][mpi]") {
  const int R = world_size(), me = world_rank();
  const Config c{R, 8 * R, 4, 256, 4, 8};
  auto world = moonep::cuda::make_mpi_gpu_world(c, MPI_COMM_WORLD, my_device());
  const Routing good = moonep::synthetic_routing(c, 1.0, 7);
  MyRouting mine(c, good);
  if (me == R - 1) mine.set(9, 999);
  world->plan(mine.ptrs(), nullptr, nullptr);
  REQUIRE_THROWS_WITH(world->check(), "routing[" + std::to_string(R - 1) + "][9] = 999 is not an expert id in [0, " +
                                          std::to_string(8 * R) + ")");
  mine.set(good[me]);
  world->plan(mine.ptrs(), nullptr, nullptr);
  REQUIRE(moonep::plan_difference(world->copy_out(), moonep::plan_reference(c, good)) == "");
}

TEST_CASE("mpi gpu world: a process that does not launch is named by all; the next step plans",
          "[gpu_world][mpi]") {
  const int R = world_size(), me = world_rank();
  if (R < 2) return;  // needs another process to wait for
  const Config c{R, 8 * R, 4, 256, 4, 8};
  WorldOptions o;
  o.timeout_s = 1;
  auto world = moonep::cuda::make_mpi_gpu_world(c, MPI_COMM_WORLD, my_device(), o);
  const Routing routing = moonep::synthetic_routing(c, 1.0, 8);
  MyRouting mine(c, routing);
  if (me != 1) world->plan(mine.ptrs(), nullptr, nullptr);
  std::string message;
  try {
    world->check();
  } catch (const moonep::RuntimeError& e) {
    message = e.what();
  }
  INFO(message);
  REQUIRE(message.rfind("moonep::cuda::GpuWorld: rank 1 did not arrive within 1 s: ", 0) == 0);
  world->plan(mine.ptrs(), nullptr, nullptr);
  REQUIRE(moonep::plan_difference(world->copy_out(), moonep::plan_reference(c, routing)) == "");
}

TEST_CASE("mpi gpu world: multicast not built, or with every process on one GPU, is refused by every process",
          "[gpu_world][mpi]") {
  const int R = world_size();
  if (R < 2) return;  // needs two processes on one GPU
  const Config c{R, 8 * R, 4, 256, 4, 8};
  WorldOptions o;
  o.multicast = true;
  // Device 0 in every process: one GPU, whatever this machine has.
  std::string message;
  try {
    moonep::cuda::make_mpi_gpu_world(c, MPI_COMM_WORLD, 0, o);
  } catch (const moonep::RuntimeError& e) {
    message = e.what();
  }
  INFO(message);
#if MOONEP_HAVE_MULTICAST
  std::string all = "ranks 0";
  for (int r = 1; r < R; ++r) all += (r + 1 == R ? " and " : ", ") + std::to_string(r);
  REQUIRE(message.rfind("moonep::cuda::GpuWorld (one process per rank): multicast needs every rank on its own "
                        "device, but " + all + " are on one GPU (GPU-",
                        0) == 0);
  CHECK(message.find(", device 0 in rank 0's process)") != std::string::npos);
  const std::string tail = "; no multicast object was created";
  CHECK(message.size() > tail.size());
  CHECK(message.compare(message.size() - tail.size(), tail.size(), tail) == 0);
#else
  REQUIRE(message == "moonep::cuda::GpuWorld (one process per rank): this MoonEP was built without NVLink multicast "
                     "(configure with -DMoonEP_ENABLE_MULTICAST=ON to build it); no multicast object was created");
#endif
  // Every process refused alike, and a unicast world plans after it.
  auto world = moonep::cuda::make_mpi_gpu_world(c, MPI_COMM_WORLD, my_device());
  REQUIRE_FALSE(world->multicast());
  const Routing routing = moonep::synthetic_routing(c, 1.0, 9);
  MyRouting mine(c, routing);
  world->plan(mine.ptrs(), nullptr, nullptr);
  REQUIRE(moonep::plan_difference(world->copy_out(), moonep::plan_reference(c, routing)) == "");
}

#if MOONEP_HAVE_CUDA_SPECIALIZATION
// moonep::Planner over a world of one process per rank (a Kokkos with CUDA):
// each process's planner plans its own rank, in the same interface as
// every other path, and its plan view is the reference's rank plan.
TEST_CASE("mpi gpu world: Planner<Kokkos::Cuda, OnGpuWorld> plans each process's rank",
          "[gpu_world][mpi][kokkos]") {
  const int R = world_size(), me = world_rank();
  const Kokkos::Cuda exec;
  // Collective: every process runs the case or none does.
  int usable = exec.cuda_device() == my_device() ? 1 : 0, all_usable = 0;
  MPI_Allreduce(&usable, &all_usable, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_usable) {
    WARN("Kokkos' device is not every process's rank device here: skipped");
    return;
  }
  const Config c{R, 8 * R, 4, 256, 4, 8};
  auto world = moonep::cuda::make_mpi_gpu_world(c, MPI_COMM_WORLD, my_device());
  moonep::Planner<Kokkos::Cuda, moonep::OnGpuWorld> planner(c, *world, exec);
  REQUIRE(planner.local_ranks() == std::vector<int>{me});
  using View = Kokkos::View<const int32_t*, Kokkos::CudaSpace>;
  for (int step = 0; step < 3; ++step) {
    const Routing routing = moonep::synthetic_routing(c, 1.0 + step, 20 + step);
    Kokkos::View<int32_t*, Kokkos::CudaSpace> mine("routing", routing[me].size());
    Kokkos::deep_copy(exec, mine, Kokkos::View<const int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                      routing[me].data(), routing[me].size()));
    const auto& plan = planner.plan(std::vector<View>{mine});
    REQUIRE(plan.ranks.size() == 1);
    REQUIRE(moonep::plan_difference(moonep::plan_reference(c, routing).ranks[me], plan.to_host(0)) == "");
  }
  // Bad input on one rank: the same words on every process, then a good step.
  Routing bad = moonep::synthetic_routing(c, 1.0, 30);
  if (R > 1) bad[1][5] = -3;
  Kokkos::View<int32_t*, Kokkos::CudaSpace> mine("routing", bad[me].size());
  Kokkos::deep_copy(exec, mine, Kokkos::View<const int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                    bad[me].data(), bad[me].size()));
  if (R > 1) {
    REQUIRE_THROWS_WITH(planner.plan(std::vector<View>{mine}), "routing[1][5] = -3 is not an expert id in [0, " +
                                                                   std::to_string(c.experts) + ")");
  }
  const Routing good = moonep::synthetic_routing(c, 2.0, 31);
  Kokkos::deep_copy(exec, mine, Kokkos::View<const int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                    good[me].data(), good[me].size()));
  planner.plan(std::vector<View>{mine});
  REQUIRE(moonep::plan_difference(moonep::plan_reference(c, good).ranks[me], planner.last_plan().to_host(0)) == "");
}
#endif
