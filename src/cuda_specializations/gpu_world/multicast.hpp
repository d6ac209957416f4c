// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: the NVLink multicast opt-in of a GpuWorld (WorldOptions::
// multicast): one multicast object bound to the symmetric part of every
// rank's chunk, so the kernel reduces the gathered counts and counters
// into every chunk at once (multimem.red).
//
// Compiled only with -DMoonEP_ENABLE_MULTICAST=ON (multicast.cpp): no test
// has run it yet, and a multicast object created on a shared machine can
// take its GPUs down. Without it (multicast_off.cpp, the default) the
// constructor refuses every world that asks, before anything exists.
//
// What must stay true:
//  * Every refusal comes before any multicast object exists, and with one
//    process per rank every process refuses alike (facts are gathered
//    first), so none waits for one that gave up.
//  * It is destroyed before the chunks bound to it (the GpuWorld declares
//    it after its SymmetricMapping), and undoes exactly what was done.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "driver_api.hpp"
#include "peers.hpp"
#include "symmetric_mapping.hpp"

namespace moonep::cuda::impl {

class Multicast {
 public:
  // The refusals, in this order: ranks that do not each have their own
  // device (an object binds one chunk per device), a device without
  // multicast support; then the object's size: `sym_bytes` rounded up to
  // the multicast granularity, the same in every process. RuntimeError
  // ending "; no multicast object was created".
  Multicast(const Vmm& vmm, const std::vector<int>& devices, const std::vector<int>& local, WorldPeers* peers,
            std::size_t sym_bytes, const std::string& who);
  ~Multicast();
  Multicast(const Multicast&) = delete;
  Multicast& operator=(const Multicast&) = delete;

  // The bytes at the start of every chunk bound to the object (the
  // chunk's symmetric part, padded).
  std::size_t bytes() const;
  // Creates the object (rank 0's process; the others import it), adds this
  // process's devices, binds every local chunk's first bytes() and maps
  // the object here for this process's devices.
  void bind(const SymmetricMapping& chunks, const std::string& who);
  // The object's mapping in this process (null before bind()).
  std::int32_t* mapping() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace moonep::cuda::impl
