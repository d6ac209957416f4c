// The human summary of moonep-plan: load before/after, copies, padding.
#include "plan_summary.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace moonep::tools {

PlanSummary summarize(const HostPlan& plan, const Routing& routing) {
  const Config& c = plan.config;
  const int R = c.ranks, B = c.copy_slots, epn = c.experts_per_rank();
  PlanSummary s;
  s.config = c;
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

void print_summary(std::ostream& out, const PlanSummary& s, const std::string& source,
                   const std::string& timing) {
  const Config& c = s.config;
  const int R = c.ranks;
  char line[256];
  out << "moonep-plan: " << source << "\n";
  out << "configuration: " << describe(c) << "\n";
  std::snprintf(line, sizeof line,
                "  %d experts per rank; every rank must receive CAP = S*K = %lld entries; "
                "NvS = %lld slots per rank\n\n",
                c.experts_per_rank(), static_cast<long long>(c.capacity()),
                static_cast<long long>(c.slots()));
  out << line;
  out << "  rank  load before  load after  copied in  remote experts  padding slots\n";
  for (int r = 0; r < R; ++r) {
    std::snprintf(line, sizeof line, "  %4d  %11lld  %10lld  %9d  %14d  %13lld\n", r,
                  static_cast<long long>(s.load_before[r]), static_cast<long long>(s.load_after[r]),
                  s.copied_in[r], s.remote_experts[r], static_cast<long long>(s.padding[r]));
    out << line;
  }
  const auto max_before = *std::max_element(s.load_before.begin(), s.load_before.end());
  const auto max_after = *std::max_element(s.load_after.begin(), s.load_after.end());
  const double mean = std::accumulate(s.load_before.begin(), s.load_before.end(), 0.0) / R;
  std::snprintf(line, sizeof line,
                "\nmax/mean %.2f -> %.2f (busiest rank %lld -> %lld entries, mean %.0f)\n",
                max_over_mean(s.load_before), max_over_mean(s.load_after),
                static_cast<long long>(max_before), static_cast<long long>(max_after), mean);
  out << line;
  const int copies = std::accumulate(s.copied_in.begin(), s.copied_in.end(), 0);
  const int uncovered = [&] {
    int n = 0;
    for (int r = 0; r < R; ++r) n += std::max(0, s.remote_experts[r] - s.copied_in[r]);
    return n;
  }();
  out << "experts copied: " << copies << " in total, of " << R * c.copy_slots
      << " copy slots";
  if (uncovered > 0)
    out << "; " << uncovered << " remote experts found no free copy slot (raise --copy-slots)";
  out << "\n";
  const std::int64_t pad = std::accumulate(s.padding.begin(), s.padding.end(), std::int64_t{0});
  std::snprintf(line, sizeof line, "padding slots: %lld in total, %.1f%% of R*NvS = %lld\n",
                static_cast<long long>(pad),
                100.0 * static_cast<double>(pad) / (static_cast<double>(R) * c.slots()),
                static_cast<long long>(R * c.slots()));
  out << line;
  if (!timing.empty()) out << "time per step: " << timing << "\n";
}

}  // namespace moonep::tools
