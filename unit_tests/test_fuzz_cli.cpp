// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Fuzz smoke test of moonep-plan (issue 19): a few hundred deterministic
// mutations of unit_tests/cli/problems/good.json (byte flips, truncations,
// duplicated spans, huge and odd numbers, control bytes, deep nesting,
// repeated keys), each planned by moonep-plan as a user would run it. Every
// run must end within its time bound, without a signal, with either
//  * exit 2, exactly one line "moonep-plan: error: ..." on stderr (at most
//    300 characters, no control bytes; a sanitizer report or a crash trace
//    would be more lines), nothing on stdout and no plan file; or
//  * exit 0 (the mutation kept the problem valid), nothing on stderr, and a
//    plan file equal to plan_reference's plan of the mutated problem.
// MOONEP_FUZZ_CASES overrides the number of mutants (default 300);
// MOONEP_FUZZ_SHARD=i/n runs only mutants j with j % n == i (the same
// mutants, made in the same order), so that CTest runs the shards of one
// sequence side by side (tests_reliability.cmake).
#include "catch2_compat.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "moonep/impl/splitmix64.hpp"
#include "moonep/io.hpp"
#include "moonep/reference.hpp"
#include "reliability/run_process.hpp"

using namespace moonep::test;

namespace {

// MoonEP's own generator: the same mutants on every machine.
struct Rng {
  moonep::impl::SplitMix64 gen;
  std::size_t below(std::size_t n) { return n ? static_cast<std::size_t>(gen.next() % n) : 0; }
};

// Where the numbers are: [begin, end) of each run of digits (with a sign).
std::vector<std::pair<std::size_t, std::size_t>> numbers_in(const std::string& t) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (std::size_t i = 0; i < t.size();) {
    if ((t[i] >= '0' && t[i] <= '9') || t[i] == '-') {
      std::size_t j = i + 1;
      while (j < t.size() && t[j] >= '0' && t[j] <= '9') ++j;
      out.emplace_back(i, j);
      i = j;
    } else {
      ++i;
    }
  }
  return out;
}

std::string mutate_once(std::string t, Rng& rng, std::string* what) {
  static const char* const odd_numbers[] = {
      "2147483648", "-2147483649", "9223372036854775808", "18446744073709551616", "1e400", "-1e400", "1.5",
      "-0", "0.0", "1e2", "0x10", "+4", "00", "4294967300", "1073741824", "134217728", "NaN", "Infinity"};
  static const std::string controls[] = {std::string(1, '\0'), "\x1b", "\x07", "\x7f", "\xff", "\xc2\x9b",
                                         "\x1b[2J", "\\u0000", "\\u001b", "\r\n", "\xe2\x80\xae"};
  switch (rng.below(9)) {
    case 0: {  // a byte flipped to anything
      const std::size_t at = rng.below(t.size());
      t[at] = static_cast<char>(rng.below(256));
      *what = "byte " + std::to_string(at) + " changed";
      break;
    }
    case 1: {  // truncated
      const std::size_t at = rng.below(t.size());
      t.resize(at);
      *what = "truncated to " + std::to_string(at);
      break;
    }
    case 2: {  // a span duplicated somewhere
      const std::size_t a = rng.below(t.size()), n = 1 + rng.below(40), at = rng.below(t.size());
      t.insert(at, t.substr(a, n));
      *what = "span " + std::to_string(a) + "+" + std::to_string(n) + " copied to " + std::to_string(at);
      break;
    }
    case 3: {  // a number replaced by an odd one
      const auto nums = numbers_in(t);
      if (nums.empty()) break;
      const auto [a, b] = nums[rng.below(nums.size())];
      const std::string with = odd_numbers[rng.below(sizeof odd_numbers / sizeof *odd_numbers)];
      t.replace(a, b - a, with);
      *what = "number at " + std::to_string(a) + " -> " + with;
      break;
    }
    case 4: {  // a digit changed (often still valid)
      const auto nums = numbers_in(t);
      if (nums.empty()) break;
      const auto [a, b] = nums[rng.below(nums.size())];
      t[a + rng.below(b - a)] = static_cast<char>('0' + rng.below(10));
      *what = "a digit near " + std::to_string(a) + " changed";
      break;
    }
    case 5: {  // control bytes inserted
      const std::size_t at = rng.below(t.size());
      const std::string& c = controls[rng.below(sizeof controls / sizeof *controls)];
      t.insert(at, c);
      *what = "control bytes at " + std::to_string(at);
      break;
    }
    case 6: {  // a huge number or key
      const std::size_t at = t.find(rng.below(2) ? "\"topk\": 2" : "\"tokens\": 8");
      if (at == std::string::npos) break;
      t.insert(at, rng.below(2) ? "\"" + std::string(100000, 'k') + "\": 1, " : "\"x\": " + std::string(100000, '9') + ", ");
      *what = "huge token inserted";
      break;
    }
    case 7: {  // deep nesting as a value
      const std::size_t at = t.find("\"ranks\": ");
      if (at == std::string::npos) break;
      const std::size_t depth = 1000 + rng.below(50000);
      t.insert(at, "\"deep\": " + std::string(depth, '[') + std::string(rng.below(2) ? depth : depth / 2, ']') + ", ");
      *what = "nesting " + std::to_string(depth) + " deep";
      break;
    }
    default: {  // a "key": value pair repeated
      static const char* const keys[] = {"\"ranks\": 4, ", "\"topk\": 2, ", "\"copy_slots\": 2, "};
      const std::string pair = keys[rng.below(3)];
      const std::size_t at = t.find(pair);
      if (at == std::string::npos) break;
      t.insert(at, pair);
      *what = "key repeated: " + pair;
      break;
    }
  }
  return t;
}



// "" when `plan_file` is plan_reference's plan of `problem_file`.
std::string plan_mismatch(const std::string& problem_file, const std::string& plan_file) {
  try {
    const moonep::Problem p = moonep::read_problem_file(problem_file);
    const moonep::HostPlan expected =
        moonep::plan_reference(p.config, p.routing, p.tokens_per_expert ? &*p.tokens_per_expert : nullptr);
    return moonep::plan_difference(expected, moonep::read_plan_file(plan_file));
  } catch (const std::exception& e) {
    return std::string("checking the plan: ") + e.what();
  }
}

}  // namespace

TEST_CASE("fuzz: mutated problem files give exit 2 with one error line, or a correct plan") {
  const std::string good = read_file(std::string(MOONEP_CLI_DIR) + "/problems/good.json");
  REQUIRE(!good.empty());
  const char* env = std::getenv("MOONEP_FUZZ_CASES");
  const int cases = env ? std::atoi(env) : 300;
  int shard = 0, shards = 1;
  if (const char* s = std::getenv("MOONEP_FUZZ_SHARD")) {
    REQUIRE(std::sscanf(s, "%d/%d", &shard, &shards) == 2);
    REQUIRE((shards >= 1 && shard >= 0 && shard < shards));
  }
  ScratchDir dir("fuzz");
  Rng rng{{0x6d6f6f6e6570ull}};
  int valid = 0, rejected = 0;
  for (int i = 0; i < cases; ++i) {
    std::string text = good, how;
    const int n = 1 + static_cast<int>(rng.below(3));
    for (int m = 0; m < n; ++m) {
      std::string what;
      text = mutate_once(text, rng, &what);
      how += (m ? "; " : "") + what;
    }
    if (i % shards != shard) continue;  // another shard's mutant
    const std::string problem = dir.file("mutant.json"), plan = dir.file("plan.json");
    write_file(problem, text);
    std::remove(plan.c_str());
    // A small memory limit keeps a mutant that became a large valid
    // problem quick: it is refused (exit 2) instead of planned.
    std::vector<std::string> cmd{MOONEP_PLAN_EXE, "--input", problem, "--output", plan, "--memory-limit", "256M"};
    if (i % 3 == 2) cmd.insert(cmd.end(), {"--backend", "reference"});
    moonep::test::RunOptions options;
    options.timeout_s = 60;
    const auto r = run_process(cmd, options);
    INFO("mutant " << i << ": " << how);
    INFO(r.describe());
    REQUIRE(!r.timed_out);
    REQUIRE(r.signal == 0);
    REQUIRE((r.exit_code == 0 || r.exit_code == 2));
    if (r.exit_code == 2) {
      ++rejected;
      const auto lines = r.err_lines();
      REQUIRE(lines.size() == 1);
      CHECK(lines[0].rfind("moonep-plan: error: ", 0) == 0);
      CHECK(lines[0].size() <= 300);
      CHECK(terminal_safe(lines[0]));
      CHECK(r.out.empty());
      CHECK(!path_exists(plan));
    } else {
      ++valid;
      CHECK(r.err.empty());
      CHECK(plan_mismatch(problem, plan) == "");
    }
  }
  // Both outcomes happen: the mutations neither all break the file nor all
  // leave it alone.
  CHECK(valid > 0);
  CHECK(rejected > (valid + rejected) / 2);
  WARN(valid + rejected << " mutants (shard " << shard << "/" << shards << " of " << cases << "): " << rejected
                        << " rejected, " << valid << " still valid and planned correctly");
}
