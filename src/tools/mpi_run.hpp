// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private to moonep-plan: what the runs of one MPI process per rank share
// (--world mpi, world_mpi.cpp; --world gpu under an MPI launch,
// world_gpu_mpi.cpp): MPI for the run, the timeout, the first stage (the
// options and the problem, read by every process and agreed on) and the
// last (rank 0 writes the plan file and the summary). Between them each
// world plans this process's rank in a stage of its own (MpiStages::run).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "memory_budget.hpp"
#include "moonep/mpi_world.hpp"
#include "moonep/backend.hpp"
#include "moonep/io.hpp"
#include "mpi_session.hpp"
#include "mpi_stages.hpp"
#include "plan_options.hpp"
#include "plan_summary.hpp"
#include "run_fingerprint.hpp"

namespace moonep::tools {

// --mpi-timeout, else $MOONEP_MPI_TIMEOUT, else the default. A bad
// variable is reported in the first stage (once, by rank 0), not by every
// process on its own: *bad gets its message and the default is used.
double mpi_timeout_of(const PlanOptions& options, std::string* bad);
// How the timeout was set, for messages: "--mpi-timeout",
// "$MOONEP_MPI_TIMEOUT", or "the default; see --mpi-timeout".
std::string mpi_timeout_words(const PlanOptions& options);

// What the first stage read and every process agreed on.
struct MpiRun {
  Problem problem;
  std::int64_t limit = 0;  // the memory limit
  MemoryNeed need;
  RunFingerprint fingerprint;
};

// What differs between the worlds in the first stage.
struct MpiWorldShape {
  std::string option;                   // for messages: "--world mpi"
  Backend backend = Backend::portable;  // what the run plans with
  std::string kind;                     // the world kind every process must agree on
  bool every_rank_holds_the_plan = false;  // each process copies every rank's plan (else rank 0 gathers it)
  std::function<void()> check_options;  // the world's own usage checks (UsageError)
};

// Stage 1: the options (`bad_timeout` from mpi_timeout_of, the world's
// checks) and the problem, on every process (each reads the file itself);
// the process count must be the problem's rank count; then every process
// must be about to plan what rank 0 plans. 0, or the status every process
// exits with.
int read_problem_stage(MpiStages& mpi, const PlanOptions& options, const std::string& bad_timeout,
                       const MpiWorldShape& shape, MpiRun* run);

// Stage 3: `collect` returns every rank's plan on rank 0 (an empty one
// elsewhere); rank 0 writes the plan file, the problem file and the
// summary, whose RunInfo `describe` completes (backend, how it ran, the
// world, the step times). Everyone learns whether it worked: 0 or the
// status.
int write_plan_stage(MpiStages& mpi, const PlanOptions& options, const MpiRun& run,
                     const std::function<HostPlan()>& collect, const std::function<void(RunInfo&)>& describe);

}  // namespace moonep::tools
