// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private to moonep-plan: the problem to plan, from a file or synthetic.
#pragma once

#include <cstdint>
#include <string>

#include "memory_budget.hpp"
#include "moonep/io.hpp"
#include "plan_options.hpp"
#include "plan_summary.hpp"

namespace moonep::tools {

// Reads --input, or validates the synthetic configuration and generates its
// routing, keeping the whole run within `memory_limit`: `run` says what
// else the run does (backend, world, outputs); its configuration and input
// sizes are filled in here. InputError (exit 2, nothing allocated for it
// yet) for a file too long or too costly to parse, and for a problem whose
// run (estimate_memory) would exceed the limit; nothing is written. The
// run's estimate goes to *need when given (for the summary).
Problem load_problem(const PlanOptions& options, RunShape run, std::int64_t memory_limit,
                     MemoryNeed* need = nullptr);

// The summary's memory line: "about 412.3 MiB at the peak (estimated; limit 4.0 GiB)".
std::string describe_memory(const MemoryNeed& need, std::int64_t memory_limit);

// --memory-limit, else default_memory_limit(processes on this node).
std::int64_t memory_limit_of(const PlanOptions& options, int processes_on_node = 1);

// "problem file plan.json" or "synthetic step (lognormal expert popularity,
// imbalance 1.00, seed 1)".
std::string describe_source(const PlanOptions& options);

// The RunInfo fields that come from the options and the memory estimate.
RunInfo describe_run(const PlanOptions& options, const MemoryNeed& need, std::int64_t memory_limit);

// Whether the run prints a summary (synthetic mode, --summary, --json).
bool wants_summary(const PlanOptions& options);

// Prints the summary, as a table or (--json) one JSON object, on standard
// output, or on standard error when the plan is written to standard output.
void print_report(const PlanOptions& options, const PlanSummary& summary, const RunInfo& run);

}  // namespace moonep::tools
