// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private to moonep-layer: one layer step on files (docs/layer_cli.md).
#pragma once

#include <vector>

#include "io/npy.hpp"
#include "io/output_set.hpp"
#include "layer_options.hpp"
#include "moonep/io.hpp"

namespace moonep::tools {

// Reads the problem and the .npy inputs, plans the step, dispatches, runs
// the experts (identity, or linear with --experts: fetch, one GEMM per
// group), combines, and with --grad-out runs the backward (down to reduce
// with --experts), on the chosen backend; then writes every output
// file. Every input is read and checked, and every output path resolved,
// before the first file is written. InputError for bad input (exit 2),
// RuntimeError for an output that cannot be written (exit 1).
void run_layer(const LayerOptions& options);

// --world mpi (layer_mpi.cpp; layer_mpi_unavailable.cpp without MPI): one
// process per rank under mpirun; returns the exit status every process
// agreed on, the one error line printed for the whole job.
int run_layer_mpi(const LayerOptions& options);

// The inputs, read and checked (InputError naming the file): the problem,
// x (its H), w, the experts M (its H') with --experts, grad_out with
// --grad-out.
struct LayerFiles {
  Problem problem;
  io::NpyArray x, w, experts, grad_out;
  int hidden = 0;
  int hidden_out = 0;  // H' (H without experts)
};
LayerFiles read_layer_files(const LayerOptions& options);

// What a backend computes from the checked inputs, as flat C-order arrays:
// out [R][S][H'], grad_x [R][S][H], recv [R][NvS][H], grad_w [R][S][K],
// grad_experts [E][H][H'] (the gradients only with grad_out, grad_experts
// only with experts). What the contract leaves unwritten is 0.
struct LayerInputs {
  const Problem& problem;
  const io::NpyArray& x;  // [R][S][H]
  int hidden;             // H
  const io::NpyArray& w;  // [R][S][K]
  const io::NpyArray* grad_out;  // [R][S][H'], or none
  const io::NpyArray* experts = nullptr;  // M [E][H][H'], or none (identity)
  int hidden_out = 0;                     // H' (H without experts)
};
struct LayerResults {
  std::vector<double> out, recv, grad_x, grad_w, grad_experts;
};
// The output files (io/output_set.hpp), in this order: --output, --recv,
// --grad-x, --grad-weights, --grad-experts (an option not given: none).
// check() before the work refuses a path that cannot be written.
io::OutputFiles layer_outputs(const LayerOptions& options);
// Writes every output file of `res` all or nothing (RuntimeError, exit 1,
// with every target as it was).
void write_layer_files(const LayerOptions& options, const LayerFiles& files, const LayerResults& res);

LayerResults reference_layer(const LayerInputs& in, LayerDtype dtype);  // layer_run.cpp
// The reference backend's linear layer (in.experts given), T float, double
// or bf16; reference_layer runs it (layer_linear.cpp).
template <class T>
LayerResults reference_linear_layer(const LayerInputs& in);
LayerResults portable_layer(const LayerInputs& in, LayerDtype dtype);   // layer_portable.cpp
LayerResults cuda_layer(const LayerInputs& in, LayerDtype dtype);       // layer_cuda.cpp
// --world gpu (layer_gpu_world.cpp): rank r on devices[r mod n] (empty:
// every visible GPU), identity experts.
LayerResults gpu_world_layer(const LayerInputs& in, LayerDtype dtype, const std::vector<int>& devices);

// --world gpu under an MPI launch of several processes
// (layer_gpu_world_mpi.cpp; layer_gpu_world_mpi_unavailable.cpp without
// CUDA or MPI): one process per rank over one GPU world, each reading its
// rank's rows, rank 0 writing the files; returns the exit status every
// process agreed on, the one error line printed for the whole job.
int run_layer_gpu_mpi(const LayerOptions& options);

}  // namespace moonep::tools
