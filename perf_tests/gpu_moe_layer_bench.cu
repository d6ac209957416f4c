// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep_gpu_moe_layer_bench: the whole linear MoE layer step of the CUDA
// virtual-rank path (moonep::cuda::VirtualRankMoeLayer, every rank on one
// GPU) at one shape, each part replayed from its own CUDA graph: plan,
// fetch, dispatch, GEMMs (one cuBLAS GEMM per non-empty group), combine;
// the whole step serial, and with the fetch on a second graph branch
// overlapping dispatch (what that saves); and the same layer planned as
// plain EP (every entry to its owner) at each imbalance. See README.md,
// "The MoE layer on the GPU".
//
//   moonep_gpu_moe_layer_bench [--ranks R --experts E --topk K --tokens S
//                               --copy-slots B --token-padding tp
//                               --hidden H --hidden-out H' --reps N
//                               --imbalances 0,1,2 --csv FILE]
// Defaults: the headline (R=8 E=256 K=8 S=4096 B=32 tp=128), H=7168,
// H'=2048, bfloat16, imbalances 0, 1, 2, 10 replays per figure (median of
// 5 rounds).
//
// Plain EP: the planner's buffers hold NvS slots per rank, too few for
// plain EP's busiest rank at imbalance > 0, so plain EP does not run
// through the layer here. On one GPU both plans do the same total work:
// every entry fills exactly one slot in either plan, so dispatch and
// combine move the same rows and plain EP's are taken as MoonEP's
// measured times; plain EP's GEMMs are measured (cuBLAS, one per expert
// with entries, its rows the expert's count rounded up to tp, on buffers of
// their own), and plain EP has no plan and no fetch.
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
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "graph_timing.hpp"
#include "moonep/cuda_moe_layer.hpp"
#include "moonep/cuda_planner.hpp"
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
  std::string plan, part;
  double imbalance, ms;
};

}  // namespace

int main(int argc, char** argv) {
  moonep::Config c{8, 256, 8, 4096, 32, 128};
  int H = 7168, O = 2048, reps = 10;
  std::vector<double> imbalances{0, 1, 2};
  std::string csv_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--ranks") c.ranks = std::atoi(v.c_str());
    else if (a == "--experts") c.experts = std::atoi(v.c_str());
    else if (a == "--topk") c.topk = std::atoi(v.c_str());
    else if (a == "--tokens") c.tokens = std::atoi(v.c_str());
    else if (a == "--copy-slots") c.copy_slots = std::atoi(v.c_str());
    else if (a == "--token-padding") c.token_padding = std::atoi(v.c_str());
    else if (a == "--hidden") H = std::atoi(v.c_str());
    else if (a == "--hidden-out") O = std::atoi(v.c_str());
    else if (a == "--reps") reps = std::atoi(v.c_str());
    else if (a == "--csv") csv_path = v;
    else if (a == "--imbalances") {
      imbalances.clear();
      std::stringstream ss(v);
      std::string item;
      while (std::getline(ss, item, ',')) imbalances.push_back(std::atof(item.c_str()));
    } else {
      std::fprintf(stderr, "moonep_gpu_moe_layer_bench: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const i64 R = c.ranks, S = c.tokens, K = c.topk, E = c.experts, epn = c.experts_per_rank(), tp = c.token_padding,
            B = c.copy_slots, G = c.groups(), Q = static_cast<i64>(H) * O, el = 2;  // bf16
  cudaStream_t s1, s2;
  ok(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), "cudaStreamCreate");
  ok(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t planned, fetched;
  ok(cudaEventCreateWithFlags(&planned, cudaEventDisableTiming), "cudaEventCreate");
  ok(cudaEventCreateWithFlags(&fetched, cudaEventDisableTiming), "cudaEventCreate");

  moonep::cuda::VirtualRankPlanner planner(c);
  moonep::cuda::VirtualRankMoeLayer layer(planner, H, O, moonep::cuda::Element::bf16, /*training=*/false);
  std::vector<std::int32_t*> d_routing(R);
  for (auto& p : d_routing) ok(cudaMalloc(&p, S * K * 4), "cudaMalloc routing");
  const std::int32_t* const* rp = const_cast<const std::int32_t* const*>(d_routing.data());
  void *x, *w, *P, *out;
  ok(cudaMalloc(&x, R * S * H * el), "cudaMalloc x");
  ok(cudaMalloc(&w, R * S * K * 4), "cudaMalloc w");
  ok(cudaMalloc(&P, R * epn * Q * el), "cudaMalloc P");
  ok(cudaMalloc(&out, R * S * O * el), "cudaMalloc out");
  ok(cudaMemset(x, 0x3c, R * S * H * el), "memset x");  // bf16 0x3c3c: about 0.0115
  ok(cudaMemset(P, 0x3c, R * epn * Q * el), "memset P");
  ok(cudaMemset(w, 0, R * S * K * 4), "memset w");
  // Plain EP's GEMM buffers: every entry once, each expert's rows rounded up to tp.
  const i64 ep_rows = R * S * K + E * tp;
  void *ep_in, *ep_out;
  ok(cudaMalloc(&ep_in, ep_rows * H * el), "cudaMalloc plain EP rows");
  ok(cudaMalloc(&ep_out, ep_rows * O * el), "cudaMalloc plain EP outputs");
  ok(cudaMemset(ep_in, 0x3c, ep_rows * H * el), "memset plain EP rows");
  cublasHandle_t blas;
  ok(cublasCreate(&blas), "cublasCreate");
  void* workspace;
  ok(cudaMalloc(&workspace, 32 << 20), "cudaMalloc workspace");
  ok(cublasSetWorkspace(blas, workspace, 32 << 20), "cublasSetWorkspace");
  ok(cublasSetStream(blas, s1), "cublasSetStream");

  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("device: %s\n", prop.name);
  std::printf("shape: R=%d E=%d K=%d S=%d B=%d tp=%d NvS=%lld, H=%d H'=%d bf16 (Q=%lld), %d replays x 5 rounds\n",
              c.ranks, c.experts, c.topk, c.tokens, c.copy_slots, c.token_padding,
              static_cast<long long>(c.slots()), H, O, static_cast<long long>(Q), reps);
  std::vector<Row> rows;
  std::printf("\n%-9s %5s %8s %8s %9s %8s %8s %10s %10s %8s %7s %9s\n", "plan", "imb", "plan", "fetch", "dispatch",
              "GEMMs", "combine", "step", "overlap", "saved", "GEMMs#", "GPU/rank");
  for (double imb : imbalances) {
    const moonep::Routing routing = moonep::synthetic_routing(c, imb, 7);
    for (int r = 0; r < R; ++r)
      ok(cudaMemcpy(d_routing[r], routing[r].data(), S * K * 4, cudaMemcpyHostToDevice), "routing");
    planner.plan(rp, nullptr, s1);
    const moonep::HostPlan plan = planner.copy_out(s1);  // checks the step
    layer.read_groups(s1);  // the GEMMs' sizes for this plan, before capture

    const cudaGraphExec_t g_plan = capture(s1, [&] { planner.plan(rp, nullptr, s1); });
    const cudaGraphExec_t g_fetch = capture(s1, [&] { layer.enqueue_fetch(P, s1); });
    const cudaGraphExec_t g_dispatch = capture(s1, [&] { layer.enqueue_dispatch(x, w, s1); });
    const cudaGraphExec_t g_gemms = capture(s1, [&] { layer.enqueue_gemms(P, s1); });
    const cudaGraphExec_t g_combine = capture(s1, [&] { layer.enqueue_combine(out, s1); });
    const cudaGraphExec_t g_serial = capture(s1, [&] {
      planner.plan(rp, nullptr, s1);
      layer.enqueue_fetch(P, s1);
      layer.enqueue_dispatch(x, w, s1);
      layer.enqueue_gemms(P, s1);
      layer.enqueue_combine(out, s1);
    });
    // The fetch on a second branch: it needs only the plan, the GEMMs need it.
    const cudaGraphExec_t g_overlap = capture(s1, [&] {
      planner.plan(rp, nullptr, s1);
      ok(cudaEventRecord(planned, s1), "cudaEventRecord");
      ok(cudaStreamWaitEvent(s2, planned, 0), "cudaStreamWaitEvent");
      layer.enqueue_fetch(P, s2);
      ok(cudaEventRecord(fetched, s2), "cudaEventRecord");
      layer.enqueue_dispatch(x, w, s1);
      ok(cudaStreamWaitEvent(s1, fetched, 0), "cudaStreamWaitEvent");
      layer.enqueue_gemms(P, s1);
      layer.enqueue_combine(out, s1);
    });
    const double t_plan = time_graph(g_plan, s1, reps), t_fetch = time_graph(g_fetch, s1, reps),
                 t_dispatch = time_graph(g_dispatch, s1, reps), t_gemms = time_graph(g_gemms, s1, reps),
                 t_combine = time_graph(g_combine, s1, reps), t_serial = time_graph(g_serial, s1, reps),
                 t_overlap = time_graph(g_overlap, s1, reps);
    planner.check(s1);  // the timed steps planned without error
    for (cudaGraphExec_t g : {g_plan, g_fetch, g_dispatch, g_gemms, g_combine, g_serial, g_overlap})
      cudaGraphExecDestroy(g);

    // MoonEP's per-rank shares, from the plan.
    std::vector<i64> copies(R, 0), filled(R, 0), gemm_rows(R, 0);
    for (int d = 0; d < R; ++d) {
      const moonep::HostRankPlan& rk = plan.ranks[d];
      for (i64 b = 0; b < B; ++b) copies[d] += rk.experts_to_copy[d * B + b] >= 0 ? 1 : 0;
      for (std::int32_t si : rk.src_info) filled[d] += si >= 0 ? 1 : 0;
      gemm_rows[d] = rk.cu_seqlens[G - 1];
    }
    const double gpu_moonep = t_plan + t_fetch * largest_share(copies) +
                              (t_dispatch + t_combine) * largest_share(filled) + t_gemms * largest_share(gemm_rows);

    // Plain EP: each expert's entries, its GEMM rows rounded up to tp.
    std::vector<i64> count(E, 0), ep_filled(R, 0), ep_rows_of(R, 0);
    for (int r = 0; r < R; ++r)
      for (std::int32_t e : routing[r]) ++count[e];
    const cudaGraphExec_t g_ep = capture(s1, [&] {
      i64 at = 0;
      const float one = 1, zero = 0;
      for (i64 e = 0; e < E; ++e) {
        const i64 n = (count[e] + tp - 1) / tp * tp;
        if (n == 0) continue;
        // Row-major y [n][O] = in [n][H] @ M_e [H][O], as the layer's GEMMs.
        ok(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, O, static_cast<int>(n), H, &one,
                        static_cast<const char*>(P) + e * Q * el, CUDA_R_16BF, O,
                        static_cast<const char*>(ep_in) + at * H * el, CUDA_R_16BF, H, &zero,
                        static_cast<char*>(ep_out) + at * O * el, CUDA_R_16BF, O, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT),
           "cublasGemmEx (plain EP)");
        at += n;
      }
    });
    int ep_gemms = 0;
    for (i64 e = 0; e < E; ++e) {
      ep_filled[e / epn] += count[e];
      ep_rows_of[e / epn] += (count[e] + tp - 1) / tp * tp;
      ep_gemms += count[e] > 0 ? 1 : 0;
    }
    const double t_ep_gemms = time_graph(g_ep, s1, reps);
    cudaGraphExecDestroy(g_ep);
    const double ep_step = t_dispatch + t_ep_gemms + t_combine;
    const double gpu_ep = (t_dispatch + t_combine) * largest_share(ep_filled) + t_ep_gemms * largest_share(ep_rows_of);

    std::printf("%-9s %5.1f %8.3f %8.3f %9.3f %8.3f %8.3f %10.3f %10.3f %8.3f %7d %9.3f\n", "MoonEP", imb, t_plan,
                t_fetch, t_dispatch, t_gemms, t_combine, t_serial, t_overlap, t_serial - t_overlap,
                layer.gemm_count(), gpu_moonep);
    std::printf("%-9s %5.1f %8s %8s %9.3f %8.3f %8.3f %10.3f %10s %8s %7d %9.3f\n", "plain EP", imb, "-", "-",
                t_dispatch, t_ep_gemms, t_combine, ep_step, "-", "-", ep_gemms, gpu_ep);
    const auto mx = [](const std::vector<i64>& v) { return *std::max_element(v.begin(), v.end()); };
    std::printf("%-9s %5s largest rank: MoonEP %lld GEMM rows (%lld filled, %lld copies), plain EP %lld GEMM rows "
                "(%lld filled)\n",
                "", "", static_cast<long long>(mx(gemm_rows)), static_cast<long long>(mx(filled)),
                static_cast<long long>(mx(copies)), static_cast<long long>(mx(ep_rows_of)),
                static_cast<long long>(mx(ep_filled)));
    for (const auto& [part, ms] : std::vector<std::pair<const char*, double>>{
             {"plan", t_plan}, {"fetch", t_fetch}, {"dispatch", t_dispatch}, {"gemms", t_gemms},
             {"combine", t_combine}, {"step_serial", t_serial}, {"step_overlap", t_overlap},
             {"gpu_per_rank_model", gpu_moonep}})
      rows.push_back({"moonep", part, imb, ms});
    for (const auto& [part, ms] : std::vector<std::pair<const char*, double>>{
             {"dispatch", t_dispatch}, {"gemms", t_ep_gemms}, {"combine", t_combine}, {"step_serial", ep_step},
             {"gpu_per_rank_model", gpu_ep}})
      rows.push_back({"plain_ep", part, imb, ms});
  }
  std::printf("\nms per step, one GPU, each part replayed from its own CUDA graph (median of 5 rounds).\n"
              "step: plan + fetch + dispatch + GEMMs + combine in one graph; overlap: the same with the fetch on a\n"
              "second graph branch beside dispatch; saved = step - overlap. plain EP: dispatch and combine are\n"
              "MoonEP's (the same rows: every entry one slot), GEMMs measured with plain EP's groups.\n"
              "GPU/rank: the model t_plan + t_fetch*C_max/C_sum + (t_dispatch+t_combine)*F_max/F_sum +\n"
              "t_GEMMs*L_max/L_sum (C copies, F filled slots, L GEMM rows per rank; no NVLink time).\n");

  std::ostringstream csv;
  csv << "machine,git_revision,R,E,K,S,B,tp,H,H_out,dtype,plan,imbalance,part,ms\n";
  for (const Row& r : rows)
    csv << '"' << prop.name << "\"," << MOONEP_GIT_REVISION << ',' << c.ranks << ',' << c.experts << ',' << c.topk
        << ',' << c.tokens << ',' << c.copy_slots << ',' << c.token_padding << ',' << H << ',' << O << ",bf16,"
        << r.plan << ',' << r.imbalance << ',' << r.part << ',' << r.ms << '\n';
  std::printf("\n%s", csv.str().c_str());
  if (!csv_path.empty()) std::ofstream(csv_path) << csv.str();
  return 0;
}
