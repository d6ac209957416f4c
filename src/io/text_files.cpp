// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Whole-file reads and all-or-nothing writes (POSIX). Where an output path
// leads is output_file.cpp's to decide; this file reads and writes bytes.
#include "text_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "moonep/error.hpp"
#include "output_set.hpp"

namespace moonep::io {
namespace {

std::string reason(int err) { return std::strerror(err); }

std::string named(const char* what, const std::string& path) {
  return std::string(what) + " '" + (path == "-" ? std::string("<stdin>") : printable(path)) + "'";
}

}  // namespace

std::string read_text_file(const std::string& path, const char* what, std::int64_t max_bytes,
                           const ReadWatch& watch) {
  const std::string where = named(what, path);
  const bool from_stdin = path == "-";
  std::FILE* f = from_stdin ? stdin : std::fopen(path.c_str(), "rb");
  if (!f) throw InputError("cannot read " + where + ": " + reason(errno));
  struct Closer {
    std::FILE* f;
    bool owned;
    ~Closer() {
      if (owned) std::fclose(f);
    }
  } closer{f, !from_stdin};
  // A regular file announces its size: refuse it before reading a byte,
  // else hold exactly that much.
  struct stat st {};
  std::string text;
  if (::fstat(::fileno(f), &st) == 0 && S_ISREG(st.st_mode)) {
    if (max_bytes >= 0 && st.st_size > max_bytes) {
      throw InputError(where + " has " + std::to_string(st.st_size) + " bytes, more than the " +
                       std::to_string(max_bytes) + " that fit in the memory limit");
    }
    if (watch.grow) watch.grow(st.st_size + 1);
    text.reserve(static_cast<std::size_t>(st.st_size) + 1);
  }
  char buf[1 << 16];
  std::size_t n = 0;
  bool too_long = false;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    if (text.size() + n > text.capacity()) {
      // Grown by half (a doubling would hold up to twice the text), and
      // only once the watcher agreed to the new size.
      const std::size_t want = std::max({text.size() + n, text.capacity() + text.capacity() / 2, std::size_t{1} << 20});
      if (watch.grow) watch.grow(static_cast<std::int64_t>(want));
      text.reserve(want);
    }
    text.append(buf, n);
    if (watch.piece && !watch.piece(std::string_view(buf, n))) return text;
    // A pipe or device (/dev/zero) may never end: stop past the limit.
    if (max_bytes >= 0 && static_cast<std::int64_t>(text.size()) > max_bytes) {
      too_long = true;
      break;
    }
  }
  if (!too_long && std::ferror(f)) throw InputError("cannot read " + where + ": " + reason(errno));
  if (too_long) {
    throw InputError(where + " has more than " + std::to_string(max_bytes) +
                     " bytes, more than fit in the memory limit");
  }
  return text;
}

void write_output(const std::string& path, const char* what, const Produce& produce) {
  OutputFiles one;
  one.add(path, what, "the output");
  one.write({produce});
}

}  // namespace moonep::io
