// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Test helper: check_plan_file PROBLEM PLAN — exit 0 when the plan file is
// exactly plan_reference's plan of the problem file (dup rows as sets), else
// print the first difference and exit 1.
#include <cstdio>
#include <exception>

#include "moonep/io.hpp"
#include "moonep/reference.hpp"

int main(int argc, char* argv[]) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: check_plan_file PROBLEM.json PLAN.json\n");
    return 2;
  }
  try {
    const moonep::Problem problem = moonep::read_problem_file(argv[1]);
    const moonep::HostPlan plan = moonep::read_plan_file(argv[2]);
    const moonep::HostPlan expected = moonep::plan_reference(
        problem.config, problem.routing, problem.tokens_per_expert ? &*problem.tokens_per_expert : nullptr,
        problem.tokens_per_rank ? &*problem.tokens_per_rank : nullptr);
    if (moonep::describe(plan.config) != moonep::describe(problem.config)) {
      std::fprintf(stderr, "plan is for %s, problem is %s\n", moonep::describe(plan.config).c_str(),
                   moonep::describe(problem.config).c_str());
      return 1;
    }
    const std::string diff = moonep::plan_difference(expected, plan);
    if (!diff.empty()) {
      std::fprintf(stderr, "plan differs from plan_reference: %s\n", diff.c_str());
      return 1;
    }
    std::printf("plan matches plan_reference (%s)\n", moonep::describe(plan.config).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "check_plan_file: %s\n", e.what());
    return 1;
  }
}
