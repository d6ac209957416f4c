// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// validate_histogram (phase_a_local.hpp), the device form's first kernel,
// on its own: each block's counts, its bad ids and each rank's tokens per
// expert (the tallies a step graph's Phase B reads) against a count of the
// routing on the host, made without blocks. The shape cuts a block short
// (N not a multiple of the block length), empties another (a ragged rank)
// and puts bad ids in, one of them past a ragged rank's entries (never
// read); the tallies start from a nonzero row, to which the kernel must
// add. The planner tests check the kernel only through the plans it leads
// to; here its own outputs are checked, on every execution space.
#include "catch2_compat.hpp"

#include <cstdint>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "moonep/impl/phase_a_local.hpp"
#include "moonep/impl/portable_instances.hpp"
#include "test_portable_support.hpp"

namespace {

using namespace moonep::impl::portable;

#define MOONEP_TEST_SPACE(Exec) , std::declval<std::tuple<Exec>>()
using Spaces = decltype(std::tuple_cat(std::declval<std::tuple<>>() MOONEP_TEST_FOR_EACH_SPACE(MOONEP_TEST_SPACE)));

template <class View>
std::vector<std::int32_t> to_host(const View& v) {
  auto m = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return std::vector<std::int32_t>(m.data(), m.data() + m.size());
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("validate_histogram counts each block, its bad ids and each rank's tallies",
                        "[portable][histogram]", Spaces) {
  using Exec = TestType;
  using T = Types<Exec>;
  const Exec exec;
  // L ranks of S*K entries; E = 16 gives 256-entry blocks: 700 entries, 3
  // blocks a rank (the last 188 long), 9 in all.
  const int L = 3, E = 16, S = 100, K = 7;
  const std::int64_t N = static_cast<std::int64_t>(S) * K;
  const std::vector<std::int32_t> tokens = {S, 40, S};  // rank 1 ragged: 280 entries, its third block empty
  std::vector<std::vector<std::int32_t>> ids(L, std::vector<std::int32_t>(static_cast<std::size_t>(N)));
  for (int l = 0; l < L; ++l) {
    for (std::int64_t i = 0; i < N; ++i) ids[l][i] = static_cast<std::int32_t>((i * 7 + l * 3 + i / 5) % E);
  }
  ids[2][5] = -1;    // bad ids: two in rank 2's first block, one in its last
  ids[2][300] = E;   // (second block)
  ids[2][699] = 1000;
  ids[1][400] = -7;  // past rank 1's 280 entries: never read

  InputScratch<Exec> s(exec, L, E, N, /*host_style=*/false);
  REQUIRE(s.block_len == 256);
  REQUIRE(s.nblocks == 3);

  // (On the heap: with GCC 12 in C++20, a default-constructed View of
  // Kokkos' development line of 2025-06 that is a local variable comes
  // out with a null allocation record that it then frees, a SIGSEGV when
  // it is assigned to or destroyed; a member of a heap object does not.)
  const auto lr_held = std::make_unique<LocalRanks<Exec>>();
  LocalRanks<Exec>& lr = *lr_held;
  lr.count = L;
  lr.S = S;
  lr.K = K;
  lr.rank = Kokkos::View<int*, typename T::mem>("rank", L);
  lr.routing = typename T::crefs("routing", L);
  lr.routing_len = typename T::lvec("routing_len", L);
  lr.tokens_per_rank = typename T::crefs("tokens_per_rank", 1);
  const auto routing = moonep::test::to_views<typename T::mem>(ids);
  const auto tpr = moonep::test::to_views<typename T::mem>({tokens});
  auto rank_h = Kokkos::create_mirror_view(lr.rank);
  auto routing_h = Kokkos::create_mirror_view(lr.routing);
  auto len_h = Kokkos::create_mirror_view(lr.routing_len);
  for (int l = 0; l < L; ++l) {
    rank_h(l) = l;
    routing_h(l).at = routing[l].data();
    len_h(l) = N;
  }
  auto tpr_h = Kokkos::create_mirror_view(lr.tokens_per_rank);
  tpr_h(0).at = tpr[0].data();
  Kokkos::deep_copy(lr.rank, rank_h);
  Kokkos::deep_copy(lr.routing, routing_h);
  Kokkos::deep_copy(lr.routing_len, len_h);
  Kokkos::deep_copy(lr.tokens_per_rank, tpr_h);

  // The tallies start at 1 per (rank, expert): the kernel adds to them.
  typename T::ivec tallies("tallies", static_cast<std::size_t>(L) * E);
  Kokkos::deep_copy(tallies, 1);
  validate_histogram(Launcher<Exec>(exec), s, lr, tallies.data());
  exec.fence();

  // The expectation: the routing counted on the host, block by block.
  const std::int64_t nb = s.nblocks;
  std::vector<std::int32_t> hist(static_cast<std::size_t>(L * nb * E), 0), bad(static_cast<std::size_t>(L * nb), 0),
      tally(static_cast<std::size_t>(L) * E, 1);
  for (int l = 0; l < L; ++l) {
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(tokens[l]) * K; ++i) {
      const std::int64_t lb = l * nb + i / s.block_len;
      const std::int32_t e = ids[l][i];
      if (e < 0 || e >= E) {
        ++bad[lb];
      } else {
        ++hist[lb * E + e];
        ++tally[l * E + e];
      }
    }
  }
  CHECK(bad[6] == 1);  // (the shape is what the comments say)
  CHECK(bad[7] == 1);
  CHECK(bad[8] == 1);
  CHECK(to_host(s.hist) == hist);
  CHECK(to_host(s.block_bad) == bad);
  CHECK(to_host(tallies) == tally);
  auto status = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), s.status);
  CHECK(status(0) == 0);  // the problem count is reset for the next kernel
}
