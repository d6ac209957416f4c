// Private to moonep-plan: the human summary of one planned step.
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
};

// Before: per owner rank, the routed entries naming its experts. After and
// the rest: read off the plan.
PlanSummary summarize(const HostPlan& plan, const Routing& routing);

// max/mean of a load vector (0 when the mean is 0).
double max_over_mean(const std::vector<std::int64_t>& load);

// Median of step times, in microseconds.
double median_us(std::vector<double> seconds);

// Prints the summary. `source` says where the problem came from, `timing`
// is the "time per step" line's text, empty to leave it out.
void print_summary(std::ostream& out, const PlanSummary& s, const std::string& source,
                   const std::string& timing);

}  // namespace moonep::tools
