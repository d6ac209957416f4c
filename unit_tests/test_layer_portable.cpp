// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The portable layer operations (moonep/layer.hpp, InProcessLayer) on
// every host execution space against the reference layer, bit for bit:
// dispatch's recv and recv_w, combine's out (weighted and not), combine's
// backward (grad_y, grad_w) and dispatch's backward (grad_x, grad_w), full
// and ragged steps (rows past s_r NaN), many duplicates, R = 1, float,
// double and bfloat16 (moonep::bf16: rows as bits, float sums rounded once
// to nearest even, NaN kept, also in device code); its bad input; plans
// whose views hold anything; and that its operations only enqueue kernels
// (no fence, copy or allocation: on a GPU no host round trip).
#include "catch2_compat.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "moonep/layer.hpp"
#include "support/kokkos_counts.hpp"
#include "support/layer_cases.hpp"
#include "support/layer_views.hpp"
#include "test_portable_support.hpp"

using namespace layer_test;

namespace {

constexpr int kHidden = 3;

template <class T, class P>
void portable_case(const std::string& name, const Step& s, Values values) {
  using Exec = typename P::execution_space;
  using Mem = typename P::memory_space;
  using W = moonep::weight_t<T>;
  INFO(name << (values == Values::exact ? ", exact data" : ", random data"));
  const Config& c = s.c;
  const std::int64_t nvs = c.slots();
  moonep::InProcessWorld<Mem> world(c.ranks);
  P planner(c, world);
  const bool ragged = s.plan.tokens_per_rank.has_value();
  const HostPlan host_plan = moonep::test::plan_with(planner, s.routing, nullptr, ragged ? &*s.plan.tokens_per_rank : nullptr);
  REQUIRE(moonep::plan_difference(host_plan, s.plan) == "");

  Draw draw(values, 41);
  const PerRank<T> x = rows_of<T>(c, c.tokens, kHidden, s.tokens, draw);
  const PerRank<W> w = rows_of<W>(c, c.tokens, c.topk, s.tokens, draw, true);
  PerRank<T> recv = filled<T>(c, nvs * kHidden, kSentinel);
  PerRank<W> recv_w = filled<W>(c, nvs, kSentinel);
  moonep::dispatch_reference(s.plan, kHidden, x, w, recv, recv_w);

  moonep::InProcessLayer<T, Exec> layer(c, kHidden);
  const auto xv = to_view<T, Mem>(x, c.tokens, kHidden);
  const auto wv = to_view<W, Mem>(w, c.tokens, c.topk);
  const auto recv_v = to_view<T, Mem>(filled<T>(c, nvs * kHidden, kSentinel), nvs, kHidden);
  Kokkos::View<W**, Kokkos::LayoutRight, Mem> recv_w_v("recv_w", c.ranks, nvs);
  Kokkos::deep_copy(recv_w_v, W(kSentinel));
  layer.dispatch(planner.last_plan(), xv, wv, recv_v, recv_w_v);
  Kokkos::fence();
  REQUIRE(from_view(recv_v) == recv);
  REQUIRE(from_view(recv_w_v) == recv_w);

  // Combine the received rows (identity experts), weighted and not.
  PerRank<T> out = filled<T>(c, std::int64_t{c.tokens} * kHidden, kSentinel);
  moonep::combine_reference<T>(s.plan, kHidden, recv, &w, out);
  const auto out_v = to_view<T, Mem>(filled<T>(c, std::int64_t{c.tokens} * kHidden, kSentinel), c.tokens, kHidden);
  layer.combine(planner.last_plan(), recv_v, recv_w_v, out_v);
  Kokkos::fence();
  CHECK(from_view(out_v) == out);
  moonep::combine_reference<T>(s.plan, kHidden, recv, nullptr, out);
  layer.combine_unweighted(planner.last_plan(), recv_v, out_v);
  Kokkos::fence();
  CHECK(from_view(out_v) == out);

  // Combine's backward (y = recv), weighted and not.
  const PerRank<T> g = rows_of<T>(c, c.tokens, kHidden, s.tokens, draw);
  const auto g_v = to_view<T, Mem>(g, c.tokens, kHidden);
  PerRank<T> gy = filled<T>(c, nvs * kHidden, kSentinel);
  PerRank<W> gw = filled<W>(c, c.entries(), kSentinel);
  moonep::combine_backward_reference(s.plan, kHidden, g, recv, &w, gy, &gw);
  const auto gy_v = to_view<T, Mem>(filled<T>(c, nvs * kHidden, kSentinel), nvs, kHidden);
  const auto gw_v = to_view<W, Mem>(filled<W>(c, c.entries(), kSentinel), c.tokens, c.topk);
  layer.combine_backward(planner.last_plan(), g_v, recv_v, recv_w_v, gy_v, gw_v);
  Kokkos::fence();
  CHECK(from_view(gy_v) == gy);
  CHECK(from_view(gw_v) == gw);
  PerRank<T> gy1 = filled<T>(c, nvs * kHidden, kSentinel);
  moonep::combine_backward_reference<T>(s.plan, kHidden, g, {}, nullptr, gy1, nullptr);
  const auto gy1_v = to_view<T, Mem>(filled<T>(c, nvs * kHidden, kSentinel), nvs, kHidden);
  layer.combine_backward_unweighted(planner.last_plan(), g_v, gy1_v);
  Kokkos::fence();
  CHECK(from_view(gy1_v) == gy1);

  // Dispatch's backward of gy, with and without the weights' gradient.
  const PerRank<W> grecv_w = rows_of<W>(c, nvs, 1, std::vector<std::int32_t>(c.ranks, nvs), draw, true);
  Kokkos::View<W**, Kokkos::LayoutRight, Mem> grecv_w_v("grecv_w", c.ranks, nvs);
  Kokkos::deep_copy(grecv_w_v, Kokkos::subview(to_view<W, Mem>(grecv_w, nvs, 1), Kokkos::ALL, Kokkos::ALL, 0));
  PerRank<T> gx = filled<T>(c, std::int64_t{c.tokens} * kHidden, kSentinel);
  moonep::dispatch_backward_reference(s.plan, kHidden, gy, &grecv_w, gx, &gw);
  const auto gx_v = to_view<T, Mem>(filled<T>(c, std::int64_t{c.tokens} * kHidden, kSentinel), c.tokens, kHidden);
  layer.dispatch_backward(planner.last_plan(), gy_v, grecv_w_v, gx_v, gw_v);
  Kokkos::fence();
  CHECK(from_view(gx_v) == gx);
  CHECK(from_view(gw_v) == gw);
  const auto gx1_v = to_view<T, Mem>(filled<T>(c, std::int64_t{c.tokens} * kHidden, kSentinel), c.tokens, kHidden);
  layer.dispatch_backward(planner.last_plan(), gy_v, gx1_v);
  Kokkos::fence();
  CHECK(from_view(gx1_v) == gx);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("the portable dispatch and combine match the reference bit for bit", "[layer][portable]",
                        moonep::test::PortableVariants) {
  INFO(moonep::test::variant_name<TestType>());
  for (const auto& [name, step] : layer_steps())
    for (const Values v : {Values::exact, Values::random}) {
      portable_case<float, TestType>(name, step, v);
      portable_case<double, TestType>(name, step, v);
      portable_case<moonep::bf16, TestType>(name, step, v);
    }
}

TEMPLATE_LIST_TEST_CASE("moonep::bf16 converts the same on the execution space as on the host",
                        "[layer][portable]", moonep::test::PortableVariants) {
  // Ties to even, carries into the exponent and to infinity, NaNs of both
  // signs (quiet bit set, sign kept), infinities, signed zeros, subnormals:
  // converted to bf16 and back inside a kernel, against the host's bits
  // and the values rounding to nearest even gives.
  using Exec = typename TestType::execution_space;
  using Mem = typename TestType::memory_space;
  const std::vector<std::uint32_t> in = {
      0x3f808000u,  // 1 + 2^-8: a tie, to even 1
      0x3f818000u,  // 1 + 3*2^-8: a tie, to even 1 + 2^-6
      0x3f80c000u,  // 1 + 3*2^-9: above the middle, to 1 + 2^-7
      0x3f807fffu,  // just below a tie: down
      0x3fffffffu,  // carries into the exponent: 2
      0x7f7fffffu,  // the largest float: to infinity
      0x7f800000u, 0xff800000u, 0x00000000u, 0x80000000u,
      0x7fc00000u,  // quiet NaN
      0x7f800001u,  // signalling NaN whose payload is cut off: stays NaN
      0xff812345u,  // negative NaN
      0x00010000u, 0x8000ffffu};
  const std::vector<std::uint16_t> want = {0x3f80, 0x3f82, 0x3f81, 0x3f80, 0x4000, 0x7f80, 0x7f80, 0xff80,
                                           0x0000, 0x8000, 0x7fc0, 0x7fc0, 0xffc1, 0x0001, 0x8001};
  const std::int64_t n = static_cast<std::int64_t>(in.size());
  Kokkos::View<float*, Mem> values("values", n), back("back", n);
  Kokkos::View<moonep::bf16*, Mem> rounded("rounded", n);
  auto h = Kokkos::create_mirror_view(values);
  for (std::int64_t i = 0; i < n; ++i) std::memcpy(&h(i), &in[i], sizeof(float));
  Kokkos::deep_copy(values, h);
  Kokkos::parallel_for(
      "moonep::test::bf16_convert", Kokkos::RangePolicy<Exec>(0, n), KOKKOS_LAMBDA(const std::int64_t i) {
        rounded(i) = moonep::bf16(values(i));
        back(i) = static_cast<float>(rounded(i));
      });
  Kokkos::fence();
  const auto got = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), rounded);
  const auto got_back = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), back);
  for (std::int64_t i = 0; i < n; ++i) {
    INFO("float bits " << std::hex << in[i]);
    CHECK(got(i).bits == want[i]);
    CHECK(moonep::bf16(h(i)).bits == want[i]);
    std::uint32_t wide = 0;
    std::memcpy(&wide, &got_back(i), sizeof wide);
    CHECK(wide == static_cast<std::uint32_t>(want[i]) << 16);
  }
}

TEMPLATE_LIST_TEST_CASE("the portable bf16 combine rounds once, to nearest even, and keeps NaN", "[layer][portable]",
                        moonep::test::PortableVariants) {
  // x = 1 in every element, w = {1, 2^-8, 0, 0}, {1, 3*2^-8, 0, 0} or
  // {1, 2^-9, 2^-9, 2^-9} by token: the float sums 1 + 2^-8 and 1 + 3*2^-8
  // are ties (to even: 1 and 1 + 2^-6; truncation would give 1 + 2^-7 for
  // the second) and 1 + 3*2^-9 rounds up to 1 + 2^-7 only when summed in
  // float and rounded once (a sum rounded to bf16 after each addition stays
  // 1: 1 + 2^-9 is below the middle). One token's row is NaN: its out is
  // NaN, the others' unaffected.
  using Exec = typename TestType::execution_space;
  using Mem = typename TestType::memory_space;
  using moonep::bf16;
  const Step s = synthetic_step(Config{4, 16, 4, 12, 4, 4}, 1.5, 11, false);
  const Config& c = s.c;
  const std::int64_t nvs = c.slots();
  moonep::InProcessWorld<Mem> world(c.ranks);
  TestType planner(c, world);
  REQUIRE(plan_step(planner, s) == "");
  PerRank<bf16> x = filled<bf16>(c, std::int64_t{c.tokens} * kHidden, 1.0);
  for (int h = 0; h < kHidden; ++h) x[2][5 * kHidden + h] = bf16(std::numeric_limits<float>::quiet_NaN());
  const std::vector<std::vector<float>> pattern = {
      {1.0f, 0x1p-8f, 0.0f, 0.0f}, {1.0f, 0x3p-8f, 0.0f, 0.0f}, {1.0f, 0x1p-9f, 0x1p-9f, 0x1p-9f}};
  const std::vector<std::uint16_t> want_bits = {0x3f80, 0x3f82, 0x3f81};
  PerRank<float> w(c.ranks);
  for (int r = 0; r < c.ranks; ++r)
    for (int t = 0; t < c.tokens; ++t)
      for (int k = 0; k < c.topk; ++k) w[r].push_back(pattern[t % 3][k]);
  PerRank<bf16> recv = filled<bf16>(c, nvs * kHidden, kSentinel), out = filled<bf16>(c, c.tokens * kHidden, kSentinel);
  PerRank<float> recv_w = filled<float>(c, nvs, kSentinel);
  moonep::dispatch_reference(s.plan, kHidden, x, w, recv, recv_w);
  moonep::combine_reference<bf16>(s.plan, kHidden, recv, &w, out);

  moonep::InProcessLayer<bf16, Exec> layer(c, kHidden);
  const auto recv_v = to_view<bf16, Mem>(filled<bf16>(c, nvs * kHidden, kSentinel), nvs, kHidden);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> recv_w_v("recv_w", c.ranks, nvs);
  const auto out_v = to_view<bf16, Mem>(filled<bf16>(c, c.tokens * kHidden, kSentinel), c.tokens, kHidden);
  layer.dispatch(planner.last_plan(), to_view<bf16, Mem>(x, c.tokens, kHidden), to_view<float, Mem>(w, c.tokens, c.topk),
                 recv_v, recv_w_v);
  layer.combine(planner.last_plan(), recv_v, recv_w_v, out_v);
  Kokkos::fence();
  const PerRank<bf16> got = from_view(out_v);
  // The reference's bits, but for NaN's payload: which quiet NaN an
  // arithmetic NaN gets is the hardware's (x86 keeps the input's 0x7fc0,
  // a GPU gives its canonical 0x7fff); only NaN-ness is the contract's.
  std::int64_t differing = 0;
  for (int r = 0; r < c.ranks; ++r)
    for (std::size_t i = 0; i < got[r].size(); ++i) {
      const bool both_nan = std::isnan(static_cast<float>(got[r][i])) && std::isnan(static_cast<float>(out[r][i]));
      if (!both_nan && got[r][i].bits != out[r][i].bits) ++differing;
    }
  CHECK(differing == 0);
  for (int r = 0; r < c.ranks; ++r)
    for (int t = 0; t < c.tokens; ++t)
      for (int h = 0; h < kHidden; ++h) {
        INFO("rank " << r << " token " << t);
        const bf16 v = got[r][t * kHidden + h];
        if (r == 2 && t == 5) CHECK(std::isnan(static_cast<float>(v)));
        else CHECK(v.bits == want_bits[t % 3]);
      }
}

TEMPLATE_LIST_TEST_CASE("the portable layer refuses views and plans that do not fit it", "[layer][portable]",
                        moonep::test::PortableVariants) {
  using Exec = typename TestType::execution_space;
  using Mem = typename TestType::memory_space;
  const Step s = synthetic_step(Config{2, 4, 2, 3, 2, 1}, 1.0, 6, false);
  moonep::InProcessWorld<Mem> world(2);
  TestType planner(s.c, world);
  moonep::test::plan_with(planner, s.routing);
  moonep::InProcessLayer<float, Exec> layer(s.c, 2);
  Kokkos::View<float***, Kokkos::LayoutRight, Mem> x("x", 2, 3, 2), x3("x3", 2, 3, 3), recv("recv", 2, s.c.slots(), 2);
  Kokkos::View<float***, Kokkos::LayoutRight, Mem> w("w", 2, 3, 2);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> recv_w("recv_w", 2, s.c.slots());
  CHECK(input_error([&] { layer.dispatch(planner.last_plan(), x3, w, recv, recv_w); }) ==
        "dispatch: x is [2][3][3], expected [R][S][H] = [2][3][2]");
  CHECK(input_error([&] { layer.dispatch(planner.last_plan(), x, x3, recv, recv_w); }) ==
        "dispatch: w is not [R][S][K] = [2][3][2]");
  moonep::Plan<Mem> other = planner.last_plan();
  other.config.tokens = 4;
  CHECK(input_error([&] { layer.dispatch(other, x, w, recv, recv_w); }).find("dispatch: the plan is of ") == 0);
  other = planner.last_plan();
  other.ranks.pop_back();
  CHECK(input_error([&] { layer.combine(other, recv, recv_w, x); }) ==
        "combine: the plan holds 1 ranks; the in-process layer needs all 2");
  Kokkos::View<float***, Kokkos::LayoutRight, Mem> gw("gw", 2, 3, 2);
  CHECK(input_error([&] { layer.dispatch_backward(planner.last_plan(), recv, recv_w, x, x3); }) ==
        "dispatch backward: grad_w is not [R][S][K] = [2][3][2]");
  CHECK(input_error([&] { layer.dispatch_backward(planner.last_plan(), x, x); }).find(
            "dispatch backward: grad_recv is [2][3][2], expected [R][NvS][H]") == 0);
  CHECK(input_error([&] { layer.combine_backward(planner.last_plan(), x, recv, recv_w, x, gw); }).find(
            "combine backward: grad_y is [2][3][2], expected [R][NvS][H]") == 0);
  CHECK(input_error([&] { moonep::InProcessLayer<float, Exec>(s.c, 0); }) ==
        "InProcessLayer: H must be at least 1, got 0");
}

TEMPLATE_LIST_TEST_CASE("whatever the plan's views hold, the portable layer stays inside its buffers",
                        "[layer][portable]", moonep::test::PortableVariants) {
  // Out-of-range destinations, padding ranges, dup rows and counts written
  // into a real plan: every kernel skips what does not fit (the sanitizer
  // run checks that nothing outside a buffer is touched), and the entries
  // left intact still land where they belong.
  using Exec = typename TestType::execution_space;
  using Mem = typename TestType::memory_space;
  const Step s = synthetic_step(Config{2, 4, 2, 5, 2, 2}, 1.0, 9, false);
  const std::int64_t nvs = s.c.slots();
  moonep::InProcessWorld<Mem> world(2);
  TestType planner(s.c, world);
  const HostPlan good = moonep::test::plan_with(planner, s.routing);
  moonep::Plan<Mem> plan = planner.last_plan();
  auto set = [](const auto& view, std::int32_t value) { Kokkos::deep_copy(view, value); };
  set(Kokkos::subview(plan.ranks[0].dst, 0), std::numeric_limits<std::int32_t>::max());
  set(Kokkos::subview(plan.ranks[0].dst, 1), std::numeric_limits<std::int32_t>::min());
  set(Kokkos::subview(plan.ranks[0].zero_fill_ranges, 0, 0), static_cast<std::int32_t>(nvs - 1));
  set(Kokkos::subview(plan.ranks[0].zero_fill_ranges, 0, 1), 1000);
  set(Kokkos::subview(plan.ranks[0].zero_fill_ranges, 1, 0), -3);
  set(plan.ranks[0].dup_groups, -5);
  set(Kokkos::subview(plan.ranks[1].dup_groups, 0, 0), static_cast<std::int32_t>(nvs + 3));
  set(Kokkos::subview(plan.ranks[1].dup_groups, 0, 2), 1 << 20);
  set(Kokkos::subview(plan.ranks[0].dup_counts, 0), static_cast<std::int32_t>(nvs));
  set(plan.ranks[1].dup_loffs, static_cast<std::int32_t>(-nvs));
  Draw draw(Values::exact, 3);
  const PerRank<float> x = rows_of<float>(s.c, s.c.tokens, kHidden, s.tokens, draw);
  const PerRank<float> w = rows_of<float>(s.c, s.c.tokens, s.c.topk, s.tokens, draw, true);
  moonep::InProcessLayer<float, Exec> layer(s.c, kHidden);
  const auto xv = to_view<float, Mem>(x, s.c.tokens, kHidden);
  const auto wv = to_view<float, Mem>(w, s.c.tokens, s.c.topk);
  const auto recv = to_view<float, Mem>(filled<float>(s.c, nvs * kHidden, 0), nvs, kHidden);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> recv_w("recv_w", 2, nvs);
  const auto out = to_view<float, Mem>(filled<float>(s.c, s.c.tokens * kHidden, 0), s.c.tokens, kHidden);
  layer.dispatch(plan, xv, wv, recv, recv_w);
  layer.combine(plan, recv, recv_w, out);
  Kokkos::fence();
  const PerRank<float> got = from_view(recv);
  int checked = 0;
  for (int i = 0; i < s.c.entries(); ++i) {
    const std::int32_t code = good.ranks[1].dst[i];
    if (code < 0) continue;  // rank 1's primaries: its dst is intact
    const int d = static_cast<int>(code / nvs);
    const std::int64_t loff = code % nvs;
    if (d == 0 && loff == nvs - 1) continue;  // the slot the corrupted padding range zeroes
    for (int h = 0; h < kHidden; ++h) REQUIRE(got[d][loff * kHidden + h] == x[1][(i / s.c.topk) * kHidden + h]);
    ++checked;
  }
  CHECK(checked > 3);
}

TEMPLATE_LIST_TEST_CASE("the portable layer's operations enqueue kernels and nothing else", "[layer][portable]",
                        moonep::test::PortableVariants) {
  // Dispatch, both combines and both backwards of each, counted by Kokkos
  // Tools after a first round: no fence, no deep copy (nothing read on the
  // host, nothing staged), no allocation or free (partial rows are made
  // with the layer).
  INFO(moonep::test::variant_name<TestType>());
  using Exec = typename TestType::execution_space;
  using Mem = typename TestType::memory_space;
  using W = moonep::weight_t<float>;
  const Step s = synthetic_step(Config{4, 16, 4, 12, 2, 4}, 2.0, 21, false);
  const Config& c = s.c;
  const std::int64_t nvs = c.slots();
  moonep::InProcessWorld<Mem> world(c.ranks);
  TestType planner(c, world);
  moonep::test::plan_with(planner, s.routing);
  moonep::InProcessLayer<float, Exec> layer(c, kHidden);
  Kokkos::View<float***, Kokkos::LayoutRight, Mem> x("x", c.ranks, c.tokens, kHidden);
  Kokkos::View<float***, Kokkos::LayoutRight, Mem> out("out", c.ranks, c.tokens, kHidden);
  Kokkos::View<float***, Kokkos::LayoutRight, Mem> recv("recv", c.ranks, nvs, kHidden), gy("gy", c.ranks, nvs, kHidden);
  Kokkos::View<W***, Kokkos::LayoutRight, Mem> w("w", c.ranks, c.tokens, c.topk), gw("gw", c.ranks, c.tokens, c.topk);
  Kokkos::View<W**, Kokkos::LayoutRight, Mem> recv_w("recv_w", c.ranks, nvs);
  const auto& plan = planner.last_plan();
  const auto round = [&] {
    layer.dispatch(plan, x, w, recv, recv_w);
    layer.combine(plan, recv, recv_w, out);
    layer.combine_unweighted(plan, recv, out);
    layer.combine_backward(plan, out, recv, recv_w, gy, gw);
    layer.combine_backward_unweighted(plan, out, gy);
    layer.dispatch_backward(plan, gy, recv_w, out, gw);
    layer.dispatch_backward(plan, gy, out);
  };
  round();
  Kokkos::fence();
  moonep::test::CountKokkos count;
  round();
  const moonep::test::KokkosCounts n = count.stop();
  Kokkos::fence();
  CHECK(n.launches > 0);
  CHECK(n.fences == 0);
  CHECK(n.deep_copies == 0);
  CHECK(n.allocations == 0);
  CHECK(n.deallocations == 0);
}
