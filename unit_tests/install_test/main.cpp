// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Plans a problem small enough to plan by hand with the installed MoonEP
// and checks the result. Prints "ok" on success.
#include <moonep/moonep.hpp>

#include <Kokkos_Core.hpp>

#include <cstdio>
#include <string>

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main(int argc, char* argv[]) {
  Kokkos::initialize(argc, argv);
  {
    // R=2 E=4 K=2 S=2 B=1 tp=2. Rank 0 owns experts 0 and 1, which get all
    // 8 entries: load (8, 0), CAP 4. Step 2 moves 4 entries to rank 1, and
    // step 3 gives it all of expert 0 (4 entries, the lowest of the two
    // largest), so rank 1 copies expert 0 and rank 0 keeps expert 1.
    moonep::Config c;
    c.ranks = 2; c.experts = 4; c.topk = 2; c.tokens = 2; c.copy_slots = 1; c.token_padding = 2;
    const moonep::Routing routing = {{0, 0, 1, 0}, {1, 1, 0, 1}};
    const moonep::HostPlan plan = moonep::plan_reference(c, routing);

    for (int r = 0; r < 2; ++r) {
      int received = 0;
      for (auto v : plan.ranks[r].src_info) received += v >= 0;
      check(received == 4, "every rank receives CAP = 4 entries");
      check(plan.ranks[r].experts_to_copy == std::vector<std::int32_t>{-1, 0},
            "experts_to_copy is ((-1), (0))");
    }
    check(plan.ranks[0].remote_stats == std::vector<std::int32_t>{0, 1}, "rank 0 remote_stats (0, 1)");
    check(plan.ranks[1].remote_stats == std::vector<std::int32_t>{1, 0}, "rank 1 remote_stats (1, 0)");

    // The file formats work without the downstream knowing about JSON.
    const moonep::HostPlan back = moonep::parse_plan(moonep::plan_to_json(plan));
    check(moonep::plan_difference(plan, back).empty(), "plan JSON round trip");
    bool rejected = false;
    try {
      moonep::parse_problem("{\"ranks\": \"2\"}");
    } catch (const moonep::InputError&) {
      rejected = true;
    }
    check(rejected, "bad problem is an InputError");
    check(std::string(MOONEP_VERSION_STRING).size() > 0, "version string");
  }
  Kokkos::finalize();
  if (failures == 0) std::printf("ok: MoonEP %s from the installed package\n", MOONEP_VERSION_STRING);
  return failures == 0 ? 0 : 1;
}
