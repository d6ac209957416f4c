// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The commands' error line; see error_line.hpp.
#include "error_line.hpp"

#include <cstdio>

#include "moonep/error.hpp"

namespace moonep::tools {

namespace {
const char* program = "moonep-plan";
}

void set_error_line_program(const char* name) { program = name; }

void print_error_line(const std::string& message) {
  // The prefix ("<program>: error: ") and the message: no line over 300.
  const std::string prefix = std::string(program) + ": error: ";
  const std::string line = one_line_message(message, 300 - prefix.size());
  std::fflush(stdout);
  std::fprintf(stderr, "%s%s\n", prefix.c_str(), line.c_str());
  std::fflush(stderr);
}

}  // namespace moonep::tools
