#!/bin/sh
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Time per planning step: the MPI worlds (shared-memory window, MPI_Put) at
# np 2 and 4, next to the in-process world with the same R, in one table.
#
#   perf_tests/run_mpi_bench.sh [BUILD_DIR] [mpi_bench options...]
#   e.g. perf_tests/run_mpi_bench.sh build --tokens 4096 --steps 21
#
# Defaults: E = 64*np, K = 8, S = 4096, B = 8, tp = 16, imbalance 1.
# NP="2 4" chooses the process counts; MPIEXEC the launcher.
set -eu
build=${1:-build}
[ $# -gt 0 ] && shift
bench="$build/perf_tests/mpi_bench"
if [ ! -x "$bench" ]; then
  echo "run_mpi_bench.sh: $bench not found (build MoonEP with MPI, target mpi_bench)" >&2
  exit 2
fi
mpiexec=${MPIEXEC:-mpiexec}
flags=""
if "$mpiexec" --version 2>/dev/null | grep -q -E "Open MPI|OpenRTE"; then
  # More processes than cores is fine for a comparison (and needed on small
  # machines); root needs Open MPI's explicit consent.
  flags="--oversubscribe"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

echo "MoonEP mpi_bench on $(hostname): $(nproc) cores; median time per planning step (slowest rank)"
"$bench" --header
for np in ${NP:-2 4}; do
  "$bench" --inprocess --ranks "$np" --no-header "$@"
  # shellcheck disable=SC2086
  "$mpiexec" -n "$np" $flags "$bench" --no-header "$@"
done
