// moonep/impl/rank_plan_view.hpp — one rank's plan as Kokkos views (the
// outputs of docs/spec/planning.md "A rank's plan"), and its copy to the
// host, and the plan of a process's local ranks. Exposed as
// moonep::RankPlanView and moonep::Plan by moonep/planner.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moonep/config.hpp"
#include "moonep/host_plan.hpp"
#include "moonep/impl/kokkos_compat.hpp"

namespace moonep::impl {

template <class MemorySpace>
struct RankPlanView {
  using vec = Kokkos::View<std::int32_t*, MemorySpace>;
  using pairs = Kokkos::View<std::int32_t* [2], Kokkos::LayoutRight, MemorySpace>;
  using triples = Kokkos::View<std::int32_t* [3], Kokkos::LayoutRight, MemorySpace>;
  using table = Kokkos::View<std::int32_t**, Kokkos::LayoutRight, MemorySpace>;

  int rank = -1;
  vec dst;                 // [N]
  vec cu_seqlens;          // [E+B]
  pairs zero_fill_ranges;  // [E+B][2]
  table experts_to_copy;   // [R][B]
  vec remote_stats;        // [2]
  vec src_info;            // [NvS]
  triples dup_groups;      // [NvS][3], first dup_counts[0] rows meaningful
  vec dup_loffs;           // [NvS], first dup_counts[1] meaningful
  vec dup_counts;          // [2]

  // Views that own nothing yet (a planner points them at its buffers).
  RankPlanView() = default;
  explicit RankPlanView(int r) : rank(r) {}
  // Allocates every output of rank r.
  RankPlanView(const Config& c, int r) : rank(r) {
    const std::string p = "moonep::plan[" + std::to_string(r) + "].";
    const std::size_t G = static_cast<std::size_t>(c.groups());
    const std::size_t NvS = static_cast<std::size_t>(c.slots());
    dst = vec(Kokkos::view_alloc(Kokkos::WithoutInitializing, p + "dst"), c.entries());
    cu_seqlens = vec(p + "cu_seqlens", G);
    zero_fill_ranges = pairs(p + "zero_fill_ranges", G);
    experts_to_copy = table(p + "experts_to_copy", c.ranks, c.copy_slots);
    remote_stats = vec(p + "remote_stats", 2);
    src_info = vec(Kokkos::view_alloc(Kokkos::WithoutInitializing, p + "src_info"), NvS);
    dup_groups = triples(Kokkos::view_alloc(Kokkos::WithoutInitializing, p + "dup_groups"), NvS);
    dup_loffs = vec(Kokkos::view_alloc(Kokkos::WithoutInitializing, p + "dup_loffs"), NvS);
    dup_counts = vec(p + "dup_counts", 2);
  }

  // The plan in host memory (dup structures cut to their valid prefixes).
  HostRankPlan to_host() const {
    HostRankPlan h;
    copy(dst, h.dst);
    copy(cu_seqlens, h.cu_seqlens);
    copy(zero_fill_ranges, h.zero_fill_ranges);
    copy(experts_to_copy, h.experts_to_copy);
    copy(remote_stats, h.remote_stats);
    copy(src_info, h.src_info);
    copy(dup_counts, h.dup_counts);
    copy(dup_groups, h.dup_groups);
    copy(dup_loffs, h.dup_loffs);
    h.dup_groups.resize(3 * static_cast<std::size_t>(h.dup_counts[0]));
    h.dup_loffs.resize(static_cast<std::size_t>(h.dup_counts[1]));
    return h;
  }

 private:
  template <class View>
  static void copy(const View& v, std::vector<std::int32_t>& out) {
    out.resize(v.size());
    Kokkos::View<std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> host(out.data(), out.size());
    Kokkos::View<const std::int32_t*, MemorySpace, Kokkos::MemoryUnmanaged> flat(v.data(), v.size());
    Kokkos::deep_copy(host, flat);
  }
};

// The plan of the process's local ranks (ranks[i] is world.local_ranks()[i]).
template <class MemorySpace>
struct Plan {
  Config config;
  std::vector<RankPlanView<MemorySpace>> ranks;

  HostRankPlan to_host(std::size_t local_index) const { return ranks.at(local_index).to_host(); }
};

}  // namespace moonep::impl
