// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/reference.hpp — the reference planner: docs/spec/planning.md steps 1-8
// for all ranks at once, serial and written for clarity. It is the executable
// spec every faster backend is tested against.
#pragma once

#include <cstdint>
#include <string>

#include "moonep/host_plan.hpp"

namespace moonep {

// Plans every rank. If tokens_per_expert is given it must match the routing.
// tokens_per_rank (R counts s_r in 0..S; absent: every rank holds S) makes
// the step ragged (docs/spec/planning.md "Ragged steps"): routing[r] then
// holds s_r*K ids, rank r receives CAP_r entries and its dst has s_r*K; the
// plan repeats the counts. Throws InputError (nothing else is touched) on
// bad input.
HostPlan plan_reference(const Config& config, const Routing& routing,
                        const TokensPerExpert* tokens_per_expert = nullptr,
                        const TokensPerRank* tokens_per_rank = nullptr);

// Validation shared by every backend (docs/spec/planning.md "Bad input"): the
// configuration, then tokens_per_rank's length, then per rank its count s_r,
// routing[r] (length s_r*K, expert ids) and the optional
// tokens_per_expert[r]. Throws InputError naming field, rank and index.
void validate_problem(const Config& config, const Routing& routing,
                      const TokensPerExpert* tokens_per_expert = nullptr,
                      const TokensPerRank* tokens_per_rank = nullptr);
// One rank's part of validate_problem (what an MPI rank can check alone):
// its token count (`tokens` = s_r; S when omitted), the lengths
// (rank_input_length_error), then the expert ids, then the counts against
// the routing.
void validate_rank_input(const Config& config, int rank, const std::int32_t* routing,
                         std::int64_t routing_len, const std::int32_t* tokens_per_expert,
                         std::int64_t tpe_len);
void validate_rank_input(const Config& config, int rank, const std::int32_t* routing,
                         std::int64_t routing_len, const std::int32_t* tokens_per_expert,
                         std::int64_t tpe_len, int tokens);
// tokens_per_rank alone: R counts, each in 0..S (InputError naming the
// field, and the rank of the first bad count).
void validate_tokens_per_rank(const Config& config, const TokensPerRank& tokens_per_rank);
// "" when s_r = `tokens` is a token count of rank `rank` (0..S), else the
// message, naming tokens_per_rank[rank].
std::string rank_tokens_error(const Config& config, int rank, std::int64_t tokens);
// The first length problem of one rank's input ("" if none): routing[rank]
// must hold tokens*topk ids (tokens_per_rank[rank]*topk with `tokens` =
// s_r given) and, when given, tokens_per_expert[rank] experts counts.
// Device planners check these host facts before any kernel.
std::string rank_input_length_error(const Config& config, int rank, std::int64_t routing_len,
                                    bool has_tokens_per_expert, std::int64_t tpe_len);
std::string rank_input_length_error(const Config& config, int rank, std::int64_t routing_len,
                                    bool has_tokens_per_expert, std::int64_t tpe_len, int tokens);

}  // namespace moonep
