// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::rows (core/row_loops.hpp): one row's elementwise loops, each
// compiled per instruction set where the compiler and loader can choose
// at run time. The arithmetic must stay one operation per element (no
// reductions here): that is what makes every clone give the same bits.
#include "core/row_loops.hpp"

#include "moonep/bf16.hpp"

// target_clones needs an ifunc-capable loader (glibc on x86-64) and a
// compiler that knows the attribute; nvcc's front end (a CUDA build's CXX
// compiler may be nvcc_wrapper) does not. Elsewhere: one plain version.
#if defined(__x86_64__) && defined(__linux__) && !defined(__CUDACC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define MOONEP_ROW_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef MOONEP_ROW_CLONES
#define MOONEP_ROW_CLONES
#define MOONEP_ROW_CLONES_OFF 1
#endif

namespace moonep::rows {

#define MOONEP_ROW_LOOPS_DEFINE(A, T)                                                              \
  MOONEP_ROW_CLONES void scale(A* __restrict out, A f, const T* __restrict in, std::int64_t n) {   \
    for (std::int64_t h = 0; h < n; ++h) out[h] = f * static_cast<A>(in[h]);                       \
  }                                                                                                \
  MOONEP_ROW_CLONES void widen(A* __restrict out, const T* __restrict in, std::int64_t n) {        \
    for (std::int64_t h = 0; h < n; ++h) out[h] = static_cast<A>(in[h]);                           \
  }                                                                                                \
  MOONEP_ROW_CLONES void add_scaled(A* __restrict acc, A f, const T* __restrict in, std::int64_t n) { \
    for (std::int64_t h = 0; h < n; ++h) acc[h] = acc[h] + f * static_cast<A>(in[h]);              \
  }                                                                                                \
  MOONEP_ROW_CLONES void add(A* __restrict acc, const T* __restrict in, std::int64_t n) {          \
    for (std::int64_t h = 0; h < n; ++h) acc[h] = acc[h] + static_cast<A>(in[h]);                  \
  }                                                                                                \
  MOONEP_ROW_CLONES void narrow(T* __restrict out, const A* __restrict in, std::int64_t n) {       \
    for (std::int64_t h = 0; h < n; ++h) out[h] = static_cast<T>(in[h]);                           \
  }
MOONEP_ROW_LOOPS_DEFINE(float, float)
MOONEP_ROW_LOOPS_DEFINE(double, double)
MOONEP_ROW_LOOPS_DEFINE(float, bf16)
#undef MOONEP_ROW_LOOPS_DEFINE

bool multiversioned() {
#ifdef MOONEP_ROW_CLONES_OFF
  return false;
#else
  return true;
#endif
}

}  // namespace moonep::rows
