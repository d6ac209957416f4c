// Main of the CUDA test binaries: the shared test main (Kokkos + Catch2
// session) behind a GPU check, so that a machine without a visible GPU
// skips (exit 77, CTest SKIP_RETURN_CODE) instead of failing. No test may
// ever create an NVLink multicast object: the machines they run on are
// shared, and one created there can take the host's GPUs down for days.
// So every CUDA test binary forbids it in its own environment before any
// test runs (moonep::cuda::GpuWorld refuses WorldOptions::multicast then),
// whatever the caller's environment says.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#define main moonep_shared_test_main
#include "test_main.cpp"
#undef main

int main(int argc, char* argv[]) {
  if (setenv("MOONEP_FORBID_MULTICAST", "1", 1) != 0) {
    std::fprintf(stderr, "cannot set MOONEP_FORBID_MULTICAST=1: not running the tests\n");
    return 1;
  }
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n == 0) {
    std::fprintf(stderr, "no CUDA device visible (%s): skipping\n",
                 err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 77;
  }
  return moonep_shared_test_main(argc, argv);
}
