// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/chunk_layout.hpp — where the portable planner keeps what it
// exchanges inside each rank's chunk of the symmetric buffer. Every chunk
// has the same layout; offsets count int32 values.
//
// How a value reaches another rank's region (moonep/world.hpp): stored in
// place when the destination is a local rank of a directly addressable
// (DA) world, else through put_runs; the shared tables are not copied at
// all in a DA world (every rank reads them in rank 0's chunk).
#pragma once

#include <cstdint>

#include "moonep/config.hpp"

namespace moonep::impl {

struct ChunkLayout {
  int R = 1, E = 1, B = 1, K = 1, S = 1, epn = 1, tp = 1;
  std::int64_t N = 1, NvS = 1;
  // Bound on the (expert, destination rank) pairs with alloc > 0: at most E
  // owner pairs, and each step-3 iteration that adds a remote pair empties a
  // quota (one per receiver, R in all) or an expert (E in all).
  std::int64_t pair_capacity = 1;

  // [R][E] tokens per expert, row r = rank r's (Phase A; read on rank 0).
  std::int64_t tpe_in = 0;
  // Tables rank 0 computes (Phase B) in its own chunk for every rank; DA
  // worlds read them there in place, other worlds get a copy put into the
  // same offsets of each rank's chunk:
  //   expert_ptr [E+1]             pairs of expert e are [ptr[e], ptr[e+1])
  //   experts_to_copy [R][B]       step 4
  //   pairs [pair_capacity][3]     (dest rank d, acum[e][d], d*NvS + expert_offset[d][e] - acum[e][d-1])
  std::int64_t shared = 0;
  std::int64_t sh_ptr = 0, sh_etc = 0, sh_pairs = 0, shared_len = 0;
  // Tables rank 0 computes for each rank r alone, in r's chunk:
  //   cum_excl [E] (cum[r-1][e]), cu_seqlens [E+B], zero_fill [E+B][2], remote_stats [2]
  std::int64_t own = 0;
  std::int64_t ow_cum = 0, ow_cu = 0, ow_zfr = 0, ow_rs = 0, own_len = 0;
  // [NvS][slot_ints] per receive slot: (src_info, dup link, dup index),
  // written by the source ranks in Phase C2. dup link: -1 none, -2-n
  // primary of a token with n duplicates here, else the primary's slot
  // (this slot is a duplicate, number `dup index` in increasing k).
  // slot_ints: 3 in the host form; 4 in the device form (a fourth value
  // nobody reads), with `slots` and `total` multiples of 4, so that on a
  // GPU a slot is one aligned 16-byte store (Phase C2's stores to
  // scattered slots were most of its time: 3 separate stores each).
  std::int64_t slots = 0;
  std::int64_t total = 0;
  int slot_ints = 3;

  explicit ChunkLayout(const Config& c, int slot_ints_ = 3) : slot_ints(slot_ints_) {
    R = c.ranks; E = c.experts; B = c.copy_slots; K = c.topk; S = c.tokens;
    epn = c.experts_per_rank(); tp = c.token_padding;
    N = c.entries(); NvS = c.slots();
    pair_capacity = 2 * static_cast<std::int64_t>(E) + R;
    std::int64_t at = 0;
    tpe_in = at; at += static_cast<std::int64_t>(R) * E;
    shared = at;
    sh_ptr = 0; sh_etc = E + 1; sh_pairs = sh_etc + static_cast<std::int64_t>(R) * B;
    shared_len = sh_pairs + 3 * pair_capacity;
    at += shared_len;
    own = at;
    ow_cum = 0; ow_cu = E; ow_zfr = ow_cu + E + B; ow_rs = ow_zfr + 2 * (E + B);
    own_len = ow_rs + 2;
    at += own_len;
    if (slot_ints == 4) at = (at + 3) / 4 * 4;
    slots = at; at += slot_ints * NvS;
    total = slot_ints == 4 ? (at + 3) / 4 * 4 : at;
  }
};

}  // namespace moonep::impl
