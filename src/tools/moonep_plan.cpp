// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-plan: plans a problem file or a synthetic step (docs/spec/formats.md).
// Every failure ends here as one line "moonep-plan: error: ..." on standard
// error and exit status 2 (bad usage or input) or 1 (runtime failure).
#include <iostream>

#include "error_line.hpp"
#include "mpi_launch.hpp"
#include "moonep/error.hpp"
#include "plan_options.hpp"
#include "plan_worlds.hpp"

int main(int argc, char* argv[]) {
  using namespace moonep;
  return tools::run_command("moonep-plan", [&] {
    const tools::PlanOptions options = tools::parse_plan_options(argc, argv);
    if (options.help) {
      std::cout << tools::plan_usage();
      return 0;
    }
    if (options.version) {
      std::cout << tools::plan_version();
      return 0;
    }
    // --world gpu under an MPI launch is one process per rank (world_gpu.cpp).
    tools::refuse_plain_run_under_mpi(options.world == tools::World::mpi || options.world == tools::World::gpu);
    const char* program = argc > 0 ? argv[0] : "moonep-plan";
    if (options.world == tools::World::mpi) return tools::run_mpi_world(options, program);
    if (options.world == tools::World::gpu) return tools::run_gpu_world(options, program);
    return tools::run_inprocess_world(options, program);
  });
}
