// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The file formats of docs/spec/formats.md: good problems parse, plans
// round-trip exactly, every malformed or invalid input is one InputError line
// naming the place, and writes are all-or-nothing.
#include "catch2_compat.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "moonep/error.hpp"
#include "moonep/impl/plan_fields.hpp"
#include "moonep/io.hpp"
#include "moonep/reference.hpp"
#include "moonep/synthetic.hpp"

namespace fs = std::filesystem;
using moonep::InputError;

namespace {

// A valid problem: R=2 E=4 K=2 S=2 B=1 tp=2. Each field is raw JSON text;
// tests replace or drop ("<omit>") fields to make it invalid.
std::map<std::string, std::string> good_fields() {
  return {{"ranks", "2"},         {"experts", "4"},       {"topk", "2"},
          {"tokens", "2"},        {"copy_slots", "1"},    {"token_padding", "2"},
          {"routing", "[[0, 1, 2, 3], [3, 3, 1, 0]]"}};
}

std::string problem_text(const std::map<std::string, std::string>& fields) {
  static const char* const order[] = {"ranks",  "experts",       "topk",    "tokens",
                                      "copy_slots", "token_padding", "routing", "tokens_per_expert",
                                      "tokens_per_rank"};
  std::string out = "{";
  for (const char* key : order) {
    const auto it = fields.find(key);
    if (it == fields.end() || it->second == "<omit>") continue;
    if (out.size() > 1) out += ", ";
    out += "\"" + std::string(key) + "\": " + it->second;
  }
  return out + "}";
}

std::string with(const std::string& key, const std::string& value) {
  auto f = good_fields();
  f[key] = value;
  return problem_text(f);
}

// The InputError message of parsing `text`, or "" if it parsed.
std::string parse_error(const std::string& text) {
  try {
    moonep::parse_problem(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// `text` with the first `from` replaced by `to` (which must be there).
std::string replaced_in(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

std::string plan_parse_error(const std::string& text) {
  try {
    moonep::parse_plan(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() /
           ("moonep_test_io_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("a good problem parses into its configuration and routing") {
  const auto p = moonep::parse_problem(problem_text(good_fields()));
  CHECK(p.config.ranks == 2);
  CHECK(p.config.experts == 4);
  CHECK(p.config.topk == 2);
  CHECK(p.config.tokens == 2);
  CHECK(p.config.copy_slots == 1);
  CHECK(p.config.token_padding == 2);
  CHECK(p.routing == moonep::Routing{{0, 1, 2, 3}, {3, 3, 1, 0}});
  CHECK_FALSE(p.tokens_per_expert.has_value());
}

TEST_CASE("tokens_per_expert is read when present and matching, ignored when null") {
  const auto p = moonep::parse_problem(with("tokens_per_expert", "[[1,1,1,1],[1,1,0,2]]"));
  REQUIRE(p.tokens_per_expert.has_value());
  CHECK(*p.tokens_per_expert == moonep::TokensPerExpert{{1, 1, 1, 1}, {1, 1, 0, 2}});
  CHECK_FALSE(moonep::parse_problem(with("tokens_per_expert", "null")).tokens_per_expert);
}

TEST_CASE("unknown fields are ignored so the format can grow") {
  std::string text = problem_text(good_fields());
  text.insert(1, "\"comment\": {\"made by\": [\"a tool\"]}, \"version\": 2, ");
  CHECK(moonep::parse_problem(text).routing.size() == 2);
}

TEST_CASE("problem files round-trip through problem_to_json") {
  moonep::Problem p;
  p.config = {4, 32, 4, 64, 2, 8};
  p.routing = moonep::synthetic_routing(p.config, 1.5, 3);
  p.tokens_per_expert = moonep::count_tokens_per_expert(p.config, p.routing);
  const auto back = moonep::parse_problem(moonep::problem_to_json(p));
  CHECK(moonep::describe(back.config) == moonep::describe(p.config));
  CHECK(back.routing == p.routing);
  CHECK(back.tokens_per_expert == p.tokens_per_expert);
}

TEST_CASE("malformed JSON is reported with its byte offset") {
  const std::string good = problem_text(good_fields());
  for (const std::string& text :
       {std::string(""), good.substr(0, good.size() / 2), good.substr(0, good.size() - 1),
        std::string("{\"ranks\": 2,}"), std::string("hello"), good + " x",
        std::string("{\"ranks\": 2 \"experts\": 4}")}) {
    CAPTURE(text);
    const std::string msg = parse_error(text);
    CHECK(msg.find("invalid JSON at byte ") != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
  // The offset points at the failure: the stray comma's closing brace.
  CHECK(parse_error("{\"ranks\": 2,}").find("at byte 13") != std::string::npos);
}

TEST_CASE("every bad problem is one InputError line naming the field, rank and index") {
  struct Case {
    std::string text, expected;
  };
  const std::vector<Case> cases = {
      {"[1, 2]", "top level: expected an object, got an array of 2 values"},
      {"{\"ranks\": 2, \"ranks\": 3}", "key \"ranks\" appears twice"},
      // missing fields
      {with("ranks", "<omit>"), "missing required field \"ranks\""},
      {with("experts", "<omit>"), "missing required field \"experts\""},
      {with("topk", "<omit>"), "missing required field \"topk\""},
      {with("tokens", "<omit>"), "missing required field \"tokens\""},
      {with("copy_slots", "<omit>"), "missing required field \"copy_slots\""},
      {with("token_padding", "<omit>"), "missing required field \"token_padding\""},
      {with("routing", "<omit>"), "missing required field \"routing\""},
      // wrong JSON types and ranges of the configuration
      {with("ranks", "\"2\""), "ranks: expected an integer, got \"2\""},
      {with("ranks", "2.5"), "ranks: expected an integer, got 2.5"},
      {with("ranks", "2.0"), "ranks: expected an integer, got 2.0"},
      {with("experts", "true"), "experts: expected an integer, got true"},
      {with("topk", "null"), "topk: expected an integer, got null"},
      {with("tokens", "[2]"), "tokens: expected an integer, got an array of 1 values"},
      {with("ranks", "4294967298"), "ranks: 4294967298 does not fit in a 32-bit integer"},
      {with("tokens", "-2147483649"), "tokens: -2147483649 does not fit in a 32-bit integer"},
      {with("copy_slots", "1e30"), "copy_slots: expected an integer"},
      // the routing's structure and types
      {with("routing", "\"x\""), "routing: expected an array with one array of expert ids per rank"},
      {with("routing", "[0, 1]"), "routing[0]: expected an array of expert ids, got 0"},
      {with("routing", "[[0, 1, 2, 3], {}]"), "routing[1]: expected an array of expert ids, got an object"},
      {with("routing", "[[0, 1, 2, 3], [3, 3, \"x\", 0]]"),
       "routing[1][2]: expected an integer expert id, got \"x\""},
      {with("routing", "[[0, 1, 2, 3], [3, 3, 1.5, 0]]"),
       "routing[1][2]: expected an integer expert id, got 1.5"},
      {with("routing", "[[0, 1, 2, 3], [3, 3, 1, null]]"),
       "routing[1][3]: expected an integer expert id, got null"},
      {with("routing", "[[0, 1, 2, 3], [3, 3, 1, 9999999999]]"),
       "routing[1][3]: 9999999999 does not fit in a 32-bit integer"},
      // docs/spec/planning.md "Bad input", one by one
      {with("routing", "[[0, 1, 2, 4], [3, 3, 1, 0]]"), "routing[0][3] = 4 is not an expert id in [0, 4)"},
      {with("routing", "[[0, 1, 2, 3], [-1, 3, 1, 0]]"), "routing[1][0] = -1 is not an expert id in [0, 4)"},
      {with("experts", "5"), "experts (5) must be a multiple of ranks (2)"},
      {with("copy_slots", "0"), "copy_slots must be >= 1, got 0"},
      {with("copy_slots", "-3"), "copy_slots must be >= 1, got -3"},
      {with("topk", "0"), "topk must be in 1..32, got 0"},
      {with("topk", "33"), "topk must be in 1..32, got 33"},
      {with("ranks", "0"), "ranks must be in 1..128, got 0"},
      {with("ranks", "-1"), "ranks must be in 1..128, got -1"},
      {with("ranks", "129"), "ranks must be in 1..128, got 129"},
      {with("token_padding", "0"), "token_padding must be >= 1, got 0"},
      {with("tokens", "0"), "tokens must be >= 1, got 0"},
      {with("routing", "[[0, 1, 2, 3], [3, 3, 1]]"), "routing[1] has 3 entries, expected tokens*topk = 2*2 = 4"},
      {with("routing", "[[0, 1, 2, 3]]"), "routing has 1 rank arrays, expected ranks = 2"},
      {with("routing", "[[0, 1, 2, 3], [3, 3, 1, 0], [0, 0, 0, 0]]"), "routing has 3 rank arrays"},
      {problem_text({{"ranks", "128"}, {"experts", "128"}, {"topk", "32"}, {"tokens", "1000000"},
                     {"copy_slots", "1"}, {"token_padding", "1"}, {"routing", "[]"}}),
       "exceeds int32"},
      // tokens_per_expert that does not match the routing
      {with("tokens_per_expert", "[[1,1,1,1],[1,1,0,1]]"),
       "tokens_per_expert[1][3] = 1 but routing[1] names expert 3 2 times"},
      {with("tokens_per_expert", "[[1,1,1,1],[1,1,0]]"),
       "tokens_per_expert[1] has 3 counts, expected experts = 4"},
      {with("tokens_per_expert", "[[1,1,1,1]]"), "tokens_per_expert has 1 rank arrays, expected ranks = 2"},
      {with("tokens_per_expert", "[[1,1,1,1],[1,\"1\",0,2]]"),
       "tokens_per_expert[1][1]: expected an integer count, got \"1\""},
      {with("tokens_per_expert", "7"), "tokens_per_expert: expected an array with one array of counts per rank"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const std::string msg = parse_error(c.text);
    CAPTURE(msg);
    CHECK(msg.find(c.expected) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
}

TEST_CASE("plan JSON of a hand-planned problem is exactly docs/spec/formats.md") {
  // R=1 E=2 K=2 S=1 B=1 tp=4, the token names expert 1 twice.
  // NvS = round_up(2 + 2*2*3, 4) = 16. Expert 1's group holds 2 entries
  // padded to 4: cu_seqlens (0, 4, 4), zero fill (2, 2) in group 1. The
  // second entry goes to the same rank: dst -(1)-1 = -2, a dup of slot 0.
  moonep::Config c{1, 2, 2, 1, 1, 4};
  const auto plan = moonep::plan_reference(c, {{1, 1}});
  const std::string expected =
      "{\"ranks\":1,\"experts\":2,\"topk\":2,\"tokens\":1,\"copy_slots\":1,\"token_padding\":4,"
      "\"slots\":16,\"plans\":[\n"
      "{\"rank\":0,\"dst\":[0,-2],\"cu_seqlens\":[0,4,4],\"zero_fill_ranges\":[[0,0],[2,2],[0,0]],"
      "\"experts_to_copy\":[[-1]],\"remote_stats\":[0,0],"
      "\"src_info\":[0,1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1],"
      "\"dup_groups\":[[0,0,1]],\"dup_loffs\":[1],\"dup_counts\":[1,1]}\n"
      "]}\n";
  CHECK(moonep::plan_to_json(plan) == expected);
}

TEST_CASE("plans round-trip through plan_to_json and parse_plan, one rank per line") {
  moonep::Config c{4, 32, 4, 128, 2, 8};
  const auto routing = moonep::synthetic_routing(c, 2.0, 11);
  const auto plan = moonep::plan_reference(c, routing);
  const std::string text = moonep::plan_to_json(plan);
  CHECK(std::count(text.begin(), text.end(), '\n') == c.ranks + 2);
  const auto back = moonep::parse_plan(text);
  CHECK(moonep::plan_difference(plan, back) == "");
  for (int r = 0; r < c.ranks; ++r) {  // row order too, not only as sets
    CHECK(back.ranks[r].dup_groups == plan.ranks[r].dup_groups);
    CHECK(back.ranks[r].dup_loffs == plan.ranks[r].dup_loffs);
  }
  // Some dup structure is exercised, or this would not test much.
  int dups = 0;
  for (const auto& p : plan.ranks) dups += p.dup_counts[0];
  CHECK(dups > 0);
}

// Every field of MOONEP_PLAN_FIELDS (moonep/impl/plan_fields.hpp) is in
// the file under its name, survives the round trip, and a change to any
// one of them is a plan difference: a field added to the table is covered
// by the writer, the reader and the comparison without further edits, and
// one those miss fails here.
TEST_CASE("every field of the plan table round-trips and is compared") {
  using namespace moonep::impl;
  moonep::Config c{4, 32, 4, 128, 2, 8};
  const auto plan = moonep::plan_reference(c, moonep::synthetic_routing(c, 2.0, 11));
  const std::string text = moonep::plan_to_json(plan);
  const auto back = moonep::parse_plan(text);
  for (std::size_t i = 0; i < kPlanFieldCount; ++i) {
    const PlanField& f = kPlanFields[i];
    const auto member = kHostPlanMembers[i];
    INFO(f.name);
    CHECK(text.find(std::string("\"") + f.name + "\":") != std::string::npos);
    for (int r = 0; r < c.ranks; ++r) {
      const auto& held = plan.ranks[r].*member;
      CHECK(back.ranks[r].*member == held);
      const std::int64_t want = f.held == FieldHeld::whole
                                    ? field_capacity(f, c)
                                    : field_prefix_values(f, plan.ranks[r].dup_counts[0], plan.ranks[r].dup_counts[1]);
      CHECK(static_cast<std::int64_t>(held.size()) == want);
    }
    // A changed value (rank 0 unless its field is empty) is a difference.
    auto changed = back;
    int r = 0;
    while (r < c.ranks && (changed.ranks[r].*member).empty()) ++r;
    REQUIRE(r < c.ranks);
    (changed.ranks[r].*member).back() += 1;
    const std::string d = moonep::plan_difference(plan, changed);
    CHECK(d != "");
    if (f.held == FieldHeld::whole) CHECK(d.find(f.name) != std::string::npos);
    // A wrong length is refused by the writer, naming the field.
    auto longer = plan;
    (longer.ranks[0].*member).push_back(0);
    try {
      (void)moonep::plan_to_json(longer);
      FAIL("plan_to_json accepted a plan with one value too many");
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).find(std::string("plans[0].") + f.name + " has") == 0);
    }
  }
}

TEST_CASE("bad plan files name the field") {
  moonep::Config c{2, 4, 2, 2, 1, 2};
  const auto plan = moonep::plan_reference(c, {{0, 1, 2, 3}, {3, 3, 1, 0}});
  const std::string good = moonep::plan_to_json(plan);
  auto replaced = [&](const std::string& from, const std::string& to) { return replaced_in(good, from, to); };
  CHECK(plan_parse_error(good) == "");
  CHECK(plan_parse_error(replaced("\"slots\":", "\"slots\":1")).find("slots: got ") == 0);
  CHECK(plan_parse_error(replaced("\"rank\":1", "\"rank\":0")).find("plans[1].rank: got 0, expected 1") == 0);
  CHECK(plan_parse_error(replaced("\"dst\":[", "\"dst\":[7,")).find("plans[0].dst has 5 values") == 0);
  CHECK(plan_parse_error(replaced("\"dst\":[", "\"dst\":[\"a\",")) ==
        "plans[0].dst[0]: expected an integer, got \"a\"");
  CHECK(plan_parse_error(replaced("\"zero_fill_ranges\":[[", "\"zero_fill_ranges\":[[1,"))
            .find("plans[0].zero_fill_ranges[0] has 3 values, expected 2") == 0);
  CHECK(plan_parse_error(replaced("\"src_info\":", "\"src_inf\":"))
            .find("plans[0]: missing required field \"src_info\"") == 0);
  CHECK(plan_parse_error(replaced("\"dup_counts\":[", "\"dup_counts\":[5,"))
            .find("plans[0].dup_counts has 3 values") == 0);
  CHECK(plan_parse_error(good.substr(0, good.size() / 2)).find("invalid JSON at byte") != std::string::npos);
}

TEST_CASE("write_plan_file writes the whole plan or nothing") {
  moonep::Config c{2, 4, 2, 2, 1, 2};
  const auto plan = moonep::plan_reference(c, {{0, 1, 2, 3}, {3, 3, 1, 0}});
  TempDir dir;

  SECTION("a new file, then a replaced one") {
    const fs::path out = dir.path / "plan.json";
    moonep::write_plan_file(plan, out.string());
    CHECK(slurp(out) == moonep::plan_to_json(plan));
    {
      std::ofstream(out) << "old content";
    }
    moonep::write_plan_file(plan, out.string());
    CHECK(slurp(out) == moonep::plan_to_json(plan));
    CHECK(dir.names() == std::vector<std::string>{"plan.json"});  // no temporary left
    CHECK(moonep::plan_difference(moonep::read_plan_file(out.string()), plan) == "");
  }
  SECTION("a missing directory fails and creates nothing") {
    CHECK_THROWS_AS(moonep::write_plan_file(plan, (dir.path / "no" / "plan.json").string()),
                    moonep::RuntimeError);
    CHECK(dir.names().empty());
  }
  SECTION("a directory in the way fails, leaves it and no temporary") {
    fs::create_directories(dir.path / "plan.json");
    CHECK_THROWS_AS(moonep::write_plan_file(plan, (dir.path / "plan.json").string()),
                    moonep::RuntimeError);
    CHECK(dir.names() == std::vector<std::string>{"plan.json"});
    CHECK(fs::is_directory(dir.path / "plan.json"));
  }
  SECTION("a plan whose arrays do not match its configuration is not written") {
    auto broken = plan;
    broken.ranks[1].src_info.pop_back();
    const fs::path out = dir.path / "plan.json";
    CHECK_THROWS_AS(moonep::write_plan_file(broken, out.string()), InputError);
    CHECK(dir.names().empty());
  }
}

TEST_CASE("reading a missing problem file is an InputError naming it") {
  try {
    moonep::read_problem_file("/nonexistent/moonep/problem.json");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) ==
          "cannot read problem file '/nonexistent/moonep/problem.json': No such file or directory");
  }
}

// Ragged steps (docs/spec/planning.md "Ragged steps"): the problem's
// tokens_per_rank is read and written, and the plan file repeats it.
namespace {
std::string ragged_problem(const std::string& tokens, const std::string& routing) {
  auto f = good_fields();
  f["tokens_per_rank"] = tokens;
  f["routing"] = routing;
  return problem_text(f);
}
}  // namespace

TEST_CASE("tokens_per_rank is read when present, routing then holds s_r*topk ids; null is absent") {
  const auto p = moonep::parse_problem(ragged_problem("[2, 1]", "[[0, 1, 2, 3], [3, 3]]"));
  REQUIRE(p.tokens_per_rank.has_value());
  CHECK(*p.tokens_per_rank == moonep::TokensPerRank{2, 1});
  CHECK(p.routing == moonep::Routing{{0, 1, 2, 3}, {3, 3}});
  CHECK(moonep::parse_problem(ragged_problem("[0, 0]", "[[], []]")).tokens_per_rank == moonep::TokensPerRank{0, 0});
  CHECK_FALSE(moonep::parse_problem(with("tokens_per_rank", "null")).tokens_per_rank);
}

TEST_CASE("bad tokens_per_rank values are one error line naming the field and index") {
  CHECK(parse_error(ragged_problem("[2, 3]", "[[0, 1, 2, 3], [3, 3]]")) ==
        "tokens_per_rank[1] = 3 is outside 0..tokens = 0..2");
  CHECK(parse_error(ragged_problem("[-1, 1]", "[[0, 1, 2, 3], [3, 3]]")) ==
        "tokens_per_rank[0] = -1 is outside 0..tokens = 0..2");
  CHECK(parse_error(ragged_problem("[2]", "[[0, 1, 2, 3], [3, 3]]")) ==
        "tokens_per_rank has 1 counts, expected ranks = 2");
  CHECK(parse_error(ragged_problem("[2, \"a\"]", "[[0, 1, 2, 3], [3, 3]]")) ==
        "tokens_per_rank[1]: expected an integer token count, got \"a\"");
  CHECK(parse_error(ragged_problem("[2, 1.5]", "[[0, 1, 2, 3], [3, 3]]")).rfind("tokens_per_rank[1]: expected", 0) == 0);
  CHECK(parse_error(ragged_problem("{}", "[[0, 1, 2, 3], [3, 3]]"))
            .rfind("tokens_per_rank: expected an array with one token count per rank", 0) == 0);
  // The routing must hold exactly s_r*topk ids.
  CHECK(parse_error(ragged_problem("[2, 1]", "[[0, 1, 2, 3], [3, 3, 1, 0]]")) ==
        "routing[1] has 4 entries, expected tokens_per_rank[1]*topk = 1*2 = 2");
}

TEST_CASE("ragged problems round-trip through problem_to_json") {
  moonep::Problem p;
  p.config = {4, 32, 4, 64, 2, 8};
  p.tokens_per_rank = moonep::TokensPerRank{64, 0, 17, 1};
  p.routing = moonep::synthetic_routing(p.config, 1.5, 3);
  for (int r = 0; r < 4; ++r) p.routing[r].resize(static_cast<std::size_t>((*p.tokens_per_rank)[r]) * 4);
  p.tokens_per_expert = moonep::count_tokens_per_expert(p.config, p.routing);
  const std::string text = moonep::problem_to_json(p);
  CHECK(text.find("\"tokens_per_rank\":[64,0,17,1]") != std::string::npos);
  const auto back = moonep::parse_problem(text);
  CHECK(back.routing == p.routing);
  CHECK(back.tokens_per_expert == p.tokens_per_expert);
  CHECK(back.tokens_per_rank == p.tokens_per_rank);
  // And a full problem does not grow the field.
  p.tokens_per_rank.reset();
  p.routing = moonep::synthetic_routing(p.config, 1.5, 3);
  p.tokens_per_expert.reset();
  CHECK(moonep::problem_to_json(p).find("tokens_per_rank") == std::string::npos);
}

TEST_CASE("a ragged plan file repeats tokens_per_rank, dst cut to s_r*topk") {
  // R=2 E=2 K=1 S=2 B=1 tp=1, s = [1, 0], routing [[1], []]; NvS = 2.
  // T = 1, CAP = [1, 0]; load = [0, 1], balance = [-1, 1]: rank 1 moves its
  // one entry to rank 0 (z[1][0] = 1, alloc[0][1] = 1), which copies e1
  // (experts_to_copy [[1], [-1]], remote_stats [1, 0] and [0, 1]); rank 0's
  // groups: e0 empty, e1 picked (empty), copy slot e1 [0, 1): cu (0, 0, 1);
  // the entry lands in slot 0 of rank 0: dst [0], src_info (0, -1).
  const moonep::Config c{2, 2, 1, 2, 1, 1};
  const moonep::TokensPerRank tokens = {1, 0};
  const auto plan = moonep::plan_reference(c, {{1}, {}}, nullptr, &tokens);
  const std::string expected =
      "{\"ranks\":2,\"experts\":2,\"topk\":1,\"tokens\":2,\"copy_slots\":1,\"token_padding\":1,"
      "\"tokens_per_rank\":[1,0],\"slots\":2,\"plans\":[\n"
      "{\"rank\":0,\"dst\":[0],\"cu_seqlens\":[0,0,1],\"zero_fill_ranges\":[[0,0],[0,0],[0,0]],"
      "\"experts_to_copy\":[[1],[-1]],\"remote_stats\":[1,0],\"src_info\":[0,-1],"
      "\"dup_groups\":[],\"dup_loffs\":[],\"dup_counts\":[0,0]},\n"
      "{\"rank\":1,\"dst\":[],\"cu_seqlens\":[0,0,0],\"zero_fill_ranges\":[[0,0],[0,0],[0,0]],"
      "\"experts_to_copy\":[[1],[-1]],\"remote_stats\":[0,1],\"src_info\":[-1,-1],"
      "\"dup_groups\":[],\"dup_loffs\":[],\"dup_counts\":[0,0]}\n"
      "]}\n";
  const std::string text = moonep::plan_to_json(plan);
  CHECK(text == expected);
  const auto back = moonep::parse_plan(text);
  REQUIRE(back.tokens_per_rank);
  CHECK(*back.tokens_per_rank == tokens);
  CHECK(moonep::plan_difference(plan, back) == "");
  // Bad plan files name the field and index.
  auto replaced = [&](const std::string& from, const std::string& to) { return replaced_in(text, from, to); };
  CHECK(plan_parse_error(replaced("\"tokens_per_rank\":[1,0]", "\"tokens_per_rank\":[1,3]")) ==
        "tokens_per_rank[1] = 3 is outside 0..tokens = 0..2");
  CHECK(plan_parse_error(replaced("\"tokens_per_rank\":[1,0]", "\"tokens_per_rank\":[1]")) ==
        "tokens_per_rank has 1 counts, expected ranks = 2");
  CHECK(plan_parse_error(replaced("\"dst\":[]", "\"dst\":[5]")) ==
        "plans[1].dst has 1 values, expected tokens_per_rank[1]*topk = 0*1 = 0");
  CHECK(plan_parse_error(replaced("\"tokens_per_rank\":[1,0]", "\"tokens_per_rank\":[2,0]")) ==
        "plans[0].dst has 1 values, expected tokens_per_rank[0]*topk = 2*1 = 2");
  // Without the field the plan is read as a full one, whose dst is S*K.
  CHECK(plan_parse_error(replaced("\"tokens_per_rank\":[1,0],", "")) ==
        "plans[0].dst has 1 values, expected tokens*topk = 2");
}
