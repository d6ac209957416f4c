// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private to moonep-plan: the summary of one planned step, for people (a
// table) and for scripts (one JSON object).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "moonep/host_plan.hpp"

namespace moonep::tools {

struct PlanSummary {
  Config config;
  std::vector<std::int64_t> load_before;  // entries each rank would receive under plain EP
  std::vector<std::int64_t> load_after;   // entries each rank receives (non-negative src_info)
  std::vector<int> copied_in;             // experts copied into each rank's copy slots
  std::vector<int> remote_experts;        // remote experts with tokens on each rank
  std::vector<std::int64_t> padding;      // zero-filled slots on each rank
  std::vector<std::int32_t> tokens;       // a ragged step's s_r per rank; empty for a full step
};

// Before: per owner rank, the routed entries naming its experts. After and
// the rest: read off the plan.
PlanSummary summarize(const HostPlan& plan, const Routing& routing);

// max/mean of a load vector (0 when the mean is 0).
double max_over_mean(const std::vector<std::int64_t>& load);

// Median of step times, in microseconds.
double median_us(std::vector<double> seconds);

// A duration given in microseconds, in the unit that suits it: "850 ns",
// "12.3 us", "1.04 ms", "2.04 s" (three significant digits, at least one
// decimal; minutes past 100 s: "3 min 20 s").
std::string format_duration_us(double us);

// What ran, for the summary's last lines and the JSON.
struct RunInfo {
  std::string source;       // describe_source(): "problem file p.json", "synthetic step (...)"
  std::string input;        // the problem file; empty in synthetic mode
  double imbalance = 0;     // synthetic mode
  std::uint64_t seed = 0;   // synthetic mode
  std::string backend;      // reference | portable | cuda
  std::string ran;          // how: "Kokkos Serial", "shared_tables kernel, ..."; may be empty
  std::string world;        // inprocess | mpi
  std::string mpi_world;    // shared | rma (world mpi)
  int processes = 1;
  std::vector<double> step_seconds;  // one per step (under MPI the slowest rank's)
  std::int64_t memory_estimate = 0;  // bytes at the peak
  std::int64_t memory_limit = 0;     // bytes; kNoMemoryLimit = none
  std::string memory;                // the memory line's text
};

// How many rows the per-rank table has: every rank (full), or the extremes
// and a histogram of the loads (compact); automatic: compact above
// kCompactTableRanks ranks.
enum class TableStyle { automatic, full, compact };
constexpr int kCompactTableRanks = 32;

// The human summary.
void print_summary(std::ostream& out, const PlanSummary& s, const RunInfo& run,
                   TableStyle table = TableStyle::automatic);

// The summary as one JSON object on one line (docs/cli.md lists the keys).
void print_summary_json(std::ostream& out, const PlanSummary& s, const RunInfo& run);

}  // namespace moonep::tools
