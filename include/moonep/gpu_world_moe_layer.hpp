// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/gpu_world_moe_layer.hpp — the linear MoE layer (docs/spec/layer.md
// "The linear layer") on a moonep::cuda::GpuWorld: held by one process
// (every rank in this process, one GPU per rank; a device may repeat) or
// one process per rank (make_mpi_gpu_world, moonep/gpu_world_mpi.hpp).
// The GPU world's twin of moonep::cuda::VirtualRankMoeLayer
// (moonep/cuda_moe_layer.hpp), built from GpuWorldExpertCopies (fetch,
// reduce), a GpuWorldLayer of widths H and H' (dispatch and its backward,
// combine and its backward) and cuBLAS (the same GEMMs as the virtual
// ranks' layer: moe_gemm.hpp). Only usable when MoonEP was built with CUDA.
//
// Group g of destination rank d (slots cu_seqlens[g-1] .. cu_seqlens[g])
// runs y = recv @ M on rank d's device: for g < E its own expert
// experts(d)[g mod epn], for g = E + b its copy slot b. Experts are M_e
// [H][H'] row-major, Q = H*H' values; rank h's own experts live in the
// world's symmetric memory (experts(h) [epn][Q]: write the parameters
// there), where every rank's fetch reads them. Token-side buffers are the
// user's: one device pointer per rank, on the rank's device, arrays
// indexed by rank (x [S][H], w [S][K] float (double for f64), out
// [S][H'], and in the backward grad_out, grad_x, grad_w and grad_experts
// [epn][Q]).
//
// GEMMs: one cublasGemmEx per non-empty group, on its rank's stream with
// the rank's own cuBLAS handle and workspace, accumulating in float
// (double for f64), rounded to T once; TF32 is never used. Their sizes
// are the plan's group sizes, on the devices: read_groups() reads every
// rank's cu_seqlens to the host (pinned memory made once, then a wait)
// and the GEMM launches use that copy until the next read_groups().
// forward() and backward() call it first; the enqueue_* parts do not, so a
// caller may read the groups once and capture the parts in a CUDA graph
// (which then replays these group sizes: capture again when the plan
// changes).
//
// Every part is enqueued as one part per rank, forked from `origin` (a
// stream of rank 0's device; null: its legacy default stream) and joined
// back into it (events, no host waits). forward() puts the fetch on a
// branch of its own beside the dispatch (the fetch needs only the plan).
//
// One process per rank (make_mpi_gpu_world; the processes may share a
// GPU): made collectively, as its GpuWorldLayer and GpuWorldExpertCopies
// are (every process with the same H, H', type and training: agreed first,
// the same InputError on every process where they differ), and destroyed
// together. Each process enqueues only its own rank's parts, on `origin`
// (a stream of its rank's device; forward's fetch branch on a stream of
// the layer's own): the pointer arrays stay indexed by rank and only this
// process's entry is read (the others may be null). The parts meet the
// other processes' at the layer's and the copies' device-side barriers
// (no host waits); read_groups, forward and backward are collective (each
// process reads its rank's group sizes and learns every other's, so all
// refuse a plan alike). Every process must call the same operations in
// the same order; check() (collective) reports a barrier that gave up.
//
// What must stay true: every buffer (the slot buffers, the copies and
// their gradients in symmetric memory, cuBLAS's workspaces) is made in the
// constructor, nothing per step; a group's rows are clipped to 0..NvS and
// a group g < E of an expert the rank does not own never runs
// (read_groups refuses such a plan first, in check_experts_runnable's
// words), so no GEMM touches memory outside the buffers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "moonep/cuda_layer.hpp"  // Element
#include "moonep/gpu_world.hpp"
#include "moonep/gpu_world_expert_copies.hpp"
#include "moonep/gpu_world_layer.hpp"

namespace moonep::cuda {

class GpuWorldMoeLayer {
 public:
  // For the plans of `world` (which must outlive the layer), tokens of
  // `hidden` (H) values and experts H -> `hidden_out` (H') of `type`.
  // `training`: also make the backward's buffers (without them backward
  // throws InputError). InputError for H or H' below 1; with one process
  // per rank, processes that disagree on H, H', type or training (the same
  // error on every process). RuntimeError if a buffer, stream or cuBLAS
  // handle cannot be made (with one process per rank also: a process that
  // does not come within the world's timeout).
  GpuWorldMoeLayer(GpuWorld& world, int hidden, int hidden_out, Element type, bool training = true);
  ~GpuWorldMoeLayer();
  GpuWorldMoeLayer(const GpuWorldMoeLayer&) = delete;
  GpuWorldMoeLayer& operator=(const GpuWorldMoeLayer&) = delete;

  int hidden() const;
  int hidden_out() const;
  std::int64_t params() const;  // Q = H*H'
  Element element() const;
  bool training() const;

  // Rank d's own experts' parameters [epn][Q] on its device, in symmetric
  // memory: write them before forward (InputError for d outside 0..R-1;
  // with one process per rank, write this process's rank's, ordered before
  // forward on `origin`).
  void* experts(int d) const;

  // The whole step, after the world's plan (on `origin` or before it):
  // read_groups, then every enqueue_forward part, the fetch beside the
  // dispatch. x[r] [S][H], w[r] [S][K] -> out[r] [S][H'] = sum_k w * (x @
  // M_e) for t < s_r, rows past s_r untouched. Keeps recv, recv_w, y and the
  // copies for backward. Waits for `origin` once (read_groups).
  void forward(const void* const* x, const void* const* w, void* const* out, cudaStream_t origin);

  // After forward with the same plan, x, w and experts: grad_out[r]
  // [S][H'] in; grad_x[r] [S][H] (rows past s_r untouched), grad_w[r]
  // [S][K] (entries past s_r*K untouched) and grad_experts[r] [epn][Q]
  // (rank r's experts' gradients: their own groups' plus their copies'
  // reduced; written, not added to) out. Waits for `origin` once
  // (read_groups).
  void backward(const void* const* grad_out, void* const* grad_x, void* const* grad_w, void* const* grad_experts,
                cudaStream_t origin);

  // Every rank's cu_seqlens to the host (after what `origin` holds; waits
  // for it), for the GEMMs that follow; InputError (check_experts_runnable's
  // words) for a plan whose rank would run a remote expert it did not copy.
  void read_groups(cudaStream_t origin);

  // The forward's parts, each asynchronous and capturable, in this order
  // (fetch only needs the plan: it may be enqueued on another origin,
  // overlapping dispatch, as long as `origin` of the GEMMs waits for it).
  void enqueue_fetch(cudaStream_t origin) const;
  void enqueue_dispatch(const void* const* x, const void* const* w, cudaStream_t origin) const;
  void enqueue_gemms(cudaStream_t origin) const;  // uses read_groups' sizes
  void enqueue_combine(void* const* out, cudaStream_t origin) const;

  // The step's buffers (recv(d), recv_w(d), y(d) of the layer; copies(d) of
  // the expert copies), valid as long as the layer.
  const GpuWorldLayer& layer() const;
  const GpuWorldExpertCopies& expert_copies() const;

  // How many GEMMs the last read_groups' sizes launch per pass (non-empty
  // groups over all ranks, this process's or not).
  int gemm_count() const;

  // One process per rank: collective, GpuWorldLayer::check() and
  // GpuWorldExpertCopies::check() in one (both run whatever the first
  // finds; one RuntimeError naming what each found). A world held by one
  // process: returns at once.
  void check();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace moonep::cuda
