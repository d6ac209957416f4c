// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Main of the CUDA test binaries: the shared test main (Kokkos + Catch2
// session) behind a GPU check, so that a machine without a visible GPU
// skips (exit 77, CTest SKIP_RETURN_CODE) instead of failing. No test may
// ever create an NVLink multicast object: the machines they run on are
// shared, and one created there can take the host's GPUs down for days.
// A MoonEP built without MoonEP_ENABLE_MULTICAST (the default) has no code
// that could; one built with it refuses to run the tests where the
// machine's switch MOONEP_FORBID_MULTICAST is set (the device scripts set
// it). The switch is the tests' and scripts', never read by the library.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "moonep/moonep_config.hpp"

#define main moonep_shared_test_main
#include "test_main.cpp"
#undef main

int main(int argc, char* argv[]) {
#if MOONEP_HAVE_MULTICAST
  const char* forbid = std::getenv("MOONEP_FORBID_MULTICAST");
  if (forbid && *forbid && std::string(forbid) != "0") {
    std::fprintf(stderr,
                 "MOONEP_FORBID_MULTICAST is set but this MoonEP was built with MoonEP_ENABLE_MULTICAST=ON: "
                 "not running the tests (build without it on this machine)\n");
    return 1;
  }
#endif
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n == 0) {
    std::fprintf(stderr, "no CUDA device visible (%s): skipping\n",
                 err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 77;
  }
  return moonep_shared_test_main(argc, argv);
}
