// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/config.hpp — the shape of one planning problem
// (docs/spec/planning.md, "Terms") and the quantities derived from it.
#pragma once

#include <cstdint>
#include <string>

namespace moonep {

// Limits from docs/spec/planning.md.
inline constexpr int kMaxRanks = 128;
inline constexpr int kMaxTopk = 32;

struct Config {
  int ranks = 1;          // R, 1..128
  int experts = 1;        // E, a multiple of R
  int topk = 1;           // K, 1..32
  int tokens = 1;         // S, tokens per rank, >= 1
  int copy_slots = 1;     // B, copy slots per rank, >= 1
  int token_padding = 1;  // tp, >= 1

  int experts_per_rank() const { return experts / ranks; }           // epn
  std::int64_t entries() const {                                     // N = S*K
    return static_cast<std::int64_t>(tokens) * topk;
  }
  std::int64_t capacity() const { return entries(); }                // CAP of a full step
  int groups() const { return experts + copy_slots; }                // E + B
  // NvS = round_up(S*K + 2*epn*(tp-1), tp), in 64 bits so an absurd
  // configuration can be reported instead of overflowing.
  std::int64_t slots() const;
};

// Ragged steps (docs/spec/planning.md "Ragged steps"): when the step's ranks
// hold `total` entries in all (T = sum of s_r*K), rank r receives
// CAP_r = T div R + (1 if r < T mod R): the total spread as evenly as
// integers allow, the remainder on the lowest ranks. A full step
// (T = R*S*K) gives CAP_r = S*K = capacity().
inline std::int64_t ragged_capacity(std::int64_t total, int ranks, int rank) {
  return total / ranks + (rank < total % ranks ? 1 : 0);
}

// Throws InputError naming the first violated rule of docs/spec/planning.md
// "Bad input" that concerns the configuration alone.
void validate(const Config& config);

// "R=8 E=256 K=8 S=4096 B=32 tp=128"
std::string describe(const Config& config);

}  // namespace moonep
