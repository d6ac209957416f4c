// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// What the tests of the GPU world with one MPI process per rank share
// (test_gpu_world_layer_mpi.cpp, test_gpu_world_moe_mpi.cpp): process r
// holds rank r on GPU r mod (visible GPUs); its rank's buffers with
// pointer tables indexed by rank (only its own entry set), copies to and
// from any mapped pointer, bit comparisons, a step planned by the world
// (each process its rank's routing, every process the whole plan back),
// and what a call throws.
#pragma once

#include <mpi.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "moonep/gpu_world.hpp"
#include "moonep/gpu_world_mpi.hpp"
#include "moonep/host_plan.hpp"
#include "moonep/reference.hpp"
#include "mpi_test_support.hpp"
#include "support/cuda_layer_support.hpp"
#include "support/cuda_test_support.hpp"

namespace gpu_world_mpi_test {

using cuda_layer_test::same_bits;
using moonep::Config;
using moonep::Routing;
using moonep::TokensPerRank;
using moonep::cuda::GpuWorld;
using moonep::cuda::WorldOptions;
using moonep::test::cuda_ok;

using moonep_test::world_rank;
using moonep_test::world_size;

inline int my_device() {
  int n = 1;
  cudaGetDeviceCount(&n);
  return world_rank() % n;
}

// This process's device idle, then every process here: what one process
// wrote into its rank's slot buffers is there before any other process's
// next operation stores into them.
inline void sync_all() {
  cuda_ok(cudaDeviceSynchronize());
  MPI_Barrier(MPI_COMM_WORLD);
}

inline std::unique_ptr<GpuWorld> make_world(const Config& c, double timeout_s = 10) {
  cuda_ok(cudaSetDevice(my_device()));
  WorldOptions o;
  o.timeout_s = timeout_s;
  return moonep::cuda::make_mpi_gpu_world(c, MPI_COMM_WORLD, my_device(), o);
}

// This process's rank's buffer on its device, and a pointer array indexed
// by rank with only this process's entry set (the others null).
template <class V>
struct MyBuffer {
  V* p = nullptr;
  std::size_t n = 0;
  std::vector<V*> table;
  MyBuffer(int ranks, const std::vector<V>& host) : n(host.size()), table(static_cast<std::size_t>(ranks), nullptr) {
    cuda_ok(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(V) + 16));
    set(host);
    table[world_rank()] = p;
  }
  ~MyBuffer() { cudaFree(p); }
  MyBuffer(const MyBuffer&) = delete;
  MyBuffer& operator=(const MyBuffer&) = delete;
  void set(const std::vector<V>& host) { cuda_ok(cudaMemcpy(p, host.data(), n * sizeof(V), cudaMemcpyHostToDevice)); }
  std::vector<V> get() const {
    std::vector<V> h(n);
    cuda_ok(cudaMemcpy(h.data(), p, n * sizeof(V), cudaMemcpyDeviceToHost));
    return h;
  }
  void* const* data() { return reinterpret_cast<void* const*>(table.data()); }
  const void* const* cdata() const { return reinterpret_cast<const void* const*>(table.data()); }
};

template <class V>
void put(void* slot, const std::vector<V>& host) {
  cuda_ok(cudaMemcpy(slot, host.data(), host.size() * sizeof(V), cudaMemcpyDefault));
}
template <class V>
std::vector<V> get(const void* slot, std::size_t n) {
  std::vector<V> h(n);
  cuda_ok(cudaMemcpy(h.data(), slot, n * sizeof(V), cudaMemcpyDefault));
  return h;
}

// Elements whose bits differ; the first wrong one's index in *first.
template <class V>
std::size_t wrong_bits(const std::vector<V>& got, const std::vector<V>& want, std::string* first = nullptr) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (same_bits(got[i], want[i])) continue;
    if (first && wrong == 0) *first = "element " + std::to_string(i);
    ++wrong;
  }
  return wrong;
}

// The world plans this process's rank of a step (its routing and, ragged,
// its count on its device); every process gets the whole plan back.
class MyStep {
 public:
  MyStep(GpuWorld& world, const Config& c, const Routing& full, const TokensPerRank* tokens)
      : routing_(c.ranks, full[world_rank()]),
        count_(c.ranks, std::vector<std::int32_t>{tokens ? (*tokens)[world_rank()] : c.tokens}) {
    std::vector<const std::int32_t*> routing(routing_.table.begin(), routing_.table.end());
    std::vector<const std::int32_t*> counts(count_.table.begin(), count_.table.end());
    world.plan(routing.data(), nullptr, nullptr, tokens ? counts.data() : nullptr);
    plan = world.copy_out();
  }
  moonep::HostPlan plan;

 private:
  MyBuffer<std::int32_t> routing_, count_;
};

// What f throws, or "(nothing thrown)".
inline std::string caught(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

}  // namespace gpu_world_mpi_test
