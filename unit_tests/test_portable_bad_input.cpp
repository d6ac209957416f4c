// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Bad input (docs/spec/planning.md "Bad input") is rejected with InputError
// naming the field, rank and index, and the planner plans correctly
// afterwards, on every planner variant (test_exec_spaces.hpp). The portable
// phases reject it before any rank touches the shared buffer — checked by
// filling the whole symmetric buffer with a sentinel first; the CUDA
// specialization keeps its own buffer and never allocates the world's.
#include "catch2_compat.hpp"

#include <functional>
#include <string>

#include "moonep/error.hpp"
#include "moonep/reference.hpp"
#include "support/ragged_steps.hpp"
#include "test_portable_support.hpp"

using namespace moonep;
using namespace moonep::test;

namespace {

constexpr std::int32_t kSentinel = 0x5eed5eed;

template <class Mem>
bool buffer_untouched(const InProcessWorld<Mem>& world) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), world.buffer());
  for (std::size_t i = 0; i < h.extent(0); ++i)
    if (h(i) != kSentinel) return false;
  return true;
}

Config base() {
  Config c;
  c.ranks = 4; c.experts = 16; c.topk = 3; c.tokens = 20; c.copy_slots = 2; c.token_padding = 4;
  return c;
}

// Runs `bad` (which must throw InputError mentioning `needle`) on a planner
// whose buffer holds only the sentinel; then plans a good step.
template <class P>
void expect_rejected(const std::function<void(P&)>& bad, const std::string& needle) {
  INFO(variant_name<P>());
  const Config c = base();
  InProcessWorld<typename P::memory_space> world(c.ranks);
  P planner(c, world);
  // A good step first, so that rejection also has to leave a used planner usable.
  const Routing first = make_routing(c, Shape::skewed, 3);
  REQUIRE(plan_difference(plan_reference(c, first), plan_with(planner, first)) == "");
  if (P::uses_cuda_specialization) {
    CHECK(world.buffer().extent(0) == 0);
  } else {
    Kokkos::deep_copy(world.buffer(), kSentinel);
  }
  std::string message;
  try {
    bad(planner);
  } catch (const InputError& e) {
    message = e.what();
  }
  INFO("message: " << message);
  REQUIRE(!message.empty());
  CHECK(message.find(needle) != std::string::npos);
  if (!P::uses_cuda_specialization) CHECK(buffer_untouched(world));
  const Routing good = make_routing(c, Shape::heavy_skew, 11);
  CHECK(plan_difference(plan_reference(c, good), plan_with(planner, good)) == "");
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("bad routing is rejected before the shared buffer is touched", "[portable]", PlannerVariants) {
  using P = TestType;
  const Config c = base();
  SECTION("expert id too large on rank 2") {
    expect_rejected<P>([&](P& p) {
      Routing r = make_routing(c, Shape::uniform, 1);
      r[2][17] = c.experts;
      plan_with(p, r);
    }, "routing[2][17]");
  }
  SECTION("negative expert id on rank 0") {
    expect_rejected<P>([&](P& p) {
      Routing r = make_routing(c, Shape::uniform, 1);
      r[0][0] = -1;
      plan_with(p, r);
    }, "routing[0][0]");
  }
  SECTION("routing of the wrong length on rank 3") {
    expect_rejected<P>([&](P& p) {
      Routing r = make_routing(c, Shape::uniform, 1);
      r[3].pop_back();
      plan_with(p, r);
    }, "routing[3] has");
  }
  SECTION("tokens_per_expert that does not match the routing") {
    expect_rejected<P>([&](P& p) {
      const Routing r = make_routing(c, Shape::uniform, 1);
      TokensPerExpert t = count_tokens_per_expert(c, r);
      t[1][5] += 1;
      plan_with(p, r, &t);
    }, "tokens_per_expert[1][5]");
  }
  SECTION("tokens_per_expert of the wrong length") {
    expect_rejected<P>([&](P& p) {
      const Routing r = make_routing(c, Shape::uniform, 1);
      TokensPerExpert t = count_tokens_per_expert(c, r);
      t[2].push_back(0);
      plan_with(p, r, &t);
    }, "tokens_per_expert[2] has");
  }
  SECTION("too few rank arrays") {
    expect_rejected<P>([&](P& p) {
      Routing r = make_routing(c, Shape::uniform, 1);
      r.pop_back();
      plan_with(p, r);
    }, "rank arrays");
  }
}

TEMPLATE_LIST_TEST_CASE("bad configurations are rejected by the constructor", "[portable]", PlannerVariants) {
  INFO(variant_name<TestType>());
  auto rejects = [](Config c, int world_ranks, const std::string& needle) {
    InProcessWorld<typename TestType::memory_space> world(world_ranks);
    std::string message;
    try {
      TestType planner(c, world);
    } catch (const InputError& e) {
      message = e.what();
    }
    INFO(describe(c) << " -> " << message);
    CHECK(message.find(needle) != std::string::npos);
  };
  Config c = base();
  { Config b = c; b.experts = 18; rejects(b, 4, "multiple of ranks"); }
  { Config b = c; b.copy_slots = 0; rejects(b, 4, "copy_slots"); }
  { Config b = c; b.topk = 33; rejects(b, 4, "topk"); }
  { Config b = c; b.topk = 0; rejects(b, 4, "topk"); }
  { Config b = c; b.ranks = 129; b.experts = 129; rejects(b, 129, "ranks"); }
  { Config b = c; b.token_padding = 0; rejects(b, 4, "token_padding"); }
  { Config b = c; b.ranks = 128; b.experts = 128; b.tokens = 1 << 20; b.topk = 32; rejects(b, 128, "int32"); }
  rejects(c, 2, "world has 2 ranks");
}

// Ragged steps (docs/spec/planning.md "Ragged steps"): a count outside 0..S,
// a routing view shorter than s_r*K (S*K for the CUDA specialization, whose
// kernel alone reads the counts), a counts view of the wrong length and
// tokens_per_expert that does not match the s_r*K ids are rejected like any
// bad input, naming field and rank (the portable phases before the shared
// buffer is touched; the CUDA specialization by its kernel's check).
TEMPLATE_LIST_TEST_CASE("bad ragged input is rejected before the shared buffer is touched", "[portable][ragged]",
                        PlannerVariants) {
  using P = TestType;
  const Config c = base();
  const Routing full = make_routing(c, Shape::uniform, 1);
  SECTION("a count above S on rank 2") {
    expect_rejected<P>([&](P& p) {
      const TokensPerRank t = {20, 0, 21, 5};
      Routing r = cut_to_tokens(c, full, {20, 0, 20, 5});
      plan_with(p, r, nullptr, &t);
    }, "tokens_per_rank[2] = 21 is outside 0..tokens = 0..20");
  }
  SECTION("a negative count on rank 1") {
    expect_rejected<P>([&](P& p) {
      const TokensPerRank t = {20, -1, 3, 5};
      plan_with(p, cut_to_tokens(c, full, {20, 0, 3, 5}), nullptr, &t);
    }, "tokens_per_rank[1] = -1 is outside 0..tokens = 0..20");
  }
  SECTION("a routing view too short on rank 3") {
    const TokensPerRank t = {20, 0, 3, 5};
    // Views of s_r*K ids on every path (the CUDA specialization's kernel
    // reads each view's length with the counts); rank 3's 3 short.
    Routing r = cut_to_tokens(c, full, t);
    r[3].resize(r[3].size() - 3);
    expect_rejected<P>([&](P& p) {
      const auto views = to_views<typename P::memory_space>(r);
      const auto counts = to_views<typename P::memory_space>({t});
      p.plan(views, nullptr, &counts[0]);
    }, "routing[3] has 12 entries, expected tokens_per_rank[3]*topk = 5*3 = 15");
  }
  SECTION("a counts view of the wrong length") {
    expect_rejected<P>([&](P& p) {
      const TokensPerRank t = {20, 0, 3};
      plan_with(p, full, nullptr, &t);
    }, "tokens_per_rank has 3 counts, expected ranks = 4");
  }
  SECTION("a bad expert id among the tokens rank 0 holds") {
    expect_rejected<P>([&](P& p) {
      const TokensPerRank t = {2, 0, 3, 5};
      Routing r = cut_to_tokens(c, full, t);
      r[0][5] = c.experts;
      plan_with(p, r, nullptr, &t);
    }, "routing[0][5] = 16 is not an expert id in [0, 16)");
  }
  SECTION("tokens_per_expert counting more than the s_r*K ids") {
    expect_rejected<P>([&](P& p) {
      const TokensPerRank t = {20, 0, 3, 5};
      const TokensPerExpert tpe = count_tokens_per_expert(c, full);
      plan_with(p, cut_to_tokens(c, full, t), &tpe, &t);
    }, "tokens_per_expert[1]");
  }
}
