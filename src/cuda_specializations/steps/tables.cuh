// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: a planning block's tables (block_tables.hpp), carved as
// table_layout.hpp lays them out, from the block's shared memory or from
// its slice of the rank's global scratch. Every step reads and writes the block's own tables only,
// so the same code serves both placements.
#pragma once

#include "../table_layout.hpp"
#include "launch.cuh"

namespace moonep::cuda::impl {
namespace {

// The block's tables, as pointers of their element types (block_tables.hpp
// says what each holds and when).
struct Tables {
#define MOONEP_TABLE_POINTER(name, type, ...) type* name;
  MOONEP_BLOCK_TABLES(MOONEP_TABLE_POINTER, MOONEP_TABLE_POINTER)
#undef MOONEP_TABLE_POINTER
};

// The block's tables from `sm`, the start of its dynamic shared memory or
// of its global slice (16-byte aligned either way), at the host's offsets.
__device__ Tables carve(int* sm, const KernelParams& p) {
  const TableRegions& l = p.tables;
  Tables t;
#define MOONEP_TABLE_CARVE(name, type, ...) t.name = reinterpret_cast<type*>(sm + l.name);
  MOONEP_BLOCK_TABLES(MOONEP_TABLE_CARVE, MOONEP_TABLE_CARVE)
#undef MOONEP_TABLE_CARVE
  return t;
}

// acum[e][d-1]: e's entries computed on the ranks before d (0 for d = 0).
__device__ __forceinline__ int acum_before(const Tables& t, int as, int e, int d) {
  return d > 0 ? t.acum[e * as + d - 1] : 0;
}
// alloc[d][e] from the prefix table.
__device__ __forceinline__ int alloc_of(const Tables& t, int as, int e, int d) {
  return t.acum[e * as + d] - acum_before(t, as, e, d);
}

}  // namespace
}  // namespace moonep::cuda::impl
