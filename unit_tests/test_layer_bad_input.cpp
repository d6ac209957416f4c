// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Bad input to the reference layer (docs/spec/layer.md "Bad input"): one
// InputError line naming what is wrong, thrown before anything is written
// (every output buffer keeps its bits), and the plan stays usable. A
// non-finite routing weight is not an error.
#include "catch2_compat.hpp"

#include <cmath>
#include <functional>
#include <string>

#include "moonep/error.hpp"
#include "support/layer_cases.hpp"

namespace {

using namespace layer_test;

struct Buffers {
  PerRank<float> x, w, recv, recv_w, out;
  explicit Buffers(const Config& c, int hidden)
      : x(filled<float>(c, std::int64_t{c.tokens} * hidden, 1)),
        w(filled<float>(c, c.entries(), 0.5)),
        recv(filled<float>(c, c.slots() * hidden, kSentinel)),
        recv_w(filled<float>(c, c.slots(), kSentinel)),
        out(filled<float>(c, std::int64_t{c.tokens} * hidden, kSentinel)) {}
};

// The dispatch error for `plan` (with buffers of its own configuration
// unless `b` is given), checking that nothing was written.
std::string dispatch_error(const HostPlan& plan, Buffers b, int hidden = 2) {
  const Buffers before = b;
  const std::string text = input_error([&] { moonep::dispatch_reference(plan, hidden, b.x, b.w, b.recv, b.recv_w); });
  CHECK(b.recv == before.recv);
  CHECK(b.recv_w == before.recv_w);
  return text;
}

}  // namespace

TEST_CASE("buffers of the wrong ranks or extents, and widths below 1, are refused before any write") {
  const Step s = synthetic_step(Config{4, 8, 2, 6, 2, 2}, 1.0, 3, false);
  const Config& c = s.c;
  Buffers b(c, 2);
  CHECK(dispatch_error(s.plan, b, 0) == "dispatch: H must be at least 1, got 0");
  b.x.pop_back();
  CHECK(dispatch_error(s.plan, b) == "dispatch: x has 3 ranks, expected 4");
  b = Buffers(c, 2);
  b.x[2].pop_back();
  CHECK(dispatch_error(s.plan, b) == "dispatch: x[2] holds 11 values, expected S*H = 12");
  b = Buffers(c, 2);
  b.recv_w[3].push_back(0);
  CHECK(dispatch_error(s.plan, b).find("dispatch: recv_w[3] holds") == 0);
  b = Buffers(c, 3);  // buffers made for H = 3, called with H = 2
  CHECK(dispatch_error(s.plan, b) == "dispatch: x[0] holds 18 values, expected S*H = 12");

  b = Buffers(c, 2);
  const Buffers before = b;
  // x's extent ([S][H]) passed where y ([NvS][H']) belongs
  CHECK(input_error([&] { moonep::combine_reference<float>(s.plan, 2, b.x, &b.w, b.out); }) ==
        "combine: y[0] holds 12 values, expected NvS*H' = " + std::to_string(c.slots() * 2));
  PerRank<float> y = filled<float>(c, c.slots() * 2, 1);
  PerRank<float> gw = filled<float>(c, c.entries(), kSentinel);
  CHECK(input_error([&] { moonep::combine_backward_reference<float>(s.plan, 2, b.out, y, nullptr, b.recv, &gw); }) ==
        "combine backward: grad_w needs the routing weights w (weighted = true)");
  CHECK(input_error([&] { moonep::dispatch_backward_reference<float>(s.plan, 2, y, nullptr, b.x, &gw); }) ==
        "dispatch backward: grad_recv_w and grad_w go together (both or neither)");
  CHECK(input_error([&] { moonep::fetch_reference(s.plan, 0, b.x, b.out); }) == "fetch: Q must be at least 1, got 0");
  CHECK(b.x == before.x);
  CHECK(b.out == before.out);
  CHECK(b.recv == before.recv);
  CHECK(gw == filled<float>(c, c.entries(), kSentinel));
}

TEST_CASE("a plan of another configuration or world, or with indices out of range, is refused") {
  const Step s = synthetic_step(Config{4, 8, 2, 6, 2, 2}, 1.0, 4, false);
  const Buffers b(s.c, 2);
  HostPlan p = s.plan;
  p.ranks.pop_back();
  CHECK(dispatch_error(p, b) == "plan: holds 3 ranks, its configuration 4");
  p = s.plan;
  p.config.tokens = 5;  // a plan of S = 6 read as one of S = 5
  CHECK(dispatch_error(p, Buffers(p.config, 2)) ==
        "plan rank 0: dst holds 12 values, expected 10 (a plan of another configuration?)");
  p = s.plan;
  p.tokens_per_rank = moonep::TokensPerRank{6, 6, 6};
  CHECK(dispatch_error(p, b).find("tokens_per_rank") != std::string::npos);
  const std::int64_t nvs = s.c.slots();
  p = s.plan;
  p.ranks[1].dst[3] = static_cast<std::int32_t>(4 * nvs);
  CHECK(dispatch_error(p, b) ==
        "plan rank 1: dst[3] = " + std::to_string(4 * nvs) + " is outside 0.." + std::to_string(4 * nvs - 1));
  p = s.plan;
  p.ranks[2].dst[0] = static_cast<std::int32_t>(-4 * nvs - 1);  // a duplicate's encoding, out of range
  CHECK(dispatch_error(p, b).find("plan rank 2: dst[0] = ") == 0);
  p = s.plan;
  p.ranks[0].zero_fill_ranges[1] = static_cast<std::int32_t>(nvs + 1);
  CHECK(dispatch_error(p, b).find("plan rank 0: zero_fill_ranges[1] = ") == 0);
  p = s.plan;
  p.ranks[3].cu_seqlens[0] = static_cast<std::int32_t>(nvs + 1);
  CHECK(dispatch_error(p, b).find("plan rank 3: cu_seqlens[0] = ") == 0);
  p = s.plan;
  p.ranks[0].experts_to_copy[1] = 8;
  CHECK(dispatch_error(p, b) == "plan rank 0: experts_to_copy[1] = 8 is outside -1..7");
  p = s.plan;
  for (auto& v : p.ranks[1].src_info)
    if (v >= 0) {
      v = static_cast<std::int32_t>(s.c.entries());  // rank 0, entry N: past its S*K entries
      break;
    }
  CHECK(dispatch_error(p, b).find("names entry 12 of rank 0, which holds 12") != std::string::npos);
  p = s.plan;
  p.ranks[2].dup_counts[1] += 1;
  CHECK(dispatch_error(p, b).find("plan rank 2: dup_loffs holds") == 0);
  // Ragged: a plan's dst holds s_r*K entries; src_info naming an entry past them.
  const Step r = synthetic_step(Config{4, 8, 2, 6, 2, 2}, 1.0, 5, true);
  p = r.plan;
  p.ranks[2].src_info[0] = static_cast<std::int32_t>(3 * nvs + 2);  // rank 3 holds 1 token: entries 0..1
  CHECK(dispatch_error(p, Buffers(r.c, 2)).find("names entry 2 of rank 3, which holds 2") != std::string::npos);
  // The untouched plan still works.
  Buffers ok(s.c, 2);
  moonep::dispatch_reference(s.plan, 2, ok.x, ok.w, ok.recv, ok.recv_w);
  CHECK(ok.recv[0][0] == 1.0f);
}

TEST_CASE("a non-finite routing weight is not an error: it propagates") {
  const Step s = synthetic_step(Config{2, 4, 2, 3, 2, 1}, 1.0, 6, false);
  Buffers b(s.c, 1);
  b.w[1][2] = std::nanf("");  // rank 1, token 1, k = 0
  moonep::dispatch_reference(s.plan, 1, b.x, b.w, b.recv, b.recv_w);
  moonep::combine_reference<float>(s.plan, 1, b.recv, &b.w, b.out);
  CHECK(std::isnan(b.out[1][1]));
  CHECK(b.out[1][0] == 1.0f);  // its neighbours are not: 0.5 + 0.5
  CHECK(b.out[1][2] == 1.0f);
}
