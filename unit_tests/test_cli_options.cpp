// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-plan's command line (src/tools/plan_options.cpp): the copy-slot
// count of a synthetic step without --copy-slots; --multicast, the GPU
// world's opt-in, only with --world gpu.
#include <algorithm>
#include <string>
#include <vector>

#include "catch2_compat.hpp"
#include "moonep/error.hpp"
#include "moonep/reference.hpp"
#include "moonep/synthetic.hpp"
#include "tools/plan_options.hpp"

using namespace moonep;
using namespace moonep::tools;

namespace {

PlanOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), "moonep-plan");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_plan_options(static_cast<int>(argv.size()), argv.data());
}

// validate's message for the configuration, "" when it passes.
std::string rejection(const Config& c) {
  try {
    validate(c);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("without --copy-slots a synthetic step gets E/R copy slots", "[cli]") {
  CHECK(parse({}).config.copy_slots == 256 / 8);
  CHECK(parse({"--ranks", "4", "--experts", "64"}).config.copy_slots == 16);
  CHECK(parse({"--ranks", "16", "--experts", "16"}).config.copy_slots == 1);
  CHECK(parse({"--ranks=2", "--experts=1024"}).config.copy_slots == 512);
  // --ranks and --experts count wherever they stand.
  CHECK(parse({"--ranks", "4", "--tokens", "8", "--experts", "32"}).config.copy_slots == 8);
}

TEST_CASE("an explicit --copy-slots is kept, before or after --ranks and --experts", "[cli]") {
  CHECK(parse({"--copy-slots", "3", "--ranks", "4", "--experts", "64"}).config.copy_slots == 3);
  CHECK(parse({"--ranks", "4", "--experts", "64", "--copy-slots=40"}).config.copy_slots == 40);
  // Even a bad one: validation names it rather than a default replacing it.
  const PlanOptions zero = parse({"--copy-slots", "0"});
  CHECK(zero.config.copy_slots == 0);
  CHECK(has(rejection(zero.config), "copy_slots must be >= 1"));
}

TEST_CASE("the default copy slots where E/R does not apply", "[cli]") {
  // One rank owns every expert: nothing is remote, one slot (B >= 1).
  CHECK(parse({"--ranks", "1", "--experts", "64"}).config.copy_slots == 1);
  // A configuration validate rejects keeps its own message.
  const PlanOptions uneven = parse({"--ranks", "4", "--experts", "10"});
  CHECK(has(rejection(uneven.config), "experts (10) must be a multiple of ranks (4)"));
  const PlanOptions no_ranks = parse({"--ranks", "0"});
  CHECK(has(rejection(no_ranks.config), "ranks must be in 1..128"));
  // E/R slots would take ranks*(experts+B) past int32: as many as fit.
  // E = 128*131071: 128*(E+127) = 2^31 - 128, one more slot is past int32.
  Config huge{128, 128 * 131071, 1, 1, 1, 1};
  CHECK(default_copy_slots(huge) == 127);
  huge.copy_slots = default_copy_slots(huge);
  CHECK(rejection(huge).empty());
  huge.copy_slots += 1;
  CHECK(has(rejection(huge), "exceeds int32"));
}

TEST_CASE("E/R copy slots leave no remote expert without a copy", "[cli]") {
  // planning.md "Copy slots": a rank has one donor, so at most E/R remote
  // experts; here on skewed routings, full and ragged.
  for (double imbalance : {1.0, 3.0}) {
    for (int ranks : {2, 4, 8}) {
      Config c = parse({"--ranks", std::to_string(ranks), "--experts", "32", "--topk", "4", "--tokens", "64",
                        "--token-padding", "4"})
                     .config;
      REQUIRE(c.copy_slots == 32 / ranks);
      Routing routing = synthetic_routing(c, imbalance, 5);
      TokensPerRank tokens(static_cast<std::size_t>(ranks));
      for (int r = 0; r < ranks; ++r) {
        tokens[r] = (r * 23) % (c.tokens + 1);
        routing[r].resize(static_cast<std::size_t>(tokens[r]) * c.topk);
      }
      const HostPlan plan = plan_reference(c, routing, nullptr, &tokens);
      for (int d = 0; d < ranks; ++d) {
        const HostRankPlan& p = plan.ranks[d];
        const auto row = p.experts_to_copy.begin() + static_cast<std::ptrdiff_t>(d) * c.copy_slots;
        const int copied = static_cast<int>(std::count_if(row, row + c.copy_slots, [](int e) { return e >= 0; }));
        CHECK(copied == p.remote_stats[0]);
      }
    }
  }
}

TEST_CASE("--multicast is the gpu world's opt-in, off by default", "[cli]") {
  CHECK_FALSE(parse({"--world", "gpu"}).multicast);
  CHECK(parse({"--world", "gpu", "--multicast"}).multicast);
  CHECK(parse({"--multicast", "--world=gpu", "--devices", "0,1"}).multicast);
  CHECK_THROWS_WITH(parse({"--multicast"}), "--multicast is for --world gpu");
  CHECK_THROWS_WITH(parse({"--world", "mpi", "--multicast"}), "--multicast is for --world gpu");
  CHECK_THROWS_AS(parse({"--multicast=1", "--world", "gpu"}), UsageError);
}

TEST_CASE("--kokkos-* values Kokkos would std::stoi are checked here, the option named", "[cli]") {
  // Kokkos reads them with std::stoi: "abc" threw std::invalid_argument
  // ("error: stoi", exit 1), "12abc" silently meant 12.
  for (const char* arg : {"--kokkos-threads=abc", "--kokkos-threads=12abc", "--kokkos-threads", "--kokkos-numa=x",
                          "--kokkos-device-id=", "--kokkos-num-threads= 4", "--kokkos-ndevices=2,x",
                          "--kokkos-map-device-id-by=rank", "--kokkos-help=yes"}) {
    INFO(arg);
    const std::string name = std::string(arg).substr(0, std::string(arg).find('='));
    try {
      parse({arg});
      FAIL("accepted");
    } catch (const UsageError& e) {
      CHECK(std::string(e.what()).rfind(name + ": ", 0) == 0);
    }
  }
  CHECK_THROWS_WITH(parse({"--kokkos-device=4294967296"}), "--kokkos-device: 4294967296 is outside the 32-bit integers");
  const PlanOptions ok = parse({"--kokkos-threads=2", "--kokkos-ndevices=2,1", "--kokkos-map-device-id-by=mpi_rank",
                                "--kokkos-tools-libs=libx.so", "--kokkos-disable-warnings"});
  CHECK(ok.kokkos_args == std::vector<std::string>{"--kokkos-threads=2", "--kokkos-ndevices=2,1",
                                                   "--kokkos-map-device-id-by=mpi_rank", "--kokkos-tools-libs=libx.so",
                                                   "--kokkos-disable-warnings"});
}

TEST_CASE("numbers past their range say the range, not 'expected an integer'", "[cli]") {
  CHECK_THROWS_WITH(parse({"--steps", "99999999999999999999"}), "--steps: 99999999999999999999 is outside 1..1000000");
  CHECK_THROWS_WITH(parse({"--ranks", "-99999999999999999999"}),
                    "--ranks: -99999999999999999999 is outside -2147483648..2147483647");
  CHECK_THROWS_WITH(parse({"--seed", "99999999999999999999"}),
                    "--seed: 99999999999999999999 is outside 0..18446744073709551615");
  CHECK_THROWS_WITH(parse({"--memory-limit", "1e30"}),
                    "--memory-limit: 1e30 is more memory than any machine has (say none for no limit)");
  CHECK(parse({"--memory-limit", "1T"}).memory_limit == std::int64_t{1} << 40);
}
