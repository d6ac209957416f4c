// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::cuda::GpuWorldLayer (moonep/gpu_world_layer.hpp) against the
// reference layer (moonep/layer_reference.hpp) on the world's own plan
// (GpuWorld::copy_out), bit for bit: dispatch's recv and recv_w (filled
// slots, zeroed padding, untouched tail), combine's out (weighted and not,
// rows past s_r untouched), combine's backward (grad_y, grad_w) and
// dispatch's backward (grad_x, grad_w added to); exact and random data;
// float, double and bfloat16; full and ragged steps (rows past s_r NaN:
// never read); tokens that name one expert twice and tokens whose K
// experts all live on one rank (many duplicates: the epilogue and the
// prologue); R = 1; H whose rows are and are not a multiple of 16 bytes,
// H' != H. Every world is on device 0 ({0, 0, ...}: each rank its own
// chunk, stream and launches). A CUDA graph of plan + dispatch + experts
// (a copy) + combine replayed with new routing, counts and rows. Bad
// input. [sanitize]: the small cases compute-sanitizer runs.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "catch2_compat.hpp"
#include "moonep/bf16.hpp"
#include "moonep/error.hpp"
#include "moonep/gpu_world.hpp"
#include "moonep/gpu_world_layer.hpp"
#include "moonep/layer_reference.hpp"
#include "moonep/reference.hpp"
#include "support/cuda_layer_support.hpp"
#include "support/cuda_test_support.hpp"
#include "support/gpu_world_support.hpp"
#include "support/ragged_steps.hpp"

namespace {

using namespace cuda_layer_test;
using namespace gpu_world_test;
using moonep::Config;
using moonep::PerRank;
using moonep::Routing;
using moonep::TokensPerRank;
using moonep::cuda::Element;
using moonep::cuda::GpuWorld;
using moonep::cuda::GpuWorldLayer;
using moonep::test::cuda_ok;

// One case: plan on the GPU world, then every operation there and with the
// reference on the world's own plan; every element's bits compared.
template <class T>
void check_case(const Config& c, const Routing& full, const TokensPerRank* tokens, int H, int Hout,
                std::uint64_t seed, bool exact) {
  using W = moonep::weight_t<T>;
  INFO("R=" << c.ranks << " E=" << c.experts << " K=" << c.topk << " S=" << c.tokens << " B=" << c.copy_slots
            << " tp=" << c.token_padding << " H=" << H << " H'=" << Hout << " ragged=" << (tokens != nullptr)
            << " exact=" << exact);
  const int R = c.ranks;
  const std::int64_t S = c.tokens, K = c.topk, NvS = c.slots();
  GpuWorld world(c, on_device_zero(R));
  moonep::test::DeviceRouting dr(c, full);
  moonep::test::DeviceCounts counts(R);
  if (tokens) counts.write(*tokens);
  world.plan(dr.topk(), nullptr, nullptr, tokens ? counts.per_rank() : nullptr);
  const moonep::HostPlan plan = world.copy_out();
  GpuWorldLayer layer(world, H, Hout, element_of<T>(), true);

  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> q(-8, 8);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  const auto draw = [&] { return exact ? q(rng) / 4.0 : u(rng); };
  const auto s_of = [&](int r) { return tokens ? (*tokens)[r] : S; };
  const auto token_rows = [&](std::int64_t width) {
    PerRank<T> a(R, std::vector<T>(static_cast<std::size_t>(S * width)));
    for (int r = 0; r < R; ++r)
      for (std::int64_t t = 0; t < S; ++t)
        for (std::int64_t h = 0; h < width; ++h) a[r][t * width + h] = t < s_of(r) ? value<T>(draw()) : nan_value<T>();
    return a;
  };
  const auto slot_rows = [&](std::int64_t width) {
    PerRank<T> a(R, std::vector<T>(static_cast<std::size_t>(NvS * width)));
    for (auto& rank : a)
      for (auto& v : rank) v = value<T>(draw());
    return a;
  };
  const PerRank<T> x = token_rows(H);
  PerRank<W> w(R, std::vector<W>(static_cast<std::size_t>(S * K)));
  for (int r = 0; r < R; ++r)
    for (std::int64_t i = 0; i < S * K; ++i) w[r][i] = i / K < s_of(r) ? W(draw()) : W(NAN);
  RankBuffers<T> d_x(x);
  RankBuffers<W> d_w(w);

  // Dispatch (the tail after the last group keeps its 7s).
  PerRank<T> recv_ref(R, std::vector<T>(static_cast<std::size_t>(NvS * H), value<T>(7)));
  PerRank<W> recv_w_ref(R, std::vector<W>(static_cast<std::size_t>(NvS), W(7)));
  put_slots([&](int d) { return layer.recv(d); }, recv_ref);
  put_slots([&](int d) { return layer.recv_w(d); }, recv_w_ref);
  moonep::dispatch_reference<T>(plan, H, x, w, recv_ref, recv_w_ref);
  layer.dispatch(d_x.cdata(), d_w.cdata(), nullptr);
  cuda_ok(cudaDeviceSynchronize());
  {
    std::string first;
    INFO("dispatch");
    CHECK(wrong_bits(get_slots<T>([&](int d) { return layer.recv(d); }, R, NvS * H), recv_ref, &first) == 0);
    INFO("first wrong " << first);
    CHECK(wrong_bits(get_slots<W>([&](int d) { return layer.recv_w(d); }, R, NvS), recv_w_ref, &first) == 0);
  }

  // Combine: the experts' y (every slot drawn: duplicates differ from their
  // primary), weighted by the dispatched recv_w and not.
  const PerRank<T> y = slot_rows(Hout);
  put_slots([&](int d) { return layer.y(d); }, y);
  for (bool weighted : {true, false}) {
    INFO("combine, weighted " << weighted);
    PerRank<T> out_ref(R, std::vector<T>(static_cast<std::size_t>(S * Hout), value<T>(3)));
    moonep::combine_reference<T>(plan, Hout, y, weighted ? &w : nullptr, out_ref);
    RankBuffers<T> d_out(PerRank<T>(R, std::vector<T>(static_cast<std::size_t>(S * Hout), value<T>(3))));
    layer.combine(d_out.data(), weighted, nullptr);
    cuda_ok(cudaDeviceSynchronize());
    std::string first;
    const std::size_t wrong = wrong_bits(d_out.get(), out_ref, &first);
    INFO("first wrong " << first);
    CHECK(wrong == 0);
  }

  // Combine's backward.
  const PerRank<T> g = token_rows(Hout);
  RankBuffers<T> d_g(g);
  for (bool weighted : {true, false}) {
    INFO("combine backward, weighted " << weighted);
    PerRank<T> gy_ref(R, std::vector<T>(static_cast<std::size_t>(NvS * Hout), value<T>(7)));
    PerRank<W> gw_ref(R, std::vector<W>(static_cast<std::size_t>(S * K), W(5)));
    put_slots([&](int d) { return layer.grad_y(d); }, gy_ref);
    moonep::combine_backward_reference<T>(plan, Hout, g, y, weighted ? &w : nullptr, gy_ref,
                                          weighted ? &gw_ref : nullptr);
    RankBuffers<W> d_gw(PerRank<W>(R, std::vector<W>(static_cast<std::size_t>(S * K), W(5))));
    layer.combine_backward(d_g.cdata(), weighted, weighted ? d_gw.data() : nullptr, nullptr);
    cuda_ok(cudaDeviceSynchronize());
    std::string first;
    CHECK(wrong_bits(get_slots<T>([&](int d) { return layer.grad_y(d); }, R, NvS * Hout), gy_ref, &first) == 0);
    INFO("first wrong " << first);
    CHECK(wrong_bits(d_gw.get(), gw_ref) == 0);  // untouched (5) when unweighted
  }

  // Dispatch's backward: grad_recv back to the tokens, and grad_w +=
  // grad_recv_w.
  const PerRank<T> grecv = slot_rows(H);
  PerRank<W> grecv_w(R, std::vector<W>(static_cast<std::size_t>(NvS)));
  for (auto& rank : grecv_w)
    for (auto& v : rank) v = W(draw());
  put_slots([&](int d) { return layer.grad_recv(d); }, grecv);
  put_slots([&](int d) { return layer.grad_recv_w(d); }, grecv_w);
  for (bool with_w : {true, false}) {
    INFO("dispatch backward, with grad_w " << with_w);
    PerRank<T> gx_ref(R, std::vector<T>(static_cast<std::size_t>(S * H), value<T>(3)));
    PerRank<W> gw_ref = w;  // an input too: the backward adds to it
    moonep::dispatch_backward_reference<T>(plan, H, grecv, with_w ? &grecv_w : nullptr, gx_ref,
                                           with_w ? &gw_ref : nullptr);
    RankBuffers<T> d_gx(PerRank<T>(R, std::vector<T>(static_cast<std::size_t>(S * H), value<T>(3))));
    RankBuffers<W> d_gw(w);
    layer.dispatch_backward(d_gx.data(), with_w ? d_gw.data() : nullptr, nullptr);
    cuda_ok(cudaDeviceSynchronize());
    std::string first;
    CHECK(wrong_bits(d_gx.get(), gx_ref, &first) == 0);
    INFO("first wrong " << first);
    CHECK(wrong_bits(d_gw.get(), gw_ref) == 0);
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
        check_case<T>(c, full, nullptr, H, H, 3, true);
        moonep::impl::SplitMix64 rng{5};
        const TokensPerRank t = moonep::test::ragged_tokens(c, 1, rng);
        const Routing cut = moonep::test::cut_to_tokens(c, full, t);
        check_case<T>(c, moonep::test::padded_to_full(c, cut), &t, H, small ? H : H + 8, 4, false);
      }
    }
  }
}

}  // namespace

TEST_CASE("gpu world layer: every operation matches the reference bit for bit (float)", "[gpu_world_layer]") {
  check_shapes<float>(false);
}
TEST_CASE("gpu world layer: every operation matches the reference bit for bit (double)", "[gpu_world_layer]") {
  check_shapes<double>(false);
}
TEST_CASE("gpu world layer: every operation matches the reference bit for bit (bfloat16)", "[gpu_world_layer]") {
  check_shapes<moonep::bf16>(false);
}
TEST_CASE("gpu world layer: small cases for compute-sanitizer", "[gpu_world_layer][sanitize]") {
  check_shapes<moonep::bf16>(true);
  check_shapes<float>(true);
}

// One CUDA graph captured on a stream of device 0: the world's plan, the
// layer's dispatch, the experts (identity: a copy of each rank's recv into
// its y on the origin stream) and a weighted combine; replayed over new
// routing, counts and token rows, each replay's out against the reference.
TEST_CASE("gpu world layer: plan + dispatch + combine in one CUDA graph, replayed with new data",
          "[gpu_world_layer][graph]") {
  using moonep::test::Shape;
  const Config c{8, 64, 4, 40, 8, 8};
  const int R = c.ranks, H = 16;
  const std::int64_t S = c.tokens, K = c.topk, NvS = c.slots();
  GpuWorld world(c, on_device_zero(R));
  GpuWorldLayer layer(world, H, H, Element::f32);
  moonep::test::DeviceRouting live(c, moonep::test::make_routing(c, Shape::skew, 1));
  moonep::test::DeviceCounts counts(c, TokensPerRank(static_cast<std::size_t>(R), c.tokens));
  RankBuffers<float> x(R, static_cast<std::size_t>(S * H)), out(R, static_cast<std::size_t>(S * H));
  RankBuffers<float> w(R, static_cast<std::size_t>(S * K));
  const moonep::test::CapturedGraph graph([&](cudaStream_t origin) {
    world.plan(live.topk(), nullptr, origin, counts.per_rank());
    layer.dispatch(x.cdata(), w.cdata(), origin);
    for (int d = 0; d < R; ++d)
      cuda_ok(cudaMemcpyAsync(layer.y(d), layer.recv(d), NvS * H * sizeof(float), cudaMemcpyDeviceToDevice, origin));
    layer.combine(out.data(), true, origin);
  });
  const std::vector<TokensPerRank> steps = moonep::test::replay_counts(c, 9);
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const TokensPerRank& tokens = steps[i];
    INFO("replay " << i);
    const Routing cut =
        moonep::test::cut_to_tokens(c, moonep::test::make_routing(c, i % 2 ? Shape::heavy : Shape::skew, 30 + i), tokens);
    live.write(moonep::test::padded_to_full(c, cut));
    counts.write(tokens);
    PerRank<float> xs(R, std::vector<float>(static_cast<std::size_t>(S * H)));
    PerRank<float> ws(R, std::vector<float>(static_cast<std::size_t>(S * K)));
    for (int r = 0; r < R; ++r) {
      for (auto& v : xs[r]) v = static_cast<float>(u(rng));
      for (auto& v : ws[r]) v = static_cast<float>(u(rng));
    }
    x.set(xs);
    w.set(ws);
    cuda_ok(cudaGraphLaunch(graph.exec(), graph.stream()));
    cuda_ok(cudaStreamSynchronize(graph.stream()));
    const moonep::HostPlan plan = world.copy_out();
    REQUIRE(moonep::plan_difference(plan, moonep::plan_reference(c, cut, nullptr, &tokens)) == "");
    PerRank<float> recv_ref(R, std::vector<float>(static_cast<std::size_t>(NvS * H)));
    PerRank<float> recv_w_ref(R, std::vector<float>(static_cast<std::size_t>(NvS)));
    moonep::dispatch_reference<float>(plan, H, xs, ws, recv_ref, recv_w_ref);
    PerRank<float> out_ref = out.get();  // rows past s_r: whatever they hold
    moonep::combine_reference<float>(plan, H, recv_ref, &ws, out_ref);
    REQUIRE(wrong_bits(out.get(), out_ref) == 0);
  }
}

TEST_CASE("gpu world layer: bad input is refused before anything is enqueued", "[gpu_world_layer]") {
  const Config c{2, 4, 2, 4, 2, 2};
  GpuWorld world(c, on_device_zero(2));
  REQUIRE_THROWS_WITH(GpuWorldLayer(world, 0, 4, Element::f32),
                      "moonep::cuda::GpuWorldLayer: H and H' must be at least 1, got H = 0, H' = 4");
  GpuWorldLayer layer(world, 4, 4, Element::f32);
  RankBuffers<float> a(2, 64);
  const void* half[2] = {a.p[0], nullptr};
  REQUIRE_THROWS_WITH(layer.dispatch(nullptr, a.cdata(), nullptr), "moonep::cuda::GpuWorldLayer::dispatch: x is null");
  REQUIRE_THROWS_WITH(layer.dispatch(a.cdata(), half, nullptr), "moonep::cuda::GpuWorldLayer::dispatch: w[1] is null");
  REQUIRE_THROWS_WITH(layer.combine(nullptr, true, nullptr), "moonep::cuda::GpuWorldLayer::combine: out is null");
  REQUIRE_THROWS_WITH(layer.combine_backward(a.cdata(), false, nullptr, nullptr),
                      "moonep::cuda::GpuWorldLayer::combine_backward: the layer was not made for training "
                      "(training = false)");
  REQUIRE_THROWS_WITH(layer.grad_y(0),
                      "moonep::cuda::GpuWorldLayer::grad_y: the layer was not made for training (training = false)");
  REQUIRE_THROWS_WITH(layer.recv(2), "moonep::cuda::GpuWorldLayer::recv: rank 2 is not in [0, 2)");
  GpuWorldLayer trainer(world, 4, 4, Element::f32, true);
  REQUIRE_THROWS_WITH(trainer.combine_backward(a.cdata(), true, nullptr, nullptr),
                      "moonep::cuda::GpuWorldLayer::combine_backward (weighted): grad_w is null");
  REQUIRE_THROWS_WITH(trainer.dispatch_backward(nullptr, nullptr, nullptr),
                      "moonep::cuda::GpuWorldLayer::dispatch_backward: grad_x is null");
  // Nothing was enqueued: the world and layers still work.
  cuda_ok(cudaDeviceSynchronize());
  REQUIRE(layer.recv(1) != nullptr);
}
