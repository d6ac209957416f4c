// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The problem file of docs/spec/formats.md: reading (with every check of
// docs/spec/planning.md "Bad input") and writing.
#include <string>

#include "json_reader.hpp"
#include "json_writer.hpp"
#include "moonep/io.hpp"
#include "moonep/reference.hpp"
#include "file_texts.hpp"
#include "text_files.hpp"

namespace moonep {

Problem parse_problem(const std::string& json_text) {
  const io::Json doc = io::parse_json(json_text);
  io::require_object(doc, "");
  Problem p;
  p.config = io::config_fields(doc, "");
  validate(p.config);  // the cheap checks first, before any array is converted
  p.routing = io::to_int32_matrix(io::require_field(doc, "routing", ""), "routing",
                                  "an array with one array of expert ids per rank",
                                  "an array of expert ids", "an integer expert id");
  // Optional; null is read as absent, as tools often write a missing value.
  const auto tpe = doc.find("tokens_per_expert");
  if (tpe != doc.end() && !tpe->is_null()) {
    p.tokens_per_expert = io::to_int32_matrix(*tpe, "tokens_per_expert",
                                              "an array with one array of counts per rank",
                                              "an array of counts", "an integer count");
  }
  const auto tokens = doc.find("tokens_per_rank");
  if (tokens != doc.end() && !tokens->is_null()) {
    p.tokens_per_rank = io::to_int32_array(*tokens, "tokens_per_rank", "an array with one token count per rank",
                                           "an integer token count");
  }
  validate_problem(p.config, p.routing, p.tokens_per_expert ? &*p.tokens_per_expert : nullptr,
                   p.tokens_per_rank ? &*p.tokens_per_rank : nullptr);
  return p;
}

Problem parse_problem_file(const std::string& text, const std::string& path) {
  return io::with_file_context(path, [&] { return parse_problem(text); });
}

Problem read_problem_file(const std::string& path) {
  return parse_problem_file(io::read_text_file(path, "problem file"), path);
}

std::string read_file_text(const std::string& path, const char* what, std::int64_t max_bytes) {
  return io::read_text_file(path, what, max_bytes);
}

namespace {

void write_problem_json(const Problem& p, io::TextOut& out) {
  out += "{";
  io::append_config_fields(out, p.config);
  if (p.tokens_per_rank) {
    out += ",\n\"tokens_per_rank\":";
    io::append_int_array(out, *p.tokens_per_rank);
  }
  out += ",\n\"routing\":[";
  for (std::size_t r = 0; r < p.routing.size(); ++r) {
    out += r ? ",\n" : "\n";
    io::append_int_array(out, p.routing[r]);
  }
  out += "]";
  if (p.tokens_per_expert) {
    out += ",\n\"tokens_per_expert\":[";
    for (std::size_t r = 0; r < p.tokens_per_expert->size(); ++r) {
      out += r ? ",\n" : "\n";
      io::append_int_array(out, (*p.tokens_per_expert)[r]);
    }
    out += "]";
  }
  out += "}\n";
}

}  // namespace

std::string problem_to_json(const Problem& p) {
  io::TextOut out;
  write_problem_json(p, out);
  return out.take();
}

io::Produce io::problem_text(const Problem& p) {
  return [&p](const io::TextOut::Sink& sink) {
    io::TextOut out(sink);
    write_problem_json(p, out);
    out.flush();
  };
}

void write_problem_file(const Problem& p, const std::string& path) {
  io::write_output(path, "problem file", io::problem_text(p));
}

}  // namespace moonep
