// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// What the GPU layer benches share, each given the bench's own `ok(error,
// what)` (which ends the bench on a CUDA error): a stream's work captured
// into an instantiated graph, and a graph's time per replay, the median of 5 rounds of `reps`
// replays timed with CUDA events after one warm-up replay.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

namespace moonep::bench {

template <class Ok, class F>
cudaGraphExec_t capture(const Ok& ok, cudaStream_t stream, F&& body) {
  cudaGraph_t g;
  ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  body();
  ok(cudaStreamEndCapture(stream, &g), "cudaStreamEndCapture");
  cudaGraphExec_t e;
  ok(cudaGraphInstantiate(&e, g, 0), "cudaGraphInstantiate");
  cudaGraphDestroy(g);
  return e;
}

template <class Ok>
double time_graph(const Ok& ok, cudaGraphExec_t graph, cudaStream_t stream, int reps) {
  cudaEvent_t a, b;
  ok(cudaEventCreate(&a), "cudaEventCreate");
  ok(cudaEventCreate(&b), "cudaEventCreate");
  ok(cudaGraphLaunch(graph, stream), "warm-up");
  ok(cudaStreamSynchronize(stream), "warm-up");
  std::vector<double> rounds;
  for (int round = 0; round < 5; ++round) {
    ok(cudaEventRecord(a, stream), "cudaEventRecord");
    for (int i = 0; i < reps; ++i) ok(cudaGraphLaunch(graph, stream), "cudaGraphLaunch");
    ok(cudaEventRecord(b, stream), "cudaEventRecord");
    ok(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    ok(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    rounds.push_back(ms / reps);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2];
}

}  // namespace moonep::bench
