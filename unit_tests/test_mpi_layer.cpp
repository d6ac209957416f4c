// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::MpiLayer (moonep/mpi_layer.hpp) under mpirun, one rank per
// process, on both MPI worlds: every process computes the reference layer
// (moonep/layer_reference.hpp) of the whole problem itself and compares
// its own rank's results bit for bit: dispatch's recv and recv_w, combine
// (weighted and not), combine's backward (grad_y, grad_w) and dispatch's
// backward (grad_x, grad_w += ...); full and ragged steps (rows past s_r
// NaN), tokens whose K experts live on one rank (many duplicates), R = 1
// at np 1; float, double, bfloat16; the plan of a Planner over the same
// world and a HostPlan. Bad input on one rank: the same error on every
// rank, nothing moved, the layer still usable.
#include "catch2_compat.hpp"

#include <cstring>
#include <limits>
#include <string>

#include "moonep/mpi_layer.hpp"
#include "moonep/planner.hpp"
#include "mpi_test_support.hpp"
#include "support/layer_cases.hpp"

using namespace layer_test;
using moonep::MpiLayer;
using moonep::MpiLayerPlan;

namespace {

constexpr int kHidden = 3;
using Planner = moonep::Planner<Kokkos::DefaultHostExecutionSpace>;

template <class V>
using HostView = Kokkos::View<V**, Kokkos::LayoutRight, Kokkos::HostSpace>;

// Rank r's rows of a rank-major buffer as a [rows][width] view.
template <class V>
HostView<V> view_of(const std::vector<V>& rank_rows, std::int64_t rows, std::int64_t width) {
  HostView<V> v("test_rows", rows, width);
  std::memcpy(v.data(), rank_rows.data(), rank_rows.size() * sizeof(V));
  return v;
}
template <class V>
Kokkos::View<V*, Kokkos::HostSpace> vector_view(const std::vector<V>& values) {
  Kokkos::View<V*, Kokkos::HostSpace> v("test_values", values.size());
  std::memcpy(v.data(), values.data(), values.size() * sizeof(V));
  return v;
}
template <class V>
bool same_bits(const std::vector<V>& expected, const V* got) {
  return std::memcmp(expected.data(), got, expected.size() * sizeof(V)) == 0;
}

// The steps, for R = the number of processes.
std::vector<std::pair<std::string, Step>> mpi_steps(int R) {
  std::vector<std::pair<std::string, Step>> all;
  all.emplace_back("full", synthetic_step(Config{R, 4 * R, 4, 12, 4, 4}, 1.5, 11, false));
  all.emplace_back("ragged", synthetic_step(Config{R, 4 * R, 4, 12, 4, 4}, 1.5, 12, true));
  all.emplace_back("one rank per token", one_rank_step(Config{R, 2 * R, 6, 10, 2, 3}, 14));
  // K = 2: from np 3 on more ranks than K (the rma world's partial rows
  // then go one MPI_Put each, not in blocks per pair of ranks).
  all.emplace_back("K below R", synthetic_step(Config{R, 4 * R, 2, 12, 4, 4}, 1.5, 13, false));
  return all;
}

// Plans this process's rank of the step with `planner` (ragged: its s_r*K
// ids in a view of S*K whose tail is no expert, and every rank's count).
void plan_mine(Planner& planner, const Step& s, int me) {
  const Config& c = s.c;
  Kokkos::View<std::int32_t*, Kokkos::HostSpace> ids("ids", c.entries()), counts("counts", c.ranks);
  for (std::int64_t i = 0; i < c.entries(); ++i)
    ids(i) = i < static_cast<std::int64_t>(s.routing[me].size()) ? s.routing[me][i] : c.experts;
  for (int r = 0; r < c.ranks; ++r) counts(r) = s.tokens[r];
  const std::vector<Planner::input_view> mine{ids};
  const Planner::input_view tokens = counts;
  planner.plan(mine, nullptr, s.plan.tokens_per_rank ? &tokens : nullptr);
}

template <class T>
void mpi_case(moonep::MpiWorld& world, const std::string& name, const Step& s, Values values, bool use_planner) {
  using W = moonep::weight_t<T>;
  const Config& c = s.c;
  const int me = world.rank();
  const std::int64_t nvs = c.slots(), S = c.tokens, K = c.topk;
  INFO(name << (values == Values::exact ? ", exact data" : ", random data") << ", world "
            << moonep::to_string(world.kind()) << (use_planner ? ", planner's plan" : ", HostPlan"));
  Planner planner(c, world);
  if (use_planner) plan_mine(planner, s, me);
  const MpiLayerPlan plan = use_planner ? MpiLayerPlan(planner.last_plan()) : MpiLayerPlan(s.plan, me);

  // The whole problem and the reference's results, on every process.
  Draw draw(values, 41);
  const PerRank<T> x = rows_of<T>(c, S, kHidden, s.tokens, draw);
  const PerRank<W> w = rows_of<W>(c, S, K, s.tokens, draw, true);
  PerRank<T> recv = filled<T>(c, nvs * kHidden, kSentinel);
  PerRank<W> recv_w = filled<W>(c, nvs, kSentinel);
  moonep::dispatch_reference(s.plan, kHidden, x, w, recv, recv_w);

  MpiLayer<T> layer(world, c, kHidden);
  layer.dispatch(plan, view_of(x[me], S, kHidden), view_of(w[me], S, K));
  // Slots the contract leaves undefined are not compared (the sentinel
  // stayed in the reference's).
  bool recv_ok = true;
  for (std::int64_t slot = 0; slot < nvs; ++slot) {
    if (same_bits(std::vector<W>{W(kSentinel)}, &recv_w[me][slot])) continue;
    recv_ok = recv_ok && same_bits(std::vector<W>{recv_w[me][slot]}, &layer.recv_w()(slot)) &&
              std::memcmp(&recv[me][slot * kHidden], &layer.recv()(slot, 0), kHidden * sizeof(T)) == 0;
  }
  CHECK(recv_ok);
  // The experts are the identity: y = recv (the reference's, so that
  // undefined slots hold the same in both).
  const auto y = view_of(recv[me], nvs, kHidden);

  for (const bool weighted : {true, false}) {
    PerRank<T> out = filled<T>(c, S * kHidden, kSentinel);
    moonep::combine_reference<T>(s.plan, kHidden, recv, weighted ? &w : nullptr, out);
    const auto out_v = view_of(filled<T>(c, S * kHidden, kSentinel)[me], S, kHidden);
    if (weighted)
      layer.combine(plan, y, out_v);
    else
      layer.combine_unweighted(plan, y, out_v);
    CHECK(same_bits(out[me], out_v.data()));
  }

  // Combine's backward, weighted (grad_w) and not.
  const PerRank<T> g = rows_of<T>(c, S, kHidden, s.tokens, draw);
  PerRank<T> gy = filled<T>(c, nvs * kHidden, kSentinel);
  PerRank<W> gw = filled<W>(c, c.entries(), kSentinel);
  moonep::combine_backward_reference(s.plan, kHidden, g, recv, &w, gy, &gw);
  const auto gy_v = view_of(filled<T>(c, nvs * kHidden, kSentinel)[me], nvs, kHidden);
  const auto gw_v = view_of(filled<W>(c, c.entries(), kSentinel)[me], S, K);
  layer.combine_backward(plan, view_of(g[me], S, kHidden), y, gy_v, gw_v);
  CHECK(same_bits(gy[me], gy_v.data()));
  CHECK(same_bits(gw[me], gw_v.data()));
  PerRank<T> gy1 = filled<T>(c, nvs * kHidden, kSentinel);
  moonep::combine_backward_reference<T>(s.plan, kHidden, g, {}, nullptr, gy1, nullptr);
  const auto gy1_v = view_of(filled<T>(c, nvs * kHidden, kSentinel)[me], nvs, kHidden);
  layer.combine_backward_unweighted(plan, view_of(g[me], S, kHidden), gy1_v);
  CHECK(same_bits(gy1[me], gy1_v.data()));

  // Dispatch's backward of gy, with and without the weights' gradient.
  const PerRank<W> grecv_w = rows_of<W>(c, nvs, 1, std::vector<std::int32_t>(c.ranks, nvs), draw, true);
  PerRank<T> gx = filled<T>(c, S * kHidden, kSentinel);
  const auto gw_before = view_of(gw[me], S, K);
  moonep::dispatch_backward_reference(s.plan, kHidden, gy, &grecv_w, gx, &gw);
  const auto gx_v = view_of(filled<T>(c, S * kHidden, kSentinel)[me], S, kHidden);
  layer.dispatch_backward(plan, view_of(gy[me], nvs, kHidden), vector_view(grecv_w[me]), gx_v, gw_before);
  CHECK(same_bits(gx[me], gx_v.data()));
  CHECK(same_bits(gw[me], gw_before.data()));
  const auto gx1_v = view_of(filled<T>(c, S * kHidden, kSentinel)[me], S, kHidden);
  layer.dispatch_backward(plan, view_of(gy[me], nvs, kHidden), gx1_v);
  CHECK(same_bits(gx[me], gx1_v.data()));
}

}  // namespace

TEST_CASE("MPI layer: dispatch, combine and both backwards match the reference bit for bit, both worlds") {
  const int R = moonep_test::world_size();
  for (const auto kind : moonep_test::world_kinds()) {
    auto world = moonep::make_mpi_world(MPI_COMM_WORLD, kind);
    for (const auto& [name, step] : mpi_steps(R))
      for (const Values v : {Values::exact, Values::random}) {
        mpi_case<float>(*world, name, step, v, true);
        mpi_case<double>(*world, name, step, v, false);
        mpi_case<moonep::bf16>(*world, name, step, v, v == Values::exact);
      }
  }
}

TEST_CASE("MPI layer: bad input on one rank is the same InputError on every rank, nothing moved") {
  const int R = moonep_test::world_size(), me = moonep_test::world_rank();
  const Step s = synthetic_step(Config{R, 2 * R, 2, 5, 2, 2}, 1.0, 6, false);
  const std::int64_t nvs = s.c.slots();
  for (const auto kind : moonep_test::world_kinds()) {
    auto world = moonep::make_mpi_world(MPI_COMM_WORLD, kind);
    MpiLayer<float> layer(*world, s.c, 2);
    Draw draw(Values::exact, 5);
    const PerRank<float> x = rows_of<float>(s.c, 5, 2, s.tokens, draw);
    const PerRank<float> w = rows_of<float>(s.c, 5, 2, s.tokens, draw, true);
    PerRank<float> recv = filled<float>(s.c, nvs * 2, kSentinel);
    PerRank<float> recv_w = filled<float>(s.c, nvs, kSentinel);
    moonep::dispatch_reference(s.plan, 2, x, w, recv, recv_w);
    HostPlan other = s.plan;
    other.config.tokens = 6;
    const auto x_v = view_of(x[me], 5, 2);
    const auto w_v = view_of(w[me], 5, 2);
    const HostView<float> other_x("other_x", 5, 2), wide("wide", 5, 3);
    Kokkos::deep_copy(other_x, 1.5f);
    // True on every process iff each holds the reference's recv of x.
    auto recv_is_reference = [&] {
      bool ok = true;
      for (std::int64_t slot = 0; slot < nvs; ++slot)
        if (recv_w[me][slot] != float(kSentinel))
          ok = ok && layer.recv_w()(slot) == recv_w[me][slot] && layer.recv()(slot, 0) == recv[me][slot * 2] &&
               layer.recv()(slot, 1) == recv[me][slot * 2 + 1];
      return moonep_test::everyone(ok);
    };
    layer.dispatch(MpiLayerPlan(s.plan, me), x_v, w_v);
    REQUIRE(recv_is_reference());
    for (int bad = 0; bad < R; ++bad) {
      INFO("world " << moonep::to_string(kind) << ", bad rank " << bad);
      // A row too wide on rank `bad`; other rows on the others, which must
      // not move: recv still holds x's.
      const std::string e1 = input_error([&] {
        layer.dispatch(MpiLayerPlan(s.plan, me),
                       me == bad ? HostView<const float>(wide) : HostView<const float>(other_x), w_v);
      });
      CHECK(e1 == "dispatch: rank " + std::to_string(bad) + ": x is [5][3], expected [S][H] = [5][2]");
      CHECK(recv_is_reference());
      // A plan of another configuration on rank `bad`.
      const HostView<float> out("out", 5, 2);
      const std::string e2 = input_error([&] {
        layer.combine(me == bad ? MpiLayerPlan(other, me) : MpiLayerPlan(s.plan, me), layer.recv(), out);
      });
      CHECK(e2.find("combine: rank " + std::to_string(bad) + ": the plan is of ") == 0);
      // A plan whose slots name more primaries of one source than it has
      // tokens (a partial row goes back per token and destination rank).
      HostPlan crowded = s.plan;
      for (auto& rp : crowded.ranks) {
        std::fill(rp.src_info.begin(), rp.src_info.end(), 0);
        std::fill(rp.dup_counts.begin(), rp.dup_counts.end(), 0);
      }
      const std::string e4 = input_error([&] {
        layer.combine(MpiLayerPlan(me == bad ? crowded : s.plan, me), layer.recv(), out);
      });
      CHECK(e4 == "combine: rank " + std::to_string(bad) +
                      ": the plan's src_info names more than S = 5 primary slots of rank 0 (one per token and "
                      "destination rank)");
      CHECK(recv_is_reference());
      // Still usable: a good step with other rows, then x again.
      layer.dispatch(MpiLayerPlan(s.plan, me), other_x, w_v);
      CHECK_FALSE(recv_is_reference());
      layer.dispatch(MpiLayerPlan(s.plan, me), x_v, w_v);
      CHECK(recv_is_reference());
    }
    // Every process gives the plan of the next rank (at np 1 its own):
    // rank 0's line, naming rank 1's plan, on every process.
    const HostView<float> out("out", 5, 2);
    const std::string e3 = input_error([&] { layer.combine(MpiLayerPlan(s.plan, (me + 1) % R), layer.recv(), out); });
    if (R == 1)
      CHECK(e3 == "(nothing thrown)");
    else
      CHECK(e3.find("combine: rank 0: the plan is of rank 1, this process is rank 0") == 0);
  }
}
