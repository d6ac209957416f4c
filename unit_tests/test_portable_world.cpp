// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// InProcessWorld's operations as the planner relies on them (on the memory
// space of every enabled execution space), the portable backend through the
// HostPlanner interface, and what every planner variant keeps in place from
// one step to the next.
#include "catch2_compat.hpp"

#include "moonep/backend.hpp"
#include "moonep/error.hpp"
#include "moonep/reference.hpp"
#include "test_portable_support.hpp"

using namespace moonep;
using namespace moonep::test;

TEMPLATE_LIST_TEST_CASE("InProcessWorld puts runs into the right chunks", "[portable]", PortableVariants) {
  using Mem = typename TestType::memory_space;
  INFO(variant_name<TestType>());
  InProcessWorld<Mem> world(3);
  world.allocate(10);
  REQUIRE(world.local_ranks() == std::vector<int>({0, 1, 2}));
  REQUIRE(world.directly_addressable());
  Kokkos::deep_copy(world.buffer(), -7);
  Kokkos::View<std::int32_t*, Mem> src("src", 6);
  auto hs = Kokkos::create_mirror_view(src);
  for (int i = 0; i < 6; ++i) hs(i) = 100 + i;
  Kokkos::deep_copy(src, hs);
  Kokkos::View<PutRun*, Mem> runs("runs", 2);
  auto hr = Kokkos::create_mirror_view(runs);
  hr(0) = PutRun{2, 0, 3, 1, 2};  // src[1..3) -> rank 2 offsets 3, 4
  hr(1) = PutRun{0, 0, 9, 5, 1};  // src[5] -> rank 0 offset 9
  Kokkos::deep_copy(runs, hr);
  world.put_runs(1, src, runs);
  world.barrier();
  auto hb = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), world.buffer());
  for (int i = 0; i < 30; ++i) {
    int expect = -7;
    if (i == 23) expect = 101;
    if (i == 24) expect = 102;
    if (i == 9) expect = 105;
    INFO("element " << i);
    CHECK(hb(i) == expect);
  }
  auto c2 = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), world.chunk(2));
  CHECK(c2(3) == 101);
  CHECK(world.all_ok(true));
  CHECK_FALSE(world.all_ok(false));
}

TEST_CASE("portable HostPlanner plans like the reference and survives bad loads") {
  REQUIRE(backend_available(Backend::portable));
  Config c;
  c.ranks = 8; c.experts = 64; c.topk = 6; c.tokens = 128; c.copy_slots = 4; c.token_padding = 8;
  auto hp = make_host_planner(Backend::portable, c);
  CHECK(hp->backend() == Backend::portable);
  const Routing routing = make_routing(c, Shape::heavy_skew, 5);
  hp->load(routing);
  hp->step();
  CHECK(plan_difference(plan_reference(c, routing), hp->result()) == "");
  Routing bad = routing;
  bad[4][3] = 64;
  CHECK_THROWS_AS(hp->load(bad), InputError);
  hp->step();  // still plans the last good load
  CHECK(plan_difference(plan_reference(c, routing), hp->result()) == "");
  const TokensPerExpert tpe = count_tokens_per_expert(c, routing);
  CHECK(plan_difference(plan_reference(c, routing), plan_host(Backend::portable, c, routing, &tpe)) == "");
}

namespace {

// A world that hides direct addressing, like an MPI world across nodes:
// the planner must then move every table through put_runs.
template <class Mem>
class NoSharedMemoryWorld final : public World<Mem> {
 public:
  using typename World<Mem>::chunk_view;
  using typename World<Mem>::source_view;
  using typename World<Mem>::run_view;
  explicit NoSharedMemoryWorld(int ranks) : inner_(ranks) {}
  int size() const override { return inner_.size(); }
  const std::vector<int>& local_ranks() const override { return inner_.local_ranks(); }
  void allocate(std::int64_t n) override { inner_.allocate(n); }
  std::int64_t chunk_elements() const override { return inner_.chunk_elements(); }
  chunk_view local_chunk(int r) const override { return inner_.local_chunk(r); }
  bool directly_addressable() const override { return false; }
  chunk_view chunk(int) const override { throw RuntimeError("not addressable"); }
  void put_runs(int src_rank, source_view src, run_view runs) override {
    ++puts;
    inner_.put_runs(src_rank, src, runs);
  }
  void barrier() override {
    ++barriers;
    inner_.barrier();
  }
  bool all_ok(bool ok) override { return inner_.all_ok(ok); }
  int puts = 0, barriers = 0;

 private:
  InProcessWorld<Mem> inner_;
};

}  // namespace

TEMPLATE_LIST_TEST_CASE("without direct addressing the tables travel through put_runs and plans stay exact",
                        "[portable]", PortableVariants) {
  INFO(variant_name<TestType>());
  Config c;
  c.ranks = 6; c.experts = 24; c.topk = 4; c.tokens = 50; c.copy_slots = 2; c.token_padding = 4;
  NoSharedMemoryWorld<typename TestType::memory_space> world(c.ranks);
  TestType planner(c, world);
  for (int step = 0; step < 4; ++step) {
    const Routing routing = make_routing(c, step % 2 ? Shape::random_dups : Shape::heavy_skew, 300 + step);
    world.puts = world.barriers = 0;
    CHECK(plan_difference(plan_reference(c, routing), plan_with(planner, routing)) == "");
    // Phase A (one per rank), Phase B (own tables + shared tables), Phase C2 (one per rank).
    CHECK(world.puts == c.ranks + 2 + c.ranks);
    CHECK(world.barriers == 3);
  }
}

TEMPLATE_LIST_TEST_CASE("plans live in the same views step after step (no per-step allocation of outputs)",
                        "[portable]", PlannerVariants) {
  INFO(variant_name<TestType>());
  Config c;
  c.ranks = 3; c.experts = 9; c.topk = 2; c.tokens = 30; c.copy_slots = 2; c.token_padding = 2;
  InProcessWorld<typename TestType::memory_space> world(c.ranks);
  TestType planner(c, world);
  plan_with(planner, make_routing(c, Shape::skewed, 1));
  const auto* dst0 = planner.last_plan().ranks[0].dst.data();
  const auto* buf = world.buffer().data();
  plan_with(planner, make_routing(c, Shape::uniform, 2));
  CHECK(planner.last_plan().ranks[0].dst.data() == dst0);
  CHECK(world.buffer().data() == buf);
}

TEST_CASE("the portable backend is available and beats the reference as default") {
  // moonep-plan picks its backend before it starts Kokkos: availability must
  // not depend on Kokkos being initialized, or the default silently falls
  // back to the (slow) reference planner.
  std::string why = "unset";
  CHECK(moonep::backend_available(moonep::Backend::portable, &why));
  CHECK(why.empty());
  CHECK(moonep::default_backend() != moonep::Backend::reference);
}

TEMPLATE_LIST_TEST_CASE("a second planner on a world is a clear error and the first one keeps planning",
                        "[portable]", PlannerVariants) {
  INFO(variant_name<TestType>());
  Config c;
  c.ranks = 4; c.experts = 16; c.topk = 2; c.tokens = 24; c.copy_slots = 2; c.token_padding = 4;
  InProcessWorld<typename TestType::memory_space> world(c.ranks);
  TestType first(c, world);
  const Routing routing = make_routing(c, Shape::heavy_skew, 41);
  REQUIRE(plan_difference(plan_reference(c, routing), plan_with(first, routing)) == "");
  Config bigger = c;
  bigger.tokens = 4 * c.tokens;  // would reallocate the buffer the first one plans in
  std::string message;
  try {
    TestType second(bigger, world);
  } catch (const InputError& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.find("already has a planner") != std::string::npos);
  CHECK(world.has_planner());
  const Routing next = make_routing(c, Shape::random_dups, 42);
  CHECK(plan_difference(plan_reference(c, next), plan_with(first, next)) == "");
}

TEMPLATE_LIST_TEST_CASE("a world is free again once its planner is gone", "[portable]", PlannerVariants) {
  INFO(variant_name<TestType>());
  Config c;
  c.ranks = 2; c.experts = 4; c.topk = 2; c.tokens = 8; c.copy_slots = 1; c.token_padding = 2;
  InProcessWorld<typename TestType::memory_space> world(c.ranks);
  { TestType first(c, world); }
  CHECK_FALSE(world.has_planner());
  // A rejected constructor leaves the world free.
  Config bad = c;
  bad.ranks = 3;
  CHECK_THROWS_AS(TestType(bad, world), InputError);
  CHECK_FALSE(world.has_planner());
  TestType second(c, world);
  const Routing routing = make_routing(c, Shape::skewed, 43);
  CHECK(plan_difference(plan_reference(c, routing), plan_with(second, routing)) == "");
}
