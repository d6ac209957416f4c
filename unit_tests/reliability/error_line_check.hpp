// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Test support for the tests that run moonep-plan: its one error line.
#pragma once

#include <string>

#include "catch2_compat.hpp"
#include "reliability/run_process.hpp"

namespace moonep::test {

// The run's only stderr line, which must be "moonep-plan: error: ..."
// (REQUIREs exactly one line; the run is described on failure).
inline std::string only_error_line(const RunResult& r) {
  INFO(r.describe());
  const auto lines = r.err_lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("moonep-plan: error: ", 0) == 0);
  return lines[0];
}

}  // namespace moonep::test
