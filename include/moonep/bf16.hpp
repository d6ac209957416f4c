// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/bf16.hpp — bfloat16: 16 bits (sign, 8 exponent bits, 7 fraction
// bits), the upper half of an IEEE float. The reference layer
// (moonep/layer_reference.hpp) and the portable Kokkos layer
// (moonep/layer.hpp, any execution space, Kokkos::Cuda included) move it as
// bits and compute in float; this type only converts. Converting from float
// rounds to nearest, ties to even; a NaN stays a NaN (quiet); infinities and
// signed zeros are kept.
//
// A plain 16-bit struct whose conversions are host and device functions
// (under nvcc or hipcc; plain inline functions elsewhere), so that it is the
// same type, with the same bits, on every Kokkos version and execution
// space: Kokkos 3.4 has no bfloat16, and Kokkos 4's bhalf_t converts through
// the device's own intrinsics on the GPU and by other code on the host. No
// Kokkos header is needed (the reference library is compiled without one).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define MOONEP_BF16_FUNCTION __host__ __device__ inline
#else
#define MOONEP_BF16_FUNCTION inline
#endif

namespace moonep {

namespace impl {
// A float's bits and back (std::bit_cast is C++20): the device intrinsics
// in CUDA and HIP device code, memcpy elsewhere.
MOONEP_BF16_FUNCTION std::uint32_t float_bits(float value) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __float_as_uint(value);
#else
  std::uint32_t u;
  std::memcpy(&u, &value, sizeof u);
  return u;
#endif
}
MOONEP_BF16_FUNCTION float float_of_bits(std::uint32_t bits) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}
}  // namespace impl

struct bf16 {
  std::uint16_t bits = 0;

  bf16() = default;
  MOONEP_BF16_FUNCTION explicit bf16(float value) : bits(from_float(value)) {}
  MOONEP_BF16_FUNCTION explicit operator float() const {
    return impl::float_of_bits(static_cast<std::uint32_t>(bits) << 16);
  }

  MOONEP_BF16_FUNCTION static bf16 from_bits(std::uint16_t b) {
    bf16 v;
    v.bits = b;
    return v;
  }

  MOONEP_BF16_FUNCTION static std::uint16_t from_float(float value) {
    const std::uint32_t u = impl::float_bits(value);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)
      return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // NaN: keep sign, set the quiet bit
    // Round to nearest even on the 16 bits cut off; a carry into the
    // exponent is right (it rounds up to the next binade or to infinity).
    const std::uint32_t lsb = (u >> 16) & 1u;
    return static_cast<std::uint16_t>((u + 0x7fffu + lsb) >> 16);
  }
};

static_assert(sizeof(bf16) == 2, "moonep::bf16 is 16 bits");

// Bits compare: the reference's results are checked bit for bit.
MOONEP_BF16_FUNCTION bool operator==(bf16 a, bf16 b) { return a.bits == b.bits; }
MOONEP_BF16_FUNCTION bool operator!=(bf16 a, bf16 b) { return a.bits != b.bits; }

}  // namespace moonep
