// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/world.hpp — the ranks a planner runs over, and the one symmetric
// buffer they exchange data through.
//
// A World has R ranks. Every rank owns a chunk of one symmetric buffer of
// int32 values; all chunks have the same size, fixed by allocate(). A
// process plans the world's local_ranks(): all R of them for the in-process
// world below, one for an MPI world.
//
// Contract (what the planner's phases rely on, and all a World must give):
//  * allocate(n), barrier() and all_ok() are collective: every process calls
//    them, in the same order, once per call (not once per local rank).
//  * put_runs() is one-sided and issued on behalf of one local rank. It may
//    complete asynchronously: the data is only guaranteed to be in the
//    destination chunks, and visible to every rank, after the next barrier().
//    The caller has finished writing `src` and `runs` (fenced its execution
//    space) before the call and leaves `src` unchanged until that barrier.
//    Two puts into the same destination values between two barriers are a
//    caller bug.
//  * local_chunk(r) of a local rank is ordinary memory of MemorySpace: the
//    process reads and writes it directly (for any of its local ranks);
//    writes made to it before a barrier() are visible to puts/reads of
//    other ranks after it. Between two barriers, no value of a chunk is
//    written twice, whether by stores or puts.
//  * directly_addressable() worlds (one process, or an MPI shared-memory
//    window) also hand out chunk(r) of any rank, so readers may skip a
//    broadcast and read rank 0's tables in place (the fast path), and the
//    portable planner stores what one local rank sends another in place
//    instead of putting it. Worlds without shared memory (MPI across
//    nodes, with MPI_Put) return false and the planner moves everything
//    through put_runs().
//  * all_ok(local_ok) returns true only if every process passed true. A
//    planner calls it after validating its input and before touching the
//    buffer, so that one rank's bad input makes every rank throw and no
//    rank waits forever in a barrier.
#pragma once

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "moonep/error.hpp"
#include "moonep/impl/kokkos_compat.hpp"

namespace moonep {

// One contiguous copy of a put: `count` values from src[src_offset...] into
// the chunk of `dst_rank` at `dst_offset`. Offsets count int32 values.
struct PutRun {
  std::int32_t dst_rank;
  std::int32_t reserved;  // keeps the 64-bit fields aligned on every ABI
  std::int64_t dst_offset;
  std::int64_t src_offset;
  std::int64_t count;
};

template <class MemorySpace>
class World {
 public:
  using memory_space = MemorySpace;
  using chunk_view = Kokkos::View<std::int32_t*, MemorySpace>;
  using source_view = Kokkos::View<const std::int32_t*, MemorySpace>;
  using run_view = Kokkos::View<const PutRun*, MemorySpace>;

  virtual ~World() = default;

  // R, and the ranks this process plans (increasing).
  virtual int size() const = 0;
  virtual const std::vector<int>& local_ranks() const = 0;

  // Collective: (re)allocates the symmetric buffer, `elements` int32 per
  // chunk. Contents are undefined until written.
  virtual void allocate(std::int64_t elements) = 0;
  virtual std::int64_t chunk_elements() const = 0;

  // The chunk of a local rank.
  virtual chunk_view local_chunk(int rank) const = 0;

  // Fast path: every rank's chunk addressable from this process.
  virtual bool directly_addressable() const = 0;
  // Only when directly_addressable(); throws RuntimeError otherwise.
  virtual chunk_view chunk(int rank) const = 0;

  // One-sided: copies each run from `src` (memory of a local rank) into the
  // destination ranks' chunks; complete and visible after the next barrier().
  // `runs` lives in MemorySpace (a world without device-initiated transfers
  // may copy it to the host to issue MPI_Put).
  virtual void put_runs(int src_rank, source_view src, run_view runs) = 0;

  // Collective: every put issued before it, by any rank, has landed, and
  // every local write to a chunk is visible to every rank.
  virtual void barrier() = 0;

  // Collective agreement: true iff every process passed true.
  virtual bool all_ok(bool local_ok) = 0;

  // One planner per world: a planner lays out and owns the world's buffer,
  // so a second one would reallocate it under the first. Planners call
  // attach_planner() in their constructor (InputError if one is already
  // attached; the world and that planner stay usable) and
  // detach_planner() in their destructor.
  void attach_planner() {
    if (has_planner_) {
      throw InputError("this world already has a planner (one planner per world: a second one would "
                       "reallocate the buffer the first plans in); destroy it first or make another world");
    }
    has_planner_ = true;
  }
  void detach_planner() { has_planner_ = false; }
  bool has_planner() const { return has_planner_; }

 private:
  bool has_planner_ = false;
};

namespace impl {
// A planner's claim on its world, held for the planner's lifetime (also when
// a later part of its constructor throws).
template <class WorldType>
class WorldClaim {
 public:
  explicit WorldClaim(WorldType& world) : world_(&world) { world.attach_planner(); }
  ~WorldClaim() { world_->detach_planner(); }
  WorldClaim(const WorldClaim&) = delete;
  WorldClaim& operator=(const WorldClaim&) = delete;

 private:
  WorldType* world_;
};
}  // namespace impl

// R virtual ranks in one process over ONE Kokkos view (chunks back to back).
// The planner runs every rank's part of a phase in the same kernels and
// never makes one rank wait for another inside a kernel, so barrier() only
// has to finish pending work. All ranks are local and the world is
// directly addressable: the portable planner puts nothing into it.
// put_runs and barrier run on ExecutionSpace (by default the memory space's
// own, e.g. Kokkos::Threads or OpenMP for HostSpace); a world driven from
// threads other than the one that initialized Kokkos must name one that
// allows it (Kokkos::Serial: Kokkos::Threads refuses such calls).
template <class MemorySpace, class ExecutionSpace = typename MemorySpace::execution_space>
class InProcessWorld final : public World<MemorySpace> {
 public:
  using typename World<MemorySpace>::chunk_view;
  using typename World<MemorySpace>::source_view;
  using typename World<MemorySpace>::run_view;
  using execution_space = ExecutionSpace;

  explicit InProcessWorld(int ranks) : ranks_(ranks), local_(ranks > 0 ? ranks : 0) {
    if (ranks < 1) throw InputError("InProcessWorld: ranks must be >= 1, got " + std::to_string(ranks));
    std::iota(local_.begin(), local_.end(), 0);
  }

  int size() const override { return ranks_; }
  const std::vector<int>& local_ranks() const override { return local_; }

  void allocate(std::int64_t elements) override {
    if (elements < 0) throw InputError("InProcessWorld::allocate: negative chunk size");
    chunk_ = elements;
    buffer_ = chunk_view(Kokkos::view_alloc(Kokkos::WithoutInitializing, "moonep::symmetric_buffer"),
                         static_cast<std::size_t>(elements) * ranks_);
  }
  std::int64_t chunk_elements() const override { return chunk_; }

  chunk_view local_chunk(int rank) const override { return chunk(rank); }
  bool directly_addressable() const override { return true; }
  chunk_view chunk(int rank) const override {
    if (rank < 0 || rank >= ranks_) throw RuntimeError("InProcessWorld: no rank " + std::to_string(rank));
    const std::size_t begin = static_cast<std::size_t>(rank) * chunk_;
    return Kokkos::subview(buffer_, Kokkos::make_pair(begin, begin + static_cast<std::size_t>(chunk_)));
  }

  void put_runs(int /*src_rank*/, source_view src, run_view runs) override {
    const int n = static_cast<int>(runs.extent(0));
    if (n == 0) return;
    using team_policy = Kokkos::TeamPolicy<execution_space>;
    Kokkos::parallel_for("moonep::world::inprocess_put_runs", team_policy(n, Kokkos::AUTO),
                         CopyRuns{buffer_, src, runs, chunk_});
  }

  void barrier() override { impl::compat::fence(execution_space(), "moonep::world::inprocess_barrier"); }
  bool all_ok(bool local_ok) override { return local_ok; }

  // The whole buffer (all chunks), for tests and tools.
  chunk_view buffer() const { return buffer_; }

 // Public only because nvcc's kernel stubs name the functor type.
  // One team per run copies it. A functor, not a lambda: nvcc miscompiles
  // extended lambdas of a template instantiated in several translation
  // units (the library and its user both instantiate this one), calling
  // through a null pointer at run time.
  struct CopyRuns {
    chunk_view buf;
    source_view src;
    run_view runs;
    std::int64_t chunk;
    using member = typename Kokkos::TeamPolicy<execution_space>::member_type;
    KOKKOS_INLINE_FUNCTION void operator()(const member& team) const {
      const PutRun run = runs(team.league_rank());
      std::int32_t* to = buf.data() + run.dst_rank * chunk + run.dst_offset;
      const std::int32_t* from = src.data() + run.src_offset;
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, run.count), [&](const std::int64_t k) { to[k] = from[k]; });
    }
  };

 private:
  int ranks_;
  std::vector<int> local_;
  std::int64_t chunk_ = 0;
  chunk_view buffer_;
};

}  // namespace moonep
