// Configuration checks of PLANNING.md "Bad input" and derived sizes.
#include "moonep/config.hpp"

#include <climits>
#include <sstream>

#include "moonep/error.hpp"

namespace moonep {

std::int64_t Config::slots() const {
  if (ranks < 1 || experts < 1 || token_padding < 1) return 0;
  const std::int64_t tp = token_padding;
  const std::int64_t epn = experts / ranks;
  const std::int64_t raw = entries() + 2 * epn * (tp - 1);
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
  const std::int64_t total = static_cast<std::int64_t>(c.ranks) * c.slots();
  if (total > INT32_MAX) {
    m << "ranks*slots = " << c.ranks << "*" << c.slots() << " = " << total
      << " exceeds int32 (destinations are encoded as rank*slots+offset); "
      << "use fewer tokens or a smaller token_padding";
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
