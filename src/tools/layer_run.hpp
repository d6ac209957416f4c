// Private to moonep-layer: one layer step on files (docs/layer_cli.md).
#pragma once

#include <vector>

#include "io/npy.hpp"
#include "layer_options.hpp"
#include "moonep/io.hpp"

namespace moonep::tools {

// Reads the problem and the .npy inputs, plans the step, dispatches,
// combines (identity experts), and with --grad-out runs combine's and
// dispatch's backward, on the chosen backend; then writes every output
// file. Every input is read and checked, and every output path resolved,
// before the first file is written. InputError for bad input (exit 2),
// RuntimeError for an output that cannot be written (exit 1).
void run_layer(const LayerOptions& options);
// --world mpi (layer_mpi.cpp; layer_mpi_unavailable.cpp without MPI): one
// process per rank under mpirun; returns the exit status every process
// agreed on, the one error line printed for the whole job.
int run_layer_mpi(const LayerOptions& options);

// The inputs, read and checked (InputError naming the file): the problem,
// x (its H), w, and grad_out when --grad-out is given.
struct LayerFiles {
  Problem problem;
  io::NpyArray x, w, grad_out;
  int hidden = 0;
};
LayerFiles read_layer_files(const LayerOptions& options);

// What a backend computes from the checked inputs, as flat C-order arrays:
// out and grad_x [R][S][H], recv [R][NvS][H], grad_w [R][S][K] (the
// gradients only with grad_out). What the contract leaves unwritten is 0.
struct LayerInputs {
  const Problem& problem;
  const io::NpyArray& x;  // [R][S][H]
  int hidden;             // H
  const io::NpyArray& w;  // [R][S][K]
  const io::NpyArray* grad_out;  // [R][S][H], or none
};
struct LayerResults {
  std::vector<double> out, recv, grad_x, grad_w;
};
// Writes every output file of `res` (every path resolved first: an
// unwritable one leaves no file changed; RuntimeError).
void write_layer_files(const LayerOptions& options, const Config& config, int hidden, const LayerResults& res);

LayerResults reference_layer(const LayerInputs& in, LayerDtype dtype);  // layer_run.cpp
LayerResults portable_layer(const LayerInputs& in, LayerDtype dtype);   // layer_portable.cpp

}  // namespace moonep::tools
