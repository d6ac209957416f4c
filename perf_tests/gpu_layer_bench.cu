// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep_gpu_layer_bench: dispatch and combine of the CUDA specialization
// (moonep::cuda::VirtualRankLayer, virtual ranks on one GPU) at one shape,
// each replayed in a CUDA graph, next to a device-to-device copy of the
// same bytes in the same run; and the whole step (plan + dispatch +
// combine) against the plan alone. See README.md, "The layer on the GPU".
// A second section does the same on a GPU world of R ranks all on device 0
// (moonep::cuda::GpuWorld + moonep::cuda::GpuWorldLayer: each rank its own
// symmetric chunk and stream, the contract's transport), next to the same
// copy timed again in that section; --world 0 leaves it out.
//
//   moonep_gpu_layer_bench [--ranks R --experts E --topk K --tokens S
//                           --copy-slots B --token-padding tp --hidden H
//                           --imbalance I --reps N --world 0|1]
// Defaults: the headline (R=8 E=256 K=8 S=4096 B=32 tp=128), H=7168,
// bfloat16 rows, imbalance 1, 20 replays per figure (median of 5 rounds).
//
// Rates, as the issue defines them: dispatch moves every filled slot's row
// into recv and reads every token row once (bytes = (filled + R*S) * row);
// combine reads every filled slot's row of y and writes every token row
// (the same bytes); the copy reads and writes filled * row bytes (rate =
// 2 * bytes / time).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "graph_timing.hpp"
#include "moonep/cuda_layer.hpp"
#include "moonep/cuda_planner.hpp"
#include "moonep/gpu_world.hpp"
#include "moonep/gpu_world_layer.hpp"
#include "moonep/synthetic.hpp"

namespace {

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "moonep_gpu_layer_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// The shared graph helpers (graph_timing.hpp), ending the bench on a CUDA error.
double time_graph(cudaGraphExec_t graph, cudaStream_t stream, int reps) {
  return moonep::bench::time_graph([](cudaError_t e, const char* w) { ok(e, w); }, graph, stream, reps);
}
template <class F>
cudaGraphExec_t capture(cudaStream_t stream, F&& body) {
  return moonep::bench::capture([](cudaError_t e, const char* w) { ok(e, w); }, stream, std::forward<F>(body));
}

}  // namespace

int main(int argc, char** argv) {
  moonep::Config c{8, 256, 8, 4096, 32, 128};
  int H = 7168, reps = 20;
  double imbalance = 1.0;
  bool with_world = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const double v = std::atof(argv[i + 1]);
    if (a == "--ranks") c.ranks = static_cast<int>(v);
    else if (a == "--experts") c.experts = static_cast<int>(v);
    else if (a == "--topk") c.topk = static_cast<int>(v);
    else if (a == "--tokens") c.tokens = static_cast<int>(v);
    else if (a == "--copy-slots") c.copy_slots = static_cast<int>(v);
    else if (a == "--token-padding") c.token_padding = static_cast<int>(v);
    else if (a == "--hidden") H = static_cast<int>(v);
    else if (a == "--imbalance") imbalance = v;
    else if (a == "--reps") reps = static_cast<int>(v);
    else if (a == "--world") with_world = v != 0;
    else {
      std::fprintf(stderr, "moonep_gpu_layer_bench: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const std::int64_t R = c.ranks, S = c.tokens, K = c.topk, NvS = c.slots(), row = static_cast<std::int64_t>(H) * 2;
  cudaStream_t stream;
  ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");

  moonep::cuda::VirtualRankPlanner planner(c);
  const moonep::Routing routing = moonep::synthetic_routing(c, imbalance, 7);
  std::vector<std::int32_t*> d_routing(R);
  for (int r = 0; r < R; ++r) {
    ok(cudaMalloc(&d_routing[r], S * K * 4), "cudaMalloc routing");
    ok(cudaMemcpy(d_routing[r], routing[r].data(), S * K * 4, cudaMemcpyHostToDevice), "routing");
  }
  const std::int32_t* const* rp = const_cast<const std::int32_t* const*>(d_routing.data());
  planner.plan(rp, nullptr, stream);
  const moonep::HostPlan plan = planner.copy_out(stream);
  std::int64_t filled = 0;
  for (const auto& rk : plan.ranks)
    for (std::int32_t s : rk.src_info) filled += s >= 0 ? 1 : 0;

  void *x, *w, *recv, *recv_w, *y, *out, *copy_from, *copy_to;
  ok(cudaMalloc(&x, R * S * row), "cudaMalloc x");
  ok(cudaMalloc(&w, R * S * K * 4), "cudaMalloc w");
  ok(cudaMalloc(&recv, R * NvS * row), "cudaMalloc recv");
  ok(cudaMalloc(&recv_w, R * NvS * 4), "cudaMalloc recv_w");
  ok(cudaMalloc(&y, R * NvS * row), "cudaMalloc y");
  ok(cudaMalloc(&out, R * S * row), "cudaMalloc out");
  ok(cudaMemset(x, 0x3c, R * S * row), "memset x");
  ok(cudaMemset(y, 0x3c, R * NvS * row), "memset y");
  ok(cudaMemset(w, 0, R * S * K * 4), "memset w");
  copy_from = y;  // filled * row bytes, from y into recv (sizes allow it)
  copy_to = recv;
  moonep::cuda::VirtualRankLayer layer(planner, H, moonep::cuda::Element::bf16);

  const cudaGraphExec_t g_copy = capture(stream, [&] {
    ok(cudaMemcpyAsync(copy_to, copy_from, filled * row, cudaMemcpyDeviceToDevice, stream), "copy");
  });
  const cudaGraphExec_t g_dispatch = capture(stream, [&] { layer.dispatch(x, w, recv, recv_w, stream); });
  const cudaGraphExec_t g_combine = capture(stream, [&] { layer.combine(y, recv_w, out, stream); });
  const cudaGraphExec_t g_plan = capture(stream, [&] { planner.plan(rp, nullptr, stream); });
  const cudaGraphExec_t g_step = capture(stream, [&] {
    planner.plan(rp, nullptr, stream);
    layer.dispatch(x, w, recv, recv_w, stream);
    layer.combine(y, recv_w, out, stream);
  });
  const double t_copy = time_graph(g_copy, stream, reps), t_dispatch = time_graph(g_dispatch, stream, reps),
               t_combine = time_graph(g_combine, stream, reps), t_plan = time_graph(g_plan, stream, reps),
               t_step = time_graph(g_step, stream, reps);
  planner.check(stream);  // the timed steps planned without error

  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const double moved = static_cast<double>(filled + R * S) * row, copied = static_cast<double>(filled) * row;
  std::printf("device: %s\n", prop.name);
  std::printf("shape: R=%d E=%d K=%d S=%d B=%d tp=%d H=%d bf16, imbalance %.1f; %lld filled slots of %lld\n", c.ranks,
              c.experts, c.topk, c.tokens, c.copy_slots, c.token_padding, H, imbalance,
              static_cast<long long>(filled), static_cast<long long>(R * NvS));
  std::printf("%-30s %10s %12s %10s\n", "operation (CUDA graph)", "ms", "GB moved", "TB/s");
  std::printf("%-30s %10.3f %12.3f %10.3f\n", "copy D2D (read + write)", t_copy, 2 * copied / 1e9,
              2 * copied / (t_copy * 1e-3) / 1e12);
  std::printf("%-30s %10.3f %12.3f %10.3f\n", "dispatch", t_dispatch, moved / 1e9, moved / (t_dispatch * 1e-3) / 1e12);
  std::printf("%-30s %10.3f %12.3f %10.3f\n", "combine (weighted)", t_combine, moved / 1e9,
              moved / (t_combine * 1e-3) / 1e12);
  std::printf("%-30s %10.3f\n", "plan alone", t_plan);
  std::printf("%-30s %10.3f\n", "plan + dispatch + combine", t_step);
  std::printf("dispatch at %.2f of the copy's rate, combine at %.2f\n",
              (moved / t_dispatch) / (2 * copied / t_copy), (moved / t_combine) / (2 * copied / t_copy));
  if (!with_world) return 0;

  // The GPU world: R ranks on device 0, the same routing, token rows and
  // bytes; each rank's token buffers are its part of x, w and out.
  {
    moonep::cuda::GpuWorld world(c, std::vector<int>(static_cast<std::size_t>(R), 0));
    moonep::cuda::GpuWorldLayer wl(world, H, H, moonep::cuda::Element::bf16);
    std::vector<const void*> xr(R), wr(R);
    std::vector<void*> outr(R);
    for (int r = 0; r < R; ++r) {
      xr[r] = static_cast<const char*>(x) + r * S * row;
      wr[r] = static_cast<const char*>(w) + r * S * K * 4;
      outr[r] = static_cast<char*>(out) + r * S * row;
      ok(cudaMemset(wl.y(r), 0x3c, NvS * row), "memset the world's y");
    }
    world.plan(rp, nullptr, stream);
    world.check();
    const cudaGraphExec_t gw_dispatch = capture(stream, [&] { wl.dispatch(xr.data(), wr.data(), stream); });
    const cudaGraphExec_t gw_combine = capture(stream, [&] { wl.combine(outr.data(), true, stream); });
    const cudaGraphExec_t gw_plan = capture(stream, [&] { world.plan(rp, nullptr, stream); });
    const cudaGraphExec_t gw_step = capture(stream, [&] {
      world.plan(rp, nullptr, stream);
      wl.dispatch(xr.data(), wr.data(), stream);
      wl.combine(outr.data(), true, stream);
    });
    const double w_copy = time_graph(g_copy, stream, reps), w_dispatch = time_graph(gw_dispatch, stream, reps),
                 w_combine = time_graph(gw_combine, stream, reps), w_plan = time_graph(gw_plan, stream, reps),
                 w_step = time_graph(gw_step, stream, reps);
    world.check();  // the timed steps planned without error
    std::printf("\nGPU world: %d ranks on device 0 (GpuWorldLayer, symmetric slot buffers)\n", c.ranks);
    std::printf("%-30s %10s %12s %10s\n", "operation (CUDA graph)", "ms", "GB moved", "TB/s");
    std::printf("%-30s %10.3f %12.3f %10.3f\n", "copy D2D (read + write)", w_copy, 2 * copied / 1e9,
                2 * copied / (w_copy * 1e-3) / 1e12);
    std::printf("%-30s %10.3f %12.3f %10.3f\n", "dispatch", w_dispatch, moved / 1e9,
                moved / (w_dispatch * 1e-3) / 1e12);
    std::printf("%-30s %10.3f %12.3f %10.3f\n", "combine (weighted)", w_combine, moved / 1e9,
                moved / (w_combine * 1e-3) / 1e12);
    std::printf("%-30s %10.3f\n", "plan alone", w_plan);
    std::printf("%-30s %10.3f\n", "plan + dispatch + combine", w_step);
    std::printf("dispatch at %.2f of the copy's rate, combine at %.2f\n", (moved / w_dispatch) / (2 * copied / w_copy),
                (moved / w_combine) / (2 * copied / w_copy));
    for (auto e : {gw_dispatch, gw_combine, gw_plan, gw_step}) cudaGraphExecDestroy(e);
  }
  return 0;
}
