// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/rank_plan_view.hpp — one rank's plan as Kokkos views (the
// outputs of docs/spec/planning.md "A rank's plan"), and its copy to the
// host, and the plan of a process's local ranks. Exposed as
// moonep::RankPlanView and moonep::Plan by moonep/planner.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "moonep/config.hpp"
#include "moonep/host_plan.hpp"
#include "moonep/impl/kokkos_compat.hpp"
#include "moonep/impl/plan_fields.hpp"

namespace moonep::impl {

// The views, their allocation, aliasing and host copy are expanded from
// MOONEP_PLAN_FIELDS (moonep/impl/plan_fields.hpp): list fields are vec,
// pairs and triples fields [rows][2] / [rows][3], per_copy_slot fields
// [R][B] tables. Device views keep their capacity (dup_groups [NvS][3],
// dup_loffs [NvS]: only the prefixes dup_counts names are meaningful).
template <class MemorySpace>
struct RankPlanView {
  using vec = Kokkos::View<std::int32_t*, MemorySpace>;
  using pairs = Kokkos::View<std::int32_t* [2], Kokkos::LayoutRight, MemorySpace>;
  using triples = Kokkos::View<std::int32_t* [3], Kokkos::LayoutRight, MemorySpace>;
  using table = Kokkos::View<std::int32_t**, Kokkos::LayoutRight, MemorySpace>;
  template <FieldShape S>
  using view_of = std::conditional_t<
      S == FieldShape::list, vec,
      std::conditional_t<S == FieldShape::pairs, pairs, std::conditional_t<S == FieldShape::triples, triples, table>>>;

  int rank = -1;
  // N_r = s_r*K of the step planned last, one value: how many of dst's
  // values are meaningful (docs/spec/planning.md "Ragged steps"; the others
  // are undefined). Every planner points it at its count of the step; empty
  // only in views made here (RankPlanView(c, r)): then all of dst (S*K) is.
  using count = Kokkos::View<std::int32_t*, MemorySpace, Kokkos::MemoryUnmanaged>;
  count entries;
#define MOONEP_RANK_PLAN_VIEW_MEMBER(name, shape, ...) view_of<FieldShape::shape> name;
  MOONEP_PLAN_FIELDS(MOONEP_RANK_PLAN_VIEW_MEMBER)
#undef MOONEP_RANK_PLAN_VIEW_MEMBER

  // Views that own nothing yet (a planner points them at its buffers).
  RankPlanView() = default;
  explicit RankPlanView(int r) : rank(r) {}
  // Allocates every output of rank r.
  RankPlanView(const Config& c, int r) : rank(r) {
    const std::string p = "moonep::plan[" + std::to_string(r) + "].";
    for_each_field([&](std::size_t, const PlanField& f, auto& v) {
      using V = std::remove_reference_t<decltype(v)>;
      const std::string label = p + f.name;
      if (f.zeroed)
        v = make<V>(f, c, label);
      else
        v = make<V>(f, c, Kokkos::view_alloc(Kokkos::WithoutInitializing, label));
    });
  }

  // Rank r's plan as unmanaged views of buffers that hold every field's
  // capacity (field_capacity values): data_of(i) is field i's first value.
  template <class DataOf>
  static RankPlanView over(const Config& c, int r, DataOf&& data_of) {
    RankPlanView v(r);
    v.for_each_field([&](std::size_t i, const PlanField& f, auto& view) {
      using V = std::remove_reference_t<decltype(view)>;
      std::int32_t* data = data_of(i);
      view = make<V>(f, c, data);
    });
    return v;
  }

  // The plan in host memory (dup structures cut to their valid prefixes,
  // dst to its N_r entries).
  HostRankPlan to_host() const {
    HostRankPlan h;
    for_each_field([&](std::size_t i, const PlanField&, const auto& v) { copy(v, h.*kHostPlanMembers[i]); });
    if (entries.extent(0) == 1) {
      std::int32_t n = 0;
      Kokkos::deep_copy(Kokkos::View<std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(&n, 1), entries);
      h.dst.resize(static_cast<std::size_t>(n));
    }
    const std::int64_t rows = h.dup_counts[0], values = h.dup_counts[1];
    for (std::size_t i = 0; i < kPlanFieldCount; ++i) {
      const PlanField& f = kPlanFields[i];
      if (f.held == FieldHeld::whole) continue;
      (h.*kHostPlanMembers[i]).resize(static_cast<std::size_t>(field_prefix_values(f, rows, values)));
    }
    return h;
  }

  // f(index, field, view) for every field, in table order.
  template <class F>
  void for_each_field(F&& f) {
#define MOONEP_RANK_PLAN_VIEW_VISIT(name, ...) f(plan_field_index::name, kPlanFields[plan_field_index::name], name);
    MOONEP_PLAN_FIELDS(MOONEP_RANK_PLAN_VIEW_VISIT)
  }
  template <class F>
  void for_each_field(F&& f) const {
    MOONEP_PLAN_FIELDS(MOONEP_RANK_PLAN_VIEW_VISIT)
#undef MOONEP_RANK_PLAN_VIEW_VISIT
  }

 private:
  // A view of field f's shape: allocated (`first` a label or view_alloc
  // properties) or over memory (`first` a pointer).
  template <class V, class First>
  static V make(const PlanField& f, const Config& c, First&& first) {
    const std::size_t rows = static_cast<std::size_t>(field_rows(f, c));
    if constexpr (std::is_same_v<V, table>)
      return V(std::forward<First>(first), rows, static_cast<std::size_t>(field_columns(f, c)));
    else
      return V(std::forward<First>(first), rows);
  }

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
