// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Expert copies (docs/spec/layer.md "Expert copies", "The linear layer"):
// fetch's copies are the owners' bits, reduce adds in increasing d then b,
// a remote expert without a copy is refused, and the linear layer run
// through the plan (fetch, dispatch, one GEMM per group, combine) equals the
// direct layer, and its expert gradients (groups' own, copies' reduced)
// equal the direct sum over entries.
#include "catch2_compat.hpp"

#include <cmath>
#include <functional>
#include <string>

#include "moonep/error.hpp"
#include "support/layer_cases.hpp"

namespace {

using namespace layer_test;
using moonep::bf16;

constexpr int kHidden = 4, kOut = 3;

// Rank d's parameters for group g (docs/spec/layer.md "Expert copies"):
// its own expert's P_d[g mod epn], or copy slot g - E.
template <class T>
const T* group_parameters(const Config& c, int g, const std::vector<T>& own, const std::vector<T>& copies) {
  const std::size_t q = std::size_t{kHidden} * kOut;
  return g < c.experts ? &own[(g % c.experts_per_rank()) * q] : &copies[(g - c.experts) * q];
}

// y_d[slot] = recv_d[slot] @ M for every slot of every group, in float.
template <class T>
PerRank<T> run_experts(const Step& s, const PerRank<T>& recv, const PerRank<T>& own, const PerRank<T>& copies) {
  const Config& c = s.c;
  PerRank<T> y = filled<T>(c, c.slots() * kOut, 0);
  for (int d = 0; d < c.ranks; ++d)
    for (int g = 0, start = 0; g < c.groups(); start = s.plan.ranks[d].cu_seqlens[g++]) {
      const T* m = group_parameters(c, g, own[d], copies[d]);
      for (int slot = start; slot < s.plan.ranks[d].cu_seqlens[g]; ++slot)
        for (int o = 0; o < kOut; ++o) {
          double v = 0;
          for (int h = 0; h < kHidden; ++h) v += from(recv[d][slot * kHidden + h]) * from(m[h * kOut + o]);
          y[d][slot * kOut + o] = to<T>(v);
        }
    }
  return y;
}

template <class T>
void linear_layer_case(const std::string& name, const Step& s, Values values) {
  using W = moonep::weight_t<T>;
  INFO(name);
  const Config& c = s.c;
  const std::int64_t nvs = c.slots(), q = kHidden * kOut;
  const Experts ex = draw_experts(c, kHidden, kOut, values);
  const PerRank<T> own = owner_parameters<T>(c, ex);
  PerRank<T> copies = filled<T>(c, c.copy_slots * q, kSentinel);
  moonep::fetch_reference(s.plan, q, own, copies);
  for (int d = 0; d < c.ranks; ++d)
    for (int b = 0; b < c.copy_slots; ++b) {
      const int e = s.plan.ranks[d].experts_to_copy[d * c.copy_slots + b];
      for (int i = 0; i < q; ++i)
        REQUIRE(same_bits(copies[d][b * q + i], e < 0 ? to<T>(kSentinel) : own[e / c.experts_per_rank()][(e % c.experts_per_rank()) * q + i]));
    }
  Draw draw(values, 8);
  const PerRank<T> x = rows_of<T>(c, c.tokens, kHidden, s.tokens, draw);
  const PerRank<W> w = rows_of<W>(c, c.tokens, c.topk, s.tokens, draw, true);
  const PerRank<T> g = rows_of<T>(c, c.tokens, kOut, s.tokens, draw);
  PerRank<T> recv = filled<T>(c, nvs * kHidden, 0);
  PerRank<W> recv_w = filled<W>(c, nvs, 0);
  moonep::dispatch_reference(s.plan, kHidden, x, w, recv, recv_w);
  const PerRank<T> y = run_experts(s, recv, own, copies);
  PerRank<T> out = filled<T>(c, std::int64_t{c.tokens} * kOut, 0);
  moonep::combine_reference<T>(s.plan, kOut, y, &w, out);
  const auto want = direct_out<T>(s, kHidden, x, &w, &ex);
  for (int r = 0; r < c.ranks; ++r)
    for (int i = 0; i < s.tokens[r] * kOut; ++i) {
      if (values == Values::exact) REQUIRE(same_bits(out[r][i], to<T>(want[r][i])));
      else REQUIRE(std::fabs(from(out[r][i]) - want[r][i]) <= 1e-5);
    }

  // Expert gradients through the plan: each group's recv^T gy into its
  // parameters (own, or the copy slot's), then reduce; against the direct
  // gM_e = sum over entries naming e of w * x^T g.
  PerRank<T> gy = filled<T>(c, nvs * kOut, 0);
  moonep::combine_backward_reference<T>(s.plan, kOut, g, y, &w, gy, nullptr);
  PerRank<T> g_own = filled<T>(c, c.experts_per_rank() * q, 0), g_copies = filled<T>(c, c.copy_slots * q, 0);
  for (int d = 0; d < c.ranks; ++d)
    for (int grp = 0, start = 0; grp < c.groups(); start = s.plan.ranks[d].cu_seqlens[grp++]) {
      T* gm = const_cast<T*>(group_parameters(c, grp, g_own[d], g_copies[d]));
      for (int i = 0; i < q; ++i) {
        double v = 0;
        for (int slot = start; slot < s.plan.ranks[d].cu_seqlens[grp]; ++slot)
          v += from(recv[d][slot * kHidden + i / kOut]) * from(gy[d][slot * kOut + i % kOut]);
        gm[i] = to<T>(from(gm[i]) + v);
      }
    }
  moonep::reduce_reference(s.plan, q, g_copies, g_own);
  for (int e = 0; e < c.experts; ++e)
    for (int i = 0; i < q; ++i) {
      double direct = 0;
      for (int r = 0; r < c.ranks; ++r)
        for (int k = 0; k < s.tokens[r] * c.topk; ++k)
          if (s.routing[r][k] == e)
            direct += static_cast<double>(w[r][k]) * from(x[r][(k / c.topk) * kHidden + i / kOut]) *
                      from(g[r][(k / c.topk) * kOut + i % kOut]);
      const double got = from(g_own[e / c.experts_per_rank()][(e % c.experts_per_rank()) * q + i]);
      if (values == Values::exact) REQUIRE(got == direct);
      else REQUIRE(std::fabs(got - direct) <= 1e-4);
    }
}

}  // namespace

TEST_CASE("the linear layer through fetch, dispatch, combine and reduce equals the direct layer") {
  const std::vector<std::pair<std::string, Step>> all = {
      {"B = epn", synthetic_step(Config{4, 16, 4, 12, 4, 4}, 2.0, 21, false)},
      {"B < epn copying everything", synthetic_step(Config{4, 16, 3, 12, 2, 2}, 0.5, 22, false)},
      {"ragged", synthetic_step(Config{4, 8, 2, 10, 2, 1}, 1.5, 23, true)},
      {"copied to every rank", copy_everywhere_step()},
      {"R = 1", synthetic_step(Config{1, 4, 2, 6, 1, 2}, 1.0, 24, false)}};
  for (const auto& [name, s] : all) {
    linear_layer_case<float>(name, s, Values::exact);
    linear_layer_case<double>(name, s, Values::exact);
    linear_layer_case<float>(name, s, Values::random);
    linear_layer_case<double>(name, s, Values::random);
  }
}

TEST_CASE("reduce adds the copies' gradients in increasing rank, then slot") {
  const Step s = copy_everywhere_step();
  for (int d = 1; d < 4; ++d) REQUIRE(s.plan.ranks[0].experts_to_copy[d] == 0);
  REQUIRE(s.plan.ranks[0].experts_to_copy[0] == -1);
  // gP = 1, copies on ranks 1, 2, 3: 2^24, -2^24, 0. In increasing d:
  // (1 + 2^24) rounds to 2^24, then 0, then 0. Decreasing d would give 1.
  PerRank<float> gp = {{1.0f}, {5.0f}, {6.0f}, {7.0f}};
  const PerRank<float> gc = {{3.0f}, {16777216.0f}, {-16777216.0f}, {0.0f}};
  moonep::reduce_reference(s.plan, 1, gc, gp);
  CHECK(gp == PerRank<float>{{0.0f}, {5.0f}, {6.0f}, {7.0f}});  // experts 1-3 have no copies: untouched
  // bf16: accumulated in float, rounded once: 1 + 3 * 2^-9 is 1 in bf16 when
  // rounded after each addition, 1 + 2^-7 (1.0078125) rounded once.
  PerRank<bf16> gpb = {{bf16(1.0f)}, {bf16(0.0f)}, {bf16(0.0f)}, {bf16(0.0f)}};
  const float small = 1.0f / 512 + 1.0f / 1024;
  const PerRank<bf16> gcb = {{bf16(0.0f)}, {bf16(small)}, {bf16(small)}, {bf16(small)}};
  moonep::reduce_reference(s.plan, 1, gcb, gpb);
  CHECK(static_cast<float>(gpb[0][0]) == 1.0078125f);
}

TEST_CASE("fetch leaves unused copy slots untouched and copies bits (bf16)") {
  const Step s = synthetic_step(Config{4, 8, 2, 10, 2, 2}, 2.0, 31, false);
  const Config& c = s.c;
  PerRank<bf16> own(c.ranks);
  for (int r = 0; r < c.ranks; ++r)
    for (int i = 0; i < 2 * 3; ++i) own[r].push_back(bf16::from_bits(static_cast<std::uint16_t>(0x7f81 + r * 16 + i)));  // NaN bit patterns too
  PerRank<bf16> copies(c.ranks, std::vector<bf16>(2 * 3, bf16::from_bits(0x1234)));
  moonep::fetch_reference(s.plan, 3, own, copies);
  int used = 0;
  for (int d = 0; d < c.ranks; ++d)
    for (int b = 0; b < 2; ++b) {
      const int e = s.plan.ranks[d].experts_to_copy[d * 2 + b];
      used += e >= 0;
      for (int i = 0; i < 3; ++i)
        CHECK(copies[d][b * 3 + i].bits == (e < 0 ? 0x1234 : own[e / 2][(e % 2) * 3 + i].bits));
    }
  CHECK(used > 0);
  CHECK(used < 8);
}

TEST_CASE("a remote expert without a copy slot is refused, naming rank and expert") {
  const Step s = uncopied_remote_step();
  const Config& c = s.c;
  REQUIRE(s.plan.ranks[0].experts_to_copy[1] == 0);
  PerRank<float> own = filled<float>(c, 3, 1), copies = filled<float>(c, 1, 9);
  const std::string text = input_error([&] { moonep::fetch_reference(s.plan, 1, own, copies); });
  CHECK(text.find("rank 1 would run expert 1 ") != std::string::npos);
  CHECK(text.find("copy_slots 1 < experts per rank 3") != std::string::npos);
  CHECK(copies == filled<float>(c, 1, 9));
  CHECK(input_error([&] { moonep::reduce_reference(s.plan, 1, copies, own); }) == text);
  CHECK(own == filled<float>(c, 3, 1));
  // Dispatch and combine need no parameters and accept the plan.
  PerRank<float> x = filled<float>(c, 4, 1), w = filled<float>(c, 8, 0.5), recv = filled<float>(c, c.slots(), 0),
                 recv_w = filled<float>(c, c.slots(), 0);
  moonep::dispatch_reference(s.plan, 1, x, w, recv, recv_w);
}
