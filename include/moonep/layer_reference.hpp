// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/layer_reference.hpp — the reference layer operations: docs/spec/layer.md
// over a HostPlan of all ranks, serial and written for clarity. It is the
// executable spec every faster path is tested against, and what moonep-layer
// runs.
//
// Every buffer is given for all ranks, rank-major (PerRank: data[r] is rank
// r's buffer, flat and row-major) with the extents layer.md's table gives:
// x [S][H], w [S][K], recv [NvS][H], recv_w [NvS], y [NvS][H'],
// out [S][H'], P [epn][Q], copies [B][Q]. Token buffers hold S rows even in
// a ragged step (the plan's tokens_per_rank); only the first s_r are read
// or written. Each operation checks the plan and every buffer first and
// throws one InputError line (nothing written) on bad input.
//
// T is float, double or moonep::bf16; the routing weights are weight_t<T>
// and all arithmetic is in accum_t<T> (double for double, float otherwise),
// rounded to T once.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "moonep/bf16.hpp"
#include "moonep/host_plan.hpp"

namespace moonep {

template <class T>
using accum_t = std::conditional_t<std::is_same_v<T, double>, double, float>;
template <class T>
using weight_t = accum_t<T>;
// The layer's element types: float, double and moonep::bf16.
template <class T>
inline constexpr bool is_layer_element_v =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, bf16>;

template <class V>
using PerRank = std::vector<std::vector<V>>;

// dispatch: recv[d][loff] = x[r][t] and recv_w[d][loff] = w[r][t][k] for
// every filled slot (duplicates filled from their primary's row, the
// epilogue), zero rows and weights in the padding, undefined slots untouched.
template <class T>
void dispatch_reference(const HostPlan& plan, int hidden, const PerRank<T>& x,
                        const PerRank<weight_t<T>>& w, PerRank<T>& recv,
                        PerRank<weight_t<T>>& recv_w);

// combine: out[r][t] = sum_k w[r][t][k] * y[d_k][loff_k] for t < s_r, in
// layer.md's order (prologue at the destination, then the source).
// w == nullptr: weighted = false (the factors are left out).
template <class T>
void combine_reference(const HostPlan& plan, int hidden_out, const PerRank<T>& y,
                       const PerRank<weight_t<T>>* w, PerRank<T>& out);

// combine's backward, given grad_out = d out [S][H']: grad_y [NvS][H'] for
// every filled slot (w * g, or g's bits when w == nullptr), zero padding
// rows; and when grad_w is given (it needs w), grad_w[r][t][k] =
// <g[r][t], y[d_k][loff_k]> for t < s_r (y is read only then).
template <class T>
void combine_backward_reference(const HostPlan& plan, int hidden_out, const PerRank<T>& grad_out,
                                const PerRank<T>& y, const PerRank<weight_t<T>>* w,
                                PerRank<T>& grad_y, PerRank<weight_t<T>>* grad_w);

// dispatch's backward, given grad_recv [NvS][H]: grad_x[r][t] = sum_k
// grad_recv[d_k][loff_k] for t < s_r (summed like an unweighted combine);
// with grad_recv_w [NvS] and grad_w [S][K] (both or neither):
// grad_w[r][t][k] += grad_recv_w[d_k][loff_k].
template <class T>
void dispatch_backward_reference(const HostPlan& plan, int hidden, const PerRank<T>& grad_recv,
                                 const PerRank<weight_t<T>>* grad_recv_w, PerRank<T>& grad_x,
                                 PerRank<weight_t<T>>* grad_w);

// fetch: copies[d][b] = P[e div epn][e mod epn] (bits) for every
// e = experts_to_copy[d][b] >= 0, Q values each; slots with -1 untouched.
// Refuses a plan with a remote expert that is not copied
// (check_experts_runnable).
template <class T>
void fetch_reference(const HostPlan& plan, std::int64_t params, const PerRank<T>& experts,
                     PerRank<T>& copies);

// reduce: grad_experts[h][j] = grad_experts[h][j] + the grad_copies[d][b]
// with experts_to_copy[d][b] = h*epn + j, in increasing d then b, summed in
// accum_t<T> and rounded once. Refuses what fetch refuses.
template <class T>
void reduce_reference(const HostPlan& plan, std::int64_t params, const PerRank<T>& grad_copies,
                      PerRank<T>& grad_experts);

// InputError naming the field, rank and index when the plan cannot be
// applied without reading or writing out of bounds, or is not of its own
// configuration (field lengths, ranks, tokens_per_rank). Every operation
// above calls it first.
void check_layer_plan(const HostPlan& plan);

// InputError "rank d has N entries for expert e, which it neither owns nor
// holds in a copy slot ..." for the first such (rank, expert), in
// increasing rank then expert (possible only when copy_slots < epn).
void check_experts_runnable(const HostPlan& plan);

}  // namespace moonep
