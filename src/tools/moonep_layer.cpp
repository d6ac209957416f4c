// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-layer: one MoE layer step on .npy files (docs/layer_cli.md,
// docs/spec/layer.md). Every failure ends here as one line
// "moonep-layer: error: ..." on standard error and exit status 2 (bad usage
// or input) or 1 (runtime failure), as moonep-plan's.
#include <iostream>

#include "error_line.hpp"
#include "layer_options.hpp"
#include "layer_run.hpp"
#include "moonep/error.hpp"
#include "mpi_launch.hpp"
#include "watchdog.hpp"

int main(int argc, char* argv[]) {
  using namespace moonep;
  return tools::run_command(
      "moonep-layer",
      [&] {
        const tools::LayerOptions options = tools::parse_layer_options(argc, argv);
        if (options.help) {
          std::cout << tools::layer_usage();
          return 0;
        }
        if (options.version) {
          std::cout << tools::layer_version();
          return 0;
        }
        if (options.world == tools::LayerWorld::mpi) return tools::run_layer_mpi(options);
        // --world gpu under mpirun: one process per rank (layer_gpu_world_mpi.cpp).
        if (options.world == tools::LayerWorld::gpu && tools::detect_mpi_launch().size > 1)
          return tools::run_layer_gpu_mpi(options);
        tools::run_layer(options);
        return 0;
      },
      [] { return tools::launch_rank() > 0; });
}
