// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::cuda::GpuWorldExpertCopies (moonep/gpu_world_expert_copies.hpp)
// against fetch_reference and reduce_reference (moonep/layer_reference.hpp),
// bit for bit, on the GPU world's own plans (which must equal the reference
// planner's on the same problem): every copy slot the owner's bits and
// unused slots untouched, the owners' parameters untouched; reduce adds in
// increasing rank then slot (a case where another order gives other bits);
// float, double and bfloat16, Q whose rows are and are not 16-byte
// multiples; full, ragged, R = 1, B = epn, a B < epn that copies
// everything; fetch and reduce captured in a CUDA graph, and a fetch on an
// origin of its own beside a dispatch; the refusal of a plan with a remote
// expert that is not copied, with nothing written; bad arguments. Every
// world on device 0 (support/gpu_world_support.hpp). [sanitize]: the
// small cases compute-sanitizer runs.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "catch2_compat.hpp"
#include "moonep/gpu_world.hpp"
#include "moonep/gpu_world_expert_copies.hpp"
#include "moonep/gpu_world_layer.hpp"
#include "moonep/layer_reference.hpp"
#include "support/cuda_layer_support.hpp"
#include "support/cuda_moe_cases.hpp"
#include "support/gpu_world_support.hpp"
#include "support/layer_cases.hpp"

using namespace layer_test;
using namespace cuda_layer_test;
using namespace gpu_world_test;
using moonep::cuda::GpuWorld;
using moonep::cuda::GpuWorldExpertCopies;
using moonep::test::cuda_ok;

namespace {

enum class Mode { call, graph };

// fetch and reduce of one step with experts of Q values, against the
// reference on the world's own plan.
template <class T>
void copies_case(const std::string& name, const Step& s, std::int64_t Q, Mode mode = Mode::call) {
  INFO(name << " Q=" << Q << " bytes per value " << sizeof(T) << " graph " << (mode == Mode::graph));
  const Config& c = s.c;
  const int R = c.ranks, epn = c.experts_per_rank(), B = c.copy_slots;
  WorldStep ws;
  plan_on_world(s, ws);
  Draw draw(Values::random, 17);
  const std::vector<std::int32_t> all_e(R, epn), all_b(R, B);
  const PerRank<T> own = rows_of<T>(c, epn, Q, all_e, draw);
  PerRank<T> copies = filled<T>(c, B * Q, kSentinel);
  moonep::fetch_reference(ws.plan, Q, own, copies);
  GpuWorldExpertCopies ops(*ws.world, Q, element_of<T>());
  CHECK(ops.params() == Q);
  CHECK(ops.element() == element_of<T>());
  put_slots([&](int d) { return ops.experts(d); }, own);
  put_slots([&](int d) { return ops.copies(d); }, filled<T>(c, B * Q, kSentinel));
  const PerRank<T> grad_copies = rows_of<T>(c, B, Q, all_b, draw);
  PerRank<T> grad_own = rows_of<T>(c, epn, Q, all_e, draw);
  put_slots([&](int d) { return ops.grad_copies(d); }, grad_copies);
  RankBuffers<T> d_gown(grad_own);
  moonep::reduce_reference(ws.plan, Q, grad_copies, grad_own);
  if (mode == Mode::graph) {
    const moonep::test::CapturedGraph graph([&](cudaStream_t origin) {
      ops.fetch(origin);
      ops.reduce(d_gown.data(), origin);
    });
    cuda_ok(cudaGraphLaunch(graph.exec(), graph.stream()));
    cuda_ok(cudaStreamSynchronize(graph.stream()));
  } else {
    ops.fetch(nullptr);
    ops.reduce(d_gown.data(), nullptr);
  }
  cuda_ok(cudaDeviceSynchronize());
  std::string first;
  CHECK(wrong_bits(get_slots<T>([&](int d) { return ops.copies(d); }, R, B * Q), copies, &first) == 0);
  INFO("first wrong " << first);
  CHECK(wrong_bits(get_slots<T>([&](int d) { return ops.experts(d); }, R, epn * Q), own) == 0);
  CHECK(wrong_bits(d_gown.get(), grad_own, &first) == 0);
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

TEST_CASE("gpu world expert copies: fetch and reduce match the reference bit for bit (float)",
          "[gpu_world_copies]") {
  all_cases<float>(false);
}
TEST_CASE("gpu world expert copies: fetch and reduce match the reference bit for bit (double)",
          "[gpu_world_copies]") {
  all_cases<double>(false);
}
TEST_CASE("gpu world expert copies: fetch and reduce match the reference bit for bit (bfloat16)",
          "[gpu_world_copies]") {
  all_cases<moonep::bf16>(false);
}
TEST_CASE("gpu world expert copies: small cases for compute-sanitizer", "[gpu_world_copies][sanitize]") {
  all_cases<moonep::bf16>(true);
  all_cases<float>(true);
}
TEST_CASE("gpu world expert copies: fetch and reduce replay from a CUDA graph", "[gpu_world_copies][sanitize]") {
  copies_case<float>("graph", synthetic_step(Config{4, 16, 4, 12, 4, 4}, 1.5, 11, false), 16, Mode::graph);
  copies_case<moonep::bf16>("graph", copy_everywhere_step(), 5, Mode::graph);
  copies_case<double>("graph", synthetic_step(Config{8, 64, 8, 256, 8, 16}, 2.0, 23, false), 72, Mode::graph);
}

// The fetch enqueued on an origin of its own right after the plan, a
// dispatch of the step's rows on another (the two overlap: the fetch runs
// on the copies' own rank streams); both results right.
TEST_CASE("gpu world expert copies: a fetch on its own origin beside a dispatch", "[gpu_world_copies][sanitize]") {
  const Step s = synthetic_step(Config{4, 16, 4, 12, 4, 4}, 1.5, 11, false);
  const Config& c = s.c;
  const int R = c.ranks, epn = c.experts_per_rank(), B = c.copy_slots, H = 8;
  const std::int64_t Q = 64;
  WorldStep ws;
  plan_on_world(s, ws);
  Draw draw(Values::random, 5);
  const PerRank<float> own = rows_of<float>(c, epn, Q, std::vector<std::int32_t>(R, epn), draw);
  PerRank<float> copies = filled<float>(c, B * Q, kSentinel);
  moonep::fetch_reference(ws.plan, Q, own, copies);
  const PerRank<float> x = rows_of<float>(c, c.tokens, H, s.tokens, draw);
  const PerRank<float> w = rows_of<float>(c, c.tokens, c.topk, s.tokens, draw, true);
  PerRank<float> recv(R, std::vector<float>(static_cast<std::size_t>(c.slots() * H)));
  PerRank<float> recv_w(R, std::vector<float>(static_cast<std::size_t>(c.slots())));
  moonep::dispatch_reference<float>(ws.plan, H, x, w, recv, recv_w);
  GpuWorldExpertCopies ops(*ws.world, Q, Element::f32, false);
  moonep::cuda::GpuWorldLayer layer(*ws.world, H, H, Element::f32);
  put_slots([&](int d) { return ops.experts(d); }, own);
  put_slots([&](int d) { return ops.copies(d); }, filled<float>(c, B * Q, kSentinel));
  RankBuffers<float> d_x(x), d_w(w);
  cudaStream_t fetch_origin, dispatch_origin;
  cuda_ok(cudaStreamCreateWithFlags(&fetch_origin, cudaStreamNonBlocking));
  cuda_ok(cudaStreamCreateWithFlags(&dispatch_origin, cudaStreamNonBlocking));
  ops.fetch(fetch_origin);
  layer.dispatch(d_x.cdata(), d_w.cdata(), dispatch_origin);
  cuda_ok(cudaStreamSynchronize(fetch_origin));
  cuda_ok(cudaStreamSynchronize(dispatch_origin));
  cuda_ok(cudaStreamDestroy(fetch_origin));
  cuda_ok(cudaStreamDestroy(dispatch_origin));
  CHECK(wrong_bits(get_slots<float>([&](int d) { return ops.copies(d); }, R, B * Q), copies) == 0);
  const PerRank<float> got = get_slots<float>([&](int d) { return layer.recv(d); }, R, c.slots() * H);
  CHECK(wrong_bits(got, recv) == 0);
}

TEST_CASE("gpu world expert copies: reduce adds in increasing rank, then slot", "[gpu_world_copies][sanitize]") {
  const Step s = copy_everywhere_step();
  WorldStep ws;
  plan_on_world(s, ws);
  // gP = 1, copies of expert 0 on ranks 1, 2, 3: 2^24, -2^24, 0. In
  // increasing d (1 + 2^24) rounds to 2^24, then 0, then 0; decreasing d
  // would give 1. Experts 1-3 have no copies and keep their bits; rank 0's
  // slot holds no copy (its 3 is never read).
  GpuWorldExpertCopies ops(*ws.world, 1, Element::f32);
  put_slots([&](int d) { return ops.grad_copies(d); },
            PerRank<float>{{3.0f}, {16777216.0f}, {-16777216.0f}, {0.0f}});
  RankBuffers<float> gp(PerRank<float>{{1.0f}, {5.0f}, {6.0f}, {7.0f}});
  ops.reduce(gp.data(), nullptr);
  cuda_ok(cudaDeviceSynchronize());
  CHECK(gp.get() == PerRank<float>{{0.0f}, {5.0f}, {6.0f}, {7.0f}});
}

TEST_CASE("gpu world expert copies: a remote expert without a copy is refused, nothing written",
          "[gpu_world_copies][sanitize]") {
  const Step s = uncopied_remote_step();
  const Config& c = s.c;
  WorldStep ws;
  plan_on_world(s, ws);
  const std::string want = uncopied_remote_error();
  REQUIRE(want.find("rank 1 would run expert 1 ") != std::string::npos);
  GpuWorldExpertCopies ops(*ws.world, 1, Element::f32);
  const PerRank<float> own = filled<float>(c, 3, 1), copies = filled<float>(c, 1, 9), gc = filled<float>(c, 1, 4);
  put_slots([&](int d) { return ops.experts(d); }, own);
  put_slots([&](int d) { return ops.copies(d); }, copies);
  put_slots([&](int d) { return ops.grad_copies(d); }, gc);
  RankBuffers<float> gp(own);
  CHECK(input_error([&] { ops.fetch(nullptr); }) == want);
  CHECK(input_error([&] { ops.reduce(gp.data(), nullptr); }) == want);
  CHECK(input_error([&] { ops.check_runnable(nullptr); }) == want);
  cuda_ok(cudaDeviceSynchronize());
  CHECK(get_slots<float>([&](int d) { return ops.copies(d); }, c.ranks, 1) == copies);
  CHECK(get_slots<float>([&](int d) { return ops.experts(d); }, c.ranks, 3) == own);
  CHECK(gp.get() == own);
  // The world's next plan that runs (B < epn, but every remote expert
  // copied) is accepted by the same object.
  const Step ok = make_step(c, Routing{{0, 1, 0, 2, 0, 1, 2, 2}, {3, 4, 3, 5, 3, 4, 4, 5}});
  moonep::test::DeviceRouting dr(c, ok.routing);
  ws.world->plan(dr.topk(), nullptr, nullptr);
  REQUIRE(moonep::plan_difference(ws.world->copy_out(), ok.plan) == "");
  CHECK(input_error([&] { ops.check_runnable(nullptr); }) == "(nothing thrown)");
}

TEST_CASE("gpu world expert copies: bad arguments are refused", "[gpu_world_copies]") {
  const Config c{2, 4, 2, 4, 2, 2};
  GpuWorld world(c, on_device_zero(2));
  CHECK(input_error([&] { GpuWorldExpertCopies(world, 0, Element::f32); }) ==
        "moonep::cuda::GpuWorldExpertCopies: Q must be at least 1, got 0");
  GpuWorldExpertCopies ops(world, 4, Element::bf16, false);
  CHECK(ops.element() == Element::bf16);
  CHECK(!ops.training());
  CHECK(input_error([&] { ops.experts(2); }) == "moonep::cuda::GpuWorldExpertCopies::experts: rank 2 is not in [0, 2)");
  CHECK(input_error([&] { ops.copies(-1); }) == "moonep::cuda::GpuWorldExpertCopies::copies: rank -1 is not in [0, 2)");
  CHECK(input_error([&] { ops.grad_copies(0); }) ==
        "moonep::cuda::GpuWorldExpertCopies::grad_copies: the object was not made for training (training = false)");
  RankBuffers<moonep::bf16> gp(2, 8);
  CHECK(input_error([&] { ops.reduce(gp.data(), nullptr); }) ==
        "moonep::cuda::GpuWorldExpertCopies::reduce: the object was not made for training (training = false)");
  GpuWorldExpertCopies trainer(world, 4, Element::f32);
  void* half[2] = {gp.p[0], nullptr};
  CHECK(input_error([&] { trainer.reduce(nullptr, nullptr); }) ==
        "moonep::cuda::GpuWorldExpertCopies::reduce: grad_experts is null");
  CHECK(input_error([&] { trainer.reduce(half, nullptr); }) ==
        "moonep::cuda::GpuWorldExpertCopies::reduce: grad_experts[1] is null");
  cuda_ok(cudaDeviceSynchronize());
  // Every buffer starts zeroed.
  CHECK(get_slots<float>([&](int d) { return trainer.copies(d); }, 2, 8) == PerRank<float>(2, std::vector<float>(8)));
}
