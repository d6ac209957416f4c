// moonep/reference.hpp — the reference planner: docs/spec/planning.md steps 1-8
// for all ranks at once, serial and written for clarity. It is the executable
// spec every faster backend is tested against.
#pragma once

#include <cstdint>
#include <string>

#include "moonep/host_plan.hpp"

namespace moonep {

// Plans every rank. If tokens_per_expert is given it must match the routing.
// Throws InputError (nothing else is touched) on bad input.
HostPlan plan_reference(const Config& config, const Routing& routing,
                        const TokensPerExpert* tokens_per_expert = nullptr);

// Validation shared by every backend (docs/spec/planning.md "Bad input"): the
// configuration, then routing[r] (length, expert ids), then the optional
// tokens_per_expert. Throws InputError naming field, rank and index.
void validate_problem(const Config& config, const Routing& routing,
                      const TokensPerExpert* tokens_per_expert = nullptr);
// One rank's part of validate_problem (what an MPI rank can check alone):
// the lengths first (rank_input_length_error), then the expert ids, then
// the counts against the routing.
void validate_rank_input(const Config& config, int rank, const std::int32_t* routing,
                         std::int64_t routing_len, const std::int32_t* tokens_per_expert,
                         std::int64_t tpe_len);
// The first length problem of one rank's input ("" if none): routing[rank]
// must hold tokens*topk ids and, when given, tokens_per_expert[rank] experts
// counts. Device planners check these host facts before any kernel.
std::string rank_input_length_error(const Config& config, int rank, std::int64_t routing_len,
                                    bool has_tokens_per_expert, std::int64_t tpe_len);

}  // namespace moonep
