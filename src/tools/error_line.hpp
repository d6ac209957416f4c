// Private to the command-line tools: their one error line on standard error.
#pragma once

#include <string>

namespace moonep::tools {

// Prints "moonep-plan: error: <message>" as one line of at most 300
// characters (moonep::one_line_message: control bytes escaped, long tokens
// elided) after flushing standard output, and flushes standard error.
void print_error_line(const std::string& message);

// The program the line names ("moonep-plan" unless set; moonep-layer sets
// its own before it runs the MPI stages, which print through this).
void set_error_line_program(const char* name);

}  // namespace moonep::tools
