// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// MpiSharedWorld: one MPI-3 shared-memory window holds every rank's chunk,
// so a process reads and writes its peers' chunks with plain loads and
// stores, exactly like the in-process world.
#include <cstring>
#include <string>

#include "moonep/mpi_world.hpp"

namespace moonep {

MpiSharedWorld::MpiSharedWorld(MPI_Comm comm, double timeout_s)
    : MpiWorld(comm, "MpiSharedWorld", MpiWorldKind::shared, timeout_s) {
  // Key 0 for everyone keeps the order of comm_, so node rank == world rank
  // when the whole communicator is on this node. (Blocking, but the base
  // constructor's bounded agreement showed every process is here.)
  check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_comm_), "MPI_Comm_split_type");
  int node_size = 0, node_rank = -1;
  check(MPI_Comm_size(node_comm_, &node_size), "MPI_Comm_size");
  check(MPI_Comm_rank(node_comm_, &node_rank), "MPI_Comm_rank");
  if (node_size != size_ || node_rank != rank_) {
    MPI_Comm_free(&node_comm_);
    // Every process sees node_size < size_ here, so all of them throw.
    throw RuntimeError("MpiSharedWorld: the communicator's " + std::to_string(size_) +
                       " processes do not share one node (" + std::to_string(node_size) +
                       " on this one); use the rma world");
  }
  check(MPI_Comm_set_errhandler(node_comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
}

MpiSharedWorld::~MpiSharedWorld() {
  free_window();  // before the communicator it was created on
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (node_comm_ != MPI_COMM_NULL && !finalized && !broken_) MPI_Comm_free(&node_comm_);
}

void MpiSharedWorld::create_window(std::int64_t bytes) {
  MPI_Info info;
  check(MPI_Info_create(&info), "MPI_Info_create");
  // Contiguous (the default, said explicitly): chunk r starts at r*bytes.
  MPI_Info_set(info, "alloc_shared_noncontig", "false");
  void* base = nullptr;
  const int rc = MPI_Win_allocate_shared(static_cast<MPI_Aint>(bytes), static_cast<int>(sizeof(std::int32_t)), info,
                                         node_comm_, &base, &win_);
  MPI_Info_free(&info);
  if (rc != MPI_SUCCESS) win_ = MPI_WIN_NULL;
  check(rc, "MPI_Win_allocate_shared");
  base_ = static_cast<std::int32_t*>(base);
  peers_.assign(static_cast<std::size_t>(size_), nullptr);
  for (int r = 0; r < size_; ++r) {
    MPI_Aint peer_bytes = 0;
    int disp_unit = 0;
    void* peer = nullptr;
    check(MPI_Win_shared_query(win_, r, &peer_bytes, &disp_unit, &peer), "MPI_Win_shared_query");
    peers_[static_cast<std::size_t>(r)] = static_cast<std::int32_t*>(peer);
  }
}

MpiSharedWorld::chunk_view MpiSharedWorld::chunk(int rank) const {
  if (rank < 0 || rank >= size_) throw RuntimeError("MpiSharedWorld: no rank " + std::to_string(rank));
  if (win_ == MPI_WIN_NULL) throw RuntimeError("MpiSharedWorld: chunk() before allocate()");
  return chunk_view(peers_[static_cast<std::size_t>(rank)], static_cast<std::size_t>(chunk_));
}

void MpiSharedWorld::put_runs(int src_rank, source_view src, run_view runs) {
  if (src_rank != rank_) {
    throw RuntimeError("MpiSharedWorld::put_runs: rank " + std::to_string(src_rank) + " is not local");
  }
  const std::int64_t src_len = static_cast<std::int64_t>(src.extent(0));
  const std::size_t n = runs.extent(0);
  for (std::size_t i = 0; i < n; ++i) {
    const PutRun run = runs(i);
    check_run(run, src_len);
    if (run.count == 0) continue;
    std::memcpy(peers_[static_cast<std::size_t>(run.dst_rank)] + run.dst_offset, src.data() + run.src_offset,
                static_cast<std::size_t>(run.count) * sizeof(std::int32_t));
  }
}

void MpiSharedWorld::barrier() {
  // Local kernels that wrote into the window must be done first.
  Kokkos::fence();
  if (win_ == MPI_WIN_NULL) {
    barrier_step("barrier");
    return;
  }
  // Plain stores into a shared window are synchronised by the MPI memory
  // model only through MPI calls (MPI-3.1 §11.7, "unified model" example
  // 11.10): MPI_Win_sync is the memory barrier that makes this process's
  // stores (our own chunk and the memcpys into peers' chunks) visible
  // before we tell the others we are done; the barrier (an MPI_Ibarrier
  // waited for within the timeout) is the "I am done" among processes; the
  // second MPI_Win_sync keeps our later loads from being satisfied with
  // values read (or cached by the compiler) before the barrier, so we see
  // every peer's stores.
  check(MPI_Win_sync(win_), "MPI_Win_sync");
  barrier_step("barrier");
  check(MPI_Win_sync(win_), "MPI_Win_sync");
}

}  // namespace moonep
