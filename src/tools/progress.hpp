// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private to moonep-plan: progress on standard error for long runs. Only
// when standard error is a terminal (a script or a log gets none) and only
// once the run has taken longer than a second, a background thread keeps
// one line up to date, "moonep-plan: planning: step 7/20, 3.1 s", and
// erases it when the run ends, so the summary and any error line come out
// as without it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace moonep::tools {

// Whether standard error is a terminal.
bool stderr_is_terminal();

class Progress {
 public:
  // Reports to `out` when `enabled`, from `after_s` seconds on, every
  // `every_s` seconds.
  explicit Progress(bool enabled, std::FILE* out = stderr, double after_s = 1.0, double every_s = 0.2);
  ~Progress();  // stops reporting and erases the line
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // A new phase ("generating the routing", "planning", "writing the plan
  // file"); with `total` > 0 it counts its items ("step 3/20").
  void phase(const std::string& name, int total = 0);
  void advance() { done_.fetch_add(1, std::memory_order_relaxed); }
  // Erases the line now (before an error line or the summary is printed).
  void stop();

 private:
  void run();

  std::FILE* out_;
  double after_s_, every_s_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string phase_;
  int total_ = 0;
  std::atomic<int> done_{0};
  bool stopping_ = false, shown_ = false;
  std::thread thread_;
};

}  // namespace moonep::tools
