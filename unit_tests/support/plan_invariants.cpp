// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The plan invariants of docs/spec/planning.md, checked from the outputs alone.
// Each check_* function returns "" or one line; check_plan_invariants chains
// them so the first violation is reported.
#include "support/plan_invariants.hpp"

#include <cstdint>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

namespace {

using moonep::Config;
using moonep::HostPlan;
using moonep::HostRankPlan;
using moonep::Routing;
using i64 = std::int64_t;

template <class... Parts>
std::string say(const Parts&... parts) {
  std::ostringstream m;
  (m << ... << parts);
  return m.str();
}

// Problem sizes, and what every check derives from the plan once.
struct Facts {
  int R, E, B, K, S, tp, epn, G;
  i64 NvS;
  // Per rank r: its tokens s_r, entries N_r = s_r*K and what it must
  // receive, CAP_r = T div R + (r < T mod R) with T = sum N_r
  // (docs/spec/planning.md "Ragged steps"; S*K everywhere on a full step).
  std::vector<i64> tokens, N, CAP;
  i64 tokens_given = -1;  // the length of tokens_per_rank when given
  // copy_slot[d][e]: slot b where rank d copies expert e, or -1.
  std::vector<std::vector<int>> copy_slot;
  // count[d][e]: entries of expert e that land on rank d (decoded from dst).
  std::vector<std::vector<i64>> count;
  // Lowest and highest slot of expert e's entries on rank d.
  std::vector<std::vector<i64>> min_loff, max_loff;
  // group_start[d][g]: start of group g on rank d (exclusive prefix of cu_seqlens).
  std::vector<std::vector<i64>> group_start;

  Facts(const Config& c, const moonep::TokensPerRank* tokens_per_rank)
      : R(c.ranks), E(c.experts), B(c.copy_slots), K(c.topk), S(c.tokens),
        tp(c.token_padding), epn(c.experts / c.ranks), G(c.experts + c.copy_slots),
        NvS(c.slots()) {
    if (tokens_per_rank) tokens_given = static_cast<i64>(tokens_per_rank->size());
    i64 T = 0;
    for (int r = 0; r < R; ++r) {
      const i64 s = tokens_per_rank && static_cast<int>(tokens_per_rank->size()) == R ? (*tokens_per_rank)[r] : S;
      tokens.push_back(s);
      N.push_back(s * K);
      T += s * K;
    }
    for (int r = 0; r < R; ++r) CAP.push_back(T / R + (r < T % R ? 1 : 0));
  }
  // Whether src_info value v names an entry of some rank.
  bool names_entry(i64 v) const { return v >= 0 && v / NvS < R && v % NvS < N[v / NvS]; }

  // Expert held by group g on rank d, or -1 for an empty group.
  int group_expert(const HostPlan& plan, int d, int g) const {
    if (g < E) return copy_slot[d][g] >= 0 ? -1 : g;
    return plan.ranks[d].experts_to_copy[static_cast<i64>(d) * B + (g - E)];
  }
  // Group of expert e on rank d.
  int group_of(int d, int e) const { return copy_slot[d][e] >= 0 ? E + copy_slot[d][e] : e; }
  i64 padded(i64 n) const { return n > 0 ? (n + tp - 1) / tp * tp : 0; }
};

std::string check_shapes(const Facts& f, const Routing& routing, const HostPlan& plan) {
  if (static_cast<int>(routing.size()) != f.R)
    return say("routing has ", routing.size(), " rank arrays, expected ", f.R);
  if (f.tokens_given >= 0 && f.tokens_given != f.R)
    return say("tokens_per_rank has ", f.tokens_given, " counts, expected ", f.R);
  for (int r = 0; r < f.R; ++r) {
    if (f.tokens[r] < 0 || f.tokens[r] > f.S)
      return say("tokens_per_rank[", r, "] = ", f.tokens[r], " is outside 0..S = ", f.S);
    if (static_cast<i64>(routing[r].size()) != f.N[r])
      return say("routing[", r, "] has ", routing[r].size(), " entries, expected ", f.N[r]);
    for (i64 i = 0; i < f.N[r]; ++i)
      if (routing[r][i] < 0 || routing[r][i] >= f.E)
        return say("routing[", r, "][", i, "] = ", routing[r][i], " is not an expert id");
  }
  if (static_cast<int>(plan.ranks.size()) != f.R)
    return say("plan has ", plan.ranks.size(), " ranks, expected ", f.R);
  for (int d = 0; d < f.R; ++d) {
    const HostRankPlan& p = plan.ranks[d];
    const struct {
      const char* name;
      const std::vector<std::int32_t>& v;
      i64 want;
    } arrays[] = {
        {"dst", p.dst, f.N[d]},
        {"cu_seqlens", p.cu_seqlens, f.G},
        {"zero_fill_ranges", p.zero_fill_ranges, 2 * static_cast<i64>(f.G)},
        {"experts_to_copy", p.experts_to_copy, static_cast<i64>(f.R) * f.B},
        {"remote_stats", p.remote_stats, 2},
        {"src_info", p.src_info, f.NvS},
        {"dup_counts", p.dup_counts, 2},
    };
    for (const auto& a : arrays)
      if (static_cast<i64>(a.v.size()) != a.want)
        return say("rank ", d, ": ", a.name, " has length ", a.v.size(), ", expected ", a.want);
    if (p.dup_counts[0] < 0 || p.dup_counts[1] < 0)
      return say("rank ", d, ": negative dup_counts (", p.dup_counts[0], ", ", p.dup_counts[1], ")");
    if (static_cast<i64>(p.dup_groups.size()) != 3 * static_cast<i64>(p.dup_counts[0]))
      return say("rank ", d, ": dup_groups has length ", p.dup_groups.size(), ", expected 3*",
                 p.dup_counts[0]);
    if (static_cast<i64>(p.dup_loffs.size()) != p.dup_counts[1])
      return say("rank ", d, ": dup_loffs has length ", p.dup_loffs.size(), ", expected ",
                 p.dup_counts[1]);
  }
  return "";
}

// Step 4's table, shape-level rules; fills f.copy_slot.
std::string check_copy_table(Facts& f, const HostPlan& plan) {
  const auto& table = plan.ranks[0].experts_to_copy;
  for (int d = 1; d < f.R; ++d)
    for (std::size_t i = 0; i < table.size(); ++i)
      if (plan.ranks[d].experts_to_copy[i] != table[i])
        return say("rank ", d, ": experts_to_copy[", i, "] = ", plan.ranks[d].experts_to_copy[i],
                   " but rank 0 has ", table[i], " (the table must be identical everywhere)");
  f.copy_slot.assign(f.R, std::vector<int>(f.E, -1));
  for (int d = 0; d < f.R; ++d) {
    bool seen_empty = false;
    for (int b = 0; b < f.B; ++b) {
      const int e = table[static_cast<i64>(d) * f.B + b];
      const auto at = say("experts_to_copy[", d, "][", b, "] = ", e);
      if (e < -1 || e >= f.E) return at + " is neither -1 nor an expert id";
      if (e == -1) {
        seen_empty = true;
        continue;
      }
      if (seen_empty) return at + " follows a -1 slot (picks stop at the first empty slot)";
      if (e / f.epn == d) return at + " copies an expert rank " + std::to_string(d) + " owns";
      if (f.copy_slot[d][e] >= 0) return at + " is also copied in slot " + std::to_string(f.copy_slot[d][e]);
      f.copy_slot[d][e] = b;
    }
  }
  return "";
}

std::int64_t decode(std::int32_t v) { return v >= 0 ? v : -static_cast<i64>(v) - 1; }

// Every entry's slot, the back pointer in src_info, the per-expert order;
// fills f.count, f.min_loff, f.max_loff.
std::string check_entries(Facts& f, const Routing& routing, const HostPlan& plan) {
  f.count.assign(f.R, std::vector<i64>(f.E, 0));
  f.min_loff.assign(f.R, std::vector<i64>(f.E, f.NvS));
  f.max_loff.assign(f.R, std::vector<i64>(f.E, -1));
  std::vector<i64> last(f.E, -1);  // last raw destination of each expert
  for (int r = 0; r < f.R; ++r) {
    for (i64 i = 0; i < f.N[r]; ++i) {
      const std::int32_t v = plan.ranks[r].dst[i];
      const i64 raw = decode(v);
      const auto at = say("rank ", r, ": dst[", i, "] = ", v);
      if (raw >= f.R * f.NvS) return at + " decodes past the last rank's slots";
      const int d = static_cast<int>(raw / f.NvS);
      const i64 loff = raw % f.NvS;
      const i64 me = r * f.NvS + i;
      const std::int32_t back = plan.ranks[d].src_info[loff];
      if (back != me) {
        std::string why = say(at, " -> (rank ", d, ", slot ", loff, ") but src_info there is ", back);
        if (f.names_entry(back) &&
            decode(plan.ranks[back / f.NvS].dst[back % f.NvS]) == raw)
          why += say(" (rank ", back / f.NvS, " entry ", back % f.NvS, " has the same slot)");
        return why;
      }
      const int e = routing[r][i];
      if (raw <= last[e])
        return say(at, ": entries of expert ", e,
                   " must land in (source rank, position) order, but an earlier one is at ", last[e]);
      last[e] = raw;
      ++f.count[d][e];
      f.min_loff[d][e] = std::min(f.min_loff[d][e], loff);
      f.max_loff[d][e] = std::max(f.max_loff[d][e], loff);
    }
  }
  return "";
}

// Step 5's layout against the counts, and src_info seen from the slots.
std::string check_layout(Facts& f, const Routing& routing, const HostPlan& plan) {
  f.group_start.assign(f.R, std::vector<i64>(f.G, 0));
  for (int d = 0; d < f.R; ++d) {
    const HostRankPlan& p = plan.ranks[d];
    i64 received = 0;
    for (int e = 0; e < f.E; ++e) received += f.count[d][e];
    if (received != f.CAP[d])
      return say("rank ", d, " receives ", received, " entries, expected CAP = ", f.CAP[d]);
    i64 start = 0;
    for (int g = 0; g < f.G; ++g) {
      const i64 end = p.cu_seqlens[g];
      const auto at = say("rank ", d, ": group ", g);
      if (end < start)
        return say(at, ": cu_seqlens = ", end, " is below the previous end ", start);
      f.group_start[d][g] = start;
      const int e = f.group_expert(plan, d, g);
      const i64 n = e >= 0 ? f.count[d][e] : 0;
      if (end - start != f.padded(n))
        return say(at, " (expert ", e, ", ", n, " entries): padded size ", end - start,
                   ", expected round_up(", n, ", ", f.tp, ") = ", f.padded(n));
      if (n > 0 && (f.min_loff[d][e] < start || f.max_loff[d][e] >= start + n))
        return say(at, " (expert ", e, "): entries at slots ", f.min_loff[d][e], "..",
                   f.max_loff[d][e], " but the group's entries are [", start, ", ", start + n, ")");
      const i64 pad = f.padded(n) - n;
      const i64 want_first = n > 0 && pad > 0 ? start + n : 0, want_len = n > 0 ? pad : 0;
      if (p.zero_fill_ranges[2 * g] != want_first || p.zero_fill_ranges[2 * g + 1] != want_len)
        return say(at, ": zero_fill_ranges = (", p.zero_fill_ranges[2 * g], ", ",
                   p.zero_fill_ranges[2 * g + 1], "), expected (", want_first, ", ", want_len, ")");
      start = end;
    }
    if (start > f.NvS) return say("rank ", d, ": cu_seqlens ends at ", start, " > NvS = ", f.NvS);

    // From the slot side: exactly CAP filled slots, the rest -1, each filled
    // one inside the group of the expert its entry names.
    i64 filled = 0;
    for (i64 loff = 0; loff < f.NvS; ++loff) {
      const std::int32_t s = p.src_info[loff];
      if (s == -1) continue;
      const auto at = say("rank ", d, ": src_info[", loff, "] = ", s);
      if (!f.names_entry(s)) return at + " names no entry";
      ++filled;
      const int e = routing[s / f.NvS][s % f.NvS];
      const int g = f.group_of(d, e);
      if (loff < f.group_start[d][g] || loff >= f.group_start[d][g] + f.count[d][e])
        return say(at, " holds expert ", e, " outside its group ", g, "'s entries");
    }
    if (filled != f.CAP[d])
      return say("rank ", d, ": src_info has ", filled, " filled slots, expected CAP = ", f.CAP[d]);
  }
  return "";
}

// Steps 2-4 seen from the result: one donor per receiver, underloaded owners
// keep their experts, remote_stats, the greedy copy choice.
std::string check_moves_and_copies(const Facts& f, const Routing& routing, const HostPlan& plan) {
  std::vector<i64> load(f.R, 0);
  for (int r = 0; r < f.R; ++r)
    for (std::int32_t e : routing[r]) ++load[e / f.epn];
  std::vector<int> copies_of(f.R, 0);
  for (int d = 0; d < f.R; ++d) {
    const HostRankPlan& p = plan.ranks[d];
    int donor = -1, remote = 0;
    for (int e = 0; e < f.E; ++e) {
      const int owner = e / f.epn;
      if (owner == d || f.count[d][e] == 0) continue;
      ++remote;
      if (donor >= 0 && donor != owner)
        return say("rank ", d, " receives experts of two owners, ranks ", donor, " and ", owner);
      donor = owner;
    }
    if (load[d] <= f.CAP[d]) {
      for (int j = 0; j < f.epn; ++j) {
        const int e = d * f.epn + j;
        i64 total = 0;
        for (int r = 0; r < f.R; ++r) total += f.count[r][e];
        if (f.count[d][e] != total)
          return say("rank ", d, " (load ", load[d], " <= CAP) computes ", f.count[d][e], " of its expert ",
                     e, "'s ", total, " entries");
      }
    }
    if (p.remote_stats[0] != remote)
      return say("rank ", d, ": remote_stats[0] = ", p.remote_stats[0], ", but ", remote,
                 " remote experts have entries there");
    // Greedy of step 4: picks in decreasing remote count, ties to the larger
    // id, as many as B allows; an unpicked remote expert must lose to the last.
    const auto& table = p.experts_to_copy;
    int picks = 0;
    for (int b = 0; b < f.B; ++b) {
      const int e = table[static_cast<i64>(d) * f.B + b];
      if (e < 0) break;
      ++picks;
      ++copies_of[e / f.epn];
      const auto at = say("experts_to_copy[", d, "][", b, "] = ", e);
      if (f.count[d][e] == 0) return at + " has no entries on that rank";
      if (b > 0) {
        const int prev = table[static_cast<i64>(d) * f.B + b - 1];
        if (f.count[d][e] > f.count[d][prev] ||
            (f.count[d][e] == f.count[d][prev] && e > prev))
          return say(at, " (", f.count[d][e], " entries) should come before expert ", prev, " (",
                     f.count[d][prev], " entries)");
      }
    }
    if (picks != std::min(remote, f.B))
      return say("rank ", d, ": copies ", picks, " experts, expected min(B, remote experts) = ",
                 std::min(remote, f.B));
    if (picks > 0) {
      const int last = table[static_cast<i64>(d) * f.B + picks - 1];
      for (int e = 0; e < f.E; ++e) {
        if (e / f.epn == d || f.count[d][e] == 0 || f.copy_slot[d][e] >= 0) continue;
        if (f.count[d][e] > f.count[d][last] || (f.count[d][e] == f.count[d][last] && e > last))
          return say("rank ", d, ": expert ", e, " (", f.count[d][e],
                     " entries) should be copied before expert ", last, " (", f.count[d][last], ")");
      }
    }
  }
  for (int h = 0; h < f.R; ++h)
    if (plan.ranks[h].remote_stats[1] != copies_of[h])
      return say("rank ", h, ": remote_stats[1] = ", plan.ranks[h].remote_stats[1], ", but ",
                 copies_of[h], " copies of its experts are made");
  return "";
}

using DupSets = std::map<std::int32_t, std::vector<std::int32_t>>;  // primary -> duplicates

// Dedup signs (step 7) and the dup structures (step 8) derived from dst.
std::string check_dedup(const Facts& f, const HostPlan& plan) {
  std::vector<DupSets> want(f.R);
  for (int r = 0; r < f.R; ++r) {
    const auto& dst = plan.ranks[r].dst;
    for (i64 s = 0; s < f.tokens[r]; ++s) {
      std::map<int, std::vector<std::int32_t>> slots_on;  // rank -> loffs in k order
      for (int k = 0; k < f.K; ++k) {
        const i64 i = static_cast<i64>(s) * f.K + k;
        const i64 raw = decode(dst[i]);
        const int d = static_cast<int>(raw / f.NvS);
        auto& list = slots_on[d];
        const bool first = list.empty();
        if (first != (dst[i] >= 0))
          return say("rank ", r, ": dst[", i, "] = ", dst[i], " (token ", s, ", k ", k, ") should be ",
                     first ? "non-negative: first entry of the token on rank "
                           : "negative: a later entry of the token on rank ",
                     d);
        list.push_back(static_cast<std::int32_t>(raw % f.NvS));
      }
      for (const auto& [d, loffs] : slots_on)
        if (loffs.size() > 1) want[d][loffs[0]] = std::vector<std::int32_t>(loffs.begin() + 1, loffs.end());
    }
  }
  for (int d = 0; d < f.R; ++d) {
    const HostRankPlan& p = plan.ranks[d];
    const int rows = p.dup_counts[0];
    const i64 n_loffs = p.dup_counts[1];
    std::vector<int> used(n_loffs, 0);
    DupSets got;
    for (int row = 0; row < rows; ++row) {
      const std::int32_t primary = p.dup_groups[3 * row], start = p.dup_groups[3 * row + 1],
                         n = p.dup_groups[3 * row + 2];
      const auto at = say("rank ", d, ": dup_groups row ", row, " = (", primary, ", ", start, ", ", n, ")");
      if (n < 1 || start < 0 || start + static_cast<i64>(n) > n_loffs)
        return at + " points outside dup_loffs[0, " + std::to_string(n_loffs) + ")";
      for (int j = start; j < start + n; ++j)
        if (used[j]++) return say(at, " reuses dup_loffs[", j, "]");
      if (!got.emplace(primary, std::vector<std::int32_t>(p.dup_loffs.begin() + start,
                                                          p.dup_loffs.begin() + start + n))
               .second)
        return at + " repeats a primary slot";
    }
    for (i64 j = 0; j < n_loffs; ++j)
      if (!used[j]) return say("rank ", d, ": dup_loffs[", j, "] belongs to no dup_groups row");
    for (const auto& [primary, dups] : want[d]) {
      auto it = got.find(primary);
      if (it == got.end()) return say("rank ", d, ": no dup group for primary slot ", primary);
      if (it->second != dups) {
        std::string list;
        for (auto v : dups) list += (list.empty() ? "" : ",") + std::to_string(v);
        return say("rank ", d, ": dup group of primary slot ", primary, " differs from the expected [",
                   list, "] (duplicates in increasing k)");
      }
    }
    if (got.size() != want[d].size())
      return say("rank ", d, ": ", got.size(), " dup groups, expected ", want[d].size());
  }
  return "";
}

}  // namespace

std::string check_plan_invariants(const moonep::Config& config, const moonep::Routing& routing,
                                  const moonep::HostPlan& plan, const moonep::TokensPerRank* tokens_per_rank) {
  Facts f(config, tokens_per_rank);
  std::string why = check_shapes(f, routing, plan);
  if (why.empty()) why = check_copy_table(f, plan);
  if (why.empty()) why = check_entries(f, routing, plan);
  if (why.empty()) why = check_layout(f, routing, plan);
  if (why.empty()) why = check_moves_and_copies(f, routing, plan);
  if (why.empty()) why = check_dedup(f, plan);
  return why;
}
