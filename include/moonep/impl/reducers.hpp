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

// Two picks packed as keys (max_lowest_key / min_lowest_key below),
// reduced at once, each to its largest key: one vector reduction per round
// of Phase B's pick sequences on a GPU (step 2: the arg-max and the
// arg-min; step 3: the two arg-maxes), where two reductions of ValueIndex
// would cost twice the shuffles, in sequence. Identity: 0, below every key.
struct KeyPair {
  std::uint64_t first;
  std::uint64_t second;
};

template <class Space>
struct MaxKeys {
  using reducer = MaxKeys;
  using value_type = KeyPair;
  using result_view_type = Kokkos::View<value_type, Space, Kokkos::MemoryUnmanaged>;

  value_type* ref_;

  KOKKOS_INLINE_FUNCTION explicit MaxKeys(value_type& r) : ref_(&r) {}

  // Folds one candidate of each pick into v (a 0 key: none).
  KOKKOS_INLINE_FUNCTION static void consider(value_type& v, std::uint64_t first, std::uint64_t second) {
    if (first > v.first) v.first = first;
    if (second > v.second) v.second = second;
  }
  KOKKOS_INLINE_FUNCTION void join(value_type& dst, const value_type& src) const {
    consider(dst, src.first, src.second);
  }
#if MOONEP_KOKKOS_VOLATILE_JOIN
  KOKKOS_INLINE_FUNCTION void join(volatile value_type& dst, const volatile value_type& src) const {
    if (src.first > dst.first) dst.first = src.first;
    if (src.second > dst.second) dst.second = src.second;
  }
#endif
  KOKKOS_INLINE_FUNCTION void init(value_type& v) const {
    v.first = 0;
    v.second = 0;
  }
  KOKKOS_INLINE_FUNCTION value_type& reference() const { return *ref_; }
  KOKKOS_INLINE_FUNCTION result_view_type view() const { return result_view_type(ref_); }
  KOKKOS_INLINE_FUNCTION bool references_scalar() const { return true; }
};

// A candidate (value, index) as one key whose order is the pick's: value
// in int32's range (balances, quotas and counts of one step: below
// R*NvS < 2^31 in size), index in 0 .. 2^32 - 2, the value in the high 32
// bits (offset by 2^31), the index in the low 32. max_lowest_key: a larger
// key is a larger value, then a lower index (MaxLowest's order);
// min_lowest_key: a smaller value, then a lower index (MinLowest's). Every
// key is > 0.
KOKKOS_INLINE_FUNCTION std::uint64_t max_lowest_key(std::int64_t value, std::int64_t index) {
  return (static_cast<std::uint64_t>(value + 2147483648LL) << 32) | (0xffffffffULL - static_cast<std::uint64_t>(index));
}
KOKKOS_INLINE_FUNCTION std::uint64_t min_lowest_key(std::int64_t value, std::int64_t index) {
  return ~((static_cast<std::uint64_t>(value + 2147483648LL) << 32) | static_cast<std::uint64_t>(index));
}
// The candidate a winning key stands for.
KOKKOS_INLINE_FUNCTION ValueIndex from_max_lowest(std::uint64_t key) {
  return ValueIndex{static_cast<std::int64_t>(key >> 32) - 2147483648LL,
                    static_cast<std::int32_t>(0xffffffffULL - (key & 0xffffffffULL))};
}
KOKKOS_INLINE_FUNCTION ValueIndex from_min_lowest(std::uint64_t key) {
  return from_max_lowest(~key ^ 0xffffffffULL);
}

// Step 2 and 3: largest (or smallest) value, ties to the lowest index.
template <class Space> using MaxLowest = BestIndex<Space, true, false>;
template <class Space> using MinLowest = BestIndex<Space, false, false>;
// Step 4: largest value, ties to the largest index (expert id).
template <class Space> using MaxHighest = BestIndex<Space, true, true>;

}  // namespace moonep::impl
