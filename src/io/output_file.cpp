// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Output paths (output_file.hpp): what a path leads to, decided before
// anything is written.
#include "output_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

#include "moonep/error.hpp"

namespace moonep::io {
namespace {

[[noreturn]] void refuse(const std::string& path, const char* what, const std::string& why) {
  throw RuntimeError(std::string("cannot write ") + what + " '" + printable(path) + "': " + why);
}

// N for "/dev/fd/N", "/proc/self/fd/N" (and /dev/stdout, /dev/stderr), else -1.
int named_descriptor(const std::string& path) {
  if (path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  for (const char* prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    const std::size_t n = std::strlen(prefix);
    if (path.compare(0, n, prefix) != 0 || path.size() == n || path.size() > n + 6) continue;
    int fd = 0;
    for (std::size_t i = n; i < path.size(); ++i) {
      if (path[i] < '0' || path[i] > '9') return -1;
      fd = fd * 10 + (path[i] - '0');
    }
    return fd;
  }
  return -1;
}

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Follows a dangling symlink chain to the name the file will be created
// under (what open(O_CREAT) does); `path` does not exist.
std::string final_name_of_missing(const std::string& path, const char* what) {
  std::string at = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0) {
      if (errno == ENOENT) return at;  // nothing there: create it
      refuse(path, what, std::strerror(errno));
    }
    if (!S_ISLNK(st.st_mode)) return at;
    char target[PATH_MAX];
    const ssize_t n = ::readlink(at.c_str(), target, sizeof target - 1);
    if (n < 0) refuse(path, what, std::strerror(errno));
    const std::string link(target, static_cast<std::size_t>(n));
    at = link[0] == '/' ? link : directory_of(at) + "/" + link;
  }
  refuse(path, what, std::strerror(ELOOP));
}

}  // namespace

bool names_standard_output(const std::string& path) { return path == "-" || named_descriptor(path) == 1; }

OutputTarget resolve_output(const std::string& path, const char* what) {
  OutputTarget t;
  if (path.empty()) refuse(path, what, "empty path");
  if (names_standard_output(path)) {
    t.kind = OutputKind::standard_output;
    return t;
  }
  if (const int fd = named_descriptor(path); fd >= 0) {
    t.kind = OutputKind::descriptor;
    t.fd = fd;
    return t;
  }
  if (path.back() == '/') refuse(path, what, "it names a directory");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) refuse(path, what, std::strerror(errno));
    t.path = final_name_of_missing(path, what);
    return t;
  }
  if (S_ISDIR(st.st_mode)) refuse(path, what, "it is a directory");
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
    t.kind = OutputKind::stream_node;
    t.path = path;
    return t;
  }
  if (!S_ISREG(st.st_mode)) {
    refuse(path, what, std::string("it is a ") + (S_ISBLK(st.st_mode) ? "block device" : "socket") +
                           "; plans go to regular files, character devices, FIFOs or standard output");
  }
  // An existing regular file, maybe behind symlinks: replace the file the
  // links lead to, in its own directory, and leave the links alone.
  char* real = ::realpath(path.c_str(), nullptr);
  if (!real) refuse(path, what, std::strerror(errno));
  t.path = real;
  std::free(real);
  return t;
}

}  // namespace moonep::io
