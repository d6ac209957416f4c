// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/alignment.hpp — whether a buffer may be moved in 16-byte
// pieces (int4, uint4, a receive slot of four int32), shared by the
// portable planner and the CUDA layers; no Kokkos, no CUDA.
#pragma once

#include <cstdint>

namespace moonep::impl {

inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace moonep::impl
