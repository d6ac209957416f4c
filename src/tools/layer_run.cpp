// moonep-layer's step; see layer_run.hpp. Files hold float32 (or float64)
// values; the computation runs in the --dtype element type, here over the
// reference layer (moonep/layer_reference.hpp; the portable backend is
// layer_portable.cpp), and results are written as float32.
#include "layer_run.hpp"

#include <string>
#include <vector>

#include "io/output_file.hpp"
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

// A [R][rows][width] array as per-rank buffers of T, and back.
template <class T>
PerRank<T> to_ranks(const std::vector<double>& v, int ranks) {
  const std::size_t per = v.size() / static_cast<std::size_t>(ranks);
  PerRank<T> out(ranks);
  for (int r = 0; r < ranks; ++r) {
    out[r].reserve(per);
    for (std::size_t i = 0; i < per; ++i)
      out[r].push_back(static_cast<T>(static_cast<accum_t<T>>(v[r * per + i])));
  }
  return out;
}
template <class T>
std::vector<double> from_ranks(const PerRank<T>& data) {
  std::vector<double> v;
  for (const auto& rank : data)
    for (const T& x : rank) v.push_back(static_cast<double>(static_cast<accum_t<T>>(x)));
  return v;
}

// Zero-filled buffers: what the contract leaves unwritten (rows past s_r,
// undefined slots) is written as 0.
template <class V>
PerRank<V> zeros(int ranks, std::int64_t per_rank) {
  return PerRank<V>(ranks, std::vector<V>(static_cast<std::size_t>(per_rank), static_cast<V>(accum_t<V>(0))));
}

template <class T>
LayerResults compute(const LayerInputs& in) {
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
  f.hidden = static_cast<int>(xs[2]);
  Shape ws = {c.ranks, c.tokens, c.topk};
  const std::string wdims = "[R][S][K] = [" + std::to_string(c.ranks) + "][" + std::to_string(c.tokens) + "][" +
                            std::to_string(c.topk) + "]";
  f.w = read_input(o.weights, "weights file", ws, wdims.c_str());
  if (!o.grad_out.empty()) {
    Shape gs = {c.ranks, c.tokens, f.hidden};
    const std::string gdims = "[R][S][H] = [" + std::to_string(c.ranks) + "][" + std::to_string(c.tokens) + "][" +
                              std::to_string(f.hidden) + "] (H of the x file)";
    f.grad_out = read_input(o.grad_out, "grad-out file", gs, gdims.c_str());
  }
  return f;
}

void write_layer_files(const LayerOptions& o, const Config& c, int hidden, const LayerResults& res) {
  struct Output {
    const std::string& path;
    const char* what;
    Shape shape;
    const std::vector<double>& values;
  };
  std::vector<Output> files = {{o.output, "output file", {c.ranks, c.tokens, hidden}, res.out}};
  if (!o.recv.empty()) files.push_back({o.recv, "recv file", {c.ranks, c.slots(), hidden}, res.recv});
  if (!o.grad_out.empty()) {
    files.push_back({o.grad_x, "grad-x file", {c.ranks, c.tokens, hidden}, res.grad_x});
    files.push_back({o.grad_weights, "grad-weights file", {c.ranks, c.tokens, c.topk}, res.grad_w});
  }
  // Every output path is resolved before the first is written, so that an
  // unwritable one (a directory, a missing folder) leaves no file changed.
  for (const Output& f : files) io::resolve_output(f.path, f.what);
  for (const Output& f : files) io::write_npy(f.path, f.what, f.shape, f.values);
}

void run_layer(const LayerOptions& o) {
  const LayerFiles f = read_layer_files(o);
  const LayerInputs in{f.problem, f.x, f.hidden, f.w, o.grad_out.empty() ? nullptr : &f.grad_out};
  const LayerResults res = o.backend == LayerBackend::portable ? portable_layer(in, o.dtype) : reference_layer(in, o.dtype);
  write_layer_files(o, f.problem.config, f.hidden, res);
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
