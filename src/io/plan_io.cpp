// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The plan file of docs/spec/formats.md: writing (one rank's plan per line)
// and reading back with a check of every array's shape.
#include <string>

#include "json_reader.hpp"
#include "json_writer.hpp"
#include "moonep/error.hpp"
#include "moonep/io.hpp"
#include "moonep/reference.hpp"
#include "output_file.hpp"
#include "file_texts.hpp"
#include "text_files.hpp"

namespace moonep {
namespace {

void expect_length(const std::vector<std::int32_t>& v, std::size_t want, const std::string& path,
                   const std::string& rule) {
  if (v.size() != want) {
    throw InputError(path + " has " + std::to_string(v.size()) + " values, expected " + rule +
                     " = " + std::to_string(want));
  }
}

// Every array of every rank has the shape the configuration implies; the
// dup arrays hold exactly the prefixes dup_counts announces.
void check_plan_shapes(const HostPlan& plan) {
  const Config& c = plan.config;
  validate(c);
  const std::size_t R = c.ranks;
  if (plan.ranks.size() != R) {
    throw InputError("plans has " + std::to_string(plan.ranks.size()) +
                     " rank plans, expected ranks = " + std::to_string(R));
  }
  if (plan.tokens_per_rank) validate_tokens_per_rank(c, *plan.tokens_per_rank);
  for (std::size_t r = 0; r < R; ++r) {
    const HostRankPlan& p = plan.ranks[r];
    const std::string at = io::index_path("plans", r) + ".";
    // The whole fields first: dup_counts must be known before the
    // prefixed fields' lengths are. dst holds a ragged rank's s_r*K.
    for (std::size_t i = 0; i < impl::kPlanFieldCount; ++i) {
      const impl::PlanField& f = impl::kPlanFields[i];
      if (f.held != impl::FieldHeld::whole) continue;
      if (f.rows == impl::FieldRows::entries && plan.tokens_per_rank) {
        const std::int32_t s = (*plan.tokens_per_rank)[r];
        expect_length(p.*impl::kHostPlanMembers[i], static_cast<std::size_t>(s) * c.topk * field_columns(f, c),
                      at + f.name, io::index_path("tokens_per_rank", r) + "*topk = " + std::to_string(s) + "*" +
                                       std::to_string(c.topk));
        continue;
      }
      expect_length(p.*impl::kHostPlanMembers[i], static_cast<std::size_t>(impl::field_capacity(f, c)),
                    at + f.name, impl::field_length_rule(f));
    }
    if (p.dup_counts[0] < 0 || p.dup_counts[1] < 0)
      throw InputError(at + "dup_counts holds a negative count");
    for (std::size_t i = 0; i < impl::kPlanFieldCount; ++i) {
      const impl::PlanField& f = impl::kPlanFields[i];
      if (f.held == impl::FieldHeld::whole) continue;
      expect_length(p.*impl::kHostPlanMembers[i],
                    static_cast<std::size_t>(impl::field_prefix_values(f, p.dup_counts[0], p.dup_counts[1])),
                    at + f.name, impl::field_length_rule(f));
    }
  }
}

// Rows of `cols` values flattened row-major; every row must have `cols`.
std::vector<std::int32_t> flat_rows(const io::Json& value, const std::string& path,
                                    std::size_t cols, const char* expected_row) {
  const auto rows = io::to_int32_matrix(value, path, "an array of arrays of integers",
                                        expected_row, "an integer");
  std::vector<std::int32_t> flat;
  flat.reserve(rows.size() * cols);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].size() != cols) {
      throw InputError(io::index_path(path, i) + " has " + std::to_string(rows[i].size()) +
                       " values, expected " + std::to_string(cols));
    }
    flat.insert(flat.end(), rows[i].begin(), rows[i].end());
  }
  return flat;
}

std::vector<std::int32_t> int_array_field(const io::Json& obj, const char* key,
                                          const std::string& path) {
  return io::to_int32_array(io::require_field(obj, key, path), io::field_path(path, key),
                            "an array of integers", "an integer");
}

HostRankPlan parse_rank_plan(const io::Json& obj, const std::string& path, const Config& c,
                             std::size_t rank) {
  io::require_object(obj, path);
  const std::int32_t declared = io::int32_field(obj, "rank", path);
  if (declared < 0 || static_cast<std::size_t>(declared) != rank) {
    throw InputError(path + ".rank: got " + std::to_string(declared) + ", expected " +
                     std::to_string(rank) + " (plans are stored in rank order)");
  }
  HostRankPlan p;
  for (std::size_t i = 0; i < impl::kPlanFieldCount; ++i) {
    const impl::PlanField& f = impl::kPlanFields[i];
    if (f.shape == impl::FieldShape::list) {
      p.*impl::kHostPlanMembers[i] = int_array_field(obj, f.name, path);
    } else {
      p.*impl::kHostPlanMembers[i] =
          flat_rows(io::require_field(obj, f.name, path), io::field_path(path, f.name),
                    static_cast<std::size_t>(impl::field_columns(f, c)), f.row_text);
    }
  }
  return p;
}

// The plan file's text, one rank per line, into `out` (whose shapes
// check_plan_shapes has accepted).
void write_plan_json(const HostPlan& plan, io::TextOut& out) {
  const Config& c = plan.config;
  out += "{";
  io::append_config_fields(out, c);
  if (plan.tokens_per_rank) {
    out += ",\"tokens_per_rank\":";
    io::append_int_array(out, *plan.tokens_per_rank);
  }
  out += ",\"slots\":";
  io::append_int(out, c.slots());
  out += ",\"plans\":[";
  for (std::size_t r = 0; r < plan.ranks.size(); ++r) {
    const HostRankPlan& p = plan.ranks[r];
    out += r ? ",\n{\"rank\":" : "\n{\"rank\":";
    io::append_int(out, static_cast<std::int64_t>(r));
    for (std::size_t i = 0; i < impl::kPlanFieldCount; ++i) {
      const impl::PlanField& f = impl::kPlanFields[i];
      out += ",\"";
      out += f.name;
      out += "\":";
      if (f.shape == impl::FieldShape::list)
        io::append_int_array(out, p.*impl::kHostPlanMembers[i]);
      else
        io::append_int_rows(out, p.*impl::kHostPlanMembers[i], static_cast<std::size_t>(impl::field_columns(f, c)));
    }
    out += "}";
  }
  out += "\n]}\n";
}

}  // namespace

std::string plan_to_json(const HostPlan& plan) {
  check_plan_shapes(plan);
  io::TextOut out;
  write_plan_json(plan, out);
  return out.take();
}

HostPlan parse_plan(const std::string& json_text) {
  const io::Json doc = io::parse_json(json_text);
  io::require_object(doc, "");
  HostPlan plan;
  plan.config = io::config_fields(doc, "");
  validate(plan.config);
  const std::int32_t slots = io::int32_field(doc, "slots", "");
  if (slots != plan.config.slots()) {
    throw InputError("slots: got " + std::to_string(slots) + ", expected " +
                     std::to_string(plan.config.slots()) + " for " + describe(plan.config));
  }
  const auto tokens = doc.find("tokens_per_rank");
  if (tokens != doc.end() && !tokens->is_null()) {
    plan.tokens_per_rank = io::to_int32_array(*tokens, "tokens_per_rank", "an array with one token count per rank",
                                              "an integer token count");
    validate_tokens_per_rank(plan.config, *plan.tokens_per_rank);
  }
  const io::Json& plans = io::require_field(doc, "plans", "");
  if (!plans.is_array())
    throw InputError("plans: expected an array of rank plans, got " + io::describe_value(plans));
  if (plans.size() != static_cast<std::size_t>(plan.config.ranks)) {
    throw InputError("plans has " + std::to_string(plans.size()) +
                     " rank plans, expected ranks = " + std::to_string(plan.config.ranks));
  }
  for (std::size_t r = 0; r < plans.size(); ++r)
    plan.ranks.push_back(parse_rank_plan(plans[r], io::index_path("plans", r), plan.config, r));
  check_plan_shapes(plan);
  return plan;
}

HostPlan read_plan_file(const std::string& path) {
  const std::string text = io::read_text_file(path, "plan file");
  return io::with_file_context(path, [&] { return parse_plan(text); });
}

bool writes_to_standard_output(const std::string& path) { return io::names_standard_output(path); }

io::Produce io::plan_text(const HostPlan& plan) {
  check_plan_shapes(plan);  // before anything is opened or written
  return [&plan](const io::TextOut::Sink& sink) {
    io::TextOut out(sink);
    write_plan_json(plan, out);
    out.flush();
  };
}

void write_plan_file(const HostPlan& plan, const std::string& path) {
  io::write_output(path, "plan file", io::plan_text(plan));
}

}  // namespace moonep
