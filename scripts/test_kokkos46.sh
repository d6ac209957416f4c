#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# scripts/test_kokkos46.sh [LEG...] — MoonEP against upstream Kokkos 4.6.01
# and Kokkos' development line (scripts/test.sh covers Debian's Kokkos 3.4). .ci/run runs it after
# test.sh when the shared Kokkos folder exists; developers can run it too.
# Legs (default: all three, in this order):
#   openmp  Kokkos 4.6.01 Serial+OpenMP with Kokkos Kernels 4.6.01: configure,
#           build everything, run the CTest suite (but test_mpi_cli_agreement:
#           see kokkos_free_tests) with OMP_NUM_THREADS=2;
#           then configure once more without KokkosKernels_ROOT to check that
#           no other Kokkos Kernels (Debian's) is taken: moe_layer is skipped.
#   cuda    Kokkos 4.6.01 Serial+Cuda (sm_90) with nvcc_wrapper and the CUDA
#           specialization: build only (no GPU driver here, so no program
#           can start) of what plans through Kokkos::Cuda or CUDA: the
#           library, moonep-plan, the portable tests, the portable layer's
#           tests (bf16 device code included), the portable benchmarks;
#           without MPI, examples and the Kokkos-free CUDA tests (test.sh
#           builds those; see leg_cuda for why).
#   develop Kokkos' development line of 2025-06-20 (4.6.99; what 5.0 turns on
#           by default: C++20, the mdspan-based View, deprecated code off),
#           Serial + Threads (the default space): configure with -Wall
#           -Wextra, build everything, check that every command seeing
#           Kokkos' headers is C++20
#           and that no warning comes from include/moonep, src or examples, run the
#           CTest suite (as the openmp leg's). It stands for Kokkos 4.7 and 5.0.
# Each leg prints a banner and ends with one line "RESULT <leg>: ...".
# The script fails if any leg failed, after running all the asked-for legs.
#
# The Kokkos builds are the tarballs of $MOONEP_SHARED_DIR/kokkos (default
# <repo>/../shared; see its README.md), unpacked into $MOONEP_K46_DIR/deps
# (default build-k46/deps, ignored by git) once per tarball; each leg builds
# in $MOONEP_K46_DIR/<leg>. MOONEP_BUILD_JOBS: parallel compile jobs (default:
# the number of cores). Needs the Debian packages of scripts/install_deps.sh
# (test.sh installs them) and, for the cuda leg, /usr/local/cuda.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD

shared="${MOONEP_SHARED_DIR:-$repo/../shared}"
kokkos_dir="$shared/kokkos"
top="${MOONEP_K46_DIR:-build-k46}"
jobs="${MOONEP_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
cuda_bin=/usr/local/cuda/bin

legs=("$@")
[[ ${#legs[@]} -gt 0 ]] || legs=(openmp cuda develop)
for leg in "${legs[@]}"; do
  case "$leg" in
    openmp|cuda|develop) ;;
    *) echo "test_kokkos46.sh: unknown leg '$leg' (expected openmp, cuda or develop)" >&2; exit 2 ;;
  esac
done

if [[ ! -d "$kokkos_dir" ]]; then
  echo "test_kokkos46.sh: no Kokkos builds: $kokkos_dir does not exist (set MOONEP_SHARED_DIR)" >&2
  exit 1
fi
mkdir -p "$top/deps"
top="$(cd "$top" && pwd)"
deps="$top/deps"

# unpack NAME: $deps/NAME from $kokkos_dir/NAME.tar.gz (again if the tarball
# is newer than the last unpacking); prints the prefix.
unpack() {
  local name=$1 tarball="$kokkos_dir/$1.tar.gz" stamp="$deps/.$1.unpacked"
  if [[ ! -f "$tarball" ]]; then
    echo "test_kokkos46.sh: missing $tarball (see $kokkos_dir/README.md)" >&2
    return 1
  fi
  if [[ ! -f "$stamp" || "$tarball" -nt "$stamp" || ! -d "$deps/$name" ]]; then
    echo "test_kokkos46.sh: unpacking $tarball" >&2
    rm -rf "${deps:?}/$name" "$deps/.$name.tmp"
    mkdir -p "$deps/.$name.tmp"
    tar -xzf "$tarball" -C "$deps/.$name.tmp"
    if [[ ! -d "$deps/.$name.tmp/$name" ]]; then
      echo "test_kokkos46.sh: $tarball does not unpack to one folder $name/" >&2
      return 1
    fi
    mv "$deps/.$name.tmp/$name" "$deps/$name"
    rmdir "$deps/.$name.tmp"
    touch "$stamp"
  fi
  echo "$deps/$name"
}

banner() {
  echo
  echo "=================================================================="
  echo "== test_kokkos46.sh leg $1: $2"
  echo "=================================================================="
}

declare -a results=()
failed=0
result() {  # result LEG OK|FAILED TEXT
  local line="RESULT $1: $2 — $3"
  echo "$line"
  results+=("$line")
  [[ $2 == OK ]] || failed=1
}

# configure DIR ARGS...: a Release/Ninja configure from a fresh cache (what
# was built before stays: a second run rebuilds only what changed); the log
# in DIR.configure.log.
configure() {
  local dir=$1; shift
  mkdir -p "$dir"
  rm -f "$dir/CMakeCache.txt"
  cmake -S "$repo" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" 2>&1 | tee "$dir.configure.log"
}

# build DIR [--target T...]: everything (or the targets), going on past a
# failure so that one broken file does not hide the others; sets
# build_steps and build_failed (the number of failed commands) and lists
# the failures.
build() {
  local dir=$1 rc=0
  shift
  cmake --build "$dir" -j "$jobs" "$@" -- -k 0 2>&1 | tee "$dir.build.log" || rc=$?
  build_steps=$(sed -n 's/^\[[0-9]*\/\([0-9]*\)\].*/\1/p' "$dir.build.log" | tail -n1)
  build_failed=$(grep -c '^FAILED: ' "$dir.build.log" || true)
  if [[ $rc -ne 0 && $build_failed -eq 0 ]]; then build_failed=1; fi
  if [[ $build_failed -ne 0 ]]; then
    echo "--- failed build commands:"
    grep '^FAILED: ' "$dir.build.log" || true
  fi
  return 0
}

# targets_matching DIR ALTERNATIVES: the build's targets whose whole name
# matches one of the sed alternatives (a\|b_[a-z]*), one line, sorted.
targets_matching() {
  cmake --build "$1" --target help | sed -n "s/^\($2\): .*/\1/p" | sort -u | paste -sd' '
}

# run_ctest DIR ARGS...: sets tests_summary ("N passed, F failed, S skipped
# of T") and tests_ok.
run_ctest() {
  local dir=$1; shift
  local rc=0
  (cd "$dir" && ctest --output-on-failure "$@") 2>&1 | tee "$dir.ctest.log" || rc=$?
  local line total failed_n skipped
  line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$dir.ctest.log" | tail -n1 || true)
  if [[ -z "$line" ]]; then
    tests_summary="ctest gave no summary (exit $rc)"
    tests_ok=0
    return 0
  fi
  total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
  failed_n=$(sed -E 's/.* ([0-9]+) tests? failed.*/\1/' <<<"$line")
  skipped=$(grep -cE '^[[:space:]]*[0-9]+ - .*\((Skipped|Disabled)\)$' "$dir.ctest.log" || true)
  tests_summary="$((total - failed_n - skipped)) passed, $failed_n failed, $skipped skipped of $total tests"
  if [[ $rc -eq 0 && $failed_n -eq 0 ]]; then tests_ok=1; else tests_ok=0; fi
}

# The MPI tests run mpirun; CI containers run as root, with fewer cores than
# some tests have ranks (as in test.sh). The MPI tests set OMP_WAIT_POLICY
# themselves (unit_tests/tests_mpi.cmake says why).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1

# Left out of the openmp and develop legs' CTest runs: test_mpi_cli_agreement
# starts moonep-plan under mpirun some twenty times and waits out its
# --mpi-timeout cases: about 65 s of a leg's wall time each. What it
# checks (processes agreeing on their options and input, timeouts, one
# error line) is the CLI's host code over MPI, the same whatever the
# Kokkos; test.sh runs it.
kokkos_free_tests='^test_mpi_cli_agreement$'

leg_openmp() {
  banner openmp "Kokkos 4.6.01 OpenMP + Kokkos Kernels 4.6.01, CTest suite, OMP_NUM_THREADS=2"
  local kokkos kk dir="$top/openmp"
  kokkos=$(unpack kokkos-4.6.01-openmp) && kk=$(unpack kokkos-kernels-4.6.01-openmp) || {
    result openmp FAILED "Kokkos tarballs missing"; return 0; }
  if ! configure "$dir" -DKokkos_ROOT="$kokkos" -DKokkosKernels_ROOT="$kk" -DMoonEP_ENABLE_CUDA=OFF; then
    result openmp FAILED "configure failed (see above)"; return 0
  fi
  # One Kokkos per binary: nothing of Debian's Trilinos-packaged Kokkos.
  if grep -q trilinos "$dir/build.ninja"; then
    result openmp FAILED "the build links Debian's Trilinos Kokkos beside Kokkos 4.6: $(grep -o '[^ ]*trilinos[^ ]*' "$dir/build.ninja" | sort -u | head -n3 | tr '\n' ' ')"
    return 0
  fi
  build "$dir"
  if [[ $build_failed -ne 0 ]]; then
    result openmp FAILED "build: $build_failed of $build_steps commands failed"; return 0
  fi
  # OMP_PROC_BIND stays unset, as for most users: Kokkos then warns on
  # stderr at initialize, which the CLI tests must (and do) tolerate.
  # As many tests at once as cores (the MPI tests and install_test still
  # alone), their OpenMP threads waiting passively, so that two tests'
  # spinning threads do not take the cores from each other (as in
  # tests_mpi.cmake).
  OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive run_ctest "$dir" -j "$jobs" -E "$kokkos_free_tests"
  if [[ $tests_ok -ne 1 ]]; then
    result openmp FAILED "build OK ($build_steps commands); tests: $tests_summary"; return 0
  fi

  # Without KokkosKernels_ROOT: Debian's Kokkos Kernels (for its Kokkos 3.4)
  # is there, but must not be taken; the MoE layer example is skipped.
  local nokk="$top/openmp-no-kk"
  if ! configure "$nokk" -DKokkos_ROOT="$kokkos" -DMoonEP_ENABLE_CUDA=OFF >/dev/null; then
    result openmp FAILED "tests: $tests_summary; configure without KokkosKernels_ROOT failed ($nokk.configure.log)"
    return 0
  fi
  if grep -q trilinos "$nokk/build.ninja" || ! grep -q 'examples/moe_layer skipped' "$nokk.configure.log"; then
    result openmp FAILED "tests: $tests_summary; without KokkosKernels_ROOT the build still uses a Kokkos Kernels ($nokk.configure.log)"
    return 0
  fi
  echo "without KokkosKernels_ROOT: $(grep 'examples/moe_layer skipped' "$nokk.configure.log")"
  rm -rf "$nokk"
  result openmp OK "build OK ($build_steps commands); tests: $tests_summary; without KokkosKernels_ROOT: moe_layer skipped, no Debian Kokkos Kernels"
}

leg_cuda() {
  banner cuda "Kokkos 4.6.01 CUDA (sm_90) + CUDA specialization, build only"
  local kokkos dir="$top/cuda"
  kokkos=$(unpack kokkos-4.6.01-cuda13-sm90) || { result cuda FAILED "Kokkos tarball missing"; return 0; }
  if [[ ! -x "$cuda_bin/nvcc" ]]; then
    result cuda FAILED "no $cuda_bin/nvcc"; return 0
  fi
  # Trimmed, as everything is slow under nvcc_wrapper (untrimmed, this leg
  # took 18 min on a busy 2-core machine): MPI off (host code, built and
  # tested by the other legs; the GPU bundle is built without MPI too),
  # examples off (moe_layer needs a Kokkos Kernels over this Kokkos, which
  # we lack; minimal's code is the unit tests'), and only the targets that
  # plan through Kokkos::Cuda: the library (with the CUDA specialization),
  # moonep-plan, every test_portable_* (Planner<Kokkos::Cuda>, both paths),
  # test_gpu_world_planner (Planner<Kokkos::Cuda> over a GPU world),
  # host_sweep, portable_step_bench, and the portable layer's tests
  # (InProcessLayer, InProcessExpertCopies, InProcessMoeLayer on
  # Kokkos::Cuda in float, double and bf16: device code). The host-only
  # tests (reference, I/O, CLI, reliability) and the Kokkos-free CUDA
  # tests and benchmark (test_cuda_*, test_gpu_world, test_gpu_world_layer,
  # ..._expert_copies, ..._moe_layer, moonep_gpu_bench: no Kokkos in them)
  # compile the same code as test.sh's build, which has the CUDA
  # specialization where /usr/local/cuda is (about half of this leg's
  # compile time when built here too). The portable tests are compiled for
  # Kokkos::Cuda alone (MoonEP_TEST_DEVICE_SPACES_ONLY): their Serial
  # variants are the other legs' code (under nvcc_wrapper the layer tests
  # alone took over 6 of this leg's 19 CPU minutes, about half of it Serial's).
  if ! PATH="$cuda_bin:$PATH" configure "$dir" -DKokkos_ROOT="$kokkos" \
       -DCMAKE_CXX_COMPILER="$kokkos/bin/nvcc_wrapper" -DMoonEP_ENABLE_CUDA=ON \
       -DMoonEP_CUDA_ARCHITECTURES=90 -DMoonEP_ENABLE_MPI=OFF -DMoonEP_ENABLE_EXAMPLES=OFF \
       -DMoonEP_TEST_DEVICE_SPACES_ONLY=ON; then
    result cuda FAILED "configure failed (see above)"; return 0
  fi
  local targets
  targets=$(targets_matching "$dir" \
    'moonep\|moonep-plan\|test_portable_[a-z_]*\|test_gpu_world_planner\|host_sweep\|portable_step_bench\|test_layer_portable\|test_expert_copies\|test_moe_layer\|test_layer_concept')
  echo "test_kokkos46.sh: cuda leg targets: $targets"
  if ! grep -q 'test_portable_vs_reference' <<<"$targets" || ! grep -q 'test_gpu_world_planner' <<<"$targets"; then
    result cuda FAILED "the build lists no Planner<Kokkos::Cuda> tests (targets: $targets)"; return 0
  fi
  # shellcheck disable=SC2086  # one word per target
  PATH="$cuda_bin:$PATH" build "$dir" --target $targets
  if [[ $build_failed -ne 0 ]]; then
    result cuda FAILED "build: $build_failed of $build_steps commands failed: $(grep '^FAILED: ' "$dir.build.log" | sed 's/^FAILED: //; s/ *$//' | paste -sd' ')"
    return 0
  fi
  # nvcc only warns when device code calls a host-only function (#20011-D,
  # #20014-D), and the program it builds does what it likes there: a host
  # struct's member function called inside a team kernel (a variant tried
  # for issue 37) read out of bounds on an H100. No GPU here to see it, so
  # such a warning from MoonEP's own code fails the leg.
  local host_calls
  host_calls=$(grep -E "^$repo/.*warning #2001[14]-D" "$dir.build.log" | sed -E 's/: warning #2001[14]-D: /: /' | sort -u || true)
  if [[ -n "$host_calls" ]]; then
    echo "--- device code calling host functions:"
    echo "$host_calls"
    result cuda FAILED "nvcc: device code calls host functions ($(wc -l <<<"$host_calls") places, listed above)"
    return 0
  fi
  result cuda OK "build OK ($build_steps commands); no tests run (no GPU driver here)"
}

leg_develop() {
  banner develop "Kokkos develop 2025-06 (4.6.99): Threads, C++20, mdspan View, no deprecated code; CTest suite"
  local kokkos dir="$top/develop"
  kokkos=$(unpack kokkos-develop-2025.06-threads-cxx20) || { result develop FAILED "Kokkos tarball missing"; return 0; }
  # -Wall -Wextra on everything: no warning may come from our headers,
  # sources or examples, what users compile (Kokkos' own headers are system
  # headers here; the test harness is ours alone).
  if ! configure "$dir" -DKokkos_ROOT="$kokkos" -DMoonEP_ENABLE_CUDA=OFF -DCMAKE_CXX_FLAGS="-Wall -Wextra"; then
    result develop FAILED "configure failed (see above)"; return 0
  fi
  build "$dir"
  if [[ $build_failed -ne 0 ]]; then
    result develop FAILED "build: $build_failed of $build_steps commands failed"; return 0
  fi
  # C++20 came with Kokkos' target: every compile command that sees Kokkos'
  # headers says so (two Kokkos-free test helpers stay C++17).
  local n17 n20 warnings
  n20=$(grep -F -- "$kokkos/include" "$dir/compile_commands.json" | grep -c -- '-std=c++20' || true)
  n17=$(grep -F -- "$kokkos/include" "$dir/compile_commands.json" | grep -c -v -- '-std=c++20' || true)
  if [[ $n20 -eq 0 || $n17 -ne 0 ]]; then
    result develop FAILED "build OK but of the commands that include Kokkos $n20 use -std=c++20, $n17 do not"; return 0
  fi
  warnings=$(grep -E "^($repo/)?(include/moonep|src|examples)/[^:]*:[0-9]+:[0-9]+: warning:" "$dir.build.log" | sort -u || true)
  if [[ -n "$warnings" ]]; then
    echo "--- warnings from MoonEP's headers, sources and examples:"; echo "$warnings"
    result develop FAILED "build OK but $(wc -l <<<"$warnings") warnings from include/moonep, src or examples"; return 0
  fi
  run_ctest "$dir" -j "$jobs" -E "$kokkos_free_tests"
  if [[ $tests_ok -ne 1 ]]; then
    result develop FAILED "build OK ($build_steps commands, all -std=c++20, no warnings of ours); tests: $tests_summary"; return 0
  fi
  result develop OK "build OK ($build_steps commands, all -std=c++20, no warnings of ours); tests: $tests_summary"
}

for leg in "${legs[@]}"; do
  start=$SECONDS
  time "leg_$leg"
  results[${#results[@]}-1]+=" [$((SECONDS - start)) s]"
done

echo
echo "== test_kokkos46.sh summary"
printf '%s\n' "${results[@]}"
exit "$failed"
