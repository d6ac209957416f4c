// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The commands' error line; see error_line.hpp.
#include "error_line.hpp"

#include <cstdio>

#include "moonep/error.hpp"

namespace moonep::tools {

void print_error_line(const std::string& message, const std::string& program) {
  // The prefix and the message: no line over 300 characters.
  const std::string prefix = program + ": error: ";
  const std::string line = one_line_message(message, 300 - prefix.size());
  std::fflush(stdout);
  std::fprintf(stderr, "%s%s\n", prefix.c_str(), line.c_str());
  std::fflush(stderr);
}

}  // namespace moonep::tools
