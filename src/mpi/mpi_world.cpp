// What both MPI worlds share: communicator duplication, error handling,
// window lifetime, allocate/all_ok, and the factory.
#include "moonep/mpi_world.hpp"

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

}  // namespace

MpiWorld::MpiWorld(MPI_Comm user_comm, const char* name) : name_(name) {
  require_mpi(name);
  if (user_comm == MPI_COMM_NULL) throw RuntimeError(std::string(name) + ": communicator is MPI_COMM_NULL");
  // Our own duplicate: our collectives and windows never match messages of
  // the caller's, and the caller's error handler stays theirs.
  const int rc = MPI_Comm_dup(user_comm, &comm_);
  if (rc != MPI_SUCCESS) {
    comm_ = MPI_COMM_NULL;
    throw RuntimeError(std::string(name) + ": MPI_Comm_dup failed: " + mpi_error_string(rc));
  }
  try {
    check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  } catch (...) {
    MPI_Comm_free(&comm_);
    throw;
  }
  local_.assign(1, rank_);
}

MpiWorld::~MpiWorld() {
  free_window();
  if (comm_ != MPI_COMM_NULL && mpi_alive()) MPI_Comm_free(&comm_);
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
  if (mpi_alive()) {
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
  long long mine[2] = {static_cast<long long>(elements), -static_cast<long long>(elements)};
  long long agreed[2] = {0, 0};
  check(MPI_Allreduce(mine, agreed, 2, MPI_LONG_LONG, MPI_MAX, comm_), "MPI_Allreduce");
  if (agreed[0] != -agreed[1]) {
    throw RuntimeError(std::string(name_) + "::allocate: processes asked for different chunk sizes (" +
                       std::to_string(-agreed[1]) + " to " + std::to_string(agreed[0]) + " values)");
  }
  if (elements < 0) throw RuntimeError(std::string(name_) + "::allocate: negative chunk size");
  free_window();
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
  int mine = local_ok ? 1 : 0, all = 0;
  check(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, comm_), "MPI_Allreduce");
  return all != 0;
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

std::unique_ptr<MpiWorld> make_mpi_world(MPI_Comm comm, MpiWorldKind kind) {
  if (kind == MpiWorldKind::automatic) {
    // Every process sees the same answer (either all of the communicator is
    // on its node, or none of the processes sees all of it), so they all
    // build the same kind.
    kind = mpi_comm_on_one_node(comm) ? MpiWorldKind::shared : MpiWorldKind::rma;
  }
  if (kind == MpiWorldKind::shared) return std::make_unique<MpiSharedWorld>(comm);
  return std::make_unique<MpiRmaWorld>(comm);
}

}  // namespace moonep
