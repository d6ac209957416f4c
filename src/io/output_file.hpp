// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: where an output path really leads, and writing text there.
//
// "-" is standard output. Otherwise the path is followed as open(2) would
// follow it, and what it ends at decides how the text is written:
//  * a regular file, or nothing yet: a temporary file in the directory of
//    the final file (symlinks resolved), renamed over it at the end, so a
//    reader sees the old file or the whole new one, never a partial one,
//    and a symlink stays a symlink (its target is replaced);
//  * a character device or a FIFO (/dev/null, /dev/full, a named pipe):
//    written through in place (the node itself is never replaced);
//    a FIFO must already have a reader;
//  * /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: the process's
//    own descriptor, written through like "-" (their target may be a file
//    the shell opened, which a rename would cut off);
//  * a directory, block device or socket: refused.
#pragma once

#include <string>

namespace moonep::io {

enum class OutputKind {
  standard_output,  // "-", /dev/stdout: through stdio's stdout
  descriptor,       // /dev/stderr, /dev/fd/N: an inherited descriptor
  stream_node,      // a character device or FIFO, opened and written through
  regular_file,     // created or replaced atomically
};

struct OutputTarget {
  OutputKind kind = OutputKind::regular_file;
  int fd = -1;       // descriptor: the number
  std::string path;  // stream_node: the path; regular_file: the final file (symlinks resolved)
};

// Throws RuntimeError "cannot write <what> '<path>': <why>" for a path that
// cannot be written.
OutputTarget resolve_output(const std::string& path, const char* what);

// True when `path` writes to the process's standard output ("-",
// "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1").
bool names_standard_output(const std::string& path);

}  // namespace moonep::io
