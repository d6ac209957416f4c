// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private to the commands (moonep-plan, moonep-layer): their one error line
// on standard error and the exit status every failure ends in.
#pragma once

#include <exception>
#include <new>
#include <stdexcept>
#include <string>

#include "moonep/error.hpp"

namespace moonep::tools {

// Prints "<program>: error: <message>" as one line of at most 300
// characters (moonep::one_line_message: control bytes escaped, long tokens
// elided) after flushing standard output, and flushes standard error.
void print_error_line(const std::string& message, const std::string& program = "moonep-plan");

// Runs a command's body and returns its exit status; every failure becomes
// one error line: status 2 for bad usage or input (std::invalid_argument:
// the options' UsageError and moonep::InputError), 1 for anything else.
template <class Body>
int run_command(const std::string& program, Body&& body) {
  try {
    return body();
  } catch (const std::invalid_argument& e) {
    print_error_line(e.what(), program);
    return 2;
  } catch (const RuntimeError& e) {
    print_error_line(e.what(), program);
    return 1;
  } catch (const std::bad_alloc&) {
    print_error_line("out of memory (try a smaller problem)", program);
    return 1;
  } catch (const std::exception& e) {
    print_error_line(e.what(), program);
    return 1;
  } catch (...) {
    print_error_line("unknown failure", program);
    return 1;
  }
}

}  // namespace moonep::tools
