// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private to moonep-plan: what a --world mpi process is about to plan, in a
// few integers every rank can compare with rank 0's before the first step.
// Ranks started with different options, or reading different problem files
// of the same shape, would otherwise wait in collectives that never match
// (a hang) or gather a plan mixed from both files.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "moonep/io.hpp"
#include "plan_options.hpp"

namespace moonep::tools {

// The options that shape the run, the configuration, and a 64-bit digest
// of the routing and tokens per expert. Fields in the order of kNames
// (run_fingerprint.cpp).
struct RunFingerprint {
  static constexpr int kFields = 16;
  std::array<std::int64_t, kFields> v{};
};

// `mpi_world` is the requested world kind (auto, shared, rma) after
// $MOONEP_MPI_WORLD.
RunFingerprint fingerprint_of(const PlanOptions& options, const std::string& mpi_world, const Problem& problem);

// 64-bit digest of a problem's routing and tokens per expert (their values
// and lengths, rank by rank): equal for equal problems, different for
// different ones but by a 2^-64 chance.
std::uint64_t problem_digest(const Problem& problem);

// "" when `theirs` (rank `rank`'s) equals `mine` (rank 0's); else one line
// naming the first difference: "rank 2 was started with --steps 2, rank 0
// with --steps 1; every rank must be started with the same options".
std::string fingerprint_difference(const RunFingerprint& rank0, const RunFingerprint& theirs, int rank);

}  // namespace moonep::tools
