// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Issue 39, items 1-3 and the small ones: moonep-plan's outputs as a user
// meets them. A signal while a file is written leaves no temporary file
// (the child is signalled the moment its temporary file is first written
// to, seen through inotify); --output and --save-problem are committed
// together or not at all, checked before any planning, and may not name
// one file; a legal 250-byte name works; Kokkos' own options and numbers
// past their range are one line, exit 2.
#include "catch2_compat.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "reliability/error_line_check.hpp"

namespace fs = std::filesystem;
using namespace moonep::test;

namespace {

// A synthetic step whose plan file is some 10 MB (about a second to write
// and sync), so that a signal at its first write lands mid-file.
std::vector<std::string> big_plan(const std::vector<std::string>& more) {
  std::vector<std::string> a{MOONEP_PLAN_EXE, "--ranks", "16", "--experts", "256", "--tokens", "4096", "--steps", "1"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// Watches `dir`; wait() returns once a file whose name starts with
// `prefix` is written to (IN_MODIFY: creating and removing the probe of
// the early check writes nothing), false after `seconds`.
class WriteWatch {
 public:
  explicit WriteWatch(const std::string& dir) {
    fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    REQUIRE(fd_ >= 0);
    REQUIRE(::inotify_add_watch(fd_, dir.c_str(), IN_MODIFY) >= 0);
  }
  ~WriteWatch() { ::close(fd_); }
  bool wait(const std::string& prefix, double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    alignas(struct inotify_event) char buf[8192];
    while (std::chrono::steady_clock::now() < end) {
      struct pollfd p {fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      for (ssize_t at = 0; at < n;) {
        const auto* e = reinterpret_cast<const struct inotify_event*>(buf + at);
        if (e->len > 0 && std::string(e->name).rfind(prefix, 0) == 0) return true;
        at += static_cast<ssize_t>(sizeof(struct inotify_event) + e->len);
      }
    }
    return false;
  }

 private:
  int fd_ = -1;
};

// Runs `args`, sending `sig` the moment a file named `prefix`* in `dir`
// is first written to.
RunResult signal_at_write(const std::vector<std::string>& args, const std::string& dir, const std::string& prefix,
                          int sig, bool* seen) {
  WriteWatch watch(dir);
  RunOptions o;
  o.timeout_s = 120;
  o.while_running = [&](pid_t pid) {
    *seen = watch.wait(prefix, 90);
    ::kill(pid, sig);
  };
  return run_process(args, o);
}

}  // namespace

TEST_CASE("a signal while the plan file is written leaves no temporary file and the old file whole") {
  for (const int sig : {SIGTERM, SIGINT}) {
    INFO("signal " << sig);
    ScratchDir dir("signal");
    const std::string plan = dir.file("plan.json");
    write_file(plan, "the old plan\n");
    bool seen = false;
    const auto r = signal_at_write(big_plan({"--output", plan}), dir.path(), ".plan.json.tmp.", sig, &seen);
    REQUIRE(seen);
    INFO(r.describe());
    CHECK(r.signal == sig);  // it ended by the signal, as a shell expects
    CHECK(names_in(dir.path()) == std::vector<std::string>{"plan.json"});
    CHECK(read_file(plan) == "the old plan\n");
  }
}

TEST_CASE("a signal while the second file is written leaves neither file nor temporary") {
  ScratchDir dir("signal");
  bool seen = false;
  const auto r = signal_at_write(big_plan({"--output", dir.file("plan.json"), "--save-problem", dir.file("p.json")}),
                                 dir.path(), ".p.json.tmp.", SIGTERM, &seen);
  REQUIRE(seen);
  INFO(r.describe());
  CHECK(r.signal == SIGTERM);
  CHECK(names_in(dir.path()).empty());
}

TEST_CASE("a failed second output leaves the first untouched") {
  ScratchDir dir("pair");
  const std::string plan = dir.file("plan.json");
  write_file(plan, "the old plan\n");
  // The second output fails as it is written (a full device)...
  REQUIRE(path_exists("/dev/full"));
  const auto full = run_process({MOONEP_PLAN_EXE, "--steps", "1", "--output", plan, "--save-problem", "/dev/full"});
  CHECK(full.exit_code == 1);
  CHECK(only_error_line(full).find("cannot write problem file '/dev/full': ") != std::string::npos);
  CHECK(read_file(plan) == "the old plan\n");
  CHECK(names_in(dir.path()) == std::vector<std::string>{"plan.json"});

  // ...or its directory is missing: found before planning (100000 steps
  // would take minutes; the run ends at once).
  const auto nodir = run_process({MOONEP_PLAN_EXE, "--steps", "100000", "--output", plan, "--save-problem",
                                  dir.file("nodir/p.json")},
                                 RunOptions{"/dev/null", 30});
  CHECK(!nodir.timed_out);
  CHECK(nodir.exit_code == 1);
  CHECK(only_error_line(nodir).find("cannot write problem file '" + dir.file("nodir/p.json") +
                                    "': its directory '" + dir.file("nodir") + "' does not exist") !=
        std::string::npos);
  CHECK(read_file(plan) == "the old plan\n");
  CHECK(names_in(dir.path()) == std::vector<std::string>{"plan.json"});
}

TEST_CASE("two outputs naming one file are bad usage, before anything is written") {
  ScratchDir dir("pair");
  const std::string x = dir.file("x.json");
  const auto same = run_process({MOONEP_PLAN_EXE, "--steps", "1", "--output", x, "--save-problem", x});
  CHECK(same.exit_code == 2);
  CHECK(only_error_line(same).find("--output '" + x + "' and --save-problem '" + x + "' name the same file") !=
        std::string::npos);
  CHECK(names_in(dir.path()).empty());

  // The same file by another name: a symlink, a hard link, "./".
  write_file(x, "old\n");
  fs::create_symlink(x, dir.file("link.json"));
  fs::create_hard_link(x, dir.file("hard.json"));
  for (const std::string& other : {dir.file("link.json"), dir.file("hard.json"), dir.path() + "/./x.json"}) {
    INFO(other);
    const auto r = run_process({MOONEP_PLAN_EXE, "--steps", "1", "--output", x, "--save-problem", other});
    CHECK(r.exit_code == 2);
    CHECK(only_error_line(r).find("name the same file") != std::string::npos);
    CHECK(read_file(x) == "old\n");
  }

  const auto out = run_process({MOONEP_PLAN_EXE, "--steps", "1", "--output", "-", "--save-problem", "/dev/stdout"});
  CHECK(out.exit_code == 2);
  CHECK(only_error_line(out).find("--output and --save-problem both write to standard output") != std::string::npos);
  CHECK(out.out.empty());
}

TEST_CASE("a legal 250-byte output name works; a directory that takes no file says so") {
  ScratchDir dir("names");
  const std::string name(250, 'p');
  const auto r = run_process({MOONEP_PLAN_EXE, "--steps", "1", "--output", dir.file(name)});
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  CHECK(names_in(dir.path()) == std::vector<std::string>{name});

  // /proc takes no new file: named as such, not a bare "No such file".
  const auto proc = run_process({MOONEP_PLAN_EXE, "--steps", "1", "--output", "/proc/version"});
  CHECK(proc.exit_code == 1);
  const std::string line = only_error_line(proc);
  CHECK(line.find("cannot write plan file '/proc/version': ") != std::string::npos);
  CHECK((line.find("cannot create a file in its directory '/proc'") != std::string::npos ||
         line.find(std::strerror(EACCES)) != std::string::npos));
}

TEST_CASE("Kokkos' own options and numbers past their range: one line naming the option, exit 2") {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"--kokkos-threads=abc", "--kokkos-threads: expected an integer"},
      {"--kokkos-device-id=abc", "--kokkos-device-id: expected an integer"},
      {"--kokkos-numa=x", "--kokkos-numa: expected an integer"},
      {"--kokkos-ndevices=abc", "--kokkos-ndevices: expected a device count"},
      {"--kokkos-threads=99999999999", "--kokkos-threads: 99999999999 is outside the 32-bit integers"},
      {"--steps=99999999999999999999", "--steps: 99999999999999999999 is outside 1..1000000"},
      {"--memory-limit=1e30", "--memory-limit: 1e30 is more memory than any machine has"},
  };
  for (const auto& [arg, says] : cases) {
    INFO(arg);
    const auto r = run_process({MOONEP_PLAN_EXE, arg, "--steps", "1"});
    CHECK(r.exit_code == 2);
    CHECK(only_error_line(r).find(says) != std::string::npos);
  }
  // What Kokkos reads well still reaches it.
  CHECK(run_process({MOONEP_PLAN_EXE, "--kokkos-threads=1", "--steps", "1"}).exit_code == 0);
}
