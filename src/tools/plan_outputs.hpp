// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private to moonep-plan: its output files (--output, --save-problem) as
// one io::OutputFiles (src/io/output_set.hpp): checked before the problem
// is read or planned, written together or not at all.
#pragma once

#include "moonep/host_plan.hpp"
#include "moonep/io.hpp"
#include "output_set.hpp"
#include "plan_options.hpp"

namespace moonep::tools {

io::OutputFiles plan_outputs(const PlanOptions& options);

// Writes the plan (and with --save-problem the problem) file.
void write_plan_outputs(const PlanOptions& options, const HostPlan& plan, const Problem& problem);

}  // namespace moonep::tools
