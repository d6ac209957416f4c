// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::cuda::VirtualRankMoeLayer::forward (moonep/cuda_moe_layer.hpp)
// against the direct layer (support/layer_cases.hpp: plain loops over every
// token and its K experts, no plan, in double): out = sum_k w * (x @ M_e),
// exactly for exact data in float and double, within T's rounding
// otherwise; rows past s_r untouched. Full and ragged steps, R = 1,
// B = epn, B < epn (one slot, and copying everything), every entry copied
// to every rank; rows of 16-byte multiples and not; the parts captured in a
// CUDA graph; a plan with a remote expert that is not copied refused with
// nothing written. [sanitize]: the small cases compute-sanitizer runs.
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
void forward_case(const std::string& name, const Step& s, int H, int O, Values v, bool graph = false) {
  INFO(name << " H=" << H << " H'=" << O << " bytes per value " << sizeof(T)
            << (v == Values::exact ? " exact" : " random") << " graph " << graph);
  const Config& c = s.c;
  PlannedStep ps;
  plan_on_gpu(s, ps);
  const MoeData<T> data = draw_data<T>(s, H, O, v, 41);
  const auto want = direct_out(s, H, data.x, &data.w, &data.ex);
  DeviceArray<T> x(flat(data.x)), P(flat(data.P)), out(flat(filled<T>(c, c.tokens * O, kUntouched)));
  DeviceArray<moonep::weight_t<T>> w(flat(data.w));
  VirtualRankMoeLayer layer(*ps.planner, H, O, element_of<T>(), /*training=*/false);
  CHECK(layer.params() == std::int64_t{H} * O);
  if (graph) {
    cudaStream_t stream;
    cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    layer.read_groups(stream);
    cudaGraph_t g;
    cuda_ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    layer.enqueue_fetch(P.p, stream);
    layer.enqueue_dispatch(x.p, w.p, stream);
    layer.enqueue_gemms(P.p, stream);
    layer.enqueue_combine(out.p, stream);
    cuda_ok(cudaStreamEndCapture(stream, &g));
    cudaGraphExec_t exec;
    cuda_ok(cudaGraphInstantiate(&exec, g, 0));
    for (int replay = 0; replay < 2; ++replay) cuda_ok(cudaGraphLaunch(exec, stream));
    cuda_ok(cudaStreamSynchronize(stream));
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
    cudaStreamDestroy(stream);
  } else {
    layer.forward(x.p, w.p, P.p, out.p, nullptr);
  }
  cuda_ok(cudaDeviceSynchronize());
  compare_rows("out", s, c.tokens, O, out.get(), want, tolerance<T>(v), to<T>(kUntouched));
}

template <class T>
void all_cases(bool small) {
  for (const auto& [name, step] : moe_steps()) {
    for (Values v : {Values::exact, Values::random}) {
      forward_case<T>(name, step, 8, 12, v);  // rows of 16-byte multiples in H for bf16 (not in H')
      if (!small) forward_case<T>(name, step, 5, 16, v);
      if (!small) forward_case<T>(name, step, 64, 40, v);
    }
  }
}

}  // namespace

TEST_CASE("cuda moe layer: forward matches the direct layer (float)", "[cuda_moe]") { all_cases<float>(false); }
TEST_CASE("cuda moe layer: forward matches the direct layer (double)", "[cuda_moe]") { all_cases<double>(false); }
TEST_CASE("cuda moe layer: forward matches the direct layer (bfloat16)", "[cuda_moe]") {
  all_cases<moonep::bf16>(false);
}
TEST_CASE("cuda moe layer: small cases for compute-sanitizer", "[cuda_moe][sanitize]") {
  all_cases<moonep::bf16>(true);
  all_cases<float>(true);
}
TEST_CASE("cuda moe layer: the forward's parts replay from a CUDA graph", "[cuda_moe][sanitize]") {
  forward_case<float>("graph", synthetic_step(Config{4, 16, 4, 12, 4, 4}, 1.5, 11, false), 8, 12, Values::exact, true);
  forward_case<moonep::bf16>("graph", copy_everywhere_step(), 16, 8, Values::random, true);
}

TEST_CASE("cuda moe layer: a remote expert without a copy is refused, nothing written", "[cuda_moe][sanitize]") {
  const Step s = uncopied_remote_step();
  const Config& c = s.c;
  PlannedStep ps;
  plan_on_gpu(s, ps);
  const std::string want = uncopied_remote_error();
  REQUIRE(want.find("rank 1 would run expert 1 ") != std::string::npos);
  const int H = 2, O = 3;
  const MoeData<float> data = draw_data<float>(s, H, O, Values::exact, 3);
  const std::vector<float> out_host = flat(filled<float>(c, c.tokens * O, kUntouched));
  DeviceArray<float> x(flat(data.x)), w(flat(data.w)), P(flat(data.P)), out(out_host);
  VirtualRankMoeLayer layer(*ps.planner, H, O, Element::f32);
  CHECK(input_error([&] { layer.forward(x.p, w.p, P.p, out.p, nullptr); }) == want);
  CHECK(input_error([&] { layer.read_groups(nullptr); }) == want);
  CHECK(input_error([&] { layer.enqueue_gemms(P.p, nullptr); }) ==
        "moonep::cuda::VirtualRankMoeLayer: read_groups() has not run for this plan");
  cuda_ok(cudaDeviceSynchronize());
  CHECK(out.get() == out_host);
  std::vector<float> recv(static_cast<std::size_t>(c.ranks * c.slots() * H), 1.0f);
  cuda_ok(cudaMemcpy(recv.data(), layer.recv(), recv.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(recv == std::vector<float>(recv.size(), 0.0f));  // dispatch did not run
}

TEST_CASE("cuda moe layer: H or H' below 1 is refused", "[cuda_moe]") {
  moonep::cuda::VirtualRankPlanner planner(Config{2, 4, 2, 4, 2, 2});
  CHECK(input_error([&] { VirtualRankMoeLayer(planner, 0, 4, Element::f32); }) ==
        "moonep::cuda::VirtualRankMoeLayer: H must be at least 1, got 0");
  CHECK(input_error([&] { VirtualRankMoeLayer(planner, 4, 0, Element::f32); }) ==
        "moonep::cuda::VirtualRankMoeLayer: H' must be at least 1, got 0");
}
