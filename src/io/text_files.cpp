// Whole-file reads and all-or-nothing writes (POSIX).
#include "text_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "moonep/error.hpp"

namespace moonep::io {
namespace {

std::string reason(int err) { return std::strerror(err); }

// Closes the descriptor and removes the temporary file unless released.
struct TempFile {
  std::string path;
  int fd = -1;
  bool keep = false;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!keep && !path.empty()) ::unlink(path.c_str());
  }
};

void write_all(std::FILE* f, const std::string& text) {
  if (std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::fflush(f) != 0)
    throw RuntimeError("cannot write to standard output: " + reason(errno));
}

}  // namespace

std::string read_text_file(const std::string& path, const char* what) {
  const bool from_stdin = path == "-";
  std::FILE* f = from_stdin ? stdin : std::fopen(path.c_str(), "rb");
  if (!f) throw InputError(std::string("cannot read ") + what + " '" + path + "': " + reason(errno));
  std::string text;
  char buf[1 << 16];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  const bool failed = std::ferror(f);
  const int err = errno;
  if (!from_stdin) std::fclose(f);
  if (failed) throw InputError(std::string("cannot read ") + what + " '" + path + "': " + reason(err));
  return text;
}

void write_text_file_atomically(const std::string& path, const std::string& text,
                                const char* what) {
  if (path == "-") {
    write_all(stdout, text);
    return;
  }
  const std::string where = std::string(what) + " '" + path + "'";
  if (path.empty()) throw InputError(std::string("cannot write ") + what + ": empty path");
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty()) throw RuntimeError("cannot write " + where + ": it names a directory");

  // A hidden name next to the target, so the rename stays within one file
  // system; O_EXCL and a per-process counter keep concurrent writers apart.
  static std::atomic<unsigned> counter{0};
  TempFile tmp;
  for (int attempt = 0; tmp.fd < 0; ++attempt) {
    const std::string name = (dir == "/" ? std::string("/") : dir + "/") + "." + base + ".tmp." +
                             std::to_string(::getpid()) + "." + std::to_string(counter++);
    const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      tmp.path = name;
      tmp.fd = fd;
    } else if (errno != EEXIST || attempt >= 100) {
      throw RuntimeError("cannot write " + where + ": " + reason(errno));
    }
  }
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(tmp.fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw RuntimeError("cannot write " + where + ": " + reason(errno));
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  // Data on disk before the rename makes it visible.
  if (::fsync(tmp.fd) != 0 && errno != EINVAL && errno != EROFS)
    throw RuntimeError("cannot write " + where + ": " + reason(errno));
  const int fd = tmp.fd;
  tmp.fd = -1;
  if (::close(fd) != 0) throw RuntimeError("cannot write " + where + ": " + reason(errno));
  if (std::rename(tmp.path.c_str(), path.c_str()) != 0)
    throw RuntimeError("cannot write " + where + ": " + reason(errno));
  tmp.keep = true;
}

}  // namespace moonep::io
