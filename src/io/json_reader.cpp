// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Typed JSON access with precise, one-line error messages.
#include "json_reader.hpp"

#include <climits>
#include <set>

#include "json_scan.hpp"
#include "moonep/error.hpp"

namespace moonep::io {
namespace {

// Messages quote the input (keys, values, the parser's last token): they
// stay one printable line of bounded length whatever the input held.
[[noreturn]] void fail(const std::string& msg) { throw InputError(printable(msg)); }

// nlohmann's "[json.exception.parse_error.101] parse error at ...: <what>"
// without its "[...] " tag.
std::string parser_message(const std::exception& e) {
  std::string msg = e.what();
  const auto bracket = msg.find("] ");
  return bracket == std::string::npos ? msg : msg.substr(bracket + 2);
}

// The fast path of to_int32: true and *out set when value is an integer that
// fits in 32 bits.
bool try_int32(const Json& value, std::int32_t* out) {
  if (value.is_number_unsigned()) {
    const auto u = value.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT32_MAX)) return false;
    *out = static_cast<std::int32_t>(u);
    return true;
  }
  if (value.is_number_integer()) {
    const auto v = value.get<std::int64_t>();
    if (v < INT32_MIN || v > INT32_MAX) return false;
    *out = static_cast<std::int32_t>(v);
    return true;
  }
  return false;
}

std::string label(const std::string& path) { return path.empty() ? std::string("top level") : path; }

}  // namespace

std::string index_path(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

std::string field_path(const std::string& path, const char* key) {
  return path.empty() ? std::string(key) : path + "." + key;
}

Json parse_json(const std::string& text) {
  // Keys seen in each object being parsed, innermost last: a repeated key
  // would silently shadow the first one, so it is rejected.
  std::vector<std::set<std::string>> open_objects;
  const Json::parser_callback_t reject_duplicate_keys =
      [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
        switch (event) {
          case Json::parse_event_t::object_start:
            open_objects.emplace_back();
            break;
          case Json::parse_event_t::key: {
            const auto& key = parsed.get_ref<const std::string&>();
            if (!open_objects.back().insert(key).second)
              fail("invalid JSON: key \"" + printable(key, 60) + "\" appears twice in the same object");
            break;
          }
          case Json::parse_event_t::object_end:
            open_objects.pop_back();
            break;
          default:
            break;
        }
        return true;
      };
  // What nlohmann would misread (a NUL ends its text) or build at great
  // cost (deep nesting), refused first with the byte and its place.
  if (const std::string error = json_text_error(text); !error.empty()) fail(error);
  try {
    return Json::parse(text, reject_duplicate_keys);
  } catch (const Json::parse_error& e) {
    fail("invalid JSON at byte " + std::to_string(e.byte) + ": " + parser_message(e));
  } catch (const Json::exception& e) {  // e.g. a number too large for a double
    fail("invalid JSON: " + parser_message(e));
  }
}

std::string describe_value(const Json& value) {
  switch (value.type()) {
    case Json::value_t::array:
      return "an array of " + std::to_string(value.size()) + " values";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::string: {
      // dump() escapes the C0 controls; printable() the rest (DEL, C1, a
      // UTF-8 character the cut broke).
      std::string s = value.dump(-1, ' ', false, Json::error_handler_t::replace);
      if (s.size() > 40) s = s.substr(0, 36) + "...\"";
      return printable(s);
    }
    default:
      return printable(value.dump(-1, ' ', false, Json::error_handler_t::replace));
  }
}

void require_object(const Json& value, const std::string& path) {
  if (!value.is_object()) fail(label(path) + ": expected an object, got " + describe_value(value));
}

const Json& require_field(const Json& obj, const char* key, const std::string& path) {
  const auto it = obj.find(key);
  if (it == obj.end()) {
    fail(path.empty() ? std::string("missing required field \"") + key + "\""
                      : path + ": missing required field \"" + key + "\"");
  }
  return *it;
}

std::int32_t to_int32(const Json& value, const std::string& path, const char* expected) {
  std::int32_t out = 0;
  if (try_int32(value, &out)) return out;
  if (value.is_number_integer())
    fail(path + ": " + value.dump() + " does not fit in a 32-bit integer");
  fail(path + ": expected " + expected + ", got " + describe_value(value));
}

std::int32_t int32_field(const Json& obj, const char* key, const std::string& path) {
  return to_int32(require_field(obj, key, path), field_path(path, key), "an integer");
}

std::vector<std::int32_t> to_int32_array(const Json& value, const std::string& path,
                                         const char* expected_array,
                                         const char* expected_element) {
  if (!value.is_array())
    fail(path + ": expected " + expected_array + ", got " + describe_value(value));
  std::vector<std::int32_t> out(value.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!try_int32(value[i], &out[i])) to_int32(value[i], index_path(path, i), expected_element);
  }
  return out;
}

std::vector<std::vector<std::int32_t>> to_int32_matrix(const Json& value, const std::string& path,
                                                       const char* expected_matrix,
                                                       const char* expected_row,
                                                       const char* expected_element) {
  if (!value.is_array())
    fail(path + ": expected " + expected_matrix + ", got " + describe_value(value));
  std::vector<std::vector<std::int32_t>> out;
  out.reserve(value.size());
  for (std::size_t r = 0; r < value.size(); ++r) {
    const Json& row = value[r];
    const std::string row_path = index_path(path, r);
    if (!row.is_array())
      fail(row_path + ": expected " + expected_row + ", got " + describe_value(row));
    out.push_back(to_int32_array(row, row_path, expected_row, expected_element));
  }
  return out;
}

Config config_fields(const Json& obj, const std::string& path) {
  Config c;
  c.ranks = int32_field(obj, "ranks", path);
  c.experts = int32_field(obj, "experts", path);
  c.topk = int32_field(obj, "topk", path);
  c.tokens = int32_field(obj, "tokens", path);
  c.copy_slots = int32_field(obj, "copy_slots", path);
  c.token_padding = int32_field(obj, "token_padding", path);
  return c;
}

}  // namespace moonep::io
