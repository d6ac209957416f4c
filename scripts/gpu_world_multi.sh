#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# gpu_world_multi.sh N — the GPU world on N GPUs (2, 4 or 8), from a bundle
# made by bundle_gpu.sh (run it from the bundle's root, as gpu_checks.sh).
# Runs test_gpu_world with rank r on GPU r mod N (MOONEP_TEST_DEVICES: the
# sweep, graph replay, bad input, a rank that never launches, all with the
# world's system-scope synchronisation across GPUs), then the GPU world
# benchmark at the headline with R = 8 ranks spread over the N GPUs. Logs
# go to $OUT (or ./gpu_world_multi_out). Never changes GPU settings, never
# uses NVLink multicast.
set -u -o pipefail
N=${1:?usage: gpu_world_multi.sh N (number of GPUs)}
HERE=$(cd "$(dirname "$0")" && pwd)
LOGS=${OUT:-$PWD/gpu_world_multi_out}
mkdir -p "$LOGS"
export LD_LIBRARY_PATH="$HERE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 MOONEP_FORBID_MULTICAST=1
devices=$(seq -s, 0 $((N - 1)))
nvidia-smi -L | tee "$LOGS/gpus.log"
nvidia-smi topo -m > "$LOGS/topology.log" 2>&1
status=0
MOONEP_TEST_DEVICES=$devices timeout 600 "$HERE/bin/test_gpu_world" --durations yes 2>&1 | tee "$LOGS/test_gpu_world.log" || status=1
timeout 300 "$HERE/bin/moonep_gpu_bench" 500 --gpu-world --devices "$devices" 2>&1 | tee "$LOGS/world_benchmark.log" || status=1
echo "gpu_world_multi.sh: $N GPUs ($devices): $([ $status -eq 0 ] && echo pass || echo FAIL)"
exit $status
