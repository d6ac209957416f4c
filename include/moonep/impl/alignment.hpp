// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/alignment.hpp — whether a buffer may be moved in 16-byte
// pieces (int4, uint4, a receive slot of four int32), shared by the
// portable planner and the CUDA layers; no Kokkos, no CUDA.
#pragma once

#include <cstdint>

namespace moonep::impl {

inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// Four int32 as one aligned 16-byte unit, so that a GPU moves them with one
// vector load or store (the portable planner's receive slots of four
// values, a block's entry ids in team scratch).
struct alignas(16) Int32x4 {
  std::int32_t v[4];
};

}  // namespace moonep::impl
