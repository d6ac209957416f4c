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

// The program the line names ("moonep-plan" unless set; run_command sets
// it, so that the MPI stages, which print through print_error_line too,
// name the right command).
void set_error_line_program(const char* name);

// Prints "<program>: error: <message>" as one line of at most 300
// characters (moonep::one_line_message: control bytes escaped, long tokens
// elided) after flushing standard output, and flushes standard error.
void print_error_line(const std::string& message);

// Runs a command's body and returns its exit status; every failure becomes
// one error line: status 2 for bad usage or input (std::invalid_argument:
// the options' UsageError and moonep::InputError), 1 for anything else.
// `quiet()` true: another process of the job prints the line (under an MPI
// launch every process fails alike before the MPI stages; rank 0 prints).
template <class Body>
int run_command(const char* program, Body&& body, bool (*quiet)() = nullptr) {
  set_error_line_program(program);
  const auto fail = [&](int status, const std::string& message) {
    if (!quiet || !quiet()) print_error_line(message);
    return status;
  };
  try {
    return body();
  } catch (const std::invalid_argument& e) {
    return fail(2, e.what());
  } catch (const RuntimeError& e) {
    return fail(1, e.what());
  } catch (const std::bad_alloc&) {
    return fail(1, "out of memory (try a smaller problem)");
  } catch (const std::exception& e) {
    return fail(1, e.what());
  } catch (...) {
    return fail(1, "unknown failure");
  }
}

}  // namespace moonep::tools
