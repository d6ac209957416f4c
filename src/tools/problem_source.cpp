// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Where moonep-plan's problem comes from, within its memory limit.
#include "problem_source.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>

#include "json_scan.hpp"
#include "moonep/error.hpp"
#include "moonep/synthetic.hpp"
#include "text_files.hpp"

namespace moonep::tools {
namespace {

std::string file_name(const std::string& path) { return path == "-" ? std::string("<stdin>") : path; }

Problem read_within(const PlanOptions& o, RunShape& run, std::int64_t limit) {
  // The text may not exceed the limit, and the document built from it
  // (several times its size) is estimated from the text as it is read
  // (io::JsonScan), counted with the text's own buffer before it grows:
  // reading stops as soon as the two together pass the limit, and at the
  // first byte that shows the text is no JSON object (a NUL, UTF-16,
  // nesting deeper than a problem has).
  io::JsonScan scan;
  std::int64_t size = -1;  // a regular file's size
  struct stat st {};
  if (o.input != "-" && ::stat(o.input.c_str(), &st) == 0 && S_ISREG(st.st_mode)) size = st.st_size;
  MemoryNeed reading;
  reading.process = estimate_memory(RunShape{}).process;
  auto check = [&](std::int64_t held) {
    reading.parse = held + scan.parse_memory();
    check_memory(reading, limit,
                 file_name(o.input) + ": reading its " + format_bytes(std::max(size, scan.bytes())) + " of JSON");
  };
  io::ReadWatch watch;
  std::int64_t held = 0;
  watch.grow = [&](std::int64_t bytes) {
    held = bytes;
    check(held);
  };
  watch.piece = [&](std::string_view piece) {
    if (!scan.feed(piece)) return false;
    check(held);
    return true;
  };
  std::string text = io::read_text_file(o.input, "problem file", limit, watch);
  if (!scan.error().empty()) throw InputError(file_name(o.input) + ": " + scan.error());
  run.input_bytes = static_cast<std::int64_t>(text.size());
  run.parse_bytes = scan.parse_memory();
  reading.parse = run.input_bytes + run.parse_bytes;
  check_memory(reading, limit, file_name(o.input) + ": reading its " + format_bytes(run.input_bytes) + " of JSON");
  Problem p = parse_problem_file(text, o.input);
  text = std::string();
  release_freed_memory();  // the JSON document
  return p;
}

}  // namespace

std::int64_t memory_limit_of(const PlanOptions& o, int processes_on_node) {
  return o.memory_limit ? *o.memory_limit : default_memory_limit(processes_on_node);
}

Problem load_problem(const PlanOptions& o, RunShape run, std::int64_t limit, MemoryNeed* need) {
  Problem p;
  if (!o.synthetic()) {
    p = read_within(o, run, limit);
    run.config = p.config;
    run.has_tpe = p.tokens_per_expert.has_value();
  } else {
    p.config = o.config;
    validate(p.config);  // before estimating or allocating anything of its size
    run.config = p.config;
  }
  const MemoryNeed whole = estimate_memory(run);
  check_memory(whole, limit, (o.synthetic() ? "" : file_name(o.input) + ": ") + "planning " + describe(p.config));
  if (need) *need = whole;
  if (o.synthetic()) {
    p.routing = synthetic_routing(p.config, o.imbalance, o.seed);
    if (o.ragged) {
      // s_r from its own stream of the seed; rank r keeps the first s_r of
      // its tokens.
      std::mt19937_64 rng(o.seed ^ 0x9e3779b97f4a7c15ull);
      TokensPerRank tokens(static_cast<std::size_t>(p.config.ranks));
      for (int r = 0; r < p.config.ranks; ++r) {
        tokens[r] = static_cast<std::int32_t>(rng() % (static_cast<std::uint64_t>(p.config.tokens) + 1));
        p.routing[r].resize(static_cast<std::size_t>(tokens[r]) * p.config.topk);
      }
      p.tokens_per_rank = tokens;
    }
  }
  return p;
}

std::string describe_memory(const MemoryNeed& need, std::int64_t limit) {
  return "about " + format_bytes(need.peak()) + " at the peak (estimated; limit " +
         (limit == kNoMemoryLimit ? std::string("none") : format_bytes(limit)) + ")";
}

std::string describe_source(const PlanOptions& o) {
  if (!o.synthetic()) return "problem file " + file_name(o.input);
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "%ssynthetic step (lognormal expert popularity, imbalance %.2f, seed %llu)",
                o.ragged ? "ragged " : "", o.imbalance, static_cast<unsigned long long>(o.seed));
  return buf;
}

RunInfo describe_run(const PlanOptions& o, const MemoryNeed& need, std::int64_t limit) {
  RunInfo run;
  run.source = describe_source(o);
  run.input = o.input;
  run.imbalance = o.imbalance;
  run.seed = o.seed;
  run.world = o.world == World::mpi ? "mpi" : "inprocess";
  run.memory_estimate = need.peak();
  run.memory_limit = limit;
  run.memory = describe_memory(need, limit);
  return run;
}

bool wants_summary(const PlanOptions& o) { return o.synthetic() || o.summary || o.json; }

void print_report(const PlanOptions& o, const PlanSummary& summary, const RunInfo& run) {
  // The plan owns standard output when it is written there.
  std::ostream& out = writes_to_standard_output(o.output) ? std::cerr : std::cout;
  if (o.json) print_summary_json(out, summary, run);
  else print_summary(out, summary, run, o.table);
}

}  // namespace moonep::tools
