// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/plan_fields.hpp — the one definition of a rank plan's outputs
// (docs/spec/planning.md "A rank's plan"): name, shape and extent as a
// function of the Config. HostRankPlan's members, RankPlanView's views and
// their allocation and host copy, the portable planner's output store, the
// plan file's writer, reader and shape check, plan_difference and the MPI
// gather are all expanded from MOONEP_PLAN_FIELDS, so adding an output is
// one edit here (plus the code that computes it). The names are the plan
// file's keys (docs/spec/formats.md) and must never change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "moonep/config.hpp"

namespace moonep::impl {

// How a field's values are grouped: `list` one per row, `pairs` and
// `triples` two or three per row, `per_copy_slot` one row of copy_slots
// values per rank.
enum class FieldShape { list, pairs, triples, per_copy_slot };
// How many rows a device view of the field holds (its capacity).
enum class FieldRows { entries, groups, ranks, slots, two };
// How much of that capacity a host plan and the plan file hold: all of
// it, or the prefix dup_counts[0] (rows) or dup_counts[1] (values) names.
enum class FieldHeld { whole, dup_counts_0, dup_counts_1 };

// X(name, shape, rows, zeroed, held, row_text): `zeroed` whether a device
// view starts zeroed (false: every value is written before it is read);
// `row_text` what one row is, for the reader's errors (nullptr for list).
// Order: the plan file's key order.
#define MOONEP_PLAN_FIELDS(X)                                                                      \
  X(dst, list, entries, false, whole, nullptr)                                                     \
  X(cu_seqlens, list, groups, true, whole, nullptr)                                                \
  X(zero_fill_ranges, pairs, groups, true, whole, "an [offset, count] pair")                      \
  X(experts_to_copy, per_copy_slot, ranks, true, whole, "one array of expert ids per rank")        \
  X(remote_stats, list, two, true, whole, nullptr)                                                 \
  X(src_info, list, slots, false, whole, nullptr)                                                  \
  X(dup_groups, triples, slots, false, dup_counts_0, "a [primary, start, count] triple")           \
  X(dup_loffs, list, slots, false, dup_counts_1, nullptr)                                          \
  X(dup_counts, list, two, true, whole, nullptr)

struct PlanField {
  const char* name;
  FieldShape shape;
  FieldRows rows;
  bool zeroed;
  FieldHeld held;
  const char* row_text;
};

inline constexpr PlanField kPlanFields[] = {
#define MOONEP_PLAN_FIELD_ENTRY(name, shape, rows, zeroed, held, row_text) \
  {#name, FieldShape::shape, FieldRows::rows, zeroed, FieldHeld::held, row_text},
    MOONEP_PLAN_FIELDS(MOONEP_PLAN_FIELD_ENTRY)
#undef MOONEP_PLAN_FIELD_ENTRY
};
inline constexpr std::size_t kPlanFieldCount = sizeof(kPlanFields) / sizeof(kPlanFields[0]);

// Field indices by name: plan_field_index::dst == 0, ...
namespace plan_field_index {
enum : std::size_t {
#define MOONEP_PLAN_FIELD_INDEX(name, ...) name,
  MOONEP_PLAN_FIELDS(MOONEP_PLAN_FIELD_INDEX)
#undef MOONEP_PLAN_FIELD_INDEX
};
}  // namespace plan_field_index

// Values per row.
inline std::int64_t field_columns(const PlanField& f, const Config& c) {
  switch (f.shape) {
    case FieldShape::pairs: return 2;
    case FieldShape::triples: return 3;
    case FieldShape::per_copy_slot: return c.copy_slots;
    case FieldShape::list: break;
  }
  return 1;
}

// Rows of a device view (capacity).
inline std::int64_t field_rows(const PlanField& f, const Config& c) {
  switch (f.rows) {
    case FieldRows::entries: return c.entries();
    case FieldRows::groups: return c.groups();
    case FieldRows::ranks: return c.ranks;
    case FieldRows::slots: return c.slots();
    case FieldRows::two: break;
  }
  return 2;
}

// Values of a device view, flat.
inline std::int64_t field_capacity(const PlanField& f, const Config& c) {
  return field_rows(f, c) * field_columns(f, c);
}

// Values a host plan and the plan file hold of a prefixed field (held is
// not whole), given dup_counts = (dup_rows, dup_values).
constexpr std::int64_t field_prefix_values(const PlanField& f, std::int64_t dup_rows, std::int64_t dup_values) {
  const std::int64_t per_row = f.shape == FieldShape::triples ? 3 : f.shape == FieldShape::pairs ? 2 : 1;
  return (f.held == FieldHeld::dup_counts_0 ? dup_rows : dup_values) * per_row;
}

// The held length as the plan file's error messages spell it, in the
// file's terms: "tokens*topk", "2*(experts+copy_slots)", "3*dup_counts[0]".
inline std::string field_length_rule(const PlanField& f) {
  std::string rows;
  switch (f.held) {
    case FieldHeld::dup_counts_0: rows = "dup_counts[0]"; break;
    case FieldHeld::dup_counts_1: rows = "dup_counts[1]"; break;
    case FieldHeld::whole:
      switch (f.rows) {
        case FieldRows::entries: rows = "tokens*topk"; break;
        case FieldRows::groups: rows = "experts+copy_slots"; break;
        case FieldRows::ranks: rows = "ranks"; break;
        case FieldRows::slots: rows = "slots"; break;
        case FieldRows::two: rows = "two"; break;
      }
  }
  const bool sum = rows.find('+') != std::string::npos;
  switch (f.shape) {
    case FieldShape::pairs: return sum ? "2*(" + rows + ")" : "2*" + rows;
    case FieldShape::triples: return sum ? "3*(" + rows + ")" : "3*" + rows;
    case FieldShape::per_copy_slot: return rows + "*copy_slots";
    case FieldShape::list: break;
  }
  return rows;
}

// What the code around the table relies on, checked where it is defined:
// the dup structures are the only prefixed fields (plan_difference compares
// them as sets, the others exactly), dup_counts is whole and of two values
// (the prefix lengths), and row_text is given exactly for fields with rows
// of several values (the reader parses those as arrays of arrays).
constexpr bool plan_field_table_consistent() {
  std::size_t prefixed = 0;
  for (const PlanField& f : kPlanFields) {
    if (f.held != FieldHeld::whole) ++prefixed;
    if ((f.shape == FieldShape::list) != (f.row_text == nullptr)) return false;
  }
  const PlanField& dg = kPlanFields[plan_field_index::dup_groups];
  const PlanField& dl = kPlanFields[plan_field_index::dup_loffs];
  const PlanField& dc = kPlanFields[plan_field_index::dup_counts];
  // (a prefixed field's row length must not depend on the Config:
  // field_prefix_values does not take one)
  for (const PlanField& f : kPlanFields)
    if (f.held != FieldHeld::whole && f.shape == FieldShape::per_copy_slot) return false;
  return prefixed == 2 && dg.held == FieldHeld::dup_counts_0 && dg.shape == FieldShape::triples &&
         dl.held == FieldHeld::dup_counts_1 && dl.shape == FieldShape::list &&
         dc.held == FieldHeld::whole && dc.rows == FieldRows::two && dc.shape == FieldShape::list;
}
static_assert(plan_field_table_consistent(), "MOONEP_PLAN_FIELDS breaks an assumption stated above it");

}  // namespace moonep::impl
