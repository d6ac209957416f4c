// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-layer's step; see layer_run.hpp. Files hold float32 (or float64)
// values; the computation runs in the --dtype element type, here over the
// reference layer (moonep/layer_reference.hpp; the portable backend is
// layer_portable.cpp), and results are written as float32.
#include "layer_run.hpp"

#include <string>
#include <vector>

#include "io/output_file.hpp"
#include "layer_buffers.hpp"
#include "moonep/error.hpp"
#include "moonep/io.hpp"
#include "moonep/layer_reference.hpp"
#include "moonep/reference.hpp"

namespace moonep::tools {

namespace {

using Shape = std::vector<std::int64_t>;

std::string shape_text(const Shape& s) {
  std::string t = "(";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + (s.size() == 1 ? ",)" : ")");
}

// Reads a .npy input and checks its shape: `want` with -1 for a free
// extent (H), filled in from the file. InputError naming the file.
io::NpyArray read_input(const std::string& path, const char* what, Shape& want, const char* dims) {
  io::NpyArray a = io::read_npy(path, what);
  bool ok = a.shape.size() == want.size();
  for (std::size_t i = 0; ok && i < want.size(); ++i) ok = want[i] < 0 ? a.shape[i] >= 1 : a.shape[i] == want[i];
  if (!ok) {
    std::string expect = dims;
    throw InputError(std::string(what) + " '" + printable(path) + "': shape " + shape_text(a.shape) +
                     " is not " + expect);
  }
  want = a.shape;
  return a;
}

template <class T>
LayerResults compute(const LayerInputs& in) {
  if (in.experts) return reference_linear_layer<T>(in);
  using W = weight_t<T>;
  const Problem& problem = in.problem;
  const Config& c = problem.config;
  const int hidden = in.hidden;
  const HostPlan plan = plan_reference(c, problem.routing, problem.tokens_per_expert ? &*problem.tokens_per_expert : nullptr,
                                       problem.tokens_per_rank ? &*problem.tokens_per_rank : nullptr);
  const std::int64_t nvs = c.slots(), row = std::int64_t{c.tokens} * hidden;
  const PerRank<T> x = to_ranks<T>(in.x.values, c.ranks);
  const PerRank<W> w = to_ranks<W>(in.w.values, c.ranks);
  PerRank<T> recv = zeros<T>(c.ranks, nvs * hidden);
  PerRank<W> recv_w = zeros<W>(c.ranks, nvs);
  dispatch_reference(plan, hidden, x, w, recv, recv_w);
  PerRank<T> out = zeros<T>(c.ranks, row);
  combine_reference<T>(plan, hidden, recv, &w, out);  // identity experts: y = recv
  LayerResults res;
  res.out = from_ranks(out);
  res.recv = from_ranks(recv);
  if (in.grad_out) {
    const PerRank<T> g = to_ranks<T>(in.grad_out->values, c.ranks);
    PerRank<T> gy = zeros<T>(c.ranks, nvs * hidden);
    PerRank<W> gw = zeros<W>(c.ranks, c.entries());
    combine_backward_reference(plan, hidden, g, recv, &w, gy, &gw);
    // Identity experts: d recv = d y. recv_w is not used by them, so its
    // gradient is zero and dispatch's backward adds nothing to gw.
    PerRank<T> gx = zeros<T>(c.ranks, row);
    dispatch_backward_reference<T>(plan, hidden, gy, nullptr, gx, nullptr);
    res.grad_x = from_ranks(gx);
    res.grad_w = from_ranks(gw);
  }
  return res;
}

}  // namespace

void run_layer(const LayerOptions& o) {
  const Problem problem = read_problem_file(o.input);
  const Config& c = problem.config;
  const std::string dims = "[R][S][H] = [" + std::to_string(c.ranks) + "][" + std::to_string(c.tokens) + "][H]";
  Shape xs = {c.ranks, c.tokens, -1};
  const io::NpyArray x = read_input(o.x, "x file", xs, dims.c_str());
  const int hidden = static_cast<int>(xs[2]);
  if (xs[2] > (std::int64_t{1} << 30)) throw InputError("x file '" + printable(o.x) + "': H is too large");
  Shape ws = {c.ranks, c.tokens, c.topk};
  const std::string wdims = "[R][S][K] = [" + std::to_string(c.ranks) + "][" + std::to_string(c.tokens) + "][" +
                            std::to_string(c.topk) + "]";
  const io::NpyArray w = read_input(o.weights, "weights file", ws, wdims.c_str());
  io::NpyArray m;
  int hidden_out = hidden;
  if (!o.experts.empty()) {
    Shape ms = {c.experts, hidden, -1};
    const std::string mdims = "[E][H][H'] = [" + std::to_string(c.experts) + "][" + std::to_string(hidden) +
                              "][H'] (H of the x file)";
    m = read_input(o.experts, "experts file", ms, mdims.c_str());
    if (ms[2] > (std::int64_t{1} << 30)) throw InputError("experts file '" + printable(o.experts) + "': H' is too large");
    hidden_out = static_cast<int>(ms[2]);
  }
  io::NpyArray g;
  if (!o.grad_out.empty()) {
    Shape gs = {c.ranks, c.tokens, hidden_out};
    const std::string gdims = "[R][S][H'] = [" + std::to_string(c.ranks) + "][" + std::to_string(c.tokens) + "][" +
                              std::to_string(hidden_out) + "] (" +
                              (o.experts.empty() ? "H' = H of the x file" : "H' of the experts file") + ")";
    g = read_input(o.grad_out, "grad-out file", gs, gdims.c_str());
  }
  const LayerInputs in{problem, x, hidden, w, o.grad_out.empty() ? nullptr : &g, o.experts.empty() ? nullptr : &m,
                       hidden_out};
  const LayerResults res = o.backend == LayerBackend::portable ? portable_layer(in, o.dtype) : reference_layer(in, o.dtype);
  struct Output {
    const std::string& path;
    const char* what;
    Shape shape;
    const std::vector<double>& values;
  };
  std::vector<Output> files = {{o.output, "output file", {c.ranks, c.tokens, hidden_out}, res.out}};
  if (!o.recv.empty()) files.push_back({o.recv, "recv file", {c.ranks, c.slots(), hidden}, res.recv});
  if (in.grad_out) {
    files.push_back({o.grad_x, "grad-x file", {c.ranks, c.tokens, hidden}, res.grad_x});
    files.push_back({o.grad_weights, "grad-weights file", {c.ranks, c.tokens, c.topk}, res.grad_w});
    if (in.experts)
      files.push_back({o.grad_experts, "grad-experts file", {c.experts, hidden, hidden_out}, res.grad_experts});
  }
  // Every output path is resolved before the first is written, so that an
  // unwritable one (a directory, a missing folder) leaves no file changed.
  for (const Output& f : files) io::resolve_output(f.path, f.what);
  for (const Output& f : files) io::write_npy(f.path, f.what, f.shape, f.values);
}

LayerResults reference_layer(const LayerInputs& in, LayerDtype dtype) {
  switch (dtype) {
    case LayerDtype::float64: return compute<double>(in);
    case LayerDtype::bfloat16: return compute<bf16>(in);
    case LayerDtype::float32: break;
  }
  return compute<float>(in);
}

}  // namespace moonep::tools
