// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The reference planner: docs/spec/planning.md steps 1-8, serial, for all ranks
// at once. Each step is a function named after it; the data flow between them
// is spelled out in plan_reference() at the bottom. Clarity over speed.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "moonep/reference.hpp"
#include "moonep/synthetic.hpp"

namespace moonep {
namespace {

using i64 = std::int64_t;
using Matrix = std::vector<std::vector<i64>>;  // [rows][cols]

Matrix zeros(int rows, int cols) { return Matrix(rows, std::vector<i64>(cols, 0)); }

// Index of the largest value, ties to the lowest index.
int argmax_lowest(const std::vector<i64>& v) {
  int best = 0;
  for (int i = 1; i < static_cast<int>(v.size()); ++i)
    if (v[i] > v[best]) best = i;
  return best;
}
// Index of the smallest value, ties to the lowest index.
int argmin_lowest(const std::vector<i64>& v) {
  int best = 0;
  for (int i = 1; i < static_cast<int>(v.size()); ++i)
    if (v[i] < v[best]) best = i;
  return best;
}
// Index of the largest value, ties to the largest index.
int argmax_highest(const std::vector<i64>& v) {
  int best = 0;
  for (int i = 1; i < static_cast<int>(v.size()); ++i)
    if (v[i] >= v[best]) best = i;
  return best;
}

// Step 2: rank-level moves z[donor][receiver]. The balances are against
// CAP_g ("Ragged steps": S*K on a full step).
Matrix rank_moves(const Config& c, const std::vector<i64>& load) {
  const int R = c.ranks;
  i64 T = 0;
  for (int g = 0; g < R; ++g) T += load[g];
  std::vector<i64> balance(R);
  for (int g = 0; g < R; ++g) balance[g] = load[g] - ragged_capacity(T, R, g);
  Matrix z = zeros(R, R);
  for (;;) {
    const int sr = argmax_lowest(balance);
    const int dr = argmin_lowest(balance);
    const i64 surplus = balance[sr], deficit = balance[dr];
    if (surplus <= 0 || deficit >= 0) break;
    const i64 move = -deficit;
    balance[sr] -= move;
    balance[dr] = 0;
    z[sr][dr] = move;
  }
  return z;
}

// Step 3: alloc[r][e], entries of expert e computed on rank r.
Matrix expert_split(const Config& c, const std::vector<i64>& total, const Matrix& z) {
  const int R = c.ranks, E = c.experts, epn = c.experts_per_rank();
  Matrix alloc = zeros(R, E);
  for (int h = 0; h < R; ++h) {
    std::vector<i64> quota(R), remaining(epn);
    for (int j = 0; j < epn; ++j) {
      alloc[h][h * epn + j] = total[h * epn + j];
      remaining[j] = total[h * epn + j];
    }
    for (int r = 0; r < R; ++r) quota[r] = z[h][r];
    for (;;) {
      const int t = argmax_lowest(quota);
      if (quota[t] <= 0) break;
      const int j = argmax_lowest(remaining);
      if (remaining[j] <= 0) break;
      const i64 take = std::min(remaining[j], quota[t]);
      quota[t] -= take;
      remaining[j] -= take;
      alloc[t][h * epn + j] += take;
      alloc[h][h * epn + j] -= take;
    }
  }
  return alloc;
}

// Step 4: experts_to_copy of every rank and remote_stats.
void copy_selection(const Config& c, const Matrix& alloc, std::vector<HostRankPlan>& plans) {
  const int R = c.ranks, E = c.experts, B = c.copy_slots, epn = c.experts_per_rank();
  for (int d = 0; d < R; ++d) {
    std::vector<i64> remote(E, 0);
    int with_tokens = 0;
    for (int e = 0; e < E; ++e) {
      remote[e] = (e / epn != d) ? alloc[d][e] : 0;
      if (remote[e] > 0) ++with_tokens;
    }
    plans[d].remote_stats[0] = with_tokens;
    for (int b = 0; b < B; ++b) {
      const int e = argmax_highest(remote);
      if (remote[e] > 0) {
        remote[e] = 0;
        ++plans[e / epn].remote_stats[1];
        for (int rr = 0; rr < R; ++rr) plans[rr].experts_to_copy[d * B + b] = e;
      } else {
        for (int rr = 0; rr < R; ++rr) plans[rr].experts_to_copy[d * B + b] = -1;
      }
    }
  }
}

// Step 5: layout of rank d's receive buffer. Returns expert_offset[d][e]
// (-1 for experts with no group of their own on d).
Matrix layout(const Config& c, const Matrix& alloc, std::vector<HostRankPlan>& plans) {
  const int R = c.ranks, E = c.experts, B = c.copy_slots, tp = c.token_padding;
  Matrix expert_offset(R, std::vector<i64>(E, -1));
  for (int d = 0; d < R; ++d) {
    HostRankPlan& p = plans[d];
    std::vector<bool> picked(E, false);
    for (int b = 0; b < B; ++b) {
      const int e = p.experts_to_copy[d * B + b];
      if (e >= 0) picked[e] = true;
    }
    i64 start = 0;
    for (int g = 0; g < E + B; ++g) {
      int expert = -1;
      if (g < E) {
        if (!picked[g]) expert = g;
      } else {
        expert = p.experts_to_copy[d * B + (g - E)];
      }
      const i64 count = expert >= 0 ? alloc[d][expert] : 0;
      const i64 padded = count > 0 ? (count + tp - 1) / tp * tp : 0;
      if (expert >= 0) expert_offset[d][expert] = start;
      p.cu_seqlens[g] = static_cast<std::int32_t>(start + padded);
      if (count > 0 && padded > count) {
        p.zero_fill_ranges[2 * g] = static_cast<std::int32_t>(start + count);
        p.zero_fill_ranges[2 * g + 1] = static_cast<std::int32_t>(padded - count);
      }
      start += padded;
    }
  }
  return expert_offset;
}

// Step 6: dst of every entry and src_info of every slot.
void destinations(const Config& c, const Routing& routing, const Matrix& cum,
                  const Matrix& alloc, const Matrix& expert_offset,
                  std::vector<HostRankPlan>& plans) {
  const int R = c.ranks, E = c.experts;
  const i64 NvS = c.slots();
  // acum[e][r]: prefix over ranks of alloc[r][e].
  Matrix acum = zeros(E, R);
  for (int e = 0; e < E; ++e) {
    i64 run = 0;
    for (int r = 0; r < R; ++r) acum[e][r] = (run += alloc[r][e]);
  }
  for (int r = 0; r < R; ++r) {
    std::vector<i64> seen(E, 0);
    const auto& ids = routing[r];
    for (i64 i = 0; i < static_cast<i64>(ids.size()); ++i) {
      const int e = ids[i];
      const i64 G = (r > 0 ? cum[r - 1][e] : 0) + seen[e]++;
      int d = 0;
      while (acum[e][d] <= G) ++d;
      const i64 p = d > 0 ? acum[e][d - 1] : 0;
      const i64 loff = expert_offset[d][e] + G - p;
      plans[r].dst[i] = static_cast<std::int32_t>(d * NvS + loff);
      plans[d].src_info[loff] = static_cast<std::int32_t>(r * NvS + i);
    }
  }
}

// Step 7: within a token, later entries bound for an already-used
// destination rank are stored as -dst-1.
void dedup(const Config& c, std::vector<HostRankPlan>& plans) {
  const int K = c.topk;
  const i64 NvS = c.slots();
  for (auto& p : plans) {
    const i64 tokens = static_cast<i64>(p.dst.size()) / K;  // s_r
    for (i64 s = 0; s < tokens; ++s) {
      std::vector<i64> used;
      for (int k = 0; k < K; ++k) {
        std::int32_t& v = p.dst[static_cast<i64>(s) * K + k];
        const i64 d = v / NvS;
        if (std::find(used.begin(), used.end(), d) != used.end()) {
          v = -v - 1;
        } else {
          used.push_back(d);
        }
      }
    }
  }
}

// Step 8: dup structures of every destination rank. Groups are emitted in
// order of (source rank, token); the spec lets row order vary.
void dup_structures(const Config& c, std::vector<HostRankPlan>& plans) {
  const int R = c.ranks, K = c.topk;
  const i64 NvS = c.slots();
  for (int r = 0; r < R; ++r) {
    const auto& dst = plans[r].dst;
    const i64 tokens = static_cast<i64>(dst.size()) / K;  // s_r
    for (i64 s = 0; s < tokens; ++s) {
      for (int k = 0; k < K; ++k) {
        const std::int32_t v = dst[static_cast<i64>(s) * K + k];
        if (v < 0) continue;  // a duplicate; handled with its primary
        const i64 d = v / NvS;
        HostRankPlan& dp = plans[d];
        const std::int32_t start = static_cast<std::int32_t>(dp.dup_loffs.size());
        for (int k2 = k + 1; k2 < K; ++k2) {
          const std::int32_t w = dst[static_cast<i64>(s) * K + k2];
          if (w >= 0) continue;
          const i64 raw = -static_cast<i64>(w) - 1;
          if (raw / NvS == d) dp.dup_loffs.push_back(static_cast<std::int32_t>(raw % NvS));
        }
        const std::int32_t n = static_cast<std::int32_t>(dp.dup_loffs.size()) - start;
        if (n > 0) {
          dp.dup_groups.insert(dp.dup_groups.end(),
                               {static_cast<std::int32_t>(v % NvS), start, n});
        }
      }
    }
  }
  for (auto& p : plans) {
    p.dup_counts = {static_cast<std::int32_t>(p.dup_groups.size() / 3),
                    static_cast<std::int32_t>(p.dup_loffs.size())};
  }
}

}  // namespace

HostPlan plan_reference(const Config& c, const Routing& routing, const TokensPerExpert* given,
                        const TokensPerRank* tokens_per_rank) {
  validate_problem(c, routing, given, tokens_per_rank);
  const int R = c.ranks, E = c.experts, B = c.copy_slots, epn = c.experts_per_rank();
  const i64 NvS = c.slots();

  HostPlan out;
  out.config = c;
  out.ranks.resize(R);
  if (tokens_per_rank) out.tokens_per_rank = *tokens_per_rank;
  for (int r = 0; r < R; ++r) {
    HostRankPlan& p = out.ranks[r];
    p.dst.assign(routing[r].size(), 0);  // N_r = s_r*K (validated)
    p.cu_seqlens.assign(E + B, 0);
    p.zero_fill_ranges.assign(2 * (E + B), 0);
    p.experts_to_copy.assign(static_cast<std::size_t>(R) * B, -1);
    p.remote_stats.assign(2, 0);
    p.src_info.assign(NvS, -1);
  }

  // Step 1: totals.
  const TokensPerExpert tpe = count_tokens_per_expert(c, routing);
  Matrix cum = zeros(R, E);
  for (int e = 0; e < E; ++e) {
    i64 run = 0;
    for (int r = 0; r < R; ++r) cum[r][e] = (run += tpe[r][e]);
  }
  std::vector<i64> total(E), load(R, 0);
  for (int e = 0; e < E; ++e) {
    total[e] = cum[R - 1][e];
    load[e / epn] += total[e];
  }

  const Matrix z = rank_moves(c, load);                      // step 2
  const Matrix alloc = expert_split(c, total, z);            // step 3
  copy_selection(c, alloc, out.ranks);                       // step 4
  const Matrix offset = layout(c, alloc, out.ranks);         // step 5
  destinations(c, routing, cum, alloc, offset, out.ranks);   // step 6
  dedup(c, out.ranks);                                       // step 7
  dup_structures(c, out.ranks);                              // step 8
  return out;
}

}  // namespace moonep
