// moonep-layer's test files, and the check of what it wrote against the
// direct layer (no plan): out[t] = sum_k w[t][k] x[t], gx[t] = sum_k w[t][k]
// g[t], gw[t][k] = <g[t], x[t]>, recv's every entry slot = its token's row
// and every other slot 0.
//
//   layer_cli_files make DIR R E K S B tp H SEED [ragged|fine]
//     writes DIR/problem.json, x.npy, w.npy, g.npy: small multiples of 1/4,
//     so every product and sum is exact in float; rows past s_r are NaN
//     (never to be read). `fine` rows have 8 significant bits (exact in
//     bf16, their sums are not): the result differs between bf16 and float,
//     and is still exact in float before its one rounding.
//   layer_cli_files check DIR float|double|bf16
//     reads them and DIR/out.npy, recv.npy, gx.npy, gw.npy; exit 1 with a
//     message at the first value that differs.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "io/npy.hpp"
#include "moonep/bf16.hpp"
#include "moonep/io.hpp"
#include "moonep/reference.hpp"
#include "moonep/synthetic.hpp"

namespace {

using moonep::io::NpyArray;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "layer_cli_files: %s\n", what.c_str());
  std::exit(1);
}

int make(const std::string& dir, char** a, const std::string& variant) {
  const bool ragged = variant == "ragged", fine = variant == "fine";
  moonep::Problem p;
  p.config = moonep::Config{std::atoi(a[0]), std::atoi(a[1]), std::atoi(a[2]), std::atoi(a[3]), std::atoi(a[4]),
                            std::atoi(a[5])};
  const int H = std::atoi(a[6]);
  const unsigned seed = static_cast<unsigned>(std::atoi(a[7]));
  const moonep::Config& c = p.config;
  p.routing = moonep::synthetic_routing(c, 1.5, seed);
  std::vector<std::int32_t> tokens(c.ranks, c.tokens);
  if (ragged) {
    for (int r = 0; r < c.ranks; ++r) {
      tokens[r] = r % 3 == 0 ? c.tokens / 2 : r % 3 == 1 ? 0 : c.tokens;
      p.routing[r].resize(static_cast<std::size_t>(tokens[r]) * c.topk);
    }
    p.tokens_per_rank = tokens;
  }
  moonep::write_problem_file(p, dir + "/problem.json");
  std::srand(seed);
  auto values = [&](int width, bool weights) {
    std::vector<double> v;
    for (int r = 0; r < c.ranks; ++r)
      for (int t = 0; t < c.tokens; ++t)
        for (int i = 0; i < width; ++i)
          v.push_back(t >= tokens[r] ? std::numeric_limits<double>::quiet_NaN()
                      : weights      ? (1 + std::rand() % 4) / 4.0
                      : fine         ? (std::rand() % 2 ? 1 : -1) * (129 + std::rand() % 127) / 64.0
                                     : (std::rand() % 17 - 8) / 4.0);
    return v;
  };
  moonep::io::write_npy(dir + "/x.npy", "x", {c.ranks, c.tokens, H}, values(H, false));
  moonep::io::write_npy(dir + "/w.npy", "w", {c.ranks, c.tokens, c.topk}, values(c.topk, true));
  moonep::io::write_npy(dir + "/g.npy", "g", {c.ranks, c.tokens, H}, values(H, false));
  return 0;
}

double rounded(double v, const std::string& dtype) {
  if (dtype == "bf16") return static_cast<float>(moonep::bf16(static_cast<float>(v)));
  return static_cast<float>(v);  // the files are float32
}

void expect(const NpyArray& a, std::size_t i, double want, const std::string& what) {
  if (!(a.values[i] == want))
    die(what + "[" + std::to_string(i) + "] = " + std::to_string(a.values[i]) + ", expected " + std::to_string(want));
}

int check(const std::string& dir, const std::string& dtype) {
  const moonep::Problem p = moonep::read_problem_file(dir + "/problem.json");
  const moonep::Config& c = p.config;
  const NpyArray x = moonep::io::read_npy(dir + "/x.npy", "x"), w = moonep::io::read_npy(dir + "/w.npy", "w"),
                 g = moonep::io::read_npy(dir + "/g.npy", "g"), out = moonep::io::read_npy(dir + "/out.npy", "out"),
                 recv = moonep::io::read_npy(dir + "/recv.npy", "recv"), gx = moonep::io::read_npy(dir + "/gx.npy", "gx"),
                 gw = moonep::io::read_npy(dir + "/gw.npy", "gw");
  const int H = static_cast<int>(x.shape[2]), K = c.topk, S = c.tokens;
  const std::int64_t nvs = c.slots();
  if (out.shape != x.shape || gx.shape != x.shape || gw.shape != w.shape ||
      recv.shape != std::vector<std::int64_t>{c.ranks, nvs, H})
    die("an output has the wrong shape");
  const auto tokens = moonep::tokens_or_full(c, p.tokens_per_rank ? &*p.tokens_per_rank : nullptr);
  const moonep::HostPlan plan =
      moonep::plan_reference(c, p.routing, nullptr, p.tokens_per_rank ? &*p.tokens_per_rank : nullptr);
  std::vector<char> entry_slot(static_cast<std::size_t>(c.ranks * nvs), 0);
  for (int r = 0; r < c.ranks; ++r)
    for (int t = 0; t < S; ++t) {
      const std::size_t row = (static_cast<std::size_t>(r) * S + t);
      for (int h = 0; h < H; ++h) {
        double o = 0, dx = 0;
        for (int k = 0; k < K && t < tokens[r]; ++k) {
          o += w.values[row * K + k] * rounded(x.values[row * H + h], dtype);
          // gx sums the rows of gy = w*g, which are of the element type
          // (docs/spec/layer.md "Combine's backward"): each rounded first.
          dx += rounded(w.values[row * K + k] * rounded(g.values[row * H + h], dtype), dtype);
        }
        expect(out, row * H + h, t < tokens[r] ? rounded(o, dtype) : 0, "out");
        expect(gx, row * H + h, t < tokens[r] ? rounded(dx, dtype) : 0, "gx");
      }
      for (int k = 0; k < K; ++k) {
        double dot = 0;
        for (int h = 0; h < H && t < tokens[r]; ++h)
          dot += rounded(g.values[row * H + h], dtype) * rounded(x.values[row * H + h], dtype);
        expect(gw, row * K + k, dot, "gw");
        if (t >= tokens[r]) continue;
        std::int64_t code = plan.ranks[r].dst[t * K + k];
        if (code < 0) code = -code - 1;
        entry_slot[code] = 1;
        for (int h = 0; h < H; ++h) expect(recv, code * H + h, rounded(x.values[row * H + h], dtype), "recv");
      }
    }
  for (std::size_t s = 0; s < entry_slot.size(); ++s)
    if (!entry_slot[s])
      for (int h = 0; h < H; ++h) expect(recv, s * H + h, 0, "recv");
  std::printf("moonep-layer's files match the direct layer (%s)\n", dtype.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 2 ? argv[1] : "";
    if (mode == "make" && (argc == 11 || argc == 12)) return make(argv[2], argv + 3, argc == 12 ? argv[11] : "");
    if (mode == "check" && argc == 4) return check(argv[2], argv[3]);
  } catch (const std::exception& e) {
    die(e.what());
  }
  die("usage: layer_cli_files make DIR R E K S B tp H SEED [ragged|fine] | check DIR float|double|bf16");
}
