// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The phases over a world shaped like an MPI job: several "processes"
// (threads), each planning only its own local ranks, no direct addressing
// (data moves through put_runs alone, like MPI_Put across nodes), and
// collective barrier/all_ok. The threads take turns (one runs Kokkos at a
// time, handing over at collectives), so Kokkos Serial is never entered
// concurrently while every rank still waits on the others at each barrier.
#include "catch2_compat.hpp"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <tuple>
#include <type_traits>

#include "moonep/error.hpp"
#include "moonep/reference.hpp"
#include "test_portable_support.hpp"

using namespace moonep;
using namespace moonep::test;

namespace {

template <class Mem, class Exec>
struct Job {
  explicit Job(int ranks, int procs) : buffer(ranks), processes(procs) {}
  // Storage of every chunk (the "network"); its copies run on the planner's
  // execution space, the one these threads take turns on.
  InProcessWorld<Mem, Exec> buffer;
  int processes;
  std::mutex turn;             // held by the one process running
  std::mutex m;
  std::condition_variable cv;
  int arrived = 0;
  long generation = 0;
  bool ok_acc = true, ok_result = true;

  // Collective: the last process to arrive runs `last` and releases all.
  template <class F>
  void rendezvous(F&& last) {
    std::unique_lock<std::mutex> lk(m);
    if (++arrived == processes) {
      last();
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;  // keeps its turn
    }
    const long gen = generation;
    turn.unlock();
    cv.wait(lk, [&] { return generation != gen; });
    lk.unlock();
    turn.lock();
  }
};

template <class Mem, class Exec>
class ProcessWorld final : public World<Mem> {
 public:
  using typename World<Mem>::chunk_view;
  using typename World<Mem>::source_view;
  using typename World<Mem>::run_view;
  ProcessWorld(Job<Mem, Exec>& job, std::vector<int> mine) : job_(job), mine_(std::move(mine)) {}
  int size() const override { return job_.buffer.size(); }
  const std::vector<int>& local_ranks() const override { return mine_; }
  void allocate(std::int64_t n) override {
    job_.rendezvous([&] { job_.buffer.allocate(n); });
  }
  std::int64_t chunk_elements() const override { return job_.buffer.chunk_elements(); }
  chunk_view local_chunk(int r) const override {
    for (int m : mine_)
      if (m == r) return job_.buffer.chunk(r);
    throw RuntimeError("rank " + std::to_string(r) + " is not local");
  }
  bool directly_addressable() const override { return false; }
  chunk_view chunk(int) const override { throw RuntimeError("not addressable"); }
  void put_runs(int src_rank, source_view src, run_view runs) override {
    (void)local_chunk(src_rank);  // only a local rank may put
    job_.buffer.put_runs(src_rank, src, runs);
  }
  void barrier() override {
    job_.buffer.barrier();
    job_.rendezvous([] {});
  }
  bool all_ok(bool ok) override {
    {
      std::lock_guard<std::mutex> lk(job_.m);
      job_.ok_acc = job_.ok_acc && ok;
    }
    job_.rendezvous([&] {
      job_.ok_result = job_.ok_acc;
      job_.ok_acc = true;
    });
    std::lock_guard<std::mutex> lk(job_.m);
    return job_.ok_result;
  }

 private:
  Job<Mem, Exec>& job_;
  std::vector<int> mine_;
};

// The portable variants but Kokkos::Threads: its kernels may be launched
// only from the thread that initialized Kokkos (ThreadsInternal::start
// refuses others), and these "processes" are threads of their own.
template <class P>
constexpr bool on_threads_backend() {
#if defined(KOKKOS_ENABLE_THREADS)
  return std::is_same<typename P::execution_space, Kokkos::Threads>::value;
#else
  return false;
#endif
}
template <class... P>  // declared only: for decltype
auto without_threads(std::tuple<P...>)
    -> decltype(std::tuple_cat(std::declval<std::conditional_t<on_threads_backend<P>(), std::tuple<>, std::tuple<P>>>()...));
using WorkerThreadVariants = decltype(without_threads(std::declval<PortableFormVariants>()));

}  // namespace

TEMPLATE_LIST_TEST_CASE("processes planning their own ranks through put_runs alone give the reference plan",
                        "[portable]", WorkerThreadVariants) {
  using Mem = typename TestType::memory_space;
  INFO(variant_name<TestType>());
  Config c;
  c.ranks = 6; c.experts = 24; c.topk = 4; c.tokens = 40; c.copy_slots = 3; c.token_padding = 4;
  const std::vector<std::vector<int>> partition = {{0, 1}, {2}, {3, 4, 5}};
  const int steps = 4;
  std::vector<Routing> routings;
  for (int s = 0; s < steps; ++s) routings.push_back(make_routing(c, s % 2 ? Shape::heavy_skew : Shape::random_dups, 90 + s));
  Routing bad = routings[0];
  bad[3][5] = -4;  // rank 3 lives on process 2

  using Exec = typename TestType::execution_space;
  Job<Mem, Exec> job(c.ranks, static_cast<int>(partition.size()));
  // got[step][rank], and what each process saw for the bad step.
  std::vector<std::vector<HostRankPlan>> got(steps, std::vector<HostRankPlan>(c.ranks));
  std::vector<std::string> bad_messages(partition.size());
  std::vector<std::thread> threads;
  for (std::size_t p = 0; p < partition.size(); ++p) {
    threads.emplace_back([&, p] {
      job.turn.lock();
      {
        ProcessWorld<Mem, Exec> world(job, partition[p]);
        TestType planner(c, world);
        auto mine = [&](const Routing& all) {
          Routing r;
          for (int rank : partition[p]) r.push_back(all[rank]);
          return r;
        };
        for (int s = 0; s < steps; ++s) {
          if (s == 2) {
            try {
              plan_with(planner, mine(bad));
            } catch (const InputError& e) {
              bad_messages[p] = e.what();
            }
          }
          const HostPlan h = plan_with(planner, mine(routings[s]));
          for (std::size_t i = 0; i < partition[p].size(); ++i) got[s][partition[p][i]] = h.ranks[i];
        }
      }
      job.turn.unlock();
    });
  }
  for (auto& t : threads) t.join();

  for (int s = 0; s < steps; ++s) {
    const HostPlan expected = plan_reference(c, routings[s]);
    for (int r = 0; r < c.ranks; ++r) {
      INFO("step " << s << " rank " << r);
      CHECK(plan_difference(expected.ranks[r], got[s][r]) == "");
    }
  }
  // Every process threw; the one holding rank 3 names it.
  CHECK(bad_messages[2].find("routing[3][5]") != std::string::npos);
  CHECK(bad_messages[0].find("another rank") != std::string::npos);
  CHECK(bad_messages[1].find("another rank") != std::string::npos);
}

#if MOONEP_HAVE_CUDA_SPECIALIZATION
TEST_CASE("the CUDA specialization refuses a world with ranks in other processes, naming the way out") {
  Config c;
  c.ranks = 4; c.experts = 16; c.topk = 2; c.tokens = 8; c.copy_slots = 2; c.token_padding = 2;
  Job<Kokkos::CudaSpace, Kokkos::Cuda> job(c.ranks, 1);
  ProcessWorld<Kokkos::CudaSpace, Kokkos::Cuda> world(job, {1, 2});
  std::string message;
  try {
    Planner<Kokkos::Cuda, CudaSpecialization> planner(c, world);
  } catch (const InputError& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.find("holds 2 of its 4 ranks") != std::string::npos);
  CHECK(message.find("PortablePhases") != std::string::npos);
}
#endif
