// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: the CUDA driver calls a GpuWorld makes (virtual memory
// management), found through the runtime: MoonEP does not link against
// libcuda (the runtime has loaded the driver already, and a build machine
// without one can still link).
#pragma once

#include <cuda.h>  // driver API types only: the functions come through cudaGetDriverEntryPoint*

namespace moonep::cuda::impl {

// A driver function as of driver API version `version`; null if this
// driver has none.
void* driver_function(const char* name, int version);

// The driver's virtual memory management calls; RuntimeError from the
// constructor if the driver lacks one.
struct Vmm {
  decltype(&::cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&::cuMemCreate) create = nullptr;
  decltype(&::cuMemRelease) release = nullptr;
  decltype(&::cuMemAddressReserve) reserve = nullptr;
  decltype(&::cuMemAddressFree) address_free = nullptr;
  decltype(&::cuMemMap) map = nullptr;
  decltype(&::cuMemUnmap) unmap = nullptr;
  decltype(&::cuMemSetAccess) set_access = nullptr;
  decltype(&::cuGetErrorString) error_string = nullptr;
  decltype(&::cuMemExportToShareableHandle) export_handle = nullptr;
  decltype(&::cuMemImportFromShareableHandle) import_handle = nullptr;

  Vmm();
  // RuntimeError "CUDA driver error in <what>: <the driver's text>" unless r
  // is CUDA_SUCCESS.
  void ok(CUresult r, const char* what) const;
};

}  // namespace moonep::cuda::impl
