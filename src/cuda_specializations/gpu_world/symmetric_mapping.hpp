// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: a GpuWorld's symmetric buffer: R chunks, each rank's its own
// allocation on its own device, mapped back to back into one virtual
// address range of this process (cuMemCreate, cuMemMap) and made readable
// and writable by every device of this process (cuMemSetAccess). With one
// process per rank, each process creates its own rank's chunk and imports
// the others' (file descriptors through WorldPeers).
//
// What must stay true:
//  * Every process maps the same chunk size (the largest any process needs
//    after rounding to its devices' allocation granularity), so a rank
//    addresses (rank, offset) alike in every process.
//  * The destructor undoes exactly what a constructor that threw half-way
//    had done: every handle held, every chunk mapped, the range.
//  * Nothing else owns the chunks: a multicast object bound to them
//    (multicast.hpp) must be gone before this mapping is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "driver_api.hpp"
#include "peers.hpp"

namespace moonep::cuda::impl {

class SymmetricMapping {
 public:
  // `devices` by rank (-1 for another process's rank), `local` the ranks
  // this process creates, `bytes` what one chunk must hold; `peers` null
  // when this process holds every rank. RuntimeError if the driver
  // refuses a step (what was made by then is undone).
  SymmetricMapping(const Vmm& vmm, const std::vector<int>& devices, const std::vector<int>& local, std::size_t bytes,
                   WorldPeers* peers);
  ~SymmetricMapping();
  SymmetricMapping(const SymmetricMapping&) = delete;
  SymmetricMapping& operator=(const SymmetricMapping&) = delete;

  std::size_t chunk_bytes() const { return chunk_bytes_; }
  std::int32_t* chunk(int rank) const {
    return reinterpret_cast<std::int32_t*>(va_ + static_cast<std::size_t>(rank) * chunk_bytes_);
  }
  // The allocation behind a rank's chunk (for binding it to a multicast object).
  CUmemGenericAllocationHandle handle(int rank) const { return handles_.at(rank); }
  // Read-write access for each of this process's devices.
  const std::vector<CUmemAccessDesc>& access() const { return access_; }

 private:
  void map(const std::vector<int>& devices, const std::vector<int>& local, std::size_t bytes, WorldPeers* peers);
  void release();

  const Vmm& vmm_;
  std::size_t ranks_ = 0;
  std::size_t chunk_bytes_ = 0;
  CUdeviceptr va_ = 0;
  std::vector<CUmemGenericAllocationHandle> handles_;
  std::size_t mapped_ = 0;  // chunks mapped so far
  std::vector<CUmemAccessDesc> access_;
};

}  // namespace moonep::cuda::impl
