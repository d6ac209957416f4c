# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# moonep_gpu_bench: time per planning step of the CUDA planner (virtual
# ranks on one GPU), stream and CUDA-graph launches, against the floor of an
# empty cooperative launch of the same grid. See README.md.
add_executable(moonep_gpu_bench ${CMAKE_CURRENT_LIST_DIR}/gpu_bench.cu)
target_link_libraries(moonep_gpu_bench PRIVATE moonep moonep_cuda_bench CUDA::cudart)
moonep_perf_csv(moonep_gpu_bench)

# moonep_warp_latency: cycles per step of the warp primitives the kernels
# use (a probe for kernel design; docs/design/cuda_planner.md explains).
add_executable(moonep_warp_latency ${CMAKE_CURRENT_LIST_DIR}/warp_latency.cu)
target_link_libraries(moonep_warp_latency PRIVATE CUDA::cudart)

# moonep_gpu_layer_bench: dispatch and combine of the CUDA layer (virtual
# ranks) next to a device-to-device copy of the same bytes (README.md).
add_executable(moonep_gpu_layer_bench ${CMAKE_CURRENT_LIST_DIR}/gpu_layer_bench.cu)
target_link_libraries(moonep_gpu_layer_bench PRIVATE moonep CUDA::cudart)

# moonep_gpu_moe_layer_bench: the whole linear MoE layer step of the CUDA
# virtual ranks and of a GPU world on one GPU (plan, fetch, dispatch, GEMMs,
# combine), fetch overlapped with dispatch, and plain EP's step beside it
# (README.md).
add_executable(moonep_gpu_moe_layer_bench ${CMAKE_CURRENT_LIST_DIR}/gpu_moe_layer_bench.cu)
target_link_libraries(moonep_gpu_moe_layer_bench PRIVATE moonep CUDA::cudart CUDA::cublas)
moonep_perf_csv(moonep_gpu_moe_layer_bench)
