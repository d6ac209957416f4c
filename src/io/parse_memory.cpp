// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::problem_parse_memory: what parse_problem will hold, estimated
// from the text alone, so that a caller can refuse a file before the JSON
// document is built (a document costs far more than its text: "1," is two
// bytes of text and a 16-byte value in a vector). The count is
// io::JsonScan's, which readers also keep as they read.
#include <cstdint>
#include <string_view>

#include "json_scan.hpp"
#include "moonep/io.hpp"

namespace moonep {

std::int64_t problem_parse_memory(std::string_view text) {
  io::JsonScan scan(1 << 30);  // every byte counted, whatever the nesting
  scan.feed(text);
  return scan.parse_memory();
}

}  // namespace moonep
