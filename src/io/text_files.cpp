// Whole-file reads and all-or-nothing writes (POSIX). Where an output path
// leads is output_file.cpp's to decide; this file reads and writes bytes.
#include "text_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "moonep/error.hpp"
#include "output_file.hpp"

namespace moonep::io {
namespace {

std::string reason(int err) { return std::strerror(err); }

std::string named(const char* what, const std::string& path) {
  return std::string(what) + " '" + (path == "-" ? std::string("<stdin>") : printable(path)) + "'";
}

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

// Closes a descriptor this file opened.
struct Descriptor {
  int fd = -1;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

using Produce = std::function<void(const TextOut::Sink&)>;

void write_all(std::FILE* f, std::string_view text, const std::string& where) {
  if (std::fwrite(text.data(), 1, text.size(), f) != text.size())
    throw RuntimeError("cannot write " + where + ": " + reason(errno));
}

// write(2) until done; RuntimeError naming `where` on failure (ENOSPC for
// /dev/full, EPIPE for a FIFO whose reader left when SIGPIPE is ignored).
void write_all(int fd, std::string_view text, const std::string& where) {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw RuntimeError("cannot write " + where + ": " + reason(errno));
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

void write_to_descriptor(int fd, const Produce& produce, const std::string& where) {
  produce([&](std::string_view piece) { write_all(fd, piece, where); });
}

// A character device or FIFO, written in place. O_NONBLOCK only for the
// open: a FIFO without a reader fails at once (ENXIO) instead of waiting
// for one forever.
void write_through_node(const std::string& path, const Produce& produce, const std::string& where) {
  Descriptor d;
  d.fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (d.fd < 0) {
    if (errno == ENXIO)
      throw RuntimeError("cannot write " + where + ": it is a FIFO that no process has open for reading");
    throw RuntimeError("cannot write " + where + ": " + reason(errno));
  }
  struct stat st {};
  if (::fstat(d.fd, &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)))
    throw RuntimeError("cannot write " + where + ": it changed while being opened");
  const int flags = ::fcntl(d.fd, F_GETFL);
  if (flags < 0 || ::fcntl(d.fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
    throw RuntimeError("cannot write " + where + ": " + reason(errno));
  write_to_descriptor(d.fd, produce, where);
  const int fd = d.fd;
  d.fd = -1;
  if (::close(fd) != 0) throw RuntimeError("cannot write " + where + ": " + reason(errno));
}

// A regular file: a temporary file next to `final_path` (same file system,
// so the rename is atomic), renamed over it once complete and on disk.
void write_atomically(const std::string& final_path, const Produce& produce, const std::string& where) {
  const auto slash = final_path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : final_path.substr(0, slash));
  const std::string base = slash == std::string::npos ? final_path : final_path.substr(slash + 1);
  // An existing file keeps its permissions, and one we may not write to is
  // not replaced behind its owner's back.
  struct stat old {};
  const bool exists = ::stat(final_path.c_str(), &old) == 0;
  if (exists && ::access(final_path.c_str(), W_OK) != 0)
    throw RuntimeError("cannot write " + where + ": " + reason(errno));

  // A hidden name next to the target; O_EXCL and a per-process counter keep
  // concurrent writers apart.
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
  if (exists && ::fchmod(tmp.fd, old.st_mode & 07777) != 0)
    throw RuntimeError("cannot write " + where + ": " + reason(errno));
  write_to_descriptor(tmp.fd, produce, where);
  // Data on disk before the rename makes it visible.
  if (::fsync(tmp.fd) != 0 && errno != EINVAL && errno != EROFS)
    throw RuntimeError("cannot write " + where + ": " + reason(errno));
  const int fd = tmp.fd;
  tmp.fd = -1;
  if (::close(fd) != 0) throw RuntimeError("cannot write " + where + ": " + reason(errno));
  if (std::rename(tmp.path.c_str(), final_path.c_str()) != 0)
    throw RuntimeError("cannot write " + where + ": " + reason(errno));
  tmp.keep = true;
}

}  // namespace

std::string read_text_file(const std::string& path, const char* what, std::int64_t max_bytes) {
  const std::string where = named(what, path);
  const bool from_stdin = path == "-";
  std::FILE* f = from_stdin ? stdin : std::fopen(path.c_str(), "rb");
  if (!f) throw InputError("cannot read " + where + ": " + reason(errno));
  // A regular file announces its size: refuse it before reading a byte.
  struct stat st {};
  if (max_bytes >= 0 && ::fstat(::fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > max_bytes) {
    if (!from_stdin) std::fclose(f);
    throw InputError(where + " has " + std::to_string(st.st_size) + " bytes, more than the " +
                     std::to_string(max_bytes) + " that fit in the memory limit");
  }
  std::string text;
  char buf[1 << 16];
  std::size_t n = 0;
  bool too_long = false;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    text.append(buf, n);
    // A pipe or device (/dev/zero) may never end: stop past the limit.
    if (max_bytes >= 0 && static_cast<std::int64_t>(text.size()) > max_bytes) {
      too_long = true;
      break;
    }
  }
  const bool failed = !too_long && std::ferror(f);
  const int err = errno;
  if (!from_stdin) std::fclose(f);
  if (failed) throw InputError("cannot read " + where + ": " + reason(err));
  if (too_long) {
    throw InputError(where + " has more than " + std::to_string(max_bytes) +
                     " bytes, more than fit in the memory limit");
  }
  return text;
}

void write_output(const std::string& path, const char* what, const Produce& produce) {
  const OutputTarget target = resolve_output(path, what);
  const std::string where =
      path == "-" ? std::string(what) + " to standard output" : std::string(what) + " '" + printable(path) + "'";
  switch (target.kind) {
    case OutputKind::standard_output:
      produce([&](std::string_view piece) { write_all(stdout, piece, where); });
      if (std::fflush(stdout) != 0) throw RuntimeError("cannot write " + where + ": " + reason(errno));
      return;
    case OutputKind::descriptor:
      if (::fcntl(target.fd, F_GETFD) < 0) throw RuntimeError("cannot write " + where + ": " + reason(errno));
      write_to_descriptor(target.fd, produce, where);
      return;
    case OutputKind::stream_node:
      write_through_node(target.path, produce, where);
      return;
    case OutputKind::regular_file:
      write_atomically(target.path, produce, where);
      return;
  }
}

}  // namespace moonep::io
