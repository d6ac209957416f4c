// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// --world mpi: moonep-plan as one MPI process per rank,
//   mpirun -np R moonep-plan --world mpi --input problem.json --output plan.json
// Every process reads the problem, plans routing[rank] with the portable
// Planner over an MPI world (moonep/mpi_world.hpp), and rank 0 gathers every
// rank's plan and writes the same plan file as the in-process run.
//
// Three stages (reading, planning, writing), each ending with every process
// agreeing on its outcome (MpiStages): one process's bad input makes every
// process exit with the same status and rank 0 print the one error line;
// processes started with different options or reading different problems
// stop before the first step; and no wait is unbounded (--mpi-timeout).
// Nothing is written unless every rank planned.
#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "kokkos_session.hpp"
#include "memory_budget.hpp"
#include "moonep/error.hpp"
#include "moonep/io.hpp"
#include "moonep/mpi_world.hpp"
#include "moonep/planner.hpp"
#include "mpi_run.hpp"
#include "mpi_stages.hpp"
#include "plan_summary.hpp"
#include "plan_worlds.hpp"
#include "problem_source.hpp"
#include "run_fingerprint.hpp"

namespace moonep::tools {
namespace {

// The world kind's name: --mpi-world, else the MOONEP_MPI_WORLD environment
// variable (the CLI tests use it), else auto.
std::string world_kind_name(const PlanOptions& o) {
  if (!o.mpi_world.empty()) return o.mpi_world;
  const char* env = std::getenv("MOONEP_MPI_WORLD");
  return env && *env ? env : "auto";
}

// The flat arrays of a rank's plan, in the order they travel (the order
// of MOONEP_PLAN_FIELDS).
constexpr int kFields = static_cast<int>(impl::kPlanFieldCount);
std::array<std::vector<std::int32_t>*, kFields> fields(HostRankPlan& p) {
  std::array<std::vector<std::int32_t>*, kFields> out{};
  for (int i = 0; i < kFields; ++i) out[i] = &(p.*impl::kHostPlanMembers[i]);
  return out;
}

// Every rank's plan, on rank 0 (in rank order); the others get an empty
// HostPlan. One gather of the array sizes, one gatherv of the concatenated
// arrays, both bounded.
HostPlan gather_plans(MpiStages& mpi, const Config& config, HostRankPlan mine) {
  const int rank = mpi.rank(), size = mpi.size();
  std::vector<int> sizes(kFields);
  std::vector<std::int32_t> flat;
  {
    auto f = fields(mine);
    std::size_t total = 0;
    for (auto* v : f) total += v->size();
    flat.reserve(total);
    for (int i = 0; i < kFields; ++i) {
      sizes[i] = static_cast<int>(f[i]->size());
      flat.insert(flat.end(), f[i]->begin(), f[i]->end());
    }
  }
  // MPI_Gatherv counts and displacements are int: refuse (on every rank,
  // so nobody is left waiting) a plan too large to gather in one call.
  const long long all_total = mpi.sum(static_cast<long long>(flat.size()), "gathering the plans");
  if (all_total > INT_MAX) {
    throw RuntimeError("the plans of all ranks hold " + std::to_string(all_total) +
                       " values, too many to gather on rank 0 (at most " + std::to_string(INT_MAX) + ")");
  }
  const std::vector<int> all_sizes = mpi.gather(sizes, "gathering the plans");
  std::vector<int> counts(rank == 0 ? size : 0), displs(rank == 0 ? size : 0);
  std::vector<std::int32_t> all(rank == 0 ? static_cast<std::size_t>(all_total) : 0);
  if (rank == 0) {
    int at = 0;
    for (int r = 0; r < size; ++r) {
      int n = 0;
      for (int i = 0; i < kFields; ++i) n += all_sizes[static_cast<std::size_t>(r) * kFields + i];
      counts[r] = n;
      displs[r] = at;
      at += n;
    }
  }
  all = mpi.gatherv(std::move(flat), std::move(all), std::move(counts), std::move(displs), "gathering the plans");
  HostPlan plan;
  plan.config = config;
  if (rank != 0) return plan;
  plan.ranks.resize(static_cast<std::size_t>(size));
  std::size_t at = 0;
  for (int r = 0; r < size; ++r) {
    auto f = fields(plan.ranks[r]);
    for (int i = 0; i < kFields; ++i) {
      const std::size_t n = static_cast<std::size_t>(all_sizes[static_cast<std::size_t>(r) * kFields + i]);
      f[i]->assign(all.begin() + static_cast<std::ptrdiff_t>(at), all.begin() + static_cast<std::ptrdiff_t>(at + n));
      at += n;
    }
  }
  return plan;
}

}  // namespace

int run_mpi_world(const PlanOptions& o, const char* program) {
  std::string bad_timeout;
  const double timeout = mpi_timeout_of(o, &bad_timeout);
  MpiSession session(timeout, mpi_timeout_words(o));
  MpiStages mpi(timeout, mpi_timeout_words(o));
  const int rank = mpi.rank();

  // Stage 1: the options, the MPI world's kind and the problem.
  MpiWorldKind kind = MpiWorldKind::automatic;
  MpiWorldShape shape;
  shape.option = "--world mpi";
  shape.backend = Backend::portable;
  shape.kind = world_kind_name(o);
  shape.check_options = [&] {
    if (o.backend && *o.backend != Backend::portable) {
      throw UsageError(std::string("--world mpi plans with the portable backend, not ") + to_string(*o.backend));
    }
    kind = mpi_world_kind_from_string(shape.kind);
  };
  MpiRun run;
  if (int s = read_problem_stage(mpi, o, bad_timeout, shape, &run)) return s;
  const Problem& problem = run.problem;

  // Stage 2: plan this process's rank, o.steps times. The time of a step is
  // the slowest rank's (all start together after a barrier).
  HostRankPlan mine;
  std::vector<double> seconds;
  std::string world_name;
  if (int s = mpi.run("planning", [&] {
        KokkosSession kokkos(program, o.kokkos_args);
        using Exec = Kokkos::DefaultHostExecutionSpace;
        using HostView = Kokkos::View<std::int32_t*, Kokkos::HostSpace>;
        auto world = make_mpi_world(MPI_COMM_WORLD, kind, timeout);
        world_name = to_string(world->kind());
        Planner<Exec> planner(problem.config, *world);
        const auto& row = problem.routing[static_cast<std::size_t>(rank)];
        HostView topk("moonep-plan.routing", row.size());
        std::copy(row.begin(), row.end(), topk.data());
        std::vector<Planner<Exec>::input_view> routing{topk}, tpe;
        HostView counts("moonep-plan.tokens_per_rank", problem.tokens_per_rank ? problem.tokens_per_rank->size() : 0);
        if (problem.tokens_per_rank) std::copy(problem.tokens_per_rank->begin(), problem.tokens_per_rank->end(), counts.data());
        const Planner<Exec>::input_view counts_in = counts;
        if (problem.tokens_per_expert) {
          const auto& t = (*problem.tokens_per_expert)[static_cast<std::size_t>(rank)];
          HostView v("moonep-plan.tokens_per_expert", t.size());
          std::copy(t.begin(), t.end(), v.data());
          tpe.push_back(v);
        }
        for (int i = 0; i < o.steps; ++i) {
          mpi.barrier("planning");
          const auto t0 = std::chrono::steady_clock::now();
          planner.plan(routing, problem.tokens_per_expert ? &tpe : nullptr, problem.tokens_per_rank ? &counts_in : nullptr);
          const double mine_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          seconds.push_back(mpi.max(mine_s, "planning"));
        }
        mine = planner.last_plan().to_host(0);
      })) {
    return s;
  }
  release_freed_memory();  // the planner's

  // Stage 3: rank 0 gathers and writes; everyone learns whether it worked.
  return write_plan_stage(
      mpi, o, run, [&] { return gather_plans(mpi, problem.config, std::move(mine)); },
      [&](RunInfo& info) {
        info.backend = to_string(Backend::portable);
        info.ran = "MPI world " + world_name;
        info.mpi_world = world_name;
        info.step_seconds = seconds;
      });
}

}  // namespace moonep::tools
