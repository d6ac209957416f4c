// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The symmetric memory of moonep::MpiLayer and its bounded steps
// (mpi_layer_window.hpp). Collectives MPI has no bounded form of (creating
// and freeing the window) are entered only right after a bounded step
// showed every process is there, as the worlds do (mpi_world.cpp).
#include "mpi/mpi_layer_window.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace moonep::impl {

namespace {
constexpr std::size_t kMessage = 512;  // an error line, as sent to every process
}

void MpiLayerWindow::check(int rc, const char* call) const {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw RuntimeError(std::string("MpiLayer: ") + call + " failed: " + std::string(text, static_cast<std::size_t>(len)));
}

void MpiLayerWindow::wait(MPI_Request& req, const char* op) {
  int rc = MPI_SUCCESS;
  if (!mpi_wait_for(req, world_.timeout(), &rc)) {
    broken_ = true;
    throw MpiTimeoutError(std::string("MpiLayer: ") + op + ": the other processes did not arrive within " +
                          std::to_string(static_cast<long long>(world_.timeout())) +
                          " s (a process stopped, hangs or runs with other options; $MOONEP_MPI_TIMEOUT sets "
                          "the limit); this layer can no longer be used");
  }
  check(rc, op);
}

MpiLayerWindow::MpiLayerWindow(MpiWorld& world, std::int64_t bytes, const long long* fingerprint, int n,
                               const char* what)
    : world_(world), comm_(world.comm()), rank_(world.rank()), direct_(world.kind() == MpiWorldKind::shared) {
  if (world.broken()) throw RuntimeError(std::string(what) + ": the world is broken by an earlier timeout");
  // Every process passes the same values: the maxima of v and -v agree.
  // On the heap: abandoned to MPI at a timeout (a late peer still writes).
  auto buf = std::make_unique<long long[]>(4 * static_cast<std::size_t>(n));
  long long* in = buf.get();
  long long* out = in + 2 * n;
  for (int i = 0; i < n; ++i) {
    in[i] = fingerprint[i];
    in[n + i] = -fingerprint[i];
  }
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Iallreduce(in, out, 2 * n, MPI_LONG_LONG, MPI_MAX, comm_, &req), "MPI_Iallreduce");
  try {
    wait(req, what);
  } catch (const MpiTimeoutError&) {
    buf.release();
    throw;
  }
  for (int i = 0; i < n; ++i)
    if (out[i] != -out[n + i])
      throw InputError(std::string(what) + ": the processes were given different configurations, H or T");
  MPI_Info info;
  check(MPI_Info_create(&info), "MPI_Info_create");
  void* base = nullptr;
  const MPI_Aint size = static_cast<MPI_Aint>(std::max<std::int64_t>(bytes, 1));
  int rc;
  if (direct_) {
    MPI_Info_set(info, "alloc_shared_noncontig", "true");
    rc = MPI_Win_allocate_shared(size, 1, info, comm_, &base, &win_);
  } else {
    MPI_Info_set(info, "same_size", "true");
    MPI_Info_set(info, "same_disp_unit", "true");
    rc = MPI_Win_allocate(size, 1, info, comm_, &base, &win_);
  }
  MPI_Info_free(&info);
  if (rc != MPI_SUCCESS) win_ = MPI_WIN_NULL;
  check(rc, direct_ ? "MPI_Win_allocate_shared" : "MPI_Win_allocate");
  MPI_Win_set_errhandler(win_, MPI_ERRORS_RETURN);
  peers_.assign(static_cast<std::size_t>(world.size()), nullptr);
  peers_[static_cast<std::size_t>(rank_)] = static_cast<unsigned char*>(base);
  if (direct_)
    for (int r = 0; r < world.size(); ++r) {
      MPI_Aint peer_bytes = 0;
      int disp_unit = 0;
      void* peer = nullptr;
      check(MPI_Win_shared_query(win_, r, &peer_bytes, &disp_unit, &peer), "MPI_Win_shared_query");
      peers_[static_cast<std::size_t>(r)] = static_cast<unsigned char*>(peer);
    }
  check(MPI_Win_lock_all(MPI_MODE_NOCHECK, win_), "MPI_Win_lock_all");
}

MpiLayerWindow::~MpiLayerWindow() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (win_ == MPI_WIN_NULL || finalized || broken_ || world_.broken()) return;  // abandoned: peers may never come
  MPI_Request req = MPI_REQUEST_NULL;
  if (MPI_Ibarrier(comm_, &req) != MPI_SUCCESS || !mpi_wait_for(req, world_.timeout())) return;
  MPI_Win_unlock_all(win_);
  MPI_Win_free(&win_);
}

void MpiLayerWindow::put(const void* src, std::int64_t bytes, int r, std::int64_t offset) {
  if (bytes == 0) return;
  if (direct_) {
    std::memcpy(peers_[static_cast<std::size_t>(r)] + offset, src, static_cast<std::size_t>(bytes));
    return;
  }
  check(MPI_Put(src, static_cast<int>(bytes), MPI_BYTE, r, static_cast<MPI_Aint>(offset), static_cast<int>(bytes),
                MPI_BYTE, win_),
        "MPI_Put");
}

void MpiLayerWindow::get(void* dst, std::int64_t bytes, int r, std::int64_t offset) {
  if (bytes == 0) return;
  if (direct_ || r == rank_) {
    std::memcpy(dst, peers_[static_cast<std::size_t>(r)] + offset, static_cast<std::size_t>(bytes));
    return;
  }
  check(MPI_Get(dst, static_cast<int>(bytes), MPI_BYTE, r, static_cast<MPI_Aint>(offset), static_cast<int>(bytes),
                MPI_BYTE, win_),
        "MPI_Get");
  check(MPI_Win_flush(r, win_), "MPI_Win_flush");
}

void MpiLayerWindow::start(const char* op, const std::string& error) {
  if (broken_) throw RuntimeError(std::string("MpiLayer: ") + op + ": the layer is broken by an earlier timeout");
  if (world_.all_ok(error.empty())) {
    check(MPI_Win_sync(win_), "MPI_Win_sync");
    return;
  }
  // Somebody's arguments are bad: every process throws the line of the
  // lowest bad rank, which it sends to the others.
  auto buf = std::make_unique<char[]>(kMessage + 2 * sizeof(int));
  int* lowest = reinterpret_cast<int*>(buf.get() + kMessage);
  lowest[0] = error.empty() ? world_.size() : rank_;
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Iallreduce(lowest, lowest + 1, 1, MPI_INT, MPI_MIN, comm_, &req), "MPI_Iallreduce");
  try {
    wait(req, op);
    const int from = lowest[1];
    if (from == rank_) {
      const std::string line = std::string(op) + ": rank " + std::to_string(rank_) + ": " + error;
      std::memset(buf.get(), 0, kMessage);
      std::memcpy(buf.get(), line.data(), std::min(line.size(), kMessage - 1));
    }
    check(MPI_Ibcast(buf.get(), static_cast<int>(kMessage), MPI_CHAR, from, comm_, &req), "MPI_Ibcast");
    wait(req, op);
  } catch (const MpiTimeoutError&) {
    buf.release();
    throw;
  }
  buf[kMessage - 1] = 0;
  throw InputError(std::string(buf.get()));
}

void MpiLayerWindow::fence(const char* op) {
  if (!direct_) check(MPI_Win_flush_all(win_), "MPI_Win_flush_all");
  check(MPI_Win_sync(win_), "MPI_Win_sync");
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Ibarrier(comm_, &req), "MPI_Ibarrier");
  wait(req, op);
  check(MPI_Win_sync(win_), "MPI_Win_sync");
}

}  // namespace moonep::impl
