// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The GPU world (one launch per rank over a VMM-mapped symmetric buffer)
// against the reference planner, bit for bit: R ranks on one device
// ({0, 0, ...}: each rank its own allocation, stream and launch), with GPU
// and system scope; reuse, repeated runs, a CUDA graph of R kernel nodes
// replayed over new routing; ragged steps (each rank's count read by its
// kernel) and one graph replayed over new counts; bad input on one rank; a
// rank that never launches (the others give up within the bound, the next
// step plans); the refusals of NVLink multicast (never created here: see
// test_cuda_main.cpp).
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdlib>
#include <sstream>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "catch2_compat.hpp"
#include "moonep/error.hpp"
#include "moonep/gpu_world.hpp"
#include "moonep/moonep_config.hpp"
#include "moonep/reference.hpp"
#include "support/cuda_test_support.hpp"

namespace {

using moonep::Config;
using moonep::Routing;
using moonep::cuda::GpuWorld;
using moonep::cuda::Kernel;
using moonep::cuda::WorldOptions;
using namespace moonep::test;

// The world's devices: all ranks on device 0, or, with MOONEP_TEST_DEVICES
// set (e.g. "0,1,2,3", scripts/gpu_world_multi.sh), rank r on the
// (r mod n)-th device listed: the same tests on several GPUs.
std::vector<int> test_devices(int ranks) {
  std::vector<int> listed;
  if (const char* env = std::getenv("MOONEP_TEST_DEVICES")) {
    std::stringstream in(env);
    for (std::string item; std::getline(in, item, ',');) listed.push_back(std::stoi(item));
  }
  if (listed.empty()) listed.push_back(0);
  std::vector<int> d;
  for (int r = 0; r < ranks; ++r) d.push_back(listed[static_cast<std::size_t>(r) % listed.size()]);
  return d;
}
std::vector<int> on_device_zero(int ranks) { return std::vector<int>(static_cast<std::size_t>(ranks), 0); }

WorldOptions options_with(Kernel kernel, bool system_scope, int bpr = WorldOptions().blocks_per_rank) {
  WorldOptions o;
  o.kernel = kernel;
  o.system_scope = system_scope;
  o.blocks_per_rank = bpr;
  return o;
}

moonep::HostPlan plan_world(GpuWorld& world, const DeviceRouting& dr) {
  world.plan(dr.topk(), dr.tpe(), nullptr);
  moonep::HostPlan plan = world.copy_out();
  require_entries(world.config(), {}, [&](int r) { return world.rank_plan(r); });
  return plan;
}

// Both kernels, both scopes, against the reference.
void require_world_matches_reference(const Config& c, const Routing& routing, int bpr, const std::string& what) {
  const moonep::HostPlan ref = moonep::plan_reference(c, routing);
  DeviceRouting dr(c, routing);
  for (const Kernel kernel : {Kernel::automatic, Kernel::global_tables}) {
    for (const bool sys : {false, true}) {
      GpuWorld world(c, test_devices(c.ranks), options_with(kernel, sys, bpr));
      const bool spans = world.system_scope() && !sys;  // several devices: system scope always
      INFO(what << " " << moonep::describe(c) << " kernel " << moonep::cuda::kernel_name(world.kernel())
                << " at blocks_per_rank " << world.blocks_per_rank() << (sys ? ", system scope" : ", GPU scope"));
      REQUIRE((world.system_scope() == sys || spans));
      REQUIRE(moonep::plan_difference(plan_world(world, dr), ref) == "");
    }
  }
}

}  // namespace

TEST_CASE("gpu world matches the reference on small hand-picked shapes", "[gpu_world][sanitize]") {
  struct Case { Config c; Shape shape; int bpr; };
  const std::vector<Case> cases = {
      {Config{2, 8, 2, 16, 2, 4}, Shape::skew, 4},
      {Config{3, 12, 4, 33, 3, 1}, Shape::repeats, 2},
      {Config{4, 8, 3, 20, 5, 2}, Shape::one_expert, 1},
      {Config{1, 4, 2, 7, 2, 2}, Shape::uniform, 2},
  };
  for (const auto& k : cases) require_world_matches_reference(k.c, make_routing(k.c, k.shape, 7), k.bpr, name(k.shape));
}

TEST_CASE("gpu world matches the reference on a randomized sweep", "[gpu_world]") {
  std::mt19937_64 rng(20261204);
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<uint64_t>(hi - lo + 1)); };
  const int tps[] = {1, 2, 3, 8, 16, 64, 128};
  const Shape shapes[] = {Shape::uniform, Shape::skew, Shape::heavy, Shape::one_expert,
                          Shape::same_expert_k_times, Shape::repeats, Shape::owner_zero};
  int done = 0;
  for (int trial = 0; trial < 200 && done < 60; ++trial) {
    const int R = pick(1, 8);
    const int epn = std::max(1, (1 << pick(0, 7)) * pick(1, 3) / 2);
    if (R * epn > 1024) continue;
    const int K = pick(0, 3) == 0 ? pick(1, 32) : pick(1, 8);
    const int S = std::max(1, (1 << pick(0, 13)) - pick(0, 3));
    if (static_cast<int64_t>(R) * S * K > (1 << 19)) continue;
    const Config c{R, R * epn, K, S, pick(1, 40), tps[pick(0, 6)]};
    const Shape shape = shapes[pick(0, 6)];
    require_world_matches_reference(c, make_routing(c, shape, rng()), pick(0, 2) == 0 ? pick(1, 8) : 16, name(shape));
    ++done;
  }
  REQUIRE(done >= 50);
}

TEST_CASE("gpu world: the headline shape, reuse, repeats and one CUDA graph of R launches", "[gpu_world]") {
  const Config c{8, 256, 8, 4096, 32, 128};
  const Kernel kernel = GENERATE(Kernel::automatic, Kernel::global_tables);
  GpuWorld world(c, test_devices(c.ranks), options_with(kernel, false, 16));
  INFO("kernel " << moonep::cuda::kernel_name(world.kernel()) << " at blocks_per_rank " << world.blocks_per_rank());
  const Routing a = make_routing(c, Shape::skew, 1), b = make_routing(c, Shape::heavy, 2);
  const moonep::HostPlan ref_a = moonep::plan_reference(c, a), ref_b = moonep::plan_reference(c, b);
  DeviceRouting da(c, a), db(c, b);
  REQUIRE(moonep::plan_difference(plan_world(world, da), ref_a) == "");
  for (int step = 0; step < 6; ++step) {
    for (int i = 0; i < 3; ++i) world.plan((step % 2 ? db : da).topk(), nullptr, nullptr);
    REQUIRE(moonep::plan_difference(world.copy_out(), step % 2 ? ref_b : ref_a) == "");
  }
  // Captured once: R kernel nodes forked from and joined into one stream;
  // replayed over routing rewritten in place between replays.
  cudaStream_t origin = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&origin, cudaStreamNonBlocking));
  DeviceRouting live(c, a);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cuda_ok(cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal));
  world.plan(live.topk(), nullptr, origin);
  cuda_ok(cudaStreamEndCapture(origin, &graph));
  std::size_t nodes = 0;
  cuda_ok(cudaGraphGetNodes(graph, nullptr, &nodes));
  CHECK(nodes >= static_cast<std::size_t>(c.ranks));
  cuda_ok(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 4; ++replay) {
    const Routing& r = replay % 2 ? b : a;
    for (int rank = 0; rank < c.ranks; ++rank) {
      cuda_ok(cudaMemcpy(const_cast<int32_t*>(live.topk()[rank]), r[rank].data(), r[rank].size() * 4,
                         cudaMemcpyHostToDevice));
    }
    cuda_ok(cudaGraphLaunch(exec, origin));
    cuda_ok(cudaStreamSynchronize(origin));
    REQUIRE(moonep::plan_difference(world.copy_out(), replay % 2 ? ref_b : ref_a) == "");
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(origin);
}

// Ragged steps (docs/spec/planning.md "Ragged steps") through
// GpuWorld::plan: rank r's kernel reads its count through its own pointer
// (DeviceCounts::per_rank), its routing buffer holds S*K ids, those past
// s_r*K no expert (padded_to_full: reading one fails the step).
TEST_CASE("gpu world plans ragged steps like the reference", "[gpu_world][ragged][sanitize]") {
  const std::vector<RaggedCase> cases = small_ragged_cases();
  for (const auto& k : cases) {
    const Routing cut = cut_to_tokens(k.c, make_routing(k.c, k.shape, 7), k.tokens);
    const moonep::HostPlan ref = moonep::plan_reference(k.c, cut, nullptr, &k.tokens);
    DeviceRouting dr(k.c, padded_to_full(k.c, cut));
    const DeviceCounts counts(k.c, k.tokens);
    for (const Kernel kernel : {Kernel::automatic, Kernel::global_tables}) {
      GpuWorld world(k.c, test_devices(k.c.ranks), options_with(kernel, false, k.bpr));
      INFO(name(k.shape) << " " << moonep::describe(k.c) << " tokens_per_rank " << ::Catch::Detail::stringify(k.tokens)
                         << " kernel " << moonep::cuda::kernel_name(world.kernel()));
      world.plan(dr.topk(), nullptr, nullptr, counts.per_rank());
      const moonep::HostPlan got = world.copy_out();
      REQUIRE(got.tokens_per_rank == std::optional<moonep::TokensPerRank>(k.tokens));
      REQUIRE(moonep::plan_difference(got, ref) == "");
      require_entries(k.c, k.tokens, [&](int r) { return world.rank_plan(r); });
    }
  }
}

TEST_CASE("gpu world: a count outside 0..S on one rank fails the step for all, and the world stays usable",
          "[gpu_world][ragged][sanitize]") {
  const Config c{4, 16, 4, 40, 2, 4};
  const Kernel kernel = GENERATE(Kernel::shared_tables, Kernel::global_tables);
  GpuWorld world(c, test_devices(c.ranks), options_with(kernel, true, 4));
  REQUIRE(world.kernel() == kernel);
  const moonep::TokensPerRank good = {40, 0, 17, 3};
  const Routing cut = cut_to_tokens(c, make_routing(c, Shape::skew, 3), good);
  DeviceRouting dr(c, padded_to_full(c, cut));
  DeviceCounts counts(c, {40, 0, 41, 3});
  world.plan(dr.topk(), nullptr, nullptr, counts.per_rank());
  REQUIRE_THROWS_WITH(world.check(), "tokens_per_rank[2] = 41 is outside 0..tokens = 0..40");
  counts.write({-1, 0, 17, 3});
  world.plan(dr.topk(), nullptr, nullptr, counts.per_rank());
  REQUIRE_THROWS_WITH(world.check(), "tokens_per_rank[0] = -1 is outside 0..tokens = 0..40");
  counts.write(good);
  world.plan(dr.topk(), nullptr, nullptr, counts.per_rank());
  REQUIRE(moonep::plan_difference(world.copy_out(), moonep::plan_reference(c, cut, nullptr, &good)) == "");
}

// world.plan() captured once into one graph of R kernel nodes on a
// non-default stream replays steps of any counts: between replays only
// the contents of the same routing and count buffers change.
TEST_CASE("gpu world: one captured CUDA graph replays steps of any counts", "[gpu_world][ragged]") {
  const Config c{8, 256, 8, 4096, 32, 128};
  const Kernel kernel = GENERATE(Kernel::automatic, Kernel::global_tables);
  GpuWorld world(c, test_devices(c.ranks), options_with(kernel, false, 16));
  INFO("kernel " << moonep::cuda::kernel_name(world.kernel()) << " at blocks_per_rank " << world.blocks_per_rank());
  DeviceRouting live(c, make_routing(c, Shape::skew, 1));
  DeviceCounts counts(c, moonep::TokensPerRank(8, c.tokens));
  const CapturedGraph graph([&](cudaStream_t origin) { world.plan(live.topk(), nullptr, origin, counts.per_rank()); });
  require_graph_replays(c, graph, live, counts, 200, [&] { return world.copy_out(); },
                        [&](int r) { return world.rank_plan(r); });
}

TEST_CASE("gpu world: bad input on one rank fails the step for all, and the world stays usable",
          "[gpu_world][sanitize]") {
  const Config c{4, 16, 4, 40, 2, 4};
  const Kernel kernel = GENERATE(Kernel::shared_tables, Kernel::global_tables);
  GpuWorld world(c, test_devices(c.ranks), options_with(kernel, true, 4));
  REQUIRE(world.kernel() == kernel);
  const Routing good = make_routing(c, Shape::skew, 3);
  DeviceRouting dr(c, good);
  dr.set(2, 17, 300);
  world.plan(dr.topk(), nullptr, nullptr);
  REQUIRE_THROWS_WITH(world.check(), "routing[2][17] = 300 is not an expert id in [0, 16)");
  dr.set(2, 17, good[2][17]);
  REQUIRE(moonep::plan_difference(plan_world(world, dr), moonep::plan_reference(c, good)) == "");
  // A given tokens_per_expert that does not match rank 3's routing.
  moonep::TokensPerExpert tpe = moonep::count_tokens_per_expert(c, good);
  tpe[3][5] += 2;
  DeviceRouting with_tpe(c, good, &tpe);
  world.plan(with_tpe.topk(), with_tpe.tpe(), nullptr);
  REQUIRE_THROWS_WITH(world.check(), "tokens_per_expert[3][5] = " + std::to_string(tpe[3][5]) +
                                         " but routing[3] names expert 5 " + std::to_string(tpe[3][5] - 2) +
                                         " times");
  REQUIRE(moonep::plan_difference(plan_world(world, dr), moonep::plan_reference(c, good)) == "");
}

TEST_CASE("gpu world: a rank that never launches is named within the bound; the next step plans",
          "[gpu_world]") {
  const Config c{4, 32, 4, 256, 4, 8};
  const Kernel kernel = GENERATE(Kernel::shared_tables, Kernel::global_tables);
  WorldOptions o = options_with(kernel, false, 4);
  o.timeout_s = 0.25;
  GpuWorld world(c, test_devices(c.ranks), o);
  REQUIRE(world.kernel() == kernel);
  const Routing routing = make_routing(c, Shape::skew, 8);
  const moonep::HostPlan ref = moonep::plan_reference(c, routing);
  DeviceRouting dr(c, routing);
  REQUIRE(moonep::plan_difference(plan_world(world, dr), ref) == "");
  for (const int absent : {2, 0}) {
    INFO("kernel " << moonep::cuda::kernel_name(kernel) << ", rank " << absent << " absent");
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < c.ranks; ++r) {
      if (r != absent) world.plan_rank(r, dr.topk()[r], nullptr, world.stream(r));
    }
    std::string message;
    try {
      world.check();
    } catch (const moonep::RuntimeError& e) {
      message = e.what();
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    INFO(message);
    REQUIRE(message.rfind("moonep::cuda::GpuWorld: rank " + std::to_string(absent) + " did not arrive within 0.25 s: ",
                          0) == 0);
    CHECK(message.find("gave up waiting at") != std::string::npos);
    CHECK(message.find("the step was abandoned and the world reset") != std::string::npos);
    CHECK(waited < 5.0);
    // The next full step is a correct plan, twice.
    REQUIRE(moonep::plan_difference(plan_world(world, dr), ref) == "");
    REQUIRE(moonep::plan_difference(plan_world(world, dr), ref) == "");
  }
}

TEST_CASE("gpu world refuses what it cannot build, clearly", "[gpu_world][sanitize]") {
  const Config c{4, 16, 2, 32, 2, 4};
  const std::vector<int> three = on_device_zero(3);
  REQUIRE_THROWS_WITH(GpuWorld(c, three),
                      "moonep::cuda::GpuWorld: 3 devices given for 4 ranks (one device per rank; a device may repeat)");
  int n = 0;
  cuda_ok(cudaGetDeviceCount(&n));
  std::vector<int> absent_device = on_device_zero(4);
  absent_device[2] = n;
  REQUIRE_THROWS_WITH(GpuWorld(c, absent_device), "moonep::cuda::GpuWorld: device " + std::to_string(n) +
                                                      " of rank 2 does not exist (" + std::to_string(n) + " visible)");
  WorldOptions o;
  o.timeout_s = 0;
  REQUIRE_THROWS_AS(GpuWorld(c, on_device_zero(4), o), moonep::InputError);
  GpuWorld world(c, on_device_zero(4));
  REQUIRE_THROWS_WITH(world.plan_rank(4, nullptr, nullptr, nullptr),
                      "moonep::cuda::GpuWorld::plan_rank: rank 4 is not in [0, 4)");
  REQUIRE_THROWS_AS(world.plan(nullptr, nullptr, nullptr), moonep::InputError);
  // Nothing was launched by the refusals: a full step still plans.
  const Routing routing = make_routing(c, Shape::repeats, 2);
  DeviceRouting dr(c, routing);
  REQUIRE(moonep::plan_difference(plan_world(world, dr), moonep::plan_reference(c, routing)) == "");
}

// The multicast opt-in is refused before any multicast object exists: in a
// build without it (the default), every world that asks; in one with it,
// ranks sharing a device first. After each refusal a unicast world on the
// same devices plans like the reference.
TEST_CASE("gpu world refuses multicast where it is not built or ranks share a device", "[gpu_world]") {
  WorldOptions mc;
  mc.multicast = true;
  // A unicast world on the same devices plans like the reference.
  const auto unicast_plans = [](const Config& c) {
    GpuWorld world(c, on_device_zero(c.ranks));
    REQUIRE_FALSE(world.multicast());
    const Routing routing = make_routing(c, Shape::skew, 4);
    DeviceRouting dr(c, routing);
    REQUIRE(moonep::plan_difference(plan_world(world, dr), moonep::plan_reference(c, routing)) == "");
  };

  const Config two{2, 8, 2, 16, 2, 4};
  const Config one{1, 4, 2, 7, 2, 2};
#if MOONEP_HAVE_MULTICAST
  REQUIRE_THROWS_WITH(GpuWorld(two, on_device_zero(2), mc),
                      "moonep::cuda::GpuWorld: multicast needs every rank on its own device, but ranks 0 and 1 are "
                      "on device 0; no multicast object was created");
  unicast_plans(two);
#else
  const std::string not_built =
      "moonep::cuda::GpuWorld: this MoonEP was built without NVLink multicast (configure with "
      "-DMoonEP_ENABLE_MULTICAST=ON to build it); no multicast object was created";
  REQUIRE_THROWS_WITH(GpuWorld(two, on_device_zero(2), mc), not_built);
  unicast_plans(two);
  REQUIRE_THROWS_WITH(GpuWorld(one, on_device_zero(1), mc), not_built);
  unicast_plans(one);
#endif
}
