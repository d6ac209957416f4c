// Smoke test of the reference planner on a realistic skewed step: the
// PLANNING.md invariants every plan satisfies.
#include "catch2_compat.hpp"

#include <set>

#include "moonep/reference.hpp"
#include "moonep/synthetic.hpp"

TEST_CASE("reference plan of a skewed step receives CAP entries everywhere") {
  moonep::Config c;
  c.ranks = 8; c.experts = 64; c.topk = 4; c.tokens = 256; c.copy_slots = 4; c.token_padding = 8;
  const auto routing = moonep::synthetic_routing(c, 1.5, 7);
  const auto plan = moonep::plan_reference(c, routing);
  const auto NvS = c.slots();
  std::set<std::int64_t> slots;
  for (int r = 0; r < c.ranks; ++r) {
    int filled = 0;
    for (auto v : plan.ranks[r].src_info) filled += v >= 0;
    CHECK(filled == c.capacity());
    for (auto v : plan.ranks[r].dst) {
      const std::int64_t raw = v >= 0 ? v : -static_cast<std::int64_t>(v) - 1;
      CHECK(raw / NvS < c.ranks);
      slots.insert(raw);
    }
  }
  CHECK(static_cast<std::int64_t>(slots.size()) == c.ranks * c.entries());
}
