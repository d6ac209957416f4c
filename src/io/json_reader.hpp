// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: typed access to a parsed JSON document with error messages that
// name the exact place ("routing[2][7]: expected an integer expert id, got
// \"x\""). Every failure is a one-line moonep::InputError.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "moonep/config.hpp"
#include "moonep/error.hpp"

namespace moonep::io {

using Json = nlohmann::json;

// Parses text; syntax errors and duplicate object keys become InputError
// "invalid JSON at byte B: ...".
Json parse_json(const std::string& text);

// Runs parse(), prefixing any InputError with the file it came from
// ("plan.json: routing[2][7]: ...").
template <class F>
auto with_file_context(const std::string& path, F&& parse) -> decltype(parse());

// A short rendering of a value for error messages: scalars as JSON (long
// ones cut), containers by kind ("an array of 3 values").
std::string describe_value(const Json& value);

// Throws unless value is an object; `path` names it in the message.
void require_object(const Json& value, const std::string& path);
// The field `key` of object `obj` (at `path`, "" for the top level).
const Json& require_field(const Json& obj, const char* key, const std::string& path);
// A 32-bit integer; `expected` describes it ("an integer expert id").
std::int32_t to_int32(const Json& value, const std::string& path, const char* expected);
// An integer field of an object.
std::int32_t int32_field(const Json& obj, const char* key, const std::string& path);
// An array of 32-bit integers. `expected_array` describes the whole
// ("an array of expert ids"), `expected_element` one element as in to_int32.
std::vector<std::int32_t> to_int32_array(const Json& value, const std::string& path,
                                         const char* expected_array,
                                         const char* expected_element);
// An array of arrays of 32-bit integers (ragged allowed: lengths are checked
// by the caller, who can say what they should be).
std::vector<std::vector<std::int32_t>> to_int32_matrix(const Json& value, const std::string& path,
                                                       const char* expected_matrix,
                                                       const char* expected_row,
                                                       const char* expected_element);

// The six configuration fields shared by problem and plan files; only their
// JSON types are checked here, their values by moonep::validate().
Config config_fields(const Json& obj, const std::string& path);

// "routing" + 2 -> "routing[2]".
std::string index_path(const std::string& path, std::size_t i);
// "plans[1]" + "dst" -> "plans[1].dst"; "" + "ranks" -> "ranks".
std::string field_path(const std::string& path, const char* key);

template <class F>
auto with_file_context(const std::string& path, F&& parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const InputError& e) {
    throw InputError((path == "-" ? std::string("<stdin>") : printable(path)) + ": " + e.what());
  }
}

}  // namespace moonep::io
