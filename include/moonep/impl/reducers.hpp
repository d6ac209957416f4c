// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/reducers.hpp — arg-max/arg-min reducers with the exact
// tie-breaks of docs/spec/planning.md. Kokkos' MaxLoc/MinLoc do not promise
// which index wins a tie, so steps 2-4 use these instead.
#pragma once

#include <cstdint>

#include "moonep/impl/kokkos_compat.hpp"

namespace moonep::impl {

struct ValueIndex {
  std::int64_t value;
  std::int32_t index;
};

// Best value (largest if kMax, else smallest); among equal values the
// lowest index wins unless kTieHighest. Identity: index -1 (never wins).
template <class Space, bool kMax, bool kTieHighest>
struct BestIndex {
  using reducer = BestIndex;
  using value_type = ValueIndex;
  using result_view_type = Kokkos::View<value_type, Space, Kokkos::MemoryUnmanaged>;

  value_type* ref_;

  KOKKOS_INLINE_FUNCTION explicit BestIndex(value_type& r) : ref_(&r) {}

  KOKKOS_INLINE_FUNCTION static bool better(std::int64_t av, std::int32_t ai, std::int64_t bv,
                                            std::int32_t bi) {
    if (bi < 0) return ai >= 0;
    if (ai < 0) return false;
    if (av != bv) return kMax ? av > bv : av < bv;
    return kTieHighest ? ai > bi : ai < bi;
  }
  // Folds one candidate into v (the update step of a team reduction).
  KOKKOS_INLINE_FUNCTION static void consider(value_type& v, std::int64_t value, std::int32_t index) {
    if (better(value, index, v.value, v.index)) {
      v.value = value;
      v.index = index;
    }
  }
  KOKKOS_INLINE_FUNCTION void join(value_type& dst, const value_type& src) const {
    if (better(src.value, src.index, dst.value, dst.index)) dst = src;
  }
#if MOONEP_KOKKOS_VOLATILE_JOIN
  KOKKOS_INLINE_FUNCTION void join(volatile value_type& dst, const volatile value_type& src) const {
    if (better(src.value, src.index, dst.value, dst.index)) {
      dst.value = src.value;
      dst.index = src.index;
    }
  }
#endif
  KOKKOS_INLINE_FUNCTION void init(value_type& v) const {
    v.value = 0;
    v.index = -1;
  }
  KOKKOS_INLINE_FUNCTION value_type& reference() const { return *ref_; }
  KOKKOS_INLINE_FUNCTION result_view_type view() const { return result_view_type(ref_); }
  KOKKOS_INLINE_FUNCTION bool references_scalar() const { return true; }
};

// Step 2 and 3: largest (or smallest) value, ties to the lowest index.
template <class Space> using MaxLowest = BestIndex<Space, true, false>;
template <class Space> using MinLowest = BestIndex<Space, false, false>;
// Step 4: largest value, ties to the largest index (expert id).
template <class Space> using MaxHighest = BestIndex<Space, true, true>;

}  // namespace moonep::impl
