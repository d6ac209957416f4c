// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The reference layer's dispatch and combine (docs/spec/layer.md) against
// the direct MoE computation (support/layer_cases.hpp): identity experts,
// every element type, exact data bit for bit and random data within the
// rounding, full and ragged steps (rows past s_r NaN), many duplicates,
// tokens naming one expert twice, R = 1.
#include "catch2_compat.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "support/layer_cases.hpp"

namespace {

using namespace layer_test;
using moonep::bf16;

constexpr int kHidden = 6;

// Checks dispatch's recv against the contract's definition, entry by entry
// (independent of the transport): every entry's slot holds its token's row
// bits and its own weight, padding is zero, past the last group untouched.
template <class T>
void check_recv(const Step& s, const PerRank<T>& x, const PerRank<moonep::weight_t<T>>& w, const PerRank<T>& recv,
                const PerRank<moonep::weight_t<T>>& recv_w) {
  const std::int64_t nvs = s.c.slots();
  const int K = s.c.topk;
  std::vector<std::vector<int>> hits(s.c.ranks, std::vector<int>(nvs, 0));
  for (int r = 0; r < s.c.ranks; ++r)
    for (std::int64_t i = 0; i < s.tokens[r] * K; ++i) {
      std::int64_t code = s.plan.ranks[r].dst[i];
      if (code < 0) code = -code - 1;
      const int d = static_cast<int>(code / nvs);
      const std::int64_t loff = code % nvs;
      ++hits[d][loff];
      for (int h = 0; h < kHidden; ++h) REQUIRE(same_bits(recv[d][loff * kHidden + h], x[r][(i / K) * kHidden + h]));
      REQUIRE(same_bits(recv_w[d][loff], w[r][i]));
    }
  for (int d = 0; d < s.c.ranks; ++d) {
    const auto& p = s.plan.ranks[d];
    const std::int64_t used = p.cu_seqlens.back();
    for (std::int64_t slot = 0; slot < nvs; ++slot) {
      if (hits[d][slot]) {
        REQUIRE(hits[d][slot] == 1);
        continue;
      }
      const double want = slot < used ? 0.0 : kSentinel;  // padding : undefined
      for (int h = 0; h < kHidden; ++h) REQUIRE(from(recv[d][slot * kHidden + h]) == want);
      REQUIRE(static_cast<double>(recv_w[d][slot]) == want);
    }
  }
}

template <class T>
void forward_case(const std::string& name, const Step& s, Values values) {
  using W = moonep::weight_t<T>;
  INFO(name << (values == Values::exact ? ", exact data" : ", random data"));
  const Config& c = s.c;
  const std::int64_t nvs = c.slots();
  Draw draw(values, 99);
  const PerRank<T> x = rows_of<T>(c, c.tokens, kHidden, s.tokens, draw);
  const PerRank<W> w = rows_of<W>(c, c.tokens, c.topk, s.tokens, draw, true);
  PerRank<T> recv = filled<T>(c, nvs * kHidden, kSentinel);
  PerRank<W> recv_w = filled<W>(c, nvs, kSentinel);
  moonep::dispatch_reference(s.plan, kHidden, x, w, recv, recv_w);
  check_recv<T>(s, x, w, recv, recv_w);

  for (const bool weighted : {true, false}) {
    INFO((weighted ? "weighted" : "unweighted"));
    PerRank<T> out = filled<T>(c, std::int64_t{c.tokens} * kHidden, kSentinel);
    moonep::combine_reference<T>(s.plan, kHidden, recv, weighted ? &w : nullptr, out);  // identity: y = recv
    const auto want = direct_out<T>(s, kHidden, x, weighted ? &w : nullptr);
    for (int r = 0; r < c.ranks; ++r)
      for (int t = 0; t < c.tokens; ++t)
        for (int h = 0; h < kHidden; ++h) {
          const T got = out[r][t * kHidden + h];
          if (t >= s.tokens[r]) {
            REQUIRE(from(got) == kSentinel);  // rows past s_r are not written
            continue;
          }
          const double exact = want[r][t * kHidden + h];
          if (values == Values::exact) {
            REQUIRE(same_bits(got, to<T>(exact)));
          } else {
            // float accumulation over K terms, plus the final rounding to T
            const double tol = (std::is_same_v<T, double> ? 1e-14 : 1e-6) * c.topk +
                               (std::is_same_v<T, bf16> ? std::fabs(exact) / 256 : 0);
            REQUIRE(std::fabs(from(got) - exact) <= tol);
          }
        }
  }
}

template <class T>
void forward_all() {
  for (const auto& [name, step] : layer_steps()) {
    forward_case<T>(name, step, Values::exact);
    forward_case<T>(name, step, Values::random);
  }
}

}  // namespace

TEST_CASE("dispatch and combine match the direct layer (float)") { forward_all<float>(); }
TEST_CASE("dispatch and combine match the direct layer (double)") { forward_all<double>(); }
TEST_CASE("dispatch and combine match the direct layer (bf16)") { forward_all<bf16>(); }

TEST_CASE("the steps have what the tests claim: duplicates, repeated experts, empty ranks") {
  const auto all = layer_steps();
  const Step& many = all[3].second;
  std::int64_t dups = 0;
  for (const auto& p : many.plan.ranks) dups += p.dup_counts[1];
  // 4 ranks * 10 tokens * 6 entries on one rank: 5 of every 6 entries are
  // duplicates unless the planner moved them (it moves a few).
  CHECK(dups > 4 * 10 * 6 / 2);
  CHECK(many.routing[0][0] == many.routing[0][1]);
  const Step& ragged = all[1].second;
  CHECK(ragged.tokens == std::vector<std::int32_t>{0, 12, 6, 1});
}

TEST_CASE("combine adds in the contract's order: prologue, then primaries in increasing k") {
  // One token on R = 2, K = 3: entries 0 and 2 on rank 1 (2 a duplicate),
  // entry 1 on rank 0. Values chosen so that every other order of the three
  // float additions gives another result: 2^24 + 1 - 2^24.
  const Config c{2, 2, 3, 1, 1, 1};
  const Step s = make_step(c, Routing{{1, 0, 1}, {0, 0, 0}});
  const auto& d0 = s.plan.ranks[0].dst;
  REQUIRE(d0[0] >= 0);
  REQUIRE(d0[2] < 0);  // the duplicate of entry 0 on rank 1
  const std::int64_t nvs = c.slots();
  PerRank<float> y = filled<float>(c, nvs, 0);
  auto slot = [&](std::int32_t code) { return code >= 0 ? code : -code - 1; };
  y[slot(d0[0]) / nvs][slot(d0[0]) % nvs] = 16777216.0f;   // k = 0
  y[slot(d0[1]) / nvs][slot(d0[1]) % nvs] = -16777216.0f;  // k = 1
  y[slot(d0[2]) / nvs][slot(d0[2]) % nvs] = 1.0f;          // k = 2, the duplicate
  PerRank<float> out = filled<float>(c, 1, 0);
  moonep::combine_reference<float>(s.plan, 1, y, nullptr, out);
  // (2^24 + 1) at the destination rounds to 2^24; + (-2^24) at the source: 0.
  // In plain k order it would be (2^24 - 2^24) + 1 = 1.
  CHECK(out[0][0] == 0.0f);
}

TEST_CASE("bf16 converts by rounding to nearest even and keeps NaN") {
  CHECK(bf16(1.0f).bits == 0x3f80);
  CHECK(bf16(1.0f + 1.0f / 256).bits == 0x3f80);        // tie: to even (down)
  CHECK(bf16(1.0f + 3.0f / 256).bits == 0x3f82);        // tie: to even (up)
  CHECK(bf16(1.0f + 1.0f / 256 + 1.0f / 65536).bits == 0x3f81);  // above the tie
  CHECK(bf16(-2.5f).bits == 0xc020);
  CHECK(std::isnan(static_cast<float>(bf16(std::nanf("")))));
  // A NaN whose payload is all in the 16 bits cut off stays a NaN (plain
  // truncation would make it infinity).
  const std::uint32_t low_nan = 0x7f800001u;
  float f;
  std::memcpy(&f, &low_nan, sizeof f);
  CHECK(std::isnan(static_cast<float>(bf16(f))));
  CHECK(bf16(3.4e38f).bits == 0x7f80);                  // rounds up to infinity
  CHECK(bf16(-0.0f).bits == 0x8000);
  CHECK(static_cast<float>(bf16::from_bits(0x4049)) == 3.140625f);
}
