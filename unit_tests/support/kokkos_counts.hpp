// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// What Kokkos does while a CountKokkos lives (or until stop()), counted
// through Kokkos Tools callbacks: kernel launches, fences (not those Kokkos
// adds around each kernel for an attached tool, labelled Kokkos::Tools...,
// nor Kokkos::Threads' wait for each of its kernels, which that host
// backend runs to completion anyway; Kokkos reports execution-space fences
// from 3.6 on), deep copies, and allocations and deallocations of memory
// (of at least one byte: Kokkos 4.x on Cuda reports a zero-byte one for
// every team kernel it launches without level-1 scratch). For the tests
// that an operation enqueues its kernels and nothing else (on a GPU, a
// fence or a copy to the host is a host round trip, an allocation or a
// free a cudaMalloc/cudaFree-class call). One at a time.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>

namespace moonep::test {

struct KokkosCounts {
  int launches = 0, fences = 0, deep_copies = 0, allocations = 0, deallocations = 0;
};

class CountKokkos {
 public:
  CountKokkos() {
    counts() = KokkosCounts{};
    namespace T = Kokkos::Tools::Experimental;
    T::set_begin_parallel_for_callback(on_kernel);
    T::set_begin_parallel_reduce_callback(on_kernel);
    T::set_begin_parallel_scan_callback(on_kernel);
    T::set_begin_fence_callback(on_fence);
    T::set_begin_deep_copy_callback(on_deep_copy);
    T::set_allocate_data_callback(on_allocate);
    T::set_deallocate_data_callback(on_deallocate);
  }
  ~CountKokkos() { stop(); }
  CountKokkos(const CountKokkos&) = delete;
  CountKokkos& operator=(const CountKokkos&) = delete;

  // Stops counting (once) and returns what was counted.
  KokkosCounts stop() {
    namespace T = Kokkos::Tools::Experimental;
    T::set_begin_parallel_for_callback(nullptr);
    T::set_begin_parallel_reduce_callback(nullptr);
    T::set_begin_parallel_scan_callback(nullptr);
    T::set_begin_fence_callback(nullptr);
    T::set_begin_deep_copy_callback(nullptr);
    T::set_allocate_data_callback(nullptr);
    T::set_deallocate_data_callback(nullptr);
    return counts();
  }

 private:
  static KokkosCounts& counts() {
    static KokkosCounts c;
    return c;
  }
  static void on_kernel(const char*, std::uint32_t, std::uint64_t*) { ++counts().launches; }
  static void on_fence(const char* name, std::uint32_t, std::uint64_t*) {
    const std::string label = name ? name : "";
    if (label.compare(0, 14, "Kokkos::Tools:") == 0) return;
    if (label.compare(0, 30, "Kokkos::ThreadsInternal::fence") == 0) return;
    ++counts().fences;
  }
  static void on_deep_copy(Kokkos::Tools::SpaceHandle, const char*, const void*, Kokkos::Tools::SpaceHandle,
                           const char*, const void*, std::uint64_t) {
    ++counts().deep_copies;
  }
  static void on_allocate(Kokkos::Tools::SpaceHandle, const char*, const void*, std::uint64_t bytes) {
    if (bytes > 0) ++counts().allocations;
  }
  static void on_deallocate(Kokkos::Tools::SpaceHandle, const char*, const void*, std::uint64_t bytes) {
    if (bytes > 0) ++counts().deallocations;
  }
};

}  // namespace moonep::test
