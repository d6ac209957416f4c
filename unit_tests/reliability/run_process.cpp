// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// run_process.hpp: fork + exec with files for the output, wait4 for the
// peak memory, a process-group kill at the time bound.
#include "run_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace moonep::test {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

ScratchDir::ScratchDir(const std::string& tag) {
  static int n = 0;
  path_ = (std::filesystem::temp_directory_path() /
           ("moonep_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(n++)))
              .string();
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

bool terminal_safe(const std::string& s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    if (b < 0x20 || b == 0x7F) return false;
    if (b == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) < 0xA0) return false;  // C1
  }
  return true;
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

double summary_memory_estimate(const std::string& out) {
  const auto at = out.find("memory: about ");
  if (at == std::string::npos) return -1;
  char* end = nullptr;
  const double v = std::strtod(out.c_str() + at + 14, &end);
  const std::string unit(end + 1, 3);
  const double scale = unit == "KiB" ? 1024.0 : unit == "MiB" ? 1048576.0 : unit == "GiB" ? 1073741824.0 : 1.0;
  return v * scale;
}

std::vector<std::string> RunResult::err_lines() const {
  std::vector<std::string> lines;
  std::size_t at = 0;
  while (at < err.size()) {
    const std::size_t nl = err.find('\n', at);
    lines.push_back(err.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  return lines;
}

namespace {

// The words of the indented lines of Kokkos' initialize notices (4.6's
// OpenMP backend: the OMP_PROC_BIND advice, the oversubscription counts).
bool kokkos_notice_words(const std::string& line) {
  for (const char* w : {"OMP_PROC_BIND", "OpenMP", "Detected: ", "Requested: "})
    if (line.find(w) != std::string::npos) return true;
  return false;
}

}  // namespace

void split_notices(const std::string& text, std::string& own, std::string& notices) {
  own.clear();
  notices.clear();
  bool seen = false;       // a notice opened somewhere before this line
  bool in_notice = false;  // the line before this one was a notice's
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t nl = text.find('\n', at);
    const std::size_t end = nl == std::string::npos ? text.size() : nl + 1;
    const std::string line = text.substr(at, end - at);
    const bool opens = line.rfind("Kokkos::", 0) == 0 || line.rfind("MPI detected:", 0) == 0;
    const bool blank = line == "\n";
    const bool indented = line.rfind("  ", 0) == 0 || line.rfind("\t", 0) == 0;
    // Under mpirun several processes' notices arrive line by line, mixed:
    // an indented line in Kokkos' words is a notice's wherever it falls.
    const bool continues = (in_notice && (blank || indented)) || (seen && indented && kokkos_notice_words(line));
    (opens || continues ? notices : own) += line;
    seen = seen || opens;
    in_notice = (opens || continues) && !blank;  // a blank line ends the block
    at = end;
  }
}

std::string RunResult::describe() const {
  std::string s = timed_out ? "timed out" : signal ? "signal " + std::to_string(signal) : "exit " + std::to_string(exit_code);
  s += "; stderr: " + err.substr(0, 2000);
  if (!notices.empty()) s += "\n(and Kokkos' notices: " + notices.substr(0, 500) + ")";
  return s;
}

RunResult run_process(const std::vector<std::string>& argv, const RunOptions& o) {
  ScratchDir dir("run");
  const std::string out_path = dir.file("stdout"), err_path = dir.file("stderr");
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::setpgid(0, 0);
    const int in = ::open(o.stdin_file.c_str(), O_RDONLY);
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0 || err < 0) ::_exit(127);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    for (const auto& name : o.unset_env) ::unsetenv(name.c_str());
    for (const auto& [name, value] : o.env) ::setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  if (o.while_running) o.while_running(pid);
  RunResult r;
  int status = 0;
  struct rusage usage {};
  for (;;) {
    const pid_t done = ::wait4(pid, &status, WNOHANG, &usage);
    if (done == pid) break;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed > o.timeout_s && !r.timed_out) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);  // the child and whatever it started (mpirun's ranks)
      ::kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.max_rss_kb = usage.ru_maxrss;
  r.out = read_file(out_path);
  split_notices(read_file(err_path), r.err, r.notices);
  return r;
}

}  // namespace moonep::test
