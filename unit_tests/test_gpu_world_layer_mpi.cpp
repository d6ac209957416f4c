// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::cuda::GpuWorldLayer (moonep/gpu_world_layer.hpp) on a GPU world
// of one MPI process per rank (make_mpi_gpu_world), under mpirun: process r
// holds rank r on GPU r mod (visible GPUs), all on one GPU where there is
// one (each process its own context, their launches time-sliced). Every
// process makes the same host data for every rank (the same seeds), stages
// its own rank's, plans with the world, and compares its rank's outputs
// with the reference layer (moonep/layer_reference.hpp) on the world's own
// plan, bit for bit: dispatch (every rank's recv and recv_w, read through
// this process's mapping of the other ranks' chunks), combine (weighted and
// not), combine's backward and dispatch's backward; exact and random data;
// float and bfloat16 (double on the small shapes); full and ragged steps
// (rows past s_r NaN: never read); H whose rows are and are not a multiple
// of 16 bytes, H' != H. A CUDA graph per process of plan + dispatch +
// experts (a copy) + combine, replayed with new data. Bad input: processes
// that disagree on H or the type (the same InputError on every process,
// the world still usable), null arguments, a process that does not
// enqueue its part and processes at different operations (check() names
// them on every process, then the layer works again). [sanitize]: the
// small cases compute-sanitizer runs (each process under its own tool).
//
// Every comparison is a CHECK, never a REQUIRE, inside the collective
// parts: a process that left a case early would leave the others waiting
// in the next collective call.
#include <mpi.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "catch2_compat.hpp"
#include "moonep/bf16.hpp"
#include "moonep/error.hpp"
#include "moonep/gpu_world_layer.hpp"
#include "moonep/gpu_world_mpi.hpp"
#include "moonep/layer_reference.hpp"
#include "moonep/reference.hpp"
#include "support/cuda_layer_support.hpp"
#include "support/cuda_test_support.hpp"
#include "support/gpu_world_mpi_support.hpp"
#include "support/ragged_steps.hpp"

namespace {

using namespace cuda_layer_test;
using namespace gpu_world_mpi_test;
using moonep::Config;
using moonep::PerRank;
using moonep::Routing;
using moonep::TokensPerRank;
using moonep::cuda::Element;
using moonep::cuda::GpuWorld;
using moonep::cuda::GpuWorldLayer;
using moonep::cuda::WorldOptions;
using moonep::test::cuda_ok;

// One case: plan on the world, then every operation there and with the
// reference on the world's own plan; this process's rank's outputs (and
// after dispatch every rank's recv) compared bit for bit.
template <class T>
void check_case(GpuWorld& world, const Config& c, const Routing& full, const TokensPerRank* tokens, int H, int Hout,
                std::uint64_t seed, bool exact) {
  using W = moonep::weight_t<T>;
  INFO("R=" << c.ranks << " E=" << c.experts << " K=" << c.topk << " S=" << c.tokens << " B=" << c.copy_slots
            << " tp=" << c.token_padding << " H=" << H << " H'=" << Hout << " ragged=" << (tokens != nullptr)
            << " exact=" << exact << " process " << world_rank());
  const int R = c.ranks, me = world_rank();
  const std::int64_t S = c.tokens, K = c.topk, NvS = c.slots();
  const MyStep step(world, c, full, tokens);
  const moonep::HostPlan& plan = step.plan;
  CHECK(moonep::plan_difference(plan, tokens ? moonep::plan_reference(c, moonep::test::cut_to_tokens(c, full, *tokens),
                                                                       nullptr, tokens)
                                             : moonep::plan_reference(c, full)) == "");
  GpuWorldLayer layer(world, H, Hout, element_of<T>(), true);

  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> q(-8, 8);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  const auto draw = [&] { return exact ? q(rng) / 4.0 : u(rng); };
  const auto s_of = [&](int r) { return tokens ? (*tokens)[r] : S; };
  const auto token_rows = [&](std::int64_t width) {
    PerRank<T> a(R, std::vector<T>(static_cast<std::size_t>(S * width)));
    for (int r = 0; r < R; ++r)
      for (std::int64_t t = 0; t < S; ++t)
        for (std::int64_t h = 0; h < width; ++h) a[r][t * width + h] = t < s_of(r) ? value<T>(draw()) : nan_value<T>();
    return a;
  };
  const auto slot_rows = [&](std::int64_t width) {
    PerRank<T> a(R, std::vector<T>(static_cast<std::size_t>(NvS * width)));
    for (auto& rank : a)
      for (auto& v : rank) v = value<T>(draw());
    return a;
  };
  const PerRank<T> x = token_rows(H);
  PerRank<W> w(R, std::vector<W>(static_cast<std::size_t>(S * K)));
  for (int r = 0; r < R; ++r)
    for (std::int64_t i = 0; i < S * K; ++i) w[r][i] = i / K < s_of(r) ? W(draw()) : W(NAN);
  MyBuffer<T> d_x(R, x[me]);
  MyBuffer<W> d_w(R, w[me]);

  // Dispatch (the tail after the last group keeps its 7s).
  PerRank<T> recv_ref(R, std::vector<T>(static_cast<std::size_t>(NvS * H), value<T>(7)));
  PerRank<W> recv_w_ref(R, std::vector<W>(static_cast<std::size_t>(NvS), W(7)));
  put(layer.recv(me), recv_ref[me]);
  put(layer.recv_w(me), recv_w_ref[me]);
  moonep::dispatch_reference<T>(plan, H, x, w, recv_ref, recv_w_ref);
  sync_all();
  layer.dispatch(d_x.cdata(), d_w.cdata(), nullptr);
  cuda_ok(cudaDeviceSynchronize());
  // The dispatch's last barrier passed: every rank's recv is final; each
  // is mapped here.
  for (int d = 0; d < R; ++d) {
    INFO("dispatch, rank " << d << "'s slots");
    std::string first;
    CHECK(wrong_bits(get<T>(layer.recv(d), static_cast<std::size_t>(NvS * H)), recv_ref[d], &first) == 0);
    INFO("first wrong " << first);
    CHECK(wrong_bits(get<W>(layer.recv_w(d), static_cast<std::size_t>(NvS)), recv_w_ref[d]) == 0);
  }

  // Combine: the experts' y (every slot drawn: duplicates differ from their
  // primary), weighted by the dispatched recv_w and not.
  const PerRank<T> y = slot_rows(Hout);
  put(layer.y(me), y[me]);
  for (bool weighted : {true, false}) {
    INFO("combine, weighted " << weighted);
    PerRank<T> out_ref(R, std::vector<T>(static_cast<std::size_t>(S * Hout), value<T>(3)));
    moonep::combine_reference<T>(plan, Hout, y, weighted ? &w : nullptr, out_ref);
    MyBuffer<T> d_out(R, std::vector<T>(static_cast<std::size_t>(S * Hout), value<T>(3)));
    sync_all();
    layer.combine(d_out.data(), weighted, nullptr);
    cuda_ok(cudaDeviceSynchronize());
    std::string first;
    CHECK(wrong_bits(d_out.get(), out_ref[me], &first) == 0);
    INFO("first wrong " << first);
  }

  // Combine's backward.
  const PerRank<T> g = token_rows(Hout);
  MyBuffer<T> d_g(R, g[me]);
  for (bool weighted : {true, false}) {
    INFO("combine backward, weighted " << weighted);
    PerRank<T> gy_ref(R, std::vector<T>(static_cast<std::size_t>(NvS * Hout), value<T>(7)));
    PerRank<W> gw_ref(R, std::vector<W>(static_cast<std::size_t>(S * K), W(5)));
    put(layer.grad_y(me), gy_ref[me]);
    moonep::combine_backward_reference<T>(plan, Hout, g, y, weighted ? &w : nullptr, gy_ref,
                                          weighted ? &gw_ref : nullptr);
    MyBuffer<W> d_gw(R, std::vector<W>(static_cast<std::size_t>(S * K), W(5)));
    sync_all();
    layer.combine_backward(d_g.cdata(), weighted, weighted ? d_gw.data() : nullptr, nullptr);
    cuda_ok(cudaDeviceSynchronize());
    std::string first;
    CHECK(wrong_bits(get<T>(layer.grad_y(me), static_cast<std::size_t>(NvS * Hout)), gy_ref[me], &first) == 0);
    INFO("first wrong " << first);
    CHECK(wrong_bits(d_gw.get(), gw_ref[me]) == 0);  // untouched (5) when unweighted
  }

  // Dispatch's backward: grad_recv back to the tokens, and grad_w +=
  // grad_recv_w.
  const PerRank<T> grecv = slot_rows(H);
  PerRank<W> grecv_w(R, std::vector<W>(static_cast<std::size_t>(NvS)));
  for (auto& rank : grecv_w)
    for (auto& v : rank) v = W(draw());
  put(layer.grad_recv(me), grecv[me]);
  put(layer.grad_recv_w(me), grecv_w[me]);
  for (bool with_w : {true, false}) {
    INFO("dispatch backward, with grad_w " << with_w);
    PerRank<T> gx_ref(R, std::vector<T>(static_cast<std::size_t>(S * H), value<T>(3)));
    PerRank<W> gw_ref = w;  // an input too: the backward adds to it
    moonep::dispatch_backward_reference<T>(plan, H, grecv, with_w ? &grecv_w : nullptr, gx_ref,
                                           with_w ? &gw_ref : nullptr);
    MyBuffer<T> d_gx(R, std::vector<T>(static_cast<std::size_t>(S * H), value<T>(3)));
    MyBuffer<W> d_gw(R, w[me]);
    sync_all();
    layer.dispatch_backward(d_gx.data(), with_w ? d_gw.data() : nullptr, nullptr);
    cuda_ok(cudaDeviceSynchronize());
    std::string first;
    CHECK(wrong_bits(d_gx.get(), gx_ref[me], &first) == 0);
    INFO("first wrong " << first);
    CHECK(wrong_bits(d_gw.get(), gw_ref[me]) == 0);
  }
  // No barrier gave up.
  CHECK_NOTHROW(layer.check());
}

// Shapes as test_gpu_world_layer's, for R = the number of processes.
template <class T>
void check_shapes(bool small) {
  using moonep::test::Shape;
  const int R = world_size();
  const std::vector<Config> configs =
      small ? std::vector<Config>{{R, 4 * R, 2, 24, 2, 4}}
            : std::vector<Config>{{R, 4 * R, 2, 24, 2, 4}, {R, 8 * R, 4, 40, 8, 8}, {R, 3 * R, 3, 17, 1, 1}};
  for (const Config& c : configs) {
    auto world = make_world(c, small ? 60 : 10);  // compute-sanitizer slows every launch
    const std::vector<int> widths = small ? std::vector<int>{8, 5} : std::vector<int>{8, 5, 72};
    const std::vector<Shape> shapes = small ? std::vector<Shape>{Shape::skew, Shape::same_expert_k_times}
                                            : std::vector<Shape>{Shape::skew, Shape::same_expert_k_times,
                                                                 Shape::owner_zero};
    for (int H : widths) {  // 8 floats: 32-byte rows; 5: element by element
      for (Shape shape : shapes) {
        INFO("shape " << moonep::test::name(shape));
        const Routing full = moonep::test::make_routing(c, shape, 11);
        check_case<T>(*world, c, full, nullptr, H, H, 3, true);
        moonep::impl::SplitMix64 rng{5};
        const TokensPerRank t = moonep::test::ragged_tokens(c, 1, rng);
        const Routing cut = moonep::test::cut_to_tokens(c, full, t);
        check_case<T>(*world, c, moonep::test::padded_to_full(c, cut), &t, H, small ? H : H + 8, 4, false);
      }
    }
  }
}

}  // namespace

TEST_CASE("mpi gpu world layer: every operation matches the reference bit for bit (float)",
          "[gpu_world_layer][mpi]") {
  check_shapes<float>(false);
}
TEST_CASE("mpi gpu world layer: every operation matches the reference bit for bit (bfloat16)",
          "[gpu_world_layer][mpi]") {
  check_shapes<moonep::bf16>(false);
}
TEST_CASE("mpi gpu world layer: small cases in double", "[gpu_world_layer][mpi]") { check_shapes<double>(true); }
TEST_CASE("mpi gpu world layer: small cases for compute-sanitizer", "[gpu_world_layer][mpi][sanitize]") {
  check_shapes<moonep::bf16>(true);
  check_shapes<float>(true);
}

// One CUDA graph per process, captured on a stream of its device: the
// world's plan of its rank, the layer's dispatch, the experts (identity: a
// copy of its rank's recv into its y) and a weighted combine; replayed
// over new routing, counts and token rows, each replay's out against the
// reference.
TEST_CASE("mpi gpu world layer: plan + dispatch + combine in one CUDA graph per process, replayed with new data",
          "[gpu_world_layer][mpi][graph]") {
  using moonep::test::Shape;
  const int R = world_size(), me = world_rank();
  const Config c{R, 8 * R, 4, 40, 8, 8};
  const int H = 16;
  const std::int64_t S = c.tokens, K = c.topk, NvS = c.slots();
  auto world = make_world(c);
  GpuWorldLayer layer(*world, H, H, Element::f32);
  const Routing first = moonep::test::make_routing(c, Shape::skew, 1);
  MyBuffer<std::int32_t> routing(R, first[me]), count(R, std::vector<std::int32_t>{c.tokens});
  MyBuffer<float> x(R, std::vector<float>(static_cast<std::size_t>(S * H))),
      out(R, std::vector<float>(static_cast<std::size_t>(S * H)));
  MyBuffer<float> w(R, std::vector<float>(static_cast<std::size_t>(S * K)));
  std::vector<const std::int32_t*> routing_table(routing.table.begin(), routing.table.end());
  std::vector<const std::int32_t*> count_table(count.table.begin(), count.table.end());
  const moonep::test::CapturedGraph graph([&](cudaStream_t origin) {
    world->plan(routing_table.data(), nullptr, origin, count_table.data());
    layer.dispatch(x.cdata(), w.cdata(), origin);
    cuda_ok(cudaMemcpyAsync(layer.y(me), layer.recv(me), NvS * H * sizeof(float), cudaMemcpyDeviceToDevice, origin));
    layer.combine(out.data(), true, origin);
  });
  // replay_counts' vectors are for R = 8: cut (or padded with empty ranks) to R.
  std::vector<TokensPerRank> steps = moonep::test::replay_counts(c, 9);
  for (TokensPerRank& t : steps) t.resize(static_cast<std::size_t>(R), 0);
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const TokensPerRank& tokens = steps[i];
    INFO("replay " << i << ", process " << me);
    const Routing cut =
        moonep::test::cut_to_tokens(c, moonep::test::make_routing(c, i % 2 ? Shape::heavy : Shape::skew, 30 + i), tokens);
    routing.set(moonep::test::padded_to_full(c, cut)[me]);
    count.set(std::vector<std::int32_t>{tokens[me]});
    PerRank<float> xs(R, std::vector<float>(static_cast<std::size_t>(S * H)));
    PerRank<float> ws(R, std::vector<float>(static_cast<std::size_t>(S * K)));
    for (int r = 0; r < R; ++r) {
      for (auto& v : xs[r]) v = static_cast<float>(u(rng));
      for (auto& v : ws[r]) v = static_cast<float>(u(rng));
    }
    x.set(xs[me]);
    w.set(ws[me]);
    cuda_ok(cudaDeviceSynchronize());
    cuda_ok(cudaGraphLaunch(graph.exec(), graph.stream()));
    cuda_ok(cudaStreamSynchronize(graph.stream()));
    const moonep::HostPlan plan = world->copy_out();  // collective
    CHECK(moonep::plan_difference(plan, moonep::plan_reference(c, cut, nullptr, &tokens)) == "");
    PerRank<float> recv_ref(R, std::vector<float>(static_cast<std::size_t>(NvS * H)));
    PerRank<float> recv_w_ref(R, std::vector<float>(static_cast<std::size_t>(NvS)));
    moonep::dispatch_reference<float>(plan, H, xs, ws, recv_ref, recv_w_ref);
    PerRank<float> out_ref(R, std::vector<float>(static_cast<std::size_t>(S * H)));
    out_ref[me] = out.get();  // rows past s_r: whatever they hold
    moonep::combine_reference<float>(plan, H, recv_ref, &ws, out_ref);
    CHECK(wrong_bits(out.get(), out_ref[me]) == 0);
    CHECK_NOTHROW(layer.check());
  }
}

namespace {
// Rank 0's x and w of a small problem, and the whole dispatch checked.
struct SmallDispatch {
  Config c;
  Routing routing;
  PerRank<float> x;
  PerRank<float> w;
  explicit SmallDispatch(int R) : c{R, 4 * R, 2, 12, 2, 2}, routing(moonep::test::make_routing(c, moonep::test::Shape::skew, 3)) {
    x.assign(R, std::vector<float>(static_cast<std::size_t>(c.tokens) * 4));
    w.assign(R, std::vector<float>(static_cast<std::size_t>(c.tokens) * c.topk));
    for (int r = 0; r < R; ++r) {
      for (std::size_t i = 0; i < x[r].size(); ++i) x[r][i] = static_cast<float>(r * 1000 + i);
      for (std::size_t i = 0; i < w[r].size(); ++i) w[r][i] = static_cast<float>(i % 7) / 4;
    }
  }
  // Plans, dispatches on `layer` (H = 4) and checks this process's recv.
  void run(GpuWorld& world, GpuWorldLayer& layer) const {
    const int R = c.ranks, me = world_rank();
    const MyStep step(world, c, routing, nullptr);
    MyBuffer<float> d_x(R, x[me]), d_w(R, w[me]);
    const std::int64_t NvS = c.slots();
    PerRank<float> recv_ref(R, std::vector<float>(static_cast<std::size_t>(NvS * 4), 7.f));
    PerRank<float> recv_w_ref(R, std::vector<float>(static_cast<std::size_t>(NvS), 7.f));
    put(layer.recv(me), recv_ref[me]);
    put(layer.recv_w(me), recv_w_ref[me]);
    moonep::dispatch_reference<float>(step.plan, 4, x, w, recv_ref, recv_w_ref);
    sync_all();
    layer.dispatch(d_x.cdata(), d_w.cdata(), nullptr);
    cuda_ok(cudaDeviceSynchronize());
    CHECK(wrong_bits(get<float>(layer.recv(me), static_cast<std::size_t>(NvS * 4)), recv_ref[me]) == 0);
    CHECK(wrong_bits(get<float>(layer.recv_w(me), static_cast<std::size_t>(NvS)), recv_w_ref[me]) == 0);
    CHECK_NOTHROW(layer.check());
  }
};

}  // namespace

TEST_CASE("mpi gpu world layer: processes that disagree on H or the type all throw the same InputError",
          "[gpu_world_layer][mpi]") {
  const int R = world_size(), me = world_rank();
  const SmallDispatch small(R);
  auto world = make_world(small.c);
  // Every process passes its own H: rank 1 (the last where R = 2) a larger one.
  const int odd = R > 1 ? 1 : -1;
  std::string want = "moonep::cuda::GpuWorldLayer: the processes disagree on H: 4 on ";
  {
    std::vector<int> fours;
    for (int r = 0; r < R; ++r)
      if (r != odd) fours.push_back(r);
    want += moonep::ranks_text(fours) + " and 16 on rank 1 (every process constructs the layer with the same H, H', "
                                        "type and training)";
  }
  if (R > 1) {
    CHECK(caught([&] { GpuWorldLayer bad(*world, me == odd ? 16 : 4, 4, Element::f32); }) == want);
    CHECK(caught([&] { GpuWorldLayer bad(*world, 4, 4, me == odd ? Element::bf16 : Element::f32); })
              .rfind("moonep::cuda::GpuWorldLayer: the processes disagree on the element type: f32 on ", 0) == 0);
    CHECK(caught([&] { GpuWorldLayer bad(*world, 4, 4, Element::f32, me == odd); })
              .find("disagree on training: false on ") != std::string::npos);
  }
  // Agreed but bad: the one-process world's words, on every process.
  CHECK(caught([&] { GpuWorldLayer bad(*world, 0, 4, Element::f32); }) ==
        "moonep::cuda::GpuWorldLayer: H and H' must be at least 1, got H = 0, H' = 4");
  // The world and a good layer still work.
  GpuWorldLayer layer(*world, 4, 4, Element::f32);
  small.run(*world, layer);
}

TEST_CASE("mpi gpu world layer: null arguments are refused before anything is enqueued; other ranks' entries unread",
          "[gpu_world_layer][mpi]") {
  const int R = world_size(), me = world_rank();
  const SmallDispatch small(R);
  auto world = make_world(small.c);
  GpuWorldLayer layer(*world, 4, 4, Element::f32);
  MyBuffer<float> a(R, std::vector<float>(64));
  std::vector<const void*> none(static_cast<std::size_t>(R), nullptr);
  // Every process refuses alike (its own entry is null) and enqueues nothing.
  CHECK(caught([&] { layer.dispatch(nullptr, a.cdata(), nullptr); }) ==
        "moonep::cuda::GpuWorldLayer::dispatch: x is null");
  CHECK(caught([&] { layer.dispatch(a.cdata(), none.data(), nullptr); }) ==
        "moonep::cuda::GpuWorldLayer::dispatch: w[" + std::to_string(me) + "] is null");
  CHECK(caught([&] { layer.combine_backward(a.cdata(), false, nullptr, nullptr); }) ==
        "moonep::cuda::GpuWorldLayer::combine_backward: the layer was not made for training (training = false)");
  CHECK_NOTHROW(layer.check());
  // Arrays with only this process's entry set (MyBuffer's) work.
  small.run(*world, layer);
}

TEST_CASE("mpi gpu world layer: a process that does not enqueue its part is named by every process; the layer "
          "works again after check()",
          "[gpu_world_layer][mpi]") {
  const int R = world_size(), me = world_rank();
  if (R < 2) return;  // needs another process to wait for
  const SmallDispatch small(R);
  auto world = make_world(small.c, 1);
  GpuWorldLayer layer(*world, 4, 4, Element::f32);
  {
    const MyStep step(*world, small.c, small.routing, nullptr);
    MyBuffer<float> d_x(R, small.x[me]), d_w(R, small.w[me]);
    sync_all();
    if (me != 1) layer.dispatch(d_x.cdata(), d_w.cdata(), nullptr);
    const std::string message = caught([&] { layer.check(); });
    INFO(message);
    CHECK(message.rfind("moonep::cuda::GpuWorldLayer: rank 0 waited 1 s in vain for rank 1 at dispatch (between the "
                        "sources' stores and the destinations' epilogue)",
                        0) == 0);
    for (int r = 2; r < R; ++r) {
      CHECK(message.find("rank " + std::to_string(r) + " waited 1 s in vain for rank 1 at dispatch") !=
            std::string::npos);
    }
    CHECK(message.find("rank 1 waited") == std::string::npos);
    const std::string tail = "; the operations since were skipped (their outputs are undefined) and the layer reset";
    CHECK((message.size() > tail.size() && message.compare(message.size() - tail.size(), tail.size(), tail) == 0));
  }
  small.run(*world, layer);
  small.run(*world, layer);
}

TEST_CASE("mpi gpu world layer: processes at different operations are named by every process; the layer works "
          "again after check()",
          "[gpu_world_layer][mpi]") {
  const int R = world_size(), me = world_rank();
  if (R < 2) return;
  const SmallDispatch small(R);
  auto world = make_world(small.c, 2);
  GpuWorldLayer layer(*world, 4, 4, Element::f32);
  {
    const MyStep step(*world, small.c, small.routing, nullptr);
    MyBuffer<float> d_x(R, small.x[me]), d_w(R, small.w[me]);
    MyBuffer<float> d_out(R, std::vector<float>(static_cast<std::size_t>(small.c.tokens) * 4));
    sync_all();
    if (me == 1) {
      layer.combine(d_out.data(), true, nullptr);
    } else {
      layer.dispatch(d_x.cdata(), d_w.cdata(), nullptr);
    }
    const std::string message = caught([&] { layer.check(); });
    INFO(message);
    CHECK(message.rfind("moonep::cuda::GpuWorldLayer: rank 0 was at dispatch (between the sources' stores and the "
                        "destinations' epilogue) when rank 1 was at the weighted combine (between the destinations' "
                        "prologue and the sources' sums) (every process enqueues the same operations in the same "
                        "order)",
                        0) == 0);
    CHECK(message.find("rank 1 was at the weighted combine (between the destinations' prologue and the sources' "
                       "sums) when rank 0 was at dispatch") != std::string::npos);
  }
  small.run(*world, layer);
}
