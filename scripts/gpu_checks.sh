#!/usr/bin/env bash
# gpu_checks.sh — the one script run on the GPU machine, from a bundle made
# by bundle_gpu.sh (it sits at the bundle's root). Runs: nvidia-smi -L, the
# CUDA unit tests, compute-sanitizer (memcheck, racecheck, synccheck) on the
# small [sanitize] tests (one of them plants a bad expert id), and the
# benchmark; logs go to $OUT (or ./gpu_checks_out); a short table comes last.
# Never changes GPU settings; never uses NVLink multicast.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
LOGS=${OUT:-$PWD/gpu_checks_out}
mkdir -p "$LOGS"
export LD_LIBRARY_PATH="$HERE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
declare -a SUMMARY

step() {  # step NAME TIMEOUT_S COMMAND... : run, tee the log, record the result
  local name=$1 limit=$2; shift 2
  echo "=== $name: $*"
  local t0=$(date +%s)
  timeout "$limit" "$@" > >(tee "$LOGS/$name.log") 2>&1
  local rc=$?
  sleep 0.2
  local dt=$(( $(date +%s) - t0 ))
  local verdict=pass
  [ $rc -eq 0 ] || verdict="FAIL(rc=$rc)"
  [ $rc -eq 124 ] && verdict="TIMEOUT"
  SUMMARY+=("$(printf '%-22s %-14s %5ss' "$name" "$verdict" "$dt")")
  return 0
}

echo "bundle commit: $(cat "$HERE/COMMIT" 2>/dev/null)"
step nvidia-smi 30 nvidia-smi -L
step unit_tests 150 "$HERE/bin/test_cuda_planner" --durations yes
if [ -x "$HERE/bin/test_cuda_dispatch" ]; then
  step dispatch_test 60 "$HERE/bin/test_cuda_dispatch"
fi

SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ -n "$SAN" ]; then
  for tool in memcheck racecheck synccheck; do
    step "sanitizer_$tool" 60 "$SAN" --tool "$tool" --error-exitcode 9 \
      "$HERE/bin/test_cuda_planner" "[sanitize]"
  done
else
  SUMMARY+=("$(printf '%-22s %-14s' sanitizer 'not installed')")
fi

step benchmark 90 "$HERE/bin/moonep_gpu_bench" 500 --csv "$LOGS/gpu_sweeps.csv"
if [ -x "$HERE/bin/moonep-plan" ]; then
  # The default backend on a GPU machine is cuda; its summary must balance.
  step moonep-plan 60 "$HERE/bin/moonep-plan" --steps 50
  grep -q "backend cuda" "$LOGS/moonep-plan.log" && grep -q -- "-> 1.00" "$LOGS/moonep-plan.log" ||
    SUMMARY+=("$(printf '%-22s %-14s' moonep-plan-default 'FAIL(not cuda or unbalanced)')")
fi

echo
echo "=== benchmark table"
sed -n '/^config/,$p' "$LOGS/benchmark.log" 2>/dev/null
echo
echo "=== summary"
printf '%s\n' "${SUMMARY[@]}" | tee "$LOGS/summary.txt"
