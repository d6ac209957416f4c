// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The summary of moonep-plan: load before/after, copies, padding, time;
// as a table or as one JSON object.
#include "plan_summary.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>

#include <nlohmann/json.hpp>

#include "memory_budget.hpp"
#include "moonep/moonep_config.hpp"

namespace moonep::tools {

PlanSummary summarize(const HostPlan& plan, const Routing& routing) {
  const Config& c = plan.config;
  const int R = c.ranks, B = c.copy_slots, epn = c.experts_per_rank();
  PlanSummary s;
  s.config = c;
  if (plan.tokens_per_rank && is_ragged(c, &*plan.tokens_per_rank)) s.tokens = *plan.tokens_per_rank;
  s.load_before.assign(R, 0);
  for (const auto& rank_routing : routing)
    for (std::int32_t e : rank_routing) ++s.load_before[e / epn];
  for (int d = 0; d < R; ++d) {
    const HostRankPlan& p = plan.ranks[d];
    s.load_after.push_back(std::count_if(p.src_info.begin(), p.src_info.end(),
                                         [](std::int32_t v) { return v >= 0; }));
    // experts_to_copy is the whole [R][B] table on every rank; row d is d's.
    s.copied_in.push_back(static_cast<int>(std::count_if(
        p.experts_to_copy.begin() + static_cast<std::ptrdiff_t>(d) * B,
        p.experts_to_copy.begin() + static_cast<std::ptrdiff_t>(d + 1) * B,
        [](std::int32_t e) { return e >= 0; })));
    s.remote_experts.push_back(p.remote_stats[0]);
    std::int64_t pad = 0;
    for (std::size_t g = 1; g < p.zero_fill_ranges.size(); g += 2) pad += p.zero_fill_ranges[g];
    s.padding.push_back(pad);
  }
  return s;
}

double max_over_mean(const std::vector<std::int64_t>& load) {
  if (load.empty()) return 0;
  const double sum = std::accumulate(load.begin(), load.end(), 0.0);
  const double mean = sum / static_cast<double>(load.size());
  return mean > 0 ? static_cast<double>(*std::max_element(load.begin(), load.end())) / mean : 0;
}

double median_us(std::vector<double> seconds) {
  if (seconds.empty()) return 0;
  std::sort(seconds.begin(), seconds.end());
  const std::size_t n = seconds.size();
  const double mid = n % 2 ? seconds[n / 2] : 0.5 * (seconds[n / 2 - 1] + seconds[n / 2]);
  return mid * 1e6;
}

std::string format_duration_us(double us) {
  char buf[64];
  const double s = us * 1e-6;
  auto three = [&](double v, const char* unit) {
    const char* fmt = v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s";
    std::snprintf(buf, sizeof buf, fmt, v, unit);
  };
  if (us < 1) std::snprintf(buf, sizeof buf, "%.0f ns", us * 1e3);
  else if (us < 1e3) three(us, "us");
  else if (us < 1e6) three(us * 1e-3, "ms");
  else if (s < 100) three(s, "s");
  else {
    const long long total = static_cast<long long>(s + 0.5);
    std::snprintf(buf, sizeof buf, "%lld min %lld s", total / 60, total % 60);
  }
  return buf;
}

namespace {

struct Totals {
  std::int64_t max_before = 0, max_after = 0, padding = 0;
  double mean = 0;
  int copies = 0, uncovered = 0;
};

Totals totals_of(const PlanSummary& s) {
  const int R = s.config.ranks;
  Totals t;
  t.max_before = *std::max_element(s.load_before.begin(), s.load_before.end());
  t.max_after = *std::max_element(s.load_after.begin(), s.load_after.end());
  t.mean = std::accumulate(s.load_before.begin(), s.load_before.end(), 0.0) / R;
  t.copies = std::accumulate(s.copied_in.begin(), s.copied_in.end(), 0);
  for (int r = 0; r < R; ++r) t.uncovered += std::max(0, s.remote_experts[r] - s.copied_in[r]);
  t.padding = std::accumulate(s.padding.begin(), s.padding.end(), std::int64_t{0});
  return t;
}

void print_row(std::ostream& out, const PlanSummary& s, int r) {
  char line[160];
  std::snprintf(line, sizeof line, "  %4d  %11lld  %10lld  %9d  %14d  %13lld\n", r,
                static_cast<long long>(s.load_before[r]), static_cast<long long>(s.load_after[r]),
                s.copied_in[r], s.remote_experts[r], static_cast<long long>(s.padding[r]));
  out << line;
}

constexpr const char* kTableHeader =
    "  rank  load before  load after  copied in  remote experts  padding slots\n";

// The extremes of plain EP's load (the busiest and the least loaded ranks),
// then how the R loads spread: a histogram of 10 equal ranges.
void print_compact_table(std::ostream& out, const PlanSummary& s) {
  const int R = s.config.ranks;
  constexpr int kEach = 4, kBins = 10;
  std::vector<int> order(static_cast<std::size_t>(R));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return s.load_before[a] > s.load_before[b]; });
  out << "  " << R << " ranks: the " << kEach << " busiest and the " << kEach
      << " least loaded under plain EP (--table full prints every rank)\n";
  out << kTableHeader;
  for (int i = 0; i < kEach; ++i) print_row(out, s, order[i]);
  out << "   ...\n";
  for (int i = R - kEach; i < R; ++i) print_row(out, s, order[i]);

  const std::int64_t lo = s.load_before[order.back()], hi = s.load_before[order.front()];
  const std::int64_t width = std::max<std::int64_t>(1, (hi - lo + kBins) / kBins);
  std::vector<int> count(kBins, 0);
  for (std::int64_t v : s.load_before) ++count[std::min<std::int64_t>(kBins - 1, (v - lo) / width)];
  const int most = *std::max_element(count.begin(), count.end());
  out << "\n  load before (plain EP): ranks per range\n";
  char line[200];
  for (int b = 0; b < kBins; ++b) {
    const std::int64_t from = lo + b * width, to = from + width - 1;
    if (from > hi) break;
    const int bar = most > 0 ? (count[b] * 40 + most - 1) / most : 0;
    std::snprintf(line, sizeof line, "  %11lld .. %-11lld %5d  %s\n", static_cast<long long>(from),
                  static_cast<long long>(to), count[b], std::string(static_cast<std::size_t>(bar), '#').c_str());
    out << line;
  }
  std::int64_t lo_after = *std::min_element(s.load_after.begin(), s.load_after.end());
  std::int64_t hi_after = *std::max_element(s.load_after.begin(), s.load_after.end());
  if (lo_after == hi_after) out << "  load after: " << lo_after << " on every rank\n";
  else out << "  load after: " << lo_after << " .. " << hi_after << "\n";
}

}  // namespace

void print_summary(std::ostream& out, const PlanSummary& s, const RunInfo& run, TableStyle table) {
  const Config& c = s.config;
  const int R = c.ranks;
  char line[256];
  out << "moonep-plan: " << run.source << "\n";
  out << "configuration: " << describe(c) << "\n";
  if (s.tokens.empty()) {
    std::snprintf(line, sizeof line,
                  "  %d experts per rank; every rank must receive CAP = S*K = %lld entries; "
                  "NvS = %lld slots per rank\n\n",
                  c.experts_per_rank(), static_cast<long long>(c.capacity()),
                  static_cast<long long>(c.slots()));
    out << line;
  } else {
    // A ragged step (docs/spec/planning.md "Ragged steps"): T entries in
    // all, rank r receives CAP_r = T div R, one more on the lowest T mod R.
    std::int64_t T = 0;
    for (std::int32_t t : s.tokens) T += static_cast<std::int64_t>(t) * c.topk;
    std::snprintf(line, sizeof line,
                  "  %d experts per rank; a ragged step of T = %lld entries: rank r must receive "
                  "CAP_r = %lld%s; NvS = %lld slots per rank\n",
                  c.experts_per_rank(), static_cast<long long>(T), static_cast<long long>(T / R),
                  T % R ? (" (+1 on ranks 0.." + std::to_string(T % R - 1) + ")").c_str() : "",
                  static_cast<long long>(c.slots()));
    out << line;
    out << "  tokens per rank:";
    if (R <= kCompactTableRanks) {
      for (std::int32_t t : s.tokens) out << " " << t;
    } else {
      out << " " << *std::min_element(s.tokens.begin(), s.tokens.end()) << " .. "
          << *std::max_element(s.tokens.begin(), s.tokens.end());
    }
    out << " (of S = " << c.tokens << ")\n\n";
  }
  const bool compact = table == TableStyle::compact || (table == TableStyle::automatic && R > kCompactTableRanks);
  if (compact && R > 8) {
    print_compact_table(out, s);
  } else {
    out << kTableHeader;
    for (int r = 0; r < R; ++r) print_row(out, s, r);
  }
  const Totals t = totals_of(s);
  std::snprintf(line, sizeof line,
                "\nmax/mean %.2f -> %.2f (busiest rank %lld -> %lld entries, mean %.0f)\n",
                max_over_mean(s.load_before), max_over_mean(s.load_after),
                static_cast<long long>(t.max_before), static_cast<long long>(t.max_after), t.mean);
  out << line;
  out << "experts copied: " << t.copies << " in total, of " << R * c.copy_slots << " copy slots";
  if (t.uncovered > 0)
    out << "; " << t.uncovered << " remote experts found no free copy slot (raise --copy-slots)";
  out << "\n";
  std::snprintf(line, sizeof line, "padding slots: %lld in total, %.1f%% of R*NvS = %lld\n",
                static_cast<long long>(t.padding),
                100.0 * static_cast<double>(t.padding) / (static_cast<double>(R) * c.slots()),
                static_cast<long long>(R * c.slots()));
  out << line;
  if (!run.step_seconds.empty()) {
    const int steps = static_cast<int>(run.step_seconds.size());
    out << "time per step: " << format_duration_us(median_us(run.step_seconds)) << " (median of " << steps
        << " step" << (steps == 1 ? "" : "s") << ", ";
    if (run.world == "mpi")
      out << "slowest of " << run.processes << " MPI ranks, " << run.mpi_world << " world)\n";
    else
      out << "backend " << run.backend << (run.ran.empty() ? "" : ": " + run.ran) << ")\n";
  }
  if (!run.memory.empty()) out << "memory: " << run.memory << "\n";
}


void print_summary_json(std::ostream& out, const PlanSummary& s, const RunInfo& run) {
  using nlohmann::json;
  const Config& c = s.config;
  const Totals t = totals_of(s);
  json j;
  j["moonep_version"] = MOONEP_VERSION_STRING;
  j["source"] = run.input.empty()
                    ? json{{"mode", "synthetic"}, {"imbalance", run.imbalance}, {"seed", run.seed}}
                    : json{{"mode", "file"}, {"path", run.input}};
  j["configuration"] = {{"ranks", c.ranks},
                        {"experts", c.experts},
                        {"topk", c.topk},
                        {"tokens", c.tokens},
                        {"copy_slots", c.copy_slots},
                        {"token_padding", c.token_padding},
                        {"experts_per_rank", c.experts_per_rank()},
                        {"capacity", c.capacity()},
                        {"slots_per_rank", c.slots()}};
  j["backend"] = run.backend;
  j["ran"] = run.ran;
  j["world"] = run.world;
  if (run.world == "mpi") j["mpi_world"] = run.mpi_world;
  j["processes"] = run.processes;
  // A ragged step's counts s_r (absent for a full step, as in the files).
  if (!s.tokens.empty()) j["tokens_per_rank"] = s.tokens;
  j["load_before"] = s.load_before;
  j["load_after"] = s.load_after;
  j["copied_in"] = s.copied_in;
  j["remote_experts"] = s.remote_experts;
  j["padding"] = s.padding;
  j["max_over_mean_before"] = max_over_mean(s.load_before);
  j["max_over_mean_after"] = max_over_mean(s.load_after);
  j["max_load_before"] = t.max_before;
  j["max_load_after"] = t.max_after;
  j["mean_load"] = t.mean;
  j["experts_copied"] = t.copies;
  j["copy_slots_total"] = static_cast<std::int64_t>(c.ranks) * c.copy_slots;
  j["remote_experts_without_copy"] = t.uncovered;
  j["padding_slots"] = t.padding;
  j["padding_fraction"] = static_cast<double>(t.padding) / (static_cast<double>(c.ranks) * c.slots());
  j["steps"] = run.step_seconds.size();
  std::vector<double> us;
  for (double v : run.step_seconds) us.push_back(v * 1e6);
  j["time_per_step_us"] = median_us(run.step_seconds);
  j["step_times_us"] = us;
  j["memory_estimate_bytes"] = run.memory_estimate;
  j["memory_limit_bytes"] = run.memory_limit == kNoMemoryLimit ? json(nullptr) : json(run.memory_limit);
  out << j.dump() << "\n";
}

}  // namespace moonep::tools
