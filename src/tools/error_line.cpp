// moonep-plan's error line; see error_line.hpp.
#include "error_line.hpp"

#include <cstdio>

#include "moonep/error.hpp"

namespace moonep::tools {

void print_error_line(const std::string& message) {
  // 20 characters of prefix + 280 of message: no line over 300.
  const std::string line = one_line_message(message, 280);
  std::fflush(stdout);
  std::fprintf(stderr, "moonep-plan: error: %s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace moonep::tools
