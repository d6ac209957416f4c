// Where moonep-plan's problem comes from, within its memory limit.
#include "problem_source.hpp"

#include <cstdio>
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
  if (o.synthetic()) p.routing = synthetic_routing(p.config, o.imbalance, o.seed);
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
                "synthetic step (lognormal expert popularity, imbalance %.2f, seed %llu)",
                o.imbalance, static_cast<unsigned long long>(o.seed));
  return buf;
}

}  // namespace moonep::tools
