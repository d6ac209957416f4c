// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-plan's memory estimate and limit (memory_budget.hpp).
//
// The estimate counts the arrays each phase allocates, from the code that
// allocates them (named below), in bytes. It is meant to be within a
// factor of 2 of the peak resident size the kernel reports
// (unit_tests/test_memory_limit.cpp measures that on mid-size runs of each
// backend and world): too low and a run the limit should stop gets killed,
// too high and a run that fits is refused.
#include "memory_budget.hpp"

#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "moonep/error.hpp"
#include "plan_options.hpp"

namespace moonep::tools {
namespace {

using i64 = std::int64_t;
constexpr i64 kInt = 4;  // every plan and routing value is an int32

// Values of one rank's dup structures (dup_loffs and dup_groups rows), for
// a routing spread over the ranks: a token's K entries reach about
// R*(1-(1-1/R)^K) distinct ranks; every other entry is a duplicate, and a
// token with duplicates is a dup_groups row of 3 values.
i64 dup_values(const Config& c) {
  const double R = c.ranks, S = c.tokens, K = c.topk;
  const double distinct = R * (1.0 - std::pow(1.0 - 1.0 / R, K));
  const double loffs = std::max(0.0, S * K - S * distinct);
  return static_cast<i64>(loffs + 3.0 * std::min(S, loffs));
}

// One rank's plan as HostRankPlan vectors of exactly the plan's sizes.
i64 exact_rank_plan(const Config& c) {
  const i64 N = c.entries(), NvS = c.slots(), G = c.groups();
  return (N + NvS + 3 * G + static_cast<i64>(c.ranks) * c.copy_slots + 6 + dup_values(c)) * kInt;
}

// One rank's plan as the portable planner hands it over
// (impl::RankPlanView::to_host): dup_groups and dup_loffs are copied whole,
// [NvS][3] and [NvS], and only then cut to their prefixes (the capacity,
// already written, stays).
i64 portable_host_rank_plan(const Config& c) {
  const i64 N = c.entries(), NvS = c.slots(), G = c.groups();
  return (N + 5 * NvS + 3 * G + static_cast<i64>(c.ranks) * c.copy_slots + 4) * kInt;
}

// The reference backend's plan (plan_reference): the dup vectors grow by
// push_back, to 1.5 times their size on average.
i64 reference_rank_plan(const Config& c) { return exact_rank_plan(c) + dup_values(c) / 2 * kInt; }

// What the portable planner writes of one local rank's views
// (impl::PortablePlanner, portable::*Scratch; views allocated
// WithoutInitializing and never written whole, such as the [NvS][3]
// dup_groups beyond its prefix, take no memory), in int32 values.
i64 portable_rank_views(const Config& c) {
  const i64 R = c.ranks, E = c.experts, B = c.copy_slots, G = c.groups();
  const i64 N = c.entries(), NvS = c.slots(), pairs = 2 * E + R;
  const i64 threads = std::max<i64>(1, std::thread::hardware_concurrency());
  const i64 blocks = std::max<i64>(1, std::min<i64>(threads, (N + 255) / 256));
  const i64 chunk = (E + 3 * G + 2) + 3 * NvS;   // ChunkLayout: own tables and the slots
  const i64 input = blocks * E + 2 * E + N;      // InputScratch
  const i64 publish = 3 * N + pairs * 8 + E;     // PublishScratch (a PutRun is 8 ints)
  const i64 plan = N + 3 * G + R * B + NvS + dup_values(c);  // RankPlanView as written
  const i64 staged_input = N + E;  // the HostPlanner's (or --world mpi's) copy of the routing
  return (chunk + input + publish + NvS /* slot_dstart */ + plan + staged_input) * kInt;
}

// What only rank 0 holds: its chunk's [R][E] tokens per expert and the
// shared tables, and RootScratch ([E][R] alloc, [R][E] expert offsets,
// [R][own_len] staged tables).
i64 portable_root(const Config& c) {
  const i64 R = c.ranks, E = c.experts, B = c.copy_slots, G = c.groups();
  const i64 shared = E + 1 + R * B + 3 * (2 * E + R);
  return (R * E + shared + 2 * R * E + R * (E + 3 * G + 2) + E + 24 * R) * kInt;
}

// plan_reference's tables: tokens per expert [R][E] int32, cum, alloc,
// expert_offset, acum [R][E] int64, z [R][R] int64.
i64 reference_tables(const Config& c) {
  const i64 R = c.ranks, E = c.experts;
  return R * E * (kInt + 4 * 8) + R * R * 8;
}

std::string gib_text(i64 bytes) { return format_bytes(bytes); }

// Physical memory, or the cgroup (v2, then v1) limit when lower.
i64 machine_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  i64 have = pages > 0 && page > 0 ? static_cast<i64>(pages) * page : 0;
  for (const char* file : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(file);
    long long limit = 0;
    if (in >> limit && limit > 0 && (have == 0 || limit < have)) have = limit;
  }
  return have;
}

}  // namespace

i64 MemoryNeed::peak() const {
  return process + std::max({parse, problem + planner + plan, problem + plan + output});
}

std::string MemoryNeed::parts() const {
  // The parts of the phase that makes the peak, leaving out the small ones.
  const i64 planning = problem + planner + plan, writing = problem + plan + output;
  const i64 top = std::max({parse, planning, writing});
  std::string s;
  auto add = [&](const char* name, i64 v) {
    if (v <= 0 || v * 100 < top) return;
    if (!s.empty()) s += ", ";
    s += std::string(name) + " " + format_bytes(v);
  };
  if (top == parse) {
    add("reading the problem", parse);
  } else {
    add("problem", problem);
    add(top == planning ? "planner" : "", top == planning ? planner : 0);
    add("plan", plan);
    add(top == writing ? "gathering and writing" : "", top == writing ? output : 0);
  }
  return s;
}

MemoryNeed estimate_memory(const RunShape& s) {
  const Config& c = s.config;
  const i64 R = c.ranks;
  MemoryNeed m;
  m.process = (s.mpi ? 24 : 8) << 20;
  m.problem = R * c.entries() * kInt + (s.has_tpe ? R * c.experts * kInt : 0) + R * 64;
  // Reading: the text and its JSON document, or generating a synthetic
  // routing (its vectors and a CDF of E doubles).
  m.parse = s.input_bytes > 0 ? s.input_bytes + s.parse_bytes : m.problem + c.experts * 8;
  if (s.backend == Backend::reference && !s.mpi) {
    // ReferenceHostPlanner: its routing copy, its plan, the tables; result()
    // hands over a copy of the plan.
    m.planner = m.problem + R * reference_rank_plan(c) + reference_tables(c);
    m.plan = R * reference_rank_plan(c);
  } else if (!s.mpi) {
    m.planner = R * portable_rank_views(c) + portable_root(c);
    m.plan = R * portable_host_rank_plan(c);
  } else {
    // One local rank; rank 0 also plans steps 1-5 for everyone. Without
    // shared memory (rma) every rank receives the shared tables; with it,
    // a rank's publications (3 values an entry) touch its peers' slots,
    // which count in its resident size too.
    const i64 shared = (c.experts + 1 + static_cast<i64>(R) * c.copy_slots + 3 * (2 * c.experts + R)) * kInt;
    const i64 published = 3 * c.entries() * (R - 1) / R * kInt;
    m.planner = portable_rank_views(c) + published + (s.gathers_plans ? portable_root(c) : shared);
    m.plan = portable_host_rank_plan(c);
    // After the planner is gone: the gather's flat copy of this rank's
    // plan, and on rank 0 every rank's twice (MPI_Gatherv's buffer, then
    // the HostPlan it is unpacked into).
    m.output = exact_rank_plan(c) + (s.gathers_plans ? 2 * R * exact_rank_plan(c) : 0);
  }
  // Files are streamed through a 1 MiB buffer (io::TextOut), never held
  // whole; only rank 0 writes under MPI.
  const bool writes = (!s.mpi || s.gathers_plans) && (s.writes_plan || s.writes_problem);
  m.output += writes ? i64{1} << 20 : 0;
  return m;
}

i64 default_memory_limit(int processes) {
  constexpr i64 kDefault = i64{4} << 30;
  const i64 have = machine_memory();
  i64 limit = have > 0 ? std::min(kDefault, have / 2) : kDefault;
  return limit / std::max(1, processes);
}

i64 parse_memory_size(const std::string& option, const std::string& text) {
  if (text == "none") return kNoMemoryLimit;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  std::string unit(end ? end : "");
  for (char& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (unit.size() > 1 && (unit.substr(1) == "IB" || unit.substr(1) == "B")) unit = unit.substr(0, 1);
  const double scale = unit.empty() || unit == "B" ? 1.0
                       : unit == "K"               ? 1024.0
                       : unit == "M"               ? 1048576.0
                       : unit == "G"               ? 1073741824.0
                       : unit == "T"               ? 1099511627776.0
                                                   : 0.0;
  if (text.empty() || end == text.c_str() || errno == ERANGE || !std::isfinite(v) || scale == 0.0 || v < 0)
    throw UsageError(option + ": expected a size such as 512M, 4G or 1T (or none), got '" + text + "'");
  const double bytes = v * scale;
  if (bytes < 1048576.0) throw UsageError(option + ": " + text + " is less than 1M");
  // 2^62 bytes (4 EiB) is more than any machine holds: a typo, not a limit
  // (before, 1e30 silently meant none).
  if (bytes > 4611686018427387904.0)
    throw UsageError(option + ": " + text + " is more memory than any machine has (say none for no limit)");
  return static_cast<i64>(bytes);
}

void check_memory(const MemoryNeed& need, i64 limit, const std::string& what) {
  if (need.peak() <= limit) return;
  throw InputError(what + " needs about " + gib_text(need.peak()) + " (" + need.parts() +
                   "), more than the memory limit of " + gib_text(limit) + " (--memory-limit)");
}

void release_freed_memory() {
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
}

std::string format_bytes(i64 bytes) {
  static const char* const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 6) v /= 1024.0, ++u;
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(bytes));
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace moonep::tools
