// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: whole-file reads and all-or-nothing writes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "output_set.hpp"

namespace moonep::io {

// The file's bytes ("-" = standard input). InputError "cannot read <what>
// 'path': <reason>"; with max_bytes >= 0, an InputError naming both sizes
// for anything longer, found before reading a regular file and after at
// most max_bytes + 64 KiB of a pipe or device.
// `watch` sees the reading as it goes: piece(bytes) after each piece read
// (false stops the reading there: the text so far is returned), grow(n)
// before the text's buffer grows to n bytes (it throws to stop: a memory
// budget counted as the file is read).
struct ReadWatch {
  std::function<bool(std::string_view)> piece;
  std::function<void(std::int64_t)> grow;
};
std::string read_text_file(const std::string& path, const char* what, std::int64_t max_bytes = -1,
                           const ReadWatch& watch = {});

// Writes where `path` leads (output_file.hpp) the text `produce` hands to
// the sink it is given, piece by piece: "-" and /dev/stdout to standard
// output, character devices and FIFOs in place, regular files through a
// temporary file renamed over the final file once `produce` returned
// (readers see the old file or the complete new one; if anything throws,
// nothing is left behind). RuntimeError "cannot write <what> 'path':
// <reason>".
// One output of OutputFiles (output_set.hpp), checked and written.
void write_output(const std::string& path, const char* what, const Produce& produce);

}  // namespace moonep::io
