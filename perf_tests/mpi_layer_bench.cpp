// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// mpi_layer_bench — time of moonep::MpiLayer's dispatch and combine over
// both MPI worlds (one rank per process, host memory, float), next to
// MPI_Alltoallv of the same rows, in the same run.
//
//   mpirun -np R mpi_layer_bench [options]
//   options: --experts-per-rank 8 --topk 8 --tokens 1024 --hidden 256
//            --copy-slots 2 --token-padding 8 --imbalance 1.0 --steps 11
//            --smoke (a tiny configuration and 2 steps)
//
// One step: a barrier, then the operation; its time is the slowest rank's
// (MPI_MAX); the median of --steps steps after one warm-up. The plan
// (synthetic_routing(config, imbalance, 42)) is made once. Rows: the rows
// the operation moves between ranks, all ranks together: dispatch one
// H-row per (token, destination rank) plus a weight per entry; combine one
// partial row (float) per (token, destination rank). MPI_Alltoallv moves
// the same rows (each rank's primaries' rows, already packed by
// destination: no packing or unpacking timed), the floor a
// message-passing dispatch starts from. GB/s: those rows' bytes over the
// time. Dispatch includes its epilogue (duplicates' rows at the
// destination), combine its prologue and the sources' sums. A second
// MPI_Alltoallv moves what dispatch produces: every filled slot's row
// (duplicates included, as a message-passing dispatch without the plan's
// dedup sends them; the bytes the GPU benches' rates count); the table
// prints both, and dispatch's and combine's time over each.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "moonep/mpi_layer.hpp"
#include "moonep/planner.hpp"
#include "moonep/synthetic.hpp"

namespace {

using Exec = Kokkos::DefaultHostExecutionSpace;
using Clock = std::chrono::steady_clock;

struct Options {
  int experts_per_rank = 8, topk = 8, tokens = 1024, hidden = 256, copy_slots = 2, token_padding = 8, steps = 11;
  double imbalance = 1.0;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--smoke") {
      o.tokens = 64;
      o.hidden = 16;
      o.steps = 2;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "mpi_layer_bench: %s needs a value\n", a.c_str());
      std::exit(2);
    }
    const char* v = argv[++i];
    if (a == "--experts-per-rank") o.experts_per_rank = std::atoi(v);
    else if (a == "--topk") o.topk = std::atoi(v);
    else if (a == "--tokens") o.tokens = std::atoi(v);
    else if (a == "--hidden") o.hidden = std::atoi(v);
    else if (a == "--copy-slots") o.copy_slots = std::atoi(v);
    else if (a == "--token-padding") o.token_padding = std::atoi(v);
    else if (a == "--imbalance") o.imbalance = std::atof(v);
    else if (a == "--steps") o.steps = std::atoi(v);
    else {
      std::fprintf(stderr, "mpi_layer_bench: unknown option %s (see perf_tests/mpi_layer_bench.cpp)\n", a.c_str());
      std::exit(2);
    }
  }
  return o;
}

// Median over `steps` of the slowest rank's time of f, after one warm-up.
double median_seconds(int steps, const std::function<void()>& f) {
  std::vector<double> t;
  for (int s = 0; s <= steps; ++s) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    f();
    const double mine = std::chrono::duration<double>(Clock::now() - t0).count();
    double slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (s > 0) t.push_back(slowest);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  Kokkos::initialize(argc, argv);
  {
    const Options o = parse(argc, argv);
    int rank = 0, np = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    const moonep::Config c{np, np * o.experts_per_rank, o.topk, o.tokens, o.copy_slots, o.token_padding};
    const std::int64_t S = c.tokens, K = c.topk, H = o.hidden, nvs = c.slots();
    const auto routing = moonep::synthetic_routing(c, o.imbalance, 42)[static_cast<std::size_t>(rank)];

    // Rows of this rank per destination rank: its primaries.
    std::vector<int> send_counts(static_cast<std::size_t>(np), 0), recv_counts(static_cast<std::size_t>(np), 0);
    std::vector<int> sdispl(static_cast<std::size_t>(np), 0), rdispl(static_cast<std::size_t>(np), 0);
    long long rows_all = 0;
    // Every filled slot's row, by source rank (from this rank's src_info).
    std::vector<int> slot_send(static_cast<std::size_t>(np), 0), slot_recv(static_cast<std::size_t>(np), 0);
    long long slot_rows_all = 0;
    double td_all[2] = {0, 0}, tc_all[2] = {0, 0};
    if (rank == 0)
      std::printf("%-10s %3s %5s %3s %6s %5s | %-9s %10s %10s %8s\n", "world", "np", "E", "K", "S", "H", "op",
                  "rows", "median us", "GB/s");
    for (const char* world_name : {"shared", "rma"}) {
      auto world = moonep::make_mpi_world(MPI_COMM_WORLD, moonep::mpi_world_kind_from_string(world_name));
      moonep::Planner<Exec> planner(c, *world);
      Kokkos::View<std::int32_t*, Kokkos::HostSpace> ids("ids", routing.size());
      std::copy(routing.begin(), routing.end(), ids.data());
      planner.plan(std::vector<moonep::Planner<Exec>::input_view>{ids});
      const moonep::MpiLayerPlan plan(planner.last_plan());
      if (rows_all == 0) {
        long long mine = 0;
        for (std::int64_t i = 0; i < plan.entries; ++i)
          if (plan.dst[i] >= 0) {
            ++mine;
            send_counts[static_cast<std::size_t>(plan.dst[i] / nvs)] += static_cast<int>(H);
          }
        MPI_Allreduce(&mine, &rows_all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        long long filled = 0;
        for (std::int64_t l = 0; l < plan.src_info_len; ++l)
          if (plan.src_info[l] >= 0) {
            ++filled;
            slot_recv[static_cast<std::size_t>(plan.src_info[l] / nvs)] += static_cast<int>(H);
          }
        MPI_Allreduce(&filled, &slot_rows_all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
      }
      moonep::MpiLayer<float> layer(*world, c, o.hidden);
      Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace> x("x", S, H), out("out", S, H);
      Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace> w("w", S, K);
      for (std::int64_t i = 0; i < S * H; ++i) x.data()[i] = static_cast<float>(i % 7) / 4;
      Kokkos::deep_copy(w, 0.25f);
      const double td = median_seconds(o.steps, [&] { layer.dispatch(plan, x, w); });
      const double tc = median_seconds(o.steps, [&] { layer.combine(plan, layer.recv(), out); });
      const double bytes = static_cast<double>(rows_all) * H * sizeof(float);
      td_all[world_name[0] == 'r'] = td;
      tc_all[world_name[0] == 'r'] = tc;
      if (rank == 0) {
        std::printf("%-10s %3d %5d %3d %6d %5d | %-9s %10lld %10.1f %8.2f\n", world_name, np, c.experts, c.topk,
                    c.tokens, o.hidden, "dispatch", rows_all, td * 1e6, bytes / td / 1e9);
        std::printf("%-10s %3d %5d %3d %6d %5d | %-9s %10lld %10.1f %8.2f\n", world_name, np, c.experts, c.topk,
                    c.tokens, o.hidden, "combine", rows_all, tc * 1e6, bytes / tc / 1e9);
      }
    }
    // MPI_Alltoallv of the same rows (packed by destination beforehand);
    // then of every filled slot's row.
    MPI_Alltoall(slot_recv.data(), 1, MPI_INT, slot_send.data(), 1, MPI_INT, MPI_COMM_WORLD);
    double ta[2] = {0, 0};
    for (int which = 0; which < 2; ++which) {
      std::vector<int>& sc = which == 0 ? send_counts : slot_send;
      std::vector<int>& rc = which == 0 ? recv_counts : slot_recv;
      if (which == 0) MPI_Alltoall(sc.data(), 1, MPI_INT, rc.data(), 1, MPI_INT, MPI_COMM_WORLD);
      for (int r = 1; r < np; ++r) {
        sdispl[r] = sdispl[r - 1] + sc[r - 1];
        rdispl[r] = rdispl[r - 1] + rc[r - 1];
      }
      std::vector<float> sendbuf(static_cast<std::size_t>(sdispl[np - 1] + sc[np - 1]), 0.5f);
      std::vector<float> recvbuf(static_cast<std::size_t>(rdispl[np - 1] + rc[np - 1]));
      ta[which] = median_seconds(o.steps, [&] {
        MPI_Alltoallv(sendbuf.data(), sc.data(), sdispl.data(), MPI_FLOAT, recvbuf.data(), rc.data(), rdispl.data(),
                      MPI_FLOAT, MPI_COMM_WORLD);
      });
      const long long rows = which == 0 ? rows_all : slot_rows_all;
      if (rank == 0)
        std::printf("%-10s %3d %5d %3d %6d %5d | %-9s %10lld %10.1f %8.2f\n", "alltoallv", np, c.experts, c.topk,
                    c.tokens, o.hidden, which == 0 ? "rows" : "slot rows", rows, ta[which] * 1e6,
                    static_cast<double>(rows) * H * sizeof(float) / ta[which] / 1e9);
    }
    if (rank == 0) {
      std::printf("time over MPI_Alltoallv of the rows / of the slot rows:\n");
      for (int wk = 0; wk < 2; ++wk)
        std::printf("  %-6s dispatch %5.2f / %5.2f   combine %5.2f / %5.2f\n", wk == 0 ? "shared" : "rma",
                    td_all[wk] / ta[0], td_all[wk] / ta[1], tc_all[wk] / ta[0], tc_all[wk] / ta[1]);
    }
  }
  Kokkos::finalize();
  MPI_Finalize();
  return 0;
}
