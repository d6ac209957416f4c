// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::MpiExpertCopies (moonep/mpi_expert_copies.hpp) under mpirun, one
// rank per process, on both MPI worlds: every process computes
// fetch_reference and reduce_reference of the whole problem and compares
// its own rank's copies and expert gradients bit for bit (float, double,
// bfloat16; the plan of a Planner over the world and a HostPlan; B = epn,
// and B < epn with a plan that still copies everything; the caller's views
// and the object's own window buffers). Reduce's order (np 4: a case where
// another order gives other bits). A plan with a remote expert that is not
// copied: the reference's words on every rank, nothing written, still
// usable; views of other extents likewise.
#include "catch2_compat.hpp"

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "moonep/mpi_expert_copies.hpp"
#include "mpi_test_support.hpp"
#include "support/mpi_layer_support.hpp"

using namespace layer_test;
using moonep::MpiExpertCopies;
using moonep::MpiLayerPlan;

namespace {

constexpr int kParams = 5;

// A synthetic step of `c` whose plan runs (the first seed from `seed` on
// whose plan copies every remote expert it runs).
Step runnable_step(const Config& c, double imbalance, std::uint64_t seed) {
  for (std::uint64_t s = seed; s < seed + 200; ++s) {
    Step step = synthetic_step(c, imbalance, s, false);
    if (refusal_of(step).empty()) return step;
  }
  FAIL("no runnable step of " << moonep::describe(c));
  return synthetic_step(c, imbalance, seed, false);
}

std::vector<std::pair<std::string, Step>> copy_steps(int R) {
  std::vector<std::pair<std::string, Step>> all;
  all.emplace_back("B = epn", synthetic_step(Config{R, 4 * R, 4, 12, 4, 4}, 1.5, 11, false));
  all.emplace_back("B = epn ragged", synthetic_step(Config{R, 4 * R, 4, 12, 4, 4}, 1.5, 12, true));
  all.emplace_back("B < epn copying everything", runnable_step(Config{R, 4 * R, 3, 12, 2, 2}, 2.0, 22));
  if (R == 4) all.emplace_back("copied to every rank", copy_everywhere_step());
  return all;
}

// True when some rank copies an expert in this plan.
bool copies_any(const Step& s) {
  for (const std::int32_t e : s.plan.ranks[0].experts_to_copy)
    if (e >= 0) return true;
  return false;
}

template <class T>
void copies_case(moonep::MpiWorld& world, const std::string& name, const Step& s, bool use_planner, bool in_window) {
  const Config& c = s.c;
  const int me = world.rank(), epn = c.experts_per_rank(), B = c.copy_slots;
  INFO(name << ", world " << moonep::to_string(world.kind()) << (use_planner ? ", planner's plan" : ", HostPlan")
            << (in_window ? ", window buffers" : ", caller's views"));
  MpiPlanner planner(c, world);
  if (use_planner) plan_mine(planner, s, me);
  const MpiLayerPlan plan = use_planner ? MpiLayerPlan(planner.last_plan()) : MpiLayerPlan(s.plan, me);

  Draw draw(Values::random, 17);
  const std::vector<std::int32_t> all_e(c.ranks, epn), all_b(c.ranks, B);
  const PerRank<T> own = rows_of<T>(c, epn, kParams, all_e, draw);
  PerRank<T> copies = filled<T>(c, B * kParams, kSentinel);
  moonep::fetch_reference(s.plan, kParams, own, copies);

  MpiExpertCopies<T> ops(world, c, kParams);
  const auto copies_v = host_rows(filled<T>(c, B * kParams, kSentinel)[me], B, kParams);
  if (in_window) {
    Kokkos::deep_copy(ops.experts(), host_rows(own[me], epn, kParams));
    ops.fetch(plan, ops.experts(), copies_v);
  } else {
    ops.fetch(plan, host_rows(own[me], epn, kParams), copies_v);
  }
  CHECK(values_of(copies_v) == copies[me]);

  const PerRank<T> grad_copies = rows_of<T>(c, B, kParams, all_b, draw);
  PerRank<T> grad_own = rows_of<T>(c, epn, kParams, all_e, draw);
  const auto grad_own_v = host_rows(grad_own[me], epn, kParams);
  moonep::reduce_reference(s.plan, kParams, grad_copies, grad_own);
  if (in_window) {
    Kokkos::deep_copy(ops.grad_copies(), host_rows(grad_copies[me], B, kParams));
    ops.reduce(plan, ops.grad_copies(), grad_own_v);
  } else {
    ops.reduce(plan, host_rows(grad_copies[me], B, kParams), grad_own_v);
  }
  CHECK(values_of(grad_own_v) == grad_own[me]);
}

}  // namespace

TEST_CASE("MPI expert copies: fetch and reduce match the reference bit for bit, both worlds") {
  const int R = moonep_test::world_size();
  for (const auto kind : moonep_test::world_kinds()) {
    auto world = moonep::make_mpi_world(MPI_COMM_WORLD, kind);
    for (const auto& [name, step] : copy_steps(R)) {
      if (R > 1 && name != "B = epn ragged") CHECK(copies_any(step));  // the copies are exercised
      copies_case<float>(*world, name, step, true, false);
      copies_case<double>(*world, name, step, false, true);
      copies_case<moonep::bf16>(*world, name, step, true, true);
      copies_case<moonep::bf16>(*world, name, step, false, false);
    }
  }
}

TEST_CASE("MPI expert copies: reduce adds in increasing rank, then slot") {
  if (moonep_test::world_size() != 4) return;
  const int me = moonep_test::world_rank();
  const Step s = copy_everywhere_step();
  for (const auto kind : moonep_test::world_kinds()) {
    auto world = moonep::make_mpi_world(MPI_COMM_WORLD, kind);
    MpiExpertCopies<float> ops(*world, s.c, 1);
    // gP = 1, copies of expert 0 on ranks 1, 2, 3: 2^24, -2^24, 0. In
    // increasing d (1 + 2^24) rounds to 2^24, then 0, then 0; decreasing d
    // would give 1. Experts 1-3 have no copies and keep their bits.
    const float gp0[] = {1.0f, 5.0f, 6.0f, 7.0f}, gc[] = {3.0f, 16777216.0f, -16777216.0f, 0.0f};
    const auto gp = host_rows(std::vector<float>{gp0[me]}, 1, 1);
    ops.reduce(MpiLayerPlan(s.plan, me), host_rows(std::vector<float>{gc[me]}, 1, 1), gp);
    const float want[] = {0.0f, 5.0f, 6.0f, 7.0f};
    CHECK(gp(0, 0) == want[me]);
  }
}

TEST_CASE("MPI expert copies: a remote expert without a copy and bad views are refused on every rank") {
  const int R = moonep_test::world_size(), me = moonep_test::world_rank();
  if (R < 2) return;  // one rank owns every expert
  // Every rank routes only to rank 0's three experts, one copy slot per
  // rank: the first such step (by seed) in which some rank must run two of
  // them (the reference's words name it).
  const Config c{R, 3 * R, 2, 6, 1, 1};
  Step s = make_step(c, Routing(R, std::vector<std::int32_t>(12, 0)));
  for (std::uint64_t seed = 1; seed < 100 && refusal_of(s).empty(); ++seed) {
    Routing routing(R);
    std::uint64_t state = seed;
    for (auto& mine : routing)
      for (int i = 0; i < 12; ++i) mine.push_back(static_cast<std::int32_t>((state = state * 6364136223846793005ull + 1) >> 62) % 3);
    s = make_step(c, routing);
  }
  const std::string ref = refusal_of(s);
  REQUIRE(ref.find(" would run expert ") != std::string::npos);
  int bad = -1;
  REQUIRE(std::sscanf(ref.c_str(), "rank %d", &bad) == 1);
  const Step ok = synthetic_step(Config{R, 3 * R, 2, 4, 3, 1}, 1.0, 6, false);
  for (const auto kind : moonep_test::world_kinds()) {
    INFO("world " << moonep::to_string(kind));
    auto world = moonep::make_mpi_world(MPI_COMM_WORLD, kind);
    MpiExpertCopies<float> ops(*world, c, 2);
    const auto own = host_rows(std::vector<float>(6, 1.5f), 3, 2);
    const auto copies = host_rows(std::vector<float>(2, 9.0f), 1, 2);
    for (const bool use_planner : {false, true}) {
      MpiPlanner planner(c, *world);
      if (use_planner) plan_mine(planner, s, me);
      const MpiLayerPlan plan = use_planner ? MpiLayerPlan(planner.last_plan()) : MpiLayerPlan(s.plan, me);
      const std::string prefix = ": rank " + std::to_string(bad) + ": ";
      CHECK(input_error([&] { ops.fetch(plan, own, copies); }) == "fetch" + prefix + ref);
      CHECK(input_error([&] { ops.reduce(plan, copies, own); }) == "reduce" + prefix + ref);
      CHECK(input_error([&] { ops.check_runnable(plan); }) == "check_runnable" + prefix + ref);
      CHECK(values_of(copies) == std::vector<float>(2, 9.0f));
      CHECK(values_of(own) == std::vector<float>(6, 1.5f));
    }
    // Views of other extents on one rank; then still usable.
    MpiExpertCopies<float> ops2(*world, ok.c, 2);
    const auto good_copies = host_rows(std::vector<float>(6, 9.0f), 3, 2);
    const auto wide = host_rows(std::vector<float>(9, 1.5f), 3, 3);
    for (int b = 0; b < R; ++b) {
      const std::string e = input_error([&] {
        ops2.fetch(MpiLayerPlan(ok.plan, me), me == b ? wide : own, good_copies);
      });
      CHECK(e == "fetch: rank " + std::to_string(b) + ": P is [3][3], expected [epn][Q] = [3][2]");
      CHECK(values_of(good_copies) == std::vector<float>(6, 9.0f));
    }
    PerRank<float> owners(R, std::vector<float>(6)), want = filled<float>(ok.c, 6, 9.0);
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < 6; ++i) owners[r][i] = float(r * 10 + i);
    moonep::fetch_reference(ok.plan, 2, owners, want);
    ops2.fetch(MpiLayerPlan(ok.plan, me), host_rows(owners[me], 3, 2), good_copies);
    CHECK(values_of(good_copies) == want[me]);
    CHECK(input_error([&] { MpiExpertCopies<float>(*world, ok.c, 0); }) ==
          "MpiExpertCopies: Q must be at least 1, got 0");
  }
}
