// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: the bad-input checks of the reference layer (docs/spec/layer.md
// "Bad input"), and the decoding every operation shares.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moonep/error.hpp"
#include "moonep/host_plan.hpp"

namespace moonep::layer {

// An entry's destination (docs/spec/layer.md): rank, slot, and whether it
// is a primary (dst >= 0) or a duplicate (dst < 0).
struct Destination {
  int rank;
  std::int64_t loff;
  bool primary;
};
inline Destination decode_dst(std::int32_t dst, std::int64_t nvs) {
  const std::int64_t c = dst >= 0 ? dst : -static_cast<std::int64_t>(dst) - 1;
  return {static_cast<int>(c / nvs), c % nvs, dst >= 0};
}

// s_r of every rank of the plan.
std::vector<std::int32_t> plan_tokens(const HostPlan& plan);

// InputError "<op>: <name> has N ranks, expected R" or "<op>: <name>[r] holds
// N values, expected <extent_text> = M" unless every rank's buffer holds
// exactly `extent` values.
template <class V>
void check_buffer(const char* op, const char* name, const std::vector<std::vector<V>>& data, int ranks,
                  std::int64_t extent, const std::string& extent_text) {
  if (static_cast<std::int64_t>(data.size()) != ranks)
    throw InputError(std::string(op) + ": " + name + " has " + std::to_string(data.size()) +
                     " ranks, expected " + std::to_string(ranks));
  for (std::size_t r = 0; r < data.size(); ++r)
    if (static_cast<std::int64_t>(data[r].size()) != extent)
      throw InputError(std::string(op) + ": " + name + "[" + std::to_string(r) + "] holds " +
                       std::to_string(data[r].size()) + " values, expected " + extent_text + " = " +
                       std::to_string(extent));
}

// InputError "<op>: <name> must be at least 1, got N".
void check_width(const char* op, const char* name, std::int64_t value);

// check_experts_runnable's line for rank d ("rank d would run expert g
// (N slots) that it neither owns nor holds in a copy slot ...", the lowest
// such g), given its cu_seqlens [E+B] (checked before); "" when it runs.
std::string uncopied_expert_error(const Config& c, int d, const std::int32_t* cu_seqlens);

}  // namespace moonep::layer
