// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// mpi_bench — time per planning step of the portable planner over the MPI
// worlds (one rank per process), and the same step over the in-process world
// (all R ranks in one process) for comparison. One table row per world.
//
//   mpirun -np R mpi_bench [options]          the MPI worlds (shared, rma)
//   mpi_bench --inprocess --ranks R [options] the in-process world, no mpirun
//   mpi_bench --header                        the table header only
//   (every run prints the header above its rows; --no-header leaves it out,
//   for a driver that prints it once above several runs)
//   perf_tests/run_mpi_bench.sh               all of it at np 2 and 4, one table
//
// options: --experts-per-rank 64 --topk 8 --tokens 4096 --copy-slots 8
//          --token-padding 16 --imbalance 1.0 --steps 21 --worlds shared,rma
//          --smoke (a tiny configuration and 3 steps, for CTest)
//          --csv FILE (also append the rows to FILE, perf_tests/csv_report.hpp)
//
// A step's time is the slowest rank's: every rank starts after a barrier
// and the per-rank times are reduced with MPI_MAX. The in-process figure
// plans all R ranks one after the other in one process, so it is the sum of
// the ranks' work rather than the maximum. Median over --steps steps after
// one warm-up step; Me/s counts all R*S*K routed entries.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "moonep/mpi_world.hpp"
#include "moonep/planner.hpp"
#include "moonep/synthetic.hpp"
#include "moonep/world.hpp"

#include "csv_report.hpp"  // after Kokkos_Core.hpp (via planner.hpp): reads KOKKOS_VERSION

namespace {

using Exec = Kokkos::DefaultHostExecutionSpace;
using Mem = Exec::memory_space;
using HostView = Kokkos::View<std::int32_t*, Kokkos::HostSpace>;
using Clock = std::chrono::steady_clock;

struct Options {
  int ranks = 0;  // --inprocess only; under mpirun the process count
  int experts_per_rank = 64, topk = 8, tokens = 4096, copy_slots = 8, token_padding = 16;
  double imbalance = 1.0;
  int steps = 21;
  bool inprocess = false, header = false, no_header = false;
  std::vector<std::string> worlds{"shared", "rma"};
  std::string csv;  // --csv FILE; empty = table only
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "mpi_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--inprocess") o.inprocess = true;
    else if (a == "--header") o.header = true;
    else if (a == "--no-header") o.no_header = true;
    else if (a == "--smoke") { o.tokens = 64; o.experts_per_rank = 4; o.topk = 2; o.steps = 3; o.token_padding = 4; }
    else if (a == "--ranks") o.ranks = std::atoi(next());
    else if (a == "--experts-per-rank") o.experts_per_rank = std::atoi(next());
    else if (a == "--topk") o.topk = std::atoi(next());
    else if (a == "--tokens") o.tokens = std::atoi(next());
    else if (a == "--copy-slots") o.copy_slots = std::atoi(next());
    else if (a == "--token-padding") o.token_padding = std::atoi(next());
    else if (a == "--imbalance") o.imbalance = std::atof(next());
    else if (a == "--steps") o.steps = std::atoi(next());
    else if (a == "--csv") o.csv = next();
    else if (a == "--worlds") {
      o.worlds.clear();
      std::stringstream list(next());
      for (std::string w; std::getline(list, w, ',');) o.worlds.push_back(w);
    } else if (a.rfind("--kokkos", 0) != 0) {
      std::fprintf(stderr, "mpi_bench: unknown option %s (see the header of perf_tests/mpi_bench.cpp)\n", a.c_str());
      std::exit(2);
    }
  }
  if (o.steps < 1) o.steps = 1;
  return o;
}

moonep::Config config_for(const Options& o, int ranks) {
  moonep::Config c;
  c.ranks = ranks;
  c.experts = o.experts_per_rank * ranks;
  c.topk = o.topk;
  c.tokens = o.tokens;
  c.copy_slots = o.copy_slots;
  c.token_padding = o.token_padding;
  return c;
}

void print_header() {
  std::printf("%-10s %3s %5s %3s %6s %3s %3s %4s | %10s %10s %10s | %8s\n", "world", "np", "E", "K", "S", "B", "tp",
              "imb", "median us", "min us", "max us", "Me/s");
}

// One table row, and with --csv one CSV row (world: inprocess, shared, rma).
void print_row(const Options& o, const std::string& world, int np, const moonep::Config& c, double imbalance,
               std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  const double med = seconds[seconds.size() / 2];
  const double entries = static_cast<double>(c.ranks) * static_cast<double>(c.entries());
  std::printf("%-10s %3d %5d %3d %6d %3d %3d %4.1f | %10.1f %10.1f %10.1f | %8.1f\n", world.c_str(), np, c.experts,
              c.topk, c.tokens, c.copy_slots, c.token_padding, imbalance, med * 1e6, seconds.front() * 1e6,
              seconds.back() * 1e6, entries / med / 1e6);
  std::fflush(stdout);
  if (!o.csv.empty()) {
    moonep::perf::CsvRow row;
    row.backend = "portable";
    row.world = world.rfind("mpi-", 0) == 0 ? world.substr(4) : world;
    row.config = c;
    row.imbalance = imbalance;
    row.time_per_step_us = med * 1e6;
    row.entries_per_s = entries / med;
    moonep::perf::CsvReport(o.csv).append(row);
  }
}

HostView to_view(const std::vector<std::int32_t>& row) {
  HostView v("mpi_bench.routing", row.size());
  std::copy(row.begin(), row.end(), v.data());
  return v;
}

// All R ranks in this process.
void bench_inprocess(const Options& o) {
  const int R = o.ranks > 0 ? o.ranks : 1;
  const moonep::Config c = config_for(o, R);
  const moonep::Routing routing = moonep::synthetic_routing(c, o.imbalance, 42);
  moonep::InProcessWorld<Mem> world(R);
  moonep::Planner<Exec> planner(c, world);
  std::vector<HostView> owned;
  std::vector<moonep::Planner<Exec>::input_view> views;
  for (const auto& row : routing) {
    owned.push_back(to_view(row));
    views.push_back(owned.back());
  }
  planner.plan(views);  // warm-up
  std::vector<double> t;
  for (int i = 0; i < o.steps; ++i) {
    const auto a = Clock::now();
    planner.plan(views);
    t.push_back(std::chrono::duration<double>(Clock::now() - a).count());
  }
  if (!o.no_header) print_header();
  print_row(o, "inprocess", 1, c, o.imbalance, t);
}

// One rank per MPI process, for each requested world.
void bench_mpi(const Options& o) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const moonep::Config c = config_for(o, size);
  // Every process generates the whole routing (deterministic) and keeps its row.
  const HostView mine = to_view(moonep::synthetic_routing(c, o.imbalance, 42)[static_cast<std::size_t>(rank)]);
  const std::vector<moonep::Planner<Exec>::input_view> views{mine};
  if (rank == 0 && !o.no_header) print_header();
  for (const std::string& name : o.worlds) {
    auto world = moonep::make_mpi_world(MPI_COMM_WORLD, moonep::mpi_world_kind_from_string(name));
    moonep::Planner<Exec> planner(c, *world);
    planner.plan(views);  // warm-up
    std::vector<double> t;
    for (int i = 0; i < o.steps; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      const auto a = Clock::now();
      planner.plan(views);
      const double mine_s = std::chrono::duration<double>(Clock::now() - a).count();
      double slowest = 0;
      MPI_Allreduce(&mine_s, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      t.push_back(slowest);
    }
    if (rank == 0) print_row(o, std::string("mpi-") + moonep::to_string(world->kind()), size, c, o.imbalance, t);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (o.header) {
    print_header();
    return 0;
  }
  if (!o.inprocess) MPI_Init(&argc, &argv);
  Kokkos::initialize(argc, argv);
  int status = 0;
  try {
    if (o.inprocess) bench_inprocess(o);
    else bench_mpi(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_bench: error: %s\n", e.what());
    status = 1;
  }
  Kokkos::finalize();
  if (!o.inprocess) {
    if (status != 0) MPI_Abort(MPI_COMM_WORLD, status);
    MPI_Finalize();
  }
  return status;
}
