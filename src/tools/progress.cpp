// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-plan's progress line (progress.hpp).
#include "progress.hpp"

#include <unistd.h>

namespace moonep::tools {

bool stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

Progress::Progress(bool enabled, std::FILE* out, double after_s, double every_s)
    : out_(out), after_s_(after_s), every_s_(every_s), start_(std::chrono::steady_clock::now()) {
  if (enabled) thread_ = std::thread([this] { run(); });
}

Progress::~Progress() { stop(); }

void Progress::phase(const std::string& name, int total) {
  std::lock_guard<std::mutex> lock(mutex_);
  phase_ = name;
  total_ = total;
  done_.store(0, std::memory_order_relaxed);
}

void Progress::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Progress::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto every = std::chrono::duration<double>(every_s_);
  while (!wake_.wait_for(lock, every, [this] { return stopping_; })) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (elapsed < after_s_ || phase_.empty()) continue;
    char line[200];
    if (total_ > 0) {
      std::snprintf(line, sizeof line, "moonep-plan: %s: step %d/%d, %.1f s", phase_.c_str(),
                    done_.load(std::memory_order_relaxed), total_, elapsed);
    } else {
      std::snprintf(line, sizeof line, "moonep-plan: %s, %.1f s", phase_.c_str(), elapsed);
    }
    // Carriage return and erase-to-end-of-line: one line, rewritten.
    std::fprintf(out_, "\r%s\033[K", line);
    std::fflush(out_);
    shown_ = true;
  }
  if (shown_) {
    std::fputs("\r\033[K", out_);
    std::fflush(out_);
  }
}

}  // namespace moonep::tools
