// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private to moonep-plan: how much memory a run will take, estimated before
// anything sized by the input is allocated, and the limit it must stay
// under (--memory-limit). A tiny file can describe a problem of many GiB
// (token_padding 2^27 makes 2^28 slots per rank): such a run is refused up
// front with the sizes, instead of being killed half-way by the kernel.
#pragma once

#include <cstdint>
#include <string>

#include "moonep/backend.hpp"
#include "moonep/config.hpp"

namespace moonep::tools {

// What a run is, as far as its memory goes.
struct RunShape {
  Config config;
  Backend backend = Backend::portable;
  bool has_tpe = false;            // the problem gives tokens_per_expert
  bool mpi = false;                // one MPI process per rank (else every rank here)
  bool gathers_plans = false;      // --world mpi rank 0: holds every rank's plan to write it
  bool writes_plan = false;        // --output
  bool writes_problem = false;     // --save-problem
  std::int64_t input_bytes = 0;    // the problem file's text
  std::int64_t parse_bytes = 0;    // moonep::problem_parse_memory of it
};

// Peak bytes of each phase; a phase's figure includes what is still alive
// from before it (the problem stays to the end).
struct MemoryNeed {
  std::int64_t process = 0;   // the program itself: libraries, Kokkos, MPI
  std::int64_t problem = 0;   // the routing (and tokens per expert) in memory
  std::int64_t parse = 0;     // reading the file: text + JSON document
  std::int64_t planner = 0;   // the backend's buffers while it plans
  std::int64_t plan = 0;      // this process's plan copied out of the planner
  std::int64_t output = 0;    // after planning: gathering the plans (--world mpi) and
                              // writing the files (streamed through a buffer)
  // The largest phase: process + max(parse, problem + planner + plan,
  // problem + plan + output).
  std::int64_t peak() const;
  // The parts of the largest phase: "problem 1.0 GiB, planner 9.0 GiB, plan 5.0 GiB"
  std::string parts() const;
};

MemoryNeed estimate_memory(const RunShape& shape);

// The default limit: 4 GiB, or half of this machine's memory (the smaller of
// physical memory and a cgroup limit) when that is less, shared by the
// `processes` of this run on this node.
std::int64_t default_memory_limit(int processes = 1);

// "--memory-limit" values: bytes, or a number with K, M, G, T (binary:
// KiB ... TiB; "G" and "GiB" alike), or "none". UsageError otherwise.
std::int64_t parse_memory_size(const std::string& option, const std::string& text);
inline constexpr std::int64_t kNoMemoryLimit = INT64_MAX;

// InputError (exit 2) naming the sizes when `need` exceeds `limit`:
// "<what> needs about 10.6 GiB (problem ..., planner ...), more than the
// memory limit of 4.0 GiB (--memory-limit)".
void check_memory(const MemoryNeed& need, std::int64_t limit, const std::string& what);

// Returns memory freed since to the system. glibc keeps freed blocks for
// reuse (the JSON document's many small ones, the planner's views); giving
// them back after each phase makes the largest phase, not the sum of all,
// what a run costs, as estimate_memory assumes.
void release_freed_memory();

// 1536 -> "1.5 KiB", 3 << 30 -> "3.0 GiB".
std::string format_bytes(std::int64_t bytes);

}  // namespace moonep::tools
