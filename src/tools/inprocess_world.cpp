// --world inprocess: every rank of the problem planned in this process
// through one HostPlanner (virtual ranks).
#include <chrono>
#include <cstdio>
#include <iostream>

#include "kokkos_session.hpp"
#include "moonep/backend.hpp"
#include "moonep/error.hpp"
#include "moonep/io.hpp"
#include "plan_summary.hpp"
#include "plan_worlds.hpp"
#include "problem_source.hpp"

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
  const std::int64_t limit = memory_limit_of(o);
  MemoryNeed need;
  const Problem problem = load_problem(o, run, limit, &need);
  std::string why;
  if (!backend_available(backend, &why))
    throw RuntimeError(std::string("backend ") + to_string(backend) + " is not available: " + why);

  HostPlan plan;
  std::vector<double> seconds;
  std::string details;  // how the backend ran the steps, for the timing line
  {
    KokkosSession kokkos(program, o.kokkos_args);
    auto planner = make(problem.config);
    planner->load(problem.routing, problem.tokens_per_expert ? &*problem.tokens_per_expert : nullptr,
                  problem.tokens_per_rank ? &*problem.tokens_per_rank : nullptr);
    for (int i = 0; i < o.steps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      planner->step();
      const auto t1 = std::chrono::steady_clock::now();
      seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
    }
    plan = planner->result();
    details = planner->details();
  }

  release_freed_memory();  // the planner's
  if (!o.output.empty()) write_plan_file(plan, o.output);
  if (!o.save_problem.empty()) write_problem_file(problem, o.save_problem);
  if (o.synthetic() || o.summary) {
    const std::string how = details.empty() ? "" : ": " + details;
    char timing[320];
    std::snprintf(timing, sizeof timing, "%.1f us (median of %d step%s, backend %s%s)",
                  median_us(seconds), o.steps, o.steps == 1 ? "" : "s", to_string(backend), how.c_str());
    // The plan owns standard output when it is written there.
    std::ostream& out = writes_to_standard_output(o.output) ? std::cerr : std::cout;
    print_summary(out, summarize(plan, problem.routing), describe_source(o), timing);
    out << "memory: " << describe_memory(need, limit) << "\n";
  }
  return 0;
}

}  // namespace moonep::tools
