// moonep/impl/portable_types.hpp — shorthands shared by the portable
// planner's phases (all templates on the Kokkos execution space).
#pragma once

#include <cstdint>

#include "moonep/impl/kokkos_compat.hpp"

namespace moonep::impl::portable {

template <class ExecutionSpace>
struct Types {
  using exec = ExecutionSpace;
  using mem = typename ExecutionSpace::memory_space;
  using ivec = Kokkos::View<std::int32_t*, mem>;
  using civec = Kokkos::View<const std::int32_t*, mem>;
  using imat = Kokkos::View<std::int32_t**, Kokkos::LayoutRight, mem>;
  using range = Kokkos::RangePolicy<ExecutionSpace>;
  using team_policy = Kokkos::TeamPolicy<ExecutionSpace>;
  using member = typename team_policy::member_type;
  using scratch_space = typename ExecutionSpace::scratch_memory_space;
  using scratch_i64 = Kokkos::View<std::int64_t*, scratch_space, Kokkos::MemoryUnmanaged>;
  using scratch_i32 = Kokkos::View<std::int32_t*, scratch_space, Kokkos::MemoryUnmanaged>;
};

// Round count up to a multiple of tp (0 stays 0).
KOKKOS_INLINE_FUNCTION std::int64_t padded_size(std::int64_t count, std::int64_t tp) {
  return count > 0 ? (count + tp - 1) / tp * tp : 0;
}

}  // namespace moonep::impl::portable
