// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// JsonScan (json_scan.hpp).
#include "json_scan.hpp"

#include <cstdio>

namespace moonep::io {
namespace {

// Bytes a JSON text may begin with (after white space): a value.
bool begins_a_value(unsigned char c) {
  return c == '{' || c == '[' || c == '"' || c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' ||
         c == 'n';
}

bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

bool JsonScan::stop(std::string why) {
  stopped_ = true;
  if (!why.empty()) error_ = "invalid JSON at byte " + std::to_string(at_) + ": " + why;
  return false;
}

bool JsonScan::feed(std::string_view piece) {
  if (stopped_) return false;
  for (const char ch : piece) {
    const auto c = static_cast<unsigned char>(ch);
    if (at_ < 4) first_[at_] = c;
    ++at_;
    if (at_ == 2 && ((first_[0] == 0xFF && first_[1] == 0xFE) || (first_[0] == 0xFE && first_[1] == 0xFF)))
      return stop("the file starts with a UTF-16 or UTF-32 byte order mark; save it as UTF-8");
    if (c == 0) {
      // UTF-16 or UTF-32 text of ASCII characters has NUL bytes between them.
      if (at_ <= 4 && (at_ == 1 ? false : first_[at_ - 2] != 0))
        return stop("a NUL byte (0x00) after '" + std::string(1, static_cast<char>(first_[at_ - 2])) +
                    "': the file looks like UTF-16 or UTF-32 text; save it as UTF-8");
      return stop("a NUL byte (0x00); JSON text has none (is this a binary file?)");
    }
    if (in_string_) {
      ++string_bytes_;
      if (escaped_) escaped_ = false;
      else if (c == '\\') escaped_ = true;
      else if (c == '"') in_string_ = false;
      continue;
    }
    if (!started_) {
      if (is_space(c)) continue;
      // A UTF-8 byte order mark is the parser's to skip.
      if (c == 0xEF && at_ <= 3) continue;
      if ((c == 0xFF || c == 0xFE) && at_ == 1) continue;  // UTF-16's, refused at the next byte
      if ((c == 0xBB || c == 0xBF) && at_ <= 3 && first_[0] == 0xEF) continue;
      if (!begins_a_value(c)) return stop("");
      started_ = true;
    }
    switch (c) {
      case '"':
        in_string_ = true;
        break;
      case '[':
      case '{':
        ++values_;
        if (++depth_ > max_depth_) {
          return stop("nesting deeper than " + std::to_string(max_depth_) +
                      " arrays and objects (a problem file nests 3 deep, a plan file 5)");
        }
        break;
      case ']':
      case '}':
        --depth_;
        break;
      case ',':
        ++values_;
        break;
      case ':':
        ++members_;
        break;
      default:
        break;
    }
  }
  return true;
}

std::int64_t JsonScan::parse_memory() const {
  // A value is 16 bytes in a std::vector that doubled as it grew (on
  // average 1.5 times the size it needs, twice at worst: 32); an object
  // member is a std::map node with its key (about 96 bytes); a string's
  // characters are copied once. The parsed int32 arrays add 4 bytes a value.
  constexpr std::int64_t kPerValue = 32 + 4, kPerMember = 96;
  return values_ * kPerValue + members_ * kPerMember + string_bytes_;
}

std::string json_text_error(std::string_view text, int max_depth) {
  JsonScan scan(max_depth);
  scan.feed(text);
  return scan.error();
}

}  // namespace moonep::io
