// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// What both MPI worlds share: communicator duplication, error handling,
// window lifetime, allocate/all_ok, and the factory. Every collective is
// started nonblocking and waited for within the timeout (wait()), or entered
// only right after such a step showed that every process is there.
#include "moonep/mpi_world.hpp"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

namespace moonep {

MpiWorldKind mpi_world_kind_from_string(const std::string& name) {
  if (name == "auto") return MpiWorldKind::automatic;
  if (name == "shared") return MpiWorldKind::shared;
  if (name == "rma") return MpiWorldKind::rma;
  throw InputError("unknown MPI world '" + name + "' (expected auto, shared or rma)");
}

const char* to_string(MpiWorldKind kind) {
  switch (kind) {
    case MpiWorldKind::automatic: return "auto";
    case MpiWorldKind::shared: return "shared";
    case MpiWorldKind::rma: return "rma";
  }
  return "unknown";
}

namespace {

std::string mpi_error_string(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<std::size_t>(len));
}

void require_mpi(const char* name) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    throw RuntimeError(std::string(name) + ": MPI is not initialised (call MPI_Init first)");
  }
}

bool mpi_alive() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

// Kind codes for agreeing on the kind (MPI_MAX of code and of -code).
int kind_code(MpiWorldKind kind) { return static_cast<int>(kind); }

// Agrees on `kind` over `comm` within the timeout: RuntimeError on every
// process when they asked for different kinds.
void agree_on_kind(MPI_Comm comm, MpiWorldKind kind, double timeout_s, const char* name) {
  // Heap buffers, left to MPI if abandoned (see MpiWorld::agree).
  auto buf = std::make_unique<int[]>(4);
  int* mine = buf.get();
  int* all = buf.get() + 2;
  mine[0] = kind_code(kind), mine[1] = -kind_code(kind);
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Iallreduce(mine, all, 2, MPI_INT, MPI_MAX, comm, &req);
  if (rc == MPI_SUCCESS && !mpi_wait_for(req, timeout_s, &rc)) {
    buf.release();
    throw MpiTimeoutError(std::string(name) + ": the other processes did not arrive within " + seconds(timeout_s) +
                       " to agree on the MPI world (a process stopped, hangs or runs with other options)");
  }
  if (rc != MPI_SUCCESS) throw RuntimeError(std::string(name) + ": MPI_Iallreduce failed: " + mpi_error_string(rc));
  if (all[0] != -all[1]) {
    throw RuntimeError(std::string(name) + ": the processes asked for different MPI worlds (" +
                       to_string(static_cast<MpiWorldKind>(-all[1])) + " and " +
                       to_string(static_cast<MpiWorldKind>(all[0])) +
                       "); every process must use the same one (--mpi-world, $MOONEP_MPI_WORLD)");
  }
}

// MPI_Comm_idup of `comm` within the timeout. The new handle is written
// when the duplication completes: it lives on the heap and is left to MPI
// if we give up on it.
MPI_Comm bounded_dup(MPI_Comm comm, double timeout_s, const char* name) {
  auto handle = std::make_unique<MPI_Comm>(MPI_COMM_NULL);
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Comm_idup(comm, handle.get(), &req);
  if (rc == MPI_SUCCESS && !mpi_wait_for(req, timeout_s, &rc)) {
    handle.release();
    throw MpiTimeoutError(std::string(name) + ": the other processes did not arrive within " + seconds(timeout_s) +
                          " to create the world (a process stopped, hangs or runs with other options)");
  }
  if (rc != MPI_SUCCESS) throw RuntimeError(std::string(name) + ": MPI_Comm_idup failed: " + mpi_error_string(rc));
  return *handle;
}

}  // namespace

std::string MpiWorld::timeout_message(const char* what) const {
  return std::string(name_) + ": " + what + ": the other processes did not arrive within " + seconds(timeout_s_) +
         " (a process stopped, hangs or runs with other options; $MOONEP_MPI_TIMEOUT sets the limit); this world "
         "can no longer be used";
}

MpiWorld::MpiWorld(MPI_Comm user_comm, const char* name, MpiWorldKind kind, double timeout_s)
    : name_(name), timeout_s_(timeout_s) {
  require_mpi(name);
  if (user_comm == MPI_COMM_NULL) throw RuntimeError(std::string(name) + ": communicator is MPI_COMM_NULL");
  if (!(timeout_s > 0)) throw RuntimeError(std::string(name) + ": the timeout must be positive");
  // Our own duplicate: our collectives and windows never match messages of
  // the caller's, and the caller's error handler stays theirs; bounded, so
  // that a process that never comes cannot hold us forever.
  comm_ = bounded_dup(user_comm, timeout_s_, name);
  try {
    check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
    agree_on_kind(comm_, kind, timeout_s_, name);
  } catch (...) {
    if (!broken_) MPI_Comm_free(&comm_);  // a timed-out exchange may still use it
    throw;
  }
  local_.assign(1, rank_);
}

MpiWorld::~MpiWorld() {
  free_window();
  // A broken world's peers may never free theirs: abandon the handle.
  if (comm_ != MPI_COMM_NULL && mpi_alive() && !broken_) MPI_Comm_free(&comm_);
}

void MpiWorld::barrier_step(const char* what) {
  if (broken_) throw RuntimeError(std::string(name_) + ": " + what + ": the world is broken by an earlier timeout");
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Ibarrier(comm_, &req), "MPI_Ibarrier");
  int rc = MPI_SUCCESS;
  if (!mpi_wait_for(req, timeout_s_, &rc)) {
    broken_ = true;
    throw MpiTimeoutError(timeout_message(what));
  }
  check(rc, what);
}

MpiWorld::Agreed MpiWorld::agree(int step, long long value, const char* what) {
  if (broken_) throw RuntimeError(std::string(name_) + ": " + what + ": the world is broken by an earlier timeout");
  const long long seq = ++sequence_;
  // On the heap: an exchange abandoned at a timeout is still completed by
  // MPI if a late peer comes, writing into these buffers, so then they are
  // left to it (leaked) rather than freed.
  auto buf = std::make_unique<long long[]>(12);
  long long* mine = buf.get();
  long long* all = buf.get() + 6;
  const long long in[6] = {seq, -seq, step, -step, value, -value};
  std::copy(in, in + 6, mine);
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Iallreduce(mine, all, 6, MPI_LONG_LONG, MPI_MAX, comm_, &req), "MPI_Iallreduce");
  int rc = MPI_SUCCESS;
  if (!mpi_wait_for(req, timeout_s_, &rc)) {
    broken_ = true;
    buf.release();
    throw MpiTimeoutError(timeout_message(what));
  }
  check(rc, what);
  if (all[0] != -all[1] || all[2] != -all[3]) {
    // We met processes at another exchange: they gave up on this one.
    broken_ = true;
    throw MpiTimeoutError(std::string(name_) + ": " + what +
                          ": the other processes are at another step (they gave up waiting for this process); "
                          "this world can no longer be used");
  }
  return {-all[5], all[4]};
}

void MpiWorld::check(int rc, const char* call) const {
  if (rc != MPI_SUCCESS) {
    throw RuntimeError(std::string(name_) + ": " + call + " failed: " + mpi_error_string(rc));
  }
}

void MpiWorld::check_run(const PutRun& run, std::int64_t src_len) const {
  const bool ok = run.dst_rank >= 0 && run.dst_rank < size_ && run.count >= 0 && run.dst_offset >= 0 &&
                  run.src_offset >= 0 && run.dst_offset + run.count <= chunk_ &&
                  run.src_offset + run.count <= src_len;
  if (!ok) {
    throw RuntimeError(std::string(name_) + ": put run out of bounds (dst_rank " + std::to_string(run.dst_rank) +
                       ", dst_offset " + std::to_string(run.dst_offset) + ", src_offset " +
                       std::to_string(run.src_offset) + ", count " + std::to_string(run.count) + "; chunk " +
                       std::to_string(chunk_) + ", source " + std::to_string(src_len) + ")");
  }
}

void MpiWorld::free_window() noexcept {
  if (win_ == MPI_WIN_NULL) return;
  // MPI_Win_free waits for every process: enter it only once a bounded
  // barrier showed they are all freeing theirs.
  bool everyone_here = !broken_ && mpi_alive();
  if (everyone_here) {
    try {
      agree(kAgreeFree, 0, "freeing the window");
    } catch (const RuntimeError&) {
      everyone_here = false;
    }
  }
  if (everyone_here) {
    MPI_Win_unlock_all(win_);
    MPI_Win_free(&win_);
  }
  win_ = MPI_WIN_NULL;
  base_ = nullptr;
  chunk_ = 0;
}

void MpiWorld::allocate(std::int64_t elements) {
  // Agree first, so that a caller bug (different sizes, a negative size)
  // is an error on every process instead of a hang or a corrupt layout.
  const Agreed sizes = agree(kAgreeAllocate, static_cast<long long>(elements), "allocate");
  if (sizes.min != sizes.max) {
    throw RuntimeError(std::string(name_) + "::allocate: processes asked for different chunk sizes (" +
                       std::to_string(sizes.min) + " to " + std::to_string(sizes.max) + " values)");
  }
  if (elements < 0) throw RuntimeError(std::string(name_) + "::allocate: negative chunk size");
  free_window();
  // Every process passed the agreement just now, so the blocking window
  // creation finds them all.
  create_window(elements * static_cast<std::int64_t>(sizeof(std::int32_t)));
  chunk_ = elements;
  check(MPI_Win_set_errhandler(win_, MPI_ERRORS_RETURN), "MPI_Win_set_errhandler");
  // One passive-target epoch for the window's whole life: every process may
  // access every window at any time; barrier() provides the ordering.
  // NOCHECK: nobody ever takes an exclusive lock on it.
  check(MPI_Win_lock_all(MPI_MODE_NOCHECK, win_), "MPI_Win_lock_all");
}

MpiWorld::chunk_view MpiWorld::local_chunk(int rank) const {
  if (rank != rank_) {
    throw RuntimeError(std::string(name_) + ": rank " + std::to_string(rank) + " is not local (this process is rank " +
                       std::to_string(rank_) + ")");
  }
  return chunk_view(base_, static_cast<std::size_t>(chunk_));
}

bool MpiWorld::all_ok(bool local_ok) {
  // Anyone's 1 (not ok) makes the maximum 1.
  return agree(kAgreeAllOk, local_ok ? 0 : 1, "all_ok").max == 0;
}

bool mpi_comm_on_one_node(MPI_Comm comm) {
  require_mpi("mpi_comm_on_one_node");
  MPI_Comm node = MPI_COMM_NULL;
  int size = 0, node_size = 0;
  if (MPI_Comm_size(comm, &size) != MPI_SUCCESS ||
      MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS) {
    throw RuntimeError("mpi_comm_on_one_node: MPI_Comm_split_type failed");
  }
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  return node_size == size;
}

std::unique_ptr<MpiWorld> make_mpi_world(MPI_Comm comm, MpiWorldKind kind, double timeout_s) {
  if (kind == MpiWorldKind::automatic) {
    // Decided on a private duplicate, after agreeing that every process
    // asks for automatic (one asking for shared would otherwise wait in a
    // different collective). Every process sees the same answer (either all
    // of the communicator is on its node, or none of the processes sees all
    // of it), so they all build the same kind.
    require_mpi("make_mpi_world");
    MPI_Comm probe = bounded_dup(comm, timeout_s, "make_mpi_world");
    MPI_Comm_set_errhandler(probe, MPI_ERRORS_RETURN);
    bool one_node = false;
    try {
      agree_on_kind(probe, MpiWorldKind::automatic, timeout_s, "make_mpi_world");
      one_node = mpi_comm_on_one_node(probe);
    } catch (...) {
      MPI_Comm_free(&probe);
      throw;
    }
    MPI_Comm_free(&probe);
    kind = one_node ? MpiWorldKind::shared : MpiWorldKind::rma;
  }
  if (kind == MpiWorldKind::shared) return std::make_unique<MpiSharedWorld>(comm, timeout_s);
  return std::make_unique<MpiRmaWorld>(comm, timeout_s);
}

}  // namespace moonep
