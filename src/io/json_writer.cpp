// Compact JSON text for integer data.
#include "json_writer.hpp"

#include <charconv>

namespace moonep::io {

void append_int(std::string& out, std::int64_t value) {
  char buf[24];
  const auto res = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, res.ptr);
}

void append_int_array(std::string& out, const std::int32_t* data, std::size_t n) {
  out.push_back('[');
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out.push_back(',');
    append_int(out, data[i]);
  }
  out.push_back(']');
}

void append_int_rows(std::string& out, const std::vector<std::int32_t>& flat, std::size_t cols) {
  out.push_back('[');
  for (std::size_t start = 0; start < flat.size(); start += cols) {
    if (start) out.push_back(',');
    append_int_array(out, flat.data() + start, cols);
  }
  out.push_back(']');
}

void append_config_fields(std::string& out, const Config& c) {
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
