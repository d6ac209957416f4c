// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-plan's output files (plan_outputs.hpp).
#include "plan_outputs.hpp"

#include "file_texts.hpp"

namespace moonep::tools {

io::OutputFiles plan_outputs(const PlanOptions& o) {
  io::OutputFiles files;
  files.add(o.output, "plan file", "--output");
  files.add(o.save_problem, "problem file", "--save-problem");
  return files;
}

void write_plan_outputs(const PlanOptions& o, const HostPlan& plan, const Problem& problem) {
  if (o.output.empty() && o.save_problem.empty()) return;
  plan_outputs(o).write({o.output.empty() ? io::Produce() : io::plan_text(plan),
                         o.save_problem.empty() ? io::Produce() : io::problem_text(problem)});
}

}  // namespace moonep::tools
