// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The driver calls of a GpuWorld (driver_api.hpp).
#include "driver_api.hpp"

#include <cuda_runtime_api.h>

#include <string>

#include "../host_checks.hpp"
#include "moonep/error.hpp"

namespace moonep::cuda::impl {

void* driver_function(const char* name, int version) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
  check_cuda(cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &found), name);
#else
  (void)version;
  check_cuda(cudaGetDriverEntryPoint(name, &p, cudaEnableDefault, &found), name);
#endif
  return found == cudaDriverEntryPointSuccess ? p : nullptr;
}

namespace {
template <class F>
void find(F& fn, const char* name) {
  void* p = driver_function(name, 12000);
  if (!p) throw RuntimeError(std::string("moonep::cuda::GpuWorld: the CUDA driver has no ") + name);
  fn = reinterpret_cast<F>(p);
}
}  // namespace

Vmm::Vmm() {
  find(granularity, "cuMemGetAllocationGranularity");
  find(create, "cuMemCreate");
  find(release, "cuMemRelease");
  find(reserve, "cuMemAddressReserve");
  find(address_free, "cuMemAddressFree");
  find(map, "cuMemMap");
  find(unmap, "cuMemUnmap");
  find(set_access, "cuMemSetAccess");
  find(error_string, "cuGetErrorString");
  find(export_handle, "cuMemExportToShareableHandle");
  find(import_handle, "cuMemImportFromShareableHandle");
}

void Vmm::ok(CUresult r, const char* what) const {
  if (r == CUDA_SUCCESS) return;
  const char* text = nullptr;
  if (error_string(r, &text) != CUDA_SUCCESS || !text) text = "unknown error";
  throw RuntimeError(std::string("CUDA driver error in ") + what + ": " + text);
}

}  // namespace moonep::cuda::impl
