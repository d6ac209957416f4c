// moonep-plan: plans a problem file or a synthetic step (docs/spec/formats.md).
// Every failure ends here as one line "moonep-plan: error: ..." on standard
// error and exit status 2 (bad usage or input) or 1 (runtime failure).
#include <cstdio>
#include <exception>
#include <iostream>
#include <new>
#include <string>

#include "error_line.hpp"
#include "mpi_launch.hpp"
#include "moonep/error.hpp"
#include "plan_options.hpp"
#include "plan_worlds.hpp"

namespace {

int fail(int status, const std::string& message) {
  moonep::tools::print_error_line(message);
  return status;
}

}  // namespace

int main(int argc, char* argv[]) {
  using namespace moonep;
  try {
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
  } catch (const tools::UsageError& e) {
    return fail(2, e.what());
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
