// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The portable fetch and reduce (moonep/expert_copies.hpp,
// InProcessExpertCopies) on every host execution space against
// fetch_reference and reduce_reference, bit for bit (float, double and
// bfloat16, moonep::bf16: copies as bits, reduce in float rounded once): copies are the owners'
// bits and unused slots stay untouched; reduce adds in increasing rank then
// slot (a case where another order gives other bits); the refusal of a
// plan with a remote expert that is not copied, with nothing written;
// views of the wrong extents; and what a call costs besides its kernels.
#include "catch2_compat.hpp"

#include <string>
#include <utility>
#include <vector>

#include "moonep/expert_copies.hpp"
#include "support/kokkos_counts.hpp"
#include "support/layer_cases.hpp"
#include "support/layer_views.hpp"

using namespace layer_test;

namespace {

constexpr int kParams = 5;

template <class T, class P>
void copies_case(const std::string& name, const Step& s, Values values) {
  using Exec = typename P::execution_space;
  using Mem = typename P::memory_space;
  INFO(name << (values == Values::exact ? ", exact data" : ", random data"));
  const Config& c = s.c;
  const int epn = c.experts_per_rank(), B = c.copy_slots;
  moonep::InProcessWorld<Mem> world(c.ranks);
  P planner(c, world);
  REQUIRE(plan_step(planner, s) == "");
  Draw draw(values, 17);
  const std::vector<std::int32_t> all_e(c.ranks, epn), all_b(c.ranks, B);
  const PerRank<T> own = rows_of<T>(c, epn, kParams, all_e, draw);
  PerRank<T> copies = filled<T>(c, B * kParams, kSentinel);
  moonep::fetch_reference(s.plan, kParams, own, copies);
  moonep::InProcessExpertCopies<T, Exec> ops(c, kParams);
  const auto copies_v = to_view<T, Mem>(filled<T>(c, B * kParams, kSentinel), B, kParams);
  ops.fetch(planner.last_plan(), to_view<T, Mem>(own, epn, kParams), copies_v);
  Kokkos::fence();
  CHECK(from_view(copies_v) == copies);

  const PerRank<T> grad_copies = rows_of<T>(c, B, kParams, all_b, draw);
  PerRank<T> grad_own = rows_of<T>(c, epn, kParams, all_e, draw);
  const auto grad_own_v = to_view<T, Mem>(grad_own, epn, kParams);
  moonep::reduce_reference(s.plan, kParams, grad_copies, grad_own);
  ops.reduce(planner.last_plan(), to_view<T, Mem>(grad_copies, B, kParams), grad_own_v);
  Kokkos::fence();
  CHECK(from_view(grad_own_v) == grad_own);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("the portable fetch and reduce match the reference bit for bit", "[layer][portable]",
                        moonep::test::PortableVariants) {
  INFO(moonep::test::variant_name<TestType>());
  std::vector<std::pair<std::string, Step>> steps = layer_steps();
  steps.emplace_back("copied to every rank", copy_everywhere_step());
  steps.emplace_back("B < epn copying everything", synthetic_step(Config{4, 16, 3, 12, 2, 2}, 0.5, 22, false));
  for (const auto& [name, step] : steps)
    for (const Values v : {Values::exact, Values::random}) {
      copies_case<float, TestType>(name, step, v);
      copies_case<double, TestType>(name, step, v);
      copies_case<moonep::bf16, TestType>(name, step, v);
    }
}

TEMPLATE_LIST_TEST_CASE("the portable reduce adds in increasing rank, then slot", "[layer][portable]",
                        moonep::test::PortableVariants) {
  using Exec = typename TestType::execution_space;
  using Mem = typename TestType::memory_space;
  const Step s = copy_everywhere_step();
  moonep::InProcessWorld<Mem> world(4);
  TestType planner(s.c, world);
  REQUIRE(plan_step(planner, s) == "");
  // gP = 1, copies of expert 0 on ranks 1, 2, 3: 2^24, -2^24, 0. In
  // increasing d (1 + 2^24) rounds to 2^24, then 0, then 0; decreasing d
  // would give 1. Experts 1-3 have no copies and keep their bits.
  const auto gp = to_view<float, Mem>(PerRank<float>{{1.0f}, {5.0f}, {6.0f}, {7.0f}}, 1, 1);
  moonep::InProcessExpertCopies<float, Exec> ops(s.c, 1);
  ops.reduce(planner.last_plan(), to_view<float, Mem>(PerRank<float>{{3.0f}, {16777216.0f}, {-16777216.0f}, {0.0f}}, 1, 1),
             gp);
  Kokkos::fence();
  CHECK(from_view(gp) == PerRank<float>{{0.0f}, {5.0f}, {6.0f}, {7.0f}});
}

TEMPLATE_LIST_TEST_CASE("the portable bf16 reduce sums in float and rounds once, to nearest even",
                        "[layer][portable]", moonep::test::PortableVariants) {
  // gP = 1, copies of expert 0 on ranks 1, 2, 3 each 2^-9: 1 + 3*2^-9 in
  // float rounds to 1 + 2^-7 (0x3f81); rounded after each addition it would
  // stay 1. Expert 1's gradient 1 + 2^-7 (no copies) keeps its bits.
  using Exec = typename TestType::execution_space;
  using Mem = typename TestType::memory_space;
  using moonep::bf16;
  const Step s = copy_everywhere_step();
  moonep::InProcessWorld<Mem> world(4);
  TestType planner(s.c, world);
  REQUIRE(plan_step(planner, s) == "");
  const bf16 one = bf16::from_bits(0x3f80), small = bf16(0x1p-9f), zero = bf16(0.0f);
  const PerRank<bf16> grad_copies = {{zero}, {small}, {small}, {small}};
  PerRank<bf16> want = {{one}, {bf16::from_bits(0x3f81)}, {one}, {one}};
  moonep::InProcessExpertCopies<bf16, Exec> ops(s.c, 1);
  const auto gp = to_view<bf16, Mem>(want, 1, 1);
  moonep::reduce_reference(s.plan, 1, grad_copies, want);
  REQUIRE(want[0][0].bits == 0x3f81);
  ops.reduce(planner.last_plan(), to_view<bf16, Mem>(grad_copies, 1, 1), gp);
  Kokkos::fence();
  CHECK(from_view(gp) == want);
}

TEMPLATE_LIST_TEST_CASE("the portable fetch and reduce refuse a remote expert without a copy, and bad views",
                        "[layer][portable]", moonep::test::PortableVariants) {
  using Exec = typename TestType::execution_space;
  using Mem = typename TestType::memory_space;
  const Step s = uncopied_remote_step();
  const Config& c = s.c;
  moonep::InProcessWorld<Mem> world(c.ranks);
  TestType planner(c, world);
  REQUIRE(plan_step(planner, s) == "");
  const PerRank<float> own_host = filled<float>(c, 3, 1), copies_host = filled<float>(c, 1, 9);
  const std::string want = uncopied_remote_error();
  REQUIRE(want.find("rank 1 would run expert 1 ") != std::string::npos);
  moonep::InProcessExpertCopies<float, Exec> ops(c, 1);
  const auto own = to_view<float, Mem>(own_host, 3, 1);
  const auto copies = to_view<float, Mem>(copies_host, 1, 1);
  CHECK(input_error([&] { ops.fetch(planner.last_plan(), own, copies); }) == want);
  CHECK(input_error([&] { ops.reduce(planner.last_plan(), copies, own); }) == want);
  CHECK(input_error([&] { ops.check_runnable(planner.last_plan()); }) == want);
  Kokkos::fence();
  CHECK(from_view(copies) == copies_host);
  CHECK(from_view(own) == own_host);

  // Views of other extents and plans of other configurations, on a plan
  // that runs (B = epn).
  const Step ok = synthetic_step(Config{2, 4, 2, 3, 2, 1}, 1.0, 6, false);
  moonep::InProcessWorld<Mem> world2(ok.c.ranks);
  TestType planner2(ok.c, world2);
  moonep::test::plan_with(planner2, ok.routing);
  moonep::InProcessExpertCopies<float, Exec> ops2(ok.c, 3);
  Kokkos::View<float***, Kokkos::LayoutRight, Mem> p("P", 2, 2, 3), p4("P4", 2, 2, 4), cp("copies", 2, 2, 3);
  CHECK(input_error([&] { ops2.fetch(planner2.last_plan(), p4, cp); }) ==
        "fetch: P is [2][2][4], expected [R][epn][Q] = [2][2][3]");
  CHECK(input_error([&] { ops2.reduce(planner2.last_plan(), p4, p); }) ==
        "reduce: grad_copies is [2][2][4], expected [R][B][Q] = [2][2][3]");
  CHECK(input_error([&] { ops2.fetch(planner.last_plan(), p, cp); }).find("fetch: the plan is of ") == 0);
  CHECK(input_error([&] { moonep::InProcessExpertCopies<float, Exec>(ok.c, 0); }) ==
        "InProcessExpertCopies: Q must be at least 1, got 0");
}

TEMPLATE_LIST_TEST_CASE("the portable fetch and reduce read the plan on the host only when B < epn, in one copy",
                        "[layer][portable]", moonep::test::PortableVariants) {
  // B >= epn: kernels only. B < epn: the check that no rank would run a
  // remote expert without a copy reads every rank's group sizes, one copy
  // of the planner's back-to-back tables. Never an allocation.
  INFO(moonep::test::variant_name<TestType>());
  using Exec = typename TestType::execution_space;
  using Mem = typename TestType::memory_space;
  for (const Step& s : {synthetic_step(Config{4, 16, 4, 12, 4, 4}, 2.0, 21, false),
                        synthetic_step(Config{4, 16, 3, 12, 2, 2}, 0.5, 22, false)}) {
    const Config& c = s.c;
    const bool reads = c.copy_slots < c.experts_per_rank();
    INFO("B=" << c.copy_slots << " epn=" << c.experts_per_rank());
    moonep::InProcessWorld<Mem> world(c.ranks);
    TestType planner(c, world);
    REQUIRE(plan_step(planner, s) == "");
    moonep::InProcessExpertCopies<float, Exec> ops(c, kParams);
    Kokkos::View<float***, Kokkos::LayoutRight, Mem> own("own", c.ranks, c.experts_per_rank(), kParams);
    Kokkos::View<float***, Kokkos::LayoutRight, Mem> copies("copies", c.ranks, c.copy_slots, kParams);
    ops.fetch(planner.last_plan(), own, copies);
    ops.reduce(planner.last_plan(), copies, own);
    Kokkos::fence();
    moonep::test::CountKokkos count;
    ops.fetch(planner.last_plan(), own, copies);
    ops.reduce(planner.last_plan(), copies, own);
    const moonep::test::KokkosCounts n = count.stop();
    Kokkos::fence();
    CHECK(n.launches == 2 * c.ranks);
    CHECK(n.deep_copies == (reads ? 2 : 0));
    CHECK(n.allocations == 0);
    CHECK(n.deallocations == 0);
  }
}
