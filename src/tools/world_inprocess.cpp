// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// --world inprocess: every rank of the problem planned in this process
// through one HostPlanner (virtual ranks).
#include <chrono>
#include <cstdio>
#include <iostream>

#include "kokkos_session.hpp"
#include "moonep/backend.hpp"
#include "moonep/error.hpp"
#include "moonep/io.hpp"
#include "plan_outputs.hpp"
#include "plan_summary.hpp"
#include "plan_worlds.hpp"
#include "problem_source.hpp"
#include "progress.hpp"

namespace moonep::tools {

int run_inprocess_world(const PlanOptions& o, const char* program) {
  const Backend backend = o.backend ? *o.backend : default_backend();
  return run_in_this_process(o, program, backend, [backend](const Config& c) { return make_host_planner(backend, c); });
}

int run_in_this_process(const PlanOptions& o, const char* program, Backend backend,
                        const std::function<std::unique_ptr<HostPlanner>(const Config&)>& make) {
  // Everything that can be wrong with the input is found before Kokkos
  // starts, so that an error is the only line on standard error.
  RunShape run;
  run.backend = backend;
  run.writes_plan = !o.output.empty();
  run.writes_problem = !o.save_problem.empty();
  // Every output path before the work whose result it would take.
  plan_outputs(o).check();
  const std::int64_t limit = memory_limit_of(o);
  MemoryNeed need;
  // The progress line goes before any error line (its destructor erases it).
  Progress progress(stderr_is_terminal());
  progress.phase(o.synthetic() ? "generating the routing" : "reading the problem");
  const Problem problem = load_problem(o, run, limit, &need);
  std::string why;
  if (!backend_available(backend, &why))
    throw RuntimeError(std::string("backend ") + to_string(backend) + " is not available: " + why);

  RunInfo info = describe_run(o, need, limit);
  info.backend = to_string(backend);
  HostPlan plan;
  {
    KokkosSession kokkos(program, o.kokkos_args);
    auto planner = make(problem.config);
    planner->load(problem.routing, problem.tokens_per_expert ? &*problem.tokens_per_expert : nullptr,
                  problem.tokens_per_rank ? &*problem.tokens_per_rank : nullptr);
    progress.phase("planning", o.steps);
    for (int i = 0; i < o.steps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      planner->step();
      const auto t1 = std::chrono::steady_clock::now();
      info.step_seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
      progress.advance();
    }
    progress.phase("copying the plan out");
    plan = planner->result();
    info.ran = planner->details();
  }

  release_freed_memory();  // the planner's
  progress.phase("writing the files");
  write_plan_outputs(o, plan, problem);
  if (wants_summary(o)) {
    progress.phase("summing up");
    const PlanSummary summary = summarize(plan, problem.routing);
    progress.stop();
    print_report(o, summary, info);
  }
  return 0;
}

}  // namespace moonep::tools
