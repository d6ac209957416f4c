// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::cuda::GpuWorldExpertCopies and GpuWorldMoeLayer on a GPU world of
// one MPI process per rank (make_mpi_gpu_world), under mpirun: process r
// holds rank r (support/gpu_world_mpi_support.hpp). Every process makes the
// same host data for every rank (the same seeds), stages its own rank's,
// plans with the world and checks its rank's results:
//   copies  fetch against fetch_reference and reduce against
//           reduce_reference (increasing rank, then slot), bit for bit, on
//           the world's own plan (equal to the reference planner's);
//           float, bfloat16 (double on the small shapes); Q whose rows are
//           and are not 16-byte multiples; full and ragged steps, B = epn
//           and B < epn; the refusal of a remote expert that is not copied
//           on every process with nothing written (2 processes: the step
//           that needs it is for R = 2); processes that disagree on Q; a
//           process that does not enqueue its fetch, named by check().
//   layer   forward and backward against the direct layer
//           (support/layer_cases.hpp: plain loops, no plan, in double):
//           this rank's out, grad_x, grad_w and its experts' gradients;
//           exact data bit for bit in float, random within T's rounding;
//           the forward's parts in one CUDA graph per process (the fetch on
//           a branch of its own), replayed; the refusal of an unrunnable
//           plan on every process.
// Run under mpirun with 1, 2 and 4 processes (R = 1: no copies to fetch,
// nothing remote). [sanitize]: the small cases compute-sanitizer runs.
//
// Every comparison is a CHECK, never a REQUIRE, inside the collective
// parts: a process that left a case early would leave the others waiting
// in the next collective call.
#include <mpi.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "catch2_compat.hpp"
#include "moonep/bf16.hpp"
#include "moonep/error.hpp"
#include "moonep/gpu_world_expert_copies.hpp"
#include "moonep/gpu_world_moe_layer.hpp"
#include "moonep/layer_reference.hpp"
#include "support/cuda_moe_cases.hpp"
#include "support/gpu_world_support.hpp"
#include "support/gpu_world_mpi_support.hpp"
#include "support/ragged_steps.hpp"

namespace {

using namespace cuda_layer_test;
using namespace gpu_world_mpi_test;
using gpu_world_test::ForwardGraph;
using moonep::PerRank;
using moonep::cuda::Element;
using moonep::cuda::GpuWorldExpertCopies;
using moonep::cuda::GpuWorldMoeLayer;

// The steps for R = the number of processes: full and ragged (B = epn), a
// B < epn one and one whose tokens name experts of one rank only.
std::vector<std::pair<std::string, Step>> steps_for(int R, bool small) {
  std::vector<std::pair<std::string, Step>> all;
  all.emplace_back("full", synthetic_step(Config{R, 4 * R, 4, 12, 4, 4}, 1.5, 11, false));
  if (small) return all;
  all.emplace_back("ragged", synthetic_step(Config{R, 4 * R, 4, 12, 4, 4}, 1.5, 12, true));
  all.emplace_back("B < epn", synthetic_step(Config{R, 4 * R, 3, 12, 2, 2}, 0.5, 22, false));
  all.emplace_back("one rank per token", one_rank_step(Config{R, 2 * R, 6, 10, 2, 3}, 14));
  return all;
}

// The world plans this process's rank of `s` (its routing padded to S*K
// and, ragged, its count); the plan must be the reference's.
moonep::HostPlan plan_step(GpuWorld& world, const Step& s) {
  const bool ragged = s.tokens != TokensPerRank(s.c.ranks, s.c.tokens);
  const MyStep step(world, s.c, ragged ? moonep::test::padded_to_full(s.c, s.routing) : s.routing,
                    ragged ? &s.tokens : nullptr);
  CHECK(moonep::plan_difference(step.plan, s.plan) == "");
  return step.plan;
}

// The reference's refusal of `s`'s plan for fetch, or "" when it runs.
std::string reference_refusal(const Step& s) {
  PerRank<float> own(s.c.ranks, std::vector<float>(static_cast<std::size_t>(s.c.experts_per_rank())));
  PerRank<float> copies(s.c.ranks, std::vector<float>(static_cast<std::size_t>(s.c.copy_slots)));
  try {
    moonep::fetch_reference(s.plan, 1, own, copies);
  } catch (const moonep::InputError& e) {
    return e.what();
  }
  return "";
}

template <class T>
PerRank<T> drawn(const Config& c, std::int64_t n, std::uint64_t seed) {
  Draw draw(Values::random, seed);
  PerRank<T> a(c.ranks, std::vector<T>(static_cast<std::size_t>(n)));
  for (auto& rank : a)
    for (auto& v : rank) v = to<T>(draw.row_value());
  return a;
}

// fetch and reduce of one step against the references, this rank's part.
template <class T>
void copies_case(const std::string& name, const Step& s, std::int64_t Q) {
  INFO(name << " Q=" << Q << " bytes per value " << sizeof(T) << " process " << world_rank());
  const Config& c = s.c;
  const int R = c.ranks, me = world_rank();
  const std::int64_t epn = c.experts_per_rank(), B = c.copy_slots;
  auto world = make_world(c, 60);
  const moonep::HostPlan plan = plan_step(*world, s);
  GpuWorldExpertCopies copies(*world, Q, element_of<T>(), true);
  const PerRank<T> own = drawn<T>(c, epn * Q, 3);
  PerRank<T> copies_ref(R, std::vector<T>(static_cast<std::size_t>(B * Q), to<T>(kSentinel)));
  put(copies.experts(me), own[me]);
  put(copies.copies(me), copies_ref[me]);
  const std::string refusal = reference_refusal(s);
  sync_all();
  if (!refusal.empty()) {
    // Every process refuses alike, nothing written.
    CHECK(caught([&] { copies.fetch(nullptr); }) == refusal);
    cuda_ok(cudaDeviceSynchronize());
    CHECK(wrong_bits(get<T>(copies.copies(me), static_cast<std::size_t>(B * Q)), copies_ref[me]) == 0);
    CHECK_NOTHROW(copies.check());
    return;
  }
  moonep::fetch_reference(plan, Q, own, copies_ref);
  copies.fetch(nullptr);
  cuda_ok(cudaDeviceSynchronize());
  std::string first;
  CHECK(wrong_bits(get<T>(copies.copies(me), static_cast<std::size_t>(B * Q)), copies_ref[me], &first) == 0);
  INFO("fetch: first wrong " << first);
  CHECK(wrong_bits(get<T>(copies.experts(me), static_cast<std::size_t>(epn * Q)), own[me]) == 0);

  // reduce: every copier's gradients into the owners' (this rank's).
  const PerRank<T> grad_copies = drawn<T>(c, B * Q, 5);
  PerRank<T> grad_ref = drawn<T>(c, epn * Q, 6);
  MyBuffer<T> grad_experts(R, grad_ref[me]);
  put(copies.grad_copies(me), grad_copies[me]);
  moonep::reduce_reference(plan, Q, grad_copies, grad_ref);
  sync_all();
  copies.reduce(grad_experts.data(), nullptr);
  cuda_ok(cudaDeviceSynchronize());
  CHECK(wrong_bits(grad_experts.get(), grad_ref[me], &first) == 0);
  INFO("reduce: first wrong " << first);
  CHECK_NOTHROW(copies.check());
}

template <class T>
void copies_cases(bool small) {
  for (const auto& [name, s] : steps_for(world_size(), small))
    for (std::int64_t Q : {std::int64_t{8}, std::int64_t{5}}) copies_case<T>(name, s, Q);
}

}  // namespace

TEST_CASE("mpi gpu world expert copies: fetch and reduce match the reference bit for bit", "[gpu_world_moe][mpi]") {
  copies_cases<float>(false);
  copies_cases<moonep::bf16>(false);
  copies_cases<double>(true);
}

TEST_CASE("mpi gpu world expert copies: small cases for compute-sanitizer", "[gpu_world_moe][mpi][sanitize]") {
  copies_cases<moonep::bf16>(true);
  copies_cases<float>(true);
}

TEST_CASE("mpi gpu world expert copies: a remote expert without a copy is refused on every process, nothing written",
          "[gpu_world_moe][mpi]") {
  if (world_size() != 2) return;  // the step is for R = 2
  const Step s = uncopied_remote_step();
  REQUIRE(reference_refusal(s) == uncopied_remote_error());
  copies_case<float>("uncopied remote expert", s, 4);
}

TEST_CASE("mpi gpu world expert copies: processes that disagree on Q all throw the same InputError; a process that "
          "does not fetch is named by every process",
          "[gpu_world_moe][mpi]") {
  const int R = world_size(), me = world_rank();
  if (R < 2) return;
  const Step s = synthetic_step(Config{R, 4 * R, 4, 12, 4, 4}, 1.5, 11, false);
  auto world = make_world(s.c, 1);
  plan_step(*world, s);
  const std::string message = caught([&] { GpuWorldExpertCopies bad(*world, me == 1 ? 6 : 4, Element::f32); });
  CHECK(message.rfind("moonep::cuda::GpuWorldExpertCopies: the processes disagree on Q: 4 on ", 0) == 0);
  CHECK(message.find(" and 6 on rank 1 (every process constructs the expert copies with the same Q, type and "
                     "training)") != std::string::npos);
  GpuWorldExpertCopies copies(*world, 4, Element::f32);
  sync_all();
  if (me != 1) copies.fetch(nullptr);
  const std::string late = caught([&] { copies.check(); });
  INFO(late);
  CHECK(late.rfind("moonep::cuda::GpuWorldExpertCopies: rank 0 waited 1 s in vain for rank 1 at fetch (before the "
                   "copies are read from their owners)",
                   0) == 0);
  CHECK(late.find("rank 1 waited") == std::string::npos);
  CHECK(late.find("and the expert copies reset") != std::string::npos);
  // Usable again.
  sync_all();
  copies.fetch(nullptr);
  CHECK_NOTHROW(copies.check());
}

namespace {

constexpr double kUntouched = 3.5;

// Rows [rows][width] of this rank against want (rows t < s_me within the
// tolerance, the rest still `untouched`).
template <class V>
void compare_mine(const char* what, const Step& s, std::int64_t rows, std::int64_t width, const std::vector<V>& got,
                  const std::vector<std::vector<double>>& want, double rel, V untouched) {
  compare_rows(what, s, rows, width, got, want, rel, untouched, world_rank());
}

template <class T>
void layer_case(const std::string& name, const Step& s, int H, int O, Values v, bool graph) {
  using W = moonep::weight_t<T>;
  INFO(name << " H=" << H << " H'=" << O << " bytes per value " << sizeof(T)
            << (v == Values::exact ? " exact" : " random") << " graph " << graph << " process " << world_rank());
  const Config& c = s.c;
  const int R = c.ranks, me = world_rank();
  const std::int64_t S = c.tokens, K = c.topk, epn = c.experts_per_rank(), Q = std::int64_t{H} * O;
  auto world = make_world(c, 60);
  plan_step(*world, s);
  const MoeData<T> data = draw_data<T>(s, H, O, v, 41);
  GpuWorldMoeLayer layer(*world, H, O, element_of<T>(), !graph);
  put(layer.experts(me), data.P[me]);
  MyBuffer<T> x(R, data.x[me]), out(R, std::vector<T>(static_cast<std::size_t>(S * O), to<T>(kUntouched)));
  MyBuffer<W> w(R, data.w[me]);
  const std::string refusal = reference_refusal(s);
  sync_all();
  if (!refusal.empty()) {
    CHECK(caught([&] { layer.forward(x.cdata(), w.cdata(), out.data(), nullptr); }) == refusal);
    cuda_ok(cudaDeviceSynchronize());
    CHECK(wrong_bits(out.get(), std::vector<T>(static_cast<std::size_t>(S * O), to<T>(kUntouched))) == 0);
    CHECK_NOTHROW(layer.check());
    return;
  }
  const double tol = tolerance<T>(v);
  const auto want = direct_out(s, H, data.x, &data.w, &data.ex);
  if (graph) {
    ForwardGraph::replay(layer, x.cdata(), w.cdata(), out.data(), 2);
    compare_mine("out (graph)", s, S, O, out.get(), want, tol, to<T>(kUntouched));
    CHECK_NOTHROW(layer.check());
    return;
  }
  layer.forward(x.cdata(), w.cdata(), out.data(), nullptr);
  cuda_ok(cudaDeviceSynchronize());
  compare_mine("out", s, S, O, out.get(), want, tol, to<T>(kUntouched));

  const DirectGradients grads = direct_gradients(s, data.x, data.w, data.grad_out, data.ex);
  MyBuffer<T> g(R, data.grad_out[me]), gx(R, std::vector<T>(static_cast<std::size_t>(S * H), to<T>(kUntouched))),
      gP(R, std::vector<T>(static_cast<std::size_t>(epn * Q), to<T>(kUntouched)));
  MyBuffer<W> gw(R, std::vector<W>(static_cast<std::size_t>(S * K), W(kUntouched)));
  sync_all();
  layer.backward(g.cdata(), gx.data(), gw.data(), gP.data(), nullptr);
  cuda_ok(cudaDeviceSynchronize());
  compare_mine("grad_x", s, S, H, gx.get(), grads.gx, tol, to<T>(kUntouched));
  compare_mine("grad_w", s, S, K, gw.get(), grads.gw, tol, W(kUntouched));
  // This rank's experts' gradients [epn][Q], all written: compared as the
  // rows of one rank of a step whose every rank has epn "tokens".
  Step experts_step = s;
  experts_step.tokens.assign(static_cast<std::size_t>(R), static_cast<std::int32_t>(epn));
  std::vector<std::vector<double>> want_gm(static_cast<std::size_t>(R));
  for (int r = 0; r < R; ++r)
    want_gm[r].assign(grads.gm.begin() + r * epn * Q, grads.gm.begin() + (r + 1) * epn * Q);
  compare_mine("grad_experts", experts_step, epn, Q, gP.get(), want_gm, tol, to<T>(kUntouched));
  CHECK_NOTHROW(layer.check());
}

template <class T>
void layer_cases(bool small) {
  for (const auto& [name, s] : steps_for(world_size(), small)) {
    layer_case<T>(name, s, 8, 8, Values::exact, false);
    if (small) continue;
    layer_case<T>(name, s, 5, 3, Values::random, false);
  }
}

}  // namespace

TEST_CASE("mpi gpu world MoE layer: forward and backward equal the direct layer", "[gpu_world_moe][mpi]") {
  layer_cases<float>(false);
  layer_cases<moonep::bf16>(false);
  layer_cases<double>(true);
}

TEST_CASE("mpi gpu world MoE layer: small cases for compute-sanitizer", "[gpu_world_moe][mpi][sanitize]") {
  layer_cases<float>(true);
}

TEST_CASE("mpi gpu world MoE layer: the forward's parts in one CUDA graph per process, replayed",
          "[gpu_world_moe][mpi][graph]") {
  const Step s = synthetic_step(Config{world_size(), 4 * world_size(), 4, 12, 4, 4}, 1.5, 11, false);
  layer_case<float>("graph", s, 8, 8, Values::exact, true);
}

TEST_CASE("mpi gpu world MoE layer: an unrunnable plan is refused on every process, nothing written",
          "[gpu_world_moe][mpi]") {
  if (world_size() != 2) return;  // the step is for R = 2
  layer_case<float>("uncopied remote expert", uncopied_remote_step(), 4, 4, Values::exact, false);
}
