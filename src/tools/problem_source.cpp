// Where moonep-plan's problem comes from.
#include "problem_source.hpp"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "moonep/error.hpp"

#include "moonep/synthetic.hpp"

namespace moonep::tools {

Problem load_problem(const PlanOptions& o) {
  if (!o.synthetic()) return read_problem_file(o.input);
  Problem p;
  p.config = o.config;
  validate(p.config);  // before allocating a routing of the requested size
  check_fits_in_memory(p.config);
  p.routing = synthetic_routing(p.config, o.imbalance, o.seed);
  return p;
}

void check_fits_in_memory(const Config& c) {
  const double R = c.ranks, N = static_cast<double>(c.entries()), E = c.experts,
               B = c.copy_slots, NvS = static_cast<double>(c.slots());
  // Bytes, generously: the routing three times (problem, planner, staging),
  // every plan array twice (planner and result), and [R][E] 64-bit tables
  // of the planners' bookkeeping.
  const double routing = 3 * R * N * 4;
  const double plans = 2 * R * (N + NvS * 3 + 3 * (E + B) + R * B + 4) * 4;
  const double tables = 8 * R * E * 8;
  const double need = routing + plans + tables;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return;  // unknown: let the allocator decide
  const double have = static_cast<double>(pages) * static_cast<double>(page);
  if (need > 0.8 * have) {
    char msg[256];
    std::snprintf(msg, sizeof msg,
                  "%s needs about %.1f GiB to plan in one process, more than this machine's "
                  "%.1f GiB allows",
                  describe(c).c_str(), need / (1 << 30), have / (1 << 30));
    throw RuntimeError(msg);
  }
}

std::string describe_source(const PlanOptions& o) {
  if (!o.synthetic()) return "problem file " + (o.input == "-" ? std::string("<stdin>") : o.input);
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "synthetic step (lognormal expert popularity, imbalance %.2f, seed %llu)",
                o.imbalance, static_cast<unsigned long long>(o.seed));
  return buf;
}

}  // namespace moonep::tools
