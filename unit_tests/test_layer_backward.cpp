// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The reference layer's backward (docs/spec/layer.md "Combine's backward",
// "Dispatch's backward") against the direct formulas of the identity layer
// (gy = w*g in each entry's slot, gw = <g, x>, gx = sum_k w*g), bit for bit
// on exact data, within the rounding on random data, and against finite
// differences of the forward in double.
#include "catch2_compat.hpp"

#include <cmath>
#include <string>

#include "support/layer_cases.hpp"

namespace {

using namespace layer_test;
using moonep::bf16;

constexpr int kHidden = 5;

template <class T>
bool close(T got, double want, double scale, Values values) {
  if (values == Values::exact) return same_bits(got, to<T>(want));
  const double tol = (std::is_same_v<T, double> ? 1e-13 : 1e-5) * scale +
                     (std::is_same_v<T, bf16> ? std::fabs(want) / 128 : 0);
  return std::fabs(from(got) - want) <= tol;
}

template <class T>
void backward_case(const std::string& name, const Step& s, Values values) {
  using W = moonep::weight_t<T>;
  INFO(name << (values == Values::exact ? ", exact data" : ", random data"));
  const Config& c = s.c;
  const int K = c.topk;
  const std::int64_t nvs = c.slots();
  Draw draw(values, 7);
  const PerRank<T> x = rows_of<T>(c, c.tokens, kHidden, s.tokens, draw);
  const PerRank<W> w = rows_of<W>(c, c.tokens, K, s.tokens, draw, true);
  const PerRank<T> g = rows_of<T>(c, c.tokens, kHidden, s.tokens, draw);
  PerRank<T> recv = filled<T>(c, nvs * kHidden, kSentinel);
  PerRank<W> recv_w = filled<W>(c, nvs, kSentinel);
  moonep::dispatch_reference(s.plan, kHidden, x, w, recv, recv_w);

  // Combine's backward, weighted (identity experts: y = recv).
  PerRank<T> gy = filled<T>(c, nvs * kHidden, kSentinel);
  PerRank<W> gw = filled<W>(c, c.entries(), kSentinel);
  moonep::combine_backward_reference(s.plan, kHidden, g, recv, &w, gy, &gw);
  std::vector<std::vector<bool>> hit(c.ranks, std::vector<bool>(nvs, false));
  for (int r = 0; r < c.ranks; ++r)
    for (int i = 0; i < c.tokens * K; ++i) {
      const int t = i / K;
      if (t >= s.tokens[r]) {
        REQUIRE(static_cast<double>(gw[r][i]) == kSentinel);
        continue;
      }
      const auto [d, loff] = slot_of(s, r, i);
      hit[d][loff] = true;
      double dot = 0, scale = 0;
      for (int h = 0; h < kHidden; ++h) {
        const double gv = from(g[r][t * kHidden + h]), xv = from(x[r][t * kHidden + h]);
        REQUIRE(close(gy[d][loff * kHidden + h], static_cast<double>(w[r][i]) * gv, std::fabs(gv), values));
        dot += gv * xv;
        scale += std::fabs(gv * xv);
      }
      // gw is of type W: exact data compares its bits with the exact dot.
      if (values == Values::exact) REQUIRE(static_cast<double>(gw[r][i]) == dot);
      else REQUIRE(std::fabs(static_cast<double>(gw[r][i]) - dot) <= (std::is_same_v<T, double> ? 1e-13 : 1e-5) * scale);
    }
  for (int d = 0; d < c.ranks; ++d)
    for (std::int64_t slot = 0; slot < nvs; ++slot)
      if (!hit[d][slot]) {
        const double want = slot < s.plan.ranks[d].cu_seqlens.back() ? 0.0 : kSentinel;
        for (int h = 0; h < kHidden; ++h) REQUIRE(from(gy[d][slot * kHidden + h]) == want);
      }

  // Unweighted: gy is g's bits in every entry's slot; no gw.
  PerRank<T> gy1 = filled<T>(c, nvs * kHidden, kSentinel);
  moonep::combine_backward_reference<T>(s.plan, kHidden, g, {}, nullptr, gy1, nullptr);
  for (int r = 0; r < c.ranks; ++r)
    for (int i = 0; i < s.tokens[r] * K; ++i) {
      const auto [d, loff] = slot_of(s, r, i);
      for (int h = 0; h < kHidden; ++h) REQUIRE(same_bits(gy1[d][loff * kHidden + h], g[r][(i / K) * kHidden + h]));
    }

  // Dispatch's backward of the identity layer's grad_recv (= gy): gx[t] =
  // sum_k w_k g[t]; and gw += grad_recv_w per entry.
  const PerRank<W> grecv_w = rows_of<W>(c, nvs, 1, std::vector<std::int32_t>(c.ranks, nvs), draw, true);
  PerRank<T> gx = filled<T>(c, std::int64_t{c.tokens} * kHidden, kSentinel);
  PerRank<W> gw2 = gw;
  moonep::dispatch_backward_reference(s.plan, kHidden, gy, &grecv_w, gx, &gw2);
  for (int r = 0; r < c.ranks; ++r)
    for (int t = 0; t < c.tokens; ++t) {
      for (int h = 0; h < kHidden; ++h) {
        if (t >= s.tokens[r]) {
          REQUIRE(from(gx[r][t * kHidden + h]) == kSentinel);
          continue;
        }
        double want = 0, scale = 0;
        for (int k = 0; k < K; ++k) {
          // the direct formula over the rounded gy rows: exact data has no rounding
          const auto [d, loff] = slot_of(s, r, t * K + k);
          want += from(gy[d][loff * kHidden + h]);
          scale += std::fabs(static_cast<double>(w[r][t * K + k]) * from(g[r][t * kHidden + h]));
        }
        if (values == Values::exact) {  // and the identity layer's direct gx = sum_k w_k g
          double direct = 0;
          for (int k = 0; k < K; ++k) direct += static_cast<double>(w[r][t * K + k]) * from(g[r][t * kHidden + h]);
          REQUIRE(same_bits(gx[r][t * kHidden + h], to<T>(direct)));
        }
        REQUIRE(close(gx[r][t * kHidden + h], want, scale, values));
      }
      for (int k = 0; k < K && t < s.tokens[r]; ++k) {
        const auto [d, loff] = slot_of(s, r, t * K + k);
        REQUIRE(gw2[r][t * K + k] == static_cast<W>(gw[r][t * K + k] + grecv_w[d][loff]));
      }
    }
}

template <class T>
void backward_all() {
  for (const auto& [name, step] : layer_steps()) {
    backward_case<T>(name, step, Values::exact);
    backward_case<T>(name, step, Values::random);
  }
}

// The identity layer's loss L = sum <g, out(x, w)> in double through the
// reference, for finite differences.
double loss(const Step& s, const PerRank<double>& x, const PerRank<double>& w, const PerRank<double>& g) {
  const std::int64_t nvs = s.c.slots();
  PerRank<double> recv = filled<double>(s.c, nvs * kHidden, 0), recv_w = filled<double>(s.c, nvs, 0);
  PerRank<double> out = filled<double>(s.c, std::int64_t{s.c.tokens} * kHidden, 0);
  moonep::dispatch_reference(s.plan, kHidden, x, w, recv, recv_w);
  moonep::combine_reference<double>(s.plan, kHidden, recv, &w, out);
  double l = 0;
  for (int r = 0; r < s.c.ranks; ++r)
    for (int i = 0; i < s.tokens[r] * kHidden; ++i) l += g[r][i] * out[r][i];
  return l;
}

}  // namespace

TEST_CASE("combine's and dispatch's backward match the direct formulas (float)") { backward_all<float>(); }
TEST_CASE("combine's and dispatch's backward match the direct formulas (double)") { backward_all<double>(); }
TEST_CASE("combine's and dispatch's backward match the direct formulas (bf16)") { backward_all<bf16>(); }

TEST_CASE("the backward matches finite differences of the forward") {
  for (const auto& [name, s] : layer_steps()) {
    INFO(name);
    const Config& c = s.c;
    const std::int64_t nvs = c.slots();
    Draw draw(Values::random, 3);
    PerRank<double> x = rows_of<double>(c, c.tokens, kHidden, s.tokens, draw);
    PerRank<double> w = rows_of<double>(c, c.tokens, c.topk, s.tokens, draw, true);
    const PerRank<double> g = rows_of<double>(c, c.tokens, kHidden, s.tokens, draw);
    PerRank<double> recv = filled<double>(c, nvs * kHidden, 0), recv_w = filled<double>(c, nvs, 0);
    moonep::dispatch_reference(s.plan, kHidden, x, w, recv, recv_w);
    PerRank<double> gy = filled<double>(c, nvs * kHidden, 0), gw = filled<double>(c, c.entries(), 0);
    moonep::combine_backward_reference(s.plan, kHidden, g, recv, &w, gy, &gw);
    PerRank<double> gx = filled<double>(c, std::int64_t{c.tokens} * kHidden, 0);
    moonep::dispatch_backward_reference<double>(s.plan, kHidden, gy, nullptr, gx, nullptr);
    // The central difference of the loss in one input value.
    auto slope = [&](double& v) {
      const double eps = 1e-5, keep = v;
      v = keep + eps;
      const double up = loss(s, x, w, g);
      v = keep - eps;
      const double down = loss(s, x, w, g);
      v = keep;
      return (up - down) / (2 * eps);
    };
    for (int r = 0; r < c.ranks; ++r)
      for (int t = 0; t < s.tokens[r]; t += 3) {
        for (int h = 0; h < kHidden; h += 2)
          REQUIRE(std::fabs(slope(x[r][t * kHidden + h]) - gx[r][t * kHidden + h]) <= 1e-7);
        for (int k = 0; k < c.topk; ++k)
          REQUIRE(std::fabs(slope(w[r][t * c.topk + k]) - gw[r][t * c.topk + k]) <= 1e-7);
      }
  }
}
