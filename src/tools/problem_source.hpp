// Private to moonep-plan: the problem to plan, from a file or synthetic.
#pragma once

#include <string>

#include "moonep/io.hpp"
#include "plan_options.hpp"

namespace moonep::tools {

// Reads --input, or validates the synthetic configuration and generates its
// routing. Throws InputError; nothing is written.
Problem load_problem(const PlanOptions& options);

// Throws RuntimeError when planning this configuration in one process
// would need more memory than the machine has (the kernel would otherwise
// kill the process half-way, which is no way to report a too-large problem).
void check_fits_in_memory(const Config& config);

// "problem file plan.json" or "synthetic step (lognormal expert popularity,
// imbalance 1.00, seed 1)".
std::string describe_source(const PlanOptions& options);

}  // namespace moonep::tools
