// moonep_gpu_bench — time per planning step of moonep::cuda::Planner with R
// virtual ranks on one GPU, measured with CUDA events over many back-to-back
// steps, and again replayed from a CUDA graph. The floor, in the same run,
// is an empty cooperative launch of the same grid (same blocks, threads and
// shared memory). Every configuration is first checked against the
// reference planner. Usage: moonep_gpu_bench [steps] (default 500).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "moonep/cuda_planner.hpp"
#include "moonep/error.hpp"
#include "moonep/reference.hpp"
#include "moonep/synthetic.hpp"

namespace {

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "CUDA error in %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

template <class F>
double time_us(cudaStream_t s, int steps, F&& launch) {
  cudaEvent_t a, b;
  ok(cudaEventCreate(&a), "event");
  ok(cudaEventCreate(&b), "event");
  ok(cudaEventRecord(a, s), "record");
  for (int i = 0; i < steps; ++i) launch();
  ok(cudaEventRecord(b, s), "record");
  ok(cudaEventSynchronize(b), "sync");
  float ms = 0;
  ok(cudaEventElapsedTime(&ms, a, b), "elapsed");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return 1000.0 * ms / steps;
}

// Captures `per_graph` launches into one graph; returns us per launch when
// replayed `replays` times, or a negative value if capture is unsupported.
template <class F>
double graph_us(cudaStream_t s, int per_graph, int replays, F&& launch) {
  cudaGraph_t graph;
  if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return -1;
  for (int i = 0; i < per_graph; ++i) launch();
  if (cudaStreamEndCapture(s, &graph) != cudaSuccess) { cudaGetLastError(); return -1; }
  cudaGraphExec_t exec;
  if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) { cudaGetLastError(); return -1; }
  ok(cudaGraphLaunch(exec, s), "graph warmup");
  ok(cudaStreamSynchronize(s), "graph warmup");
  const double us = time_us(s, replays, [&] { ok(cudaGraphLaunch(exec, s), "graph launch"); }) / per_graph;
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return us;
}

struct Row {
  std::string config;
  int bpr = 0;
  bool correct = false;
  double step = 0, step_graph = 0, floor = 0, floor_graph = 0;
};

Row bench(const moonep::Config& c, int steps) {
  Row row;
  row.config = moonep::describe(c);
  cudaStream_t s;
  ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  moonep::cuda::Planner planner(c);
  row.bpr = planner.blocks_per_rank();
  const moonep::Routing routing = moonep::synthetic_routing(c, 1.0, 42);
  std::vector<int32_t*> d(c.ranks);
  for (int r = 0; r < c.ranks; ++r) {
    ok(cudaMalloc(reinterpret_cast<void**>(&d[r]), routing[r].size() * 4), "malloc");
    ok(cudaMemcpy(d[r], routing[r].data(), routing[r].size() * 4, cudaMemcpyHostToDevice), "copy");
  }
  const int32_t* const* topk = d.data();
  planner.plan(topk, nullptr, s);
  row.correct = moonep::plan_difference(planner.copy_out(s), moonep::plan_reference(c, routing)).empty();

  auto step = [&] { planner.plan(topk, nullptr, s); };
  auto empty = [&] { planner.launch_empty(s); };
  for (int i = 0; i < 50; ++i) step();
  ok(cudaStreamSynchronize(s), "warmup");
  row.step = time_us(s, steps, step);
  row.floor = time_us(s, steps, empty);
  row.step_graph = graph_us(s, 50, std::max(1, steps / 50), step);
  row.floor_graph = graph_us(s, 50, std::max(1, steps / 50), empty);
  planner.check(s);  // no error in any timed step
  // The plan after all the timed steps is still the reference plan.
  row.correct = row.correct &&
                moonep::plan_difference(planner.copy_out(s), moonep::plan_reference(c, routing)).empty();
  for (auto* p : d) cudaFree(p);
  cudaStreamDestroy(s);
  return row;
}

moonep::Config config(int R, int E, int K, int S, int B, int tp) {
  moonep::Config c;
  c.ranks = R;
  c.experts = E;
  c.topk = K;
  c.tokens = S;
  c.copy_slots = B;
  c.token_padding = tp;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 500;
  std::string why;
  if (!moonep::cuda::device_available(&why)) {
    std::fprintf(stderr, "moonep_gpu_bench: %s\n", why.c_str());
    return 77;
  }
  cudaDeviceProp prop{};
  int dev = 0;
  ok(cudaGetDevice(&dev), "device");
  ok(cudaGetDeviceProperties(&prop, dev), "props");
  std::printf("device: %s, %d SMs; routing: synthetic lognormal, imbalance 1.0; %d steps\n", prop.name,
              prop.multiProcessorCount, steps);
  const std::vector<moonep::Config> configs = {
      config(8, 256, 8, 4096, 32, 128),   // headline
      config(8, 256, 8, 8192, 32, 128),
      config(8, 1024, 8, 4096, 32, 128),
      config(16, 256, 8, 4096, 32, 128),
      config(4, 256, 8, 4096, 32, 128),
  };
  std::vector<Row> rows;
  try {
    for (const auto& c : configs) rows.push_back(bench(c, steps));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moonep_gpu_bench: %s\n", e.what());
    return 1;
  }
  std::printf("\n%-34s %4s %7s %10s %10s %10s %10s %8s %8s\n", "config", "bpr", "correct", "step_us",
              "graph_us", "floor_us", "floorg_us", "x_floor", "goal");
  bool all_ok = true;
  for (const auto& r : rows) {
    const double best = r.step_graph > 0 ? std::min(r.step, r.step_graph) : r.step;
    const double fl = r.floor_graph > 0 ? std::min(r.floor, r.floor_graph) : r.floor;
    const bool head = r.config.rfind("R=8 E=256 K=8 S=4096 ", 0) == 0;
    const bool goal = best <= 15.0 && best <= 3.0 * fl;
    std::printf("%-34s %4d %7s %10.2f %10.2f %10.2f %10.2f %8.2f %8s\n", r.config.c_str(), r.bpr,
                r.correct ? "yes" : "NO", r.step, r.step_graph, r.floor, r.floor_graph, best / fl,
                head ? (goal ? "met" : "missed") : "-");
    all_ok = all_ok && r.correct;
  }
  return all_ok ? 0 : 1;
}
