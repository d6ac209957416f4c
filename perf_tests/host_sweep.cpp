// host_sweep — time per planning step on the host, all R ranks in this
// process: the portable planner (Kokkos default execution space over an
// InProcessWorld), the reference planner, and as a floor std::stable_sort
// of the same entries by expert (each rank's S*K entries, what the planner
// sorts). Median of --steps steps; entries/s counts all R*S*K entries.
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
#include <utility>
#include <vector>

#include "csv_report.hpp"
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

void run_point(const Point& p, int steps, const moonep::perf::CsvReport* csv) {
  const moonep::Config& c = p.config;
  const moonep::Routing routing = moonep::synthetic_routing(c, p.imbalance, 42);

  moonep::InProcessWorld<Mem> world(c.ranks);
  moonep::Planner<Exec> planner(c, world);
  std::vector<Kokkos::View<std::int32_t*, Mem>> owned;
  std::vector<moonep::Planner<Exec>::input_view> views;
  for (const auto& row : routing) {
    owned.emplace_back("routing", row.size());
    Kokkos::deep_copy(owned.back(), Kokkos::View<const std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                                        row.data(), row.size()));
    views.push_back(owned.back());
  }
  const double t_portable = median_seconds(steps, [&] {
    planner.plan(views);
    Kokkos::fence();
  });
  const double t_reference = median_seconds(steps, [&] { (void)moonep::plan_reference(c, routing); });

  std::vector<std::pair<std::int32_t, std::int32_t>> keyed(static_cast<std::size_t>(c.entries()));
  const double t_sort = median_seconds(steps, [&] {
    for (const auto& row : routing) {
      for (std::size_t i = 0; i < row.size(); ++i) keyed[i] = {row[i], static_cast<std::int32_t>(i)};
      std::stable_sort(keyed.begin(), keyed.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    }
  });

  const double entries = static_cast<double>(c.ranks) * static_cast<double>(c.entries());
  std::printf("%4d %5d %3d %6d %3d %3d %5.1f | %10.3f %9.1f %6.2f | %10.3f %9.1f | %10.3f %9.1f | %5.2f\n",
              c.ranks, c.experts, c.topk, c.tokens, c.copy_slots, c.token_padding, p.imbalance,
              t_portable * 1e3, entries / t_portable / 1e6, t_portable * 1e9 / entries,
              t_reference * 1e3, entries / t_reference / 1e6, t_sort * 1e3, entries / t_sort / 1e6,
              t_portable / t_sort);
  std::fflush(stdout);
  if (csv) {
    // The sort is not a planner but the floor the goal is measured against;
    // it gets a row (and a curve in the plot) of its own.
    for (const auto& [backend, t] : {std::pair<const char*, double>{"portable", t_portable},
                                     {"reference", t_reference}, {"stable_sort", t_sort}}) {
      csv->append({backend, "inprocess", c, p.imbalance, t * 1e6, entries / t});
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
  Kokkos::initialize(argc, argv);
  {
    std::printf("MoonEP host sweep: Kokkos %s execution space, concurrency %d, median of %d steps\n",
                Exec::name(), Exec().concurrency(), steps);
    std::printf("portable/reference: one planning step of all R ranks; stable_sort: std::stable_sort of every\n"
                "rank's S*K (expert, index) entries by expert. Me/s = million entries (R*S*K) per second.\n\n");
    std::printf("%4s %5s %3s %6s %3s %3s %5s | %10s %9s %6s | %10s %9s | %10s %9s | %5s\n", "R", "E", "K", "S",
                "B", "tp", "imb", "portable ms", "Me/s", "ns/ent", "ref ms", "Me/s", "sort ms", "Me/s",
                "p/sort");
    std::vector<Point> points;
    if (!chosen.empty()) {
      points = chosen;
    } else if (smoke) {
      points.push_back({make(2, 8, 2, 64, 2, 4), 1.0});
      steps = 3;
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
