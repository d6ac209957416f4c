// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: the host-side checks of the CUDA specialization, for .cu and
// plain C++ files alike, moonep-plan's GPU world included (launch_setup.hpp
// holds the device declarations a .cpp cannot include). Defined in
// launch_setup.cu.
#pragma once

#include <cuda_runtime_api.h>

namespace moonep::cuda::impl {

// RuntimeError "CUDA error in <what>: <CUDA's text>" unless err is cudaSuccess.
void check_cuda(cudaError_t err, const char* what);

// Makes `device` current for a scope, restoring the caller's afterwards.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    check_cuda(cudaGetDevice(&saved_), "cudaGetDevice");
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceScope() { cudaSetDevice(saved_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int saved_ = 0;
};

// timeout_s (a planner option) in ns for KernelParams::timeout_ns;
// InputError unless 0 < timeout_s <= one day.
unsigned long long timeout_ns_of(double timeout_s, const char* who);

}  // namespace moonep::cuda::impl
