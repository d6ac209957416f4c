// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Several outputs written as one (output_set.hpp): checked first, staged in
// temporary files, put in place together.
#include "output_set.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "moonep/error.hpp"
#include "output_file.hpp"
#include "signal_cleanup.hpp"

namespace moonep::io {
namespace {

std::string reason(int err) { return std::strerror(err); }

struct Where {
  std::string text;  // "plan file 'p.json'", "plan file to standard output"
  [[noreturn]] void fail(const std::string& why) const { throw RuntimeError("cannot write " + text + ": " + why); }
};

Where where_of(const std::string& path, const std::string& what) {
  return {path == "-" ? what + " to standard output" : what + " '" + printable(path) + "'"};
}

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// write(2) until done (ENOSPC for /dev/full, EPIPE for a FIFO whose reader
// left when SIGPIPE is ignored).
void write_all(int fd, std::string_view text, const Where& where) {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      where.fail(reason(errno));
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

// A temporary file beside a final file: open, watched for signals, removed
// unless released.
struct TempFile {
  std::string path;
  int fd = -1;
  CleanupOnSignal watch;
  TempFile() = default;
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() { discard(); }
  void discard() {
    if (fd >= 0) ::close(fd);
    fd = -1;
    if (!path.empty()) ::unlink(path.c_str());
    path.clear();
    watch.release();
  }
};

// The hidden name ".<base>.tmp.<pid>.<n>" in `dir`, with <base> cut so that
// the name fits the directory's name limit (a 250-byte final name is legal,
// its temporary name must be too).
std::string temp_name(const std::string& dir, const std::string& base, unsigned n) {
  const std::string tail = ".tmp." + std::to_string(::getpid()) + "." + std::to_string(n);
  long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  if (name_max <= 0) name_max = 255;
  std::string head = "." + base;
  const std::size_t room = static_cast<std::size_t>(name_max) > tail.size() ? name_max - tail.size() : 1;
  if (head.size() > room) head.resize(room);
  return (dir == "/" ? std::string("/") : dir + "/") + head + tail;
}

// Creates a temporary file beside `final_path` (O_EXCL and a per-process
// counter keep concurrent writers apart) and registers it for removal on a
// signal before a byte is written.
void open_temp(const std::string& final_path, const Where& where, TempFile& tmp) {
  static std::atomic<unsigned> counter{0};
  const std::string dir = directory_of(final_path), base = base_of(final_path);
  for (int attempt = 0;; ++attempt) {
    const std::string name = temp_name(dir, base, counter++);
    // Watched from before it exists: a signal between open and the
    // registration would otherwise leave it.
    CleanupOnSignal watch(name);
    const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      tmp.path = name;
      tmp.fd = fd;
      tmp.watch = std::move(watch);
      return;
    }
    const int err = errno;
    if (err == EEXIST && attempt < 100) continue;
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) where.fail("its directory '" + printable(dir) + "' does not exist");
    if (!S_ISDIR(st.st_mode)) where.fail("'" + printable(dir) + "' is not a directory");
    where.fail("cannot create a file in its directory '" + printable(dir) + "': " + reason(err));
  }
}

// An existing file keeps its permissions, and one this user may not write
// to is not replaced behind its owner's back.
void check_replaceable(const std::string& final_path, const Where& where, struct stat* old, bool* exists) {
  *exists = ::stat(final_path.c_str(), old) == 0;
  if (*exists && ::access(final_path.c_str(), W_OK) != 0) where.fail(reason(errno));
}

// A character device or FIFO, written in place. O_NONBLOCK only for the
// open: a FIFO without a reader fails at once (ENXIO) instead of waiting
// for one forever.
void write_through_node(const std::string& path, const Produce& produce, const Where& where) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENXIO) where.fail("it is a FIFO that no process has open for reading");
    where.fail(reason(errno));
  }
  std::unique_ptr<int, void (*)(int*)> closer(new int(fd), [](int* f) {
    if (*f >= 0) ::close(*f);
    delete f;
  });
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)))
    where.fail("it changed while being opened");
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) where.fail(reason(errno));
  produce([&](std::string_view piece) { write_all(fd, piece, where); });
  *closer = -1;
  if (::close(fd) != 0) where.fail(reason(errno));
}

// What a target is, to find two outputs naming one file.
std::string identity(const OutputTarget& t) {
  switch (t.kind) {
    case OutputKind::standard_output:
      return "fd 1";
    case OutputKind::descriptor:
      return "fd " + std::to_string(t.fd);
    case OutputKind::stream_node:
    case OutputKind::regular_file: {
      struct stat st {};
      if (::stat(t.path.c_str(), &st) == 0) {
        if (S_ISCHR(st.st_mode)) return "";  // /dev/null twice harms nobody
        return "inode " + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
      }
      // Not there yet: its directory's real path and its name.
      char* real = ::realpath(directory_of(t.path).c_str(), nullptr);
      const std::string dir = real ? real : directory_of(t.path);
      std::free(real);
      return "new " + dir + "/" + base_of(t.path);
    }
  }
  return "";
}

struct Resolved {
  OutputTarget target;
  Where where;
};

}  // namespace

std::size_t OutputFiles::add(const std::string& path, const std::string& what, const std::string& option) {
  entries_.push_back({path, what, option});
  return entries_.size() - 1;
}

namespace {

std::vector<Resolved> resolve_all(const std::vector<std::string>& paths, const std::vector<std::string>& whats,
                                  const std::vector<std::string>& options, bool probe) {
  std::vector<Resolved> out(paths.size());
  std::vector<std::string> ids(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    if (paths[i].empty()) continue;
    out[i].where = where_of(paths[i], whats[i]);
    out[i].target = resolve_output(paths[i], whats[i].c_str());
    ids[i] = identity(out[i].target);
    for (std::size_t j = 0; j < i; ++j) {
      if (ids[i].empty() || ids[j] != ids[i]) continue;
      if (out[i].target.kind == OutputKind::standard_output)
        throw InputError(options[j] + " and " + options[i] + " both write to standard output; give one of them a file");
      throw InputError(options[j] + " '" + printable(paths[j]) + "' and " + options[i] + " '" + printable(paths[i]) +
                       "' name the same file; give each its own");
    }
  }
  if (!probe) return out;
  for (auto& r : out) {
    if (r.where.text.empty() || r.target.kind != OutputKind::regular_file) continue;
    struct stat old {};
    bool exists = false;
    check_replaceable(r.target.path, r.where, &old, &exists);
    TempFile probe_file;  // created and removed: the directory takes the file
    open_temp(r.target.path, r.where, probe_file);
  }
  return out;
}

}  // namespace

void OutputFiles::check() const {
  std::vector<std::string> paths, whats, options;
  for (const auto& e : entries_) paths.push_back(e.path), whats.push_back(e.what), options.push_back(e.option);
  resolve_all(paths, whats, options, true);
}

void OutputFiles::write(const std::vector<Produce>& texts) const {
  std::vector<std::string> paths, whats, options;
  for (const auto& e : entries_) paths.push_back(e.path), whats.push_back(e.what), options.push_back(e.option);
  const std::vector<Resolved> targets = resolve_all(paths, whats, options, false);
  const std::size_t n = targets.size();

  // 1. Every regular file's text, complete and on disk in its temporary file.
  std::vector<std::unique_ptr<TempFile>> temps(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Resolved& r = targets[i];
    if (paths[i].empty() || r.target.kind != OutputKind::regular_file) continue;
    struct stat old {};
    bool exists = false;
    check_replaceable(r.target.path, r.where, &old, &exists);
    temps[i] = std::make_unique<TempFile>();
    TempFile& tmp = *temps[i];
    open_temp(r.target.path, r.where, tmp);
    if (exists && ::fchmod(tmp.fd, old.st_mode & 07777) != 0) r.where.fail(reason(errno));
    texts.at(i)([&](std::string_view piece) { write_all(tmp.fd, piece, r.where); });
    // Data on disk before the rename makes it visible.
    if (::fsync(tmp.fd) != 0 && errno != EINVAL && errno != EROFS) r.where.fail(reason(errno));
    const int fd = tmp.fd;
    tmp.fd = -1;
    if (::close(fd) != 0) r.where.fail(reason(errno));
  }

  // 2. The outputs written in place, which nothing can take back.
  for (std::size_t i = 0; i < n; ++i) {
    const Resolved& r = targets[i];
    if (paths[i].empty()) continue;
    switch (r.target.kind) {
      case OutputKind::standard_output:
        std::fflush(stdout);
        texts.at(i)([&](std::string_view piece) { write_all(1, piece, r.where); });
        break;
      case OutputKind::descriptor:
        if (::fcntl(r.target.fd, F_GETFD) < 0) r.where.fail(reason(errno));
        texts.at(i)([&](std::string_view piece) { write_all(r.target.fd, piece, r.where); });
        break;
      case OutputKind::stream_node:
        write_through_node(r.target.path, texts.at(i), r.where);
        break;
      case OutputKind::regular_file:
        break;
    }
  }

  // 3. The renames, together: signals wait until they are done, and a
  // failed rename puts back what the ones before it replaced.
  DeferSignals hold;
  struct Done {
    std::string target, backup;  // backup: a hard link to the old file, "" if none
    bool existed = false;
  };
  std::vector<Done> done;
  const std::size_t renames =
      static_cast<std::size_t>(std::count_if(temps.begin(), temps.end(), [](const auto& t) { return bool(t); }));
  auto undo = [&] {
    for (auto it = done.rbegin(); it != done.rend(); ++it) {
      if (!it->backup.empty()) ::rename(it->backup.c_str(), it->target.c_str());
      else if (!it->existed) ::unlink(it->target.c_str());
    }
  };
  for (std::size_t i = 0; i < n; ++i) {
    if (!temps[i]) continue;
    const std::string& target = targets[i].target.path;
    Done d;
    d.target = target;
    struct stat st {};
    d.existed = ::lstat(target.c_str(), &st) == 0;
    if (d.existed && done.size() + 1 < renames) {
      // Not the last rename: keep the old file until the last one worked.
      const std::string backup = temps[i]->path + ".old";
      if (::link(target.c_str(), backup.c_str()) == 0) d.backup = backup;
    }
    if (std::rename(temps[i]->path.c_str(), target.c_str()) != 0) {
      const int err = errno;
      if (!d.backup.empty()) ::unlink(d.backup.c_str());
      undo();
      for (auto& b : done)
        if (!b.backup.empty()) ::unlink(b.backup.c_str());
      targets[i].where.fail(reason(err));
    }
    temps[i]->path.clear();  // renamed: nothing to remove
    temps[i]->watch.release();
    done.push_back(d);
  }
  for (auto& d : done)
    if (!d.backup.empty()) ::unlink(d.backup.c_str());
}

}  // namespace moonep::io
