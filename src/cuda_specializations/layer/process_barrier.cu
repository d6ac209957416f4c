// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The host side of the GPU world's layer objects over a world of one
// process per rank (process_barrier.hpp): the agreement on their
// arguments, the barrier's launch (world_barrier.cuh, this file's only
// includer) and its collective check.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "../host_checks.hpp"
#include "moonep/cuda_layer.hpp"  // Element
#include "moonep/error.hpp"
#include "process_barrier.hpp"
#include "world_barrier.cuh"

namespace moonep::cuda::layer {

namespace {
std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}
}  // namespace

std::string where_text(unsigned code) {
  const unsigned op = code >> 4, phase = (code >> 1) & 7u;
  const bool weighted = code & 1u;
  static const char* const names[] = {"", "dispatch", "combine", "combine_backward", "dispatch_backward", "fetch",
                                      "reduce"};
  if (op < kDispatch || op > kReduce || phase < 1 || phase > 2) return "barrier code " + std::to_string(code);
  const bool qualified = op == kCombine || op == kCombineBackward;  // weighted or not
  const std::string name = std::string(qualified ? (weighted ? "weighted " : "unweighted ") : "") + names[op];
  if (phase == 2) return "the end of " + name;
  switch (op) {
    case kFetch: return name + " (before the copies are read from their owners)";
    case kReduce: return name + " (before the copies' gradients are read)";
    case kDispatch:
    case kCombineBackward:
      return (qualified ? "the " : "") + name + " (between the sources' stores and the destinations' epilogue)";
    default: return (qualified ? "the " : "") + name + " (between the destinations' prologue and the sources' sums)";
  }
}

}  // namespace moonep::cuda::layer

namespace moonep::cuda::impl {

using layer::seconds_text;

std::string element_text(long long v) {
  switch (v) {
    case static_cast<long long>(Element::f32): return "f32";
    case static_cast<long long>(Element::f64): return "f64";
    case static_cast<long long>(Element::bf16): return "bf16";
    default: return std::to_string(v);
  }
}
std::string bool_text(long long v) { return v ? "true" : "false"; }

void agree_on_arguments(WorldPeers& peers, const std::string& who, const std::vector<AgreedArgument>& args,
                        const std::string& rule) {
  const int R = peers.size();
  const std::size_t n = args.size();
  std::vector<long long> mine(n), all(n * static_cast<std::size_t>(R));
  for (std::size_t f = 0; f < n; ++f) mine[f] = args[f].value;
  peers.allgather(mine.data(), n * sizeof(long long), all.data());
  for (std::size_t f = 0; f < n; ++f) {
    const auto at = [&](int r) { return all[static_cast<std::size_t>(r) * n + f]; };
    std::vector<long long> values;  // distinct, in order of the lowest rank holding each
    for (int r = 0; r < R; ++r)
      if (std::find(values.begin(), values.end(), at(r)) == values.end()) values.push_back(at(r));
    if (values.size() == 1) continue;
    std::string text = who + ": the processes disagree on " + args[f].name + ": ";
    for (std::size_t i = 0; i < values.size(); ++i) {
      std::vector<int> ranks;
      for (int r = 0; r < R; ++r)
        if (at(r) == values[i]) ranks.push_back(r);
      text += (i ? (i + 1 == values.size() ? " and " : ", ") : "") +
              (args[f].text ? args[f].text(values[i]) : std::to_string(values[i])) + " on " + ranks_text(ranks);
    }
    throw InputError(text + " (" + rule + ")");
  }
}

void agree_on_layer_arguments(WorldPeers& peers, const std::string& who, int hidden, int hidden_out, int type,
                              bool training) {
  agree_on_arguments(peers, who,
                     {{"H", hidden},
                      {"H'", hidden_out},
                      {"the element type", type, element_text},
                      {"training", training ? 1 : 0, bool_text}},
                     "every process constructs the layer with the same H, H', type and training");
}

ProcessBarrier::ProcessBarrier(WorldPeers& peers, int me, int device, unsigned* control0, std::int64_t stride_bytes,
                               double timeout_s, std::string who)
    : peers_(peers),
      me_(me),
      device_(device),
      control0_(control0),
      stride_(stride_bytes),
      timeout_s_(timeout_s),
      timeout_ns_(timeout_ns_of(timeout_s, who.c_str())),
      who_(std::move(who)) {}

void ProcessBarrier::arrive(cudaStream_t stream, unsigned where, const char* what) const {
  layer::BarrierParams b{};
  b.control0 = control0_;
  b.stride = stride_ / 4;
  b.R = peers_.size();
  b.rank = me_;
  b.where = where;
  b.timeout_ns = timeout_ns_;
  const int threads = std::min(256, (b.R + 31) / 32 * 32);
  layer::world_barrier<<<1, threads, 0, stream>>>(b);
  check_cuda(cudaGetLastError(), what);
}

void ProcessBarrier::idle_device() const noexcept {
  int saved = 0;
  cudaGetDevice(&saved);
  cudaSetDevice(device_);
  cudaDeviceSynchronize();
  cudaSetDevice(saved);
}

void ProcessBarrier::check(const char* object) {
  const int R = peers_.size();
  constexpr int kWords = layer::kPeerWhere + 1;
  unsigned mine[kWords] = {};
  {
    DeviceScope on(device_);
    check_cuda(cudaDeviceSynchronize(), "waiting for this rank's operations");
    check_cuda(cudaMemcpy(mine, control(me_), sizeof mine, cudaMemcpyDeviceToHost), "reading the barrier words");
  }
  // Every process has waited for its device once this returns: no launch
  // of the object runs anywhere.
  std::vector<unsigned> all(static_cast<std::size_t>(R) * kWords);
  peers_.allgather(mine, sizeof mine, all.data());
  std::string text;
  for (int r = 0; r < R; ++r) {
    const unsigned* w = &all[static_cast<std::size_t>(r) * kWords];
    if (!w[layer::kStop]) continue;
    const std::string rank = "rank " + std::to_string(r), peer = "rank " + std::to_string(w[layer::kPeer]);
    text += text.empty() ? "" : "; ";
    switch (w[layer::kWhy]) {
      case layer::kTimedOut:
        text += rank + " waited " + seconds_text(timeout_s_) + " in vain for " + peer + " at " +
                layer::where_text(w[layer::kWhere]);
        break;
      case layer::kOtherOperation:
        text += rank + " was at " + layer::where_text(w[layer::kWhere]) + " when " + peer + " was at " +
                layer::where_text(w[layer::kPeerWhere]) +
                " (every process enqueues the same operations in the same order)";
        break;
      default:
        text += rank + " found that " + peer + " had given up, at " + layer::where_text(w[layer::kWhere]);
        break;
    }
  }
  if (text.empty()) return;
  // Every rank's words cleared (its own, by each process) before any
  // process enqueues again.
  {
    DeviceScope on(device_);
    check_cuda(cudaMemset(control(me_), 0, layer::kControlBytes), "resetting the barrier words");
    check_cuda(cudaDeviceSynchronize(), "resetting the barrier words");
  }
  peers_.barrier();
  throw RuntimeError(who_ + ": " + text + "; the operations since were skipped (their outputs are undefined) and " +
                     object + " reset");
}

}  // namespace moonep::cuda::impl
