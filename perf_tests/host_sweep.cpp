// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// host_sweep — time per planning step on the host, all R ranks in this
// process: the portable planner (Kokkos default execution space over an
// InProcessWorld), the reference planner, and as a floor std::stable_sort
// of the same entries by expert (each rank's entries, what the planner
// sorts). Median of --steps steps; entries/s counts all routed entries.
//
// Every point is timed twice in the same run: the full step (every rank
// holds S tokens) and a ragged step of the same S (docs/spec/planning.md
// "Ragged steps"): s_r tokens on rank r, drawn in pairs s and S - s with s
// uniform in 0..S (ragged_counts.hpp, shared with moonep_gpu_bench), so
// every s_r is uniform in 0..S and their mean is S/2. The portable planner
// plans it with the same planner and the same routing views as the full
// step (buffers sized for S, a view of the R counts); the reference planner
// and the sort get each rank's first s_r*K ids.
//
//   host_sweep                 the full sweep over S, E, R and imbalance
//   host_sweep --steps 21      more steps per point
//   host_sweep --smoke         one tiny point (the CTest smoke test)
//   host_sweep --point R E K S B tp imbalance   one point of your choice
//   host_sweep --csv FILE      also append every point to FILE (csv_report.hpp;
//                              perf_tests/run_sweeps.sh collects and plots them)
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "csv_report.hpp"
#include "ragged_counts.hpp"
#include "moonep/planner.hpp"
#include "moonep/reference.hpp"
#include "moonep/synthetic.hpp"
#include "moonep/world.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;

struct Point {
  moonep::Config config;
  double imbalance;
};

template <class F>
double median_seconds(int steps, F&& f) {
  f();  // warm-up (first touch, caches)
  std::vector<double> t;
  for (int i = 0; i < steps; ++i) {
    const auto a = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// One step's times.
struct Times {
  double portable = 0, reference = 0, sort = 0;
};

using PlannerT = moonep::Planner<Exec>;

Times time_step(int steps, PlannerT& planner, const std::vector<PlannerT::input_view>& views,
                const moonep::Config& c, const moonep::Routing& routing, const moonep::TokensPerRank* tokens) {
  Times t;
  Kokkos::View<std::int32_t*, Mem> counts("tokens_per_rank", tokens ? tokens->size() : 0);
  if (tokens) {
    Kokkos::deep_copy(counts, Kokkos::View<const std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                  tokens->data(), tokens->size()));
  }
  const PlannerT::input_view counts_in = counts;
  t.portable = median_seconds(steps, [&] {
    planner.plan(views, nullptr, tokens ? &counts_in : nullptr);
    Kokkos::fence();
  });
  t.reference = median_seconds(steps, [&] { (void)moonep::plan_reference(c, routing, nullptr, tokens); });

  std::vector<std::pair<std::int32_t, std::int32_t>> keyed(static_cast<std::size_t>(c.entries()));
  t.sort = median_seconds(steps, [&] {
    for (const auto& row : routing) {
      for (std::size_t i = 0; i < row.size(); ++i) keyed[i] = {row[i], static_cast<std::int32_t>(i)};
      std::stable_sort(keyed.begin(), keyed.begin() + static_cast<std::ptrdiff_t>(row.size()),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    }
  });
  return t;
}

void print_times(const Point& p, const char* step, double mean_tokens, double entries, const Times& t,
                 double full_portable) {
  const moonep::Config& c = p.config;
  char portable[64];
  std::snprintf(portable, sizeof portable, "%10.3f %9.1f %6.2f", t.portable * 1e3, entries / t.portable / 1e6,
                t.portable * 1e9 / entries);
  char ratios[32];
  std::snprintf(ratios, sizeof ratios, "%5.2f", t.portable / t.sort);
  if (full_portable > 0)
    std::snprintf(ratios + std::strlen(ratios), sizeof ratios - std::strlen(ratios), "    %5.2f",
                  t.portable / full_portable);
  else
    std::snprintf(ratios + std::strlen(ratios), sizeof ratios - std::strlen(ratios), "        -");
  std::printf("%4d %5d %3d %6d %3d %3d %5.1f %-6s %7.0f | %s | %10.3f %9.1f | %10.3f %9.1f | %s\n", c.ranks,
              c.experts, c.topk, c.tokens, c.copy_slots, c.token_padding, p.imbalance, step, mean_tokens, portable,
              t.reference * 1e3, entries / t.reference / 1e6, t.sort * 1e3, entries / t.sort / 1e6, ratios);
  std::fflush(stdout);
}

void run_point(const Point& p, int steps, const moonep::perf::CsvReport* csv) {
  const moonep::Config& c = p.config;
  const moonep::Routing routing = moonep::synthetic_routing(c, p.imbalance, 42);

  moonep::InProcessWorld<Mem> world(c.ranks);
  PlannerT planner(c, world);
  std::vector<Kokkos::View<std::int32_t*, Mem>> owned;
  std::vector<PlannerT::input_view> views;
  for (const auto& row : routing) {
    owned.emplace_back("routing", row.size());
    Kokkos::deep_copy(owned.back(), Kokkos::View<const std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                        row.data(), row.size()));
    views.push_back(owned.back());
  }

  const moonep::TokensPerRank tokens = moonep::perf::ragged_counts(c);
  const moonep::Routing ragged = moonep::perf::cut_to_counts(c, routing, tokens);

  const Times full = time_step(steps, planner, views, c, routing, nullptr);
  const Times part = time_step(steps, planner, views, c, ragged, &tokens);
  const double full_entries = static_cast<double>(c.ranks) * static_cast<double>(c.entries());
  const double part_entries = static_cast<double>(moonep::perf::routed_entries(c, tokens));
  print_times(p, "full", c.tokens, full_entries, full, -1);
  print_times(p, "ragged", part_entries / c.topk / c.ranks, part_entries, part, full.portable);

  if (csv) {
    // The sort is not a planner but the floor the goal is measured against;
    // it gets a row (and a curve in the plot) of its own.
    for (const auto& [step, t, entries] : {std::tuple<const char*, Times, double>{"full", full, full_entries},
                                           {"ragged", part, part_entries}}) {
      for (const auto& [backend, seconds] : {std::pair<const char*, double>{"portable", t.portable},
                                             {"reference", t.reference}, {"stable_sort", t.sort}}) {
        moonep::perf::CsvRow row;
        row.backend = backend;
        row.world = "inprocess";
        row.config = c;
        row.imbalance = p.imbalance;
        row.time_per_step_us = seconds * 1e6;
        row.entries_per_s = entries / seconds;
        row.step = step;
        row.entries = static_cast<std::int64_t>(entries);
        csv->append(row);
      }
    }
  }
}

moonep::Config make(int R, int E, int K, int S, int B, int tp) {
  moonep::Config c;
  c.ranks = R; c.experts = E; c.topk = K; c.tokens = S; c.copy_slots = B; c.token_padding = tp;
  return c;
}

}  // namespace

int main(int argc, char* argv[]) {
  int steps = 11;
  bool smoke = false;
  std::string csv_path;
  std::vector<Point> chosen;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--smoke")) smoke = true;
    else if (!std::strcmp(argv[i], "--point") && i + 7 < argc) {
      int v[6];
      for (int& x : v) x = std::atoi(argv[++i]);
      chosen.push_back({make(v[0], v[1], v[2], v[3], v[4], v[5]), std::atof(argv[++i])});
    }
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--csv") && i + 1 < argc) csv_path = argv[++i];
  }
  if (smoke && chosen.empty()) steps = 3;  // before the header names the count
  Kokkos::initialize(argc, argv);
  {
    std::printf("MoonEP host sweep: Kokkos %s execution space, concurrency %d, median of %d steps\n",
                Exec::name(), Exec().concurrency(), steps);
    std::printf("portable/reference: one planning step of all R ranks; stable_sort: std::stable_sort of every\n"
                "rank's (expert, index) entries by expert. Me/s = million routed entries per second.\n"
                "Each point: the full step (every rank S tokens), then a ragged step of the same S (rank r\n"
                "s_r tokens, uniform in 0..S, mean_s their mean); rag/full = ragged over full portable time.\n\n");
    std::printf("%4s %5s %3s %6s %3s %3s %5s %-6s %7s | %10s %9s %6s | %10s %9s | %10s %9s | %5s %8s\n", "R", "E",
                "K", "S", "B", "tp", "imb", "step", "mean_s", "portable ms", "Me/s", "ns/ent", "ref ms", "Me/s",
                "sort ms", "Me/s", "p/sort", "rag/full");
    std::vector<Point> points;
    if (!chosen.empty()) {
      points = chosen;
    } else if (smoke) {
      points.push_back({make(2, 8, 2, 64, 2, 4), 1.0});
    } else {
      // Linearity in S at the goal shape (R=8, E=256, K=8).
      for (int S : {512, 1024, 2048, 4096, 8192, 16384}) points.push_back({make(8, 256, 8, S, 8, 16), 1.0});
      // Imbalance at the goal point.
      for (double imb : {0.0, 3.0}) points.push_back({make(8, 256, 8, 4096, 8, 16), imb});
      // Experts.
      for (int E : {64, 1024}) points.push_back({make(8, E, 8, 4096, 8, 16), 1.0});
      // Ranks.
      for (int R : {2, 4, 16, 32, 64}) points.push_back({make(R, 256, 8, 4096, 8, 16), 1.0});
    }
    std::unique_ptr<moonep::perf::CsvReport> csv;
    if (!csv_path.empty()) {
      try {
        csv = std::make_unique<moonep::perf::CsvReport>(csv_path);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "host_sweep: error: %s\n", e.what());
        points.clear();  // nothing measured, Kokkos still finalized below
        steps = -1;
      }
    }
    for (const Point& p : points) run_point(p, steps, csv.get());
  }
  Kokkos::finalize();
  return steps < 0 ? 2 : 0;
}
