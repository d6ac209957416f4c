// The adapter behind Planner<Kokkos::Cuda> (moonep/impl/cuda_dispatch.hpp)
// on a real GPU, without a CUDA-enabled Kokkos.
//
// No Kokkos with the CUDA backend is available to us (Debian's is Serial
// only), so this test compiles the adapter's Kokkos::Cuda specialization
// against a STAND-IN: Kokkos::Cuda below is an execution-space-shaped class
// with the one member the adapter calls (cuda_stream()), and CudaSpace is
// HostSpace. The adapter only passes views' data() and extent() through and
// wraps the CUDA planner's device buffers in unmanaged views, so host-space
// views over device pointers behave the same here: nothing dereferences
// them on the host. What this proves: the adapter's own code (shape checks,
// world check, aliasing of the plan views, stream hand-off, errors) compiles
// and plans correctly. What it cannot prove: that it compiles against the
// real Kokkos::Cuda / CudaSpace of Kokkos 4.x or 5.x.
#include <Kokkos_Core.hpp>
#include <cuda_runtime_api.h>

#if defined(KOKKOS_ENABLE_CUDA)
#error "test_cuda_dispatch.cpp stands in for Kokkos::Cuda; with a CUDA-enabled Kokkos test Planner<Kokkos::Cuda> instead"
#endif

namespace Kokkos {
class Cuda {
 public:
  using memory_space = HostSpace;
  explicit Cuda(cudaStream_t s = nullptr) : stream_(s) {}
  cudaStream_t cuda_stream() const { return stream_; }

 private:
  cudaStream_t stream_;
};
using CudaSpace = HostSpace;
}  // namespace Kokkos
#define KOKKOS_ENABLE_CUDA 1
#include "moonep/impl/cuda_dispatch.hpp"
#undef KOKKOS_ENABLE_CUDA

#include <cstdint>
#include <string>
#include <vector>

#include "catch2_compat.hpp"
#include "moonep/error.hpp"
#include "moonep/reference.hpp"
#include "moonep/synthetic.hpp"

namespace {

using moonep::Config;
using Dispatch = moonep::impl::CudaDispatch<Kokkos::Cuda>;
using InputView = Dispatch::input_view;
using PlanView = moonep::impl::RankPlanView<Kokkos::CudaSpace>;

void cuda_ok(cudaError_t err) {
  if (err != cudaSuccess) FAIL(std::string("CUDA: ") + cudaGetErrorString(err));
}

// Rank arrays in device memory, and unmanaged views over them.
struct DeviceArrays {
  std::vector<std::int32_t*> ptrs;
  std::vector<InputView> views;
  explicit DeviceArrays(const std::vector<std::vector<std::int32_t>>& rows) {
    for (const auto& row : rows) {
      std::int32_t* d = nullptr;
      cuda_ok(cudaMalloc(reinterpret_cast<void**>(&d), row.size() * 4 + 4));
      cuda_ok(cudaMemcpy(d, row.data(), row.size() * 4, cudaMemcpyHostToDevice));
      ptrs.push_back(d);
      views.emplace_back(d, row.size());
    }
  }
  ~DeviceArrays() {
    for (auto* p : ptrs) cudaFree(p);
  }
};

std::vector<std::int32_t> fetch(const std::int32_t* d, std::int64_t n) {
  std::vector<std::int32_t> h(static_cast<std::size_t>(n));
  if (n > 0) cuda_ok(cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost));
  return h;
}

// The plan the adapter's views point at, copied to the host.
moonep::HostPlan fetch_plan(const Config& c, const std::vector<PlanView>& out) {
  moonep::HostPlan plan;
  plan.config = c;
  for (const PlanView& v : out) {
    moonep::HostRankPlan h;
    h.dst = fetch(v.dst.data(), c.entries());
    h.cu_seqlens = fetch(v.cu_seqlens.data(), c.groups());
    h.zero_fill_ranges = fetch(v.zero_fill_ranges.data(), 2LL * c.groups());
    h.experts_to_copy = fetch(v.experts_to_copy.data(), static_cast<std::int64_t>(c.ranks) * c.copy_slots);
    h.remote_stats = fetch(v.remote_stats.data(), 2);
    h.src_info = fetch(v.src_info.data(), c.slots());
    h.dup_counts = fetch(v.dup_counts.data(), 2);
    h.dup_groups = fetch(v.dup_groups.data(), 3LL * h.dup_counts[0]);
    h.dup_loffs = fetch(v.dup_loffs.data(), h.dup_counts[1]);
    plan.ranks.push_back(std::move(h));
  }
  return plan;
}

std::vector<PlanView> rank_views(const Config& c) {
  std::vector<PlanView> out(c.ranks);
  for (int r = 0; r < c.ranks; ++r) out[r].rank = r;
  return out;
}

}  // namespace

TEST_CASE("CudaDispatch<Kokkos::Cuda> (stand-in Kokkos::Cuda) plans through the CUDA planner", "[cuda]") {
  const Config c{4, 32, 4, 256, 4, 8};
  const moonep::Routing routing = moonep::synthetic_routing(c, 1.0, 17);
  const moonep::TokensPerExpert tpe = moonep::count_tokens_per_expert(c, routing);
  DeviceArrays topk(routing), counts(tpe);
  cudaStream_t stream = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const Kokkos::Cuda exec(stream);
  moonep::InProcessWorld<Kokkos::CudaSpace> world(c.ranks);
  std::vector<PlanView> out = rank_views(c);
  Dispatch dispatch;

  // The plan views end up on the CUDA planner's buffers, and hold the
  // reference plan; given tokens_per_expert are passed on and checked.
  REQUIRE(dispatch.try_plan(c, world, exec, topk.views, nullptr, out));
  REQUIRE(moonep::plan_difference(fetch_plan(c, out), moonep::plan_reference(c, routing)) == "");
  REQUIRE(dispatch.try_plan(c, world, exec, topk.views, &counts.views, out));
  REQUIRE(moonep::plan_difference(fetch_plan(c, out), moonep::plan_reference(c, routing)) == "");

  // Host-side shape errors name the array; a bad expert id found in the
  // kernel is an InputError; the adapter stays usable after both.
  std::vector<InputView> short_routing = topk.views;
  short_routing.pop_back();
  REQUIRE_THROWS_WITH(dispatch.try_plan(c, world, exec, short_routing, nullptr, out),
                      "routing has 3 rank arrays, expected ranks = 4");
  std::vector<InputView> cut = topk.views;
  cut[2] = InputView(topk.ptrs[2], c.entries() - 1);
  REQUIRE_THROWS_WITH(dispatch.try_plan(c, world, exec, cut, nullptr, out),
                      "routing[2] has 1023 entries, expected tokens*topk = 1024");
  const std::int32_t bad = 99;
  cuda_ok(cudaMemcpy(topk.ptrs[1] + 5, &bad, 4, cudaMemcpyHostToDevice));
  REQUIRE_THROWS_WITH(dispatch.try_plan(c, world, exec, topk.views, nullptr, out),
                      "routing[1][5] = 99 is not an expert id in [0, 32)");
  cuda_ok(cudaMemcpy(topk.ptrs[1] + 5, &routing[1][5], 4, cudaMemcpyHostToDevice));
  REQUIRE(dispatch.try_plan(c, world, exec, topk.views, nullptr, out));
  REQUIRE(moonep::plan_difference(fetch_plan(c, out), moonep::plan_reference(c, routing)) == "");
  cuda_ok(cudaStreamDestroy(stream));
}
