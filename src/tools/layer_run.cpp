// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-layer's step; see layer_run.hpp. Files hold float32 (or float64)
// values; the computation runs in the --dtype element type, here over the
// reference layer (moonep/layer_reference.hpp; the portable backend is
// layer_portable.cpp), and results are written as float32.
#include "layer_run.hpp"

#include <string>
#include <vector>

#include "io/output_file.hpp"
#include "io/output_set.hpp"
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

LayerFiles read_layer_files(const LayerOptions& o) {
  LayerFiles f;
  f.problem = read_problem_file(o.input);
  const Config& c = f.problem.config;
  const std::string dims = "[R][S][H] = [" + std::to_string(c.ranks) + "][" + std::to_string(c.tokens) + "][H]";
  Shape xs = {c.ranks, c.tokens, -1};
  f.x = read_input(o.x, "x file", xs, dims.c_str());
  if (xs[2] > (std::int64_t{1} << 30)) throw InputError("x file '" + printable(o.x) + "': H is too large");
  f.hidden = f.hidden_out = static_cast<int>(xs[2]);
  Shape ws = {c.ranks, c.tokens, c.topk};
  const std::string wdims = "[R][S][K] = [" + std::to_string(c.ranks) + "][" + std::to_string(c.tokens) + "][" +
                            std::to_string(c.topk) + "]";
  f.w = read_input(o.weights, "weights file", ws, wdims.c_str());
  if (!o.experts.empty()) {
    Shape ms = {c.experts, f.hidden, -1};
    const std::string mdims = "[E][H][H'] = [" + std::to_string(c.experts) + "][" + std::to_string(f.hidden) +
                              "][H'] (H of the x file)";
    f.experts = read_input(o.experts, "experts file", ms, mdims.c_str());
    if (ms[2] > (std::int64_t{1} << 30)) throw InputError("experts file '" + printable(o.experts) + "': H' is too large");
    f.hidden_out = static_cast<int>(ms[2]);
  }
  if (!o.grad_out.empty()) {
    Shape gs = {c.ranks, c.tokens, f.hidden_out};
    const std::string gdims = "[R][S][H'] = [" + std::to_string(c.ranks) + "][" + std::to_string(c.tokens) + "][" +
                              std::to_string(f.hidden_out) + "] (" +
                              (o.experts.empty() ? "H' = H of the x file" : "H' of the experts file") + ")";
    f.grad_out = read_input(o.grad_out, "grad-out file", gs, gdims.c_str());
  }
  return f;
}

io::OutputFiles layer_outputs(const LayerOptions& o) {
  io::OutputFiles out;
  out.add(o.output, "output file", "--output");
  out.add(o.recv, "recv file", "--recv");
  out.add(o.grad_x, "grad-x file", "--grad-x");
  out.add(o.grad_weights, "grad-weights file", "--grad-weights");
  out.add(o.grad_experts, "grad-experts file", "--grad-experts");
  return out;
}

void write_layer_files(const LayerOptions& o, const LayerFiles& f, const LayerResults& res) {
  const Config& c = f.problem.config;
  const auto npy = [](Shape shape, const std::vector<double>& values) -> io::Produce {
    return [shape, &values](const io::TextOut::Sink& sink) { sink(io::npy_float32_bytes(shape, values)); };
  };
  // In layer_outputs' order; an output not asked for is never produced.
  std::vector<io::Produce> texts = {npy({c.ranks, c.tokens, f.hidden_out}, res.out)};
  texts.push_back(o.recv.empty() ? io::Produce() : npy({c.ranks, c.slots(), f.hidden}, res.recv));
  const bool grads = !o.grad_out.empty();
  texts.push_back(grads ? npy({c.ranks, c.tokens, f.hidden}, res.grad_x) : io::Produce());
  texts.push_back(grads ? npy({c.ranks, c.tokens, c.topk}, res.grad_w) : io::Produce());
  texts.push_back(grads && !o.experts.empty() ? npy({c.experts, f.hidden, f.hidden_out}, res.grad_experts)
                                              : io::Produce());
  // All or nothing: every file complete beside its target, then all put
  // in place (io/output_set.hpp: nothing left behind on a failure or a
  // signal).
  layer_outputs(o).write(texts);
}

void run_layer(const LayerOptions& o) {
  layer_outputs(o).check();  // a path that cannot be written stops the run before any work
  const LayerFiles f = read_layer_files(o);
  const LayerInputs in{f.problem, f.x, f.hidden, f.w, o.grad_out.empty() ? nullptr : &f.grad_out,
                       o.experts.empty() ? nullptr : &f.experts, f.hidden_out};
  const LayerResults res = o.world == LayerWorld::gpu             ? gpu_world_layer(in, o.dtype, o.devices)
                           : o.backend == LayerBackend::portable ? portable_layer(in, o.dtype)
                           : o.backend == LayerBackend::cuda     ? cuda_layer(in, o.dtype)
                                                                 : reference_layer(in, o.dtype);
  write_layer_files(o, f, res);
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
