// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/exact_arith.hpp — a product rounded on its own, never fused
// with the addition that follows it. GPU compilers contract a*b + c into one
// fused multiply-add (one rounding instead of two) by default; the host's
// reference rounds both, so every layer kernel that multiplies and then adds
// takes its products from here to give the reference's bits on any device.
#pragma once

#include "moonep/impl/kokkos_compat.hpp"

namespace moonep::impl {

KOKKOS_INLINE_FUNCTION float product_rn(float a, float b) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

KOKKOS_INLINE_FUNCTION double product_rn(double a, double b) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

}  // namespace moonep::impl
