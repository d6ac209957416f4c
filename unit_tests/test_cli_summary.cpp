// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-plan's summary pieces (src/tools): adaptive time units, the
// compact per-rank table for many ranks, and the progress line, which only
// appears once a run has taken longer than its threshold.
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <thread>

#include "catch2_compat.hpp"
#include "moonep/reference.hpp"
#include "moonep/synthetic.hpp"
#include "tools/plan_summary.hpp"
#include "tools/progress.hpp"

using namespace moonep;
using namespace moonep::tools;

TEST_CASE("format_duration_us picks the unit that suits the duration", "[cli]") {
  CHECK(format_duration_us(0.85) == "850 ns");
  CHECK(format_duration_us(12.34) == "12.3 us");
  CHECK(format_duration_us(1038.5) == "1.04 ms");
  CHECK(format_duration_us(2038896.6) == "2.04 s");
  CHECK(format_duration_us(45.6e6) == "45.6 s");
  CHECK(format_duration_us(200e6) == "3 min 20 s");
}

namespace {

std::string summary_text(int ranks, TableStyle table) {
  Config c{ranks, ranks * 4, 2, 32, 2, 4};
  const Routing routing = synthetic_routing(c, 1.0, 3);
  const HostPlan plan = plan_reference(c, routing);
  RunInfo run;
  run.source = "test";
  run.backend = "reference";
  run.world = "inprocess";
  run.step_seconds = {0.0012, 0.0010, 0.0011};
  std::ostringstream out;
  print_summary(out, summarize(plan, routing), run, table);
  return out.str();
}

int rank_rows(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  bool table = false;
  while (std::getline(in, line)) {
    if (line.find("  rank  load before") == 0) table = true;
    else if (line.empty()) table = false;
    else if (table && line.find("   ...") != 0) ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("the per-rank table is compact for many ranks", "[cli]") {
  const std::string small = summary_text(8, TableStyle::automatic);
  CHECK(rank_rows(small) == 8);
  CHECK(small.find("time per step: 1.10 ms (median of 3 steps, backend reference)") != std::string::npos);

  const std::string many = summary_text(64, TableStyle::automatic);
  CHECK(rank_rows(many) == 8);  // the 4 busiest and the 4 least loaded
  CHECK(many.find("64 ranks: the 4 busiest") != std::string::npos);
  CHECK(many.find("ranks per range") != std::string::npos);
  CHECK(many.find("load after: 64 on every rank") != std::string::npos);

  CHECK(rank_rows(summary_text(64, TableStyle::full)) == 64);
  CHECK(rank_rows(summary_text(16, TableStyle::compact)) == 8);
}

namespace {

std::string progress_output(bool enabled, double after_s, int sleep_ms) {
  std::FILE* f = std::tmpfile();
  {
    Progress p(enabled, f, after_s, 0.02);
    p.phase("planning", 3);
    p.advance();
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  }
  std::rewind(f);
  std::string text;
  char buf[512];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  std::fclose(f);
  return text;
}

}  // namespace

TEST_CASE("progress appears only past its threshold, and is erased", "[cli]") {
  const std::string shown = progress_output(true, 0.05, 300);
  CHECK(shown.find("moonep-plan: planning: step 1/3, ") != std::string::npos);
  CHECK(shown.size() >= 4);
  CHECK(shown.substr(shown.size() - 4) == "\r\033[K");  // the line is erased at the end
  CHECK(progress_output(true, 10.0, 200).empty());   // a short run: nothing
  CHECK(progress_output(false, 0.0, 200).empty());   // not a terminal: nothing
}
