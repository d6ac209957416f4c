// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Compact JSON text for integer data.
#include "json_writer.hpp"

#include <charconv>

namespace moonep::io {

void TextOut::flush() {
  if (!sink_ || buf_.empty()) return;
  sink_(buf_);
  buf_.clear();
}

void append_int(TextOut& out, std::int64_t value) {
  char buf[24];
  const auto res = std::to_chars(buf, buf + sizeof buf, value);
  out += std::string_view(buf, static_cast<std::size_t>(res.ptr - buf));
}

void append_int_array(TextOut& out, const std::int32_t* data, std::size_t n) {
  out += '[';
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out += ',';
    append_int(out, data[i]);
  }
  out += ']';
}

void append_int_rows(TextOut& out, const std::vector<std::int32_t>& flat, std::size_t cols) {
  out += '[';
  for (std::size_t start = 0; start < flat.size(); start += cols) {
    if (start) out += ',';
    append_int_array(out, flat.data() + start, cols);
  }
  out += ']';
}

void append_config_fields(TextOut& out, const Config& c) {
  out += "\"ranks\":";
  append_int(out, c.ranks);
  out += ",\"experts\":";
  append_int(out, c.experts);
  out += ",\"topk\":";
  append_int(out, c.topk);
  out += ",\"tokens\":";
  append_int(out, c.tokens);
  out += ",\"copy_slots\":";
  append_int(out, c.copy_slots);
  out += ",\"token_padding\":";
  append_int(out, c.token_padding);
}

}  // namespace moonep::io
