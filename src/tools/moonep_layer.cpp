// moonep-layer: one MoE layer step on .npy files (docs/cli.md "moonep-layer",
// docs/spec/layer.md). Every failure ends here as one line
// "moonep-layer: error: ..." on standard error and exit status 2 (bad usage
// or input) or 1 (runtime failure), as moonep-plan's.
#include <cstdio>
#include <exception>
#include <iostream>
#include <new>
#include <string>

#include "layer_options.hpp"
#include "layer_run.hpp"
#include "moonep/error.hpp"

namespace {

int fail(int status, const std::string& message) {
  // 21 characters of prefix + 279 of message: no line over 300.
  const std::string line = moonep::one_line_message(message, 279);
  std::fflush(stdout);
  std::fprintf(stderr, "moonep-layer: error: %s\n", line.c_str());
  std::fflush(stderr);
  return status;
}

}  // namespace

int main(int argc, char* argv[]) {
  using namespace moonep;
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
