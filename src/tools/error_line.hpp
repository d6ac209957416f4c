// Private to moonep-plan: its one error line on standard error.
#pragma once

#include <string>

namespace moonep::tools {

// Prints "moonep-plan: error: <message>" as one line of at most 300
// characters (moonep::one_line_message: control bytes escaped, long tokens
// elided) after flushing standard output, and flushes standard error.
void print_error_line(const std::string& message);

}  // namespace moonep::tools
