// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The CUDA planner against the reference planner, bit for bit (dup
// structures as sets): a randomized sweep over R, E, S, K, B, tp and every
// routing shape; repeated runs; reuse across steps; bad input on the device;
// ragged steps (docs/spec/planning.md "Ragged steps": counts in device
// memory, read by the kernel), and one captured CUDA graph replayed over
// new counts and routing.
// Tests tagged [sanitize] are small and are the ones gpu_checks.sh runs under
// compute-sanitizer.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "catch2_compat.hpp"
#include "moonep/backend.hpp"
#include "moonep/cuda_planner.hpp"
#include "moonep/error.hpp"
#include "moonep/reference.hpp"
#include "moonep/synthetic.hpp"
#include "support/cuda_test_support.hpp"
#include "bench_access.hpp"

namespace {

using moonep::Config;
using moonep::Routing;
using moonep::cuda::Kernel;
using namespace moonep::test;

moonep::HostPlan plan_on_gpu(moonep::cuda::VirtualRankPlanner& planner, const DeviceRouting& dr) {
  planner.plan(dr.topk(), dr.tpe(), nullptr);
  moonep::HostPlan plan = planner.copy_out(nullptr);
  require_entries(planner.config(), {}, [&](int r) { return planner.rank_plan(r); });
  return plan;
}

// A planner with the blocks per rank and kernel given (every test that
// forces a kernel runs with both).
moonep::cuda::VirtualRankPlanner planner_with(const Config& c, Kernel kernel,
                                   int bpr = moonep::cuda::Options().blocks_per_rank) {
  moonep::cuda::Options opt;
  opt.blocks_per_rank = bpr;
  opt.kernel = kernel;
  return moonep::cuda::VirtualRankPlanner(c, opt);
}

// Plans with the GPU and the reference and requires identical plans, with
// the tables where the planner puts them (shared memory wherever they fit)
// and again with global tables forced, so both placements see every case.
void require_matches_reference(const Config& c, const Routing& routing, int bpr, const std::string& what) {
  const moonep::HostPlan ref = moonep::plan_reference(c, routing);
  DeviceRouting dr(c, routing);
  for (const Kernel kernel : {Kernel::automatic, Kernel::global_tables}) {
    moonep::cuda::VirtualRankPlanner planner = planner_with(c, kernel, bpr);
    INFO(what << " " << moonep::describe(c) << " blocks_per_rank=" << bpr << " kernel "
              << moonep::cuda::kernel_name(planner.kernel()) << " at blocks_per_rank "
              << planner.blocks_per_rank());
    REQUIRE(planner.kernel() != Kernel::automatic);
    const moonep::HostPlan gpu = plan_on_gpu(planner, dr);
    REQUIRE(moonep::plan_difference(gpu, ref) == "");
  }
}

// A ragged step (rank r holds the first tokens[r] tokens of `full`): the
// routing buffers hold S*K ids, those past s_r*K no expert (padded_to_full:
// a kernel reading one fails the step), and the counts are in device
// memory. Required identical to the reference for the counts, with both
// kernels as in require_matches_reference.
void require_ragged_matches_reference(const Config& c, const Routing& full, const moonep::TokensPerRank& tokens,
                                      int bpr, const std::string& what) {
  const Routing cut = cut_to_tokens(c, full, tokens);
  const moonep::HostPlan ref = moonep::plan_reference(c, cut, nullptr, &tokens);
  DeviceRouting dr(c, padded_to_full(c, cut));
  const DeviceCounts counts(c, tokens);
  for (const Kernel kernel : {Kernel::automatic, Kernel::global_tables}) {
    moonep::cuda::VirtualRankPlanner planner = planner_with(c, kernel, bpr);
    INFO(what << " " << moonep::describe(c) << " tokens_per_rank " << ::Catch::Detail::stringify(tokens)
              << " kernel " << moonep::cuda::kernel_name(planner.kernel()) << " at blocks_per_rank "
              << planner.blocks_per_rank());
    planner.plan(dr.topk(), nullptr, nullptr, counts.data());
    const moonep::HostPlan gpu = planner.copy_out(nullptr);
    REQUIRE(gpu.tokens_per_rank == std::optional<moonep::TokensPerRank>(tokens));
    REQUIRE(moonep::plan_difference(gpu, ref) == "");
    require_entries(c, tokens, [&](int r) { return planner.rank_plan(r); });
  }
}

// One random shape of the sweeps (R 1..16, E <= 1024, K 1..32, S up to
// 16384, every tp and routing shape, default or few blocks per rank), or
// false for a draw past the sweeps' size limits (the caller draws again).
struct SweepPoint {
  Config c;
  Shape shape;
  int bpr;
};
bool draw_sweep_point(std::mt19937_64& rng, SweepPoint& out) {
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<uint64_t>(hi - lo + 1)); };
  const int tps[] = {1, 2, 3, 8, 16, 64, 128};
  const Shape shapes[] = {Shape::uniform, Shape::skew, Shape::heavy, Shape::one_expert,
                          Shape::same_expert_k_times, Shape::repeats, Shape::owner_zero};
  const int R = pick(1, 16);
  const int epn = std::max(1, (1 << pick(0, 7)) * pick(1, 3) / 2);
  if (R * epn > 1024) return false;
  const int K = pick(0, 3) == 0 ? pick(1, 32) : pick(1, 8);
  const int S = std::max(1, (1 << pick(0, 14)) - pick(0, 3));
  if (static_cast<int64_t>(R) * S * K > (1 << 20)) return false;
  out.c = Config{R, R * epn, K, S, pick(1, 40), tps[pick(0, 6)]};
  out.shape = shapes[pick(0, 6)];
  out.bpr = pick(0, 2) == 0 ? pick(1, 8) : 32;
  return true;
}

}  // namespace

TEST_CASE("cuda planner matches the reference on small hand-picked shapes", "[cuda][sanitize]") {
  struct Case { Config c; Shape shape; int bpr; };
  const std::vector<Case> cases = {
      {Config{2, 8, 2, 16, 2, 4}, Shape::skew, 4},
      {Config{3, 12, 4, 33, 3, 1}, Shape::repeats, 2},
      {Config{4, 8, 3, 20, 5, 2}, Shape::one_expert, 1},
      {Config{2, 4, 4, 9, 1, 3}, Shape::same_expert_k_times, 3},
      {Config{1, 4, 2, 7, 2, 2}, Shape::uniform, 2},
  };
  for (const auto& k : cases) {
    require_matches_reference(k.c, make_routing(k.c, k.shape, 7), k.bpr, name(k.shape));
  }
}

TEST_CASE("cuda planner: a bad expert id is an InputError and the planner stays usable",
          "[cuda][sanitize]") {
  const Config c = Config{3, 12, 4, 40, 2, 4};
  const Kernel kernel = GENERATE(Kernel::shared_tables, Kernel::global_tables);
  INFO("kernel " << moonep::cuda::kernel_name(kernel));
  moonep::cuda::VirtualRankPlanner planner = planner_with(c, kernel, 4);
  REQUIRE(planner.kernel() == kernel);
  const Routing good = make_routing(c, Shape::skew, 3);
  DeviceRouting dr(c, good);
  dr.set(2, 17, 300);
  planner.plan(dr.topk(), nullptr, nullptr);
  try {
    planner.check(nullptr);
    FAIL("no error for a bad expert id");
  } catch (const moonep::InputError& e) {
    REQUIRE(std::string(e.what()) == "routing[2][17] = 300 is not an expert id in [0, 12)");
  }
  dr.set(1, 0, -1);
  dr.set(2, 17, good[2][17]);
  planner.plan(dr.topk(), nullptr, nullptr);
  REQUIRE_THROWS_WITH(planner.check(nullptr), "routing[1][0] = -1 is not an expert id in [0, 12)");
  // Repaired: the next step is a correct plan.
  dr.set(1, 0, good[1][0]);
  const moonep::HostPlan gpu = plan_on_gpu(planner, dr);
  REQUIRE(moonep::plan_difference(gpu, moonep::plan_reference(c, good)) == "");
}

TEST_CASE("cuda planner checks a given tokens_per_expert", "[cuda][sanitize]") {
  const Config c = Config{2, 8, 2, 30, 2, 2};
  const Routing routing = make_routing(c, Shape::skew, 5);
  moonep::TokensPerExpert tpe = moonep::count_tokens_per_expert(c, routing);
  const Kernel kernel = GENERATE(Kernel::shared_tables, Kernel::global_tables);
  INFO("kernel " << moonep::cuda::kernel_name(kernel));
  moonep::cuda::VirtualRankPlanner planner = planner_with(c, kernel, 3);
  REQUIRE(planner.kernel() == kernel);
  {
    DeviceRouting dr(c, routing, &tpe);
    REQUIRE(moonep::plan_difference(plan_on_gpu(planner, dr), moonep::plan_reference(c, routing)) == "");
  }
  tpe[1][3] += 1;
  {
    DeviceRouting dr(c, routing, &tpe);
    planner.plan(dr.topk(), dr.tpe(), nullptr);
    std::ostringstream want;
    want << "tokens_per_expert[1][3] = " << tpe[1][3] << " but routing[1] names expert 3 " << tpe[1][3] - 1
         << " times";
    REQUIRE_THROWS_WITH(planner.check(nullptr), want.str());
  }
}

TEST_CASE("cuda planner matches the reference on the spec's corner cases", "[cuda]") {
  struct Case { Config c; Shape shape; const char* why; };
  const std::vector<Case> cases = {
      {Config{8, 256, 8, 4096, 32, 128}, Shape::skew, "headline"},
      {Config{8, 64, 8, 512, 200, 8}, Shape::heavy, "B larger than remote experts"},
      {Config{4, 64, 6, 300, 4, 1}, Shape::skew, "tp = 1"},
      {Config{5, 20, 3, 1, 2, 4}, Shape::repeats, "S = 1"},
      {Config{6, 48, 1, 700, 3, 16}, Shape::heavy, "K = 1"},
      {Config{8, 8, 4, 333, 2, 8}, Shape::skew, "E = R"},
      {Config{16, 16, 32, 64, 1, 2}, Shape::repeats, "E = R, K = 32"},
      {Config{8, 256, 8, 1024, 8, 16}, Shape::one_expert, "all entries on one expert"},
      {Config{4, 32, 8, 512, 4, 8}, Shape::same_expert_k_times, "a token names one expert K times"},
      {Config{16, 1024, 8, 2048, 32, 128}, Shape::skew, "E = 1024"},
      {Config{2, 16, 32, 16384, 4, 64}, Shape::heavy, "S = 16384, K = 32"},
      {Config{8, 64, 8, 1000, 4, 32}, Shape::owner_zero, "everything on rank 0's experts"},
  };
  for (const auto& k : cases) {
    for (int bpr : {32, 5}) require_matches_reference(k.c, make_routing(k.c, k.shape, 11), bpr, k.why);
  }
}

TEST_CASE("cuda planner matches the reference on a randomized sweep", "[cuda]") {
  std::mt19937_64 rng(20261202);
  int done = 0;
  for (int trial = 0; trial < 400 && done < 300; ++trial) {
    SweepPoint pt;
    if (!draw_sweep_point(rng, pt)) continue;
    require_matches_reference(pt.c, make_routing(pt.c, pt.shape, rng()), pt.bpr, name(pt.shape));
    ++done;
  }
  REQUIRE(done >= 250);
}

TEST_CASE("cuda planner: repeated runs and reuse across steps give the reference plan", "[cuda]") {
  const Config c = Config{8, 128, 8, 2048, 16, 64};
  const Kernel kernel = GENERATE(Kernel::shared_tables, Kernel::global_tables);
  INFO("kernel " << moonep::cuda::kernel_name(kernel));
  moonep::cuda::VirtualRankPlanner planner = planner_with(c, kernel);
  const Routing a = make_routing(c, Shape::skew, 1);
  const Routing b = make_routing(c, Shape::heavy, 2);
  const moonep::HostPlan ref_a = moonep::plan_reference(c, a), ref_b = moonep::plan_reference(c, b);
  DeviceRouting da(c, a), db(c, b);
  const moonep::HostPlan first = plan_on_gpu(planner, da);
  REQUIRE(moonep::plan_difference(first, ref_a) == "");
  for (int step = 0; step < 20; ++step) {
    // Many steps back to back without a host sync in between.
    for (int i = 0; i < 5; ++i) planner.plan((step % 2 ? db : da).topk(), nullptr, nullptr);
    const moonep::HostPlan got = planner.copy_out(nullptr);
    REQUIRE(moonep::plan_difference(got, step % 2 ? ref_b : ref_a) == "");
  }
  REQUIRE(moonep::plan_difference(plan_on_gpu(planner, da), first) == "");
}

TEST_CASE("cuda planner plans small ragged steps like the reference", "[cuda][ragged][sanitize]") {
  std::vector<RaggedCase> cases = small_ragged_cases();
  cases.push_back({Config{1, 4, 2, 7, 2, 2}, Shape::uniform, 2, {4}});
  for (const auto& k : cases) {
    require_ragged_matches_reference(k.c, make_routing(k.c, k.shape, 7), k.tokens, k.bpr, name(k.shape));
  }
}

TEST_CASE("cuda planner matches the reference on a randomized sweep of ragged steps", "[cuda][ragged]") {
  std::mt19937_64 rng(20261205);
  moonep::impl::SplitMix64 counts_rng{20261205};
  int done = 0, empty_ranks = 0, full_ranks = 0;
  for (int trial = 0; trial < 300 && done < 150; ++trial) {
    SweepPoint pt;
    if (!draw_sweep_point(rng, pt)) continue;
    const Config& c = pt.c;
    // Every other step has both extremes; the others cycle through
    // ragged_tokens' shapes (random with zeros and S, one rank full, one
    // empty, all empty, none or one token, all full).
    const moonep::TokensPerRank tokens = done % 2 ? ragged_tokens_with_extremes(c, rng())
                                                  : ragged_tokens(c, done / 2, counts_rng);
    require_ragged_matches_reference(c, make_routing(c, pt.shape, rng()), tokens, pt.bpr, name(pt.shape));
    for (const auto s : tokens) {
      empty_ranks += s == 0;
      full_ranks += s == c.tokens;
    }
    ++done;
  }
  REQUIRE(done >= 120);
  CHECK(empty_ranks > 100);
  CHECK(full_ranks > 100);
}

TEST_CASE("cuda planner: a count outside 0..S is an InputError and the planner stays usable",
          "[cuda][ragged][sanitize]") {
  const Config c = Config{3, 12, 4, 40, 2, 4};
  const Kernel kernel = GENERATE(Kernel::shared_tables, Kernel::global_tables);
  INFO("kernel " << moonep::cuda::kernel_name(kernel));
  moonep::cuda::VirtualRankPlanner planner = planner_with(c, kernel, 4);
  REQUIRE(planner.kernel() == kernel);
  const Routing full = make_routing(c, Shape::skew, 3);
  const moonep::TokensPerRank good = {40, 0, 17};
  const Routing cut = cut_to_tokens(c, full, good);
  DeviceRouting dr(c, padded_to_full(c, cut));
  DeviceCounts counts(c.ranks);
  counts.write({40, -1, 17});
  planner.plan(dr.topk(), nullptr, nullptr, counts.data());
  REQUIRE_THROWS_WITH(planner.check(nullptr), "tokens_per_rank[1] = -1 is outside 0..tokens = 0..40");
  counts.write({40, 0, 41});
  planner.plan(dr.topk(), nullptr, nullptr, counts.data());
  REQUIRE_THROWS_WITH(planner.check(nullptr), "tokens_per_rank[2] = 41 is outside 0..tokens = 0..40");
  // Repaired: the next step is a correct plan, and a full one after it.
  counts.write(good);
  planner.plan(dr.topk(), nullptr, nullptr, counts.data());
  REQUIRE(moonep::plan_difference(planner.copy_out(nullptr), moonep::plan_reference(c, cut, nullptr, &good)) == "");
  dr.write(full);
  REQUIRE(moonep::plan_difference(plan_on_gpu(planner, dr), moonep::plan_reference(c, full)) == "");
}

// The point of reading the counts on the device: planner.plan() captured
// once into a CUDA graph on a non-default stream replays steps of any
// counts. Between replays only the contents of the same device buffers
// change (counts and routing); each replay's plan is the reference's for
// its counts.
TEST_CASE("cuda planner: one captured CUDA graph replays steps of any counts", "[cuda][ragged]") {
  const Config c{8, 256, 8, 4096, 32, 128};
  const Kernel kernel = GENERATE(Kernel::automatic, Kernel::global_tables);
  moonep::cuda::VirtualRankPlanner planner = planner_with(c, kernel);
  INFO("kernel " << moonep::cuda::kernel_name(planner.kernel()) << " at blocks_per_rank " << planner.blocks_per_rank());
  DeviceRouting live(c, make_routing(c, Shape::skew, 1));
  DeviceCounts counts(c, moonep::TokensPerRank(8, c.tokens));
  const CapturedGraph graph([&](cudaStream_t s) { planner.plan(live.topk(), nullptr, s, counts.data()); });
  require_graph_replays(c, graph, live, counts, 100, [&] { return planner.copy_out(graph.stream()); },
                        [&](int r) { return planner.rank_plan(r); });
}

TEST_CASE("cuda planner: the benchmark's floor launches complete and leave the plan alone", "[cuda][sanitize]") {
  const Config c = Config{4, 32, 4, 300, 4, 8};
  const Kernel kernel = GENERATE(Kernel::shared_tables, Kernel::global_tables);
  INFO("kernel " << moonep::cuda::kernel_name(kernel));
  moonep::cuda::VirtualRankPlanner planner = planner_with(c, kernel, 4);
  const Routing routing = make_routing(c, Shape::skew, 5);
  const moonep::HostPlan ref = moonep::plan_reference(c, routing);
  DeviceRouting dr(c, routing);
  REQUIRE(moonep::plan_difference(plan_on_gpu(planner, dr), ref) == "");
  // The barrier floor's counter resets itself: a second launch that found
  // it stale would never pass its barrier.
  moonep::cuda::impl::FloorLaunches floors(planner);
  for (int i = 0; i < 3; ++i) {
    floors.launch_empty(nullptr);
    floors.launch_barrier_floor(dr.topk(), nullptr);
  }
  cuda_ok(cudaDeviceSynchronize());
  REQUIRE(moonep::plan_difference(planner.copy_out(nullptr), ref) == "");
  // Null routing is refused before anything is launched or taken.
  REQUIRE_THROWS_AS(floors.launch_barrier_floor(nullptr, nullptr), moonep::InputError);
  std::vector<const int32_t*> holes(dr.topk(), dr.topk() + c.ranks);
  holes[2] = nullptr;
  REQUIRE_THROWS_WITH(floors.launch_barrier_floor(holes.data(), nullptr),
                      "moonep::cuda::impl::FloorLaunches::launch_barrier_floor: d_routing[2] is null");
  REQUIRE(moonep::plan_difference(plan_on_gpu(planner, dr), ref) == "");
}

TEST_CASE("cuda planner keeps its tables in shared memory where they fit, in global memory elsewhere",
          "[cuda]") {
  // The headline shape: shared tables, at the blocks asked for (32 by
  // default) or fewer: one block per SM, R*bpr blocks in all.
  const Config head{8, 256, 8, 4096, 32, 128};
  {
    int dev = 0, sms = 0;
    REQUIRE(cudaGetDevice(&dev) == cudaSuccess);
    REQUIRE(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess);
    moonep::cuda::VirtualRankPlanner planner(head);
    REQUIRE(planner.kernel() == Kernel::shared_tables);
    REQUIRE(planner.blocks_per_rank() == std::min(32, sms / head.ranks));
    REQUIRE(std::string(moonep::cuda::kernel_name(planner.kernel())) == "shared_tables");
  }
  // Tables of about (2R + 7) * E words, here about 580 KB, and (below)
  // about 1 MB: no block's shared memory holds them.
  for (const Config& wide : {Config{32, 2048, 2, 64, 2, 4}, Config{8, 8192, 2, 64, 4, 4}}) {
    INFO(moonep::describe(wide));
    moonep::cuda::VirtualRankPlanner planner(wide);
    REQUIRE(planner.kernel() == Kernel::global_tables);
    REQUIRE(std::string(moonep::cuda::kernel_name(planner.kernel())) == "global_tables");
    const Routing routing = make_routing(wide, Shape::skew, 4);
    DeviceRouting dr(wide, routing);
    REQUIRE(moonep::plan_difference(plan_on_gpu(planner, dr), moonep::plan_reference(wide, routing)) == "");
    std::string message;
    try {
      moonep::cuda::VirtualRankPlanner refused = planner_with(wide, Kernel::shared_tables);
    } catch (const moonep::RuntimeError& e) {
      message = e.what();
    }
    INFO(message);
    REQUIRE(message.find("shared tables cannot plan") != std::string::npos);
    REQUIRE(message.find("bytes of shared memory at one block per rank") != std::string::npos);
  }
}

TEST_CASE("cuda backend through the registry", "[cuda]") {
  std::string why;
  REQUIRE(moonep::backend_available(moonep::Backend::cuda, &why));
  const Config c = Config{4, 32, 4, 256, 4, 8};
  const Routing routing = make_routing(c, Shape::skew, 9);
  auto planner = moonep::make_host_planner(moonep::Backend::cuda, c);
  REQUIRE(planner->backend() == moonep::Backend::cuda);
  planner->load(routing);
  planner->step();
  REQUIRE(moonep::plan_difference(planner->result(), moonep::plan_reference(c, routing)) == "");
  // Host-side validation rejects a bad routing before it reaches the GPU.
  Routing bad = routing;
  bad[3][5] = 32;
  REQUIRE_THROWS_AS(planner->load(bad), moonep::InputError);
  planner->load(routing);
  planner->step();
  REQUIRE(moonep::plan_difference(planner->result(), moonep::plan_reference(c, routing)) == "");
  // A ragged step: each rank's s_r*K ids and the counts staged for the
  // kernel; the result carries the counts and dst cut to s_r*K.
  const moonep::TokensPerRank tokens = ragged_tokens_with_extremes(c, 3);
  const Routing cut = cut_to_tokens(c, routing, tokens);
  planner->load(cut, nullptr, &tokens);
  planner->step();
  const moonep::HostPlan ragged = planner->result();
  REQUIRE(ragged.tokens_per_rank == std::optional<moonep::TokensPerRank>(tokens));
  REQUIRE(moonep::plan_difference(ragged, moonep::plan_reference(c, cut, nullptr, &tokens)) == "");
  // A bad count is refused on the host, nothing staged; the next step plans.
  moonep::TokensPerRank bad_count = tokens;
  bad_count[1] = c.tokens + 1;
  REQUIRE_THROWS_WITH(planner->load(cut, nullptr, &bad_count), "tokens_per_rank[1] = 257 is outside 0..tokens = 0..256");
  planner->load(routing);
  planner->step();
  REQUIRE(moonep::plan_difference(planner->result(), moonep::plan_reference(c, routing)) == "");
}


// No test asks for NVLink multicast (the planners offer none): the
// project's rule is that tests, benchmarks and scripts never request it.
