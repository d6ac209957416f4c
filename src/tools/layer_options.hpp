// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Private to moonep-layer: its command line (docs/cli.md "moonep-layer").
#pragma once

#include <string>
#include <vector>

namespace moonep::tools {

enum class LayerDtype { float32, float64, bfloat16 };
// reference: moonep/layer_reference.hpp on the host; portable: the Kokkos
// planner and moonep::InProcessLayer on Kokkos' default execution space;
// cuda: moonep::cuda::VirtualRankPlanner and VirtualRankLayer on the
// current GPU (a build with CUDA).
enum class LayerBackend { reference, portable, cuda };
// inprocess: every rank in this process; mpi: one MPI process per rank
// (moonep::MpiLayer, planned by the portable Planner over an MPI world);
// gpu: a rank per GPU, one moonep::cuda::GpuWorld held by this process and
// moonep::cuda::GpuWorldLayer (a build with CUDA).
enum class LayerWorld { inprocess, mpi, gpu };

struct LayerOptions {
  bool help = false;
  bool version = false;
  std::string input;         // --input problem.json
  std::string x;             // --x x.npy [R][S][H]
  std::string weights;       // --weights w.npy [R][S][K]
  std::string output;        // --output out.npy [R][S][H]
  std::string recv;          // --recv recv.npy [R][NvS][H] (optional)
  std::string grad_out;      // --grad-out g.npy [R][S][H] (with the two below)
  std::string grad_x;        // --grad-x gx.npy [R][S][H]
  std::string grad_weights;  // --grad-weights gw.npy [R][S][K]
  std::string experts;       // --experts M.npy [E][H][H'] (linear experts; none: identity)
  std::string grad_experts;  // --grad-experts gM.npy [E][H][H'] (with --experts and --grad-out)
  LayerDtype dtype = LayerDtype::float32;
  LayerBackend backend = LayerBackend::reference;
  bool backend_given = false;
  LayerWorld world = LayerWorld::inprocess;
  std::vector<int> devices;  // --devices with --world gpu: rank r on devices[r mod n]; empty: every visible GPU
};

// Parses argv[1..argc). Throws InputError (exit 2) naming the option: an
// unknown option or value, a missing value or required option, a backend
// (cuda without CUDA),
// world or --devices this build does not run the layer on yet, --dtype bf16
// with --backend portable, --backend with --world mpi, one output path
// given twice, --grad-experts without --experts, or the gradients' files
// not all given together.
LayerOptions parse_layer_options(int argc, char* argv[]);

std::string layer_usage();
std::string layer_version();

}  // namespace moonep::tools
