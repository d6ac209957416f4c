// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The test binaries' entry into Catch2 (catch2_session.cpp): runs every
// test case of the binary with Catch2's command line; the exit code to
// return from main.
#pragma once

namespace moonep::test {

int run_catch_session(int argc, char* argv[]);

}  // namespace moonep::test
