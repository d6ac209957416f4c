// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A linear MoE layer on R virtual ranks in one process, driven by MoonEP:
//
//   routing -> plan (moonep::Planner over an InProcessWorld)
//   -> moonep::InProcessMoeLayer: fetch the copied experts, dispatch, one
//      GEMM per group, combine; backward: combine's backward, the GEMMs'
//      backward, dispatch's backward, reduce the copies' gradients
//
// and the same layer computed directly (direct_layer.hpp). In a MoonEP
// built with CUDA the layer runs on a GPU world instead
// (gpu_world_layer.hpp: moonep::cuda::GpuWorld plans, GpuWorldMoeLayer runs
// it with cuBLAS GEMMs), and the example exits 77 (CTest: skipped) where no
// GPU is visible. Prints a short report and exits 1 when out, gX, gw or any
// expert's gradient differs from the direct layer by more than 1e-12
// (relative to the largest value), so CTest fails on a wrong plan or a
// wrong use of it.
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <moonep/moe_layer.hpp>
#include <moonep/moonep.hpp>

#include "direct_layer.hpp"
#include "moe_data.hpp"
#if MOONEP_HAVE_CUDA
#include "gpu_world_layer.hpp"
#endif

namespace {

using namespace moe;

// max |got - want| / max |want| (infinite for a NaN).
template <class Got>
double relative_error(const Got& got_view, const HostArray3& want) {
  const auto got = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), got_view);
  double err = 0, ref = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double diff = std::fabs(got.data()[i] - want.data()[i]);
    err = std::isnan(diff) ? INFINITY : std::max(err, diff);
    ref = std::max(ref, std::fabs(want.data()[i]));
  }
  return ref > 0 ? err / ref : INFINITY;
}

// The report's table: each rank's entries under plain EP, the slots it
// fills and the copies it fetches.
void print_ranks(const moonep::Config& c, const moonep::Routing& routing, const std::vector<moonep::HostRankPlan>& plan) {
  const int epn = c.experts_per_rank();
  std::printf("rank | plain EP | received | copies fetched\n");
  std::vector<long> before(c.ranks, 0);
  for (const auto& row : routing)
    for (const std::int32_t e : row) ++before[e / epn];
  for (int d = 0; d < c.ranks; ++d) {
    const moonep::HostRankPlan& h = plan[d];
    const long received = std::count_if(h.src_info.begin(), h.src_info.end(), [](std::int32_t v) { return v >= 0; });
    const long fetched = std::count_if(h.experts_to_copy.begin() + d * c.copy_slots,
                                       h.experts_to_copy.begin() + (d + 1) * c.copy_slots,
                                       [](std::int32_t e) { return e >= 0; });
    std::printf("%4d | %8ld | %8ld | %ld\n", d, before[d], received, fetched);
  }
}

int run() {
  // Small sizes: 4 ranks, 16 experts (4 per rank), top-4, 64 tokens per
  // rank, 2 copy slots, groups padded to 8 rows; H=32 -> H'=16, double.
  moonep::Config c;
  c.ranks = 4; c.experts = 16; c.topk = 4; c.tokens = 64; c.copy_slots = 2; c.token_padding = 8;
  const int H = 32, Hp = 16, epn = c.experts_per_rank();
  const moonep::Routing routing = moonep::synthetic_routing(c, /*imbalance=*/1.5, /*seed=*/3);
  const LayerData data = make_layer_data(c, H, Hp);
  const Array3 grad_out = make_layer_data(c, Hp, Hp).x;  // any d out [R][S][H']
  const Direct want = direct_layer(c, routing, data, grad_out);
  double errors[4];

#if MOONEP_HAVE_CUDA
  std::string why;
  if (!moonep::cuda::device_available(&why)) {
    std::printf("example_moe_layer: MoonEP has CUDA but no GPU is visible (%s): skipped\n", why.c_str());
    return 77;
  }
  const GpuWorldRun gpu = gpu_world_layer(c, routing, data, grad_out);
  std::printf("MoE layer: %s, H=%d H'=%d, a GPU world of %d ranks on GPU 0 (moonep::cuda::GpuWorldMoeLayer), "
              "cuBLAS GEMMs\n",
              moonep::describe(c).c_str(), H, Hp, c.ranks);
  print_ranks(c, routing, gpu.plan.ranks);
  errors[0] = relative_error(gpu.out, want.out), errors[1] = relative_error(gpu.gx, want.gx);
  errors[2] = relative_error(gpu.gw, want.gw), errors[3] = relative_error(gpu.gweights, want.gweights);
  (void)epn;
#else
  // Plan the step.
  std::vector<moonep::Planner<Exec>::input_view> routing_views;
  for (const auto& row : routing) {
    Kokkos::View<std::int32_t*, Mem> v("routing", row.size());
    Kokkos::deep_copy(v, Kokkos::View<const std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(
                             row.data(), row.size()));
    routing_views.push_back(v);
  }
  moonep::InProcessWorld<Mem> world(c.ranks);
  moonep::Planner<Exec> planner(c, world);
  const moonep::Plan<Mem>& plan = planner.plan(routing_views);

  // The layer, forward and backward. Rank h owns experts h*epn..: W
  // [E][H][H'] is P [R][epn][H*H'] as it lies in memory.
  moonep::InProcessMoeLayer<double, Exec> layer(c, H, Hp);
  const Kokkos::View<const double***, Kokkos::LayoutRight, Mem> experts(data.weights.data(), c.ranks, epn, H * Hp);
  Array3 out("out", c.ranks, c.tokens, Hp), gx("gX", c.ranks, c.tokens, H), gw("gw", c.ranks, c.tokens, c.topk);
  Array3 gweights("gW", c.experts, H, Hp);
  layer.forward(plan, data.x, data.w, experts, out);
  layer.backward(plan, grad_out, experts, gx, gw, Array3(gweights.data(), c.ranks, epn, H * Hp));
  Kokkos::fence();

  std::printf("MoE layer: %s, H=%d H'=%d, Kokkos %s, %s GEMMs\n", moonep::describe(c).c_str(), H, Hp, Exec::name(),
              layer.gemm_name());
  std::vector<moonep::HostRankPlan> ranks;
  for (int d = 0; d < c.ranks; ++d) ranks.push_back(plan.to_host(d));
  print_ranks(c, routing, ranks);
  errors[0] = relative_error(out, want.out), errors[1] = relative_error(gx, want.gx);
  errors[2] = relative_error(gw, want.gw), errors[3] = relative_error(gweights, want.gweights);
#endif
  std::printf("max |layer - direct| / max |direct|: out %.3g, gX %.3g, gw %.3g, gW %.3g (tolerance 1e-12): ",
              errors[0], errors[1], errors[2], errors[3]);
  const bool ok = std::all_of(std::begin(errors), std::end(errors), [](double e) { return e <= 1e-12; });
  std::printf("%s\n", ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char* argv[]) {
  Kokkos::initialize(argc, argv);
  int status = 1;
  try {
    status = run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "example_moe_layer: error: %s\n", e.what());
  }
  Kokkos::finalize();
  return status;
}
