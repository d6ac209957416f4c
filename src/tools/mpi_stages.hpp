// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private to moonep-plan --world mpi: the stages every process runs (read,
// plan, write) and agrees on, with no wait unbounded.
//
// After each stage every process reports to rank 0 (point to point, on a
// communicator of its own): its status, its error message, and after the
// first stage what it is about to plan (RunFingerprint). Rank 0 waits at
// most the timeout for the reports, decides, prints the one error line, and
// sends every process the verdict, which they wait for at most the timeout
// too. So one process's bad input stops all of them with the same status;
// ranks that disagree on options or input stop before the first step; and
// a process that never reports (it stopped, hangs, or is far slower) is
// named by rank 0 after the timeout, and the others leave without
// MPI_Finalize (which would wait for it) so that mpirun ends the job.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "run_fingerprint.hpp"

namespace moonep::tools {

class MpiStages {
 public:
  // Duplicates MPI_COMM_WORLD (within the timeout) and counts the processes
  // on this node. MPI must be initialised. `words` says in messages how the
  // user set the timeout ("--mpi-timeout", "$MOONEP_MPI_TIMEOUT").
  explicit MpiStages(double timeout_s, std::string words = "--mpi-timeout");
  MpiStages(const MpiStages&) = delete;
  MpiStages& operator=(const MpiStages&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int processes_on_node() const { return node_size_; }
  double timeout() const { return timeout_s_; }

  // Runs `stage` (named for messages: "reading the problem") and agrees on
  // its outcome: 0 when every process succeeded and, with `fingerprint`
  // (filled in by the stage), every one matches rank 0's; else the status
  // every process exits with (2 bad usage or input, 1 other failures),
  // the error line printed once for the whole job: by rank 0, or, when the
  // stage ends in a timeout, by rank 1 (which prints its own line instead
  // if rank 0 does not answer in time: rank 0 may be the process that
  // stopped, and then must not add a second line when it resumes). Does not return when a process failed to
  // report in time: this process then exits with std::_Exit.
  int run(const char* name, const std::function<void()>& stage, const RunFingerprint* fingerprint = nullptr);

  // Collectives of the stages, each bounded by the timeout
  // (moonep::MpiTimeoutError naming `step` after it).
  void barrier(const char* step);
  double max(double value, const char* step);
  long long sum(long long value, const char* step);
  // MPI_Gather of `mine` (the same count on every process) to rank 0.
  std::vector<int> gather(const std::vector<int>& mine, const char* step);
  // MPI_Gatherv of `mine` to rank 0, into `all` sized there with
  // `counts`/`displs`; returns `all`. The buffers are taken so that a
  // timeout can leave them to MPI (see wait()).
  std::vector<std::int32_t> gatherv(std::vector<std::int32_t> mine, std::vector<std::int32_t> all,
                                    std::vector<int> counts, std::vector<int> displs, const char* step);

 private:
  // Waits for `request` within the timeout; MpiTimeoutError naming `step`
  // after it. A collective given up on is still completed by MPI if a late
  // process comes, writing into its buffers: on a timeout `keep` (the
  // buffers, moved onto the heap) is therefore leaked, never freed.
  template <class Keep>
  void wait(MPI_Request& request, const char* step, Keep&& keep);

  double timeout_s_;
  std::string words_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, node_size_ = 1;
  int stage_ = 0;
};

}  // namespace moonep::tools
