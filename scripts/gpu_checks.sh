#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# gpu_checks.sh — the one script run on the GPU machine, from a bundle made
# by bundle_gpu.sh (it sits at the bundle's root). Runs: nvidia-smi -L, the
# CUDA unit tests (virtual ranks and the GPU world; under mpirun one process
# per rank: test_gpu_world_mpi, test_gpu_world_layer_mpi (with its
# [sanitize] cases under compute-sanitizer), moonep-plan and moonep-layer
# --world gpu, full and ragged steps, plan and layer files checked against
# the reference and the direct layer), compute-sanitizer
# (memcheck, racecheck, synccheck) on the small [sanitize] tests of each
# (they plant bad input), the kernel benchmark (BENCH=--headline: only the
# headline) and the GPU world's, moonep-plan; then, from the Kokkos-CUDA build (kokkos-cuda/),
# every test_portable_* binary (Planner<Kokkos::Cuda> on the portable phases
# and on the CUDA specialization), test_gpu_world_planner (over a GPU
# world), the portable layer's tests (test_layer_portable, test_expert_copies,
# test_moe_layer, test_layer_concept) and moonep-layer --backend portable
# in float, double and bf16, memcheck of the bad-input test on both
# paths, host_sweep's portable phases against the specialization at S=512,
# 4096, 8192, portable_step_bench (the portable step back to back, launches
# and fences per step, S 512..16384)
# and moonep-plan on both backends. A test that dies is run once more under
# cuda-gdb for a backtrace. Logs go to $OUT (or ./gpu_checks_out); a short
# table comes last. CHECKS=kokkos runs only the Kokkos-CUDA part.
# Never changes GPU settings; never uses NVLink multicast (MOONEP_FORBID_MULTICAST=1:
# a GpuWorld asking for it is refused; the test binaries set it themselves too).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
LOGS=${OUT:-$PWD/gpu_checks_out}
mkdir -p "$LOGS"
export LD_LIBRARY_PATH="$HERE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 MOONEP_FORBID_MULTICAST=1
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

# A program that died (signal, or rc > 128): once more under cuda-gdb.
backtrace_if_crashed() {  # backtrace_if_crashed NAME COMMAND...
  local name=$1; shift
  local rc
  rc=$(sed -n 's/.*FAIL(rc=\([0-9]*\)).*/\1/p' <<<"${SUMMARY[-1]}")
  if [ -n "$rc" ] && [ "$rc" -gt 128 ] && command -v cuda-gdb >/dev/null; then
    timeout 300 cuda-gdb -batch -ex run -ex bt -ex "info threads" --args "$@" >"$LOGS/$name.gdb.log" 2>&1
    echo "--- $name backtrace:"; grep -A25 '^#0' "$LOGS/$name.gdb.log" | head -40
  fi
}

echo "bundle commit: $(cat "$HERE/COMMIT" 2>/dev/null)"
step nvidia-smi 30 nvidia-smi -L
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ "${CHECKS:-all}" != kokkos ]; then
step unit_tests 240 "$HERE/bin/test_cuda_planner" --durations yes
step gpu_world 240 "$HERE/bin/test_gpu_world" --durations yes
backtrace_if_crashed gpu_world "$HERE/bin/test_gpu_world"

# The CUDA layer (dispatch and combine of virtual ranks) against the
# reference, and its soak: 1e5 graph replays of plan + dispatch + combine.
if [ -x "$HERE/bin/test_cuda_layer" ]; then
  step cuda_layer 300 "$HERE/bin/test_cuda_layer" --durations yes
  step cuda_layer_soak 400 "$HERE/bin/test_cuda_layer" "[soak]" --durations yes
fi
# The layer on a GPU world of one process (symmetric slot buffers, the
# contract's transport) against the reference, and its CUDA graph.
[ -x "$HERE/bin/test_gpu_world_layer" ] && step gpu_world_layer 300 "$HERE/bin/test_gpu_world_layer" --durations yes
# Expert copies (fetch, reduce) and the linear MoE layer against the
# reference and the direct layer (issue 36), on virtual ranks and on the
# GPU world (every rank on this GPU).
MOE_TESTS="test_cuda_expert_copies test_cuda_moe_layer test_cuda_moe_layer_backward test_gpu_world_expert_copies
  test_gpu_world_moe_layer"
for t in $MOE_TESTS; do
  [ -x "$HERE/bin/$t" ] && step "${t#test_}" 300 "$HERE/bin/$t" --durations yes
done
if [ -n "$SAN" ]; then
  for tool in memcheck racecheck synccheck; do
    [ -x "$HERE/bin/test_cuda_layer" ] && step "layer_$tool" 120 "$SAN" --tool "$tool" --error-exitcode 9 \
      "$HERE/bin/test_cuda_layer" "[sanitize]"
    step "sanitizer_$tool" 60 "$SAN" --tool "$tool" --error-exitcode 9 \
      "$HERE/bin/test_cuda_planner" "[sanitize]"
    for t in $MOE_TESTS; do
      [ -x "$HERE/bin/$t" ] && step "${t#test_}_$tool" 300 "$SAN" --tool "$tool" --error-exitcode 9 \
        "$HERE/bin/$t" "[sanitize]"
    done
    # The GPU world's R launches must run at once to meet: if the tool
    # serialises kernels, the tests time out (bounded) instead of passing.
    step "world_$tool" 120 "$SAN" --tool "$tool" --error-exitcode 9 \
      "$HERE/bin/test_gpu_world" "[sanitize]"
    # Its planning is the world's (the same caveat); the layer's own
    # kernels never wait for another rank.
    [ -x "$HERE/bin/test_gpu_world_layer" ] && step "world_layer_$tool" 300 "$SAN" --tool "$tool" --error-exitcode 9 \
      "$HERE/bin/test_gpu_world_layer" "[sanitize]"
  done
else
  SUMMARY+=("$(printf '%-22s %-14s' sanitizer 'not installed')")
fi

# One process per rank under the bundled Open MPI: 2 and 4 processes on
# this GPU, each its own context.
if [ -x "$HERE/mpi/bin/test_gpu_world_mpi" ] && [ -f "$HERE/openmpi/mpi_env.sh" ]; then
  for np in 2 4; do
    step "world_mpi_np$np" 120 bash -c "source '$HERE/openmpi/mpi_env.sh' && \
      LD_LIBRARY_PATH='$HERE/mpi/lib':\$LD_LIBRARY_PATH mpirun -np $np '$HERE/mpi/bin/test_gpu_world_mpi' --durations yes"
  done
fi
# The layer over that world (GpuWorldLayer, one process per rank: device-side
# barriers between the processes) against the reference, at 2 and 4
# processes, then its [sanitize] cases with each process under its own
# compute-sanitizer (the processes' launches must still meet: a tool that
# held them back past the cases' 60 s bound would show as a named timeout).
if [ -x "$HERE/mpi/bin/test_gpu_world_layer_mpi" ] && [ -f "$HERE/openmpi/mpi_env.sh" ]; then
  for np in 2 4; do
    step "world_layer_mpi_np$np" 300 bash -c "source '$HERE/openmpi/mpi_env.sh' && \
      LD_LIBRARY_PATH='$HERE/mpi/lib':\$LD_LIBRARY_PATH mpirun -np $np '$HERE/mpi/bin/test_gpu_world_layer_mpi' --durations yes"
  done
  # moonep-layer --world gpu under mpirun (one process per rank, every
  # process on GPU 0), its files against the direct layer, full and ragged.
  if [ -x "$HERE/mpi/bin/moonep-layer" ] && [ -x "$HERE/mpi/bin/layer_cli_files" ]; then
    for c in float:fine double:fine bf16:fine float:ragged; do
      dtype=${c%%:*} kind=${c##*:}
      W=$LOGS/layer_gpu_mpi_${dtype}_$kind
      rm -rf "$W" && mkdir -p "$W"
      step "layer_gpu_mpi_${dtype}_$kind" 120 bash -c "source '$HERE/openmpi/mpi_env.sh' && \
        export LD_LIBRARY_PATH='$HERE/mpi/lib':\$LD_LIBRARY_PATH && \
        '$HERE/mpi/bin/layer_cli_files' make '$W' 4 16 4 12 2 4 5 7 $kind && \
        mpirun -np 4 '$HERE/mpi/bin/moonep-layer' --world gpu --devices 0 --input '$W/problem.json' --x '$W/x.npy' \
          --weights '$W/w.npy' --output '$W/out.npy' --recv '$W/recv.npy' --grad-out '$W/g.npy' --grad-x '$W/gx.npy' \
          --grad-weights '$W/gw.npy' --dtype $dtype && \
        '$HERE/mpi/bin/layer_cli_files' check '$W' $dtype"
    done
  fi
  if [ -n "$SAN" ]; then
    for tool in memcheck racecheck synccheck; do
      step "world_layer_mpi_$tool" 300 bash -c "source '$HERE/openmpi/mpi_env.sh' && \
        LD_LIBRARY_PATH='$HERE/mpi/lib':\$LD_LIBRARY_PATH mpirun -np 2 '$SAN' --tool $tool --error-exitcode 9 \
        '$HERE/mpi/bin/test_gpu_world_layer_mpi' '[sanitize]'"
    done
  fi
fi
# moonep-plan --world gpu under mpirun (one process per rank): the plan
# rank 0 writes must be the reference's (the plan checker), for the CLI
# tests' problem files at 4 processes (good_ragged: a ragged step, each
# process staging its rank's count), a synthetic step and a ragged
# synthetic step (--ragged) at 2; the summary must name the world.
if [ -x "$HERE/mpi/bin/moonep-plan" ] && [ -f "$HERE/openmpi/mpi_env.sh" ]; then
  # (step runs programs under timeout: the mpirun line is one bash -c.)
  MPI_PLAN="source '$HERE/openmpi/mpi_env.sh' && LD_LIBRARY_PATH='$HERE/mpi/lib':\$LD_LIBRARY_PATH mpirun"
  CHECK_PLAN=(env "LD_LIBRARY_PATH=$HERE/mpi/lib:$LD_LIBRARY_PATH" "$HERE/mpi/bin/moonep_check_plan_file")
  for p in good good_tpe good_ragged; do
    rm -f "$LOGS/plan_gpu_mpi_$p.json"
    step "plan_gpu_mpi_$p" 120 bash -c "$MPI_PLAN -np 4 '$HERE/mpi/bin/moonep-plan' --world gpu \
      --input '$HERE/mpi/problems/$p.json' --output '$LOGS/plan_gpu_mpi_$p.json'"
    step "plan_gpu_mpi_${p}_check" 60 "${CHECK_PLAN[@]}" "$HERE/mpi/problems/$p.json" "$LOGS/plan_gpu_mpi_$p.json"
  done
  rm -f "$LOGS/plan_gpu_mpi_synthetic.json" "$LOGS/plan_gpu_mpi_synthetic_problem.json"
  step plan_gpu_mpi_synthetic 120 bash -c "$MPI_PLAN -np 2 '$HERE/mpi/bin/moonep-plan' --world gpu --ranks 2 \
    --experts 32 --tokens 4096 --steps 20 --save-problem '$LOGS/plan_gpu_mpi_synthetic_problem.json' \
    --output '$LOGS/plan_gpu_mpi_synthetic.json'"
  grep -q "slowest of 2 MPI ranks, gpu world" "$LOGS/plan_gpu_mpi_synthetic.log" ||
    SUMMARY+=("$(printf '%-22s %-14s' plan_gpu_mpi-summary 'FAIL(not the gpu world)')")
  step plan_gpu_mpi_synthetic_check 60 "${CHECK_PLAN[@]}" "$LOGS/plan_gpu_mpi_synthetic_problem.json" \
    "$LOGS/plan_gpu_mpi_synthetic.json"
  rm -f "$LOGS/plan_gpu_mpi_ragged.json" "$LOGS/plan_gpu_mpi_ragged_problem.json"
  step plan_gpu_mpi_ragged 120 bash -c "$MPI_PLAN -np 2 '$HERE/mpi/bin/moonep-plan' --world gpu --ranks 2 \
    --experts 32 --tokens 4096 --ragged --seed 7 --steps 20 \
    --save-problem '$LOGS/plan_gpu_mpi_ragged_problem.json' --output '$LOGS/plan_gpu_mpi_ragged.json'"
  grep -q "a ragged step of T = " "$LOGS/plan_gpu_mpi_ragged.log" ||
    SUMMARY+=("$(printf '%-22s %-14s' plan_gpu_mpi_ragged-summary 'FAIL(not a ragged step)')")
  step plan_gpu_mpi_ragged_check 60 "${CHECK_PLAN[@]}" "$LOGS/plan_gpu_mpi_ragged_problem.json" \
    "$LOGS/plan_gpu_mpi_ragged.json"
fi
# moonep-layer's linear layer (--experts) on virtual ranks (--backend cuda)
# and on the GPU world (--world gpu, every rank on this GPU), as the CLI
# tests run it: files from layer_cli_files, checked against the direct
# layer; and the refusal of a plan with a remote expert that is not copied
# (exit 2, the reference's words).
# layer_case DIR EXPECT MAKE_ARGS -- MOONEP_LAYER_WHERE...: the files of
# `layer_cli_files make DIR MAKE_ARGS`, moonep-layer's linear layer on them;
# EXPECT ok: exit 0 and the direct layer's check passes; uncopied: exit 2,
# the reference's refusal, no output file.
layer_case() {
  local dir=$1 expect=$2; shift 2
  local make=()
  while [ "$1" != -- ]; do make+=("$1"); shift; done
  shift
  rm -rf "$dir" && mkdir -p "$dir" && "$HERE/bin/layer_cli_files" make "$dir" "${make[@]}" || return 1
  local io=(--input "$dir/problem.json" --x "$dir/x.npy" --weights "$dir/w.npy" --experts "$dir/M.npy"
            --output "$dir/out.npy")
  if [ "$expect" = ok ]; then
    "$HERE/bin/moonep-layer" "${io[@]}" --grad-out "$dir/g.npy" --grad-x "$dir/gx.npy" \
      --grad-weights "$dir/gw.npy" --grad-experts "$dir/gM.npy" "$@" &&
      "$HERE/bin/layer_cli_files" check "$dir" float
    return
  fi
  "$HERE/bin/moonep-layer" "${io[@]}" "$@" 2>"$dir/stderr"
  local rc=$?
  cat "$dir/stderr"
  [ $rc -eq 2 ] && [ ! -e "$dir/out.npy" ] &&
    grep -q 'rank 1 would run expert 25 (5 slots) that it neither owns nor holds in a copy slot' "$dir/stderr"
}
export -f layer_case
export HERE
if [ -x "$HERE/bin/moonep-layer" ] && [ -x "$HERE/bin/layer_cli_files" ]; then
  for where in cuda gpu; do
    w=(--backend cuda); [ "$where" = gpu ] && w=(--world gpu --devices 0)
    while read -r name expect make; do
      step "layer_cli_${where}_$name" 60 bash -c 'layer_case "$@"' _ "$LOGS/layer_cli_${where}_$name" "$expect" \
        $make -- "${w[@]}"
    done <<'CASES'
full ok 4 16 4 12 2 4 5 7 linear
ragged ok 4 16 4 12 2 4 5 7 linear-ragged
small_b ok 4 16 3 12 2 2 4 3 linear
one_rank ok 1 4 3 9 1 2 3 5 linear
uncopied uncopied 4 32 4 16 1 1 3 3 linear
CASES
  done
fi
# The MoE layer example: on a CUDA build, the GPU world's MoE layer against
# the direct layer.
[ -x "$HERE/bin/example_moe_layer" ] && step example_moe_layer 60 "$HERE/bin/example_moe_layer"
step benchmark 90 "$HERE/bin/moonep_gpu_bench" 500 ${BENCH:-} --csv "$LOGS/gpu_sweeps.csv"
step world_benchmark 90 "$HERE/bin/moonep_gpu_bench" 500 --gpu-world
[ -x "$HERE/bin/moonep_gpu_layer_bench" ] && step layer_benchmark 120 "$HERE/bin/moonep_gpu_layer_bench"
[ -x "$HERE/bin/moonep_gpu_moe_layer_bench" ] && step moe_layer_benchmark 120 "$HERE/bin/moonep_gpu_moe_layer_bench" \
  --csv "$LOGS/gpu_moe_layer.csv"
if [ -x "$HERE/bin/moonep-plan" ]; then
  # The default backend on a GPU machine is cuda; its summary must balance.
  step moonep-plan 60 "$HERE/bin/moonep-plan" --steps 50
  grep -q "backend cuda" "$LOGS/moonep-plan.log" && grep -q -- "-> 1.00" "$LOGS/moonep-plan.log" ||
    SUMMARY+=("$(printf '%-22s %-14s' moonep-plan-default 'FAIL(not cuda or unbalanced)')")
  # --world gpu: eight ranks, eight launches on this GPU; balanced too.
  step plan_world_gpu 60 "$HERE/bin/moonep-plan" --world gpu --devices 0,0,0,0,0,0,0,0 --steps 20
  grep -q "gpu world on devices 0,0,0,0,0,0,0,0" "$LOGS/plan_world_gpu.log" && grep -q -- "-> 1.00" "$LOGS/plan_world_gpu.log" ||
    SUMMARY+=("$(printf '%-22s %-14s' plan_world_gpu-summary 'FAIL(not the gpu world or unbalanced)')")
  # A ragged synthetic step (--ragged: s_r uniform in 0..S from the seed) on
  # the cuda backend and over the GPU world: the summary a ragged step's on
  # the cuda backend, the plan file the reference's for those counts.
  for w in inprocess gpu; do
    n=plan_ragged_$w
    where=(--backend cuda)
    [ "$w" = gpu ] && where=(--world gpu --devices 0,0,0,0,0,0,0,0)
    rm -f "$LOGS/$n.json" "$LOGS/${n}_problem.json"
    step "$n" 60 "$HERE/bin/moonep-plan" --ragged --seed 7 "${where[@]}" --steps 20 \
      --save-problem "$LOGS/${n}_problem.json" --output "$LOGS/$n.json"
    grep -q "a ragged step of T = " "$LOGS/$n.log" && grep -q "backend cuda" "$LOGS/$n.log" ||
      SUMMARY+=("$(printf '%-22s %-14s' "$n-summary" 'FAIL(not a ragged step on cuda)')")
    step "${n}_check" 60 "$HERE/bin/moonep_check_plan_file" "$LOGS/${n}_problem.json" "$LOGS/$n.json"
  done
fi
fi

# ---- the Kokkos-CUDA build: Planner<Kokkos::Cuda> on both paths ----
K=$HERE/kokkos-cuda
if [ -d "$K" ]; then
  export LD_LIBRARY_PATH="$K/lib:$LD_LIBRARY_PATH"
  for t in "$K"/bin/test_portable_* "$K"/bin/test_gpu_world_planner "$K"/bin/test_planner_concept \
           "$K"/bin/test_layer_portable "$K"/bin/test_expert_copies "$K"/bin/test_moe_layer \
           "$K"/bin/test_layer_concept; do
    [ -x "$t" ] || continue
    n=kokkos_$(basename "$t")
    step "$n" 300 "$t" --durations yes
    backtrace_if_crashed "$n" "$t"
  done
  if [ -n "$SAN" ]; then
    step kokkos_memcheck_bad_input 300 "$SAN" --tool memcheck --error-exitcode 9 \
      "$K/bin/test_portable_bad_input" "bad routing is rejected*"
    # The layer's kernels on plans whose views were corrupted: nothing out of bounds.
    [ -x "$K/bin/test_layer_portable" ] && step kokkos_memcheck_layer 300 "$SAN" --tool memcheck --error-exitcode 9 \
      "$K/bin/test_layer_portable" "whatever the plan*"
  fi
  # The portable phases on the GPU (host_sweep's portable planner runs on
  # Kokkos' default space, Cuda) against the specialization (moonep-plan
  # --backend cuda), at the headline but S.
  for S in 512 4096 8192; do
    step "kokkos_sweep_S$S" 120 "$K/bin/host_sweep" --point 8 256 8 "$S" 32 128 1 --steps 11
    step "kokkos_plan_cuda_S$S" 60 "$K/bin/moonep-plan" --tokens "$S" --copy-slots 32 --steps 20
  done
  step kokkos_plan_portable 60 "$K/bin/moonep-plan" --steps 20 --backend portable
  # The portable step back to back on the GPU, launches and fences per
  # step, next to the specialization in the same run; S 512..16384.
  [ -x "$K/bin/portable_step_bench" ] && step kokkos_portable_step_bench 300 "$K/bin/portable_step_bench" \
    --steps 200 --sweep --fences
  # moonep-layer --backend portable on Kokkos::Cuda, every element type
  # (bf16 included), against the direct layer as the CLI tests check it.
  if [ -x "$K/bin/moonep-layer" ] && [ -x "$K/bin/layer_cli_files" ]; then
    for dtype in float double bf16; do
      W=$LOGS/layer_cli_$dtype
      rm -rf "$W" && mkdir -p "$W"
      step "kokkos_layer_$dtype" 120 bash -c "'$K/bin/layer_cli_files' make '$W' 4 16 4 12 2 4 5 7 fine &&
        '$K/bin/moonep-layer' --input '$W/problem.json' --x '$W/x.npy' --weights '$W/w.npy' --output '$W/out.npy' \
          --recv '$W/recv.npy' --grad-out '$W/g.npy' --grad-x '$W/gx.npy' --grad-weights '$W/gw.npy' \
          --backend portable --dtype $dtype &&
        '$K/bin/layer_cli_files' check '$W' $dtype"
    done
  fi
else
  SUMMARY+=("$(printf '%-22s %-14s' kokkos-cuda 'not bundled')")
fi

echo
echo "=== portable phases (host_sweep) against the specialization (moonep-plan --backend cuda)"
for S in 512 4096 8192; do
  grep -h -i "portable" "$LOGS/kokkos_sweep_S$S.log" 2>/dev/null | tail -n 2
  grep -h -i "per step" "$LOGS/kokkos_plan_cuda_S$S.log" 2>/dev/null | tail -n 1
done
echo
echo "=== the portable step back to back (portable_step_bench)"
cat "$LOGS/kokkos_portable_step_bench.log" 2>/dev/null
echo
echo "=== benchmark table"
sed -n '/^config/,$p' "$LOGS/benchmark.log" 2>/dev/null
sed -n '/^one GPU per rank/,$p' "$LOGS/world_benchmark.log" 2>/dev/null
echo
echo "=== summary"
printf '%s\n' "${SUMMARY[@]}" | tee "$LOGS/summary.txt"
