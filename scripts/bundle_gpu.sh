#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# bundle_gpu.sh [BUNDLE_DIR] — build what the GPU machine runs and collect it
# into one relocatable folder (default ./.bundle) for a machine that has a
# GPU and the CUDA driver but no Kokkos, MPI or Catch2. Two builds:
#
#   bin/, lib/          build-gpu: Debian's Kokkos (Serial) + the CUDA
#                       specialization: its tests (test_cuda_planner,
#                       test_gpu_world, test_gpu_world_layer, the expert
#                       copies' and MoE layers' on virtual ranks and on the
#                       GPU world), moonep-layer, example_moe_layer, the
#                       kernel benchmark (moonep_gpu_bench), moonep-plan and
#                       its plan checker (moonep_check_plan_file).
#   kokkos-cuda/bin/, kokkos-cuda/lib/
#                       build-gpu-kokkos: upstream Kokkos 4.6.01 with the CUDA
#                       backend (from ../shared/kokkos, see its README) + the
#                       CUDA specialization: every test_portable_* binary
#                       (Planner<Kokkos::Cuda> on both paths), the planner
#                       interface's checks, the layer's portable path
#                       (test_layer_portable, test_expert_copies,
#                       test_moe_layer, test_layer_concept; float, double
#                       and bf16), moonep-layer with its CLI tests' file
#                       maker and checker (layer_cli_files),
#                       test_gpu_world_planner (over a GPU world), host_sweep
#                       (portable phases against the specialization),
#                       portable_step_bench (the portable step back to back,
#                       launches and fences per step) and moonep-plan. Skipped, with a message, when the Kokkos
#                       CUDA tarball is not there (KOKKOS_CUDA_TARBALL=...).
#
#   mpi/bin, mpi/lib, mpi/problems, openmpi/
#                       build-gpu-mpi: the same with MPI, test_gpu_world_mpi
#                       (one process per rank), test_gpu_world_layer_mpi
#                       (GpuWorldLayer over it), test_gpu_world_moe_mpi
#                       (GpuWorldExpertCopies, GpuWorldMoeLayer over it),
#                       moonep-plan (--world gpu under
#                       mpirun) with the plan checker and the CLI tests'
#                       problem files, moonep-layer (--world gpu under mpirun)
#                       with its CLI tests' file maker and checker
#                       (layer_cli_files), and Debian's Open MPI runtime
#                       relocated (bundle_openmpi.sh; MOONEP_BUNDLE_MPI=0: none).
#
# lib/ holds every shared library ldd resolves except glibc's own and
# libcuda (the driver), libcudart.so.13 included; run.sh runs a program with
# LD_LIBRARY_PATH set; gpu_checks.sh is the one script to run on the device.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUNDLE=${1:-$ROOT/.bundle}
BUILD=${BUILD_DIR:-$ROOT/build-gpu}
KBUILD=${KOKKOS_BUILD_DIR:-$ROOT/build-gpu-kokkos}
JOBS=${JOBS:-2}
SHARED=${MOONEP_SHARED_DIR:-$ROOT/../shared}
KOKKOS_CUDA_TARBALL=${KOKKOS_CUDA_TARBALL:-$SHARED/kokkos/kokkos-4.6.01-cuda13-sm90.tar.gz}
export PATH=/usr/local/cuda/bin:$PATH

have_target() { cmake --build "$1" --target help | grep -q "^$2:"; }

# collect BUILD DEST TARGET...: copy the built programs to DEST/bin and
# their non-system shared libraries to DEST/lib.
collect() {
  local build=$1 dest=$2; shift 2
  mkdir -p "$dest/bin" "$dest/lib"
  for t in "$@"; do
    local f
    f=$(find "$build" -type f -name "$t" -perm -u+x | head -n1)
    [ -n "$f" ] || { echo "bundle_gpu.sh: built $t not found in $build" >&2; exit 1; }
    cp "$f" "$dest/bin/"
    strip --strip-debug "$dest/bin/$t" 2>/dev/null || true
  done
  local skip='^(libc|libm|libpthread|libdl|librt|ld-linux[^ ]*|libcuda|linux-vdso)\.so'
  for f in "$dest"/bin/*; do
    ldd "$f" | awk '/=> \// {print $1, $3}' | while read -r name path; do
      if [[ "$name" =~ $skip ]]; then continue; fi
      [ -e "$dest/lib/$name" ] || cp -L "$path" "$dest/lib/$name"
    done
  done
}

# ---- build 1: Debian's Kokkos + the CUDA specialization ----
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMoonEP_ENABLE_CUDA=ON -DMoonEP_ENABLE_MULTICAST=OFF -DMoonEP_CUDA_ARCHITECTURES=90 -DMoonEP_ENABLE_MPI=OFF \
  -DMoonEP_ENABLE_TESTS=ON -DMoonEP_ENABLE_PERF_TESTS=ON >/dev/null
targets=(test_cuda_planner test_gpu_world test_cuda_layer test_gpu_world_layer moonep_gpu_bench moonep_gpu_layer_bench moonep-plan moonep_check_plan_file)
if have_target "$BUILD" moonep_warp_latency; then targets+=(moonep_warp_latency); fi
# The expert copies and the MoE layer (issue 36), where the tree has them:
# on virtual ranks and on the GPU world.
for t in test_cuda_expert_copies test_cuda_moe_layer test_gpu_world_expert_copies test_gpu_world_moe_layer \
         moonep_gpu_moe_layer_bench moonep-layer layer_cli_files example_moe_layer; do
  if have_target "$BUILD" "$t"; then targets+=("$t"); fi
done
cmake --build "$BUILD" -j"$JOBS" --target "${targets[@]}"
# The MoE layer's backward test links only once VirtualRankLayer's backward
# is in the tree: bundled when it builds, left out (said so) otherwise.
if have_target "$BUILD" test_cuda_moe_layer_backward; then
  if cmake --build "$BUILD" -j"$JOBS" --target test_cuda_moe_layer_backward >/dev/null 2>&1; then
    targets+=(test_cuda_moe_layer_backward)
  else
    echo "bundle_gpu.sh: test_cuda_moe_layer_backward does not build here (VirtualRankLayer's backward missing?); left out" >&2
  fi
fi

rm -rf "$BUNDLE"
collect "$BUILD" "$BUNDLE" "${targets[@]}"

# ---- build 2: Kokkos 4.6.01 CUDA + the CUDA specialization ----
if [ -f "$KOKKOS_CUDA_TARBALL" ]; then
  KROOT=$KBUILD/deps/$(basename "$KOKKOS_CUDA_TARBALL" .tar.gz)
  if [ ! -f "$KROOT/bin/nvcc_wrapper" ]; then
    mkdir -p "$KBUILD/deps"
    tar -xzf "$KOKKOS_CUDA_TARBALL" -C "$KBUILD/deps"
  fi
  cmake -S "$ROOT" -B "$KBUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DKokkos_ROOT="$KROOT" -DCMAKE_CXX_COMPILER="$KROOT/bin/nvcc_wrapper" \
    -DMoonEP_ENABLE_CUDA=ON -DMoonEP_ENABLE_MULTICAST=OFF -DMoonEP_CUDA_ARCHITECTURES=90 -DMoonEP_ENABLE_MPI=OFF \
    -DMoonEP_ENABLE_TESTS=ON -DMoonEP_ENABLE_PERF_TESTS=ON -DMoonEP_ENABLE_EXAMPLES=OFF >/dev/null
  ktargets=()
  for t in $(cmake --build "$KBUILD" --target help | sed -n 's/^\(test_portable_[a-z_]*\):.*/\1/p'); do
    ktargets+=("$t")
  done
  ktargets+=(test_gpu_world_planner test_planner_concept test_layer_portable test_expert_copies test_moe_layer
             test_layer_concept host_sweep portable_step_bench moonep-plan moonep-layer layer_cli_files)
  cmake --build "$KBUILD" -j"$JOBS" --target "${ktargets[@]}"
  collect "$KBUILD" "$BUNDLE/kokkos-cuda" "${ktargets[@]}"
else
  echo "bundle_gpu.sh: $KOKKOS_CUDA_TARBALL not found; bundling without the Kokkos-CUDA build" >&2
fi

# ---- build 3: the GPU world with one MPI process per rank, and Debian's
# Open MPI runtime to run it with (the GPU machine has no MPI); skipped with
# MOONEP_BUNDLE_MPI=0 or without Debian's Open MPI ----
if [ "${MOONEP_BUNDLE_MPI:-1}" = 1 ] && [ -x /usr/bin/orterun ]; then
  MBUILD=${MPI_BUILD_DIR:-$ROOT/build-gpu-mpi}
  cmake -S "$ROOT" -B "$MBUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DMoonEP_ENABLE_CUDA=ON -DMoonEP_ENABLE_MULTICAST=OFF -DMoonEP_CUDA_ARCHITECTURES=90 -DMoonEP_ENABLE_MPI=ON \
    -DMoonEP_ENABLE_TESTS=ON -DMoonEP_ENABLE_PERF_TESTS=OFF -DMoonEP_ENABLE_EXAMPLES=OFF >/dev/null
  mtargets=(test_gpu_world_mpi test_gpu_world_layer_mpi test_gpu_world_moe_mpi moonep-plan moonep_check_plan_file
            moonep-layer layer_cli_files)
  cmake --build "$MBUILD" -j"$JOBS" --target "${mtargets[@]}"
  collect "$MBUILD" "$BUNDLE/mpi" "${mtargets[@]}"
  mkdir -p "$BUNDLE/mpi/problems"
  cp "$ROOT"/unit_tests/cli/problems/*.json "$BUNDLE/mpi/problems/"
  bash "$ROOT/scripts/bundle_openmpi.sh" "$BUNDLE/openmpi"
fi

cp "$ROOT/scripts/gpu_checks.sh" "$ROOT/scripts/gpu_world_multi.sh" "$BUNDLE/"
cat > "$BUNDLE/run.sh" <<'RUN'
#!/usr/bin/env bash
# run.sh PROGRAM [ARGS...] — run a bundled program (bin/PROGRAM, a path, or
# kokkos-cuda/bin/PROGRAM as kokkos-cuda/PROGRAM) with its shared libraries.
HERE=$(cd "$(dirname "$0")" && pwd)
prog=$1; shift
case "$prog" in
  kokkos-cuda/*) lib="$HERE/kokkos-cuda/lib"; prog="$HERE/kokkos-cuda/bin/${prog#kokkos-cuda/}" ;;
  *) lib="$HERE/lib"; [ -x "$prog" ] || prog="$HERE/bin/$prog" ;;
esac
export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$prog" "$@"
RUN
chmod +x "$BUNDLE/run.sh" "$BUNDLE/gpu_checks.sh" "$BUNDLE/gpu_world_multi.sh"
(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown) > "$BUNDLE/COMMIT"
du -sh "$BUNDLE"
ls -l "$BUNDLE/bin" "$BUNDLE/lib"
if [ -d "$BUNDLE/kokkos-cuda" ]; then ls -l "$BUNDLE/kokkos-cuda/bin" "$BUNDLE/kokkos-cuda/lib"; fi
