// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// printable() and one_line_message() of moonep/error.hpp: text from outside
// made safe and short enough for a one-line error message.
//
// The text is cut into units that are never split: a printable ASCII byte,
// a valid UTF-8 character that is not a control, or one escaped byte
// ("\x1b"). Eliding and cutting then work on whole units, so no escape or
// UTF-8 character is ever broken in two.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "moonep/error.hpp"

namespace moonep {
namespace {

struct Unit {
  std::string text;    // what is printed
  std::size_t raw;     // how many input bytes it stands for
  bool blank = false;  // a space: separates tokens
};

// Code points that move the cursor, change direction or are invisible
// controls: shown escaped even though they are valid UTF-8.
bool is_control(std::uint32_t cp) {
  return cp < 0xA0 || cp == 0x2028 || cp == 0x2029 || cp == 0x200E || cp == 0x200F ||
         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0xFEFF;
}

// Length of the valid UTF-8 sequence at text[i] (2..4) and its code point,
// or 0 when the bytes there are not one.
std::size_t utf8_sequence(std::string_view text, std::size_t i, std::uint32_t* cp) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b = byte(i);
  std::size_t n = 0;
  std::uint32_t v = 0, min = 0;
  if (b >= 0xC2 && b <= 0xDF) n = 2, v = b & 0x1F, min = 0x80;
  else if (b >= 0xE0 && b <= 0xEF) n = 3, v = b & 0x0F, min = 0x800;
  else if (b >= 0xF0 && b <= 0xF4) n = 4, v = b & 0x07, min = 0x10000;
  else return 0;
  if (i + n > text.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (byte(i + k) & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;  // overlong, surrogate
  *cp = v;
  return n;
}

std::vector<Unit> units_of(std::string_view text, bool blank_whitespace) {
  static const char hex[] = "0123456789abcdef";
  std::vector<Unit> out;
  out.reserve(text.size() < 4096 ? text.size() : 4096);
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char b = static_cast<unsigned char>(text[i]);
    if (blank_whitespace && (b == '\n' || b == '\r' || b == '\t')) {
      out.push_back({" ", 1, true});
      ++i;
      continue;
    }
    if (b >= 0x20 && b < 0x7F) {
      out.push_back({std::string(1, static_cast<char>(b)), 1, b == ' '});
      ++i;
      continue;
    }
    std::uint32_t cp = 0;
    const std::size_t n = b >= 0x80 ? utf8_sequence(text, i, &cp) : 0;
    if (n > 0 && !is_control(cp)) {
      out.push_back({std::string(text.substr(i, n)), n, false});
      i += n;
      continue;
    }
    // One byte escaped; a control's later bytes are escaped one by one.
    out.push_back({std::string{'\\', 'x', hex[b >> 4], hex[b & 15]}, 1, false});
    ++i;
  }
  return out;
}

std::size_t printed_size(const std::vector<Unit>& units, std::size_t begin, std::size_t end) {
  std::size_t n = 0;
  for (std::size_t i = begin; i < end; ++i) n += units[i].text.size();
  return n;
}

std::size_t raw_size(const std::vector<Unit>& units, std::size_t begin, std::size_t end) {
  std::size_t n = 0;
  for (std::size_t i = begin; i < end; ++i) n += units[i].raw;
  return n;
}

std::string joined(const std::vector<Unit>& units, std::size_t begin, std::size_t end) {
  std::string out;
  for (std::size_t i = begin; i < end; ++i) out += units[i].text;
  return out;
}

// Tokens (runs of non-blank units) longer than max_token printed bytes keep
// a head and a tail around one "...(N bytes)..." unit.
std::vector<Unit> elide_tokens(const std::vector<Unit>& units, std::size_t max_token) {
  std::vector<Unit> out;
  const std::size_t keep = max_token / 3 > 4 ? max_token / 3 : 4;
  for (std::size_t i = 0; i < units.size();) {
    if (units[i].blank) {
      out.push_back(units[i++]);
      continue;
    }
    std::size_t end = i;
    while (end < units.size() && !units[end].blank) ++end;
    if (printed_size(units, i, end) <= max_token) {
      out.insert(out.end(), units.begin() + i, units.begin() + end);
    } else {
      // Whole units of about `keep` bytes at each end.
      std::size_t head = i, bytes = 0;
      while (head < end && bytes + units[head].text.size() <= keep) bytes += units[head++].text.size();
      std::size_t tail = end;
      bytes = 0;
      while (tail > head && bytes + units[tail - 1].text.size() <= keep) bytes += units[--tail].text.size();
      const std::size_t elided = raw_size(units, head, tail);
      out.insert(out.end(), units.begin() + i, units.begin() + head);
      out.push_back({"...(" + std::to_string(elided) + " bytes)...", elided, false});
      out.insert(out.end(), units.begin() + tail, units.begin() + end);
    }
    i = end;
  }
  return out;
}

}  // namespace

std::string printable(std::string_view text, std::size_t max_token) {
  const std::vector<Unit> units = elide_tokens(units_of(text, false), max_token);
  return joined(units, 0, units.size());
}

std::string one_line_message(std::string_view text, std::size_t max_chars) {
  const std::vector<Unit> units = elide_tokens(units_of(text, true), 120);
  const std::size_t size = printed_size(units, 0, units.size());
  if (size <= max_chars) return joined(units, 0, units.size());
  // Cut between whole units, keeping two thirds of the budget at the start.
  const std::string cut = " ... ";
  const std::size_t budget = max_chars > cut.size() + 8 ? max_chars - cut.size() : 8;
  const std::size_t head_budget = budget * 2 / 3, tail_budget = budget - head_budget;
  std::size_t head = 0, bytes = 0;
  while (head < units.size() && bytes + units[head].text.size() <= head_budget) bytes += units[head++].text.size();
  std::size_t tail = units.size();
  bytes = 0;
  while (tail > head && bytes + units[tail - 1].text.size() <= tail_budget) bytes += units[--tail].text.size();
  return joined(units, 0, head) + cut + joined(units, tail, units.size());
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i) s += i + 1 == ranks.size() ? " and " : ", ";
    s += std::to_string(ranks[i]);
  }
  return s;
}

}  // namespace moonep
