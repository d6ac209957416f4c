# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# scripts/configure_build.sh — sourced by test.sh and demo.sh: configures the
# build directory `build` (Release, Ninja) unless it already is, leaving
# every MoonEP option at its default (MPI and CUDA are AUTO: on where found,
# so a machine with /usr/local/cuda compiles the CUDA specialization).
# MOONEP_BUILD_DIR and MOONEP_BUILD_JOBS override the directory and the
# number of parallel compile jobs (default: the number of cores).

build_dir="${MOONEP_BUILD_DIR:-build}"
build_jobs="${MOONEP_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"

if [[ -f "$build_dir/CMakeCache.txt" ]]; then
  # Keep the generator and options chosen when it was first configured.
  cmake -S . -B "$build_dir"
else
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
