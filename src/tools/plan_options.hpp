// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private to moonep-plan: its command line.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "moonep/backend.hpp"
#include "moonep/config.hpp"
#include "plan_summary.hpp"

namespace moonep::tools {

// Bad command line: exit code 2, like bad input.
class UsageError : public std::invalid_argument {
 public:
  explicit UsageError(const std::string& what) : std::invalid_argument(what) {}
};

enum class World { inprocess, mpi, gpu };

struct PlanOptions {
  std::string input;         // problem file; empty = synthetic mode
  std::string output;        // plan file, "-" = standard output; empty = none
  std::string save_problem;  // synthetic mode: also write the problem file
  std::optional<Backend> backend;  // empty = default_backend()
  World world = World::inprocess;
  // --devices with --world gpu: rank r on devices[r mod size]; empty = every
  // visible GPU in turn.
  std::vector<int> devices;
  // --multicast with --world gpu: WorldOptions::multicast (NVLink multicast
  // for the gathered counts and counters; the world refuses it where it
  // cannot or must not be used).
  bool multicast = false;
  // --mpi-world auto|shared|rma; empty = $MOONEP_MPI_WORLD, else auto.
  std::string mpi_world;
  // --memory-limit in bytes (kNoMemoryLimit for "none"); empty = the
  // default of memory_budget.hpp.
  std::optional<std::int64_t> memory_limit;
  // --mpi-timeout in seconds; 0 = $MOONEP_MPI_TIMEOUT, else the MPI
  // worlds' default (moonep/mpi_world.hpp).
  double mpi_timeout = 0;
  bool summary = false;  // print the human summary (always in synthetic mode)
  bool json = false;     // print the summary as one JSON object instead
  TableStyle table = TableStyle::automatic;  // --table: the per-rank rows
  bool help = false;
  bool version = false;

  // Synthetic mode. The default is one step of a DeepSeek-V3-like layer
  // (256 experts, top-8) on 8 ranks with 4096 tokens each and a typically
  // skewed router. copy_slots is the default_copy_slots of the final
  // --ranks and --experts unless --copy-slots was given (32 here).
  Config config{8, 256, 8, 4096, 32, 128};
  double imbalance = 1.0;
  std::uint64_t seed = 1;
  // --ragged: a ragged synthetic step, each rank's token count s_r drawn
  // uniformly from 0..S (from the seed, so reproducible).
  bool ragged = false;
  int steps = 0;  // 0 = default: 20 in synthetic mode, 1 with --input

  std::vector<std::string> kokkos_args;  // --kokkos-* options, passed on to Kokkos

  bool synthetic() const { return input.empty(); }
};

// The copy slots of a synthetic step without --copy-slots: B = E/R, which
// always suffices (docs/spec/planning.md "Copy slots": a rank has one donor,
// so at most E/R remote experts have entries on it), lowered where the rules
// of moonep::validate need less: 1 with one rank (no expert is remote), and
// at most what keeps ranks*(experts+B) within int32. A configuration that
// validate rejects for its ranks or experts gets 1, so that its message
// names them and not a copy-slot count the user never gave.
int default_copy_slots(const Config& config);

// Parses argv[1..argc); throws UsageError naming the offending option.
PlanOptions parse_plan_options(int argc, const char* const* argv);

// The --help text.
std::string plan_usage();

// The --version text: "moonep-plan 0.1.0" and what this build has.
std::string plan_version();

}  // namespace moonep::tools
