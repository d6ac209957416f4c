// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Temporary files removed on a signal (signal_cleanup.hpp). The handler
// only reads fixed arrays and calls unlink, sigaction and raise, all
// async-signal-safe.
#include "signal_cleanup.hpp"

#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace moonep::io {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGXFSZ};
constexpr int kSignalCount = sizeof kSignals / sizeof kSignals[0];

struct Slot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 a file to remove
  char path[PATH_MAX];
};
Slot g_slots[kMaxCleanupFiles];

std::mutex g_mutex;                // registration (never taken in the handler)
int g_registered = 0;              // files registered; handlers installed while > 0
struct sigaction g_saved[kSignalCount];  // the actions before ours
bool g_installed[kSignalCount] = {};

std::atomic<bool> g_deferring{false};
std::atomic<int> g_pending{0};  // a signal that came while deferring

void remove_registered() {
  for (Slot& s : g_slots)
    if (s.state.load() == 2) ::unlink(s.path);
}

// Removes the files, puts the signal's previous action back and raises it
// again: it is delivered (the process usually ends by it) when this handler
// returns.
void end_by(int sig) {
  remove_registered();
  for (int i = 0; i < kSignalCount; ++i) {
    if (kSignals[i] != sig) continue;
    if (g_installed[i]) ::sigaction(sig, &g_saved[i], nullptr);
  }
  ::raise(sig);
}

void on_signal(int sig) {
  const int saved_errno = errno;
  if (g_deferring.load()) {
    int none = 0;
    g_pending.compare_exchange_strong(none, sig);
  } else {
    end_by(sig);
  }
  errno = saved_errno;
}

void install() {
  for (int i = 0; i < kSignalCount; ++i) {
    struct sigaction old {};
    if (::sigaction(kSignals[i], nullptr, &old) != 0) continue;
    if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN) continue;  // stays ignored
    struct sigaction mine {};
    mine.sa_handler = on_signal;
    sigemptyset(&mine.sa_mask);
    mine.sa_flags = 0;
    g_saved[i] = old;
    if (::sigaction(kSignals[i], &mine, nullptr) == 0) g_installed[i] = true;
  }
}

void uninstall() {
  for (int i = 0; i < kSignalCount; ++i) {
    if (!g_installed[i]) continue;
    ::sigaction(kSignals[i], &g_saved[i], nullptr);
    g_installed[i] = false;
  }
}

}  // namespace

CleanupOnSignal::CleanupOnSignal(const std::string& path) {
  if (path.size() >= PATH_MAX) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  for (int i = 0; i < kMaxCleanupFiles; ++i) {
    int free_state = 0;
    if (!g_slots[i].state.compare_exchange_strong(free_state, 1)) continue;
    std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
    g_slots[i].state.store(2);
    slot_ = i;
    if (g_registered++ == 0) install();
    return;
  }
}

CleanupOnSignal::~CleanupOnSignal() { release(); }

CleanupOnSignal::CleanupOnSignal(CleanupOnSignal&& other) noexcept : slot_(other.slot_) { other.slot_ = -1; }

CleanupOnSignal& CleanupOnSignal::operator=(CleanupOnSignal&& other) noexcept {
  if (this != &other) {
    release();
    slot_ = other.slot_;
    other.slot_ = -1;
  }
  return *this;
}

void CleanupOnSignal::release() {
  if (slot_ < 0) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_slots[slot_].state.store(0);
  slot_ = -1;
  if (--g_registered == 0) uninstall();
}

DeferSignals::DeferSignals() { g_deferring.store(true); }

DeferSignals::~DeferSignals() {
  g_deferring.store(false);
  const int sig = g_pending.exchange(0);
  if (sig == 0) return;
  // Taken over from the handler: the same end, now that the renames are
  // done (the files still registered are the ones not renamed).
  std::lock_guard<std::mutex> lock(g_mutex);
  end_by(sig);
}

}  // namespace moonep::io
