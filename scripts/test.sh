#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# scripts/test.sh — the whole test suite, exactly as CI runs it: installs
# missing Debian packages, configures and builds `build`, and runs every
# test through CTest. Exits non-zero if anything fails. Works from any
# directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install_deps.sh
source scripts/configure_build.sh
cmake --build "$build_dir" -j "$build_jobs"

# The MPI tests run mpirun; CI containers run as root, and have fewer cores
# than some tests have ranks.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
cd "$build_dir"
# As many tests at once as cores; the MPI tests (PROCESSORS = their ranks)
# and install_test (RUN_SERIAL) still run alone.
ctest --output-on-failure -j "$build_jobs"
