// Where moonep-plan's problem comes from, within its memory limit.
#include "problem_source.hpp"

#include <cstdio>
#include <iostream>
#include <random>
#include <string>

#include "moonep/error.hpp"
#include "moonep/synthetic.hpp"

namespace moonep::tools {
namespace {

std::string file_name(const std::string& path) { return path == "-" ? std::string("<stdin>") : path; }

Problem read_within(const PlanOptions& o, RunShape& run, std::int64_t limit) {
  // The text may not exceed the limit, and the document built from it
  // (several times its size) is estimated from the text before it exists.
  std::string text = read_file_text(o.input, "problem file", limit);
  run.input_bytes = static_cast<std::int64_t>(text.size());
  run.parse_bytes = problem_parse_memory(text);
  MemoryNeed reading;
  reading.process = estimate_memory(RunShape{}).process;
  reading.parse = run.input_bytes + run.parse_bytes;
  check_memory(reading, limit,
               file_name(o.input) + ": reading its " + format_bytes(run.input_bytes) + " of JSON");
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
