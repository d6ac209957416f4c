// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep_gpu_moe_layer_bench: the whole linear MoE layer step at one shape,
// each part replayed from its own CUDA graph: plan, fetch, dispatch, GEMMs
// (one cuBLAS GEMM per non-empty group), combine; the whole step serial,
// and with the fetch on a second graph branch overlapping dispatch (what
// that saves); and the same layer planned as plain EP (every entry to its
// owner) at each imbalance. Two sections, the same table: the CUDA
// virtual-rank path (moonep::cuda::VirtualRankMoeLayer, every rank on one
// GPU, one stream), then a GPU world of R ranks all on device 0
// (moonep::cuda::GpuWorld + moonep::cuda::GpuWorldMoeLayer: each rank its
// own symmetric chunks, stream and cuBLAS handle; the fetch loads from the
// owners' chunks on the copies' own rank streams); --world 0 leaves the
// second out. See README.md, "The MoE layer on the GPU".
//
//   moonep_gpu_moe_layer_bench [--ranks R --experts E --topk K --tokens S
//                               --copy-slots B --token-padding tp
//                               --hidden H --hidden-out H' --reps N
//                               --imbalances 0,1,2 --world 0|1 --csv FILE]
// Defaults: the headline (R=8 E=256 K=8 S=4096 B=32 tp=128), H=7168,
// H'=2048, bfloat16, imbalances 0, 1, 2, 10 replays per figure (median of
// 5 rounds).
//
// Plain EP: the planner's buffers hold NvS slots per rank, too few for
// plain EP's busiest rank at imbalance > 0, so plain EP does not run
// through the layer here. On one GPU both plans do the same total work:
// every entry fills exactly one slot in either plan, so dispatch and
// combine move the same rows and plain EP's are taken as MoonEP's
// measured times (of the same section); plain EP's GEMMs are measured
// (cuBLAS, one per expert with entries, its rows the expert's count
// rounded up to tp, on buffers of their own; in the GPU world's section
// each owner's GEMMs on its rank's stream with its own handle, as the
// layer runs them), and plain EP has no plan and no fetch.
//
// One GPU per rank (a model, not a measurement): each part's one-GPU time
// is split over the ranks in proportion to the rows it handles for each
// rank, and a GPU per rank waits for its largest share:
//   t_gpu = t_plan + t_fetch * C_max/C_sum + (t_dispatch + t_combine) * F_max/F_sum
//           + t_gemms * L_max/L_sum
// with C_d the copies rank d fetches, F_d its filled slots (rows it
// receives and sends back), L_d its GEMM rows (cu_seqlens[E+B-1], padding
// included). It leaves out the links between GPUs (NVLink time), so it is
// the compute side of the step only.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "graph_timing.hpp"
#include "moonep/cuda_moe_layer.hpp"
#include "moonep/cuda_planner.hpp"
#include "moonep/gpu_world.hpp"
#include "moonep/gpu_world_moe_layer.hpp"
#include "moonep/synthetic.hpp"

#ifndef MOONEP_GIT_REVISION
#define MOONEP_GIT_REVISION "unknown"
#endif

namespace {

using i64 = std::int64_t;

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "moonep_gpu_moe_layer_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}
void ok(cublasStatus_t e, const char* what) {
  if (e != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "moonep_gpu_moe_layer_bench: %s: cuBLAS status %d\n", what, static_cast<int>(e));
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

// max/sum of per-rank shares (1/R when all are 0).
double largest_share(const std::vector<i64>& v) {
  i64 mx = 0, sum = 0;
  for (i64 x : v) mx = std::max(mx, x), sum += x;
  return sum > 0 ? static_cast<double>(mx) / static_cast<double>(sum) : 1.0 / static_cast<double>(v.size());
}

struct Row {
  std::string world, plan, part;
  double imbalance, ms;
};

// What every section shares: the shape, the streams and events, the
// routing on the device, the token rows, the experts and plain EP's GEMM
// buffers (rank-major on device 0; a GPU world's ranks take their parts).
struct Setup {
  moonep::Config c;
  int H = 0, O = 0, reps = 0;
  std::vector<double> imbalances;
  i64 R = 0, S = 0, K = 0, E = 0, epn = 0, tp = 0, B = 0, G = 0, Q = 0, el = 2;  // bf16
  cudaStream_t s1 = nullptr, s2 = nullptr;
  cudaEvent_t planned = nullptr, fetched = nullptr;
  std::vector<std::int32_t*> d_routing;
  void *x = nullptr, *w = nullptr, *P = nullptr, *out = nullptr, *ep_in = nullptr, *ep_out = nullptr;
  const std::int32_t* const* rp() const { return const_cast<const std::int32_t* const*>(d_routing.data()); }
};

// One section's parts at one imbalance (ms).
struct Parts {
  double plan, fetch, dispatch, gemms, combine, serial, overlap;
  int gemm_count;
};

// A cuBLAS handle with its own 32 MiB workspace (one per stream that runs
// GEMMs at the same time as another).
struct Blas {
  cublasHandle_t h = nullptr;
  void* workspace = nullptr;
  Blas() {
    ok(cublasCreate(&h), "cublasCreate");
    ok(cudaMalloc(&workspace, 32 << 20), "cudaMalloc workspace");
    ok(cublasSetWorkspace(h, workspace, 32 << 20), "cublasSetWorkspace");
  }
  ~Blas() {
    cublasDestroy(h);
    cudaFree(workspace);
  }
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
};

// Plain EP's GEMMs replayed from a graph on s1: one per expert with
// entries, its rows the count rounded up to tp; expert e's on streams[e
// div epn] with blas[e div epn] (streams other than s1 forked from s1 and
// joined back). Returns ms per replay.
double time_ep_gemms(const Setup& s, const std::vector<i64>& count, const std::vector<cublasHandle_t>& blas,
                     const std::vector<cudaStream_t>& streams, const std::vector<cudaEvent_t>& done) {
  const cudaGraphExec_t g = capture(s.s1, [&] {
    ok(cudaEventRecord(s.planned, s.s1), "cudaEventRecord");
    for (cudaStream_t st : streams)
      if (st != s.s1) ok(cudaStreamWaitEvent(st, s.planned, 0), "cudaStreamWaitEvent");
    i64 at = 0;
    const float one = 1, zero = 0;
    for (i64 e = 0; e < s.E; ++e) {
      const i64 n = (count[e] + s.tp - 1) / s.tp * s.tp;
      if (n == 0) continue;
      const std::size_t r = static_cast<std::size_t>(e / s.epn);
      ok(cublasSetStream(blas[r], streams[r]), "cublasSetStream");
      // Row-major y [n][O] = in [n][H] @ M_e [H][O], as the layer's GEMMs.
      ok(cublasGemmEx(blas[r], CUBLAS_OP_N, CUBLAS_OP_N, s.O, static_cast<int>(n), s.H, &one,
                      static_cast<const char*>(s.P) + e * s.Q * s.el, CUDA_R_16BF, s.O,
                      static_cast<const char*>(s.ep_in) + at * s.H * s.el, CUDA_R_16BF, s.H, &zero,
                      static_cast<char*>(s.ep_out) + at * s.O * s.el, CUDA_R_16BF, s.O, CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT),
         "cublasGemmEx (plain EP)");
      at += n;
    }
    for (std::size_t r = 0; r < streams.size(); ++r) {
      if (streams[r] == s.s1) continue;
      ok(cudaEventRecord(done[r], streams[r]), "cudaEventRecord");
      ok(cudaStreamWaitEvent(s.s1, done[r], 0), "cudaStreamWaitEvent");
    }
  });
  const double t = time_graph(g, s.s1, s.reps);
  cudaGraphExecDestroy(g);
  return t;
}

// The rows of one section at one imbalance: MoonEP's measured parts and
// model, plain EP's (its GEMMs measured here), the largest ranks' line;
// the CSV rows.
void report(const Setup& s, const char* world, double imb, const Parts& m, const moonep::HostPlan& plan,
            const moonep::Routing& routing, const std::vector<cublasHandle_t>& blas,
            const std::vector<cudaStream_t>& streams, const std::vector<cudaEvent_t>& done, std::vector<Row>& rows) {
  const i64 R = s.R, B = s.B, G = s.G, E = s.E, epn = s.epn, tp = s.tp;
  // MoonEP's per-rank shares, from the plan.
  std::vector<i64> copies(R, 0), filled(R, 0), gemm_rows(R, 0);
  for (int d = 0; d < R; ++d) {
    const moonep::HostRankPlan& rk = plan.ranks[d];
    for (i64 b = 0; b < B; ++b) copies[d] += rk.experts_to_copy[d * B + b] >= 0 ? 1 : 0;
    for (std::int32_t si : rk.src_info) filled[d] += si >= 0 ? 1 : 0;
    gemm_rows[d] = rk.cu_seqlens[G - 1];
  }
  const double gpu_moonep = m.plan + m.fetch * largest_share(copies) + (m.dispatch + m.combine) * largest_share(filled) +
                            m.gemms * largest_share(gemm_rows);

  // Plain EP: each expert's entries, its GEMM rows rounded up to tp.
  std::vector<i64> count(E, 0), ep_filled(R, 0), ep_rows_of(R, 0);
  for (int r = 0; r < R; ++r)
    for (std::int32_t e : routing[r]) ++count[e];
  int ep_gemms = 0;
  for (i64 e = 0; e < E; ++e) {
    ep_filled[e / epn] += count[e];
    ep_rows_of[e / epn] += (count[e] + tp - 1) / tp * tp;
    ep_gemms += count[e] > 0 ? 1 : 0;
  }
  const double t_ep_gemms = time_ep_gemms(s, count, blas, streams, done);
  const double ep_step = m.dispatch + t_ep_gemms + m.combine;
  const double gpu_ep = (m.dispatch + m.combine) * largest_share(ep_filled) + t_ep_gemms * largest_share(ep_rows_of);

  std::printf("%-9s %5.1f %8.3f %8.3f %9.3f %8.3f %8.3f %10.3f %10.3f %8.3f %7d %9.3f\n", "MoonEP", imb, m.plan,
              m.fetch, m.dispatch, m.gemms, m.combine, m.serial, m.overlap, m.serial - m.overlap, m.gemm_count,
              gpu_moonep);
  std::printf("%-9s %5.1f %8s %8s %9.3f %8.3f %8.3f %10.3f %10s %8s %7d %9.3f\n", "plain EP", imb, "-", "-",
              m.dispatch, t_ep_gemms, m.combine, ep_step, "-", "-", ep_gemms, gpu_ep);
  const auto mx = [](const std::vector<i64>& v) { return *std::max_element(v.begin(), v.end()); };
  std::printf("%-9s %5s largest rank: MoonEP %lld GEMM rows (%lld filled, %lld copies), plain EP %lld GEMM rows "
              "(%lld filled)\n",
              "", "", static_cast<long long>(mx(gemm_rows)), static_cast<long long>(mx(filled)),
              static_cast<long long>(mx(copies)), static_cast<long long>(mx(ep_rows_of)),
              static_cast<long long>(mx(ep_filled)));
  for (const auto& [part, ms] : std::vector<std::pair<const char*, double>>{
           {"plan", m.plan}, {"fetch", m.fetch}, {"dispatch", m.dispatch}, {"gemms", m.gemms},
           {"combine", m.combine}, {"step_serial", m.serial}, {"step_overlap", m.overlap},
           {"gpu_per_rank_model", gpu_moonep}})
    rows.push_back({world, "moonep", part, imb, ms});
  for (const auto& [part, ms] : std::vector<std::pair<const char*, double>>{
           {"dispatch", m.dispatch}, {"gemms", t_ep_gemms}, {"combine", m.combine}, {"step_serial", ep_step},
           {"gpu_per_rank_model", gpu_ep}})
    rows.push_back({world, "plain_ep", part, imb, ms});
}

void print_header() {
  std::printf("%-9s %5s %8s %8s %9s %8s %8s %10s %10s %8s %7s %9s\n", "plan", "imb", "plan", "fetch", "dispatch",
              "GEMMs", "combine", "step", "overlap", "saved", "GEMMs#", "GPU/rank");
}

// Writes each rank's routing at imbalance `imb` to the device.
moonep::Routing set_routing(const Setup& s, double imb) {
  const moonep::Routing routing = moonep::synthetic_routing(s.c, imb, 7);
  for (int r = 0; r < s.R; ++r)
    ok(cudaMemcpy(s.d_routing[r], routing[r].data(), s.S * s.K * 4, cudaMemcpyHostToDevice), "routing");
  return routing;
}

// The virtual ranks: one VirtualRankPlanner and VirtualRankMoeLayer.
void virtual_ranks(const Setup& s, std::vector<Row>& rows) {
  moonep::cuda::VirtualRankPlanner planner(s.c);
  moonep::cuda::VirtualRankMoeLayer layer(planner, s.H, s.O, moonep::cuda::Element::bf16, /*training=*/false);
  Blas blas;
  const std::vector<cublasHandle_t> handles(s.R, blas.h);
  const std::vector<cudaStream_t> streams(s.R, s.s1);
  const std::vector<cudaEvent_t> done(s.R, nullptr);
  cudaStream_t s1 = s.s1, s2 = s.s2;
  const auto rp = s.rp();
  std::printf("\nvirtual ranks: %lld on this GPU (VirtualRankMoeLayer, one stream)\n", static_cast<long long>(s.R));
  print_header();
  for (double imb : s.imbalances) {
    const moonep::Routing routing = set_routing(s, imb);
    planner.plan(rp, nullptr, s1);
    const moonep::HostPlan plan = planner.copy_out(s1);  // checks the step
    layer.read_groups(s1);  // the GEMMs' sizes for this plan, before capture

    const cudaGraphExec_t g_plan = capture(s1, [&] { planner.plan(rp, nullptr, s1); });
    const cudaGraphExec_t g_fetch = capture(s1, [&] { layer.enqueue_fetch(s.P, s1); });
    const cudaGraphExec_t g_dispatch = capture(s1, [&] { layer.enqueue_dispatch(s.x, s.w, s1); });
    const cudaGraphExec_t g_gemms = capture(s1, [&] { layer.enqueue_gemms(s.P, s1); });
    const cudaGraphExec_t g_combine = capture(s1, [&] { layer.enqueue_combine(s.out, s1); });
    const cudaGraphExec_t g_serial = capture(s1, [&] {
      planner.plan(rp, nullptr, s1);
      layer.enqueue_fetch(s.P, s1);
      layer.enqueue_dispatch(s.x, s.w, s1);
      layer.enqueue_gemms(s.P, s1);
      layer.enqueue_combine(s.out, s1);
    });
    // The fetch on a second branch: it needs only the plan, the GEMMs need it.
    const cudaGraphExec_t g_overlap = capture(s1, [&] {
      planner.plan(rp, nullptr, s1);
      ok(cudaEventRecord(s.planned, s1), "cudaEventRecord");
      ok(cudaStreamWaitEvent(s2, s.planned, 0), "cudaStreamWaitEvent");
      layer.enqueue_fetch(s.P, s2);
      ok(cudaEventRecord(s.fetched, s2), "cudaEventRecord");
      layer.enqueue_dispatch(s.x, s.w, s1);
      ok(cudaStreamWaitEvent(s1, s.fetched, 0), "cudaStreamWaitEvent");
      layer.enqueue_gemms(s.P, s1);
      layer.enqueue_combine(s.out, s1);
    });
    Parts m{};
    m.plan = time_graph(g_plan, s1, s.reps), m.fetch = time_graph(g_fetch, s1, s.reps);
    m.dispatch = time_graph(g_dispatch, s1, s.reps), m.gemms = time_graph(g_gemms, s1, s.reps);
    m.combine = time_graph(g_combine, s1, s.reps), m.serial = time_graph(g_serial, s1, s.reps);
    m.overlap = time_graph(g_overlap, s1, s.reps);
    m.gemm_count = layer.gemm_count();
    planner.check(s1);  // the timed steps planned without error
    for (cudaGraphExec_t g : {g_plan, g_fetch, g_dispatch, g_gemms, g_combine, g_serial, g_overlap})
      cudaGraphExecDestroy(g);
    report(s, "virtual_ranks", imb, m, plan, routing, handles, streams, done, rows);
  }
}

// The GPU world: R ranks on device 0, each rank's token buffers its part of
// x, w and out, its experts copied into its symmetric chunk.
void gpu_world(const Setup& s, std::vector<Row>& rows) {
  const int R = static_cast<int>(s.R);
  moonep::cuda::GpuWorld world(s.c, std::vector<int>(static_cast<std::size_t>(R), 0));
  moonep::cuda::GpuWorldMoeLayer layer(world, s.H, s.O, moonep::cuda::Element::bf16, /*training=*/false);
  std::vector<const void*> xr(R), wr(R);
  std::vector<void*> outr(R);
  for (int r = 0; r < R; ++r) {
    xr[r] = static_cast<const char*>(s.x) + r * s.S * s.H * s.el;
    wr[r] = static_cast<const char*>(s.w) + r * s.S * s.K * 4;
    outr[r] = static_cast<char*>(s.out) + r * s.S * s.O * s.el;
    ok(cudaMemcpy(layer.experts(r), static_cast<const char*>(s.P) + r * s.epn * s.Q * s.el, s.epn * s.Q * s.el,
                  cudaMemcpyDeviceToDevice),
       "copying a rank's experts into the world");
  }
  // Plain EP's GEMMs as the world runs them: each owner's on its rank's
  // stream with a handle of its own.
  std::vector<std::unique_ptr<Blas>> blas;
  std::vector<cublasHandle_t> handles;
  std::vector<cudaStream_t> streams;
  std::vector<cudaEvent_t> done(static_cast<std::size_t>(R));
  for (int r = 0; r < R; ++r) {
    blas.push_back(std::make_unique<Blas>());
    handles.push_back(blas.back()->h);
    streams.push_back(world.stream(r));
    ok(cudaEventCreateWithFlags(&done[r], cudaEventDisableTiming), "cudaEventCreate");
  }
  cudaStream_t s1 = s.s1, s2 = s.s2;
  const auto rp = s.rp();
  std::printf("\nGPU world: %d ranks on device 0 (GpuWorldMoeLayer: symmetric chunks, a stream and a cuBLAS "
              "handle per rank)\n",
              R);
  print_header();
  for (double imb : s.imbalances) {
    const moonep::Routing routing = set_routing(s, imb);
    world.plan(rp, nullptr, s1);
    const moonep::HostPlan plan = world.copy_out();  // checks the step
    layer.read_groups(s1);  // the GEMMs' sizes for this plan, before capture

    const cudaGraphExec_t g_plan = capture(s1, [&] { world.plan(rp, nullptr, s1); });
    const cudaGraphExec_t g_fetch = capture(s1, [&] { layer.enqueue_fetch(s1); });
    const cudaGraphExec_t g_dispatch = capture(s1, [&] { layer.enqueue_dispatch(xr.data(), wr.data(), s1); });
    const cudaGraphExec_t g_gemms = capture(s1, [&] { layer.enqueue_gemms(s1); });
    const cudaGraphExec_t g_combine = capture(s1, [&] { layer.enqueue_combine(outr.data(), s1); });
    const cudaGraphExec_t g_serial = capture(s1, [&] {
      world.plan(rp, nullptr, s1);
      layer.enqueue_fetch(s1);
      layer.enqueue_dispatch(xr.data(), wr.data(), s1);
      layer.enqueue_gemms(s1);
      layer.enqueue_combine(outr.data(), s1);
    });
    // The fetch on its own origin after the plan (the copies' own rank
    // streams), beside the dispatch; the GEMMs wait for both.
    const cudaGraphExec_t g_overlap = capture(s1, [&] {
      world.plan(rp, nullptr, s1);
      ok(cudaEventRecord(s.planned, s1), "cudaEventRecord");
      ok(cudaStreamWaitEvent(s2, s.planned, 0), "cudaStreamWaitEvent");
      layer.enqueue_fetch(s2);
      ok(cudaEventRecord(s.fetched, s2), "cudaEventRecord");
      layer.enqueue_dispatch(xr.data(), wr.data(), s1);
      ok(cudaStreamWaitEvent(s1, s.fetched, 0), "cudaStreamWaitEvent");
      layer.enqueue_gemms(s1);
      layer.enqueue_combine(outr.data(), s1);
    });
    Parts m{};
    m.plan = time_graph(g_plan, s1, s.reps), m.fetch = time_graph(g_fetch, s1, s.reps);
    m.dispatch = time_graph(g_dispatch, s1, s.reps), m.gemms = time_graph(g_gemms, s1, s.reps);
    m.combine = time_graph(g_combine, s1, s.reps), m.serial = time_graph(g_serial, s1, s.reps);
    m.overlap = time_graph(g_overlap, s1, s.reps);
    m.gemm_count = layer.gemm_count();
    world.check();  // the timed steps planned without error
    for (cudaGraphExec_t g : {g_plan, g_fetch, g_dispatch, g_gemms, g_combine, g_serial, g_overlap})
      cudaGraphExecDestroy(g);
    report(s, "gpu_world", imb, m, plan, routing, handles, streams, done, rows);
  }
  ok(cudaStreamSynchronize(s1), "finishing the GPU world's section");
  for (cudaEvent_t e : done) cudaEventDestroy(e);
}

}  // namespace

int main(int argc, char** argv) {
  Setup s;
  s.c = moonep::Config{8, 256, 8, 4096, 32, 128};
  s.H = 7168, s.O = 2048, s.reps = 10;
  s.imbalances = {0, 1, 2};
  bool with_world = true;
  std::string csv_path;
  moonep::Config& c = s.c;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--ranks") c.ranks = std::atoi(v.c_str());
    else if (a == "--experts") c.experts = std::atoi(v.c_str());
    else if (a == "--topk") c.topk = std::atoi(v.c_str());
    else if (a == "--tokens") c.tokens = std::atoi(v.c_str());
    else if (a == "--copy-slots") c.copy_slots = std::atoi(v.c_str());
    else if (a == "--token-padding") c.token_padding = std::atoi(v.c_str());
    else if (a == "--hidden") s.H = std::atoi(v.c_str());
    else if (a == "--hidden-out") s.O = std::atoi(v.c_str());
    else if (a == "--reps") s.reps = std::atoi(v.c_str());
    else if (a == "--world") with_world = v != "0";
    else if (a == "--csv") csv_path = v;
    else if (a == "--imbalances") {
      s.imbalances.clear();
      std::stringstream ss(v);
      std::string item;
      while (std::getline(ss, item, ',')) s.imbalances.push_back(std::atof(item.c_str()));
    } else {
      std::fprintf(stderr, "moonep_gpu_moe_layer_bench: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  s.R = c.ranks, s.S = c.tokens, s.K = c.topk, s.E = c.experts, s.epn = c.experts_per_rank(), s.tp = c.token_padding;
  s.B = c.copy_slots, s.G = c.groups(), s.Q = static_cast<i64>(s.H) * s.O;
  const i64 R = s.R, S = s.S, K = s.K, E = s.E, epn = s.epn, tp = s.tp, Q = s.Q, el = s.el, H = s.H, O = s.O;
  ok(cudaStreamCreateWithFlags(&s.s1, cudaStreamNonBlocking), "cudaStreamCreate");
  ok(cudaStreamCreateWithFlags(&s.s2, cudaStreamNonBlocking), "cudaStreamCreate");
  ok(cudaEventCreateWithFlags(&s.planned, cudaEventDisableTiming), "cudaEventCreate");
  ok(cudaEventCreateWithFlags(&s.fetched, cudaEventDisableTiming), "cudaEventCreate");
  s.d_routing.resize(static_cast<std::size_t>(R));
  for (auto& p : s.d_routing) ok(cudaMalloc(&p, S * K * 4), "cudaMalloc routing");
  ok(cudaMalloc(&s.x, R * S * H * el), "cudaMalloc x");
  ok(cudaMalloc(&s.w, R * S * K * 4), "cudaMalloc w");
  ok(cudaMalloc(&s.P, R * epn * Q * el), "cudaMalloc P");
  ok(cudaMalloc(&s.out, R * S * O * el), "cudaMalloc out");
  ok(cudaMemset(s.x, 0x3c, R * S * H * el), "memset x");  // bf16 0x3c3c: about 0.0115
  ok(cudaMemset(s.P, 0x3c, R * epn * Q * el), "memset P");
  ok(cudaMemset(s.w, 0, R * S * K * 4), "memset w");
  // Plain EP's GEMM buffers: every entry once, each expert's rows rounded up to tp.
  const i64 ep_rows = R * S * K + E * tp;
  ok(cudaMalloc(&s.ep_in, ep_rows * H * el), "cudaMalloc plain EP rows");
  ok(cudaMalloc(&s.ep_out, ep_rows * O * el), "cudaMalloc plain EP outputs");
  ok(cudaMemset(s.ep_in, 0x3c, ep_rows * H * el), "memset plain EP rows");

  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("device: %s\n", prop.name);
  std::printf("shape: R=%d E=%d K=%d S=%d B=%d tp=%d NvS=%lld, H=%d H'=%d bf16 (Q=%lld), %d replays x 5 rounds\n",
              c.ranks, c.experts, c.topk, c.tokens, c.copy_slots, c.token_padding,
              static_cast<long long>(c.slots()), s.H, s.O, static_cast<long long>(Q), s.reps);
  std::vector<Row> rows;
  virtual_ranks(s, rows);
  if (with_world) gpu_world(s, rows);
  std::printf("\nms per step, one GPU, each part replayed from its own CUDA graph (median of 5 rounds).\n"
              "step: plan + fetch + dispatch + GEMMs + combine in one graph; overlap: the same with the fetch on a\n"
              "second graph branch beside dispatch; saved = step - overlap. plain EP: dispatch and combine are\n"
              "MoonEP's (the same rows: every entry one slot), GEMMs measured with plain EP's groups.\n"
              "GPU/rank: the model t_plan + t_fetch*C_max/C_sum + (t_dispatch+t_combine)*F_max/F_sum +\n"
              "t_GEMMs*L_max/L_sum (C copies, F filled slots, L GEMM rows per rank; no NVLink time).\n");

  std::ostringstream csv;
  csv << "machine,git_revision,R,E,K,S,B,tp,H,H_out,dtype,world,plan,imbalance,part,ms\n";
  for (const Row& r : rows)
    csv << '"' << prop.name << "\"," << MOONEP_GIT_REVISION << ',' << c.ranks << ',' << c.experts << ',' << c.topk
        << ',' << c.tokens << ',' << c.copy_slots << ',' << c.token_padding << ',' << s.H << ',' << s.O << ",bf16,"
        << r.world << ',' << r.plan << ',' << r.imbalance << ',' << r.part << ',' << r.ms << '\n';
  std::printf("\n%s", csv.str().c_str());
  if (!csv_path.empty()) std::ofstream(csv_path) << csv.str();
  return 0;
}
