// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Catch2's session, compiled once for every test binary: with Catch2 2.x
// the single header's whole implementation is compiled where
// CATCH_CONFIG_RUNNER is defined, the slowest compile of a test binary
// (about 20 s; 80 s under the sanitizers), so one translation unit holds it
// and the test mains (test_main.cpp and its variants) only call in.
#define CATCH_CONFIG_RUNNER
#include "catch2_compat.hpp"

#if MOONEP_CATCH2_VERSION == 3
#include <catch2/catch_session.hpp>
#endif

#include "catch2_session.hpp"

namespace moonep::test {

int run_catch_session(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }

}  // namespace moonep::test
