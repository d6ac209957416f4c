// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Configuration checks of docs/spec/planning.md "Bad input" and derived sizes.
#include "moonep/config.hpp"

#include <climits>
#include <sstream>

#include "moonep/error.hpp"

namespace moonep {

std::int64_t Config::slots() const {
  if (ranks < 1 || experts < 1 || token_padding < 1) return 0;
  const std::int64_t tp = token_padding;
  const std::int64_t epn = experts / ranks;
  // Each term fits in 64 bits (S*K < 2^62, 2*epn*(tp-1) < 2^63) but their sum
  // need not: saturate at 2^61, far beyond anything validate() accepts, so
  // an absurd configuration is still reported instead of wrapping around.
  constexpr std::int64_t kHuge = std::int64_t(1) << 61;
  const std::int64_t pad = 2 * epn * (tp - 1);
  if (pad > kHuge || entries() > kHuge) return kHuge;
  const std::int64_t raw = entries() + pad;
  return (raw + tp - 1) / tp * tp;
}

static void fail(const std::string& msg) { throw InputError(msg); }

void validate(const Config& c) {
  std::ostringstream m;
  if (c.ranks < 1 || c.ranks > kMaxRanks) {
    m << "ranks must be in 1.." << kMaxRanks << ", got " << c.ranks;
    fail(m.str());
  }
  if (c.experts < 1) {
    m << "experts must be >= 1, got " << c.experts;
    fail(m.str());
  }
  if (c.experts % c.ranks != 0) {
    m << "experts (" << c.experts << ") must be a multiple of ranks (" << c.ranks << ")";
    fail(m.str());
  }
  if (c.topk < 1 || c.topk > kMaxTopk) {
    m << "topk must be in 1.." << kMaxTopk << ", got " << c.topk;
    fail(m.str());
  }
  if (c.tokens < 1) {
    m << "tokens must be >= 1, got " << c.tokens;
    fail(m.str());
  }
  if (c.copy_slots < 1) {
    m << "copy_slots must be >= 1, got " << c.copy_slots;
    fail(m.str());
  }
  if (c.token_padding < 1) {
    m << "token_padding must be >= 1, got " << c.token_padding;
    fail(m.str());
  }
  // R*NvS <= INT32_MAX, tested as NvS <= INT32_MAX / R so that nothing
  // overflows however large NvS is.
  const std::int64_t slots = c.slots();
  if (slots > INT32_MAX / c.ranks) {
    m << "ranks*slots = " << c.ranks << "*" << slots << " exceeds int32 (" << INT32_MAX
      << "; destinations are encoded as rank*slots+offset); "
      << "use fewer tokens or a smaller token_padding";
    fail(m.str());
  }
  // Not in docs/spec/planning.md's list, but the [R][E+B] tables every rank
  // holds must stay int32-indexable; a larger B could never be used anyway (at
  // most E - epn experts are remote to a rank).
  if (static_cast<std::int64_t>(c.ranks) * (static_cast<std::int64_t>(c.experts) + c.copy_slots) >
      INT32_MAX) {
    m << "ranks*(experts+copy_slots) = " << c.ranks << "*(" << c.experts << "+" << c.copy_slots
      << ") exceeds int32 (the per-rank group tables); use fewer copy_slots";
    fail(m.str());
  }
}

std::string describe(const Config& c) {
  std::ostringstream m;
  m << "R=" << c.ranks << " E=" << c.experts << " K=" << c.topk << " S=" << c.tokens
    << " B=" << c.copy_slots << " tp=" << c.token_padding;
  return m.str();
}

}  // namespace moonep
