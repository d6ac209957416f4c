// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::cuda::VirtualRankMoeLayer::backward (moonep/cuda_moe_layer.hpp)
// against the direct layer's gradients (support/layer_cases.hpp,
// direct_gradients: no plan, in double): gx = sum_k w * (g @ M_e^T),
// gw = <g, x @ M_e>, and every expert's gM = sum over its entries of
// w * x^T g (its own groups plus its copies' gradients, reduced): exactly
// for exact data in float and double, within T's rounding otherwise; rows
// and entries past s_r untouched. The steps of the forward's test
// (test_cuda_moe_layer.cpp). [sanitize]: the small cases.
//
// Needs VirtualRankLayer::combine_backward and dispatch_backward.
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "catch2_compat.hpp"
#include "moonep/cuda_moe_layer.hpp"
#include "support/cuda_moe_cases.hpp"

using namespace cuda_layer_test;
using moonep::cuda::VirtualRankMoeLayer;
using moonep::test::cuda_ok;

namespace {

constexpr double kUntouched = 3.5;

template <class T>
void backward_case(const std::string& name, const Step& s, int H, int O, Values v) {
  using W = moonep::weight_t<T>;
  INFO(name << " H=" << H << " H'=" << O << " bytes per value " << sizeof(T)
            << (v == Values::exact ? " exact" : " random"));
  const Config& c = s.c;
  PlannedStep ps;
  plan_on_gpu(s, ps);
  const MoeData<T> data = draw_data<T>(s, H, O, v, 43);
  const DirectGradients want = direct_gradients(s, data.x, data.w, data.grad_out, data.ex);
  const std::int64_t Q = std::int64_t{H} * O, epn = c.experts_per_rank();
  DeviceArray<T> x(flat(data.x)), P(flat(data.P)), out(flat(filled<T>(c, c.tokens * O, 0))),
      g(flat(data.grad_out)), gx(flat(filled<T>(c, c.tokens * H, kUntouched))),
      gP(flat(filled<T>(c, epn * Q, kUntouched)));
  DeviceArray<W> w(flat(data.w)), gw(flat(filled<W>(c, c.tokens * c.topk, kUntouched)));
  VirtualRankMoeLayer layer(*ps.planner, H, O, element_of<T>());
  layer.forward(x.p, w.p, P.p, out.p, nullptr);
  layer.backward(g.p, P.p, gx.p, gw.p, gP.p, nullptr);
  cuda_ok(cudaDeviceSynchronize());
  const double tol = tolerance<T>(v);
  compare_rows("grad_x", s, c.tokens, H, gx.get(), want.gx, tol, to<T>(kUntouched));
  compare_rows("grad_w", s, c.tokens, c.topk, gw.get(), want.gw, tol, W(kUntouched));
  // Every expert's gradient, all written: [R][epn][Q] is [E][Q], compared
  // as one "rank" of E rows.
  Step all = s;
  all.c.ranks = 1;
  all.tokens = {c.experts};
  compare_rows("grad_P", all, c.experts, Q, gP.get(), {want.gm}, tol, to<T>(kUntouched));
}

template <class T>
void all_cases(bool small) {
  for (const auto& [name, step] : moe_steps()) {
    for (Values v : {Values::exact, Values::random}) {
      backward_case<T>(name, step, 8, 12, v);
      if (!small) backward_case<T>(name, step, 5, 16, v);
      if (!small) backward_case<T>(name, step, 64, 40, v);
    }
  }
}

}  // namespace

TEST_CASE("cuda moe layer: backward matches the direct layer (float)", "[cuda_moe]") { all_cases<float>(false); }
TEST_CASE("cuda moe layer: backward matches the direct layer (double)", "[cuda_moe]") { all_cases<double>(false); }
TEST_CASE("cuda moe layer: backward matches the direct layer (bfloat16)", "[cuda_moe]") {
  all_cases<moonep::bf16>(false);
}
TEST_CASE("cuda moe layer: backward small cases for compute-sanitizer", "[cuda_moe][sanitize]") {
  all_cases<moonep::bf16>(true);
  all_cases<float>(true);
}

TEST_CASE("cuda moe layer: backward refuses an uncopied remote expert and a layer without training buffers",
          "[cuda_moe][sanitize]") {
  const Step s = uncopied_remote_step();
  PlannedStep ps;
  plan_on_gpu(s, ps);
  const int H = 2, O = 3;
  const std::vector<float> untouched(static_cast<std::size_t>(s.c.ranks * s.c.tokens * 8), 9.0f);
  DeviceArray<float> buf(untouched), gx(untouched);
  VirtualRankMoeLayer layer(*ps.planner, H, O, Element::f32);
  CHECK(input_error([&] { layer.backward(buf.p, buf.p, gx.p, gx.p, gx.p, nullptr); }) == uncopied_remote_error());
  cuda_ok(cudaDeviceSynchronize());
  CHECK(gx.get() == untouched);
  VirtualRankMoeLayer inference(*ps.planner, H, O, Element::f32, false);
  CHECK(input_error([&] { inference.backward(buf.p, buf.p, gx.p, gx.p, gx.p, nullptr); }) ==
        "moonep::cuda::VirtualRankMoeLayer::backward: the layer was made without training buffers");
}
