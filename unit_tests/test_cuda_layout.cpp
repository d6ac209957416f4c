// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A planning block's tables as the CUDA kernel lays them out (table_layout.hpp,
// plain C++), checked on the host so CI covers it without a GPU: every
// region 16-byte aligned and large enough, no two regions of the same time
// overlapping, C1's peer words inside the space of sorted .. bb that C1
// leaves unused (padded where that space is smaller), never over the
// entries and ranks C1 writes or the histograms after them, and eoff in
// hist's space.
#include "catch2_compat.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cuda_specializations/table_layout.hpp"

namespace {

using moonep::cuda::impl::acum_stride;
using moonep::cuda::impl::kWarps;
using moonep::cuda::impl::mark_words;
using moonep::cuda::impl::table_layout;
using moonep::cuda::impl::round_up4;
using moonep::cuda::impl::TableLayout;

struct Shape { int R, E, B, K, block_tokens; };

// (name, offset, words it must hold), in layout order, written out by hand
// from what each step stores (an expectation independent of
// block_tables.hpp's list); the shared regions peer and eoff are checked
// apart.
std::vector<std::pair<std::string, std::pair<std::int64_t, std::int64_t>>> regions(const TableLayout& l,
                                                                                     const Shape& s) {
  const std::int64_t ne = static_cast<std::int64_t>(s.block_tokens) * s.K, E = s.E, R = s.R;
  return {{"ent", {l.ent, ne}},
          {"pos", {l.pos, ne}},
          {"sorted", {l.sorted, ne}},
          {"sexp", {l.sexp, ne}},
          {"dd", {l.dd, ne}},
          {"mask", {l.mask, s.block_tokens}},
          {"base", {l.base, E}},
          {"key", {l.key, E}},
          {"rem", {l.rem, E}},
          {"bb", {l.bb, E}},
          {"hist", {l.hist, kWarps * E}},
          {"acum", {l.acum, E * acum_stride(s.R)}},
          {"cand", {l.cand, 2 * E}},
          {"cslot", {l.cslot, E}},
          {"etc", {l.etc, R * s.B}},
          {"mark", {l.mark, R * mark_words(s.E)}},
          {"load", {l.load, R}},
          {"bal", {l.bal, R}},
          {"from", {l.from, R}},
          {"quota", {l.quota, R}},
          {"ncand", {l.ncand, R}},
          {"copies", {l.copies, R}},
          {"cnt", {l.cnt, R}},
          {"gb", {l.gb, R}},
          {"lb", {l.lb, R}},
          {"scan", {l.scan, kWarps}},
          {"nprim", {l.nprim, 1}},
          {"sip", {l.sip, 2 * R}}};
}

}  // namespace

TEST_CASE("planning tables: aligned regions that do not overlap; the shared ones fit their space",
          "[cuda_layout]") {
  std::vector<Shape> shapes = {
      {8, 256, 32, 8, 274},   // the headline: sorted .. bb holds the peer words
      {8, 1024, 32, 8, 274},  // E = 1024: the peer words need padding
      {1, 4, 2, 2, 7},        {2, 8, 2, 2, 4},     {3, 12, 4, 4, 14},  {16, 256, 32, 8, 512},
      {32, 2048, 2, 2, 3},    {128, 128, 1, 1, 1}, {4, 8, 5, 3, 20},   {8, 64, 200, 8, 35},
      {32, 64, 2, 2, 40},     // R > kWarps: eoff [R][E] outgrows hist [kWarps][E]
  };
  for (int R : {1, 2, 5, 8, 17})
    for (int epn : {1, 3, 32})
      for (int K : {1, 8, 32}) shapes.push_back({R, R * epn, 3, K, 9 * R + 1});
  for (const Shape& s : shapes) {
    const TableLayout l = table_layout(s.R, s.E, s.B, s.K, s.block_tokens);
    INFO("R=" << s.R << " E=" << s.E << " B=" << s.B << " K=" << s.K << " block_tokens=" << s.block_tokens);
    const auto rs = regions(l, s);
    for (std::size_t i = 0; i < rs.size(); ++i) {
      INFO("region " << rs[i].first);
      CHECK(rs[i].second.first % 4 == 0);
      const std::int64_t end = rs[i].second.first + rs[i].second.second;
      if (i + 1 < rs.size()) CHECK(end <= rs[i + 1].second.first);
      else CHECK(end <= l.words);
    }
    // C1's peer words: after the entries and ranks C1 writes, before the
    // histograms, aligned.
    const std::int64_t peer_words = static_cast<std::int64_t>(kWarps) * s.E;
    CHECK(l.peer % 4 == 0);
    CHECK(l.peer >= l.pos + static_cast<std::int64_t>(s.block_tokens) * s.K);
    CHECK(l.peer + peer_words <= l.hist);
    // eoff [R][E] (steps 4-5 on) in hist's space, before acum.
    CHECK(l.eoff == l.hist);
    CHECK(l.eoff + static_cast<std::int64_t>(s.R) * s.E <= l.acum);
    CHECK(l.words % 4 == 0);
  }
}

TEST_CASE("planning tables: the headline's layout is the one measured (no layout change unnoticed)",
          "[cuda_layout]") {
  // The offsets the kernel's figures in perf_tests/README.md were measured
  // with (R=8 E=256 B=32 K=8, 274 tokens a block).
  const TableLayout l = table_layout(8, 256, 32, 8, 274);
  CHECK(l.peer == 4384);
  CHECK(l.hist == 12260);
  CHECK(l.sip == 19840);
  CHECK(l.words == 19856);
}

TEST_CASE("CUDA kernel: the destination search's first step covers ranks 0 .. R-1 and no more",
          "[cuda_layout]") {
  using moonep::cuda::impl::search_top;
  CHECK(search_top(1) == 0);
  CHECK(search_top(2) == 1);
  CHECK(search_top(8) == 4);
  CHECK(search_top(9) == 8);
  for (int R = 2; R <= moonep::cuda::impl::kMaxGroups; ++R) {
    INFO("R=" << R);
    const int top = search_top(R);
    CHECK((top & (top - 1)) == 0);  // a power of two
    // The ladder top, top/2, .. 1 reaches every d in [0, 2*top - 1]: all
    // of [0, R - 1], and R - 1 < 2*top means no step is wasted on d >= R.
    CHECK(top <= R - 1);
    CHECK(R - 1 < 2 * top);
  }
}
