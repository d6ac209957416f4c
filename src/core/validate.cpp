// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Input checks shared by every backend (docs/spec/planning.md "Bad input").
// They run before any planner touches shared state.
#include <sstream>
#include <string>
#include <vector>

#include "moonep/error.hpp"
#include "moonep/reference.hpp"

namespace moonep {

std::string rank_tokens_error(const Config& c, int rank, std::int64_t tokens) {
  if (tokens >= 0 && tokens <= c.tokens) return {};
  std::ostringstream m;
  m << "tokens_per_rank[" << rank << "] = " << tokens << " is outside 0..tokens = 0.." << c.tokens;
  return m.str();
}

std::string rank_input_length_error(const Config& c, int rank, std::int64_t routing_len, bool has_tpe,
                                    std::int64_t tpe_len) {
  return rank_input_length_error(c, rank, routing_len, has_tpe, tpe_len, c.tokens);
}

std::string rank_input_length_error(const Config& c, int rank, std::int64_t routing_len, bool has_tpe,
                                    std::int64_t tpe_len, int tokens) {
  std::ostringstream m;
  const std::int64_t want = static_cast<std::int64_t>(tokens) * c.topk;
  if (routing_len != want) {
    // A full step keeps the words it always had.
    m << "routing[" << rank << "] has " << routing_len << " entries, expected "
      << (tokens == c.tokens ? "tokens*topk = " : "tokens_per_rank[" + std::to_string(rank) + "]*topk = ")
      << tokens << "*" << c.topk << " = " << want;
  } else if (has_tpe && tpe_len != c.experts) {
    m << "tokens_per_expert[" << rank << "] has " << tpe_len << " counts, expected experts = "
      << c.experts;
  }
  return m.str();
}

void validate_rank_input(const Config& c, int rank, const std::int32_t* routing,
                         std::int64_t routing_len, const std::int32_t* tpe,
                         std::int64_t tpe_len) {
  validate_rank_input(c, rank, routing, routing_len, tpe, tpe_len, c.tokens);
}

void validate_rank_input(const Config& c, int rank, const std::int32_t* routing,
                         std::int64_t routing_len, const std::int32_t* tpe,
                         std::int64_t tpe_len, int tokens) {
  const std::string count = rank_tokens_error(c, rank, tokens);
  if (!count.empty()) throw InputError(count);
  const std::string length = rank_input_length_error(c, rank, routing_len, tpe != nullptr, tpe_len, tokens);
  if (!length.empty()) throw InputError(length);
  std::ostringstream m;
  std::vector<std::int64_t> counts(tpe ? c.experts : 0, 0);
  for (std::int64_t i = 0; i < routing_len; ++i) {
    const std::int32_t e = routing[i];
    if (e < 0 || e >= c.experts) {
      m << "routing[" << rank << "][" << i << "] = " << e << " is not an expert id in [0, "
        << c.experts << ")";
      throw InputError(m.str());
    }
    if (tpe) ++counts[e];
  }
  if (!tpe) return;
  for (int e = 0; e < c.experts; ++e) {
    if (tpe[e] != counts[e]) {
      m << "tokens_per_expert[" << rank << "][" << e << "] = " << tpe[e] << " but routing["
        << rank << "] names expert " << e << " " << counts[e] << " times";
      throw InputError(m.str());
    }
  }
}

void validate_tokens_per_rank(const Config& c, const TokensPerRank& tokens) {
  if (static_cast<int>(tokens.size()) != c.ranks) {
    throw InputError("tokens_per_rank has " + std::to_string(tokens.size()) + " counts, expected ranks = " +
                     std::to_string(c.ranks));
  }
  for (int r = 0; r < c.ranks; ++r) {
    const std::string why = rank_tokens_error(c, r, tokens[r]);
    if (!why.empty()) throw InputError(why);
  }
}

void validate_problem(const Config& c, const Routing& routing, const TokensPerExpert* tpe,
                      const TokensPerRank* tokens_per_rank) {
  validate(c);
  std::ostringstream m;
  if (static_cast<int>(routing.size()) != c.ranks) {
    m << "routing has " << routing.size() << " rank arrays, expected ranks = " << c.ranks;
    throw InputError(m.str());
  }
  if (tpe && static_cast<int>(tpe->size()) != c.ranks) {
    m << "tokens_per_expert has " << tpe->size() << " rank arrays, expected ranks = " << c.ranks;
    throw InputError(m.str());
  }
  if (tokens_per_rank) validate_tokens_per_rank(c, *tokens_per_rank);
  for (int r = 0; r < c.ranks; ++r) {
    const auto& row = routing[r];
    validate_rank_input(c, r, row.data(), static_cast<std::int64_t>(row.size()),
                        tpe ? (*tpe)[r].data() : nullptr,
                        tpe ? static_cast<std::int64_t>((*tpe)[r].size()) : 0,
                        tokens_per_rank ? (*tokens_per_rank)[r] : c.tokens);
  }
}

}  // namespace moonep
