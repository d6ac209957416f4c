// moonep-layer: one MoE layer step on .npy files (docs/cli.md "moonep-layer",
// docs/spec/layer.md). Every failure ends here as one line
// "moonep-layer: error: ..." on standard error and exit status 2 (bad usage
// or input) or 1 (runtime failure), as moonep-plan's.
#include <exception>
#include <iostream>
#include <new>
#include <string>

#include "error_line.hpp"
#include "layer_options.hpp"
#include "layer_run.hpp"
#include "moonep/error.hpp"
#include "watchdog.hpp"

namespace {

int fail(int status, const std::string& message) {
  // Under an MPI launch every process fails alike before the MPI stages
  // (bad usage): rank 0 alone prints, so that the job has one line.
  if (moonep::tools::launch_rank() <= 0) moonep::tools::print_error_line(message);
  return status;
}

}  // namespace

int main(int argc, char* argv[]) {
  using namespace moonep;
  tools::set_error_line_program("moonep-layer");
  try {
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
    tools::run_layer(options);
    return 0;
  } catch (const InputError& e) {
    return fail(2, e.what());
  } catch (const RuntimeError& e) {
    return fail(1, e.what());
  } catch (const std::bad_alloc&) {
    return fail(1, "out of memory (try a smaller problem)");
  } catch (const std::exception& e) {
    return fail(1, e.what());
  } catch (...) {
    return fail(1, "unknown failure");
  }
}
