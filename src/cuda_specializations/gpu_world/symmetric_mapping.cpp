// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A GpuWorld's symmetric buffer (symmetric_mapping.hpp).
#include "symmetric_mapping.hpp"

#include <unistd.h>

#include <algorithm>
#include <set>

namespace moonep::cuda::impl {

namespace {
CUmemAllocationProp pinned_on(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}
}  // namespace

SymmetricMapping::SymmetricMapping(const Vmm& vmm, const std::vector<int>& devices, const std::vector<int>& local,
                                   std::size_t bytes, WorldPeers* peers)
    : vmm_(vmm), ranks_(devices.size()) {
  try {
    map(devices, local, bytes, peers);
  } catch (...) {
    release();  // a constructor that throws runs no destructor
    throw;
  }
}

void SymmetricMapping::map(const std::vector<int>& devices, const std::vector<int>& local, std::size_t bytes,
                           WorldPeers* peers) {
  const int R = static_cast<int>(ranks_);
  std::set<int> here;  // this process's devices
  for (int r : local) here.insert(devices[r]);

  // One chunk per rank, rounded to the allocation granularity of this
  // process's devices, the largest of every process's.
  std::size_t gran = 1;
  for (int d : here) {
    const CUmemAllocationProp prop = pinned_on(d);
    std::size_t g = 0;
    vmm_.ok(vmm_.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), "cuMemGetAllocationGranularity");
    gran = std::max(gran, g);
  }
  chunk_bytes_ = (bytes + gran - 1) / gran * gran;
  if (peers) {
    const unsigned long long mine = chunk_bytes_;
    std::vector<unsigned long long> all(ranks_);
    peers->allgather(&mine, sizeof mine, all.data());
    chunk_bytes_ = *std::max_element(all.begin(), all.end());
  }
  vmm_.ok(vmm_.reserve(&va_, chunk_bytes_ * ranks_, gran, 0, 0), "cuMemAddressReserve (the symmetric buffer)");
  handles_.assign(ranks_, CUmemGenericAllocationHandle{});
  for (int r : local) {
    CUmemAllocationProp prop = pinned_on(devices[r]);
    if (peers) prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    vmm_.ok(vmm_.create(&handles_[r], chunk_bytes_, &prop, 0), "cuMemCreate (a rank's chunk)");
  }
  if (peers) {
    // The other processes' chunks: their allocations, exported as file
    // descriptors, handed over and imported.
    const int me = peers->rank();
    int fd = -1;
    vmm_.ok(vmm_.export_handle(&fd, handles_[me], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            "cuMemExportToShareableHandle (this rank's chunk)");
    std::vector<int> fds = peers->exchange_descriptors(fd);
    ::close(fd);
    for (int r = 0; r < R; ++r) {
      if (r == me) continue;
      const CUresult got = vmm_.import_handle(&handles_[r], reinterpret_cast<void*>(static_cast<std::intptr_t>(fds[r])),
                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
      ::close(fds[r]);
      vmm_.ok(got, "cuMemImportFromShareableHandle (another rank's chunk)");
    }
  }
  for (int r = 0; r < R; ++r) {
    vmm_.ok(vmm_.map(va_ + r * chunk_bytes_, chunk_bytes_, 0, handles_[r], 0), "cuMemMap (a rank's chunk)");
    mapped_ = r + 1;
  }
  for (int d : here) {
    CUmemAccessDesc a{};
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = d;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    access_.push_back(a);
  }
  vmm_.ok(vmm_.set_access(va_, chunk_bytes_ * ranks_, access_.data(), access_.size()), "cuMemSetAccess");
}

SymmetricMapping::~SymmetricMapping() { release(); }

void SymmetricMapping::release() {
  for (std::size_t r = 0; r < mapped_; ++r) vmm_.unmap(va_ + r * chunk_bytes_, chunk_bytes_);
  for (auto h : handles_) {
    if (h) vmm_.release(h);
  }
  if (va_) vmm_.address_free(va_, chunk_bytes_ * ranks_);
  mapped_ = 0;
  handles_.clear();
  va_ = 0;
}

}  // namespace moonep::cuda::impl
