// Main of the CUDA test binaries: the shared test main (Kokkos + Catch2
// session) behind a GPU check, so that a machine without a visible GPU
// skips (exit 77, CTest SKIP_RETURN_CODE) instead of failing.
#include <cuda_runtime_api.h>

#include <cstdio>

#define main moonep_shared_test_main
#include "test_main.cpp"
#undef main

int main(int argc, char* argv[]) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n == 0) {
    std::fprintf(stderr, "no CUDA device visible (%s): skipping\n",
                 err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 77;
  }
  return moonep_shared_test_main(argc, argv);
}
