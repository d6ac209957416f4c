// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The linear MoE layer through the library's operations
// (moonep/moe_layer.hpp, InProcessMoeLayer: plan, fetch, dispatch, one GEMM
// per group, combine, and the backward down to reduce) on every
// execution space, in float, double and bfloat16 (moonep::bf16, always the
// portable GEMM), and with both GEMMs (Kokkos Kernels where the build has
// it, the portable kernel), against the DIRECT layer (no plan; layer.md
// "The linear layer"): out, gx, gw and every expert's gradient; exact data
// (quarters: every sum exact, so the results are the direct values' bits)
// and random data (tolerance); full and ragged steps (rows past s_r NaN,
// rows of out and gx past s_r untouched), R = 1, B = epn, a smaller B
// that still copies everything, copies on every rank; the refusal of
// a plan it cannot run, with nothing written; and what a step costs besides
// its kernels.
#include "catch2_compat.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "moonep/moe_layer.hpp"
#include "support/kokkos_counts.hpp"
#include "support/layer_cases.hpp"
#include "support/layer_views.hpp"

using namespace layer_test;

namespace {

constexpr int kHidden = 4, kOut = 3;

// got equals the direct value: its bits when exact in float or double (a
// zero of either sign for a zero: the order of exact sums decides the
// sign), else within tol. A bfloat16 layer (every value,
// its float weight gradients too) is compared within tol * max(1, |want|), on exact
// data as well (as test_mpi_moe_layer): the layer rounds its intermediate
// rows (y, grad_y, grad_recv) to bf16, as the contract says, and the direct
// layer does not; the bf16 operations are checked bit for bit against the
// reference in test_layer_portable and test_expert_copies.
template <class V>
bool matches(V got, double want, Values values, double tol, bool bits_when_exact) {
  if (values == Values::exact && bits_when_exact) return want == 0 ? from(got) == 0 : same_bits(got, to<V>(want));
  return std::fabs(from(got) - want) <= tol * (bits_when_exact ? 1.0 : std::max(1.0, std::fabs(want)));
}

template <class T, class P>
void moe_case(const std::string& name, const Step& s, Values values, moonep::GemmKind kind) {
  using Exec = typename P::execution_space;
  using Mem = typename P::memory_space;
  using W = moonep::weight_t<T>;
  constexpr bool bf16 = std::is_same_v<T, moonep::bf16>;
  const double tol = bf16 ? 0.05 : 1e-5;
  const Config& c = s.c;
  const int epn = c.experts_per_rank(), q = kHidden * kOut;
  moonep::InProcessWorld<Mem> world(c.ranks);
  P planner(c, world);
  REQUIRE(plan_step(planner, s) == "");
  moonep::InProcessMoeLayer<T, Exec> layer(c, kHidden, kOut, kind);
  INFO(name << (values == Values::exact ? ", exact data, " : ", random data, ") << layer.gemm_name() << " GEMM");
  const Experts ex = draw_experts(c, kHidden, kOut, values);
  Draw draw(values, 8);
  const PerRank<T> x = rows_of<T>(c, c.tokens, kHidden, s.tokens, draw);
  const PerRank<W> w = rows_of<W>(c, c.tokens, c.topk, s.tokens, draw, true);
  const PerRank<T> g = rows_of<T>(c, c.tokens, kOut, s.tokens, draw);
  const auto p_v = to_view<T, Mem>(owner_parameters<T>(c, ex), epn, q);
  const auto x_v = to_view<T, Mem>(x, c.tokens, kHidden);
  const auto w_v = to_view<W, Mem>(w, c.tokens, c.topk);
  const auto g_v = to_view<T, Mem>(g, c.tokens, kOut);
  const auto out_v = to_view<T, Mem>(filled<T>(c, std::int64_t{c.tokens} * kOut, kSentinel), c.tokens, kOut);
  const auto gx_v = to_view<T, Mem>(filled<T>(c, std::int64_t{c.tokens} * kHidden, kSentinel), c.tokens, kHidden);
  const auto gw_v = to_view<W, Mem>(filled<W>(c, c.entries(), kSentinel), c.tokens, c.topk);
  const auto gm_v = to_view<T, Mem>(filled<T>(c, std::int64_t{epn} * q, kSentinel), epn, q);
  layer.forward(planner.last_plan(), x_v, w_v, p_v, out_v);
  layer.backward(planner.last_plan(), g_v, p_v, gx_v, gw_v, gm_v);
  Kokkos::fence();

  const auto want_out = direct_out<T>(s, kHidden, x, &w, &ex);
  const DirectGradients want = direct_gradients<T>(s, x, w, g, ex);
  const PerRank<T> out = from_view(out_v), gx = from_view(gx_v), gm = from_view(gm_v);
  const PerRank<W> gw = from_view(gw_v);
  for (int r = 0; r < c.ranks; ++r) {
    for (int t = 0; t < c.tokens; ++t) {
      const bool valid = t < s.tokens[r];
      for (int o = 0; o < kOut; ++o)
        REQUIRE((valid ? matches(out[r][t * kOut + o], want_out[r][t * kOut + o], values, tol, !bf16)
                       : same_bits(out[r][t * kOut + o], to<T>(kSentinel))));
      for (int h = 0; h < kHidden; ++h)
        REQUIRE((valid ? matches(gx[r][t * kHidden + h], want.gx[r][t * kHidden + h], values, tol, !bf16)
                       : same_bits(gx[r][t * kHidden + h], to<T>(kSentinel))));
      for (int k = 0; k < c.topk; ++k) {
        INFO("T of " << sizeof(T) << " bytes, gw rank " << r << " token " << t << " k " << k << ": got "
                     << from(gw[r][t * c.topk + k]) << ", direct " << want.gw[r][t * c.topk + k]);
        REQUIRE((valid ? matches(gw[r][t * c.topk + k], want.gw[r][t * c.topk + k], values, tol, !bf16)
                       : same_bits(gw[r][t * c.topk + k], to<W>(kSentinel))));
      }
    }
  }
  for (int e = 0; e < c.experts; ++e)
    for (int i = 0; i < q; ++i)
      REQUIRE(matches(gm[e / epn][(e % epn) * q + i], want.gm[static_cast<std::size_t>(e) * q + i], values, bf16 ? 4 * tol : 10 * tol, !bf16));
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("the linear layer through the library's operations equals the direct layer",
                        "[layer][portable]", moonep::test::PortableVariants) {
  INFO(moonep::test::variant_name<TestType>());
  const std::vector<std::pair<std::string, Step>> all = {
      {"B = epn", synthetic_step(Config{4, 16, 4, 12, 4, 4}, 2.0, 21, false)},
      {"B < epn copying everything", synthetic_step(Config{4, 16, 3, 12, 2, 2}, 0.5, 22, false)},
      {"ragged", synthetic_step(Config{4, 8, 2, 10, 2, 1}, 1.5, 23, true)},
      {"copied to every rank", copy_everywhere_step()},
      {"R = 1", synthetic_step(Config{1, 4, 2, 6, 1, 2}, 1.0, 24, false)},
      {"R = 1 ragged", synthetic_step(Config{1, 4, 2, 9, 1, 1}, 1.0, 16, true)}};
  for (const auto& [name, s] : all)
    for (const Values v : {Values::exact, Values::random})
      for (const moonep::GemmKind kind : {moonep::GemmKind::automatic, moonep::GemmKind::portable}) {
        moe_case<float, TestType>(name, s, v, kind);
        moe_case<double, TestType>(name, s, v, kind);
        moe_case<moonep::bf16, TestType>(name, s, v, kind);
      }
}

TEMPLATE_LIST_TEST_CASE("the linear layer refuses a plan it cannot run and views that do not fit, writing nothing",
                        "[layer][portable]", moonep::test::PortableVariants) {
  using Exec = typename TestType::execution_space;
  using Mem = typename TestType::memory_space;
  const Step s = uncopied_remote_step();
  const Config& c = s.c;
  moonep::InProcessWorld<Mem> world(c.ranks);
  TestType planner(c, world);
  REQUIRE(plan_step(planner, s) == "");
  const PerRank<float> own = filled<float>(c, 3, 1);
  const std::string want = uncopied_remote_error();
  REQUIRE(want.find("rank 1 would run expert 1 ") != std::string::npos);

  moonep::InProcessMoeLayer<float, Exec> layer(c, 1, 1);
#if MOONEP_GEMM_WITH_KOKKOSKERNELS
  CHECK(std::string(layer.gemm_name()) == "kokkos-kernels");  // the build's Kokkos Kernels is the one tested
#else
  CHECK(std::string(layer.gemm_name()) == "portable");
#endif
  const PerRank<float> sentinel = filled<float>(c, c.tokens, kSentinel);
  const auto x = to_view<float, Mem>(sentinel, c.tokens, 1), out = to_view<float, Mem>(sentinel, c.tokens, 1);
  const auto gx = to_view<float, Mem>(sentinel, c.tokens, 1);
  const auto w = to_view<float, Mem>(filled<float>(c, c.entries(), 0.5), c.tokens, c.topk);
  const auto gw = to_view<float, Mem>(filled<float>(c, c.entries(), kSentinel), c.tokens, c.topk);
  const auto p = to_view<float, Mem>(own, 3, 1), gp = to_view<float, Mem>(own, 3, 1);
  CHECK(input_error([&] { layer.forward(planner.last_plan(), x, w, p, out); }) == want);
  CHECK(input_error([&] { layer.backward(planner.last_plan(), x, p, gx, gw, gp); }) == want);
  Kokkos::fence();
  CHECK(from_view(out) == sentinel);
  CHECK(from_view(gx) == sentinel);
  CHECK(from_view(gw) == filled<float>(c, c.entries(), kSentinel));
  CHECK(from_view(gp) == own);

  const auto out2 = to_view<float, Mem>(filled<float>(c, c.tokens * 2, kSentinel), c.tokens, 2);
  CHECK(input_error([&] { layer.forward(planner.last_plan(), x, w, p, out2); }) ==
        "forward: out is [2][4][2], expected [2][4][1]");
  CHECK(input_error([&] { moonep::InProcessMoeLayer<float, Exec>(c, 1, 0); }) ==
        "InProcessMoeLayer: H' must be at least 1, got 0");
}

TEMPLATE_LIST_TEST_CASE("the linear layer allocates nothing in a step and reads the plan's groups in one copy",
                        "[layer][portable]", moonep::test::PortableVariants) {
  // With the portable GEMM, after a first step: forward reads the group
  // sizes once (the GEMMs are launched from the host), and once more when
  // B < epn (fetch's check for an uncopied remote expert); backward reads
  // them once, and twice more when B < epn (its own check before anything
  // moves, and reduce's), besides zeroing the two gradients of the experts
  // (deep copies of a value, on the device). No allocation, no free.
  INFO(moonep::test::variant_name<TestType>());
  using Exec = typename TestType::execution_space;
  using Mem = typename TestType::memory_space;
  using W = moonep::weight_t<float>;
  for (const Step& s : {synthetic_step(Config{4, 16, 4, 12, 4, 4}, 2.0, 21, false),
                        synthetic_step(Config{4, 16, 3, 12, 2, 2}, 0.5, 22, false)}) {
    const Config& c = s.c;
    const bool checks = c.copy_slots < c.experts_per_rank();
    const int epn = c.experts_per_rank();
    INFO("B=" << c.copy_slots << " epn=" << epn);
    moonep::InProcessWorld<Mem> world(c.ranks);
    TestType planner(c, world);
    REQUIRE(plan_step(planner, s) == "");
    moonep::InProcessMoeLayer<float, Exec> layer(c, kHidden, kOut, moonep::GemmKind::portable);
    Kokkos::View<float***, Kokkos::LayoutRight, Mem> x("x", c.ranks, c.tokens, kHidden);
    Kokkos::View<float***, Kokkos::LayoutRight, Mem> gx("gx", c.ranks, c.tokens, kHidden);
    Kokkos::View<float***, Kokkos::LayoutRight, Mem> out("out", c.ranks, c.tokens, kOut);
    Kokkos::View<W***, Kokkos::LayoutRight, Mem> w("w", c.ranks, c.tokens, c.topk), gw("gw", c.ranks, c.tokens, c.topk);
    Kokkos::View<float***, Kokkos::LayoutRight, Mem> p("p", c.ranks, epn, kHidden * kOut);
    Kokkos::View<float***, Kokkos::LayoutRight, Mem> gp("gp", c.ranks, epn, kHidden * kOut);
    layer.forward(planner.last_plan(), x, w, p, out);
    layer.backward(planner.last_plan(), out, p, gx, gw, gp);
    Kokkos::fence();
    moonep::test::CountKokkos count_forward;
    layer.forward(planner.last_plan(), x, w, p, out);
    const moonep::test::KokkosCounts f = count_forward.stop();
    moonep::test::CountKokkos count_backward;
    layer.backward(planner.last_plan(), out, p, gx, gw, gp);
    const moonep::test::KokkosCounts b = count_backward.stop();
    Kokkos::fence();
    CHECK(f.deep_copies == 1 + (checks ? 1 : 0));
    CHECK(b.deep_copies == 2 + 1 + (checks ? 2 : 0));
    CHECK(f.allocations + f.deallocations + b.allocations + b.deallocations == 0);
  }
}
