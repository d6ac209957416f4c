// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/reducers.hpp — the picks of Phase B's steps 2 and 3 with the
// exact tie-breaks of docs/spec/planning.md, as packed keys and one
// reducer over two of them. Kokkos' MaxLoc/MinLoc do not promise which
// index wins a tie, and a key reduces with plain comparisons (a GPU vector
// reduction then moves 16 bytes a step, one for both picks of a round).
#pragma once

#include <cstdint>

#include "moonep/impl/kokkos_compat.hpp"

namespace moonep::impl {

// A pick: the winning value and its index.
struct ValueIndex {
  std::int64_t value;
  std::int32_t index;
};

// Two picks packed as keys (max_lowest_key / min_lowest_key below),
// reduced at once, each to its largest key: one vector reduction per round
// of Phase B's pick sequences on a GPU (step 2: the arg-max and the
// arg-min; step 3: the two arg-maxes), where two reductions of (value,
// index) pairs would cost twice the shuffles, one after the other.
// Identity: 0, below every key.
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
// key is a larger value, then among equal values a lower index (the
// largest value, ties to the lowest index: steps 2 and 3); min_lowest_key:
// a smaller value, then a lower index (the smallest, ties to the lowest:
// step 2's deficit). Every key is > 0.
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

}  // namespace moonep::impl
