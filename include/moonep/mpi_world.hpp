// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/mpi_world.hpp — Worlds whose ranks are MPI processes, one rank per
// process (rank = the process's rank in the communicator it was given).
//
// Two implementations of the World contract (moonep/world.hpp), both over
// host memory:
//  * MpiSharedWorld: every process on one node. The symmetric buffer is one
//    MPI-3 shared-memory window (contiguous), so every rank's chunk is
//    ordinary memory this process can read and write: directly_addressable()
//    is true and put_runs() is a memcpy into the peer's chunk.
//  * MpiRmaWorld: no shared memory assumed (ranks on several nodes). Each
//    rank's chunk lives in an MPI_Win_allocate window; put_runs() issues
//    MPI_Put and barrier() completes them. directly_addressable() is false,
//    so the planner moves everything through put_runs().
// make_mpi_world() picks one (shared when the whole communicator is on one
// node) unless told which.
//
// Both duplicate the caller's communicator (any communicator, not only
// MPI_COMM_WORLD), set MPI_ERRORS_RETURN on the duplicate and on their
// windows, and turn every MPI error into moonep::RuntimeError carrying MPI's
// error string. Construction, allocate(), barrier(), all_ok() and the
// destructor are collective over the communicator. MPI must be initialised
// before construction and still be initialised when the world is destroyed.
//
// No wait is unbounded. Every collective step (the duplication, the
// agreement on the world's kind and on allocate()'s size, barrier(),
// all_ok(), freeing the window) waits at most timeout() seconds for the
// other processes (default_mpi_timeout(): $MOONEP_MPI_TIMEOUT, else 300),
// and the collectives MPI offers no bounded form of (creating and freeing
// windows, splitting by node) are entered only after a bounded step showed
// every process is there. A process that stopped, hangs, or runs with other
// options therefore makes the others throw RuntimeError ("... did not
// arrive within N s") instead of waiting forever. After such a timeout the
// world is broken(): every further collective throws at once, and the
// destructor frees nothing collectively (the MPI handles are abandoned: the
// peers may never come), so the process can report and exit.
//
// Known MPI bug (not ours, no workaround possible inside one communicator):
// Open MPI before 5.0, when its osc/rdma component carries the windows (one
// node without UCX, or TCP clusters), names each window's node-local
// segment after the communicator's context id, which the disjoint
// communicators of one MPI_Comm_split share. Two MpiRmaWorlds on such
// communicators, with processes on the same node, can then map the same
// memory and corrupt each other's plans (open-mpi/ompi#9492, fixed in 5.0).
// Use Open MPI >= 5, or --mca osc ucx / --mca osc pt2pt, in that setting.
// MpiSharedWorld (osc/sm) is not affected.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "moonep/world.hpp"

namespace moonep {

enum class MpiWorldKind { automatic, shared, rma };

// What a world throws when its peers did not arrive within its timeout.
class MpiTimeoutError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

// Seconds a world waits for its peers at any one step: $MOONEP_MPI_TIMEOUT
// when set to a positive number, else kDefaultMpiTimeout. RuntimeError for
// a value that is not a positive number.
inline constexpr double kDefaultMpiTimeout = 300;
double default_mpi_timeout();

// Waits for `request` at most `timeout_s` seconds, polling with MPI_Test
// (sleeping a little longer each time, up to 1 ms, so that oversubscribed
// processes leave the cores to the ones they wait for). True when it
// completed (*rc, if given, is MPI_Test's result); false on timeout, the
// request still pending.
bool mpi_wait_for(MPI_Request& request, double timeout_s, int* rc = nullptr);

// "auto", "shared", "rma"; InputError for anything else.
MpiWorldKind mpi_world_kind_from_string(const std::string& name);
const char* to_string(MpiWorldKind kind);

// What both MPI worlds share: the duplicated communicator, the one window
// of the symmetric buffer, the collectives. Not copyable or movable (it owns
// MPI handles whose release is collective).
class MpiWorld : public World<Kokkos::HostSpace> {
 public:
  ~MpiWorld() override;
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  int size() const override { return size_; }
  const std::vector<int>& local_ranks() const override { return local_; }
  std::int64_t chunk_elements() const override { return chunk_; }

  // Collective: allocates a new window (freeing the previous one, so views
  // handed out before no longer point anywhere). Every process must pass
  // the same `elements`: a mismatch is a RuntimeError on every process.
  void allocate(std::int64_t elements) override;

  chunk_view local_chunk(int rank) const override;

  // MPI_Allreduce(MPI_LAND) over the communicator.
  bool all_ok(bool local_ok) override;

  // This process's rank (its only local rank) and the world's own
  // duplicate of the caller's communicator.
  int rank() const { return rank_; }
  MPI_Comm comm() const { return comm_; }
  // shared or rma (never automatic).
  virtual MpiWorldKind kind() const = 0;

  // The longest wait at one step, and whether one has timed out (the world
  // is then unusable: see the top of this file).
  double timeout() const { return timeout_s_; }
  bool broken() const { return broken_; }

 protected:
  // Duplicates `user_comm` and agrees with every process on `kind` (an
  // MpiSharedWorld on one process and an MpiRmaWorld on another is a
  // RuntimeError on both), each within timeout_s.
  MpiWorld(MPI_Comm user_comm, const char* name, MpiWorldKind kind, double timeout_s);

  // Creates the window of `bytes` bytes for this process and sets base_ (and
  // whatever the subclass needs to address peers). Called by allocate().
  virtual void create_window(std::int64_t bytes) = 0;
  // Throws RuntimeError("<name>: <call> failed: <MPI error string>") unless
  // rc is MPI_SUCCESS.
  void check(int rc, const char* call) const;
  // Throws RuntimeError unless `run` stays inside the source and the chunk.
  void check_run(const PutRun& run, std::int64_t src_len) const;
  // The collective steps, each waited for within the timeout. An exchange
  // carrying values (allocate()'s size, all_ok(), freeing the window) is an MPI_Iallreduce(MAX) of (sequence number, step, value) and
  // their negations, so that a process meeting its peers at another step
  // finds out instead of mixing data; barrier() is a plain MPI_Ibarrier
  // (as cheap as MPI_Barrier). A process that comes after the others gave
  // up matches their abandoned step (every process makes the same calls in
  // the same order) and is alone at its next one, where it times out too.
  // agree returns the smallest and largest `value`. MpiTimeoutError naming
  // `what` on timeout (the world is then broken); throws at once when
  // broken.
  struct Agreed {
    long long min, max;
  };
  // The steps: a process at another step than its peers is found out even
  // where the sequence numbers match.
  enum Step : int { kAgreeAllocate = 1, kAgreeAllOk, kAgreeFree };
  Agreed agree(int step, long long value, const char* what);
  void barrier_step(const char* what);
  std::string timeout_message(const char* what) const;
  // Frees the window after a bounded agreement; abandons it when the world
  // is broken or the agreement fails (peers may never come to free theirs).
  void free_window() noexcept;

  const char* name_;
  double timeout_s_ = kDefaultMpiTimeout;
  bool broken_ = false;
  long long sequence_ = 0;  // exchanges so far (agree())
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Win win_ = MPI_WIN_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> local_;
  std::int64_t chunk_ = 0;
  std::int32_t* base_ = nullptr;  // this process's chunk
};

// One node, one MPI-3 shared-memory window: chunks addressed in place.
class MpiSharedWorld final : public MpiWorld {
 public:
  // Throws RuntimeError if the communicator's processes do not all share
  // one node (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) is smaller).
  explicit MpiSharedWorld(MPI_Comm comm, double timeout_s = default_mpi_timeout());
  ~MpiSharedWorld() override;

  MpiWorldKind kind() const override { return MpiWorldKind::shared; }
  bool directly_addressable() const override { return true; }
  chunk_view chunk(int rank) const override;
  void put_runs(int src_rank, source_view src, run_view runs) override;
  void barrier() override;

 private:
  void create_window(std::int64_t bytes) override;
  MPI_Comm node_comm_ = MPI_COMM_NULL;  // same processes, same rank order
  std::vector<std::int32_t*> peers_;    // chunk of every rank, via MPI_Win_shared_query
};

// No shared memory: MPI_Put into per-rank windows.
class MpiRmaWorld final : public MpiWorld {
 public:
  explicit MpiRmaWorld(MPI_Comm comm, double timeout_s = default_mpi_timeout());

  MpiWorldKind kind() const override { return MpiWorldKind::rma; }
  bool directly_addressable() const override { return false; }
  // Throws RuntimeError: peers' chunks are not addressable here.
  chunk_view chunk(int rank) const override;
  // `src` must stay unchanged until the next barrier() (the puts may still
  // be reading it).
  void put_runs(int src_rank, source_view src, run_view runs) override;
  void barrier() override;

 private:
  void create_window(std::int64_t bytes) override;
};

// True when every process of `comm` shares this process's node.
bool mpi_comm_on_one_node(MPI_Comm comm);

// Collective over `comm`. automatic: MpiSharedWorld when the whole
// communicator is on one node, else MpiRmaWorld; shared/rma force one
// (shared throws RuntimeError on every process if the ranks span nodes).
// Every process must ask for the same kind (else RuntimeError on all of
// them), and every wait is bounded by timeout_s.
std::unique_ptr<MpiWorld> make_mpi_world(MPI_Comm comm, MpiWorldKind kind = MpiWorldKind::automatic,
                                         double timeout_s = default_mpi_timeout());

}  // namespace moonep
