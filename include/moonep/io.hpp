// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/io.hpp — the interchange formats of docs/spec/formats.md: the problem
// file (a configuration, a routing and optionally tokens_per_expert) and the
// plan file (one HostPlan). Readers reject anything malformed with one
// InputError line naming the field, rank and index; writers never leave a
// partial file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "moonep/config.hpp"
#include "moonep/host_plan.hpp"

namespace moonep {

// One planning problem as stored in a problem file.
struct Problem {
  Config config;
  Routing routing;  // routing[r]: tokens_per_rank[r]*topk ids when given, else tokens*topk
  std::optional<TokensPerExpert> tokens_per_expert;
  // A ragged step (docs/spec/planning.md "Ragged steps"): R counts in
  // 0..tokens. Absent: every rank holds `tokens` tokens.
  std::optional<TokensPerRank> tokens_per_rank;
};

// Parses and fully validates a problem (JSON types and ranges, then every
// docs/spec/planning.md "Bad input" rule through validate_problem). Unknown
// fields are ignored so that the format can grow. Throws InputError.
Problem parse_problem(const std::string& json_text);
// Reads and parses a problem file; an unreadable file is an InputError too.
Problem read_problem_file(const std::string& path);

// The same in steps, for a caller that keeps to a memory budget
// (moonep-plan --memory-limit): the file's bytes ("-" = standard input),
// refused with an InputError naming both sizes when longer than max_bytes
// (>= 0; a regular file before a byte is read, a pipe or device such as
// /dev/zero without reading far past the limit); the bytes parsing that text
// holds at its peak besides the text (nlohmann's JSON document, some 16-24
// bytes a value, and the parsed arrays; one pass over the text, nothing
// allocated); and parse_problem with the file's name on its errors.
std::string read_file_text(const std::string& path, const char* what, std::int64_t max_bytes = -1);
std::int64_t problem_parse_memory(std::string_view text);
Problem parse_problem_file(const std::string& text, const std::string& path);

// Problem file text (compact, one rank's routing per line).
std::string problem_to_json(const Problem& problem);
void write_problem_file(const Problem& problem, const std::string& path);

// Plan file text of docs/spec/formats.md: compact, one rank's plan per line;
// a ragged plan (HostPlan::tokens_per_rank) repeats its tokens_per_rank and
// each rank's dst holds tokens_per_rank[r]*topk entries.
std::string plan_to_json(const HostPlan& plan);
// Parses a plan file and checks every array has the shape its configuration
// implies (it does not re-plan). Throws InputError.
HostPlan parse_plan(const std::string& json_text);
HostPlan read_plan_file(const std::string& path);

// Writes the plan file where `path` leads (docs/cli.md, "Output paths"):
//  * a regular file (existing or not, also behind symlinks): a temporary
//    file in the final file's directory, renamed over it once complete, so
//    a failure (RuntimeError) leaves no partial file and an existing file
//    untouched; symlinks stay, their target is replaced;
//  * a character device or a FIFO (/dev/null, /dev/full, a named pipe with
//    a reader): written through in place, the node never replaced; a FIFO
//    without a reader, a full device: RuntimeError;
//  * "-", /dev/stdout, /dev/stderr, /dev/fd/N: that descriptor;
//  * a directory, block device or socket: RuntimeError, nothing written.
void write_plan_file(const HostPlan& plan, const std::string& path);

// True when an output path writes to standard output ("-", /dev/stdout,
// /dev/fd/1), so that a tool can send its other output elsewhere.
bool writes_to_standard_output(const std::string& path);

}  // namespace moonep
