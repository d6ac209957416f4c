// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/mpi_expert_copies.hpp — fetch and reduce (docs/spec/layer.md
// "Expert copies") over an MPI world (moonep/mpi_world.hpp), beside
// moonep::MpiLayer: one rank per process, host memory, every operation
// collective over the world's communicator and run on the calling thread.
//
// Parameters are Q values of T per expert: this rank's own experts
// P [epn][Q] (P_h[j] is expert h*epn + j) and its copy slots copies [B][Q].
// The object allocates once, for the world, the configuration, Q and T, a
// window of its own (MpiLayer's MpiLayerWindow) holding
//   experts [epn][Q] T      what fetch reads from (experts())
//   grad_copies [B][Q] T    what reduce reads from (grad_copies())
// fetch and reduce first copy their argument there unless it already is
// that buffer (pass experts() / grad_copies() to move nothing locally),
// then read one-sided: on an MpiSharedWorld straight from the owner's
// (fetch) or the copier's (reduce) buffer, on an MpiRmaWorld by MPI_Get.
// Nothing is allocated per step (reduce's sums and the gets' staging row
// are made here).
//
// Every operation first checks the plan and the views on every process
// and agrees that all are good; else every process throws the same
// InputError line, "<op>: rank r: ..." of the lowest bad rank, before
// anything moved. A plan whose rank would run a remote expert that it does
// not hold in a copy slot (possible only with B < epn) is refused so, in
// check_experts_runnable's words ("fetch: rank 1: rank 1 would run expert
// 3 (2 slots) that ..."). Waits are bounded by the world's timeout()
// (MpiTimeoutError; the object is then broken()). Destroy it before its
// world.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "moonep/mpi_layer.hpp"

namespace moonep {

template <class T>
class MpiMoeLayer;

template <class T>
class MpiExpertCopies {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, bf16>,
                "MpiExpertCopies: T is float, double or moonep::bf16");

 public:
  using accum_type = accum_t<T>;
  using params_view = Kokkos::View<T**, Kokkos::LayoutRight, Kokkos::HostSpace>;  // [epn or B][Q]
  using const_params_view = Kokkos::View<const T**, Kokkos::LayoutRight, Kokkos::HostSpace>;

  // Collective over `world` (which must outlive this object): every process
  // passes the same config (ranks = world.size()) and Q >= 1, else
  // InputError on every process.
  MpiExpertCopies(MpiWorld& world, const Config& config, std::int64_t params);
  ~MpiExpertCopies();
  MpiExpertCopies(const MpiExpertCopies&) = delete;
  MpiExpertCopies& operator=(const MpiExpertCopies&) = delete;

  const Config& config() const { return config_; }
  std::int64_t params() const { return params_; }
  bool broken() const;

  // This rank's buffers in the window: experts [epn][Q], grad_copies [B][Q].
  params_view experts() const;
  params_view grad_copies() const;

  // copies[b] = P_{e div epn}[e mod epn] (bits) for every
  // e = experts_to_copy[me][b] >= 0; slots with -1 untouched.
  // experts: this rank's P [epn][Q]; copies [B][Q].
  void fetch(const MpiLayerPlan& plan, const const_params_view& experts, const params_view& copies);

  // grad_experts[j] = round_T(grad_experts[j] + grad_copies_{d1}[b1] + ...)
  // for this rank's experts e = me*epn + j, over every (d, b) with
  // experts_to_copy[d][b] = e in increasing d then b, summed in accum_t<T>;
  // experts without copies keep their bits. grad_copies [B][Q] (this
  // rank's), grad_experts [epn][Q].
  void reduce(const MpiLayerPlan& plan, const const_params_view& grad_copies, const params_view& grad_experts);

  // Collective: the refusals of fetch and reduce for this plan alone
  // ("<op>: rank r: ..."), nothing moved.
  void check_runnable(const MpiLayerPlan& plan, const char* op = "check_runnable");

 private:
  friend class MpiMoeLayer<T>;
  // The plan's errors (the layer's, then the copies'), else `error`, agreed
  // by every process (MpiLayerWindow::start).
  void start(const char* op, const MpiLayerPlan& plan, const std::string& error);
  void fetch_checked(const char* op, const MpiLayerPlan& plan, const T* experts, const params_view& copies);
  void reduce_checked(const char* op, const MpiLayerPlan& plan, const T* grad_copies, const params_view& grad_experts);

  struct Impl;
  Config config_;
  std::int64_t params_;
  std::unique_ptr<Impl> impl_;
};

extern template class MpiExpertCopies<float>;
extern template class MpiExpertCopies<double>;
extern template class MpiExpertCopies<bf16>;

}  // namespace moonep
