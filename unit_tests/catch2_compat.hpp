// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Catch2 2.x (single header, Debian's catch2 2.13) or Catch2 3.x, whichever
// is installed. Tests include this instead of a Catch2 header.
#pragma once

#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>
#define MOONEP_CATCH2_VERSION 3
#else
#include <catch2/catch.hpp>
#define MOONEP_CATCH2_VERSION 2
#endif
