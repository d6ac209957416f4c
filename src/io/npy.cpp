// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// NumPy .npy reading and writing; see npy.hpp. The header is a Python dict
// literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and ending in a newline (numpy's format.py); this file
// parses exactly that grammar and nothing more.
#include "npy.hpp"

#include <cstring>
#include <limits>

#include "moonep/error.hpp"
#include "moonep/io.hpp"
#include "text_files.hpp"

namespace moonep::io {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLength = 6;

// A cursor over the header dict; errors name the file.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : s_(text), name_(name) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(name_ + ": malformed .npy header: " + what);
  }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool take(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c, const char* where) {
    if (!take(c)) fail(std::string("expected '") + c + "' " + where);
  }
  std::string string_literal() {
    skip_space();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) fail("expected a quoted string");
    const char quote = s_[pos_++];
    const std::size_t end = s_.find(quote, pos_);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string out(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair<std::string_view, bool>{"True", true}, {"False", false}})
      if (s_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    fail("fortran_order must be True or False");
  }
  std::vector<std::int64_t> shape() {
    expect('(', "to open the shape tuple");
    std::vector<std::int64_t> dims;
    while (!take(')')) {
      skip_space();
      std::int64_t v = 0;
      const std::size_t start = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        if (v > (std::numeric_limits<std::int64_t>::max() - 9) / 10) fail("a shape dimension is too large");
        v = v * 10 + (s_[pos_++] - '0');
      }
      if (pos_ == start) fail("shape must be a tuple of non-negative integers");
      dims.push_back(v);
      if (!take(',')) {
        expect(')', "to close the shape tuple");
        break;
      }
    }
    return dims;
  }
  bool at_end() {
    skip_space();
    return pos_ == s_.size();
  }

 private:
  std::string_view s_;
  const std::string& name_;
  std::size_t pos_ = 0;
};

struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
};

Header parse_header(std::string_view text, const std::string& name) {
  HeaderParser p(text, name);
  Header h;
  bool seen[3] = {false, false, false};
  p.expect('{', "at the start of the header dict");
  while (!p.take('}')) {
    const std::string key = p.string_literal();
    p.expect(':', "after a key");
    int which = -1;
    if (key == "descr") {
      which = 0;
      h.descr = p.string_literal();
    } else if (key == "fortran_order") {
      which = 1;
      h.fortran_order = p.boolean();
    } else if (key == "shape") {
      which = 2;
      h.shape = p.shape();
    } else {
      p.fail("unknown key '" + printable(key) + "'");
    }
    if (seen[which]) p.fail("key '" + key + "' appears twice");
    seen[which] = true;
    if (!p.take(',')) {
      p.expect('}', "to close the header dict");
      break;
    }
  }
  if (!p.at_end()) p.fail("text after the header dict");
  const char* keys[3] = {"descr", "fortran_order", "shape"};
  for (int i = 0; i < 3; ++i)
    if (!seen[i]) p.fail(std::string("missing key '") + keys[i] + "'");
  return h;
}

std::uint32_t little_endian(const unsigned char* p, int bytes) {
  std::uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

NpyArray parse_npy(std::string_view bytes, const std::string& name) {
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < kMagicLength + 2 || std::memcmp(bytes.data(), kMagic, kMagicLength) != 0)
    throw InputError(name + ": not a .npy file (it does not start with \\x93NUMPY)");
  const int major = u[6], minor = u[7];
  if ((major != 1 && major != 2) || minor != 0)
    throw InputError(name + ": .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                     " is not supported (1.0 or 2.0)");
  const std::size_t length_bytes = major == 1 ? 2 : 4, prefix = kMagicLength + 2 + length_bytes;
  if (bytes.size() < prefix) throw InputError(name + ": truncated .npy header");
  const std::uint64_t header_length = little_endian(u + kMagicLength + 2, static_cast<int>(length_bytes));
  if (bytes.size() - prefix < header_length)
    throw InputError(name + ": truncated .npy header (it says " + std::to_string(header_length) + " bytes, the file has " +
                     std::to_string(bytes.size() - prefix) + " after the prefix)");
  const Header h = parse_header(bytes.substr(prefix, header_length), name);
  std::size_t item = 0;
  if (h.descr == "<f4") item = 4;
  else if (h.descr == "<f8") item = 8;
  else
    throw InputError(name + ": dtype '" + printable(h.descr) +
                     "' is not supported (little-endian float32 '<f4' or float64 '<f8')");
  if (h.fortran_order) throw InputError(name + ": Fortran order is not supported (write a C-order array)");
  std::uint64_t count = 1;
  for (const std::int64_t d : h.shape) {
    if (d != 0 && count > std::numeric_limits<std::uint64_t>::max() / 16 / static_cast<std::uint64_t>(d))
      throw InputError(name + ": shape too large");
    count *= static_cast<std::uint64_t>(d);
  }
  const std::uint64_t data_bytes = bytes.size() - prefix - header_length;
  if (data_bytes != count * item)
    throw InputError(name + ": holds " + std::to_string(data_bytes) + " data bytes, its shape and dtype need " +
                     std::to_string(count * item));
  NpyArray a;
  a.shape = h.shape;
  a.values.resize(count);
  const char* data = bytes.data() + prefix + header_length;
  // The host is little-endian (x86-64, aarch64): the bytes are the values.
  for (std::uint64_t i = 0; i < count; ++i) {
    if (item == 4) {
      float f;
      std::memcpy(&f, data + 4 * i, 4);
      a.values[i] = f;
    } else {
      std::memcpy(&a.values[i], data + 8 * i, 8);
    }
  }
  return a;
}

NpyArray read_npy(const std::string& path, const char* what) {
  const std::string bytes = read_file_text(path, what);
  return parse_npy(bytes, std::string(what) + " '" + (path == "-" ? std::string("<stdin>") : printable(path)) + "'");
}

std::string npy_float32_bytes(const std::vector<std::int64_t>& shape, const std::vector<double>& values) {
  std::string dims;  // "2, 3"; a 1-tuple is "4," as Python writes it
  for (std::size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ',';
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  const std::size_t prefix = kMagicLength + 4;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, kMagicLength);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  const std::size_t start = out.size();
  out.resize(start + 4 * values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float f = static_cast<float>(values[i]);
    std::memcpy(&out[start + 4 * i], &f, 4);
  }
  return out;
}

void write_npy(const std::string& path, const char* what, const std::vector<std::int64_t>& shape,
               const std::vector<double>& values) {
  const std::string bytes = npy_float32_bytes(shape, values);
  write_output(path, what, [&](const TextOut::Sink& sink) { sink(bytes); });
}

}  // namespace moonep::io
