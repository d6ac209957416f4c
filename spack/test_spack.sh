#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# spack/test_spack.sh — the recipe under a real Spack, offline, as a cluster
# user would run it (spack/README.md#a-real-spack-run-scripted):
#   setup    Spack from $MOONEP_SHARED_DIR/spack (its README): Spack core, the
#            builtin packages, clingo, the compiler-wrapper source in a local
#            mirror; compilers and Debian's externals (Kokkos 3.4.01, Open
#            MPI, CMake, nlohmann-json, Catch2, CUDA 13 at /usr/local/cuda).
#   spec     `spack spec` of moonep, moonep~mpi, moonep+openmp,
#            moonep+cuda cuda_arch=90 (CUDA 13, the external) and the same
#            with ^cuda@12; each concretized Kokkos is checked.
#   install  `spack install` of moonep@main from a copy of this working tree
#            (a `spack develop` environment), against the external Kokkos.
#   test     `spack test run moonep`.
#   load     a downstream CMake project (unit_tests/install_test) finds the
#            installed MoonEP through `spack load moonep`, builds and runs.
#   spack/test_spack.sh [spec] [install]   runs those (default both; install
#   brings test and load with it); setup always runs (once).
# Each step prints a line "STEP <step>: OK|FAILED — ..." and the script ends
# with "RESULT test_spack.sh: OK|FAILED — ..."; it stops at the first failed
# step (the later ones need it). Everything lives in $MOONEP_SPACK_DIR
# (default build-spack/, ignored by git); Spack itself is set up once there
# (about 2 minutes; a stamp file keeps it), the install tree is made afresh
# on every run. Needs Debian's python3-cffi-backend (scripts/install_deps.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
shared="${MOONEP_SHARED_DIR:-$repo/../shared}/spack"
W="${MOONEP_SPACK_DIR:-$repo/build-spack}"
mkdir -p "$W"
W="$(cd "$W" && pwd)"
start=$SECONDS
log="$W/step.log"

finish() {  # finish OK|FAILED TEXT
  echo "RESULT test_spack.sh: $1 — $2 [$((SECONDS - start)) s]"
  [[ $1 == OK ]]
  exit $?
}
step_ok() { echo "STEP $1: OK — $2 [$((SECONDS - step_start)) s]"; }
step_failed() {
  echo "STEP $1: FAILED — $2 [$((SECONDS - step_start)) s]"
  finish FAILED "step $1: $2"
}

# run CMD...: echo it, run it with its output in $log (and on stdout).
run() {
  echo "\$ $*"
  "$@" 2>&1 | tee "$log"
  return "${PIPESTATUS[0]}"
}

if [[ ! -d "$shared" ]]; then
  finish FAILED "no $shared (set MOONEP_SHARED_DIR; its README says what it holds)"
fi
if ! /usr/bin/python3 -c 'import _cffi_backend' 2>/dev/null; then
  finish FAILED "Spack's concretizer needs Debian's python3-cffi-backend (scripts/install_deps.sh installs it)"
fi

export SPACK_PYTHON=/usr/bin/python3 PYTHONPATH="$W/clingo-py"
export SPACK_USER_CONFIG_PATH="$W/uc" SPACK_USER_CACHE_PATH="$W/cache"
export PATH="$W/spack/bin:$PATH"
unset SPACK_DISABLE_LOCAL_CONFIG SPACK_ROOT

# The repositories: the builtin one and this checkout's (written on every
# run: the checkout may have moved).
write_repos() {
  mkdir -p "$W/uc"
  cat >"$W/uc/repos.yaml" <<EOF
repos:
  moonep: $repo/spack/spack_repo/moonep
  builtin: $W/spack-packages/repos/spack_repo/builtin
EOF
}

# Steps to run (arguments; default both): spec, install (with test and load).
steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=(spec install)
for st in "${steps[@]}"; do
  [[ $st == spec || $st == install ]] || { echo "test_spack.sh: unknown step '$st' (spec or install)" >&2; exit 2; }
done
want() { [[ " ${steps[*]} " == *" $1 "* ]]; }

# ---------------------------------------------------------------- setup
step_start=$SECONDS
stamp="$W/.setup-done"
if [[ ! -f "$stamp" ]]; then
  echo "== test_spack.sh: setting Spack up in $W"
  rm -rf "$W/spack" "$W/spack-packages" "$W/clingo-py" "$W/mirror" "$W/uc" "$W/cache"
  for t in "$shared"/spack-*.tar.xz; do tar -xJf "$t" -C "$W"; done
  mkdir -p "$W/clingo-py" && tar -xJf "$shared"/clingo-*.tar.xz -C "$W/clingo-py"
  # The one source every install fetches, under the sha256 of its recipe.
  sha=$(sha256sum "$shared/compiler-wrapper-1.1.0.tar.gz" | cut -d' ' -f1)
  mkdir -p "$W/mirror/_source-cache/archive/${sha:0:2}"
  cp "$shared/compiler-wrapper-1.1.0.tar.gz" "$W/mirror/_source-cache/archive/${sha:0:2}/$sha.tar.gz"
  mkdir -p "$W/uc"
  cat >"$W/uc/mirrors.yaml" <<EOF
mirrors:
  local: {url: file://$W/mirror, source: true, binary: false}
EOF
  cat >"$W/uc/config.yaml" <<EOF
config:
  install_tree: {root: $W/opt}
  build_stage: [$W/stage]
  test_stage: $W/test-stage
  source_cache: $W/source-cache
  misc_cache: $W/cache/misc
  build_jobs: ${MOONEP_BUILD_JOBS:-2}
EOF
  write_repos
  for b in github-actions-v2 github-actions-v0.6 spack-install; do
    spack bootstrap disable --scope user "$b" >/dev/null
  done
  run spack compiler find --scope user || step_failed setup "spack compiler find failed"
  spack compiler list | grep -q 'gcc@' || step_failed setup "spack compiler find found no GCC"
  # Open MPI's detection needs the compilers found first.
  run spack external find --scope user --not-buildable cmake gmake openmpi ||
    step_failed setup "spack external find failed"
  grep -q 'openmpi@' "$W/uc/packages.yaml" || step_failed setup "spack external find found no Open MPI"
  # Debian's other packages. Kokkos and CUDA stay buildable so that the
  # +openmp and +cuda specs concretize (a Kokkos with those backends, CUDA
  # 12); a plain spec reuses the externals (nothing is downloaded: only
  # moonep, gcc-runtime and the compiler wrapper are built).
  cat >"$W/debian.yaml" <<'EOF'
packages:
  kokkos:
    externals:
    - {spec: "kokkos@3.4.01+serial~openmp~cuda~wrapper cxxstd=14", prefix: /usr}
  nlohmann-json:
    buildable: false
    externals:
    - {spec: nlohmann-json@3.11.2, prefix: /usr}
  catch2:
    buildable: false
    externals:
    - {spec: catch2@2.13.10, prefix: /usr}
  cuda:
    externals:
    - {spec: cuda@13.0.88, prefix: /usr/local/cuda}
EOF
  run spack config --scope user add -f "$W/debian.yaml" || step_failed setup "spack config add failed"
  touch "$stamp"
fi
write_repos
run spack --version
run spack repo list
spack bootstrap status >"$log" 2>&1 || true
cat "$log"
if ! grep -q '\[PASS\] Core Functionalities' "$log"; then
  step_failed setup "spack bootstrap status: the core requirements are not met (clingo?)"
fi
step_ok setup "Spack $(spack --version), clingo from $shared"

# ---------------------------------------------------------------- spec
# spec_check SPEC PATTERN WHAT: `spack spec SPEC` concretizes and its output
# has a line matching PATTERN (an extended regex).
spec_check() {
  local spec=$1 pattern=$2 what=$3
  # shellcheck disable=SC2086  # the spec is words
  run spack spec -l $spec || step_failed spec "spack spec $spec did not concretize"
  grep -Eq -- "$pattern" "$log" || step_failed spec "spack spec $spec: no $what (/$pattern/)"
  echo "  -> $(spec_summary "$log")"
}
# spec_summary LOG: one line: MoonEP's compiler, Kokkos and CUDA as
# concretized ([e] external, [-] to be built).
spec_summary() {
  local k c
  k=$(grep -E '\^kokkos@' "$1" | head -n1)
  c=$(grep -E '\^cuda@' "$1" | head -n1 || true)
  printf 'moonep %s; kokkos@%s %s %s' \
    "$(grep -Eo '%cxx=[^ ]+' "$1" | head -n1)" \
    "$(sed -E 's/.*\^kokkos@([^~+ ]+).*/\1/' <<<"$k")" \
    "$(grep -Eo '^\[e\]|^ -  ' <<<"$k" | sed 's/ -  /[built]/')" \
    "$(grep -Eo '[+~](serial|openmp|cuda|wrapper)\b|cxxstd:?=[0-9]+' <<<"$k" | paste -sd' ')"
  [[ -z "$c" ]] || printf '; cuda@%s %s' "$(sed -E 's/.*\^cuda@([^~+ ]+).*/\1/' <<<"$c")" \
    "$(grep -Eo '^\[e\]|^ -  ' <<<"$c" | sed 's/ -  /[built]/')"
  echo
}
if want spec; then
step_start=$SECONDS
spec_check "moonep" '^\[e\].*\^kokkos@3\.4\.01' "external Kokkos 3.4.01"
spec_check "moonep~mpi" '^\[e\].*\^kokkos@3\.4\.01' "external Kokkos 3.4.01"
spec_check "moonep+openmp" '\^kokkos@[^ ]*.*\+openmp' "Kokkos +openmp"
spec_check "moonep+cuda cuda_arch=90" '\^kokkos@[^ ]*.*\+cuda.*\+wrapper' "Kokkos +cuda +wrapper"
grep -Eq '\^cuda@13' "$log" || step_failed spec "moonep+cuda cuda_arch=90: not CUDA 13"
spec_check "moonep+cuda cuda_arch=90 ^cuda@12" '\^kokkos@[^ ]*.*\+cuda.*\+wrapper' "Kokkos +cuda +wrapper"
grep -Eq '\^cuda@12' "$log" || step_failed spec "moonep+cuda cuda_arch=90 ^cuda@12: not CUDA 12"
step_ok spec "moonep, ~mpi, +openmp, +cuda cuda_arch=90 with CUDA 13 and 12 concretize"
fi
if ! want install; then
  finish OK "setup, spec"
fi

# ---------------------------------------------------------------- install
step_start=$SECONDS
# A fresh install tree and a copy of the working tree (tracked and
# untracked, not ignored files) as the develop source of moonep@main.
rm -rf "$W/opt" "$W/stage" "$W/test-stage" "$W/src" "$W/env"
mkdir -p "$W/src"
git ls-files -z --cached --others --exclude-standard | tar -cf - --null -T - | tar -xf - -C "$W/src"
run spack env create -d "$W/env" >/dev/null
run spack -e "$W/env" develop --no-clone -p "$W/src" moonep@=main || step_failed install "spack develop failed"
run spack -e "$W/env" add moonep@main || step_failed install "spack add failed"
if ! run spack -e "$W/env" install --fail-fast; then
  tail -n 40 "$W"/src/spack-build-out.txt 2>/dev/null || true
  step_failed install "spack install moonep@main failed"
fi
run spack find -lv moonep || step_failed install "spack find moonep found nothing"
step_ok install "moonep@main installed in $W/opt"

# ---------------------------------------------------------------- test
step_start=$SECONDS
run spack test run moonep || step_failed test "spack test run moonep failed"
grep -Eq '([0-9]+) passed of \1 specs?' "$log" || step_failed test "spack test run moonep: not every spec passed"
spack test results -l >"$log" 2>&1 || true
grep -E 'moonep-plan [0-9]|built with|Moonep::test_|passed of' "$log"
grep -q 'Moonep::test_moonep_plan .. PASSED' "$log" || step_failed test "spack test results: test_moonep_plan did not pass"
step_ok test "spack test run moonep passed (test_moonep_plan)"

# ---------------------------------------------------------------- load
step_start=$SECONDS
down="$W/downstream"
rm -rf "$down"
(
  eval "$(spack load --sh moonep)"
  echo "CMAKE_PREFIX_PATH=$CMAKE_PREFIX_PATH"
  run cmake -S "$repo/unit_tests/install_test" -B "$down" -DMOONEP_COMPONENTS=mpi &&
    run cmake --build "$down" && run "$down/moonep_downstream"
) || step_failed load "the downstream project did not build or run through spack load moonep"
grep -q "$W/opt" "$down/CMakeCache.txt" || step_failed load "the downstream project did not take MoonEP from $W/opt"
step_ok load "unit_tests/install_test found MoonEP through spack load moonep, built and ran"

finish OK "setup, $(want spec && echo 'spec, ')install, test, load"
