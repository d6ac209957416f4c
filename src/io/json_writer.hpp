// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private: appending compact JSON numbers and integer arrays to text being
// written. Plans hold up to billions of integers, so the writers build text
// directly instead of going through a JSON DOM, and a file is streamed in
// pieces (TextOut with a sink) rather than held whole: an 800 MB plan file
// costs 1 MiB of memory to write.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "moonep/config.hpp"

namespace moonep::io {

// Text being written: collected whole (default), or handed to a sink in
// pieces of about 1 MiB (the sink throws to stop the writing).
class TextOut {
 public:
  using Sink = std::function<void(std::string_view)>;
  TextOut() = default;
  explicit TextOut(Sink sink) : sink_(std::move(sink)) { buf_.reserve(kPiece + 64); }

  TextOut& operator+=(std::string_view s) {
    buf_.append(s);
    if (sink_ && buf_.size() >= kPiece) flush();
    return *this;
  }
  TextOut& operator+=(char c) {
    buf_.push_back(c);
    if (sink_ && buf_.size() >= kPiece) flush();
    return *this;
  }
  // Hands what is buffered to the sink (nothing when collecting).
  void flush();
  // The collected text (collecting only).
  std::string take() { return std::move(buf_); }

 private:
  static constexpr std::size_t kPiece = std::size_t{1} << 20;
  std::string buf_;
  Sink sink_;
};

void append_int(TextOut& out, std::int64_t value);
// [a,b,c]
void append_int_array(TextOut& out, const std::int32_t* data, std::size_t n);
inline void append_int_array(TextOut& out, const std::vector<std::int32_t>& v) {
  append_int_array(out, v.data(), v.size());
}
// A flat row-major array as rows of `cols` values: [[a,b],[c,d]].
void append_int_rows(TextOut& out, const std::vector<std::int32_t>& flat, std::size_t cols);
// "ranks":R,"experts":E,"topk":K,"tokens":S,"copy_slots":B,"token_padding":tp
void append_config_fields(TextOut& out, const Config& config);

}  // namespace moonep::io
