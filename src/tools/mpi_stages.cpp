// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// MpiStages (mpi_stages.hpp): reports to rank 0, verdicts back, every wait
// bounded by the timeout.
#include "mpi_stages.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <type_traits>
#include <string>
#include <thread>

#include "error_line.hpp"
#include "moonep/error.hpp"
#include "moonep/mpi_world.hpp"
#include "plan_options.hpp"

namespace moonep::tools {
namespace {

// What a process tells rank 0 after a stage.
struct Report {
  std::int32_t status = 0;     // 0 ok, 1 runtime failure, 2 bad usage or input
  std::int32_t timed_out = 0;  // it gave up waiting for another process
  std::int32_t has_fingerprint = 0;
  RunFingerprint fingerprint;
  std::string message;
};

constexpr std::size_t kHeader = 3 * sizeof(std::int32_t) + sizeof(RunFingerprint);
constexpr std::size_t kMaxMessage = 16384;  // error messages are one line; cut anything longer

std::vector<char> pack(const Report& r) {
  std::vector<char> buf(kHeader + std::min(r.message.size(), kMaxMessage));
  std::memcpy(buf.data(), &r.status, 4);
  std::memcpy(buf.data() + 4, &r.timed_out, 4);
  std::memcpy(buf.data() + 8, &r.has_fingerprint, 4);
  std::memcpy(buf.data() + 12, &r.fingerprint, sizeof(RunFingerprint));
  std::memcpy(buf.data() + kHeader, r.message.data(), buf.size() - kHeader);
  return buf;
}

Report unpack(const std::vector<char>& buf) {
  Report r;
  if (buf.size() < kHeader) {
    r.status = 1;
    r.message = "a malformed report";
    return r;
  }
  std::memcpy(&r.status, buf.data(), 4);
  std::memcpy(&r.timed_out, buf.data() + 4, 4);
  std::memcpy(&r.has_fingerprint, buf.data() + 8, 4);
  std::memcpy(&r.fingerprint, buf.data() + 12, sizeof(RunFingerprint));
  r.message.assign(buf.data() + kHeader, buf.size() - kHeader);
  return r;
}

// Rank 0's answer after a stage.
struct Verdict {
  std::int32_t status = 0;        // what every process exits with (0: go on)
  std::int32_t leave = 0;         // leave without MPI_Finalize (a process is missing)
  std::int32_t rank1_prints = 0;  // rank 1 prints `message`, the job's one line
  char message[512] = {};
};

int status_of(const std::exception& e) {
  if (dynamic_cast<const InputError*>(&e) || dynamic_cast<const UsageError*>(&e)) return 2;
  return 1;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

// Leaves at once with `status`, without MPI_Finalize: a process that never
// came would hold it forever. mpirun sees the exit and ends the job.
[[noreturn]] void leave(int status) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(status);
}

}  // namespace

MpiStages::MpiStages(double timeout_s, std::string words) : timeout_s_(timeout_s), words_(std::move(words)) {
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Comm_idup(MPI_COMM_WORLD, &comm_, &req);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if (rc == MPI_SUCCESS && !mpi_wait_for(req, timeout_s_, &rc)) {
    if (rank_ == 0)
      print_error_line("the other MPI processes did not start within " + seconds(timeout_s_) + " (" + words_ + ")");
    leave(1);
  }
  if (rc != MPI_SUCCESS) throw RuntimeError("moonep-plan: MPI_Comm_idup failed");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  // Every process passed the bounded duplication just now, so this
  // blocking split finds them all.
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_size(node, &node_size_);
    MPI_Comm_free(&node);
  }
}

template <class Keep>
void MpiStages::wait(MPI_Request& request, const char* step, Keep&& keep) {
  int rc = MPI_SUCCESS;
  if (!mpi_wait_for(request, timeout_s_, &rc)) {
    new std::decay_t<Keep>(std::move(keep));  // moved storage stays where MPI writes: leaked on purpose
    throw MpiTimeoutError(std::string(step) + ": the other MPI processes did not arrive within " +
                          seconds(timeout_s_) + " (" + words_ + ")");
  }
  if (rc != MPI_SUCCESS) throw RuntimeError(std::string(step) + ": MPI failed");
}

void MpiStages::barrier(const char* step) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Ibarrier(comm_, &req);
  wait(req, step, 0);
}

double MpiStages::max(double value, const char* step) {
  auto buf = std::make_unique<double[]>(2);
  buf[0] = value;
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Iallreduce(&buf[0], &buf[1], 1, MPI_DOUBLE, MPI_MAX, comm_, &req);
  wait(req, step, buf);
  return buf[1];
}

long long MpiStages::sum(long long value, const char* step) {
  auto buf = std::make_unique<long long[]>(2);
  buf[0] = value;
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Iallreduce(&buf[0], &buf[1], 1, MPI_LONG_LONG, MPI_SUM, comm_, &req);
  wait(req, step, buf);
  return buf[1];
}

std::vector<int> MpiStages::gather(const std::vector<int>& values, const char* step) {
  std::vector<int> mine = values;
  std::vector<int> all(rank_ == 0 ? mine.size() * static_cast<std::size_t>(size_) : 0);
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Igather(mine.data(), static_cast<int>(mine.size()), MPI_INT, all.data(), static_cast<int>(mine.size()),
              MPI_INT, 0, comm_, &req);
  // A moved vector keeps its storage, so the pointers MPI holds stay valid.
  struct Buffers {
    std::vector<int> mine, all;
  } keep{std::move(mine), std::move(all)};
  wait(req, step, keep);
  return std::move(keep.all);
}

std::vector<std::int32_t> MpiStages::gatherv(std::vector<std::int32_t> mine, std::vector<std::int32_t> all,
                                             std::vector<int> counts, std::vector<int> displs, const char* step) {
  struct Buffers {
    std::vector<std::int32_t> mine, all;
    std::vector<int> counts, displs;
  } keep{std::move(mine), std::move(all), std::move(counts), std::move(displs)};
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Igatherv(keep.mine.data(), static_cast<int>(keep.mine.size()), MPI_INT32_T, keep.all.data(),
               keep.counts.data(), keep.displs.data(), MPI_INT32_T, 0, comm_, &req);
  wait(req, step, keep);
  return std::move(keep.all);
}

int MpiStages::run(const char* name, const std::function<void()>& stage, const RunFingerprint* fingerprint) {
  const int tag = 100 + stage_++;
  Report mine;
  try {
    stage();
  } catch (const MpiTimeoutError&) {
    // In the user's words: the world's own message names its internals
    // (MpiSharedWorld: all_ok) and $MOONEP_MPI_TIMEOUT.
    mine.status = 1;
    mine.timed_out = 1;
    mine.message = std::string(name) + ": rank " + std::to_string(rank_) + " waited more than " + seconds(timeout_s_) +
                   " (" + words_ + ") for the other MPI processes (one of them stopped, hangs, or is slower); "
                   "nothing was written";
  } catch (const std::exception& e) {
    mine.status = status_of(e);
    mine.message = e.what();
  } catch (...) {
    mine.status = 1;
    mine.message = "unknown failure";
  }
  if (mine.status == 0 && fingerprint) {
    mine.has_fingerprint = 1;
    mine.fingerprint = *fingerprint;
  }

  Verdict verdict;
  if (rank_ != 0) {
    const std::vector<char> buf = pack(mine);
    MPI_Request sent = MPI_REQUEST_NULL, got = MPI_REQUEST_NULL;
    MPI_Isend(buf.data(), static_cast<int>(buf.size()), MPI_BYTE, 0, tag, comm_, &sent);
    MPI_Irecv(&verdict, sizeof verdict, MPI_BYTE, 0, tag, comm_, &got);
    // Rank 0 may take its own stage's time plus the timeout to answer.
    if (!mpi_wait_for(got, 2 * timeout_s_)) {
      // Rank 0 is the one missing; rank 1 says so, the others stay quiet.
      if (rank_ == 1) {
        print_error_line(std::string("rank 0 did not finish ") + name + " within " + seconds(2 * timeout_s_) +
                         " (it stopped, hangs, or is slower than " + words_ + " " + seconds(timeout_s_) + ")");
      } else {
        // The others time out at about the same moment as rank 1; one of
        // them leaving first lets mpirun end the job, rank 1 included,
        // before its line is out. So they leave a grace period after it
        // (mpirun ends them sooner, once rank 1 has left).
        std::this_thread::sleep_for(std::chrono::duration<double>(std::max(2.0, timeout_s_)));
      }
      leave(1);
    }
    mpi_wait_for(sent, timeout_s_);
    if (verdict.rank1_prints && rank_ == 1) {
      // Rank 0 left the job's line to this process; it waits (bounded) for
      // the word that it is out before leaving itself.
      verdict.message[sizeof verdict.message - 1] = '\0';
      print_error_line(verdict.message);
      std::int32_t printed = 1;
      MPI_Request ack = MPI_REQUEST_NULL;
      MPI_Isend(&printed, 1, MPI_INT32_T, 0, tag, comm_, &ack);
      mpi_wait_for(ack, timeout_s_);
    }
  } else {
    // Collect every report, for at most the timeout.
    std::vector<Report> reports(static_cast<std::size_t>(size_));
    std::vector<bool> arrived(static_cast<std::size_t>(size_), false);
    reports[0] = mine;
    arrived[0] = true;
    int missing = size_ - 1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                                 std::chrono::duration<double>(timeout_s_));
    while (missing > 0 && std::chrono::steady_clock::now() < deadline) {
      bool any = false;
      for (int r = 1; r < size_; ++r) {
        if (arrived[r]) continue;
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(r, tag, comm_, &flag, &st);
        if (!flag) continue;
        int len = 0;
        MPI_Get_count(&st, MPI_BYTE, &len);
        std::vector<char> buf(static_cast<std::size_t>(len));
        MPI_Recv(buf.data(), len, MPI_BYTE, r, tag, comm_, MPI_STATUS_IGNORE);
        reports[r] = unpack(buf);
        arrived[r] = true;
        --missing;
        any = true;
      }
      if (!any) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    // The decision: a real failure first (timeouts are its consequences),
    // then processes that never reported, then timeouts; then, when all
    // went well, whether every process plans what rank 0 plans.
    std::vector<int> absent;
    int worst = 0, first_real = -1, first_timeout = -1;
    bool any_timeout = false;
    for (int r = 0; r < size_; ++r) {
      if (!arrived[r]) {
        absent.push_back(r);
        continue;
      }
      const Report& rep = reports[r];
      worst = std::max(worst, static_cast<int>(rep.status));
      if (rep.status != 0 && !rep.timed_out && first_real < 0) first_real = r;
      if (rep.timed_out) {
        any_timeout = true;
        if (first_timeout < 0) first_timeout = r;
      }
    }
    std::string message;
    if (first_real >= 0) {
      message = reports[first_real].message;
    } else if (!absent.empty()) {
      worst = std::max(worst, 1);
      message = ranks_text(absent) + " did not finish " + name + " within " + seconds(timeout_s_) + " of rank 0 (" +
                (absent.size() == 1 ? "it stopped, hangs, or is" : "they stopped, hang, or are") +
                " slower than " + words_ + "); nothing was written";
    } else if (first_timeout >= 0) {
      // Who waited is known, not who made them wait (it may be one of them,
      // stopped for a while): the waiting ranks, in the user's words.
      std::vector<int> waited;
      for (int r = 0; r < size_; ++r)
        if (reports[r].timed_out) waited.push_back(r);
      message = std::string(name) + ": " + ranks_text(waited) + " waited more than " + seconds(timeout_s_) + " (" +
                words_ + ") for another MPI process (it stopped, hangs, or is slower); nothing was written";
    } else if (fingerprint) {
      for (int r = 1; r < size_ && message.empty(); ++r)
        message = fingerprint_difference(reports[0].fingerprint, reports[r].fingerprint, r);
      if (!message.empty()) worst = 2;
    }
    verdict.status = worst;
    verdict.leave = (any_timeout || !absent.empty()) ? 1 : 0;
    // A stage that timed out may have outlasted rank 1's patience (rank 0
    // itself stopped for a while): rank 1 then already printed the job's
    // line. So rank 1, if it reported, prints this one, or has printed its
    // own: never both, never neither.
    verdict.rank1_prints = worst != 0 && verdict.leave && size_ > 1 && arrived[1] ? 1 : 0;
    if (worst != 0 && !verdict.rank1_prints) print_error_line(message);
    if (verdict.rank1_prints) {
      const std::string line = one_line_message(message, sizeof verdict.message - 1);
      std::memcpy(verdict.message, line.c_str(), line.size() + 1);
    }
    std::vector<MPI_Request> sends;
    for (int r = 1; r < size_; ++r) {
      if (!arrived[r]) continue;
      sends.emplace_back();
      MPI_Isend(&verdict, sizeof verdict, MPI_BYTE, r, tag, comm_, &sends.back());
    }
    for (auto& s : sends) mpi_wait_for(s, timeout_s_);
    if (verdict.rank1_prints) {
      std::int32_t printed = 0;
      MPI_Request ack = MPI_REQUEST_NULL;
      MPI_Irecv(&printed, 1, MPI_INT32_T, 1, tag, comm_, &ack);
      mpi_wait_for(ack, timeout_s_);  // rank 1 gone: mpirun ends the job anyway
    }
  }
  if (verdict.leave) leave(verdict.status ? verdict.status : 1);
  return verdict.status;
}

}  // namespace moonep::tools
