// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Issue 19, part 2, in the library: MPI worlds whose processes disagree, or
// whose peer does not come, fail with a RuntimeError on every process that
// is there, within the world's timeout, instead of waiting forever. Run
// under mpirun with 2 and 3 processes (one process has no one to disagree
// with: the cases that need a peer pass trivially there).
#include "catch2_compat.hpp"

#include <chrono>
#include <string>
#include <thread>

#include "mpi_test_support.hpp"

using moonep::MpiWorldKind;

namespace {

// The message of what `make` throws (a RuntimeError), "" if nothing.
template <class F>
std::string runtime_error_of(F&& make) {
  try {
    make();
  } catch (const moonep::RuntimeError& e) {
    return e.what();
  }
  return "";
}

// After a test that left a peer behind, everybody meets again here (on
// MPI_COMM_WORLD, which the worlds never use: they have their own copies).
void meet() { MPI_Barrier(MPI_COMM_WORLD); }

}  // namespace

TEST_CASE("processes building different MPI worlds all get an error, none hangs") {
  const int me = moonep_test::world_rank();
  if (moonep_test::world_size() < 2 || !moonep_test::shared_windows()) return;
  const std::string err = runtime_error_of([&] {
    if (me == 0) moonep::MpiSharedWorld w(MPI_COMM_WORLD, 30);
    else moonep::MpiRmaWorld w(MPI_COMM_WORLD, 30);
  });
  CHECK(err.find("the processes asked for different MPI worlds (shared and rma)") != std::string::npos);
  meet();

  // make_mpi_world: automatic on one process, shared on the others.
  const std::string via_factory = runtime_error_of([&] {
    moonep::make_mpi_world(MPI_COMM_WORLD, me == 0 ? MpiWorldKind::automatic : MpiWorldKind::shared, 30);
  });
  CHECK(via_factory.find("asked for different MPI worlds (auto and shared)") != std::string::npos);
  meet();

  // And the world still works afterwards when they agree.
  auto w = moonep::make_mpi_world(MPI_COMM_WORLD, MpiWorldKind::automatic, 30);
  w->allocate(4);
  w->barrier();
  CHECK(w->all_ok(true));
}

TEST_CASE("a barrier whose peer does not come times out; the world is then broken, not hanging") {
  const int me = moonep_test::world_rank(), n = moonep_test::world_size();
  if (n < 2) return;
  for (const auto kind : moonep_test::world_kinds()) {
    INFO("world " << moonep::to_string(kind));
    const double timeout = 0.5;
    const auto t0 = std::chrono::steady_clock::now();
    {
      auto w = moonep::make_mpi_world(MPI_COMM_WORLD, kind, timeout);
      CHECK(w->timeout() == timeout);
      w->allocate(8);
      if (me == n - 1) {
        // The late process: it comes only after the others gave up.
        std::this_thread::sleep_for(std::chrono::duration<double>(4 * timeout));
        try {
          w->barrier();  // matches their abandoned barrier, or times out itself
        } catch (const moonep::MpiTimeoutError&) {
        }
      } else {
        const std::string err = runtime_error_of([&] { w->barrier(); });
        CHECK(err.find(": barrier: the other processes did not arrive within 0.5 s") != std::string::npos);
        CHECK(w->broken());
        // Every later collective fails at once instead of waiting again.
        CHECK(runtime_error_of([&] { w->all_ok(true); }).find("broken by an earlier timeout") != std::string::npos);
        CHECK(runtime_error_of([&] { w->barrier(); }).find("broken by an earlier timeout") != std::string::npos);
      }
    }  // destroying a broken world frees nothing collectively: no wait
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(took < 60);  // a hang guard (ctest's TIMEOUT is the real bound), not a speed test
    meet();
  }
}

TEST_CASE("all_ok times out too when a peer comes late; the late one times out at its next step") {
  const int me = moonep_test::world_rank(), n = moonep_test::world_size();
  if (n < 2) return;
  auto w = moonep::make_mpi_world(MPI_COMM_WORLD, moonep_test::world_kinds().back(), 0.5);
  w->allocate(8);
  if (me != n - 1) {
    const std::string err = runtime_error_of([&] { w->all_ok(true); });
    CHECK(err.find("all_ok: the other processes did not arrive within 0.5 s") != std::string::npos);
    CHECK_THROWS_AS(w->barrier(), moonep::RuntimeError);  // broken now
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    // It meets their abandoned all_ok, and then nobody.
    try {
      w->all_ok(true);
    } catch (const moonep::MpiTimeoutError&) {
    }
    CHECK_THROWS_AS(w->barrier(), moonep::MpiTimeoutError);
    CHECK(w->broken());
  }
  meet();
}

TEST_CASE("MOONEP_MPI_TIMEOUT sets the default timeout; nonsense there is an error") {
  ::setenv("MOONEP_MPI_TIMEOUT", "12.5", 1);
  CHECK(moonep::default_mpi_timeout() == 12.5);
  ::setenv("MOONEP_MPI_TIMEOUT", "soon", 1);
  CHECK(runtime_error_of([] { moonep::default_mpi_timeout(); }).find("MOONEP_MPI_TIMEOUT: expected a positive") !=
        std::string::npos);
  ::setenv("MOONEP_MPI_TIMEOUT", "-3", 1);
  CHECK_THROWS_AS(moonep::default_mpi_timeout(), moonep::RuntimeError);
  ::unsetenv("MOONEP_MPI_TIMEOUT");
  CHECK(moonep::default_mpi_timeout() == moonep::kDefaultMpiTimeout);
}
