// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Issue 19, part 5: error lines quote the input, so the input must not be
// able to drive the terminal (ESC, BEL), cut the message (NUL) or flood it
// (a 1 MB key, a 1,000,000-digit number). moonep::printable and
// one_line_message, then moonep-plan on such files: one line, at most 300
// characters, control bytes shown as \xHH, the field path still there.
#include "catch2_compat.hpp"

#include <string>
#include <vector>

#include "moonep/error.hpp"
#include "moonep/io.hpp"
#include "reliability/run_process.hpp"

using moonep::one_line_message;
using moonep::printable;
using moonep::test::path_exists;
using moonep::test::run_process;
using moonep::test::ScratchDir;
using moonep::test::terminal_safe;
using moonep::test::write_file;

namespace {


std::string parse_message(const std::string& text) {
  try {
    moonep::parse_problem(text);
  } catch (const moonep::InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("printable escapes control bytes and keeps readable text") {
  CHECK(printable("a\x1b[31mb") == "a\\x1b[31mb");
  CHECK(printable("bell\x07") == "bell\\x07");
  CHECK(printable(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(printable("del\x7f") == "del\\x7f");
  CHECK(printable("line\nbreak\r") == "line\\x0abreak\\x0d");
  CHECK(printable("donn\xc3\xa9" "es.json") == "donn\xc3\xa9" "es.json");  // UTF-8 text stays
  CHECK(printable("csi\xc2\x9b" "2J") == "csi\\xc2\\x9b2J");                // C1 control (U+009B)
  CHECK(printable("rtl\xe2\x80\xae") == "rtl\\xe2\\x80\\xae");              // bidi override U+202E
  CHECK(printable("bad\xff\xc3") == "bad\\xff\\xc3");                       // not UTF-8
  CHECK(printable("overlong\xc0\xaf") == "overlong\\xc0\\xaf");
  CHECK(printable("plain text, routing[2][7] = 16") == "plain text, routing[2][7] = 16");
}

TEST_CASE("printable elides long tokens in the middle, keeping both ends") {
  const std::string key(1000000, 'k');
  const std::string shown = printable("key \"" + key + "Z\" appears twice");
  CHECK(shown.size() < 200);
  CHECK(shown.rfind("key \"kkk", 0) == 0);
  CHECK(shown.find("kZ\" appears twice") != std::string::npos);
  CHECK(shown.find("bytes)") != std::string::npos);
  // An escape is never split by the elision.
  const std::string escapes = printable(std::string(500, '\x1b'));
  CHECK(escapes.size() < 200);
  for (std::size_t at = escapes.find('\\'); at != std::string::npos; at = escapes.find('\\', at + 1))
    CHECK(escapes.compare(at, 4, "\\x1b") == 0);
}

TEST_CASE("one_line_message is one safe line of at most the size asked, start kept") {
  std::string long_message = "problem.json: routing[3][9]: expected an integer expert id, got";
  for (int i = 0; i < 200; ++i) long_message += " word" + std::to_string(i);
  long_message += "\nsecond line\ttab";
  const std::string line = one_line_message(long_message, 280);
  CHECK(line.size() <= 280);
  CHECK(line.rfind("problem.json: routing[3][9]: expected", 0) == 0);
  CHECK(line.find("second line tab") != std::string::npos);  // the end is kept too
  CHECK(terminal_safe(line));
  CHECK(one_line_message("short one", 280) == "short one");
}

TEST_CASE("parse errors quote input keys and values printably") {
  // A key with ESC and BEL (JSON escapes, so the parsed key holds them raw).
  const std::string esc = parse_message(R"({"a\u001b[31mb\u0007": 1, "a\u001b[31mb\u0007": 2})");
  CHECK(esc == "invalid JSON: key \"a\\x1b[31mb\\x07\" appears twice in the same object");
  // NUL in a key no longer cuts what() short.
  const std::string nul = parse_message(R"({"a\u0000b": 1, "a\u0000b": 2})");
  CHECK(nul == "invalid JSON: key \"a\\x00b\" appears twice in the same object");
  // A value quoted in a type error.
  const std::string value = parse_message(R"({"ranks": "\u009b2J\u007f"})");
  CHECK(value == "ranks: expected an integer, got \"\\xc2\\x9b2J\\x7f\"");
  CHECK(terminal_safe(esc + nul + value));
}

TEST_CASE("huge tokens give short messages") {
  const std::string digits = parse_message("{\"ranks\": " + std::string(1000000, '7') + "}");
  CHECK(digits.rfind("invalid JSON: number overflow parsing '777", 0) == 0);
  CHECK(digits.size() < 300);
  const std::string key(1000000, 'q');
  const std::string twice = parse_message("{\"" + key + "\": 1, \"" + key + "\": 2}");
  CHECK(twice.rfind("invalid JSON: key \"qqq", 0) == 0);
  CHECK(twice.find("\" appears twice in the same object") != std::string::npos);
  CHECK(twice.size() < 300);
}

// ---- moonep-plan on such files

namespace {

struct Case {
  const char* name;
  std::string bytes;
  std::vector<std::string> expected;  // texts the error line must contain
};

std::string good_problem() { return moonep::test::read_file(std::string(MOONEP_CLI_DIR) + "/problems/good.json"); }

std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

// Plans the case's bytes as a problem file: exit 2, one short, safe line
// naming the file and holding every expected text, no plan written.
void check_case(const Case& c, const ScratchDir& dir) {
  INFO(c.name);
  const std::string file = dir.file(std::string(c.name) + ".json");
  write_file(file, c.bytes);
  const auto r = run_process({MOONEP_PLAN_EXE, "--input", file, "--output", dir.file("plan.json")});
  CHECK(r.exit_code == 2);
  const auto lines = r.err_lines();
  REQUIRE(lines.size() == 1);
  INFO(lines[0].substr(0, 400));
  CHECK(lines[0].rfind("moonep-plan: error: " + file + ": ", 0) == 0);
  CHECK(lines[0].size() <= 300);
  CHECK(terminal_safe(lines[0]));
  for (const auto& text : c.expected) CHECK(lines[0].find(text) != std::string::npos);
  CHECK(!path_exists(dir.file("plan.json")));
}

}  // namespace

TEST_CASE("moonep-plan: hostile input gives one short, safe line naming the place") {
  const std::string good = good_problem();
  const std::string big_key(1000000, 'K');
  const std::vector<Case> cases = {
      {"esc_key", replace_once(good, "\"topk\": 2,", "\"topk\": 2, \"\\u001b]0;owned\\u0007\": 1, \"\\u001b]0;owned\\u0007\": 2,"),
       {"key \"\\x1b]0;owned\\x07\" appears twice"}},
      {"raw_esc", replace_once(good, "\"topk\"", "\"to\x1b[2Jpk\""), {"invalid JSON at byte", "control character U+001B"}},
      {"nul_key", replace_once(good, "\"topk\": 2,", "\"topk\": 2, \"x\\u0000y\": 1, \"x\\u0000y\": 1,"),
       {"key \"x\\x00y\" appears twice in the same object"}},
      {"bel_value", replace_once(good, "\"ranks\": 4", "\"ranks\": \"\\u0007\\u0007\""), {"ranks: expected an integer, got \"\\u0007\\u0007\""}},
      {"million_digits", replace_once(good, "\"tokens\": 8", "\"tokens\": " + std::string(1000000, '9')),
       {"number overflow parsing '999"}},
      {"million_digit_id", replace_once(good, "[14, 14,", "[14, " + std::string(1000000, '1') + ","), {"number overflow parsing '111"}},
      {"megabyte_key", replace_once(good, "\"topk\": 2,", "\"topk\": 2, \"" + big_key + "\": 1, \"" + big_key + "\": 1,"),
       {"invalid JSON: key \"KKK", "appears twice in the same object"}},
      {"megabyte_string", replace_once(good, "\"ranks\": 4", "\"ranks\": \"" + std::string(1000000, 's') + "\""),
       {"ranks: expected an integer, got \"sss"}},
      {"megabyte_literal", replace_once(good, "\"ranks\": 4", "\"ranks\": " + std::string(1000000, 't')),
       {"invalid JSON at byte", "invalid literal"}},
  };
  ScratchDir dir("error_lines");
  for (const Case& c : cases) check_case(c, dir);
}

TEST_CASE("moonep-plan: a NUL byte or UTF-16 text is named with its place, never read past") {
  // Before, nlohmann's parser took a NUL for the end of the text: garbage
  // after it was ignored (exit 0), a NUL inside was "unexpected end of
  // input", and UTF-16 text the same.
  const std::string good = good_problem();
  auto utf16 = [&](bool big_endian) {
    std::string out = big_endian ? "\xFE\xFF" : "\xFF\xFE";
    for (const char ch : good) out += big_endian ? std::string{'\0', ch} : std::string{ch, '\0'};
    return out;
  };
  std::string le_no_bom;
  for (const char ch : good) le_no_bom += std::string{ch, '\0'};
  const std::vector<Case> cases = {
      {"nul_then_garbage", good + std::string("\0garbage", 8),
       {"invalid JSON at byte " + std::to_string(good.size() + 1) + ": a NUL byte (0x00)"}},
      {"nul_inside", good.substr(0, 100) + std::string(1, '\0') + good.substr(100),
       {"invalid JSON at byte 101: a NUL byte (0x00)"}},
      {"utf16le", utf16(false), {"invalid JSON at byte 2: the file starts with a UTF-16 or UTF-32 byte order mark"}},
      {"utf16be", utf16(true), {"invalid JSON at byte 2: the file starts with a UTF-16 or UTF-32 byte order mark"}},
      {"utf16le_no_bom", le_no_bom, {"invalid JSON at byte 2: a NUL byte (0x00) after '{': the file looks like UTF-16"}},
  };
  ScratchDir dir("error_lines");
  for (const Case& c : cases) check_case(c, dir);
  // The library's own parser says the same (parse_problem on a string).
  CHECK_THROWS_WITH(moonep::parse_problem(good + std::string("\0}", 2)),
                    "invalid JSON at byte " + std::to_string(good.size() + 1) +
                        ": a NUL byte (0x00); JSON text has none (is this a binary file?)");
}

TEST_CASE("moonep-plan: a hostile file name or option is escaped and elided too") {
  ScratchDir dir("error_lines");
  const auto r = run_process({MOONEP_PLAN_EXE, "--input", "p\x1b[2J\x07.json"});
  CHECK(r.exit_code == 2);
  REQUIRE(r.err_lines().size() == 1);
  CHECK(r.err_lines()[0].rfind("moonep-plan: error: cannot read problem file 'p\\x1b[2J\\x07.json': ", 0) == 0);
  CHECK(terminal_safe(r.err_lines()[0]));

  const std::string name = dir.file(std::string(200, 'n') + "\x1b.json");
  const auto long_name = run_process({MOONEP_PLAN_EXE, "--input", name});
  CHECK(long_name.exit_code == 2);
  REQUIRE(long_name.err_lines().size() == 1);
  CHECK(long_name.err_lines()[0].find("nnn\\x1b.json': No such file") != std::string::npos);
  CHECK(long_name.err_lines()[0].size() <= 300);
  CHECK(terminal_safe(long_name.err_lines()[0]));

  const auto opt = run_process({MOONEP_PLAN_EXE, "--frob\x1b" + std::string(100000, 'x')});
  CHECK(opt.exit_code == 2);
  REQUIRE(opt.err_lines().size() == 1);
  CHECK(opt.err_lines()[0].rfind("moonep-plan: error: unknown option '--frob\\x1bxxx", 0) == 0);
  CHECK(opt.err_lines()[0].size() <= 300);
}

// The test runner's stderr split (run_process.hpp): what Kokkos 4.6's
// OpenMP backend prints at initialize is taken out, whole; moonep-plan's
// lines, and any other line, stay.
TEST_CASE("test support: Kokkos' notices are split from moonep-plan's stderr, nothing else") {
  const std::string kokkos =
      "Kokkos::OpenMP::initialize WARNING: OMP_PROC_BIND environment variable not set\n"
      "  In general, for best performance with OpenMP 4.0 or better set OMP_PROC_BIND=spread and OMP_PLACES=threads\n"
      "  For best performance with OpenMP 3.1 set OMP_PROC_BIND=true\n"
      "  For unit testing set OMP_PROC_BIND=false\n"
      "\n";
  const std::string ours = "moonep-plan: error: --ranks: expected a positive integer, got 'x'\n";
  std::string own, notices;
  moonep::test::split_notices(kokkos + ours, own, notices);
  CHECK(own == ours);
  CHECK(notices == kokkos);

  // An indented line after one of ours is ours; a stray line is kept, and
  // so is a blank line that does not end a notice.
  moonep::test::split_notices(ours + "  more\nstray output\n\n" + kokkos + "\n", own, notices);
  CHECK(own == ours + "  more\nstray output\n\n\n");
  CHECK(notices == kokkos);

  moonep::test::split_notices("MPI detected: For OpenMP binding to work as intended, MPI ranks must be bound\n" + ours,
                              own, notices);
  CHECK(own == ours);
  // Four processes under mpirun (as CI's OpenMP leg printed it): the blocks
  // come mixed line by line, the oversubscription counts after another
  // process's blank line; a summary line of ours, indented, stays ours.
  const std::string oversubscribed =
      "Kokkos::OpenMP::initialize WARNING: You are likely oversubscribing your CPU cores.\n"
      "                                    Detected: 2 cores per node.\n"
      "                                    Detected: 4 MPI_ranks per node.\n"
      "                                    Requested: 2 threads per process.\n";
  const std::string mpi = "MPI detected: For OpenMP binding to work as intended, MPI ranks must be bound to exclusive CPU sets.\n\n";
  const std::string mixed = "Kokkos::OpenMP::initialize WARNING: OMP_PROC_BIND environment variable not set\n" +
                            kokkos + mpi + oversubscribed.substr(0, oversubscribed.find('\n') + 1) +
                            "  For unit testing set OMP_PROC_BIND=false\n" + "\n" +
                            oversubscribed.substr(oversubscribed.find('\n') + 1) + ours + "  load after: 12 on every rank\n";
  moonep::test::split_notices(mixed, own, notices);
  CHECK(own == ours + "  load after: 12 on every rank\n");
  CHECK(notices.size() + own.size() == mixed.size());

  moonep::test::split_notices("no newline at the end", own, notices);
  CHECK(own == "no newline at the end");
  CHECK(notices.empty());
}
