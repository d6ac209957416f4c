// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Sizes the CUDA layers share: the bytes of one value of each element
// type, of its accumulation type (float for bf16, docs/spec/layer.md
// "Element types"), and the round-up that starts each buffer carved from
// one allocation on a 256-byte boundary.
#pragma once

#include <cstdint>

#include "moonep/cuda_layer.hpp"
#include "moonep/impl/alignment.hpp"

namespace moonep::cuda {

using ::moonep::impl::aligned16;

inline int element_bytes(Element e) { return e == Element::f64 ? 8 : (e == Element::bf16 ? 2 : 4); }
inline int accum_bytes(Element e) { return e == Element::f64 ? 8 : 4; }
inline std::int64_t aligned256(std::int64_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace moonep::cuda
