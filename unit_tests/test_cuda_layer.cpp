// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::cuda::VirtualRankLayer (moonep/cuda_layer.hpp) against the
// reference layer (moonep/layer_reference.hpp), bit for bit: dispatch's
// recv and recv_w (filled slots, zeroed padding, untouched tail),
// combine's out (weighted and not, rows past s_r untouched), combine's
// backward (grad_y, grad_w) and dispatch's backward (grad_x, grad_w
// added to), exact and random data, for float,
// double and bfloat16, full and ragged steps (rows past s_r NaN: never
// read), tokens that name one expert twice and tokens whose K experts all
// live on one rank (many duplicates), R = 1, H whose rows are and are not
// a multiple of 16 bytes. [sanitize]: the small cases compute-sanitizer
// runs.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "catch2_compat.hpp"
#include "moonep/bf16.hpp"
#include "moonep/cuda_layer.hpp"
#include "moonep/layer_reference.hpp"
#include "moonep/reference.hpp"
#include "support/cuda_layer_support.hpp"
#include "support/cuda_test_support.hpp"
#include "support/ragged_steps.hpp"
#include "support/soak_problem.hpp"

namespace {

using namespace cuda_layer_test;
using moonep::Config;
using moonep::PerRank;
using moonep::Routing;
using moonep::TokensPerRank;
using moonep::cuda::Element;
using moonep::cuda::VirtualRankLayer;
using moonep::cuda::VirtualRankPlanner;
using moonep::test::cuda_ok;

// Elements that differ in their bits.
template <class V>
std::size_t wrong_bits(const std::vector<V>& got, const std::vector<V>& want) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < want.size(); ++i) wrong += same_bits(got[i], want[i]) ? 0 : 1;
  return wrong;
}

// One case: plan on the GPU, dispatch, combine and both backwards there and
// with the reference, compare every element's bits. `exact`: quarters, so
// every product and sum is exact too; else random values (the same bits
// because every path adds in the same order).
template <class T>
void check_case(const Config& c, const Routing& full, const TokensPerRank* tokens, int H, std::uint64_t seed,
                bool exact) {
  using W = moonep::weight_t<T>;
  INFO("R=" << c.ranks << " E=" << c.experts << " K=" << c.topk << " S=" << c.tokens << " B=" << c.copy_slots
            << " tp=" << c.token_padding << " H=" << H << " ragged=" << (tokens != nullptr));
  const std::int64_t S = c.tokens, K = c.topk, NvS = c.slots();
  VirtualRankPlanner planner(c);
  moonep::test::DeviceRouting dr(c, full);
  moonep::test::DeviceCounts counts(c.ranks);
  if (tokens) counts.write(*tokens);
  planner.plan(dr.topk(), nullptr, nullptr, tokens ? counts.data() : nullptr);
  const moonep::HostPlan plan = planner.copy_out(nullptr);

  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> q(-8, 8);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  const auto draw = [&] { return exact ? q(rng) / 4.0 : u(rng); };
  // Token rows [R][S][width] (rows past s_r NaN: never read) and weights.
  const auto token_rows = [&](std::int64_t width) {
    PerRank<T> a(c.ranks, std::vector<T>(static_cast<std::size_t>(S * width)));
    for (int r = 0; r < c.ranks; ++r)
      for (std::int64_t t = 0; t < S; ++t)
        for (std::int64_t h = 0; h < width; ++h)
          a[r][t * width + h] = t < (tokens ? (*tokens)[r] : S) ? value<T>(draw()) : nan_value<T>();
    return a;
  };
  PerRank<T> x = token_rows(H);
  PerRank<W> w(c.ranks, std::vector<W>(static_cast<std::size_t>(S * K)));
  for (int r = 0; r < c.ranks; ++r)
    for (std::int64_t i = 0; i < S * K; ++i) w[r][i] = i / K < (tokens ? (*tokens)[r] : S) ? W(draw()) : W(NAN);
  // The reference on the planner's own plan (cut to s_r rows per rank).
  PerRank<T> x_ref = x;
  PerRank<W> w_ref = w;
  PerRank<T> recv_ref(c.ranks, std::vector<T>(static_cast<std::size_t>(NvS * H), value<T>(7)));
  PerRank<W> recv_w_ref(c.ranks, std::vector<W>(static_cast<std::size_t>(NvS), W(7)));
  moonep::dispatch_reference<T>(plan, H, x_ref, w_ref, recv_ref, recv_w_ref);

  DeviceArray<T> d_x(flat(x)), d_recv(std::vector<T>(static_cast<std::size_t>(c.ranks * NvS * H), value<T>(7)));
  DeviceArray<W> d_w(flat(w)), d_recv_w(std::vector<W>(static_cast<std::size_t>(c.ranks * NvS), W(7)));
  VirtualRankLayer layer(planner, H, element_of<T>());
  layer.dispatch(d_x.p, d_w.p, d_recv.p, d_recv_w.p, nullptr);
  cuda_ok(cudaDeviceSynchronize());
  const std::vector<T> recv = d_recv.get(), want = flat(recv_ref);
  const std::vector<W> recv_w = d_recv_w.get(), want_w = flat(recv_w_ref);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) bad += same_bits(recv[i], want[i]) ? 0 : 1;
  for (std::size_t i = 0; i < want_w.size(); ++i) bad += same_bits(recv_w[i], want_w[i]) ? 0 : 1;
  CHECK(bad == 0);

  // Combine: y = the experts' rows (here: recv scaled per slot, so that
  // duplicates differ from their primary), weighted and unweighted.
  PerRank<T> y = recv_ref;
  for (int d = 0; d < c.ranks; ++d)
    for (std::int64_t s = 0; s < NvS; ++s)
      for (std::int64_t h = 0; h < H; ++h)
        y[d][s * H + h] = value<T>(static_cast<double>(static_cast<float>(y[d][s * H + h])) + ((s + h) % 5) / 4.0);
  DeviceArray<T> d_y(flat(y));
  for (bool weighted : {true, false}) {
    INFO("weighted " << weighted);
    PerRank<T> out_ref(c.ranks, std::vector<T>(static_cast<std::size_t>(S * H), value<T>(3)));
    moonep::combine_reference<T>(plan, H, y, weighted ? &w_ref : nullptr, out_ref);
    DeviceArray<T> d_out(std::vector<T>(static_cast<std::size_t>(c.ranks * S * H), value<T>(3)));
    layer.combine(d_y.p, weighted ? d_recv_w.p : nullptr, d_out.p, nullptr);
    cuda_ok(cudaDeviceSynchronize());
    const std::vector<T> out = d_out.get(), want_out = flat(out_ref);
    std::size_t wrong = 0, first = want_out.size();
    for (std::size_t i = 0; i < want_out.size(); ++i) {
      if (!same_bits(out[i], want_out[i])) {
        ++wrong;
        if (first == want_out.size()) first = i;
      }
    }
    INFO("first wrong element " << first);
    CHECK(wrong == 0);
  }

  // Combine's backward: grad_out's rows out to the slots (times each
  // slot's weight, or the bits) and one dot product per entry.
  const PerRank<T> g = token_rows(H);
  DeviceArray<T> d_g(flat(g));
  for (bool weighted : {true, false}) {
    INFO("combine backward, weighted " << weighted);
    PerRank<T> gy_ref(c.ranks, std::vector<T>(static_cast<std::size_t>(NvS * H), value<T>(7)));
    PerRank<W> gw_ref(c.ranks, std::vector<W>(static_cast<std::size_t>(S * K), W(5)));
    moonep::combine_backward_reference<T>(plan, H, g, y, weighted ? &w_ref : nullptr, gy_ref,
                                          weighted ? &gw_ref : nullptr);
    DeviceArray<T> d_gy(std::vector<T>(static_cast<std::size_t>(c.ranks * NvS * H), value<T>(7)));
    DeviceArray<W> d_gw(std::vector<W>(static_cast<std::size_t>(c.ranks * S * K), W(5)));
    layer.combine_backward(d_g.p, d_y.p, weighted ? d_recv_w.p : nullptr, d_gy.p, weighted ? d_gw.p : nullptr,
                           nullptr);
    cuda_ok(cudaDeviceSynchronize());
    CHECK(wrong_bits(d_gy.get(), flat(gy_ref)) == 0);
    CHECK(wrong_bits(d_gw.get(), flat(gw_ref)) == 0);  // untouched (5) when unweighted
  }

  // Dispatch's backward: grad_recv (here y) back to the tokens, summed as
  // an unweighted combine, and grad_w += grad_recv_w.
  PerRank<W> grecv_w(c.ranks, std::vector<W>(static_cast<std::size_t>(NvS)));
  for (auto& rank : grecv_w)
    for (auto& v : rank) v = W(draw());
  DeviceArray<W> d_grecv_w(flat(grecv_w));
  for (bool with_w : {true, false}) {
    INFO("dispatch backward, with grad_w " << with_w);
    PerRank<T> gx_ref(c.ranks, std::vector<T>(static_cast<std::size_t>(S * H), value<T>(3)));
    PerRank<W> gw_ref = w_ref;  // an input too: the backward adds to it
    moonep::dispatch_backward_reference<T>(plan, H, y, with_w ? &grecv_w : nullptr, gx_ref,
                                           with_w ? &gw_ref : nullptr);
    DeviceArray<T> d_gx(std::vector<T>(static_cast<std::size_t>(c.ranks * S * H), value<T>(3)));
    DeviceArray<W> d_gw(flat(w_ref));
    layer.dispatch_backward(d_y.p, with_w ? d_grecv_w.p : nullptr, d_gx.p, with_w ? d_gw.p : nullptr, nullptr);
    cuda_ok(cudaDeviceSynchronize());
    CHECK(wrong_bits(d_gx.get(), flat(gx_ref)) == 0);
    CHECK(wrong_bits(d_gw.get(), flat(gw_ref)) == 0);
  }
}

template <class T>
void check_shapes(bool small) {
  using moonep::test::Shape;
  const std::vector<Config> configs =
      small ? std::vector<Config>{{4, 16, 2, 24, 2, 4}, {1, 4, 2, 10, 2, 2}}
            : std::vector<Config>{{4, 16, 2, 24, 2, 4}, {1, 4, 2, 10, 2, 2}, {8, 64, 4, 40, 8, 8}, {3, 9, 3, 17, 1, 1}};
  for (const Config& c : configs) {
    for (int H : {8, 5, small ? 8 : 72}) {  // 8 floats: 32-byte rows; 5: element by element
      for (Shape shape : {Shape::skew, Shape::same_expert_k_times, Shape::owner_zero}) {
        INFO("shape " << moonep::test::name(shape));
        const Routing full = moonep::test::make_routing(c, shape, 11);
        check_case<T>(c, full, nullptr, H, 3, true);
        moonep::impl::SplitMix64 rng{5};
        const TokensPerRank t = moonep::test::ragged_tokens(c, 1, rng);
        const Routing cut = moonep::test::cut_to_tokens(c, full, t);
        check_case<T>(c, moonep::test::padded_to_full(c, cut), &t, H, 4, false);
      }
    }
  }
}

}  // namespace

TEST_CASE("cuda layer: dispatch and combine match the reference bit for bit (float)", "[cuda_layer]") {
  check_shapes<float>(false);
}
TEST_CASE("cuda layer: dispatch and combine match the reference bit for bit (double)", "[cuda_layer]") {
  check_shapes<double>(false);
}
TEST_CASE("cuda layer: dispatch and combine match the reference bit for bit (bfloat16)", "[cuda_layer]") {
  check_shapes<moonep::bf16>(false);
}
TEST_CASE("cuda layer: small cases for compute-sanitizer", "[cuda_layer][sanitize]") {
  check_shapes<moonep::bf16>(true);
  check_shapes<float>(true);
}
TEST_CASE("cuda layer: H < 1 is refused", "[cuda_layer]") {
  VirtualRankPlanner planner(Config{2, 4, 2, 4, 2, 2});
  REQUIRE_THROWS_WITH(VirtualRankLayer(planner, 0, Element::f32),
                      "moonep::cuda::VirtualRankLayer: H must be at least 1, got 0");
}
TEST_CASE("cuda layer: null buffers and half a gradient pair are refused before anything runs", "[cuda_layer]") {
  VirtualRankPlanner planner(Config{2, 4, 2, 4, 2, 2});
  VirtualRankLayer layer(planner, 4, Element::f32);
  DeviceArray<float> a(std::vector<float>(64));
  REQUIRE_THROWS_WITH(layer.dispatch(a.p, nullptr, a.p, a.p, nullptr),
                      "moonep::cuda::VirtualRankLayer::dispatch: a buffer is null");
  REQUIRE_THROWS_WITH(layer.combine_backward(a.p, nullptr, a.p, a.p, a.p, nullptr),
                      "moonep::cuda::VirtualRankLayer::combine_backward (weighted: y and grad_w): a buffer is null");
  REQUIRE_THROWS_WITH(layer.dispatch_backward(a.p, a.p, a.p, nullptr, nullptr),
                      "moonep::cuda::VirtualRankLayer::dispatch_backward: grad_recv_w and grad_w go together (both "
                      "or neither)");
}

// The soak of issue 35: 10^5 steps replayed in one CUDA graph (new routing
// and rows each step, made on the device; plan + dispatch + combine), every
// 1000th checked against the reference, device memory flat. Hidden from
// the default run ([.]): gpu_checks.sh runs it by its tag.
TEST_CASE("cuda layer soak: 1e5 graph replays of plan + dispatch + combine", "[.][soak]") {
  const Config c{8, 64, 4, 512, 8, 8};
  const int H = 256, steps = 100000, every = 1000;
  const std::int64_t R = c.ranks, S = c.tokens, K = c.topk, NvS = c.slots();
  VirtualRankPlanner planner(c);
  std::vector<std::int32_t*> routing(R);
  for (auto& p : routing) cuda_ok(cudaMalloc(reinterpret_cast<void**>(&p), S * K * 4));
  std::int32_t** d_routing_table = nullptr;
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&d_routing_table), R * sizeof(void*)));
  cuda_ok(cudaMemcpy(d_routing_table, routing.data(), R * sizeof(void*), cudaMemcpyHostToDevice));
  unsigned* d_step = nullptr;
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&d_step), sizeof(unsigned)));
  cuda_ok(cudaMemset(d_step, 0, sizeof(unsigned)));
  DeviceArray<float> x(std::vector<float>(static_cast<std::size_t>(R * S * H))),
      w(std::vector<float>(static_cast<std::size_t>(R * S * K))),
      recv(std::vector<float>(static_cast<std::size_t>(R * NvS * H))),
      recv_w(std::vector<float>(static_cast<std::size_t>(R * NvS))),
      out(std::vector<float>(static_cast<std::size_t>(R * S * H)));
  VirtualRankLayer layer(planner, H, Element::f32);
  cudaStream_t stream;
  cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const std::int32_t* const* rp = routing.data();
  cudaGraph_t graph;
  cuda_ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  moonep::test::enqueue_next_problem(d_step, c, H, d_routing_table, x.p, w.p, stream);
  planner.plan(rp, nullptr, stream);
  layer.dispatch(x.p, w.p, recv.p, recv_w.p, stream);
  layer.combine(recv.p, recv_w.p, out.p, stream);  // identity experts: y = recv
  moonep::test::enqueue_count_step(d_step, stream);
  cuda_ok(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  cuda_ok(cudaGraphInstantiate(&exec, graph, 0));
  std::size_t free_before = 0, total = 0, free_after = 0;
  int checked = 0;
  for (int step = 0; step < steps; ++step) {
    cuda_ok(cudaGraphLaunch(exec, stream));
    if (step == 0) {
      cuda_ok(cudaStreamSynchronize(stream));
      cuda_ok(cudaMemGetInfo(&free_before, &total));
    }
    if ((step + 1) % every != 0) continue;
    planner.check(stream);  // waits; the kernel found no bad input
    // The step's problem, as the device made it, through the reference.
    Routing r(R, std::vector<std::int32_t>(static_cast<std::size_t>(S * K)));
    for (int q = 0; q < R; ++q) cuda_ok(cudaMemcpy(r[q].data(), routing[q], S * K * 4, cudaMemcpyDeviceToHost));
    const moonep::HostPlan plan = moonep::plan_reference(c, r);
    const std::vector<float> xs = x.get(), ws = w.get(), got = out.get();
    PerRank<float> xr(R), wr(R), recv_ref(R, std::vector<float>(static_cast<std::size_t>(NvS * H))),
        out_ref(R, std::vector<float>(static_cast<std::size_t>(S * H)));
    PerRank<float> recv_w_ref(R, std::vector<float>(static_cast<std::size_t>(NvS)));
    for (int q = 0; q < R; ++q) {
      xr[q].assign(xs.begin() + q * S * H, xs.begin() + (q + 1) * S * H);
      wr[q].assign(ws.begin() + q * S * K, ws.begin() + (q + 1) * S * K);
    }
    moonep::dispatch_reference<float>(plan, H, xr, wr, recv_ref, recv_w_ref);
    moonep::combine_reference<float>(plan, H, recv_ref, &wr, out_ref);
    const std::vector<float> want = flat(out_ref);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < want.size(); ++i) wrong += same_bits(got[i], want[i]) ? 0 : 1;
    INFO("step " << step);
    REQUIRE(wrong == 0);
    ++checked;
  }
  cuda_ok(cudaStreamSynchronize(stream));
  cuda_ok(cudaMemGetInfo(&free_after, &total));
  CHECK(checked == steps / every);
  CHECK(free_after == free_before);  // nothing allocated per step
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  cudaFree(d_step);
  cudaFree(d_routing_table);
  for (auto* p : routing) cudaFree(p);
}
