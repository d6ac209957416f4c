// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Issue 19, part 2: a process that an MPI launcher started as one of
// several, but without --world mpi, must not plan every rank alone and
// write the plan as if it were the only one. moonep-plan reads the
// launchers' variables (no MPI call, no mpirun needed for this test).
#include "catch2_compat.hpp"

#include <string>
#include <vector>

#include "reliability/run_process.hpp"

using namespace moonep::test;

namespace {

RunResult plan_with_env(const std::string& name, const std::string& value, const std::string& output) {
  RunOptions o;
  o.env = {{name, value}};
  o.unset_env = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"};
  return run_process({MOONEP_PLAN_EXE, "--input", std::string(MOONEP_CLI_DIR) + "/problems/good.json", "--output",
                      output},
                     o);
}

}  // namespace

TEST_CASE("a process of a multi-process MPI launch without --world mpi refuses, exit 2, no plan") {
  ScratchDir dir("launch");
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"}) {
    INFO(name);
    const auto r = plan_with_env(name, "4", dir.file("plan.json"));
    CHECK(r.exit_code == 2);
    REQUIRE(r.err_lines().size() == 1);
    CHECK(r.err_lines()[0] == std::string("moonep-plan: error: this is one of 4 MPI processes (") + name +
                                  "=4) but was started without --world mpi, so it would plan every rank alone and "
                                  "write the plan itself; give every process --world mpi, or run moonep-plan once "
                                  "without mpirun");
    CHECK(!path_exists(dir.file("plan.json")));
  }
  // One process (mpirun -np 1, or a launcher's singleton) plans as usual.
  const auto one = plan_with_env("OMPI_COMM_WORLD_SIZE", "1", dir.file("plan.json"));
  CHECK(one.exit_code == 0);
  CHECK(path_exists(dir.file("plan.json")));
}
