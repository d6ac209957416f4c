// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Test support: run a program as a user would, with a time bound, and see
// what it did (exit status, standard output and error, peak memory).
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace moonep::test {

struct RunOptions {
  std::string stdin_file = "/dev/null";  // what the program reads on stdin
  double timeout_s = 60;                 // then it (and its process group) is killed
  std::vector<std::pair<std::string, std::string>> env;  // set in the child
  std::vector<std::string> unset_env;                    // removed in the child
  // Called in this process once the child started, with its pid, before
  // waiting for it: to signal it at a chosen moment. It must return (the
  // time bound counts from the start, so it must return well before it).
  std::function<void(pid_t)> while_running;
};

struct RunResult {
  int exit_code = -1;      // -1 when killed by a signal
  int signal = 0;          // the signal that ended it, 0 if it exited
  bool timed_out = false;  // killed at the time bound
  std::string out;         // all it wrote on stdout
  std::string err;         // what it wrote on stderr, less `notices`
  std::string notices;     // dependencies' notices taken out of stderr
  long max_rss_kb = 0;     // peak resident memory (getrusage of the child)
  double seconds = 0;      // wall time

  // The lines of `err` (without their '\n').
  std::vector<std::string> err_lines() const;
  // "exit 2", "signal 11", "timed out", and stderr: for failure messages.
  std::string describe() const;
};

// Runs argv[0] (a path) with argv in a new process group; stdout and stderr
// go to temporary files, read back afterwards. Stderr is split with
// split_notices: the tests judge what moonep-plan says, and a user's Kokkos
// (4.x with OpenMP warns at initialize when OMP_PROC_BIND is unset) may add
// lines of its own that no test should fail on.
RunResult run_process(const std::vector<std::string>& argv, const RunOptions& options = {});

// Splits stderr text into moonep-plan's own lines and Kokkos' notices: a
// line starting with "Kokkos::" or "MPI detected:" (what Kokkos' backends
// print at initialize), with the indented lines right after it and the
// blank line that may end it. Under mpirun the notices of several processes
// come mixed line by line, so an indented line in the words of Kokkos'
// notices (OMP_PROC_BIND, OpenMP, "Detected: ", "Requested: ") after any
// notice is one too. Anything else moonep-plan writes stays in `own`.
void split_notices(const std::string& text, std::string& own, std::string& notices);

// A fresh directory under the temporary directory, removed with everything
// in it when the object dies.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The bytes of the "memory: about 412.3 MiB at the peak ..." line of
// moonep-plan's summary in `out`; -1 if there is none.
double summary_memory_estimate(const std::string& out);

// True when every byte is printable ASCII or part of a UTF-8 character a
// terminal shows without acting on it (no C0 or C1 control, no DEL).
bool terminal_safe(const std::string& s);

// The names in a directory, sorted (a temporary file left behind shows here).
std::vector<std::string> names_in(const std::string& dir);

// lstat succeeds: something (a file, a link, a FIFO) is there.
bool path_exists(const std::string& path);

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

}  // namespace moonep::test
