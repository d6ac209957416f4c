// Private: appending compact JSON numbers and integer arrays to a string.
// Plans hold hundreds of thousands of integers, so the writers build text
// directly instead of going through a JSON DOM.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "moonep/config.hpp"

namespace moonep::io {

void append_int(std::string& out, std::int64_t value);
// [a,b,c]
void append_int_array(std::string& out, const std::int32_t* data, std::size_t n);
inline void append_int_array(std::string& out, const std::vector<std::int32_t>& v) {
  append_int_array(out, v.data(), v.size());
}
// A flat row-major array as rows of `cols` values: [[a,b],[c,d]].
void append_int_rows(std::string& out, const std::vector<std::int32_t>& flat, std::size_t cols);
// "ranks":R,"experts":E,"topk":K,"tokens":S,"copy_slots":B,"token_padding":tp
void append_config_fields(std::string& out, const Config& config);

}  // namespace moonep::io
