#!/bin/sh
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# run_sweeps.sh — run the timing sweep of every backend present in a build,
# collect them in ONE CSV, and plot time per step against S.
#
#   perf_tests/run_sweeps.sh [--build DIR] [--out DIR] [--smoke]
#
#   --build DIR  the CMake build directory (default: build)
#   --out DIR    where sweeps.csv, time_per_step.png (time against S),
#                time_vs_ranks.png (the MPI rows: time against R) and each
#                bench's table output (*.log) go (default: DIR/perf_results
#                of --build)
#   --smoke      one tiny point per bench (seconds; the CTest smoke test)
#
# Benches, each run only when its binary is in the build:
#   host_sweep   always (portable, reference and the stable_sort floor)
#   mpi_bench    under "${MPIEXEC:-mpiexec} -n NP" for NP in ${NP:-2 4}
#   moonep_gpu_bench  the CUDA benchmark (gpu_bench.cu)
# Contract for a bench (perf_tests/csv_report.hpp): `--csv FILE` appends
# rows with the common columns, `--smoke` runs a tiny configuration, exit
# status 77 means "cannot run here" (the GPU bench without a visible GPU)
# and is reported as skipped.
#
# The plot needs gnuplot (Debian: apt-get install gnuplot-nox); without it
# the driver says so and writes only the CSV. Exit status: 0; 1 when a
# bench fails; 2 for bad usage or a missing build.
set -eu

build=build
out=""
smoke=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --smoke) smoke=--smoke; shift ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_sweeps.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || out="$build/perf_results"
bench_dir="$build/perf_tests"
if [ ! -x "$bench_dir/host_sweep" ]; then
  echo "run_sweeps.sh: $bench_dir/host_sweep not found (build first: cmake --build $build)" >&2
  exit 2
fi
mkdir -p "$out"
csv="$out/sweeps.csv"
png="$out/time_per_step.png"
ranks_png="$out/time_vs_ranks.png"
rm -f "$csv"  # one run, one file: benches append, the first writes the header

# run_logged LOG COMMAND...: shows the command's output and appends it to
# LOG; fails with the command's status (POSIX sh has no pipefail), except
# 77, which returns 77 for the caller to report as skipped.
run_logged() {
  log=$1
  shift
  rc_file="$out/.rc"
  { status=0; "$@" || status=$?; echo "$status" > "$rc_file"; } | tee -a "$log"
  rc=$(cat "$rc_file")
  rm -f "$rc_file"
  [ "$rc" -ne 77 ] || return 77
  if [ "$rc" -ne 0 ]; then
    echo "run_sweeps.sh: '$*' failed with status $rc" >&2
    exit 1
  fi
}

echo "== host_sweep"
rm -f "$out"/*.log
run_logged "$out/host_sweep.log" "$bench_dir/host_sweep" --csv "$csv" $smoke

mpi_bench="$bench_dir/mpi_bench"
if [ -x "$mpi_bench" ]; then
  mpiexec=${MPIEXEC:-mpiexec}
  flags=""
  if "$mpiexec" --version 2>/dev/null | grep -q -E "Open MPI|OpenRTE"; then
    flags="--oversubscribe"  # more processes than cores is fine for a sweep
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
  nps=${NP:-2 4}
  [ -z "$smoke" ] || nps=2
  for np in $nps; do
    echo "== mpi_bench, $np processes"
    # shellcheck disable=SC2086
    run_logged "$out/mpi_bench.log" "$mpiexec" -n "$np" $flags "$mpi_bench" --csv "$csv" $smoke
  done
else
  echo "== mpi_bench: not in this build (MPI worlds off or not built yet)"
fi

gpu_bench="$bench_dir/moonep_gpu_bench"
if [ -x "$gpu_bench" ]; then
  echo "== moonep_gpu_bench"
  rc=0
  run_logged "$out/moonep_gpu_bench.log" "$gpu_bench" --csv "$csv" $smoke || rc=$?
  [ "$rc" -eq 0 ] || echo "== moonep_gpu_bench: skipped (no usable GPU here)"
else
  echo "== moonep_gpu_bench: not in this build (no CUDA)"
fi

echo "== CSV: $csv ($(($(wc -l < "$csv") - 1)) rows)"

if ! command -v gnuplot > /dev/null 2>&1; then
  echo "note: gnuplot not found, no plot (Debian: apt-get install gnuplot-nox)"
  exit 0
fi
rm -f "$ranks_png"
"$(dirname "$0")/plot_sweeps.sh" "$csv" "$png" "$ranks_png"
echo "== plot: $png"
[ ! -e "$ranks_png" ] || echo "== plot: $ranks_png"
