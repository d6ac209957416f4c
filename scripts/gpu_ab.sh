#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# gpu_ab.sh NAME[@REV][:CUDA_FLAGS] ... — build CUDA kernel variants for an
# A/B on a GPU machine: builds of this checkout with other CUDA flags, or of
# another revision (@REV, e.g. the commit before a kernel change), e.g.
#   scripts/gpu_ab.sh base@da98188 new
#   scripts/gpu_ab.sh base "r80:-DMOONEP_CUDA_MAX_REGS=80" "t384:-DMOONEP_CUDA_BLOCK_THREADS=384 -DMOONEP_CUDA_UNVERIFIED_SHAPE"
# Each NAME gets its own folder build-ab-NAME (Release, sm_90; REV checked
# out in build-ab-NAME/src as a detached worktree and built with that
# revision's own scripts/bundle_gpu.sh); only the first of bundle_gpu.sh's
# builds is made (Debian's Kokkos + the CUDA specialization). Its
# test_cuda_planner, test_gpu_world and moonep_gpu_bench go to
# .bundle/NAME; the shared libraries they need to .bundle/lib once, and
# .bundle/ab.sh runs on the GPU machine:
#   bash .bundle/ab.sh [NAME ...]   (default: every variant, in order,
#                                    AB_ROUNDS times, default 3)
# Per variant it runs the unit tests (pass/fail line; once per variant
# unless AB_RETEST=1) and
# `moonep_gpu_bench 500 --headline`; the whole logs go to $OUT/ab.log (or
# ./ab_out), and the headline rows of every variant come last, side by side.
# A variant's build folder is reused while its flags and revision stay the
# same. BUNDLE=DIR puts the bundle elsewhere (default .bundle).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUNDLE=${BUNDLE:-$ROOT/.bundle}
[ $# -ge 1 ] || { sed -n '2,22p' "$0" >&2; exit 2; }
mkdir -p "$BUNDLE"
names=()
for spec in "$@"; do
  name=${spec%%:*}
  flags=""
  [[ "$spec" == *:* ]] && flags=${spec#*:}
  rev=""
  if [[ "$name" == *@* ]]; then rev=${name#*@}; name=${name%%@*}; fi
  [[ "$name" =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "gpu_ab.sh: bad variant name '$name'" >&2; exit 2; }
  src=$ROOT
  build="$ROOT/build-ab-$name"
  stamp="flags=$flags rev="
  if [ -n "$rev" ]; then
    commit=$(git -C "$ROOT" rev-parse --verify -q "$rev^{commit}") ||
      { echo "gpu_ab.sh: '$rev' (variant $name) is not a commit of this repository" >&2; exit 2; }
    stamp+=$commit
  fi
  names+=("$name")
  echo "gpu_ab.sh: building $name (${rev:+revision $rev, }${flags:-no extra flags})"
  # CMake takes CUDAFLAGS only when it first configures a folder.
  if [ -d "$build" ] && [ "$(cat "$build/AB_FLAGS" 2>/dev/null)" != "$stamp" ]; then
    [ -d "$build/src" ] && git -C "$ROOT" worktree remove --force "$build/src"
    rm -rf "$build"
  fi
  mkdir -p "$build"
  if [ -n "$rev" ]; then
    src="$build/src"
    [ -d "$src" ] || git -C "$ROOT" worktree add -q --detach "$src" "$commit"
  fi
  echo "$stamp" > "$build/AB_FLAGS"
  tmp=$(mktemp -d)
  CUDAFLAGS="$flags" BUILD_DIR="$build/build" MOONEP_BUNDLE_MPI=0 KOKKOS_CUDA_TARBALL=/nonexistent \
    MOONEP_SHARED_DIR="${MOONEP_SHARED_DIR:-$ROOT/../shared}" "$src/scripts/bundle_gpu.sh" "$tmp" > "$tmp.log" 2>&1 ||
    { tail -20 "$tmp.log" >&2; echo "gpu_ab.sh: building $name failed (log: $tmp.log)" >&2; exit 1; }
  mkdir -p "$BUNDLE/$name" "$BUNDLE/lib"
  cp "$tmp/bin/test_cuda_planner" "$tmp/bin/moonep_gpu_bench" "$BUNDLE/$name/"
  [ -x "$tmp/bin/test_gpu_world" ] && cp "$tmp/bin/test_gpu_world" "$BUNDLE/$name/"
  cp -n "$tmp"/lib/* "$BUNDLE/lib/" 2>/dev/null || true
  echo "${rev:+revision $rev ($commit) }${flags:-no extra flags}" > "$BUNDLE/$name/FLAGS"
  rm -rf "$tmp" "$tmp.log"
done
cat > "$BUNDLE/ab.sh" <<'RUN'
#!/usr/bin/env bash
# ab.sh [NAME ...] — run on the GPU machine (made by scripts/gpu_ab.sh).
HERE=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$HERE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# No NVLink multicast object on a shared machine, whatever a build offers.
export MOONEP_FORBID_MULTICAST=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
LOGS=${OUT:-$PWD/ab_out}
mkdir -p "$LOGS"
variants=("$@")
if [ ${#variants[@]} -eq 0 ]; then
  for d in "$HERE"/*/; do [ -x "$d/moonep_gpu_bench" ] && variants+=("$(basename "$d")"); done
  once=("${variants[@]}")  # alternated, AB_ROUNDS times, to see the noise
  for ((i = 1; i < ${AB_ROUNDS:-3}; i++)); do variants+=("${once[@]}"); done
fi
rows=()
declare -A tested
for v in "${variants[@]}"; do
  log=$(mktemp)
  {
    echo "################ $v ($(cat "$HERE/$v/FLAGS" 2>/dev/null))"
    # The unit tests once per variant (AB_RETEST=1: every time it runs).
    if [ -z "${tested[$v]:-}" ] || [ -n "${AB_RETEST:-}" ]; then
      timeout 150 "$HERE/$v/test_cuda_planner" 2>&1 | tail -2
      tested[$v]=1
    fi
    timeout 90 "$HERE/$v/moonep_gpu_bench" 500 --headline 2>&1
  } > "$log" 2>&1
  cat "$log" >> "$LOGS/ab.log"
  grep -E "^####|All tests passed|failed" "$log"
  while IFS= read -r line; do rows+=("$(printf '%-12s %s' "$v" "$line")"); done < <(grep -E "^R=" "$log")
  rm -f "$log"
done
echo
echo "=== headline rows (variant, config, bpr, kernel, correct, step_us, graph_us, floor_us, floorg_us, ...)"
printf '%s\n' "${rows[@]}"
RUN
chmod +x "$BUNDLE/ab.sh"
du -sh "$BUNDLE"
echo "gpu_ab.sh: carry $BUNDLE to the GPU machine and run: bash .bundle/ab.sh"
