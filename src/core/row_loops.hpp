// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: the elementwise loops over one row that the host layers run on
// every slot (the MPI combine's prologue and the sources' sums). Each
// element is its own product or sum, so vector width cannot change a bit:
// the results equal the reference's term for term (products and sums in
// A, rounded to T once; no FMA, MoonEP builds with -ffp-contract=off).
//
// Why a separate file: a plain x86-64 build only has SSE2, and these loops
// are most of the combine's time. On x86-64 Linux, with a compiler that
// has `target_clones` for these functions (GCC; not Clang 14, not nvcc),
// each is compiled for AVX-512, AVX2 and the baseline, and the loader
// picks the best the CPU has, so a Release build runs as fast as one
// built with -march for the machine. Elsewhere: one plain version.
#pragma once

#include <cstdint>

namespace moonep {
struct bf16;
}

namespace moonep::rows {

// One overload per element type T and its accumulation type A (docs/spec/
// layer.md): (float, float), (double, double), (bf16, float). Overloads,
// not templates: Clang cannot multiversion a function template.
#define MOONEP_ROW_LOOPS_DECLARE(A, T)                                                               \
  /* out[h] = f * A(in[h]) */                                                                        \
  void scale(A* out, A f, const T* in, std::int64_t n);                                              \
  /* out[h] = A(in[h]) */                                                                            \
  void widen(A* out, const T* in, std::int64_t n);                                                   \
  /* acc[h] = acc[h] + f * A(in[h]) */                                                               \
  void add_scaled(A* acc, A f, const T* in, std::int64_t n);                                         \
  /* acc[h] = acc[h] + A(in[h]) (with T = A, partial rows too) */                                  \
  void add(A* acc, const T* in, std::int64_t n);                                                     \
  /* out[h] = T(in[h]), rounded once (bf16: to nearest even) */                                     \
  void narrow(T* out, const A* in, std::int64_t n);
MOONEP_ROW_LOOPS_DECLARE(float, float)
MOONEP_ROW_LOOPS_DECLARE(double, double)
MOONEP_ROW_LOOPS_DECLARE(float, bf16)
#undef MOONEP_ROW_LOOPS_DECLARE

// Whether the functions above were compiled per instruction set (see top).
bool multiversioned();

}  // namespace moonep::rows
