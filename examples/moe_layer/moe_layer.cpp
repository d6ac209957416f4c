// An MoE layer's expert step driven by a MoonEP plan, on R virtual ranks in
// one process:
//
//   routing -> plan (moonep::Planner over an InProcessWorld)
//   -> every destination rank: receive its rows in group order (receive.hpp),
//      fetch its copied experts' weights, one GEMM per group (expert_gemm.hpp)
//   -> every source rank: combine its tokens' K outputs (combine.hpp)
//
// and the same layer computed directly (direct_layer.hpp). Prints a short
// report and exits 1 when the two differ by more than 1e-12 (relative to the
// largest output), so CTest fails on a wrong plan or a wrong use of it.
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include <moonep/moonep.hpp>

#include "combine.hpp"
#include "direct_layer.hpp"
#include "expert_gemm.hpp"
#include "moe_data.hpp"
#include "receive.hpp"

namespace {

using namespace moe;

// Plain expert parallelism: entries each rank would receive (its experts'
// totals), the "before" of the report.
std::vector<long> plain_ep_load(const moonep::Config& c, const moonep::Routing& routing) {
  std::vector<long> load(c.ranks, 0);
  for (const auto& row : routing)
    for (const std::int32_t e : row) ++load[e / c.experts_per_rank()];
  return load;
}

double max_over_mean(const std::vector<long>& v) {
  double sum = 0, mx = 0;
  for (long x : v) {
    sum += static_cast<double>(x);
    mx = std::max(mx, static_cast<double>(x));
  }
  return mx / (sum / static_cast<double>(v.size()));
}

int run() {
  // Small sizes: 4 ranks, 16 experts (4 per rank), top-4, 64 tokens per
  // rank, 2 copy slots, groups padded to 8 rows; H=32 -> H'=16, double.
  moonep::Config c;
  c.ranks = 4; c.experts = 16; c.topk = 4; c.tokens = 64; c.copy_slots = 2; c.token_padding = 8;
  const int H = 32, Hp = 16;
  const moonep::Routing routing = moonep::synthetic_routing(c, /*imbalance=*/1.5, /*seed=*/3);
  const LayerData data = make_layer_data(c, H, Hp);

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

  // Expert step on every destination rank d.
  const std::int64_t nvs = c.slots();
  Array3 a("A", c.ranks, nvs, H);     // receive buffers
  Array3 y("Y", c.ranks, nvs, Hp);    // GEMM outputs
  Array3 copies("W_copies", c.copy_slots, H, Hp);  // one rank's copy slots, reused rank after rank
  std::printf("MoE expert step: %s, H=%d H'=%d, Kokkos %s\n", moonep::describe(c).c_str(), H, Hp, Exec::name());
  std::printf("rank | plain EP | received  dups  padding | fetched  GEMMs | unfilled rows\n");
  int bad_rows = 0;
  std::vector<long> received(c.ranks, 0);
  const std::vector<long> before = plain_ep_load(c, routing);
  for (int d = 0; d < c.ranks; ++d) {
    const moonep::HostRankPlan h = plan.to_host(d);  // small tables for the host-side GEMM loop
    const auto a_d = Kokkos::subview(a, d, Kokkos::ALL, Kokkos::ALL);
    const auto y_d = Kokkos::subview(y, d, Kokkos::ALL, Kokkos::ALL);
    receive_rows(c, plan.ranks[d], data.x, a_d);
    const int used = h.cu_seqlens[c.groups() - 1];
    const int unfilled = unfilled_rows(a_d, used);
    bad_rows += unfilled;
    const int fetched = fetch_copies(c, d, h.experts_to_copy, data.weights, copies);
    const GemmCount n = grouped_gemm(c, d, h.cu_seqlens, h.experts_to_copy, data.weights, copies, a_d, y_d);
    Kokkos::fence();  // the copy slots are reused by the next rank
    received[d] = std::count_if(h.src_info.begin(), h.src_info.end(), [](std::int32_t v) { return v >= 0; });
    long padding = 0;
    for (int g = 0; g < c.groups(); ++g) padding += h.zero_fill_ranges[2 * g + 1];
    std::printf("%4d | %8ld | %8ld %5d %8ld | %7d %6d | %d%s\n", d, before[d], received[d], h.dup_counts[1],
                padding, fetched, n.gemms, unfilled,
                n.remote_uncopied ? "  (remote experts without a copy slot)" : "");
  }
  std::printf("max/mean load: %.2f before (plain EP) -> %.2f after (planned)\n", max_over_mean(before),
              max_over_mean(received));

  // Combine on every source rank, and compare with the direct layer.
  Array3 out("out", c.ranks, c.tokens, Hp);
  for (int r = 0; r < c.ranks; ++r) combine(c, r, plan.ranks[r], data.w, y, out);
  Kokkos::fence();
  const auto got = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out);
  const HostArray3 want = direct_layer(c, routing, data);
  double max_err = 0, max_ref = 0;
  for (int r = 0; r < c.ranks; ++r)
    for (int s = 0; s < c.tokens; ++s)
      for (int o = 0; o < Hp; ++o) {
        const double diff = std::fabs(got(r, s, o) - want(r, s, o));
        max_err = std::isnan(diff) ? INFINITY : std::max(max_err, diff);
        max_ref = std::max(max_ref, std::fabs(want(r, s, o)));
      }
  const double rel = max_err / max_ref;
  const bool ok = rel <= 1e-12 && bad_rows == 0 && max_ref > 0;
  std::printf("max |planned - direct| / max |direct| = %.3g (tolerance 1e-12): %s\n", rel,
              ok ? "OK" : "MISMATCH");
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
