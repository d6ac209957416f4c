// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::cuda::VirtualRankExpertCopies (moonep/cuda_expert_copies.hpp)
// against fetch_reference and reduce_reference (moonep/layer_reference.hpp),
// bit for bit, on plans of the CUDA planner that equal the reference
// planner's on the same problem: copies are the owners' bits and unused
// slots stay untouched; reduce adds in increasing rank then slot (a case
// where another order gives other bits); float, double and bfloat16, Q
// whose rows are and are not 16-byte multiples; full, ragged, R = 1,
// B = epn and a B < epn that copies everything; fetch captured in a CUDA
// graph; the refusal of a plan with a remote expert that is not copied,
// with nothing written. [sanitize]: the small cases compute-sanitizer runs.
#include <cuda_runtime_api.h>

#include <string>
#include <utility>
#include <vector>

#include "catch2_compat.hpp"
#include "moonep/cuda_expert_copies.hpp"
#include "moonep/layer_reference.hpp"
#include "support/cuda_layer_support.hpp"
#include "support/cuda_moe_cases.hpp"
#include "support/layer_cases.hpp"

using namespace layer_test;
using namespace cuda_layer_test;
using moonep::cuda::VirtualRankExpertCopies;
using moonep::test::cuda_ok;

namespace {

template <class T>
std::size_t differing(const std::vector<T>& got, const std::vector<T>& want) {
  std::size_t bad = got.size() == want.size() ? 0 : 1;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) bad += same_bits(got[i], want[i]) ? 0 : 1;
  return bad;
}

// fetch and reduce of one step with experts of Q values, against the
// reference on the planner's own plan; `graph`: fetch replayed from a
// captured CUDA graph instead of called.
template <class T>
void copies_case(const std::string& name, const Step& s, std::int64_t Q, bool graph = false) {
  INFO(name << " Q=" << Q << " bytes per value " << sizeof(T) << " graph " << graph);
  const Config& c = s.c;
  const int epn = c.experts_per_rank(), B = c.copy_slots;
  PlannedStep ps;
  plan_on_gpu(s, ps);
  Draw draw(Values::random, 17);
  const std::vector<std::int32_t> all_e(c.ranks, epn), all_b(c.ranks, B);
  const PerRank<T> own = rows_of<T>(c, epn, Q, all_e, draw);
  PerRank<T> copies = filled<T>(c, B * Q, kSentinel);
  moonep::fetch_reference(ps.plan, Q, own, copies);
  VirtualRankExpertCopies ops(*ps.planner, Q, element_of<T>());
  CHECK(ops.params() == Q);
  DeviceArray<T> d_own(flat(own)), d_copies(flat(filled<T>(c, B * Q, kSentinel)));
  if (graph) {
    cudaStream_t stream;
    cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t g;
    cuda_ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    ops.fetch(d_own.p, d_copies.p, stream);
    cuda_ok(cudaStreamEndCapture(stream, &g));
    cudaGraphExec_t exec;
    cuda_ok(cudaGraphInstantiate(&exec, g, 0));
    cuda_ok(cudaGraphLaunch(exec, stream));
    cuda_ok(cudaStreamSynchronize(stream));
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
    cudaStreamDestroy(stream);
  } else {
    ops.fetch(d_own.p, d_copies.p, nullptr);
  }
  cuda_ok(cudaDeviceSynchronize());
  CHECK(differing(d_copies.get(), flat(copies)) == 0);

  const PerRank<T> grad_copies = rows_of<T>(c, B, Q, all_b, draw);
  PerRank<T> grad_own = rows_of<T>(c, epn, Q, all_e, draw);
  DeviceArray<T> d_gc(flat(grad_copies)), d_gown(flat(grad_own));
  moonep::reduce_reference(ps.plan, Q, grad_copies, grad_own);
  ops.reduce(d_gc.p, d_gown.p, nullptr);
  cuda_ok(cudaDeviceSynchronize());
  CHECK(differing(d_gown.get(), flat(grad_own)) == 0);
}

// The MoE layers' steps and one near the headline's shape.
std::vector<std::pair<std::string, Step>> all_steps() {
  std::vector<std::pair<std::string, Step>> steps = moe_steps();
  steps.emplace_back("headline-like", synthetic_step(Config{8, 64, 8, 256, 8, 16}, 2.0, 23, false));
  return steps;
}

template <class T>
void all_cases(bool small) {
  for (const auto& [name, step] : all_steps()) {
    if (small && step.c.tokens > 20) continue;
    for (std::int64_t Q : {std::int64_t{5}, std::int64_t{16}, std::int64_t{small ? 8 : 72}}) copies_case<T>(name, step, Q);
  }
}

}  // namespace

TEST_CASE("cuda expert copies: fetch and reduce match the reference bit for bit (float)", "[cuda_copies]") {
  all_cases<float>(false);
}
TEST_CASE("cuda expert copies: fetch and reduce match the reference bit for bit (double)", "[cuda_copies]") {
  all_cases<double>(false);
}
TEST_CASE("cuda expert copies: fetch and reduce match the reference bit for bit (bfloat16)", "[cuda_copies]") {
  all_cases<moonep::bf16>(false);
}
TEST_CASE("cuda expert copies: small cases for compute-sanitizer", "[cuda_copies][sanitize]") {
  all_cases<moonep::bf16>(true);
  all_cases<float>(true);
  copies_case<float>("graph", synthetic_step(Config{4, 16, 4, 12, 4, 4}, 1.5, 11, false), 16, true);
  copies_case<moonep::bf16>("graph", copy_everywhere_step(), 5, true);
}

TEST_CASE("cuda expert copies: reduce adds in increasing rank, then slot", "[cuda_copies][sanitize]") {
  const Step s = copy_everywhere_step();
  PlannedStep ps;
  plan_on_gpu(s, ps);
  // gP = 1, copies of expert 0 on ranks 1, 2, 3: 2^24, -2^24, 0. In
  // increasing d (1 + 2^24) rounds to 2^24, then 0, then 0; decreasing d
  // would give 1. Experts 1-3 have no copies and keep their bits.
  VirtualRankExpertCopies ops(*ps.planner, 1, Element::f32);
  DeviceArray<float> gp(std::vector<float>{1.0f, 5.0f, 6.0f, 7.0f});
  DeviceArray<float> gc(std::vector<float>{3.0f, 16777216.0f, -16777216.0f, 0.0f});
  ops.reduce(gc.p, gp.p, nullptr);
  cuda_ok(cudaDeviceSynchronize());
  CHECK(gp.get() == std::vector<float>{0.0f, 5.0f, 6.0f, 7.0f});
}

TEST_CASE("cuda expert copies: a remote expert without a copy is refused, nothing written", "[cuda_copies][sanitize]") {
  const Step s = uncopied_remote_step();
  const Config& c = s.c;
  PlannedStep ps;
  plan_on_gpu(s, ps);
  const std::string want = uncopied_remote_error();
  REQUIRE(want.find("rank 1 would run expert 1 ") != std::string::npos);
  VirtualRankExpertCopies ops(*ps.planner, 1, Element::f32);
  const std::vector<float> own_host = flat(filled<float>(c, 3, 1)), copies_host = flat(filled<float>(c, 1, 9));
  DeviceArray<float> own(own_host), copies(copies_host);
  CHECK(input_error([&] { ops.fetch(own.p, copies.p, nullptr); }) == want);
  CHECK(input_error([&] { ops.reduce(copies.p, own.p, nullptr); }) == want);
  CHECK(input_error([&] { ops.check_runnable(nullptr); }) == want);
  cuda_ok(cudaDeviceSynchronize());
  CHECK(copies.get() == copies_host);
  CHECK(own.get() == own_host);
  // The same planner's next plan that runs (B < epn, but every remote
  // expert copied) is accepted by the same object.
  const Step ok = make_step(c, Routing{{0, 1, 0, 2, 0, 1, 2, 2}, {3, 4, 3, 5, 3, 4, 4, 5}});
  moonep::test::DeviceRouting dr(c, ok.routing);
  ps.planner->plan(dr.topk(), nullptr, nullptr);
  REQUIRE(moonep::plan_difference(ps.planner->copy_out(nullptr), ok.plan) == "");
  CHECK(input_error([&] { ops.check_runnable(nullptr); }) == "(nothing thrown)");
}

TEST_CASE("cuda expert copies: Q < 1 and null buffers are refused", "[cuda_copies]") {
  moonep::cuda::VirtualRankPlanner planner(Config{2, 4, 2, 4, 2, 2});
  CHECK(input_error([&] { VirtualRankExpertCopies(planner, 0, Element::f32); }) ==
        "moonep::cuda::VirtualRankExpertCopies: Q must be at least 1, got 0");
  VirtualRankExpertCopies ops(planner, 4, Element::bf16);
  CHECK(ops.element() == Element::bf16);
  CHECK(input_error([&] { ops.fetch(nullptr, nullptr, nullptr); }) ==
        "moonep::cuda::VirtualRankExpertCopies::fetch: a buffer is null");
  CHECK(input_error([&] { ops.reduce(nullptr, nullptr, nullptr); }) ==
        "moonep::cuda::VirtualRankExpertCopies::reduce: a buffer is null");
}
