// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/mpi_layer.hpp — dispatch, combine and their backward
// (docs/spec/layer.md) over an MPI world (moonep/mpi_world.hpp): one rank
// per process, host memory, every operation collective over the world's
// communicator and run by serial loops on the calling thread (each
// returns with its results in place).
//
// The layer allocates its symmetric memory once, for the world, the
// configuration, the width H (H' for a combine: one layer per width) and
// T, in a window of its own on the world's communicator (the world's own
// window stays the planner's):
//   recv [NvS][H] T, recv_w [NvS] W    what dispatch delivers (recv(), recv_w())
//   grad_in [NvS][H] T                 combine's backward: the gradient rows
//   back [S*K][H] A, back_w [S*K] W    what comes back to a source, per entry
// On an MpiSharedWorld the window is an MPI-3 shared window and a process
// stores straight into the peer's buffer (the partial rows of the combine
// prologue are summed in the source's `back` row in place); on an
// MpiRmaWorld every row a source sends is one MPI_Put, and what comes back
// goes as blocks, one MPI_Put each per pair of ranks: the partial rows
// packed per source where R <= K (back holds them as [R][S][H] A then,
// with the entry of each in back_idx [R][S]; at most S per pair, one per
// token; with more ranks one MPI_Put per partial row), and per-entry values
// (dispatch's routing weights, the backward's values for the sources) into
// a region in_w [R][S*K] W of the receiver, which takes the entries it
// needs from it. Either way a row travels once per
// (token, destination rank), from the primary; duplicates get it from their
// primary at the destination (epilogue), and the combine prologue runs at
// the destination, so the bits are the reference's (moonep/
// layer_reference.hpp): partial rows in A, the source adds its primaries'
// in increasing k and rounds to T once.
//
// Every operation first checks its arguments and the plan on every process
// and agrees (bounded by the world's timeout()) that all are good; when one
// is not, every process throws the same InputError line (the lowest bad
// rank's, "<op>: rank r: ...") before anything moved, and the layer stays
// usable. Every wait is bounded by the world's timeout(): a process that
// does not come makes the others throw MpiTimeoutError, after which the
// layer is broken() (every call throws; the destructor frees nothing
// collectively). The layer must be destroyed before its world.
//
// The weighted combine and combine's backward weigh every slot by recv_w(),
// the weights the last dispatch delivered (bit-identical to w).
#pragma once

#include <cstdint>
#include <memory>

#include "moonep/impl/layer_concept.hpp"
#include "moonep/layer_reference.hpp"
#include "moonep/mpi_world.hpp"
#include "moonep/planner.hpp"

namespace moonep {

// One rank's plan as the layer reads it: the planner's views of this
// process's rank (Planner over the same world: last_plan()), or rank `rank`
// of a HostPlan of every rank (the reference's, a file's). Only pointers:
// the plan must outlive the call it is given to.
struct MpiLayerPlan {
  Config config;
  int rank = -1;
  const std::int32_t* dst = nullptr;
  std::int64_t entries = 0;  // N_r = s_r*K meaningful values of dst
  std::int64_t dst_len = 0;
  const std::int32_t* src_info = nullptr;
  std::int64_t src_info_len = 0;
  const std::int32_t* zero_fill_ranges = nullptr;  // [rows][2]
  std::int64_t zero_fill_rows = 0;
  const std::int32_t* dup_groups = nullptr;  // [rows][3]
  std::int64_t dup_group_rows = 0;
  const std::int32_t* dup_loffs = nullptr;
  std::int64_t dup_loffs_len = 0;
  const std::int32_t* dup_counts = nullptr;  // [2]
  std::int64_t dup_counts_len = 0;
  // Read by the expert copies only (moonep/mpi_expert_copies.hpp).
  const std::int32_t* cu_seqlens = nullptr;  // [E+B]
  std::int64_t cu_seqlens_len = 0;
  const std::int32_t* experts_to_copy = nullptr;  // [R][B], the same table on every rank
  std::int64_t experts_to_copy_len = 0;

  // Plan of a Planner over an MPI world (its one local rank).
  MpiLayerPlan(const Plan<Kokkos::HostSpace>& plan);  // NOLINT: implicit on purpose
  MpiLayerPlan(const HostPlan& plan, int rank);
};

namespace impl {
class MpiLayerWindow;
}

template <class T>
class MpiLayer {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, bf16>,
                "MpiLayer: T is float, double or moonep::bf16");

 public:
  using element_type = T;
  using weight_type = weight_t<T>;
  using accum_type = accum_t<T>;
  using memory_space = Kokkos::HostSpace;
  using plan_type = MpiLayerPlan;
  template <class V>
  using host_view = Kokkos::View<V, Kokkos::LayoutRight, Kokkos::HostSpace>;
  using rows_view = host_view<T**>;                // [rows][H]
  using const_rows_view = host_view<const T**>;    // x, y, grad_out, grad_recv
  using weights_view = host_view<const weight_type**>;   // w [S][K]
  using grad_weights_view = host_view<weight_type**>;     // grad_w [S][K]
  using slot_weights_view = host_view<weight_type*>;      // recv_w [NvS]
  using const_slot_weights_view = host_view<const weight_type*>;

  // Collective over `world` (which must outlive the layer): every process
  // passes the same config (ranks = world.size()) and hidden, else
  // InputError on every process; the window is allocated here, once.
  MpiLayer(MpiWorld& world, const Config& config, int hidden);
  ~MpiLayer();
  MpiLayer(const MpiLayer&) = delete;
  MpiLayer& operator=(const MpiLayer&) = delete;

  const Config& config() const { return config_; }
  int hidden() const { return hidden_; }
  bool broken() const;

  // This rank's receive buffers in the window: [NvS][H] and [NvS].
  rows_view recv() const;
  slot_weights_view recv_w() const;

  // recv()[loff] = x[t], recv_w()[loff] = w[t][k] at the destination of
  // every entry (t < s_r); padding rows and weights zero; undefined slots
  // untouched. x [S][H], w [S][K].
  void dispatch(const MpiLayerPlan& plan, const const_rows_view& x, const weights_view& w);

  // out[t] = sum_k recv_w[d_k][loff_k] * y[d_k][loff_k] for t < s_r
  // (y [NvS][H] this rank's expert outputs, out [S][H]); rows past s_r
  // untouched. The unweighted form leaves the factors out.
  void combine(const MpiLayerPlan& plan, const const_rows_view& y, const rows_view& out);
  void combine_unweighted(const MpiLayerPlan& plan, const const_rows_view& y, const rows_view& out);

  // Combine's backward, grad_out [S][H] (t < s_r read): grad_y [NvS][H] =
  // round(recv_w * grad_out row) for every filled slot (the row's bits
  // unweighted), zero padding rows, undefined slots untouched; grad_w
  // [S][K] = <grad_out[t], y[d_k][loff_k]> summed in increasing h.
  void combine_backward(const MpiLayerPlan& plan, const const_rows_view& grad_out, const const_rows_view& y,
                        const rows_view& grad_y, const grad_weights_view& grad_w);
  void combine_backward_unweighted(const MpiLayerPlan& plan, const const_rows_view& grad_out,
                                   const rows_view& grad_y);

  // Dispatch's backward, grad_recv [NvS][H] (filled slots read): grad_x
  // [S][H] = sum_k grad_recv[d_k][loff_k] (summed as an unweighted
  // combine); with grad_recv_w [NvS] also grad_w[t][k] += grad_recv_w[d_k][loff_k].
  void dispatch_backward(const MpiLayerPlan& plan, const const_rows_view& grad_recv, const rows_view& grad_x);
  void dispatch_backward(const MpiLayerPlan& plan, const const_rows_view& grad_recv,
                         const const_slot_weights_view& grad_recv_w, const rows_view& grad_x,
                         const grad_weights_view& grad_w);

 private:
  struct Impl;
  Config config_;
  int hidden_;
  std::unique_ptr<Impl> impl_;
};

extern template class MpiLayer<float>;
extern template class MpiLayer<double>;
extern template class MpiLayer<bf16>;

// The layer interface every view-based layer offers (its own receive
// buffers in the window: recv(), recv_w()), for each element type.
MOONEP_ASSERT_LAYER(MpiLayer<float>);
MOONEP_ASSERT_LAYER(MpiLayer<double>);
MOONEP_ASSERT_LAYER(MpiLayer<bf16>);

}  // namespace moonep
