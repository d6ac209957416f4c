// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Watchdog (watchdog.hpp).
#include "watchdog.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "error_line.hpp"

namespace moonep::tools {

Watchdog::Watchdog(double seconds, std::function<void()> expire) {
  thread_ = std::thread([this, seconds, expire = std::move(expire)] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (done_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return finished_; })) return;
    lock.unlock();
    expire();
  });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
  }
  done_.notify_all();
  thread_.join();
}

int launch_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK"}) {
    const char* value = std::getenv(name);
    if (!value || !*value) continue;
    char* end = nullptr;
    const long r = std::strtol(value, &end, 10);
    if (*end == '\0' && r >= 0) return static_cast<int>(r);
  }
  return -1;
}

Watchdog bound_mpi_call(double seconds, const char* step, const std::string& words) {
  seconds = std::max(seconds, kMinMpiCallBound);
  char when[32];
  std::snprintf(when, sizeof when, "%g s", seconds);
  std::string message = std::string("MPI ") + step + " did not finish within " + when + " (" + words +
                        ", at least " + std::to_string(static_cast<int>(kMinMpiCallBound)) +
                        " s): a process of the job did not start, stopped, or cannot reach the others";
  return Watchdog(seconds, [message] {
    const int rank = launch_rank();
    const double grace = kMpiGrace;
    if (rank >= 2) std::this_thread::sleep_for(std::chrono::duration<double>(2 * grace));
    if (rank == 1) std::this_thread::sleep_for(std::chrono::duration<double>(grace));
    if (rank <= 1) print_error_line(message);
    std::fflush(stdout);
    std::_Exit(1);
  });
}

}  // namespace moonep::tools
