// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/error.hpp — the exceptions MoonEP throws, and how text from outside
// (input bytes, file names) is made safe to put into their messages.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace moonep {

// Bad input from the caller: a configuration, routing or tokens-per-expert
// that violates docs/spec/planning.md "Bad input". The message is one line
// naming the field, rank and index. Thrown before any shared state is touched,
// so the object that threw stays usable.
class InputError : public std::invalid_argument {
 public:
  explicit InputError(const std::string& what) : std::invalid_argument(what) {}
};

// A failure of the machinery (device, MPI, a peer rank) rather than of input.
class RuntimeError : public std::runtime_error {
 public:
  explicit RuntimeError(const std::string& what) : std::runtime_error(what) {}
};

// `text` (bytes from a file or the command line) fit for a one-line message
// on a terminal: every byte that is not printable ASCII, and every byte of a
// UTF-8 sequence that is invalid or a control (C1, line separators, bidi
// overrides), is written as \xHH (so ESC is \x1b and NUL \x00, which would
// otherwise cut what() short); a run of more than `max_token` non-blank
// characters keeps its first and last characters around
// "...(N bytes)...", so a 1 MB key or number stays readable.
std::string printable(std::string_view text, std::size_t max_token = 120);

// A whole error message made one printable line of at most `max_chars`
// characters: newlines, tabs and carriage returns become spaces, then
// printable(), then an over-long middle is cut ("... "), keeping the start
// (file and field path) and the end.
std::string one_line_message(std::string_view text, std::size_t max_chars = 280);

// Ranks named in a message: "rank 3", "ranks 1, 2 and 5".
std::string ranks_text(const std::vector<int>& ranks);

}  // namespace moonep
