// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: the symmetric memory of moonep::MpiLayer (moonep/mpi_layer.hpp)
// and the bounded collective steps of its operations. One window per layer
// on the world's communicator: an MPI-3 shared window on an MpiSharedWorld
// (peer(r) is rank r's buffer, stores go straight there), MPI_Win_allocate
// on an MpiRmaWorld (put() is MPI_Put). Every wait is bounded by the
// world's timeout; after a timeout the window is broken and abandoned.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "moonep/mpi_world.hpp"

namespace moonep::impl {

class MpiLayerWindow {
 public:
  // Collective: agrees (bounded) that every process passes the same
  // `fingerprint` values (else InputError naming `what` on every process),
  // then allocates `bytes` bytes on every process.
  MpiLayerWindow(MpiWorld& world, std::int64_t bytes, const long long* fingerprint, int n, const char* what);
  ~MpiLayerWindow();
  MpiLayerWindow(const MpiLayerWindow&) = delete;
  MpiLayerWindow& operator=(const MpiLayerWindow&) = delete;

  bool direct() const { return direct_; }
  bool broken() const { return broken_; }
  unsigned char* local() const { return peers_[static_cast<std::size_t>(rank_)]; }
  // Rank r's buffer (direct() only).
  unsigned char* peer(int r) const { return peers_[static_cast<std::size_t>(r)]; }
  // `bytes` bytes from `src` to rank r's buffer at `offset`: a memcpy into
  // the peer (direct) or an MPI_Put, complete at the next fence(); `src`
  // must stay unchanged until then.
  void put(const void* src, std::int64_t bytes, int r, std::int64_t offset);
  // `bytes` bytes of rank r's buffer at `offset` into `dst`, complete on
  // return: a memcpy from the peer (direct) or MPI_Get and MPI_Win_flush.
  void get(void* dst, std::int64_t bytes, int r, std::int64_t offset);

  // The start of an operation, on every process: "" when this process's
  // arguments are good, else its error line. Throws InputError("<op>: rank
  // r: <error>") of the lowest bad rank on every process, else returns once
  // every process is here (so nobody still reads what the others will now
  // write) and the window is synchronised.
  void start(const char* op, const std::string& error);
  // Completes every put and store of every process (bounded barrier).
  void fence(const char* op);

 private:
  void check(int rc, const char* call) const;
  void wait(MPI_Request& req, const char* op);

  MpiWorld& world_;
  MPI_Comm comm_;
  MPI_Win win_ = MPI_WIN_NULL;
  int rank_ = 0;
  bool direct_ = false;
  bool broken_ = false;
  std::vector<unsigned char*> peers_;
};

}  // namespace moonep::impl
