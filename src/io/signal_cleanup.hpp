// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: temporary files that a signal must not leave behind.
//
// A file registered here is removed when the process is ended by SIGINT,
// SIGTERM, SIGHUP, SIGQUIT, SIGPIPE or SIGXFSZ while it is registered; the
// signal then takes its course (the handler that was there before, usually
// the default: the process ends by that signal, as the shell expects).
// Handlers are installed only while at least one file is registered, and a
// signal that was ignored (nohup's SIGHUP) stays ignored. SIGKILL cannot be
// caught: a killed process may still leave its temporary file.
#pragma once

#include <string>

namespace moonep::io {

// Registers `path` (an absolute or relative name as given to open(2)) for
// the lifetime of the object. At most kMaxCleanupFiles at a time; more are
// not registered (and not removed on a signal).
class CleanupOnSignal {
 public:
  CleanupOnSignal() = default;
  explicit CleanupOnSignal(const std::string& path);
  ~CleanupOnSignal();
  CleanupOnSignal(CleanupOnSignal&& other) noexcept;
  CleanupOnSignal& operator=(CleanupOnSignal&& other) noexcept;
  CleanupOnSignal(const CleanupOnSignal&) = delete;
  CleanupOnSignal& operator=(const CleanupOnSignal&) = delete;
  // Stops watching the file (it was renamed or removed).
  void release();

 private:
  int slot_ = -1;
};

inline constexpr int kMaxCleanupFiles = 32;

// Holds back the signals above for the lifetime of the object, in every
// thread: a sequence of renames that must happen whole. A signal that came
// meanwhile takes effect (files still registered removed, then the signal's
// own action) when the object dies. One at a time.
class DeferSignals {
 public:
  DeferSignals();
  ~DeferSignals();
  DeferSignals(const DeferSignals&) = delete;
  DeferSignals& operator=(const DeferSignals&) = delete;
};

}  // namespace moonep::io
