// moonep::problem_parse_memory: what parse_problem will hold, estimated
// from the text alone, so that a caller can refuse a file before the JSON
// document is built (a document costs far more than its text: "1," is two
// bytes of text and a 16-byte value in a vector).
#include <cstdint>
#include <string_view>

#include "moonep/io.hpp"

namespace moonep {

std::int64_t problem_parse_memory(std::string_view text) {
  // Counted outside strings: values (one per ',' plus one per array or
  // object opened) and object members (one per ':').
  std::int64_t values = 1, members = 0, string_bytes = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      ++string_bytes;
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case ',': case '[': case '{': ++values; break;
      case ':': ++members; break;
      default: break;
    }
  }
  // A value is 16 bytes in a std::vector that doubled as it grew (on
  // average 1.5 times the size it needs, twice at worst: 32); an object
  // member is a std::map node with its key (about 96 bytes); a string's
  // characters are copied once. The parsed int32 arrays add 4 bytes a value.
  constexpr std::int64_t kPerValue = 32 + 4, kPerMember = 96;
  return values * kPerValue + members * kPerMember + string_bytes;
}

}  // namespace moonep
