// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/gpu_world_layer.hpp — dispatch, combine and their backward
// (docs/spec/layer.md) on a moonep::cuda::GpuWorld: held by one process
// (every rank in this process, one GPU per rank; a device may repeat) or
// one process per rank (make_mpi_gpu_world, moonep/gpu_world_mpi.hpp).
// Only usable when MoonEP was built with CUDA.
//
// Slot buffers (recv, recv_w, y; for training grad_y, grad_recv,
// grad_recv_w; the partial rows of the combine prologue) are in symmetric
// memory: each rank's chunk is its own allocation on its own device, all
// mapped for every device of the world (CUDA VMM, as the world's own
// buffer), so a source rank stores its rows straight into the destination
// rank's recv (over NVLink across GPUs) and reads back from its y.
// Token-side buffers (x, w, out, grad_out, grad_x, grad_w) are the user's:
// one device pointer per rank, on the rank's device, arrays indexed by
// rank; x and the like [S][H], w [S][K], out [S][H'].
//
// Transport, as the contract requires: a row travels once per (token,
// destination rank): each source stores its primaries' rows (and every
// entry's weight) into the destinations' recv; after every source is done,
// each destination copies primaries into its duplicates' slots (the
// dispatch epilogue) and zeroes its padding. Combine: each destination
// adds its duplicates into its primary's partial row in the accumulation
// type (the prologue), then each source reads one row per (token,
// destination rank) and sums them in increasing k, rounded once.
//
// A world held by one process: every operation is enqueued as one part
// per rank on the world's rank streams (GpuWorld::stream), forked from
// `origin` and joined back into it with events, no host waits, so one
// CUDA graph captured on `origin` holds GpuWorld::plan and the layer's
// operations. Enqueue after the world's plan of the step (on `origin` or
// before it); the experts' writes of y (and the user's of grad_y's
// consumers) must be ordered on `origin` between dispatch and combine.
//
// One process per rank (make_mpi_gpu_world; the processes may share a
// GPU): the layer is made collectively (every process constructs it
// together with the same H, H', type and training: they are agreed
// between the processes first, and every process throws the same
// InputError where they differ), each process creating its rank's chunk
// and importing the others' (as the world does; every wait bounded by the
// world's WorldOptions::timeout_s), and destroyed together. Each process
// enqueues only its own rank's part of each operation, on `origin` (a
// stream of its rank's device): the pointer arrays stay indexed by rank,
// and only this process's rank's entry is read (the others may be null).
// Where a world of one process joins events, the processes meet at a
// device-side barrier in the layer's symmetric memory (a count of
// arrivals per rank, system-scope release and acquire): between an
// operation's two parts (every source's stores done before a destination's
// epilogue; every destination's prologue done before a source reads its
// partial rows) and at its end. No host waits, so one CUDA graph captured
// on `origin` holds GpuWorld::plan and the layer's operations of this
// process's rank. Every process must enqueue the same operations in the
// same order (and the same `weighted`); the layer's accessors of another
// rank's buffers return pointers mapped in this process, readable from its
// device. Other processes store into this rank's recv, recv_w (dispatch)
// and grad_y (combine_backward) in those operations' first part, which
// may start once every process has ended the previous operation: what
// this process writes into them itself must come before its previous
// layer operation on `origin`, or the processes must meet on the host
// after it and before the next (as the tests do when they seed them).
// No hang: a barrier waits at most the world's timeout for another rank;
// past it (a process that never enqueued its part, one whose arguments were
// refused, or one at another operation), its rank gives up: its later
// operations do nothing until check() (collective) throws a RuntimeError
// naming the ranks and barriers and resets the barriers, after which the
// layer works again. Call check() where the step is checked anyway (beside
// GpuWorld::check(), or after a graph replay).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "moonep/cuda_layer.hpp"  // Element
#include "moonep/gpu_world.hpp"

namespace moonep::cuda {

class GpuWorldLayer {
 public:
  // For the plans of `world` (which must outlive the layer), rows of
  // `hidden` (H, tokens and recv) and `hidden_out` (H', y and out)
  // elements of `type`; `training` adds grad_y, grad_recv and grad_recv_w.
  // InputError: H or H' below 1; with one process per rank, processes
  // that disagree on H, H', type or training (the same error on every
  // process). RuntimeError if the symmetric memory cannot be made (with
  // one process per rank also: a process that does not come within the
  // world's timeout).
  GpuWorldLayer(GpuWorld& world, int hidden, int hidden_out, Element type, bool training = false);
  ~GpuWorldLayer();
  GpuWorldLayer(const GpuWorldLayer&) = delete;
  GpuWorldLayer& operator=(const GpuWorldLayer&) = delete;

  int hidden() const;
  int hidden_out() const;
  Element element() const;
  bool training() const;

  // Rank d's slot buffers on its device (valid as long as the layer; with
  // one process per rank another process's rank's are mapped here too,
  // readable and writable from this process's device):
  // recv [NvS][H], recv_w [NvS] (weights: float, double for f64),
  // y [NvS][H']; training only (InputError otherwise): grad_y [NvS][H'],
  // grad_recv [NvS][H], grad_recv_w [NvS]. InputError for d outside 0..R-1.
  void* recv(int d) const;
  void* recv_w(int d) const;
  void* y(int d) const;
  void* grad_y(int d) const;
  void* grad_recv(int d) const;
  void* grad_recv_w(int d) const;

  // x[r] [S][H], w[r] [S][K] -> recv, recv_w of every rank: every filled
  // slot its token's row and its entry's weight, padding zero, slots after
  // the last group untouched.
  void dispatch(const void* const* x, const void* const* w, cudaStream_t origin) const;

  // y, recv_w of every rank -> out[r] [S][H']: out[r][t] = sum over k of
  // recv_w * y (weighted = false: y alone) for t < s_r, the contract's
  // order; rows past s_r untouched.
  void combine(void* const* out, bool weighted, cudaStream_t origin) const;

  // Combine's backward (training), after the step's dispatch (its recv_w
  // are the weights). grad_out[r] [S][H'] (rows t < s_r read) -> grad_y of
  // every rank: round_T(recv_w * grad_out[r][t]) per filled slot
  // (weighted = false: grad_out's row, bits), padding zero; the rows travel
  // once per (token, destination rank), the destination scales its
  // duplicates. weighted: grad_w[r] [S][K] (required) = <grad_out[r][t],
  // y[d_k][loff_k]> summed in increasing h, for t < s_r; unweighted:
  // grad_w ignored (may be null).
  void combine_backward(const void* const* grad_out, bool weighted, void* const* grad_w, cudaStream_t origin) const;

  // Dispatch's backward (training). grad_recv of every rank -> grad_x[r]
  // [S][H]: sum over k of grad_recv[d_k][loff_k] in the contract's order
  // (an unweighted combine); rows past s_r untouched. grad_w non-null:
  // grad_w[r][t][k] += grad_recv_w[d_k][loff_k] (grad_recv_w read).
  void dispatch_backward(void* const* grad_x, void* const* grad_w, cudaStream_t origin) const;

  // One process per rank: collective. Waits for this process's device,
  // then, if a barrier of any rank gave up since the last check, throws a
  // RuntimeError on every process naming each rank that gave up, where and
  // why (a rank that did not come within the world's timeout, or was at
  // another operation), after resetting every rank's barrier words; the
  // outputs of the operations since are undefined. A world held by one
  // process: returns at once (its phases are joined with events; nothing
  // waits for another rank).
  void check();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace moonep::cuda
