// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/bf16.hpp — bfloat16 on the host: 16 bits (sign, 8 exponent bits,
// 7 fraction bits), the upper half of an IEEE float. The reference layer
// (moonep/layer_reference.hpp) moves it as bits and computes in float; this
// type only converts. Converting from float rounds to nearest, ties to even;
// a NaN stays a NaN (quiet); infinities and signed zeros are kept.
#pragma once

#include <cstdint>
#include <cstring>

namespace moonep {

struct bf16 {
  std::uint16_t bits = 0;

  bf16() = default;
  explicit bf16(float value) : bits(from_float(value)) {}
  explicit operator float() const {
    const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &wide, sizeof f);
    return f;
  }

  static bf16 from_bits(std::uint16_t b) {
    bf16 v;
    v.bits = b;
    return v;
  }

 private:
  static std::uint16_t from_float(float value) {
    std::uint32_t u;
    std::memcpy(&u, &value, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)
      return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // NaN: keep sign, set the quiet bit
    // Round to nearest even on the 16 bits cut off; a carry into the
    // exponent is right (it rounds up to the next binade or to infinity).
    const std::uint32_t lsb = (u >> 16) & 1u;
    return static_cast<std::uint16_t>((u + 0x7fffu + lsb) >> 16);
  }
};

// Bits compare: the reference's results are checked bit for bit.
inline bool operator==(bf16 a, bf16 b) { return a.bits == b.bits; }
inline bool operator!=(bf16 a, bf16 b) { return a.bits != b.bits; }

}  // namespace moonep
