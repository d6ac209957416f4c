// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Test helper: check_summary_json SUMMARY.json PROBLEM.json PLAN.json STEPS BACKEND
// — exit 0 when moonep-plan's --json summary agrees with the problem and
// plan files it describes: the configuration, every rank's load before
// (counted from the routing) and after (counted from the plan; S*K, or a
// ragged step's CAP_r, whose counts it repeats), the copies,
// remote experts and padding read off the plan, the max/mean ratios and
// totals, the steps and their median time, the backend. Else it names the
// first disagreement and exits 1.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "moonep/io.hpp"

namespace {

int failures = 0;

template <class A, class B>
void expect_eq(const A& got, const B& want, const std::string& what) {
  if (!(got == want)) {
    std::fprintf(stderr, "summary JSON: %s differs from the files\n", what.c_str());
    ++failures;
  }
}

void expect_near(double got, double want, const std::string& what) {
  if (!(std::fabs(got - want) <= 1e-9 * std::max(1.0, std::fabs(want)))) {
    std::fprintf(stderr, "summary JSON: %s is %.17g, expected %.17g\n", what.c_str(), got, want);
    ++failures;
  }
}

double ratio(const std::vector<std::int64_t>& v) {
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return static_cast<double>(*std::max_element(v.begin(), v.end())) / mean;
}

}  // namespace

int main(int argc, char* argv[]) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: check_summary_json SUMMARY.json PROBLEM.json PLAN.json STEPS BACKEND\n");
    return 2;
  }
  try {
    std::ifstream in(argv[1]);
    std::stringstream text;
    text << in.rdbuf();
    // One object on one line.
    const std::string s = text.str();
    expect_eq(std::count(s.begin(), s.end(), '\n'), 1, "line count (one JSON line)");
    const nlohmann::json j = nlohmann::json::parse(s);
    const moonep::Problem problem = moonep::read_problem_file(argv[2]);
    const moonep::HostPlan plan = moonep::read_plan_file(argv[3]);
    const moonep::Config& c = problem.config;
    const int R = c.ranks, B = c.copy_slots, epn = c.experts / c.ranks;

    const auto& cj = j.at("configuration");
    expect_eq(cj.at("ranks").get<int>(), c.ranks, "configuration.ranks");
    expect_eq(cj.at("experts").get<int>(), c.experts, "configuration.experts");
    expect_eq(cj.at("topk").get<int>(), c.topk, "configuration.topk");
    expect_eq(cj.at("tokens").get<int>(), c.tokens, "configuration.tokens");
    expect_eq(cj.at("copy_slots").get<int>(), c.copy_slots, "configuration.copy_slots");
    expect_eq(cj.at("token_padding").get<int>(), c.token_padding, "configuration.token_padding");
    expect_eq(cj.at("capacity").get<long long>(), static_cast<long long>(c.tokens) * c.topk, "configuration.capacity");

    std::vector<std::int64_t> before(R, 0), after, padding;
    std::vector<int> copied, remote;
    for (const auto& row : problem.routing)
      for (auto e : row) ++before[e / epn];
    for (int r = 0; r < R; ++r) {
      const auto& p = plan.ranks[r];
      after.push_back(std::count_if(p.src_info.begin(), p.src_info.end(), [](std::int32_t v) { return v >= 0; }));
      std::int64_t pad = 0;
      for (std::size_t g = 1; g < p.zero_fill_ranges.size(); g += 2) pad += p.zero_fill_ranges[g];
      padding.push_back(pad);
      copied.push_back(static_cast<int>(std::count_if(p.experts_to_copy.begin() + r * B,
                                                      p.experts_to_copy.begin() + (r + 1) * B,
                                                      [](std::int32_t e) { return e >= 0; })));
      remote.push_back(p.remote_stats[0]);
    }
    expect_eq(j.at("load_before").get<std::vector<std::int64_t>>(), before, "load_before");
    expect_eq(j.at("load_after").get<std::vector<std::int64_t>>(), after, "load_after");
    // What every rank must receive: S*K, or in a ragged step the T entries
    // spread evenly, the remainder on the lowest ranks (planning.md).
    const bool ragged = problem.tokens_per_rank &&
                        std::any_of(problem.tokens_per_rank->begin(), problem.tokens_per_rank->end(),
                                    [&](std::int32_t t) { return t != c.tokens; });
    std::vector<std::int64_t> cap(R, static_cast<std::int64_t>(c.tokens) * c.topk);
    if (ragged) {
      std::int64_t T = 0;
      for (std::int32_t t : *problem.tokens_per_rank) T += static_cast<std::int64_t>(t) * c.topk;
      for (int r = 0; r < R; ++r) cap[r] = T / R + (r < T % R ? 1 : 0);
      expect_eq(j.at("tokens_per_rank").get<std::vector<std::int32_t>>(), *problem.tokens_per_rank,
                "tokens_per_rank");
    } else {
      expect_eq(j.contains("tokens_per_rank"), false, "tokens_per_rank of a full step (absent)");
    }
    expect_eq(after, cap, ragged ? "load_after = CAP_r" : "load_after = S*K");
    expect_eq(j.at("padding").get<std::vector<std::int64_t>>(), padding, "padding");
    expect_eq(j.at("copied_in").get<std::vector<int>>(), copied, "copied_in");
    expect_eq(j.at("remote_experts").get<std::vector<int>>(), remote, "remote_experts");
    expect_near(j.at("max_over_mean_before").get<double>(), ratio(before), "max_over_mean_before");
    expect_near(j.at("max_over_mean_after").get<double>(), ratio(after), "max_over_mean_after");
    expect_eq(j.at("max_load_before").get<std::int64_t>(), *std::max_element(before.begin(), before.end()),
              "max_load_before");
    expect_eq(j.at("experts_copied").get<int>(), std::accumulate(copied.begin(), copied.end(), 0), "experts_copied");
    const std::int64_t pad = std::accumulate(padding.begin(), padding.end(), std::int64_t{0});
    expect_eq(j.at("padding_slots").get<std::int64_t>(), pad, "padding_slots");
    expect_near(j.at("padding_fraction").get<double>(),
                static_cast<double>(pad) / (static_cast<double>(R) * static_cast<double>(plan.ranks[0].src_info.size())),
                "padding_fraction");

    const int steps = std::stoi(argv[4]);
    auto times = j.at("step_times_us").get<std::vector<double>>();
    expect_eq(j.at("steps").get<int>(), steps, "steps");
    expect_eq(static_cast<int>(times.size()), steps, "step_times_us count");
    std::sort(times.begin(), times.end());
    const double median = steps % 2 ? times[steps / 2] : 0.5 * (times[steps / 2 - 1] + times[steps / 2]);
    expect_near(j.at("time_per_step_us").get<double>(), median, "time_per_step_us (the median)");
    expect_eq(times.front() > 0, true, "step times are positive");
    expect_eq(j.at("backend").get<std::string>(), std::string(argv[5]), "backend");
    expect_eq(j.at("memory_estimate_bytes").get<std::int64_t>() > 0, true, "memory_estimate_bytes");
    if (failures == 0) std::printf("summary JSON matches the plan (%d ranks)\n", R);
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "check_summary_json: %s\n", e.what());
    return 1;
  }
}
