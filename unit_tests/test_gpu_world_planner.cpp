// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Planner<Kokkos::Cuda, moonep::OnGpuWorld> (moonep/impl/gpu_world_planner.hpp)
// against the reference planner, bit for bit: every rank its own launch
// over a moonep::cuda::GpuWorld on the execution space's GPU, the plan views
// aliasing the world's outputs. Routing written on exec's stream just
// before plan(), unfenced (plan() must fork from that stream); reuse; ragged
// steps (the counts on the device, RankPlanView::entries from them); bad
// input (host facts and what only the kernel sees) with a good step after
// it; worlds the planner must refuse (another configuration, another
// device). Only in a build against a Kokkos with CUDA; skipped without a GPU.
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "catch2_compat.hpp"
#include "moonep/error.hpp"
#include "moonep/gpu_world.hpp"
#include "moonep/planner.hpp"
#include "moonep/reference.hpp"
#include "support/ragged_steps.hpp"
#include "test_portable_support.hpp"

namespace moonep::test::gpu_world_planner {

using P = Planner<Kokkos::Cuda, OnGpuWorld>;
using View = P::input_view;

std::vector<int> on_device(int ranks, int device) { return std::vector<int>(static_cast<std::size_t>(ranks), device); }

cuda::WorldOptions blocks(int bpr) {
  cuda::WorldOptions o;
  o.blocks_per_rank = bpr;
  return o;
}

// Copies of `rows` made by a kernel on exec's stream and not waited for:
// a plan() that did not start after exec's work would read them unwritten.
std::vector<View> written_on(const Kokkos::Cuda& exec, const std::vector<std::vector<std::int32_t>>& rows) {
  const auto staged = to_views<Kokkos::CudaSpace>(rows);  // fenced copies
  std::vector<View> out;
  for (const auto& s : staged) {
    Kokkos::View<std::int32_t*, Kokkos::CudaSpace> v(Kokkos::view_alloc(Kokkos::WithoutInitializing, "routing"),
                                                     s.extent(0));
    Kokkos::parallel_for("moonep_test::write_routing", Kokkos::RangePolicy<Kokkos::Cuda>(exec, 0, s.extent(0)),
                         KOKKOS_LAMBDA(const int i) { v(i) = s(i); });
    out.push_back(v);
  }
  return out;
}

// The planner's plan views in host memory.
HostPlan plan_of(const P& planner) { return to_host(planner); }

// One step; a ragged one (tokens given) with each rank's s_r*K ids padded
// to S*K (routing_for), the counts written on exec's stream too.
HostPlan plan_step(P& planner, const Kokkos::Cuda& exec, const Routing& routing,
                   const TokensPerExpert* tpe = nullptr, const TokensPerRank* tokens = nullptr) {
  const std::vector<View> r = written_on(exec, routing_for<P>(planner.config(), routing, tokens));
  const std::vector<View> t = tpe ? written_on(exec, *tpe) : std::vector<View>{};
  const std::vector<View> n = tokens ? written_on(exec, {*tokens}) : std::vector<View>{};
  planner.plan(r, tpe ? &t : nullptr, tokens ? &n[0] : nullptr);
  HostPlan out = plan_of(planner);
  if (tokens) out.tokens_per_rank = *tokens;
  return out;
}

// RankPlanView::entries of every rank after the last step, on the host.
std::vector<std::int32_t> entries_of(const P& planner) {
  std::vector<std::int32_t> out;
  for (const auto& rank : planner.last_plan().ranks) {
    std::int32_t n = -1;
    Kokkos::deep_copy(Kokkos::View<std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(&n, 1), rank.entries);
    out.push_back(n);
  }
  return out;
}

std::vector<std::int32_t> times_topk(const Config& c, const TokensPerRank& tokens) {
  std::vector<std::int32_t> out;
  for (const std::int32_t s : tokens) out.push_back(s * c.topk);
  return out;
}

}  // namespace moonep::test::gpu_world_planner

using namespace moonep;
using namespace moonep::test;
using namespace moonep::test::gpu_world_planner;

TEST_CASE("planner over a GPU world matches the reference on a randomized sweep", "[gpu_world][kokkos]") {
  const Kokkos::Cuda exec;
  Rng rng{20260518};
  const int bprs[] = {1, 4, 16, 32};
  for (int trial = 0; trial < 24; ++trial) {
    const int R = 1 + rng.below(8);
    const Config c = sweep_config(rng, trial, R, SweepShape{8, 7, 300, 9});
    const Shape shape = kShapes[trial % 6];
    const Routing a = make_routing(c, shape, rng.next()), b = make_routing(c, kShapes[(trial + 1) % 6], rng.next());
    cuda::GpuWorld world(c, on_device(R, exec.cuda_device()), blocks(bprs[trial % 4]));
    P planner(c, world, exec);
    INFO("trial " << trial << " " << describe(c) << " at blocks_per_rank " << world.blocks_per_rank());
    REQUIRE(std::string(P::path_name()) == "gpu_world");
    REQUIRE(planner.last_plan().ranks.size() == static_cast<std::size_t>(R));
    for (int r = 0; r < R; ++r) {  // views of the world's outputs, not copies
      REQUIRE(planner.last_plan().ranks[r].rank == r);
      REQUIRE(planner.last_plan().ranks[r].dst.data() == world.rank_plan(r).dst);
      REQUIRE(planner.last_plan().ranks[r].src_info.data() == world.rank_plan(r).src_info);
    }
    const TokensPerExpert tpe = count_tokens_per_expert(c, a);
    const bool with_tpe = trial % 3 == 0;
    REQUIRE(plan_difference(plan_reference(c, a), plan_step(planner, exec, a, with_tpe ? &tpe : nullptr)) == "");
    // The same planner, the next step.
    REQUIRE(plan_difference(plan_reference(c, b), plan_step(planner, exec, b)) == "");
    REQUIRE(entries_of(planner) == times_topk(c, TokensPerRank(static_cast<std::size_t>(R), c.tokens)));
    // And a ragged one (docs/spec/planning.md "Ragged steps"): rank r holds
    // the first s_r tokens of b, the counts with zeros and S among them.
    const TokensPerRank tokens = ragged_tokens(c, trial, rng);
    const Routing cut = cut_to_tokens(c, b, tokens);
    const TokensPerExpert cut_tpe = count_tokens_per_expert(c, cut);
    INFO("ragged step, tokens_per_rank " << ::Catch::Detail::stringify(tokens));
    REQUIRE(plan_difference(plan_reference(c, cut, nullptr, &tokens),
                            plan_step(planner, exec, cut, with_tpe ? &cut_tpe : nullptr, &tokens)) == "");
    REQUIRE(entries_of(planner) == times_topk(c, tokens));
  }
}

TEST_CASE("planner over a GPU world rejects bad input clearly and plans the next step", "[gpu_world][kokkos]") {
  const Kokkos::Cuda exec;
  const Config c{4, 16, 3, 20, 2, 4};
  cuda::GpuWorld world(c, on_device(c.ranks, exec.cuda_device()), blocks(4));
  P planner(c, world, exec);
  const Routing good = make_routing(c, Shape::skewed, 3), next = make_routing(c, Shape::heavy_skew, 11);
  REQUIRE(plan_difference(plan_reference(c, good), plan_step(planner, exec, good)) == "");
  const TokensPerExpert good_tpe = count_tokens_per_expert(c, good);

  // Each `bad` must throw E with exactly `message`; the next step plans.
  auto expect = [&](auto bad, auto error_tag, const std::string& message) {
    using E = decltype(error_tag);
    INFO("expected: " << message);
    std::string got;
    try {
      bad();
    } catch (const E& e) {
      got = e.what();
    }
    CHECK(got == message);
    CHECK(plan_difference(plan_reference(c, next), plan_step(planner, exec, next)) == "");
  };
  expect([&] {
    Routing r = good;
    r[2][17] = 16;
    plan_step(planner, exec, r);
  }, InputError(""), "routing[2][17] = 16 is not an expert id in [0, 16)");
  expect([&] {
    Routing r = good;
    r[0][0] = -1;
    plan_step(planner, exec, r);
  }, InputError(""), "routing[0][0] = -1 is not an expert id in [0, 16)");
  expect([&] {
    Routing r(good.begin(), good.begin() + 3);
    plan_step(planner, exec, r);
  }, InputError(""), "routing has 3 rank arrays, expected this process's 4 local ranks");
  expect([&] {
    Routing r = good;
    r[1].pop_back();
    plan_step(planner, exec, r);
  }, InputError(""), "routing[1] has 59 entries, expected tokens*topk = 20*3 = 60");
  expect([&] {
    TokensPerExpert t = good_tpe;
    t[3][5] += 2;
    plan_step(planner, exec, good, &t);
  }, InputError(""), "tokens_per_expert[3][5] = " + std::to_string(good_tpe[3][5] + 2) + " but routing[3] names expert 5 " +
                         std::to_string(good_tpe[3][5]) + " times");
  expect([&] {
    TokensPerExpert t = good_tpe;
    t[2].pop_back();
    plan_step(planner, exec, good, &t);
  }, InputError(""), "tokens_per_expert[2] has 15 counts, expected experts = 16");
  expect([&] {
    const TokensPerRank t = {20, 20, 21, 20};
    plan_step(planner, exec, good, nullptr, &t);
  }, InputError(""), "tokens_per_rank[2] = 21 is outside 0..tokens = 0..20");
  expect([&] {
    const TokensPerRank t = {20, -1, 3, 5};
    plan_step(planner, exec, cut_to_tokens(c, good, {20, 0, 3, 5}), nullptr, &t);
  }, InputError(""), "tokens_per_rank[1] = -1 is outside 0..tokens = 0..20");
  expect([&] {
    const TokensPerRank t = {20, 0, 3};
    plan_step(planner, exec, good, nullptr, &t);
  }, InputError(""), "tokens_per_rank has 3 counts, expected ranks = 4");
  expect([&] {
    // Views of s_r*K ids plan a ragged step (below); rank 3's is 3 short.
    const TokensPerRank t = {20, 0, 3, 5};
    Routing cut = cut_to_tokens(c, good, t);
    cut[3].resize(cut[3].size() - 3);
    const std::vector<View> short_routing = written_on(exec, cut);
    const std::vector<View> n = written_on(exec, {t});
    planner.plan(short_routing, nullptr, &n[0]);
  }, InputError(""), "routing[3] has 12 entries, expected tokens_per_rank[3]*topk = 5*3 = 15");
  // A ragged step plans (the counts read by the kernels alone); counts of S
  // on every rank are a full step.
  const TokensPerRank t = {20, 0, 3, 5};
  const Routing cut = cut_to_tokens(c, good, t);
  CHECK(plan_difference(plan_reference(c, cut, nullptr, &t), plan_step(planner, exec, cut, nullptr, &t)) == "");
  CHECK(entries_of(planner) == times_topk(c, t));
  const TokensPerRank all(4, 20);
  CHECK(plan_difference(plan_reference(c, good), plan_step(planner, exec, good, &good_tpe, &all)) == "");
  CHECK(entries_of(planner) == times_topk(c, all));
}

TEST_CASE("planner over a GPU world refuses a world it cannot plan", "[gpu_world][kokkos]") {
  const Kokkos::Cuda exec;
  const int here = exec.cuda_device();
  const Config c{4, 16, 2, 32, 2, 4};
  cuda::GpuWorld world(c, on_device(c.ranks, here), blocks(4));
  Config other = c;
  other.tokens = 33;
  REQUIRE_THROWS_WITH(P(other, world, exec),
                      "Planner<Kokkos::Cuda, moonep::OnGpuWorld>: the GPU world was made for " + describe(c) +
                          ", not " + describe(other));
  Config fewer = c;
  fewer.ranks = 2;
  fewer.experts = 8;
  REQUIRE_THROWS_WITH(P(fewer, world, exec), "the world has 4 ranks but the config says ranks = 2");

  int n = 0;
  REQUIRE(cudaGetDeviceCount(&n) == cudaSuccess);
  if (n < 2) {
    WARN("one GPU visible: the refusal of an execution space on another device needs two");
  } else {
    // The step forks from the execution space's stream, which must be on
    // the device of the world's first rank.
    const int there = (here + 1) % n;
    cuda::GpuWorld elsewhere(c, on_device(c.ranks, there), blocks(4));
    REQUIRE_THROWS_WITH(P(c, elsewhere, exec),
                        "Planner<Kokkos::Cuda, moonep::OnGpuWorld>: the execution space is on CUDA device " +
                            std::to_string(here) + " but the world's first rank of this process (0) is on CUDA "
                            "device " + std::to_string(there) + "; the step forks from a stream of that device");
  }
  // The refusals left the world usable: a planner over it plans.
  P planner(c, world, exec);
  const Routing r = make_routing(c, Shape::random_dups, 5);
  REQUIRE(plan_difference(plan_reference(c, r), plan_step(planner, exec, r)) == "");
}
