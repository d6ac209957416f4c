// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: one pass over JSON text as it is read, before it is parsed:
// what the parsed document will cost (values, object members, string
// bytes), and the first byte that shows the text cannot be the JSON
// document a file format wants, so that a reader stops there instead of
// reading (and a parser building) gigabytes:
//  * a NUL byte (JSON text has none; nlohmann's parser would take it for
//    the end of the text and ignore what follows), or a UTF-16/UTF-32 byte
//    order mark: error() names the byte and its place;
//  * nesting deeper than max_depth (a problem file nests 3 deep, a plan
//    file 5): error();
//  * a first byte that begins no JSON value (/dev/urandom, a binary file):
//    no error() of its own: the parser, given the text read so far,
//    reports it in its usual words.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace moonep::io {

inline constexpr int kMaxJsonDepth = 32;

class JsonScan {
 public:
  explicit JsonScan(int max_depth = kMaxJsonDepth) : max_depth_(max_depth) {}
  // Scans the next piece of the text; false at the first byte that stops
  // it (bytes() then counts up to and including that byte).
  bool feed(std::string_view piece);
  bool stopped() const { return stopped_; }
  // "invalid JSON at byte N: ..." for a NUL, a byte order mark of UTF-16
  // or UTF-32, or nesting too deep; "" otherwise.
  const std::string& error() const { return error_; }
  std::int64_t bytes() const { return at_; }
  // What nlohmann's document and the parsed int32 arrays built from the
  // text scanned so far hold besides the text (moonep::problem_parse_memory).
  std::int64_t parse_memory() const;

 private:
  bool stop(std::string why);
  int max_depth_;
  std::int64_t at_ = 0;  // bytes scanned
  std::int64_t values_ = 1, members_ = 0, string_bytes_ = 0;
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false, started_ = false, stopped_ = false;
  unsigned char first_[4] = {0, 0, 0, 0};  // the first bytes, for the byte order marks
  std::string error_;
};

// The error of JsonScan over all of `text` ("" when it would not stop).
std::string json_text_error(std::string_view text, int max_depth = kMaxJsonDepth);

}  // namespace moonep::io
