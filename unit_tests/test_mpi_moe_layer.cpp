// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The linear MoE layer over the MPI worlds (moonep/mpi_moe_layer.hpp,
// MpiMoeLayer: fetch, dispatch, a GEMM per group, combine, and the
// backward down to reduce) under mpirun, one rank per process, against the
// DIRECT layer (no plan; layer.md "The linear layer") that every process
// computes for the whole problem: this rank's out, gx, gw and its experts'
// gradients; exact data (quarters: every sum exact, so the results are the
// direct values' bits) and random data (tolerance); full and ragged steps
// (rows past s_r NaN, rows of out and gx past s_r untouched), R = 1 at
// np 1, B = epn, a smaller B that still copies everything; float, double,
// bfloat16; the planner's plan and a HostPlan. The refusal of a plan it
// cannot run and of views that do not fit: one line on every rank,
// nothing written.
#include "catch2_compat.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "moonep/mpi_moe_layer.hpp"
#include "mpi_test_support.hpp"
#include "support/mpi_layer_support.hpp"

using namespace layer_test;
using moonep::MpiLayerPlan;
using moonep::MpiMoeLayer;

namespace {

constexpr int kHidden = 4, kOut = 3;

// got equals the direct value: its bits when exact in float or double (a
// zero of either sign for a zero), else within tol * max(1, |want|).
// bfloat16 is never compared for bits: the layer rounds its intermediate
// rows (y, grad_y, grad_recv) to T, as the contract says, and the direct
// layer does not.
template <class V>
bool matches(V got, double want, Values values, double tol) {
  if (values == Values::exact && !std::is_same_v<V, moonep::bf16>)
    return want == 0 ? from(got) == 0 : same_bits(got, to<V>(want));
  return std::fabs(from(got) - want) <= tol * std::max(1.0, std::fabs(want));
}

Step runnable(const Config& c, double imbalance, std::uint64_t seed, bool ragged) {
  for (std::uint64_t s = seed; s < seed + 200; ++s) {
    Step step = synthetic_step(c, imbalance, s, ragged);
    if (refusal_of(step).empty()) return step;
  }
  FAIL("no runnable step of " << moonep::describe(c));
  return synthetic_step(c, imbalance, seed, ragged);
}

template <class T>
void moe_case(moonep::MpiWorld& world, const std::string& name, const Step& s, Values values, bool use_planner) {
  using W = moonep::weight_t<T>;
  const Config& c = s.c;
  const int me = world.rank(), epn = c.experts_per_rank(), q = kHidden * kOut, S = c.tokens, K = c.topk;
  INFO(name << (values == Values::exact ? ", exact data" : ", random data") << ", world "
            << moonep::to_string(world.kind()) << (use_planner ? ", planner's plan" : ", HostPlan"));
  MpiPlanner planner(c, world);
  if (use_planner) plan_mine(planner, s, me);
  const MpiLayerPlan plan = use_planner ? MpiLayerPlan(planner.last_plan()) : MpiLayerPlan(s.plan, me);
  MpiMoeLayer<T> layer(world, c, kHidden, kOut);

  const Experts ex = draw_experts(c, kHidden, kOut, values);
  Draw draw(values, 8);
  const PerRank<T> x = rows_of<T>(c, S, kHidden, s.tokens, draw);
  const PerRank<W> w = rows_of<W>(c, S, K, s.tokens, draw, true);
  const PerRank<T> g = rows_of<T>(c, S, kOut, s.tokens, draw);
  const auto p_v = host_rows(owner_parameters<T>(c, ex)[me], epn, q);
  const auto out_v = host_rows(filled<T>(c, std::int64_t{S} * kOut, kSentinel)[me], S, kOut);
  const auto gx_v = host_rows(filled<T>(c, std::int64_t{S} * kHidden, kSentinel)[me], S, kHidden);
  const auto gw_v = host_rows(filled<W>(c, c.entries(), kSentinel)[me], S, K);
  const auto gm_v = host_rows(filled<T>(c, std::int64_t{epn} * q, kSentinel)[me], epn, q);
  layer.forward(plan, host_rows(x[me], S, kHidden), host_rows(w[me], S, K), p_v, out_v);
  layer.backward(plan, host_rows(g[me], S, kOut), p_v, gx_v, gw_v, gm_v);

  const auto want_out = direct_out<T>(s, kHidden, x, &w, &ex);
  const DirectGradients want = direct_gradients<T>(s, x, w, g, ex);
  const double tol = std::is_same_v<T, moonep::bf16> ? 0.05 : 1e-5;
  for (int t = 0; t < S; ++t) {
    const bool valid = t < s.tokens[me];
    for (int o = 0; o < kOut; ++o)
      REQUIRE((valid ? matches(out_v(t, o), want_out[me][t * kOut + o], values, tol)
                     : same_bits(out_v(t, o), to<T>(kSentinel))));
    for (int h = 0; h < kHidden; ++h) {
      INFO("t " << t << " h " << h << " got " << from(gx_v(t, h)) << " want " << want.gx[me][t * kHidden + h]);
      REQUIRE((valid ? matches(gx_v(t, h), want.gx[me][t * kHidden + h], values, tol)
                     : same_bits(gx_v(t, h), to<T>(kSentinel))));
    }
    for (int k = 0; k < K; ++k)
      REQUIRE((valid ? matches(gw_v(t, k), want.gw[me][t * K + k], values, tol)
                     : same_bits(gw_v(t, k), to<W>(kSentinel))));
  }
  for (int j = 0; j < epn; ++j)
    for (int i = 0; i < q; ++i)
      REQUIRE(matches(gm_v(j, i), want.gm[static_cast<std::size_t>(me * epn + j) * q + i], values, 4 * tol));
}

}  // namespace

TEST_CASE("MPI linear layer: out, gx, gw and every expert's gradient equal the direct layer, both worlds") {
  const int R = moonep_test::world_size();
  std::vector<std::pair<std::string, Step>> all = {
      {"B = epn", synthetic_step(Config{R, 4 * R, 4, 12, 4, 4}, 2.0, 21, false)},
      {"B < epn copying everything", runnable(Config{R, 4 * R, 3, 12, 2, 2}, 2.0, 22, false)},
      {"ragged", runnable(Config{R, 2 * R, 2, 10, 2, 1}, 1.5, 23, true)}};
  if (R == 4) all.emplace_back("copied to every rank", copy_everywhere_step());
  for (const auto kind : moonep_test::world_kinds()) {
    auto world = moonep::make_mpi_world(MPI_COMM_WORLD, kind);
    for (const auto& [name, s] : all)
      for (const Values v : {Values::exact, Values::random}) {
        moe_case<float>(*world, name, s, v, true);
        moe_case<double>(*world, name, s, v, false);
        moe_case<moonep::bf16>(*world, name, s, v, v == Values::exact);
      }
  }
}

TEST_CASE("MPI linear layer: a plan it cannot run and views that do not fit are refused on every rank") {
  const int R = moonep_test::world_size(), me = moonep_test::world_rank();
  if (R < 2) return;  // one rank owns every expert
  const Config c{R, 3 * R, 2, 6, 1, 1};
  Step s = make_step(c, Routing(R, std::vector<std::int32_t>(12, 0)));
  for (std::uint64_t seed = 1; seed < 100 && refusal_of(s).empty(); ++seed) {
    Routing routing(R);
    std::uint64_t state = seed;
    for (auto& mine : routing)
      for (int i = 0; i < 12; ++i)
        mine.push_back(static_cast<std::int32_t>((state = state * 6364136223846793005ull + 1) >> 62) % 3);
    s = make_step(c, routing);
  }
  const std::string ref = refusal_of(s);
  REQUIRE(!ref.empty());
  int bad = -1;
  REQUIRE(std::sscanf(ref.c_str(), "rank %d", &bad) == 1);
  for (const auto kind : moonep_test::world_kinds()) {
    INFO("world " << moonep::to_string(kind));
    auto world = moonep::make_mpi_world(MPI_COMM_WORLD, kind);
    MpiMoeLayer<float> layer(*world, c, 1, 1);
    const auto x = host_rows(std::vector<float>(6, float(kSentinel)), 6, 1);
    const auto out = host_rows(std::vector<float>(6, float(kSentinel)), 6, 1);
    const auto w = host_rows(std::vector<float>(12, 0.5f), 6, 2);
    const auto gw = host_rows(std::vector<float>(12, float(kSentinel)), 6, 2);
    const auto p = host_rows(std::vector<float>(3, 1.0f), 3, 1), gp = host_rows(std::vector<float>(3, 1.0f), 3, 1);
    const MpiLayerPlan plan(s.plan, me);
    const std::string prefix = ": rank " + std::to_string(bad) + ": ";
    CHECK(input_error([&] { layer.forward(plan, x, w, p, out); }) == "forward" + prefix + ref);
    CHECK(input_error([&] { layer.backward(plan, x, p, out, gw, gp); }) == "backward" + prefix + ref);
    CHECK(values_of(out) == std::vector<float>(6, float(kSentinel)));
    CHECK(values_of(gw) == std::vector<float>(12, float(kSentinel)));
    CHECK(values_of(gp) == std::vector<float>(3, 1.0f));
    // An out of another width on the last rank, on a plan that runs.
    const Step ok = synthetic_step(Config{R, 3 * R, 2, 6, 3, 1}, 1.0, 6, false);
    MpiMoeLayer<float> layer2(*world, ok.c, 1, 1);
    const auto wide = host_rows(std::vector<float>(12, float(kSentinel)), 6, 2);
    const std::string e = input_error([&] {
      layer2.forward(MpiLayerPlan(ok.plan, me), x, w, p, me == R - 1 ? wide : out);
    });
    CHECK(e == "forward: rank " + std::to_string(R - 1) + ": out is [6][2], expected [S][H'] = [6][1]");
    CHECK(values_of(out) == std::vector<float>(6, float(kSentinel)));
    layer2.forward(MpiLayerPlan(ok.plan, me), x, w, p, out);  // still usable
    CHECK(out(0, 0) == float(kSentinel * 1.0));  // x = 7.75, M = 1, weights 0.5 + 0.5
  }
}
