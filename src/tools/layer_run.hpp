// Private to moonep-layer: one layer step on files (docs/cli.md "moonep-layer").
#pragma once

#include "layer_options.hpp"

namespace moonep::tools {

// Reads the problem and the .npy inputs, plans the step with the reference
// planner, dispatches, combines (identity experts), and with --grad-out runs
// combine's and dispatch's backward; then writes every output file. Every
// input is read and checked, and every output path resolved, before the
// first file is written. InputError for bad input (exit 2), RuntimeError
// for an output that cannot be written (exit 1).
void run_layer(const LayerOptions& options);

}  // namespace moonep::tools
