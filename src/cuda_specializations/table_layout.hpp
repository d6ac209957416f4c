// Private: one planning block's tables (plan_step_kernel.cu), in int32
// words. The host sizes the launch, decides where the tables live (shared
// memory when they fit, else each block's slice of global memory) and
// passes the regions in the launch parameters with the same function the
// kernel carves its memory by. Plain C++ (constexpr, so device code may
// call it).
#pragma once

#include <cstdint>

#include "kernel_params.hpp"

namespace moonep::cuda::impl {

// Words per destination of the copy-slot bitmap.
constexpr int mark_words(int E) { return (E + 31) / 32; }

struct TableLayout {
  std::int64_t ent, pos, sorted, sexp, dd, mask;  // per entry / token of the block
  std::int64_t base, key, rem, bb;          // per expert
  std::int64_t hist;                        // [max(kWarps, R)][E]: warp counts, then eoff
  std::int64_t acum, cand, cslot, etc, mark;  // the plan's tables
  std::int64_t peer;                        // [kWarps][E] C1's peer words (in sorted .. bb)
  std::int64_t small;                       // nine [R] arrays, [kWarps] scan scratch, one count
  std::int64_t sip;                         // [R] pointers (2 words each): each destination's src_info
  std::int64_t words;
};

// Every region starts on a 16-byte boundary (load_token's int4 loads).
constexpr std::int64_t round_up4(std::int64_t n) { return n > 0 ? (n + 3) & ~3LL : 4; }

constexpr TableLayout table_layout(int R, int E, int B, int K, int block_tokens) {
  const std::int64_t ne = static_cast<std::int64_t>(block_tokens) * K, e = E;
  const std::int64_t rows = R > kWarps ? R : kWarps;
  TableLayout l{};
  std::int64_t at = 0;
  l.ent = at; at += round_up4(ne);
  l.pos = at; at += round_up4(ne);
  l.sorted = at; at += round_up4(ne);
  l.sexp = at; at += round_up4(ne);
  l.dd = at; at += round_up4(ne);
  l.mask = at; at += round_up4(block_tokens);
  l.base = at; at += round_up4(e);
  l.key = at; at += round_up4(e);
  l.rem = at; at += round_up4(e);
  l.bb = at; at += round_up4(e);
  // C1's peer words [kWarps][E] share the space of sorted .. bb, which C1
  // leaves unused; padded where that space is smaller.
  l.peer = l.sorted;
  if (at - l.sorted < kWarps * e) at = l.sorted + round_up4(kWarps * e);
  l.hist = at; at += round_up4(rows * e);
  l.acum = at; at += round_up4(e * acum_stride(R));
  l.cand = at; at += round_up4(2 * e);
  l.cslot = at; at += round_up4(e);
  l.etc = at; at += round_up4(static_cast<std::int64_t>(R) * B);
  l.mark = at; at += round_up4(static_cast<std::int64_t>(R) * mark_words(E));
  l.small = at; at += 9 * round_up4(R) + kWarps + 4;  // + the primary count (steps 7-8)
  at = round_up4(at);
  l.sip = at; at += round_up4(2 * static_cast<std::int64_t>(R));
  l.words = round_up4(at);
  return l;
}

// The regions as the kernel's launch parameters carry them (words < 2^31:
// shared tables fit a device's shared memory; the host refuses global
// tables of 2^31 words or more).
inline TableRegions table_regions(const TableLayout& l) {
  auto w = [](std::int64_t v) { return static_cast<int>(v); };
  return TableRegions{w(l.ent),  w(l.pos),  w(l.sorted), w(l.sexp),  w(l.dd),   w(l.mask), w(l.base),
                      w(l.key),  w(l.rem),  w(l.bb),     w(l.hist),  w(l.acum), w(l.cand), w(l.cslot),
                      w(l.etc),  w(l.mark), w(l.peer),   w(l.small), w(l.sip)};
}

}  // namespace moonep::cuda::impl
