#!/usr/bin/env bash
# bundle_gpu.sh [BUNDLE_DIR] — build the GPU tests, the GPU benchmark and
# moonep-plan (build dir build-gpu, Release, sm_90) and collect them into a
# relocatable folder (default ./.bundle) for a machine that has a GPU and the
# CUDA driver but no Kokkos/MPI/Catch2: bin/ holds the programs, lib/ every
# shared library ldd resolves except glibc's own and libcuda (the driver),
# run.sh runs a program with LD_LIBRARY_PATH set to lib/, and gpu_checks.sh
# is the one script to run on the device.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUNDLE=${1:-$ROOT/.bundle}
BUILD=${BUILD_DIR:-$ROOT/build-gpu}
JOBS=${JOBS:-2}

cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMoonEP_ENABLE_CUDA=ON -DMoonEP_CUDA_ARCHITECTURES=90 -DMoonEP_ENABLE_MPI=OFF \
  -DMoonEP_ENABLE_TESTS=ON -DMoonEP_ENABLE_PERF_TESTS=ON >/dev/null
targets=(test_cuda_planner moonep_gpu_bench)
if cmake --build "$BUILD" --target help | grep -q '^test_cuda_dispatch:'; then
  targets+=(test_cuda_dispatch)
fi
if cmake --build "$BUILD" --target help | grep -q '^moonep_warp_latency:'; then
  targets+=(moonep_warp_latency)
fi
if cmake --build "$BUILD" --target help | grep -q '^moonep-plan:'; then
  targets+=(moonep-plan)
else
  echo "bundle_gpu.sh: no moonep-plan target in this checkout; bundling without it" >&2
fi
cmake --build "$BUILD" -j"$JOBS" --target "${targets[@]}"

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib"
for t in "${targets[@]}"; do
  f=$(find "$BUILD" -type f -name "$t" -perm -u+x | head -n1)
  [ -n "$f" ] || { echo "bundle_gpu.sh: built $t not found" >&2; exit 1; }
  cp "$f" "$BUNDLE/bin/"
done
# Non-system shared libraries of every program.
skip='^(libc|libm|libpthread|libdl|librt|ld-linux[^ ]*|libcuda|linux-vdso)\.so'
for f in "$BUNDLE"/bin/*; do
  ldd "$f" | awk '/=> \// {print $1, $3}' | while read -r name path; do
    if [[ "$name" =~ $skip ]]; then continue; fi
    [ -e "$BUNDLE/lib/$name" ] || cp -L "$path" "$BUNDLE/lib/$name"
  done
done
cp "$ROOT/scripts/gpu_checks.sh" "$BUNDLE/gpu_checks.sh"
cat > "$BUNDLE/run.sh" <<'RUN'
#!/usr/bin/env bash
# run.sh PROGRAM [ARGS...] — run a bundled program (bin/PROGRAM or a path)
# with the bundle's shared libraries.
HERE=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$HERE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
prog=$1; shift
[ -x "$prog" ] || prog="$HERE/bin/$prog"
exec "$prog" "$@"
RUN
chmod +x "$BUNDLE/run.sh" "$BUNDLE/gpu_checks.sh"
(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown) > "$BUNDLE/COMMIT"
du -sh "$BUNDLE"
ls -l "$BUNDLE/bin" "$BUNDLE/lib"
