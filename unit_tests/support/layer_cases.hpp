// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Steps and data for the reference layer's tests (test_layer_*.cpp), and
// the direct MoE computation they are checked against: plain loops over
// every token and its K experts, no plan, in double.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "moonep/error.hpp"
#include "moonep/host_plan.hpp"
#include "moonep/layer_reference.hpp"
#include "moonep/reference.hpp"
#include "moonep/synthetic.hpp"

namespace layer_test {

using moonep::Config;
using moonep::HostPlan;
using moonep::PerRank;
using moonep::Routing;
using moonep::TokensPerRank;

// A planned step: its routing, s_r of every rank and the reference plan.
struct Step {
  Config c;
  Routing routing;
  std::vector<std::int32_t> tokens;  // s_r
  HostPlan plan;
};

inline Step make_step(const Config& c, Routing routing, const std::optional<TokensPerRank>& tokens = {}) {
  Step s{c, std::move(routing), {}, {}};
  s.tokens = tokens ? *tokens : TokensPerRank(c.ranks, c.tokens);
  s.plan = moonep::plan_reference(c, s.routing, nullptr, tokens ? &*tokens : nullptr);
  return s;
}

// A synthetic step; a ragged one gives ranks 0, 1, 2, 3 (mod 4) 0, S, S/2
// and 1 tokens (R = 1: S - 2).
inline Step synthetic_step(const Config& c, double imbalance, std::uint64_t seed, bool ragged) {
  Routing routing = moonep::synthetic_routing(c, imbalance, seed);
  if (!ragged) return make_step(c, routing);
  TokensPerRank tokens(c.ranks);
  for (int r = 0; r < c.ranks; ++r) {
    const int pattern[4] = {c.ranks == 1 ? c.tokens - 2 : 0, c.tokens, c.tokens / 2, 1};
    tokens[r] = pattern[r % 4];
    routing[r].resize(static_cast<std::size_t>(tokens[r]) * c.topk);
  }
  return make_step(c, routing, tokens);
}

// Every token names its K experts among the experts of one rank (so most
// of its entries are duplicates of one primary), with its first expert
// twice when K > 1.
inline Step one_rank_step(const Config& c, std::uint64_t seed) {
  Routing routing(c.ranks);
  const int epn = c.experts_per_rank();
  std::uint64_t state = seed;
  auto next = [&state] { return (state = state * 6364136223846793005ull + 1442695040888963407ull) >> 33; };
  for (int r = 0; r < c.ranks; ++r)
    for (int t = 0; t < c.tokens; ++t) {
      const int home = static_cast<int>(next() % c.ranks);
      const int first = home * epn + static_cast<int>(next() % epn);
      for (int k = 0; k < c.topk; ++k)
        routing[r].push_back(k <= 1 ? first : home * epn + static_cast<int>(next() % epn));
    }
  return make_step(c, routing);
}

// R = 4, one expert per rank, every entry names expert 0: ranks 1-3 take
// rank 0's surplus and each copies expert 0 (reduce's order shows).
inline Step copy_everywhere_step() {
  const Config c{4, 4, 2, 3, 1, 1};
  return make_step(c, Routing(4, std::vector<std::int32_t>(6, 0)));
}

// A plan that cannot run: R = 2, epn = 3, B = 1: rank 0's experts 0, 1, 2
// hold 6, 5 and 5 of the 16 entries, so rank 1 takes 6 of expert 0 and 2 of
// expert 1, and can copy only expert 0 ("rank 1 would run expert 1 ...").
inline Step uncopied_remote_step() {
  const Config c{2, 6, 2, 4, 1, 1};
  return make_step(c, Routing{{0, 1, 0, 2, 0, 1, 2, 2}, {0, 1, 0, 2, 0, 1, 1, 2}});
}

// The reference's refusal of uncopied_remote_step ("rank 1 would run expert
// 1 ..."): the words every path's fetch and reduce must give.
inline std::string uncopied_remote_error() {
  const Step s = uncopied_remote_step();
  PerRank<float> own(2, std::vector<float>(3)), copies(2, std::vector<float>(1));
  try {
    moonep::fetch_reference(s.plan, 1, own, copies);
  } catch (const moonep::InputError& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

constexpr double kSentinel = 7.75;  // what an "untouched" buffer holds

// The steps every forward and backward test runs on.
inline std::vector<std::pair<std::string, Step>> layer_steps() {
  std::vector<std::pair<std::string, Step>> all;
  all.emplace_back("full", synthetic_step(Config{4, 16, 4, 12, 4, 4}, 1.5, 11, false));
  all.emplace_back("ragged", synthetic_step(Config{4, 16, 4, 12, 4, 4}, 1.5, 12, true));
  all.emplace_back("small copy slots", synthetic_step(Config{4, 16, 3, 10, 1, 2}, 2.5, 13, false));
  all.emplace_back("one rank per token", one_rank_step(Config{4, 8, 6, 10, 2, 3}, 14));
  all.emplace_back("R = 1", synthetic_step(Config{1, 4, 3, 9, 1, 2}, 1.0, 15, false));
  all.emplace_back("R = 1 ragged", synthetic_step(Config{1, 4, 2, 9, 1, 1}, 1.0, 16, true));
  return all;
}

// How the data's values are drawn: `exact` gives small multiples of 1/4
// (rows in -2..2, weights in 0.25..1), so every product and every partial
// sum of a step is exact in float and the result is the exact sum rounded
// once; `random` gives uniform values in [-1, 1) (weights in (0, 1)).
enum class Values { exact, random };

class Draw {
 public:
  Draw(Values v, std::uint64_t seed) : values_(v), state_(seed * 2654435761u + 1) {}
  double row_value() {
    return values_ == Values::exact ? static_cast<double>(static_cast<int>(next() % 17) - 8) / 4
                                    : static_cast<double>(next() % 2000001) / 1000000 - 1;
  }
  double weight() {
    return values_ == Values::exact ? static_cast<double>(1 + next() % 4) / 4
                                    : static_cast<double>(1 + next() % 999999) / 1000000;
  }

 private:
  std::uint64_t next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return state_ >> 11;
  }
  Values values_;
  std::uint64_t state_;
};

template <class T>
T to(double v) {
  return static_cast<T>(static_cast<moonep::accum_t<T>>(v));
}
template <class T>
double from(T v) {
  return static_cast<double>(static_cast<moonep::accum_t<T>>(v));
}
template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// The message of the InputError f throws, or "(nothing thrown)".
inline std::string input_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const moonep::InputError& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

// Where entry i of rank r landed: (rank, slot), duplicates decoded too.
inline std::pair<int, std::int64_t> slot_of(const Step& s, int r, std::int64_t i) {
  const std::int64_t nvs = s.c.slots();
  std::int64_t code = s.plan.ranks[r].dst[i];
  if (code < 0) code = -code - 1;
  return {static_cast<int>(code / nvs), code % nvs};
}

// Rank-major buffers of `rows` rows of `width` per rank; rows from
// `valid[r]` on are NaN (they must never be read).
template <class T>
PerRank<T> rows_of(const Config& c, std::int64_t rows, std::int64_t width, const std::vector<std::int32_t>& valid,
                   Draw& draw, bool weights = false) {
  PerRank<T> out(c.ranks, std::vector<T>(static_cast<std::size_t>(rows * width),
                                         to<T>(std::numeric_limits<double>::quiet_NaN())));
  for (int r = 0; r < c.ranks; ++r)
    for (std::int64_t i = 0; i < valid[r] * width; ++i) out[r][i] = to<T>(weights ? draw.weight() : draw.row_value());
  return out;
}

template <class T>
PerRank<T> filled(const Config& c, std::int64_t values, double v) {
  return PerRank<T>(c.ranks, std::vector<T>(static_cast<std::size_t>(values), to<T>(v)));
}

// Linear experts M [E][H][H'] and rank h's P_h [epn][H*H'] view of them.
struct Experts {
  int hidden = 0, out = 0;
  std::vector<double> m;  // [E][H][H']
  double at(int e, int h, int o) const { return m[(static_cast<std::size_t>(e) * hidden + h) * out + o]; }
};
// E experts [hidden][out] drawn like the rows (exact: quarters in -2..2).
inline Experts draw_experts(const Config& c, int hidden, int out, Values values, std::uint64_t seed = 5) {
  Experts ex{hidden, out, {}};
  Draw draw(values, seed);
  for (int i = 0; i < c.experts * hidden * out; ++i) ex.m.push_back(draw.row_value());
  return ex;
}
template <class T>
PerRank<T> owner_parameters(const Config& c, const Experts& ex) {
  const std::size_t q = static_cast<std::size_t>(ex.hidden) * ex.out;
  PerRank<T> p(c.ranks, std::vector<T>(q * c.experts_per_rank()));
  for (int e = 0; e < c.experts; ++e)
    for (std::size_t i = 0; i < q; ++i) p[e / c.experts_per_rank()][(e % c.experts_per_rank()) * q + i] = to<T>(ex.m[e * q + i]);
  return p;
}

// The direct layer, no plan, in double: out[r][t] = sum_k w * f_e(x[r][t])
// with f_e the identity (ex == nullptr) or x @ M_e. Rows past s_r stay 0.
template <class T>
std::vector<std::vector<double>> direct_out(const Step& s, int hidden, const PerRank<T>& x,
                                            const PerRank<moonep::weight_t<T>>* w, const Experts* ex = nullptr) {
  const int K = s.c.topk, width = ex ? ex->out : hidden;
  std::vector<std::vector<double>> out(s.c.ranks, std::vector<double>(static_cast<std::size_t>(s.c.tokens) * width, 0));
  for (int r = 0; r < s.c.ranks; ++r)
    for (int t = 0; t < s.tokens[r]; ++t)
      for (int k = 0; k < K; ++k) {
        const int e = s.routing[r][t * K + k];
        const double f = w ? static_cast<double>((*w)[r][t * K + k]) : 1.0;
        for (int o = 0; o < width; ++o) {
          double y = 0;
          if (!ex) y = from(x[r][t * hidden + o]);
          else
            for (int h = 0; h < hidden; ++h) y += from(x[r][t * hidden + h]) * ex->at(e, h, o);
          out[r][t * width + o] += f * y;
        }
      }
  return out;
}

// The direct linear layer's gradients, no plan, in double, given g = d out
// (docs/spec/layer.md "The linear layer"): gx[r][t] = sum_k w * (g @ M_e^T),
// gw[r][t][k] = <g, x @ M_e>, gM[e] = sum over entries naming e of
// w * x^T g. Rows (entries) past s_r stay 0.
struct DirectGradients {
  std::vector<std::vector<double>> gx, gw;
  std::vector<double> gm;  // [E][H][H']
};
template <class T>
DirectGradients direct_gradients(const Step& s, const PerRank<T>& x, const PerRank<moonep::weight_t<T>>& w,
                                 const PerRank<T>& g, const Experts& ex) {
  const int K = s.c.topk, H = ex.hidden, O = ex.out;
  DirectGradients d;
  d.gx.assign(s.c.ranks, std::vector<double>(static_cast<std::size_t>(s.c.tokens) * H, 0));
  d.gw.assign(s.c.ranks, std::vector<double>(static_cast<std::size_t>(s.c.tokens) * K, 0));
  d.gm.assign(static_cast<std::size_t>(s.c.experts) * H * O, 0);
  for (int r = 0; r < s.c.ranks; ++r)
    for (int t = 0; t < s.tokens[r]; ++t)
      for (int k = 0; k < K; ++k) {
        const int e = s.routing[r][t * K + k];
        const double f = static_cast<double>(w[r][t * K + k]);
        for (int h = 0; h < H; ++h)
          for (int o = 0; o < O; ++o) {
            const double xv = from(x[r][t * H + h]), gv = from(g[r][t * O + o]), m = ex.at(e, h, o);
            d.gx[r][t * H + h] += f * gv * m;
            d.gw[r][t * K + k] += gv * xv * m;
            d.gm[(static_cast<std::size_t>(e) * H + h) * O + o] += f * xv * gv;
          }
      }
  return d;
}

}  // namespace layer_test
