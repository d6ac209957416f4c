// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::cuda::GpuWorldMoeLayer (moonep/gpu_world_moe_layer.hpp) against
// the direct layer (support/layer_cases.hpp: plain loops over every token
// and its K experts, no plan, in double): forward out = sum_k w * (x @
// M_e); backward gx = sum_k w * (g @ M_e^T), gw = <g, x @ M_e> and every
// expert's gM = sum over its entries of w * x^T g (its own groups plus its
// copies' gradients, reduced): exactly for exact data in float and double,
// within T's rounding otherwise; rows and entries past s_r untouched. The
// steps of the virtual ranks' MoE tests (support/cuda_moe_cases.hpp: full
// and ragged, R = 1, B = epn, B < epn with one slot and copying
// everything, every entry copied to every rank); rows of 16-byte multiples
// and not; the forward's parts captured in a CUDA graph (the fetch on a
// branch of its own); a plan with a remote expert that is not copied
// refused with nothing written; bad arguments. Every world on device 0
// (support/gpu_world_support.hpp). [sanitize]: the small cases
// compute-sanitizer runs.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "catch2_compat.hpp"
#include "moonep/gpu_world.hpp"
#include "moonep/gpu_world_moe_layer.hpp"
#include "support/cuda_moe_cases.hpp"
#include "support/gpu_world_support.hpp"

using namespace cuda_layer_test;
using namespace gpu_world_test;
using moonep::cuda::GpuWorld;
using moonep::cuda::GpuWorldMoeLayer;
using moonep::test::cuda_ok;

namespace {

constexpr double kUntouched = 3.5;

template <class T>
void forward_case(const std::string& name, const Step& s, int H, int O, Values v, bool graph = false) {
  using W = moonep::weight_t<T>;
  INFO(name << " H=" << H << " H'=" << O << " bytes per value " << sizeof(T)
            << (v == Values::exact ? " exact" : " random") << " graph " << graph);
  const Config& c = s.c;
  WorldStep ws;
  plan_on_world(s, ws);
  const MoeData<T> data = draw_data<T>(s, H, O, v, 41);
  const auto want = direct_out(s, H, data.x, &data.w, &data.ex);
  RankBuffers<T> x(data.x), out(filled<T>(c, c.tokens * O, kUntouched));
  RankBuffers<W> w(data.w);
  GpuWorldMoeLayer layer(*ws.world, H, O, element_of<T>(), /*training=*/false);
  CHECK(layer.params() == std::int64_t{H} * O);
  put_slots([&](int d) { return layer.experts(d); }, data.P);
  if (graph) {
    ForwardGraph::replay(layer, x.cdata(), w.cdata(), out.data(), 2);
  } else {
    layer.forward(x.cdata(), w.cdata(), out.data(), nullptr);
  }
  cuda_ok(cudaDeviceSynchronize());
  compare_rows("out", s, c.tokens, O, flat(out.get()), want, tolerance<T>(v), to<T>(kUntouched));
}

template <class T>
void backward_case(const std::string& name, const Step& s, int H, int O, Values v) {
  using W = moonep::weight_t<T>;
  INFO(name << " H=" << H << " H'=" << O << " bytes per value " << sizeof(T)
            << (v == Values::exact ? " exact" : " random"));
  const Config& c = s.c;
  WorldStep ws;
  plan_on_world(s, ws);
  const MoeData<T> data = draw_data<T>(s, H, O, v, 43);
  const DirectGradients want = direct_gradients(s, data.x, data.w, data.grad_out, data.ex);
  const std::int64_t Q = std::int64_t{H} * O, epn = c.experts_per_rank();
  RankBuffers<T> x(data.x), out(filled<T>(c, c.tokens * O, 0)), g(data.grad_out),
      gx(filled<T>(c, c.tokens * H, kUntouched)), gP(filled<T>(c, epn * Q, kUntouched));
  RankBuffers<W> w(data.w), gw(filled<W>(c, c.tokens * c.topk, kUntouched));
  GpuWorldMoeLayer layer(*ws.world, H, O, element_of<T>());
  put_slots([&](int d) { return layer.experts(d); }, data.P);
  layer.forward(x.cdata(), w.cdata(), out.data(), nullptr);
  layer.backward(g.cdata(), gx.data(), gw.data(), gP.data(), nullptr);
  cuda_ok(cudaDeviceSynchronize());
  const double tol = tolerance<T>(v);
  compare_rows("grad_x", s, c.tokens, H, flat(gx.get()), want.gx, tol, to<T>(kUntouched));
  compare_rows("grad_w", s, c.tokens, c.topk, flat(gw.get()), want.gw, tol, W(kUntouched));
  // Every expert's gradient, all written: [R][epn][Q] is [E][Q], compared
  // as one "rank" of E rows.
  Step all = s;
  all.c.ranks = 1;
  all.tokens = {c.experts};
  compare_rows("grad_P", all, c.experts, Q, flat(gP.get()), {want.gm}, tol, to<T>(kUntouched));
  // The forward's out too (the backward ran after it, on its buffers).
  compare_rows("out", s, c.tokens, O, flat(out.get()), direct_out(s, H, data.x, &data.w, &data.ex), tol, to<T>(0));
}

template <class T>
void all_cases(bool small) {
  for (const auto& [name, step] : moe_steps()) {
    for (Values v : {Values::exact, Values::random}) {
      forward_case<T>(name, step, 8, 12, v);  // rows of 16-byte multiples in H for bf16 (not in H')
      backward_case<T>(name, step, 8, 12, v);
      if (small) continue;
      forward_case<T>(name, step, 5, 16, v);
      backward_case<T>(name, step, 5, 16, v);
      forward_case<T>(name, step, 64, 40, v);
      backward_case<T>(name, step, 64, 40, v);
    }
  }
}

}  // namespace

TEST_CASE("gpu world moe layer: forward and backward match the direct layer (float)", "[gpu_world_moe]") {
  all_cases<float>(false);
}
TEST_CASE("gpu world moe layer: forward and backward match the direct layer (double)", "[gpu_world_moe]") {
  all_cases<double>(false);
}
TEST_CASE("gpu world moe layer: forward and backward match the direct layer (bfloat16)", "[gpu_world_moe]") {
  all_cases<moonep::bf16>(false);
}
TEST_CASE("gpu world moe layer: small cases for compute-sanitizer", "[gpu_world_moe][sanitize]") {
  all_cases<moonep::bf16>(true);
  all_cases<float>(true);
}
TEST_CASE("gpu world moe layer: the forward's parts replay from a CUDA graph", "[gpu_world_moe][sanitize]") {
  forward_case<float>("graph", synthetic_step(Config{4, 16, 4, 12, 4, 4}, 1.5, 11, false), 8, 12, Values::exact, true);
  forward_case<moonep::bf16>("graph", copy_everywhere_step(), 16, 8, Values::random, true);
  forward_case<double>("graph", synthetic_step(Config{8, 64, 4, 40, 8, 8}, 2.0, 12, false), 24, 8, Values::exact,
                       true);
}

TEST_CASE("gpu world moe layer: a remote expert without a copy is refused, nothing written",
          "[gpu_world_moe][sanitize]") {
  const Step s = uncopied_remote_step();
  const Config& c = s.c;
  WorldStep ws;
  plan_on_world(s, ws);
  const std::string want = uncopied_remote_error();
  REQUIRE(want.find("rank 1 would run expert 1 ") != std::string::npos);
  const int H = 2, O = 3;
  const MoeData<float> data = draw_data<float>(s, H, O, Values::exact, 3);
  const PerRank<float> out_host = filled<float>(c, c.tokens * O, kUntouched);
  RankBuffers<float> x(data.x), w(data.w), out(out_host);
  GpuWorldMoeLayer layer(*ws.world, H, O, Element::f32);
  put_slots([&](int d) { return layer.experts(d); }, data.P);
  CHECK(input_error([&] { layer.forward(x.cdata(), w.cdata(), out.data(), nullptr); }) == want);
  CHECK(input_error([&] { layer.read_groups(nullptr); }) == want);
  CHECK(input_error([&] { layer.enqueue_gemms(nullptr); }) ==
        "moonep::cuda::GpuWorldMoeLayer: read_groups() has not run for this plan");
  const PerRank<float> untouched = filled<float>(c, c.tokens * 8, 9);
  RankBuffers<float> gx(untouched), gw(untouched), gP(untouched);
  CHECK(input_error([&] { layer.backward(out.cdata(), gx.data(), gw.data(), gP.data(), nullptr); }) == want);
  cuda_ok(cudaDeviceSynchronize());
  CHECK(out.get() == out_host);
  CHECK(gx.get() == untouched);
  CHECK(gw.get() == untouched);
  CHECK(gP.get() == untouched);
  const auto zeros = [](int ranks, std::int64_t n) {
    return PerRank<float>(static_cast<std::size_t>(ranks), std::vector<float>(static_cast<std::size_t>(n), 0.0f));
  };
  // Dispatch and fetch did not run: recv and the copies are as made (zero).
  CHECK(get_slots<float>([&](int d) { return layer.layer().recv(d); }, c.ranks, c.slots() * H) ==
        zeros(c.ranks, c.slots() * H));
  CHECK(get_slots<float>([&](int d) { return layer.expert_copies().copies(d); }, c.ranks, c.copy_slots * H * O) ==
        zeros(c.ranks, c.copy_slots * H * O));
}

TEST_CASE("gpu world moe layer: bad arguments are refused", "[gpu_world_moe]") {
  const Config c{2, 4, 2, 4, 2, 2};
  GpuWorld world(c, on_device_zero(2));
  CHECK(input_error([&] { GpuWorldMoeLayer(world, 0, 4, Element::f32); }) ==
        "moonep::cuda::GpuWorldMoeLayer: H must be at least 1, got 0");
  CHECK(input_error([&] { GpuWorldMoeLayer(world, 4, 0, Element::f32); }) ==
        "moonep::cuda::GpuWorldMoeLayer: H' must be at least 1, got 0");
  GpuWorldMoeLayer inference(world, 4, 4, Element::f32, false);
  CHECK(!inference.training());
  RankBuffers<float> a(2, 64);
  const void* half[2] = {a.p[0], nullptr};
  CHECK(input_error([&] { inference.experts(2); }) == "moonep::cuda::GpuWorldMoeLayer::experts: rank 2 is not in [0, 2)");
  CHECK(input_error([&] { inference.forward(nullptr, a.cdata(), a.data(), nullptr); }) ==
        "moonep::cuda::GpuWorldMoeLayer::forward: x is null");
  CHECK(input_error([&] { inference.forward(a.cdata(), half, a.data(), nullptr); }) ==
        "moonep::cuda::GpuWorldMoeLayer::forward: w[1] is null");
  CHECK(input_error([&] { inference.backward(a.cdata(), a.data(), a.data(), a.data(), nullptr); }) ==
        "moonep::cuda::GpuWorldMoeLayer::backward: the layer was made without training buffers");
  GpuWorldMoeLayer trainer(world, 4, 4, Element::f32);
  CHECK(input_error([&] { trainer.backward(a.cdata(), a.data(), a.data(), nullptr, nullptr); }) ==
        "moonep::cuda::GpuWorldMoeLayer::backward: grad_experts is null");
  cuda_ok(cudaDeviceSynchronize());
}
