// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-layer's test files, and the check of what it wrote against the
// direct layer (no plan): out[t] = sum_k w[t][k] x[t], gx[t] = sum_k w[t][k]
// g[t], gw[t][k] = <g[t], x[t]>, recv's every entry slot = its token's row
// and every other slot 0.
//
//   layer_cli_files make DIR R E K S B tp H SEED [ragged|fine|linear|linear-ragged]
//     writes DIR/problem.json, x.npy, w.npy, g.npy: small multiples of 1/4,
//     so every product and sum is exact in float; rows past s_r are NaN
//     (never to be read). `fine` rows have 8 significant bits (exact in
//     bf16, their sums are not): the result differs between bf16 and float,
//     and is still exact in float before its one rounding. `linear` also
//     writes linear experts M.npy [E][H][3] and makes g.npy [R][S][3].
//   layer_cli_files check DIR float|double|bf16
//     reads them and DIR/out.npy, recv.npy, gx.npy, gw.npy; exit 1 with a
//     message at the first value that differs. With M.npy in DIR: out.npy
//     [R][S][3], gx.npy, gw.npy and gM.npy [E][H][3] against the direct
//     linear layer (docs/spec/layer.md "The linear layer"; float or double,
//     whose files, float32, hold the exact values).
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

constexpr int kLinearOut = 3;  // H' of the linear experts

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "layer_cli_files: %s\n", what.c_str());
  std::exit(1);
}

int make(const std::string& dir, char** a, const std::string& variant) {
  const bool ragged = variant.find("ragged") != std::string::npos, fine = variant == "fine";
  const bool linear = variant.find("linear") != std::string::npos;
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
  const int out = linear ? kLinearOut : H;
  moonep::io::write_npy(dir + "/g.npy", "g", {c.ranks, c.tokens, out}, values(out, false));
  if (linear) {
    std::vector<double> m;
    for (int i = 0; i < c.experts * H * out; ++i) m.push_back((std::rand() % 17 - 8) / 4.0);
    moonep::io::write_npy(dir + "/M.npy", "M", {c.experts, H, out}, m);
  }
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

// The direct linear layer, in double: out = sum_k w (x @ M_e),
// gx = sum_k w (g @ M_e^T), gw = <g, x @ M_e>, gM_e = sum w x^T g.
int check_linear(const std::string& dir) {
  const moonep::Problem p = moonep::read_problem_file(dir + "/problem.json");
  const moonep::Config& c = p.config;
  const NpyArray x = moonep::io::read_npy(dir + "/x.npy", "x"), w = moonep::io::read_npy(dir + "/w.npy", "w"),
                 g = moonep::io::read_npy(dir + "/g.npy", "g"), m = moonep::io::read_npy(dir + "/M.npy", "M"),
                 out = moonep::io::read_npy(dir + "/out.npy", "out"), gx = moonep::io::read_npy(dir + "/gx.npy", "gx"),
                 gw = moonep::io::read_npy(dir + "/gw.npy", "gw"), gm = moonep::io::read_npy(dir + "/gM.npy", "gM");
  const int H = static_cast<int>(x.shape[2]), O = static_cast<int>(m.shape[2]), K = c.topk, S = c.tokens;
  if (out.shape != std::vector<std::int64_t>{c.ranks, S, O} || gx.shape != x.shape || gw.shape != w.shape ||
      gm.shape != m.shape)
    die("an output has the wrong shape");
  const auto tokens = moonep::tokens_or_full(c, p.tokens_per_rank ? &*p.tokens_per_rank : nullptr);
  std::vector<double> want_out(out.values.size(), 0), want_gx(gx.values.size(), 0), want_gw(gw.values.size(), 0),
      want_gm(gm.values.size(), 0);
  for (int r = 0; r < c.ranks; ++r)
    for (int t = 0; t < tokens[r]; ++t)
      for (int k = 0; k < K; ++k) {
        const std::size_t row = static_cast<std::size_t>(r) * S + t, e = p.routing[r][t * K + k];
        const double f = w.values[row * K + k];
        for (int h = 0; h < H; ++h)
          for (int o = 0; o < O; ++o) {
            const double xv = x.values[row * H + h], gv = g.values[row * O + o], mv = m.values[(e * H + h) * O + o];
            want_out[row * O + o] += f * xv * mv;
            want_gx[row * H + h] += f * gv * mv;
            want_gw[row * K + k] += gv * xv * mv;
            want_gm[(e * H + h) * O + o] += f * xv * gv;
          }
      }
  for (std::size_t i = 0; i < want_out.size(); ++i) expect(out, i, want_out[i], "out");
  for (std::size_t i = 0; i < want_gx.size(); ++i) expect(gx, i, want_gx[i], "gx");
  for (std::size_t i = 0; i < want_gw.size(); ++i) expect(gw, i, want_gw[i], "gw");
  for (std::size_t i = 0; i < want_gm.size(); ++i) expect(gm, i, want_gm[i], "gM");
  std::printf("moonep-layer's files match the direct linear layer\n");
  return 0;
}

int check(const std::string& dir, const std::string& dtype) {
  if (std::FILE* f = std::fopen((dir + "/M.npy").c_str(), "rb")) {
    std::fclose(f);
    if (dtype == "bf16") die("the linear layer's check runs on float or double");
    return check_linear(dir);
  }
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
