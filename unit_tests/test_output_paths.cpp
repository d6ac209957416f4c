// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Issue 19, part 1: --output / write_plan_file on paths that are not plain
// files. A device or FIFO is written through and stays what it was, a
// symlink stays a symlink and its target is replaced atomically, and
// nothing on the system is damaged. Devices tried: /dev/null and /dev/full
// only (both are harmless to write); FIFOs and symlinks live in a scratch
// directory.
#include "catch2_compat.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "moonep/error.hpp"
#include "moonep/io.hpp"
#include "moonep/reference.hpp"
#include "reliability/run_process.hpp"

namespace fs = std::filesystem;
using moonep::test::names_in;
using moonep::test::read_file;
using moonep::test::run_process;
using moonep::test::ScratchDir;
using moonep::test::write_file;

namespace {

const moonep::HostPlan& small_plan() {
  static const moonep::HostPlan plan =
      moonep::plan_reference(moonep::Config{2, 4, 2, 2, 1, 2}, {{0, 1, 2, 3}, {3, 3, 1, 0}});
  return plan;
}

// The RuntimeError message of writing the small plan to `path` ("" if none).
std::string write_error(const std::string& path) {
  try {
    moonep::write_plan_file(small_plan(), path);
  } catch (const moonep::RuntimeError& e) {
    return e.what();
  }
  return "";
}

struct Node {
  bool exists = false;
  mode_t type = 0;
  dev_t rdev = 0;
};

Node lstat_of(const std::string& path) {
  struct stat st {};
  Node n;
  if (::lstat(path.c_str(), &st) == 0) n = {true, static_cast<mode_t>(st.st_mode & S_IFMT), st.st_rdev};
  return n;
}

// What a reader of a FIFO got: the reader opens it before the writer runs.
class FifoReader {
 public:
  explicit FifoReader(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);  // a reader from now on
    REQUIRE(fd_ >= 0);
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
  }
  ~FifoReader() {
    if (fd_ >= 0) ::close(fd_);
  }
  // Everything written until the writer closes (call after it did).
  std::string drain() {
    std::string got;
    char buf[4096];
    ssize_t n = 0;
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
    while ((n = ::read(fd_, buf, sizeof buf)) > 0) got.append(buf, static_cast<std::size_t>(n));
    return got;
  }

 private:
  int fd_ = -1;
};

}  // namespace

TEST_CASE("write_plan_file writes through /dev/null and leaves it a character device") {
  const Node before = lstat_of("/dev/null");
  REQUIRE(before.type == S_IFCHR);
  moonep::write_plan_file(small_plan(), "/dev/null");
  const Node after = lstat_of("/dev/null");
  CHECK(after.type == S_IFCHR);
  CHECK(after.rdev == before.rdev);
}

TEST_CASE("write_plan_file to /dev/full is a RuntimeError naming ENOSPC; /dev/full stays a device") {
  const Node before = lstat_of("/dev/full");
  if (before.type != S_IFCHR) {
    WARN("no /dev/full here");
    return;
  }
  try {
    moonep::write_plan_file(small_plan(), "/dev/full");
    FAIL("writing to /dev/full succeeded");
  } catch (const moonep::RuntimeError& e) {
    const std::string what = e.what();
    CHECK(what.find("cannot write plan file '/dev/full'") != std::string::npos);
    CHECK(what.find(std::strerror(ENOSPC)) != std::string::npos);
  }
  const Node after = lstat_of("/dev/full");
  CHECK(after.type == S_IFCHR);
  CHECK(after.rdev == before.rdev);
  CHECK(!fs::exists("/dev/.full.tmp." + std::to_string(::getpid()) + ".0"));
}

TEST_CASE("a FIFO with a reader gets the whole plan and stays a FIFO") {
  ScratchDir dir("fifo");
  const std::string fifo = dir.file("plan.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  FifoReader reader(fifo);
  moonep::write_plan_file(small_plan(), fifo);
  CHECK(reader.drain() == moonep::plan_to_json(small_plan()));
  CHECK(lstat_of(fifo).type == S_IFIFO);
  CHECK(names_in(dir.path()) == std::vector<std::string>{"plan.fifo"});
}

TEST_CASE("a FIFO without a reader is refused at once, not waited on, and stays a FIFO") {
  ScratchDir dir("fifo");
  const std::string fifo = dir.file("plan.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(write_error(fifo).find("FIFO that no process has open for reading") != std::string::npos);
  CHECK(lstat_of(fifo).type == S_IFIFO);
  CHECK(names_in(dir.path()) == std::vector<std::string>{"plan.fifo"});
}

TEST_CASE("a symlink to a file: the target is replaced atomically, the link stays") {
  ScratchDir dir("link");
  fs::create_directories(dir.file("real"));
  const std::string target = dir.file("real/plan.json"), link = dir.file("plan.json");
  write_file(target, "old plan");
  ::chmod(target.c_str(), 0640);
  fs::create_symlink("real/plan.json", link);  // relative, as ln -s makes them

  moonep::write_plan_file(small_plan(), link);
  CHECK(lstat_of(link).type == S_IFLNK);
  CHECK(fs::read_symlink(link) == "real/plan.json");
  CHECK(read_file(target) == moonep::plan_to_json(small_plan()));
  CHECK((fs::status(target).permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));
  CHECK(names_in(dir.path()) == std::vector<std::string>{"plan.json", "real"});
  CHECK(names_in(dir.file("real")) == std::vector<std::string>{"plan.json"});
}

TEST_CASE("a chain of symlinks ending nowhere creates the file at its end") {
  ScratchDir dir("link");
  fs::create_symlink("second", dir.file("first"));
  fs::create_symlink(dir.file("made.json"), dir.file("second"));  // absolute
  moonep::write_plan_file(small_plan(), dir.file("first"));
  CHECK(lstat_of(dir.file("first")).type == S_IFLNK);
  CHECK(lstat_of(dir.file("second")).type == S_IFLNK);
  CHECK(lstat_of(dir.file("made.json")).type == S_IFREG);
  CHECK(read_file(dir.file("made.json")) == moonep::plan_to_json(small_plan()));
}

TEST_CASE("a symlink loop is refused and left alone") {
  ScratchDir dir("link");
  fs::create_symlink("b", dir.file("a"));
  fs::create_symlink("a", dir.file("b"));
  CHECK_THROWS_AS(moonep::write_plan_file(small_plan(), dir.file("a")), moonep::RuntimeError);
  CHECK(names_in(dir.path()) == std::vector<std::string>{"a", "b"});
  CHECK(lstat_of(dir.file("a")).type == S_IFLNK);
}

TEST_CASE("a symlink to /dev/null writes through to the device") {
  ScratchDir dir("link");
  fs::create_symlink("/dev/null", dir.file("plan.json"));
  moonep::write_plan_file(small_plan(), dir.file("plan.json"));
  CHECK(lstat_of(dir.file("plan.json")).type == S_IFLNK);
  CHECK(lstat_of("/dev/null").type == S_IFCHR);
}

TEST_CASE("a block device is refused without being opened") {
  // Only where we may make one (root, outside a locked-down container); the
  // node lives in the scratch directory and is never opened.
  ScratchDir dir("blk");
  const std::string node = dir.file("disk");
  if (::mknod(node.c_str(), S_IFBLK | 0600, makedev(7, 200)) != 0) {
    WARN("cannot mknod a block device here");
    return;
  }
  CHECK(write_error(node).find("it is a block device") != std::string::npos);
  CHECK(lstat_of(node).type == S_IFBLK);
}

TEST_CASE("writes_to_standard_output knows the names of standard output") {
  for (const char* p : {"-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"})
    CHECK(moonep::writes_to_standard_output(p));
  for (const char* p : {"/dev/stderr", "/dev/fd/2", "plan.json", "/dev/fd/10", "/dev/null"})
    CHECK(!moonep::writes_to_standard_output(p));
}

// ---- the same through moonep-plan, as a user runs it

namespace {

std::vector<std::string> plan_cmd(const std::string& output) {
  return {MOONEP_PLAN_EXE, "--input", std::string(MOONEP_CLI_DIR) + "/problems/good.json", "--output", output};
}

}  // namespace

TEST_CASE("moonep-plan --output /dev/full: exit 1, one line naming ENOSPC, /dev/full still a device") {
  const Node before = lstat_of("/dev/full");
  if (before.type != S_IFCHR) {
    WARN("no /dev/full here");
    return;
  }
  const auto r = run_process(plan_cmd("/dev/full"));
  CHECK(r.exit_code == 1);
  REQUIRE(r.err_lines().size() == 1);
  CHECK(r.err_lines()[0] ==
        std::string("moonep-plan: error: cannot write plan file '/dev/full': ") + std::strerror(ENOSPC));
  CHECK(lstat_of("/dev/full").type == S_IFCHR);
  CHECK(lstat_of("/dev/full").rdev == before.rdev);
}

TEST_CASE("moonep-plan --output /dev/null and /dev/stdout work") {
  const auto null_run = run_process(plan_cmd("/dev/null"));
  CHECK(null_run.exit_code == 0);
  CHECK(null_run.err.empty());
  CHECK(lstat_of("/dev/null").type == S_IFCHR);

  // /dev/stdout is standard output, as "-": the plan there, the summary on
  // stderr; identical to what "-" writes.
  auto cmd = plan_cmd("/dev/stdout");
  cmd.push_back("--summary");
  const auto via_dev = run_process(cmd);
  const auto via_dash = run_process(plan_cmd("-"));
  CHECK(via_dev.exit_code == 0);
  CHECK(via_dev.out == via_dash.out);
  CHECK(via_dev.out.rfind("{\"ranks\":4,", 0) == 0);
  CHECK(via_dev.err.find("max/mean") != std::string::npos);
}

TEST_CASE("moonep-plan --output through a symlink replaces its target; a FIFO gets the plan") {
  ScratchDir dir("cli_paths");
  write_file(dir.file("target.json"), "old");
  fs::create_symlink("target.json", dir.file("link.json"));
  const auto r = run_process(plan_cmd(dir.file("link.json")));
  CHECK(r.exit_code == 0);
  CHECK(lstat_of(dir.file("link.json")).type == S_IFLNK);
  const auto reference = run_process(plan_cmd("-"));
  CHECK(read_file(dir.file("target.json")) == reference.out);

  const std::string fifo = dir.file("plan.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  {
    FifoReader reader(fifo);
    const auto through = run_process(plan_cmd(fifo));
    CHECK(through.exit_code == 0);
    CHECK(reader.drain() == reference.out);
  }
  const auto no_reader = run_process(plan_cmd(fifo));
  CHECK(no_reader.exit_code == 1);
  CHECK(no_reader.err.find("no process has open for reading") != std::string::npos);
  CHECK(lstat_of(fifo).type == S_IFIFO);
}
