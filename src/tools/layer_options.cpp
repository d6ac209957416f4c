// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-layer's command line; see layer_options.hpp. The reference,
// portable and (in a build with CUDA) cuda backends on the in-process world,
// the MPI world and (with CUDA) the GPU world run the layer.
#include "layer_options.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <vector>

#include "moonep/error.hpp"
#include "moonep/moonep_config.hpp"

namespace moonep::tools {

namespace {

#ifdef MOONEP_LAYER_WITH_CUDA
constexpr bool kLayerWithCuda = true;
#else
constexpr bool kLayerWithCuda = false;
#endif

[[noreturn]] void usage_error(const std::string& what) {
  throw InputError(what + " (see moonep-layer --help)");
}

}  // namespace

std::string layer_usage() {
  return "usage: moonep-layer --input problem.json --x x.npy --weights w.npy --output out.npy\n"
         "                    [--recv recv.npy] [--experts M.npy]\n"
         "                    [--grad-out g.npy --grad-x gx.npy --grad-weights gw.npy [--grad-experts gM.npy]]\n"
         "                    [--backend reference|portable|cuda] [--world inprocess|mpi|gpu [--devices LIST]]\n"
         "                    [--dtype float|double|bf16]\n"
         "\n"
         "Plans the problem's step, dispatches the token rows x, runs the experts\n"
         "(identity, y = recv, or linear, y = recv @ M_e, with their copies fetched)\n"
         "and combines them weighted by w\n"
         "(docs/spec/layer.md). Files are NumPy .npy, C order; inputs float32 or float64,\n"
         "outputs float32.\n"
         "\n"
         "  --input FILE         problem file (docs/spec/formats.md): R, S, K, routing, optional\n"
         "                       tokens_per_rank (a ragged step: rows past s_r are not read)\n"
         "  --x FILE             token rows [R][S][H]\n"
         "  --weights FILE       routing weights [R][S][K]\n"
         "  --output FILE        out [R][S][H'] (H' = H without --experts); rows past s_r are 0\n"
         "  --recv FILE          every rank's receive buffer [R][NvS][H]; slots the contract\n"
         "                       leaves undefined are 0\n"
         "  --experts FILE       linear experts M [E][H][H'], rank h holding experts h*epn ..\n"
         "  --grad-out FILE      d out [R][S][H']: runs the layer's backward and writes\n"
         "                       --grad-x [R][S][H] and --grad-weights [R][S][K] (with\n"
         "                       --experts also --grad-experts [E][H][H'], copies reduced)\n"
         "  --dtype TYPE         element type of the computation: float (default), double or\n"
         "                       bf16 (inputs rounded to it, accumulation in float or double)\n"
         "  --backend NAME       reference (default: the executable spec, on the host) or\n"
         "                       portable (the Kokkos planner and layer on Kokkos' default\n"
         "                       execution space; any --dtype) or cuda (a build with\n"
         "                       CUDA: every rank a virtual rank on the current GPU, the\n"
         "                       CUDA planner and layer, cuBLAS GEMMs; any --dtype)\n"
         "  --world NAME         inprocess (default: every rank in this process) or mpi (under\n"
         "                       mpirun -np R: one process per rank, each reading its rank's\n"
         "                       rows; rank 0 writes the files; the MPI world is\n"
         "                       $MOONEP_MPI_WORLD: auto, shared or rma; waits bounded by\n"
         "                       $MOONEP_MPI_TIMEOUT), or gpu (a build with CUDA: rank r on\n"
         "                       its own GPU, one process holding every rank (with --experts\n"
         "                       linear experts, cuBLAS GEMMs), or under mpirun -np R one\n"
         "                       process per rank, each reading its rank's rows, rank 0\n"
         "                       writing the files (a build with MPI too; one node; identity\n"
         "                       experts only): the GPU world's planner and layer, slot\n"
         "                       buffers and experts in its symmetric memory; any --dtype)\n"
         "  --devices LIST       with --world gpu: rank r on the (r mod n)-th device of LIST\n"
         "                       (comma-separated; default every visible GPU)\n"
         "  --help, --version\n"
         "\n"
         "Exit status: 0 done, 2 bad usage or input (one line on stderr, no file written),\n"
         "1 a failure while writing.\n";
}

std::string layer_version() {
  return std::string("moonep-layer " MOONEP_VERSION_STRING "\nbackends: reference, portable") +
         (kLayerWithCuda ? ", cuda" : "") + "\nworlds: inprocess"
#ifdef MOONEP_LAYER_WITH_MPI
         ", mpi"
#endif
         + (kLayerWithCuda ? ", gpu" : "") + "\n";
}

LayerOptions parse_layer_options(int argc, char* argv[]) {
  LayerOptions o;
  std::map<std::string, std::string*> files = {
      {"--input", &o.input},   {"--x", &o.x},           {"--weights", &o.weights},
      {"--output", &o.output}, {"--recv", &o.recv},     {"--grad-out", &o.grad_out},
      {"--grad-x", &o.grad_x}, {"--grad-weights", &o.grad_weights}, {"--experts", &o.experts},
      {"--grad-experts", &o.grad_experts}};
  std::map<std::string, bool> seen;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      continue;
    }
    if (arg == "--version") {
      o.version = true;
      continue;
    }
    const bool known = files.count(arg) || arg == "--dtype" || arg == "--backend" || arg == "--world" ||
                       arg == "--devices";
    if (!known) usage_error("unknown option '" + printable(arg) + "'");
    if (seen[arg]) usage_error(arg + " given twice");
    seen[arg] = true;
    if (i + 1 >= argc) usage_error(arg + " needs a value");
    const std::string value = argv[++i];
    if (files.count(arg)) {
      if (value.empty()) usage_error(arg + " needs a file name");
      *files[arg] = value;
    } else if (arg == "--dtype") {
      if (value == "float") o.dtype = LayerDtype::float32;
      else if (value == "double") o.dtype = LayerDtype::float64;
      else if (value == "bf16") o.dtype = LayerDtype::bfloat16;
      else usage_error("--dtype: unknown type '" + printable(value) + "' (float, double or bf16)");
    } else if (arg == "--backend") {
      if (value == "cuda" && !kLayerWithCuda)
        usage_error("--backend cuda is not available in this build of moonep-layer: MoonEP was built without CUDA");
      o.backend_given = true;
      if (value == "portable") o.backend = LayerBackend::portable;
      else if (value == "cuda") o.backend = LayerBackend::cuda;
      else if (value != "reference")
        usage_error("--backend: unknown backend '" + printable(value) + "' (reference, portable or cuda)");
    } else if (arg == "--world") {
      if (value == "gpu" && !kLayerWithCuda)
        usage_error("--world gpu is not available in this build of moonep-layer: MoonEP was built without CUDA");
      if (value == "mpi") o.world = LayerWorld::mpi;
      else if (value == "gpu") o.world = LayerWorld::gpu;
      else if (value != "inprocess")
        usage_error("--world: unknown world '" + printable(value) + "' (inprocess, mpi or gpu)");
    } else {  // --devices LIST: comma-separated device numbers
      std::size_t at = 0;
      while (at <= value.size()) {
        const std::size_t comma = std::min(value.find(',', at), value.size());
        const std::string item = value.substr(at, comma - at);
        char* end = nullptr;
        const long d = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || d < 0 || d > 1023)
          usage_error("--devices: '" + printable(item) + "' is not a device number in 0..1023");
        o.devices.push_back(static_cast<int>(d));
        at = comma + 1;
      }
    }
  }
  if (o.help || o.version) return o;
  if (o.world == LayerWorld::mpi && o.backend_given)
    usage_error("--world mpi runs its own layer (moonep::MpiLayer, on the host); leave out --backend");
  if (o.world == LayerWorld::gpu && o.backend_given)
    usage_error("--world gpu runs its own layer (moonep::cuda::GpuWorldLayer); leave out --backend");
  if (!o.devices.empty() && o.world != LayerWorld::gpu) usage_error("--devices is for --world gpu");
  for (const char* required : {"--input", "--x", "--weights", "--output"})
    if (files[required]->empty()) usage_error(std::string("missing ") + required);
  if (!o.grad_experts.empty() && o.experts.empty()) usage_error("--grad-experts needs --experts");
  const bool any_grad = !o.grad_out.empty() || !o.grad_x.empty() || !o.grad_weights.empty() || !o.grad_experts.empty();
  const bool all_grad = !o.grad_out.empty() && !o.grad_x.empty() && !o.grad_weights.empty() &&
                        (o.experts.empty() || !o.grad_experts.empty());
  if (any_grad && !all_grad)
    usage_error(o.experts.empty() ? "--grad-out, --grad-x and --grad-weights go together"
                                  : "with --experts, --grad-out, --grad-x, --grad-weights and --grad-experts go together");
  std::vector<std::pair<std::string, std::string>> outputs = {{"--output", o.output},
                                                             {"--recv", o.recv},
                                                             {"--grad-x", o.grad_x},
                                                             {"--grad-weights", o.grad_weights},
                                                             {"--grad-experts", o.grad_experts}};
  for (std::size_t a = 0; a < outputs.size(); ++a)
    for (std::size_t b = a + 1; b < outputs.size(); ++b)
      if (!outputs[a].second.empty() && outputs[a].second == outputs[b].second)
        usage_error(outputs[a].first + " and " + outputs[b].first + " name the same file '" +
                    printable(outputs[a].second) + "'");
  return o;
}

}  // namespace moonep::tools
