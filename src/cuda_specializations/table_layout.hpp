// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: where one planning block's tables (plan_step_kernel.cu) lie,
// generated from their one definition, MOONEP_BLOCK_TABLES
// (block_tables.hpp), as are the launch parameters' regions (TableRegions,
// kernel_params.hpp) and the kernel's carve (Tables, steps/tables.cuh).
// Plain C++ (constexpr, so device code may call it).
//
// What must stay true:
//  * Every region starts on a 16-byte boundary (kTableAlignWords: the
//    kernel's int4 loads and stores) and has room for its extent; an empty
//    region still gets one aligned unit, so no two regions start together.
//  * A region of the list is placed after the one before it and overlaps
//    none of them. A shared region (MOONEP_SHARED_TABLE) starts where the
//    region it names starts and covers the space of that region and every
//    region listed between them and it; that space grows where the shared
//    region is larger. The kernel uses the two sets at different times
//    (the comment beside each says when).
//  * The host refuses global tables of 2^31 words or more (launch_setup.cu),
//    so every offset fits the int of TableRegions.
#pragma once

#include <cstdint>

#include "block_tables.hpp"
#include "kernel_params.hpp"

namespace moonep::cuda::impl {

// Words per destination of the copy-slot bitmap.
constexpr int mark_words(int E) { return (E + 31) / 32; }

// The alignment of every region, in int32 words (16 bytes).
inline constexpr std::int64_t kTableAlignWords = 4;
constexpr std::int64_t round_up4(std::int64_t n) {
  return n > 0 ? (n + kTableAlignWords - 1) & ~(kTableAlignWords - 1) : kTableAlignWords;
}

// MOONEP_BLOCK_TABLES, the list: block_tables.hpp.


// Offsets in int32 words from the start of the block's tables.
struct TableLayout {
#define MOONEP_TABLE_OFFSET(name, ...) std::int64_t name;
  MOONEP_BLOCK_TABLES(MOONEP_TABLE_OFFSET, MOONEP_TABLE_OFFSET)
#undef MOONEP_TABLE_OFFSET
  std::int64_t words;  // the whole, a multiple of kTableAlignWords
};

// Words an extent of elements of `Element` takes.
template <class Element>
constexpr std::int64_t table_words(std::int64_t extent) {
  static_assert(sizeof(Element) % 4 == 0, "table elements are whole int32 words");
  return extent * static_cast<std::int64_t>(sizeof(Element) / 4);
}

constexpr TableLayout table_layout(int ranks, int experts, int copy_slots, int topk, int block_tokens) {
  const std::int64_t R = ranks, E = experts, B = copy_slots, nt = block_tokens, ne = nt * topk;
  (void)B;
  TableLayout l{};
  std::int64_t at = 0;
#define MOONEP_TABLE_PLACE(name, type, extent) \
  l.name = at;                                 \
  at += round_up4(table_words<type>(extent));
#define MOONEP_TABLE_SHARE(name, type, extent, first) \
  l.name = l.first;                                   \
  if (at < l.first + round_up4(table_words<type>(extent))) at = l.first + round_up4(table_words<type>(extent));
  MOONEP_BLOCK_TABLES(MOONEP_TABLE_PLACE, MOONEP_TABLE_SHARE)
#undef MOONEP_TABLE_PLACE
#undef MOONEP_TABLE_SHARE
  l.words = round_up4(at);
  return l;
}

// The regions as the kernel's launch parameters carry them.
inline TableRegions table_regions(const TableLayout& l) {
  TableRegions t{};
#define MOONEP_TABLE_REGION(name, ...) t.name = static_cast<int>(l.name);
  MOONEP_BLOCK_TABLES(MOONEP_TABLE_REGION, MOONEP_TABLE_REGION)
#undef MOONEP_TABLE_REGION
  return t;
}

}  // namespace moonep::cuda::impl
