// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Issue 19, part 2, as a user meets it: moonep-plan processes under mpirun
// that were started differently. Before, they hung until killed (leaving
// shared-memory files) or wrote a plan mixed from two files with exit 0.
// Now every case ends, bounded, with exit 2 (or 1 for a process that never
// came), one error line naming what differs, and no plan file. mpirun runs
// with -q (it then prints nothing of its own) under a 120 s guard.
#include "catch2_compat.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <fstream>
#include <string>
#include <vector>

#include "reliability/run_process.hpp"

using namespace moonep::test;

namespace {

const std::string kGood = std::string(MOONEP_CLI_DIR) + "/problems/good.json";  // ranks = 4

// mpirun [-np n moonep-plan --world mpi args...] : [...] ...
RunResult mpirun(const std::vector<std::pair<int, std::vector<std::string>>>& groups,
                 std::vector<std::pair<std::string, std::string>> env = {}) {
  // Kokkos 4.x's OpenMP backend warns at initialize (OMP_PROC_BIND unset,
  // cores oversubscribed) in unbuffered pieces; several processes' pieces
  // can mix inside one line, where no split can take them apart. These tests
  // judge moonep-plan's lines, so the processes keep Kokkos' warnings to
  // themselves (split_notices handles the mixing of whole lines).
  env.push_back({"KOKKOS_DISABLE_WARNINGS", "1"});
  std::vector<std::string> cmd{MOONEP_MPIEXEC, "--oversubscribe", "-q"};
  for (const auto& kv : env) cmd.insert(cmd.end(), {"-x", kv.first});  // passed on to every process
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (g) cmd.push_back(":");
    cmd.insert(cmd.end(), {"-np", std::to_string(groups[g].first), MOONEP_PLAN_EXE});
    cmd.insert(cmd.end(), groups[g].second.begin(), groups[g].second.end());
  }
  moonep::test::RunOptions o;
  o.timeout_s = 120;
  o.env = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
  o.env.insert(o.env.end(), env.begin(), env.end());
  o.unset_env = {"MOONEP_MPI_WORLD", "MOONEP_MPI_TIMEOUT"};
  return run_process(cmd, o);
}

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

// The one "moonep-plan: error:" line (other lines would be mpirun's or a
// crash's: there must be none).
std::string error_line(const RunResult& r) {
  INFO(r.describe());
  CHECK(!r.timed_out);
  const auto lines = r.err_lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("moonep-plan: error: ", 0) == 0);
  return lines[0];
}


}  // namespace

TEST_CASE("mpirun: agreeing processes still plan (the reference for the cases below)") {
  ScratchDir dir("mpi_agree");
  const auto args = std::vector<std::string>{"--world", "mpi", "--input", kGood, "--output", dir.file("plan.json")};
  const auto r = mpirun({{4, args}});
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  const auto alone = run_process({MOONEP_PLAN_EXE, "--input", kGood, "--output", "-"});
  CHECK(read_file(dir.file("plan.json")) == alone.out);
}

TEST_CASE("mpirun: processes started with different options stop before planning, exit 2") {
  ScratchDir dir("mpi_agree");
  const std::string plan = dir.file("plan.json");
  const auto base = std::vector<std::string>{"--world", "mpi", "--input", kGood, "--output", plan};
  struct Case {
    const char* name;
    std::vector<std::string> odd;  // what rank 2 gets on top
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"steps", {"--steps", "2"}, "rank 2 was started with --steps 2, rank 0 with --steps 1; every rank must be started with the same options"},
      {"world kind", {"--mpi-world", "rma"}, "rank 2 was started with --mpi-world rma, rank 0 with --mpi-world auto"},
      {"backend", {"--backend", "portable"}, "rank 2 was started with --backend portable, rank 0 with no --backend"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const auto r = mpirun({{2, base}, {1, with(base, c.odd)}, {1, base}});
    CHECK(r.exit_code == 2);
    CHECK(error_line(r).find(c.expected) != std::string::npos);
    CHECK(!path_exists(plan));
  }
}

TEST_CASE("mpirun: a process without --world mpi refuses at once instead of planning alone") {
  ScratchDir dir("mpi_agree");
  const std::string plan = dir.file("plan.json"), alone = dir.file("alone.json");
  const auto r = mpirun({{3, {"--world", "mpi", "--input", kGood, "--output", plan}},
                         {1, {"--input", kGood, "--output", alone}}});
  CHECK(r.exit_code == 2);
  CHECK(error_line(r).find("this is one of 4 MPI processes (OMPI_COMM_WORLD_SIZE=4) but was started without --world "
                           "mpi") != std::string::npos);
  CHECK(!path_exists(plan));
  CHECK(!path_exists(alone));
  // Explicitly --world inprocess under a launch of several is refused too.
  const auto explicit_run = mpirun({{2, {"--world", "inprocess", "--input", kGood, "--output", alone}}});
  CHECK(explicit_run.exit_code == 2);
  CHECK(!path_exists(alone));
}

TEST_CASE("mpirun: processes reading different problems of one shape stop, no mixed plan") {
  ScratchDir dir("mpi_agree");
  // good.json with two expert ids of rank 1's routing changed: same shape,
  // another routing.
  std::string other = read_file(kGood);
  const std::string from = "[1, 7, 12, 1,", to = "[1, 7, 13, 0,";
  REQUIRE(other.find(from) != std::string::npos);
  other.replace(other.find(from), from.size(), to);
  write_file(dir.file("other.json"), other);
  const std::string plan = dir.file("plan.json");
  const auto r = mpirun({{3, {"--world", "mpi", "--input", kGood, "--output", plan}},
                         {1, {"--world", "mpi", "--input", dir.file("other.json"), "--output", plan}}});
  CHECK(r.exit_code == 2);
  CHECK(error_line(r).find("rank 3 read a different routing than rank 0 (same R=4 E=16 K=2 S=8 B=2 tp=4, digest ") !=
        std::string::npos);
  CHECK(!path_exists(plan));

  // Another shape (tokens_per_expert given on one rank only) is named too.
  const auto tpe = mpirun({{1, {"--world", "mpi", "--input", std::string(MOONEP_CLI_DIR) + "/problems/good_tpe.json",
                                "--output", plan}},
                           {3, {"--world", "mpi", "--input", kGood, "--output", plan}}});
  CHECK(tpe.exit_code == 2);
  CHECK(error_line(tpe).find("rank 1 read a problem of R=4 E=16 K=2 S=8 B=2 tp=4 without tokens_per_expert, rank 0 "
                             "one of R=4 E=16 K=2 S=8 B=2 tp=4 with tokens_per_expert") != std::string::npos);
  CHECK(!path_exists(plan));
}

TEST_CASE("mpirun: a process that never comes is named after --mpi-timeout; nobody hangs") {
  ScratchDir dir("mpi_agree");
  const std::string fifo = dir.file("never.fifo"), plan = dir.file("plan.json");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);  // no writer: reading it blocks forever
  const auto base = std::vector<std::string>{"--world", "mpi", "--mpi-timeout", "2", "--output", plan};
  const auto stuck_1 = mpirun({{1, with(base, {"--input", kGood})},
                               {1, with(base, {"--input", fifo})},
                               {2, with(base, {"--input", kGood})}});
  CHECK(stuck_1.exit_code == 1);
  CHECK(error_line(stuck_1).find("rank 1 did not finish reading the problem within 2 s of rank 0") !=
        std::string::npos);
  CHECK(!path_exists(plan));

  // Rank 0 itself stuck: rank 1 says so.
  const auto stuck_0 = mpirun({{1, with(base, {"--input", fifo})}, {3, with(base, {"--input", kGood})}});
  CHECK(stuck_0.exit_code == 1);
  CHECK(error_line(stuck_0).find("rank 0 did not finish reading the problem within 4 s") != std::string::npos);
  CHECK(!path_exists(plan));

  // The timeout from the environment; nonsense there is one clear error.
  const auto via_env = mpirun({{1, {"--world", "mpi", "--input", fifo}}, {1, {"--world", "mpi", "--input", kGood}}},
                              {{"MOONEP_MPI_TIMEOUT", "1"}});
  CHECK(via_env.exit_code == 1);
  // Named as the user set it (issue 39: not --mpi-timeout's name for the
  // variable's value, nor the other way round).
  CHECK(error_line(via_env).find("within 2 s (it stopped, hangs, or is slower than $MOONEP_MPI_TIMEOUT 1 s)") !=
        std::string::npos);
  const auto bad_env = mpirun({{2, {"--world", "mpi", "--ranks", "2", "--experts", "4", "--steps", "1"}}},
                              {{"MOONEP_MPI_TIMEOUT", "soon"}});
  CHECK(bad_env.exit_code == 2);
  CHECK(error_line(bad_env).find("MOONEP_MPI_TIMEOUT: expected a positive number of seconds, got 'soon'") !=
        std::string::npos);
}

TEST_CASE("mpirun: rank 0's memory estimate is within 2x of the largest process's peak") {
#if defined(__SANITIZE_ADDRESS__)
  return;  // ASan's shadow memory changes every process's size
#endif
  ScratchDir dir("mpi_agree");
  // 2M entries per rank: ~200 MB a process. wait4 on mpirun reports the
  // largest of its processes.
  const auto r = mpirun({{2, {"--world", "mpi", "--ranks", "2", "--experts", "64", "--topk", "8", "--tokens", "262144",
                              "--token-padding", "16", "--steps", "1", "--output", dir.file("plan.json")}}});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  const double estimate = moonep::test::summary_memory_estimate(r.out);
  REQUIRE(estimate > 0);
  const double measured = static_cast<double>(r.max_rss_kb) * 1024.0;
  INFO("estimated " << estimate / 1048576 << " MiB, measured " << measured / 1048576 << " MiB");
  CHECK(measured > 100.0 * 1048576);
  CHECK(estimate >= measured / 2);
  CHECK(estimate <= measured * 2);
}

// ---- Issue 39, items 7 and 8: a process stopped before MPI_Init, or rank
// 0 stopped mid-run.

namespace {

// mpirun with one process per entry of `stop_self`: those marked stop
// themselves (SIGSTOP) before they exec moonep-plan, so never call MPI_Init.
std::vector<std::string> mpirun_stopping(const std::vector<bool>& stop_self, const std::vector<std::string>& args) {
  std::vector<std::string> cmd{MOONEP_MPIEXEC, "--oversubscribe", "-q", "-x", "KOKKOS_DISABLE_WARNINGS"};
  for (std::size_t r = 0; r < stop_self.size(); ++r) {
    if (r) cmd.push_back(":");
    cmd.insert(cmd.end(), {"-np", "1"});
    if (stop_self[r]) cmd.insert(cmd.end(), {"/bin/sh", "-c", "kill -STOP $$; exec \"$0\" \"$@\""});
    cmd.push_back(MOONEP_PLAN_EXE);
    cmd.insert(cmd.end(), args.begin(), args.end());
  }
  return cmd;
}

RunOptions mpi_options() {
  RunOptions o;
  o.timeout_s = 60;
  o.env = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}, {"KOKKOS_DISABLE_WARNINGS", "1"}};
  o.unset_env = {"MOONEP_MPI_WORLD", "MOONEP_MPI_TIMEOUT"};
  return o;
}

// The pid of the moonep-plan process of rank `rank` under mpirun `parent`
// (its environment says OMPI_COMM_WORLD_RANK), waiting up to 20 s for it.
pid_t find_rank(pid_t parent, int rank) {
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (int tries = 0; tries < 2000; ++tries) {
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      const std::string stat = read_file(e.path().string() + "/stat");
      const auto close = stat.rfind(')');
      if (close == std::string::npos) continue;
      int ppid = 0;
      char state = 0;
      if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) != 2 || ppid != parent) continue;
      if (read_file(e.path().string() + "/cmdline").find("moonep-plan") == std::string::npos) continue;
      const std::string env = read_file(e.path().string() + "/environ");
      if (env.find(std::string("\0", 1) + want + std::string("\0", 1)) != std::string::npos ||
          env.rfind(want + std::string("\0", 1), 0) == 0)
        return static_cast<pid_t>(std::stol(name));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

}  // namespace

TEST_CASE("mpirun: a process that never calls MPI_Init ends the job after --mpi-timeout, one line") {
  ScratchDir dir("mpi_start");
  const std::vector<std::string> args{"--world", "mpi", "--ranks", "2", "--experts", "4", "--tokens", "8",
                                      "--steps", "1", "--mpi-timeout", "2", "--output", dir.file("plan.json")};
  // Rank 1 stopped (rank 0 says so at once), then rank 0 (rank 1 says so
  // after a grace period of 3 s). Before, every other process waited in
  // MPI_Init until the 60 s guard.
  for (const bool rank0_stops : {false, true}) {
    INFO("rank " << (rank0_stops ? 0 : 1) << " stops before MPI_Init");
    const auto r = run_process(mpirun_stopping({rank0_stops, !rank0_stops}, args), mpi_options());
    CHECK(r.exit_code == 1);
    CHECK(r.seconds < 40);
    // --mpi-timeout 2, but MPI_Init gets at least 10 s (its own work can
    // take seconds on a loaded node).
    CHECK(error_line(r).find("MPI start-up (MPI_Init) did not finish within 10 s (--mpi-timeout, at least 10 s)") !=
          std::string::npos);
    CHECK(!path_exists(dir.file("plan.json")));
  }
}

TEST_CASE("mpirun: rank 0 stopped mid-run gives one line for the job, in the user's words") {
  ScratchDir dir("mpi_stop");
  // A million steps: far longer than the test; rank 0 is stopped a second
  // into planning.
  const std::vector<std::string> args{"--world", "mpi", "--ranks", "2", "--experts", "4", "--tokens", "64",
                                      "--steps", "1000000", "--mpi-timeout", "2", "--output", dir.file("plan.json")};
  std::vector<std::string> cmd{MOONEP_MPIEXEC, "--oversubscribe", "-q", "-x", "KOKKOS_DISABLE_WARNINGS", "-np", "2",
                               MOONEP_PLAN_EXE};
  cmd.insert(cmd.end(), args.begin(), args.end());
  // Resumed after 2.5 s: rank 1 timed out (2 s) and reported, and waits for
  // rank 0's verdict (up to 4 s). Before, rank 0 printed the world's own
  // message ("MpiSharedWorld: all_ok ... $MOONEP_MPI_TIMEOUT"); never
  // resumed: rank 1 gives up and says so, and rank 0, resumed by mpirun as
  // it ends the job, must not add a line.
  for (const bool resumed : {true, false}) {
    INFO((resumed ? "rank 0 resumed after 2.5 s" : "rank 0 never resumed"));
    RunOptions o = mpi_options();
    bool stopped = false;
    o.while_running = [&](pid_t mpirun) {
      const pid_t rank0 = find_rank(mpirun, 0);
      if (rank0 <= 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      stopped = ::kill(rank0, SIGSTOP) == 0;
      if (!resumed) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      ::kill(rank0, SIGCONT);
    };
    const auto r = run_process(cmd, o);
    REQUIRE(stopped);
    CHECK(r.exit_code == 1);
    const std::string line = error_line(r);
    INFO(line);
    CHECK(line.find("--mpi-timeout") != std::string::npos);
    for (const char* internal : {"MpiSharedWorld", "MpiRmaWorld", "all_ok", "MOONEP_MPI_TIMEOUT"})
      CHECK(line.find(internal) == std::string::npos);
    // Resumed, rank 0 gives its verdict (which rank 1 prints) unless it
    // needs so long to get there (it was stopped in the middle of a step and
    // waits its own timeout first) that rank 1 gave up on it: either way
    // one line.
    const bool verdict =
        line.find("planning: ranks 0 and 1 waited more than 2 s (--mpi-timeout) for another MPI process") !=
        std::string::npos;
    const bool gave_up = line.find("rank 0 did not finish planning within 4 s") != std::string::npos;
    CHECK((resumed ? verdict || gave_up : gave_up));
    CHECK(!path_exists(dir.file("plan.json")));
  }
}
