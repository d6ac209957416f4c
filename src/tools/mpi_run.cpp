// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The stages every run of one MPI process per rank shares (mpi_run.hpp).
#include "mpi_run.hpp"

#include <mpi.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "moonep/error.hpp"
#include "moonep/mpi_world.hpp"
#include "plan_outputs.hpp"
#include "problem_source.hpp"

namespace moonep::tools {

std::string mpi_timeout_words(const PlanOptions& o) {
  if (o.mpi_timeout > 0) return "--mpi-timeout";
  const char* env = std::getenv("MOONEP_MPI_TIMEOUT");
  if (env && *env) return "$MOONEP_MPI_TIMEOUT";
  return "the default; see --mpi-timeout";
}

double mpi_timeout_of(const PlanOptions& o, std::string* bad) {
  if (o.mpi_timeout > 0) return o.mpi_timeout;
  try {
    return default_mpi_timeout();
  } catch (const RuntimeError& e) {
    *bad = e.what();
    return kDefaultMpiTimeout;
  }
}

int read_problem_stage(MpiStages& mpi, const PlanOptions& o, const std::string& bad_timeout,
                       const MpiWorldShape& shape, MpiRun* run) {
  const int rank = mpi.rank(), size = mpi.size();
  run->limit = memory_limit_of(o, mpi.processes_on_node());
  return mpi.run(
      "reading the problem",
      [&] {
        if (!bad_timeout.empty()) throw UsageError(bad_timeout);
        if (o.input == "-") {
          throw UsageError(shape.option + " reads the problem in every process; give a file, not '-' (standard input)");
        }
        if (shape.check_options) shape.check_options();
        // Rank 0 writes: its output paths before the work they would take.
        if (rank == 0) plan_outputs(o).check();
        RunShape r;
        r.backend = shape.backend;
        r.mpi = true;
        r.gathers_plans = rank == 0 || shape.every_rank_holds_the_plan;
        r.writes_plan = !o.output.empty();
        r.writes_problem = !o.save_problem.empty();
        run->problem = load_problem(o, r, run->limit, &run->need);
        if (run->problem.config.ranks != size) {
          throw InputError("the problem has ranks = " + std::to_string(run->problem.config.ranks) + " but " +
                           std::to_string(size) + " MPI process" + (size == 1 ? " was" : "es were") +
                           " started; run mpirun -np " + std::to_string(run->problem.config.ranks));
        }
        run->fingerprint = fingerprint_of(o, shape.kind, run->problem);
      },
      &run->fingerprint);
}

int write_plan_stage(MpiStages& mpi, const PlanOptions& o, const MpiRun& run,
                     const std::function<HostPlan()>& collect, const std::function<void(RunInfo&)>& describe) {
  return mpi.run("writing the plan", [&] {
    HostPlan plan = collect();
    if (mpi.rank() != 0) return;
    plan.tokens_per_rank = run.problem.tokens_per_rank;
    write_plan_outputs(o, plan, run.problem);
    if (wants_summary(o)) {
      RunInfo info = describe_run(o, run.need, run.limit);
      info.memory += " on rank 0";
      info.world = "mpi";
      info.processes = mpi.size();
      describe(info);
      print_report(o, summarize(plan, run.problem.routing), info);
    }
  });
}

}  // namespace moonep::tools
