// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::MpiLayer (moonep/mpi_layer.hpp): the operations of
// docs/spec/layer.md for this process's rank. Each one: check (every
// process agrees, MpiLayerWindow::start), move rows into the peers'
// symmetric buffers, fence, finish locally. The arithmetic is the
// reference's (src/core/reference_layer.cpp) term for term, so the bits
// are: products and sums in A in the same order, rounded to T once.
#include "moonep/mpi_layer.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "core/row_loops.hpp"
#include "mpi/mpi_layer_checks.hpp"
#include "mpi/mpi_layer_window.hpp"

namespace moonep {

namespace {
constexpr std::int64_t kAlign = 64;
std::int64_t aligned(std::int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }
}  // namespace

template <class T>
struct MpiLayer<T>::Impl {
  using A = accum_type;
  using W = weight_type;
  MpiWorld& world;
  Config c;
  std::int64_t H, nvs, K;
  int me;
  // Byte offsets of the regions in every rank's buffer (mpi_layer.hpp).
  // Only on the rma world, where every MPI_Put has a cost of its own, what
  // goes to one rank goes as one block per pair of ranks:
  //   in_w [R][S*K] W     per-entry values (dispatch's routing weights, the
  //                       values backward sends to sources)
  //   back [R][S][H] A    with `blocks`: the partial rows from destination
  //   back_idx [R][S] i32 d, packed in its slot order, and the entry each
  //                       one is for (one partial row per token and
  //                       destination rank: at most S from d)
  // back [R][S] fits in back [S*K] when R <= K (`blocks`); for more ranks
  // than K each partial row is one MPI_Put into back[entry], so that the
  // window never grows past S*K rows.
  std::int64_t o_recv, o_recv_w, o_grad_in, o_back, o_back_w, o_in_w, o_back_idx, bytes;
  bool blocks = false;
  std::unique_ptr<impl::MpiLayerWindow> win;
  std::vector<A> scratch;  // partial rows before their MPI_Put (rma): [R][S][H] with blocks, else [NvS][H]
  std::vector<std::int32_t> scratch_idx;  // [R][S] the source's entry of each (blocks)
  std::vector<std::int64_t> packed;       // [R] partial rows for each source this step
  std::vector<const A*> row_of;          // [S*K] where entry i's partial row arrived (blocks)
  std::vector<std::int32_t> group_of;  // [NvS] this step's dup row headed by the slot, or -1 (-2: a duplicate)

  Impl(MpiWorld& w, const Config& config, int hidden)
      : world(w), c(config), H(hidden), nvs(config.slots()), K(config.topk), me(w.rank()) {
    o_recv = 0;
    o_recv_w = o_recv + aligned(nvs * H * std::int64_t(sizeof(T)));
    o_grad_in = o_recv_w + aligned(nvs * std::int64_t(sizeof(W)));
    const bool rma = w.kind() != MpiWorldKind::shared;
    blocks = rma && c.ranks <= c.topk;
    const std::int64_t block_rows = std::int64_t{c.ranks} * c.tokens;  // <= S*K with blocks
    o_back = o_grad_in + aligned(nvs * H * std::int64_t(sizeof(T)));
    o_back_w = o_back + aligned(c.entries() * H * std::int64_t(sizeof(A)));
    o_in_w = o_back_w + aligned(c.entries() * std::int64_t(sizeof(W)));
    o_back_idx = o_in_w + (rma ? aligned(c.ranks * c.entries() * std::int64_t(sizeof(W))) : 0);
    bytes = o_back_idx + (blocks ? aligned(block_rows * std::int64_t(sizeof(std::int32_t))) : 0);
    const long long fingerprint[] = {c.ranks, c.experts, c.topk, c.tokens, c.copy_slots, c.token_padding, hidden,
                                     static_cast<long long>(sizeof(T)), std::is_same_v<T, bf16> ? 1 : 0};
    win = std::make_unique<impl::MpiLayerWindow>(w, bytes, fingerprint, 9, "MpiLayer");
    if (!win->direct()) scratch.resize(static_cast<std::size_t>((blocks ? block_rows : nvs) * H));
    if (blocks) {
      scratch_idx.resize(static_cast<std::size_t>(block_rows));
      row_of.resize(static_cast<std::size_t>(c.entries()));
      zero_row.assign(static_cast<std::size_t>(H), A(0));
    }
    group_of.resize(static_cast<std::size_t>(nvs));
    packed.resize(static_cast<std::size_t>(c.ranks));
    sends_to.resize(static_cast<std::size_t>(c.ranks));
    if (!win->direct()) {
      w_stage.resize(static_cast<std::size_t>(c.entries()));
      scratch_back.resize(static_cast<std::size_t>(c.ranks * c.entries()));
    }
  }
  std::vector<W> w_stage;  // [S*K] a padded w's entries, packed (rma dispatch)
  std::vector<char> sends_to;  // [R] whether this step sends an entry to the rank (rma dispatch)

  template <class V>
  V* local(std::int64_t offset) const {
    return reinterpret_cast<V*>(win->local() + offset);
  }
  T* recv_row(std::int64_t s) const { return local<T>(o_recv) + s * H; }
  W* recv_w() const { return local<W>(o_recv_w); }
  T* grad_in_row(std::int64_t s) const { return local<T>(o_grad_in) + s * H; }
  A* back_row(std::int64_t i) const { return local<A>(o_back) + i * H; }
  W* back_w() const { return local<W>(o_back_w); }

  static A widen(T v) { return static_cast<A>(v); }
  static T round(A v) { return static_cast<T>(v); }

  struct Dst {
    int rank;
    std::int64_t loff;
    bool primary;
  };
  Dst decode(std::int32_t code) const {
    const std::int64_t v = code >= 0 ? code : -static_cast<std::int64_t>(code) - 1;
    return {static_cast<int>(v / nvs), v % nvs, code >= 0};
  }

  // The start of every operation: the plan's and the arguments' errors;
  // `sums` for the operations that send partial rows back to the sources
  // (reduce_to_sources: combine, dispatch's backward).
  void start(const char* op, const MpiLayerPlan& plan, std::string error, bool sums = false) {
    std::string plan_error = layer::mpi_plan_error(plan, c, me);
    if (plan_error.empty() && sums) plan_error = primaries_error(plan);
    win->start(op, plan_error.empty() ? error : plan_error);
  }

  // A partial row goes back per token and destination rank, so no source
  // has more than S primary slots here (the rma world's back blocks hold
  // S rows per rank). A plan that says otherwise is refused by the
  // operations that send partial rows back, on every world. Leaves
  // group_of marked for the operation (mark_duplicates).
  std::string primaries_error(const MpiLayerPlan& p) {
    mark_duplicates(p);
    std::fill(packed.begin(), packed.end(), 0);
    for (std::int64_t s = 0; s < nvs; ++s)
      if (p.src_info[s] >= 0 && group_of[static_cast<std::size_t>(s)] != -2)
        if (++packed[static_cast<std::size_t>(p.src_info[s] / nvs)] > c.tokens)
          return "the plan's src_info names more than S = " + std::to_string(c.tokens) +
                 " primary slots of rank " + std::to_string(p.src_info[s] / nvs) +
                 " (one per token and destination rank)";
    return "";
  }

  // group_of for this plan: the dup row each primary heads, -2 for a duplicate.
  void mark_duplicates(const MpiLayerPlan& p) {
    std::fill(group_of.begin(), group_of.end(), -1);
    for (std::int64_t q = 0; q < p.dup_counts[1]; ++q) group_of[static_cast<std::size_t>(p.dup_loffs[q])] = -2;
    for (std::int32_t j = 0; j < p.dup_counts[0]; ++j) group_of[static_cast<std::size_t>(p.dup_groups[3 * j])] = j;
  }

  // f(primary, duplicate) for every duplicate slot, in dup_loffs order.
  template <class F>
  static void each_duplicate(const MpiLayerPlan& p, const F& f) {
    for (std::int32_t j = 0; j < p.dup_counts[0]; ++j)
      for (std::int32_t q = p.dup_groups[3 * j + 1]; q < p.dup_groups[3 * j + 1] + p.dup_groups[3 * j + 2]; ++q)
        f(std::int64_t{p.dup_groups[3 * j]}, std::int64_t{p.dup_loffs[q]});
  }

  template <class Rows>
  void zero_padding(const MpiLayerPlan& p, const Rows& row_of, W* weights) const {
    for (std::int64_t g = 0; g < p.zero_fill_rows; ++g)
      for (std::int64_t s = p.zero_fill_ranges[2 * g]; s < p.zero_fill_ranges[2 * g] + p.zero_fill_ranges[2 * g + 1];
           ++s) {
        T* row = row_of(s);
        for (std::int64_t h = 0; h < H; ++h) row[h] = round(A(0));
        if (weights) weights[s] = W(0);
      }
  }

  // Destination, then source: the combine prologue of `rows` (weighted by
  // recv_w or not) into each primary's source `back` row, fence, and each
  // source's sum of its primaries' rows in increasing k into `out`.
  void reduce_to_sources(const char* op, const MpiLayerPlan& p, const const_rows_view& y, bool weighted,
                         const rows_view& out) {
    // group_of: marked by start(..., sums = true) (primaries_error)
    const W* rw = recv_w();
    const bool direct = win->direct();
    const std::int64_t row_bytes = H * std::int64_t(sizeof(A));
    if (blocks) std::fill(packed.begin(), packed.end(), 0);
    for (std::int64_t s = 0; s < nvs; ++s) {
      const std::int32_t src = p.src_info[s];
      if (src < 0 || group_of[static_cast<std::size_t>(s)] == -2) continue;
      const int r = static_cast<int>(src / nvs);
      const std::int64_t i = src % nvs;
      A* part;
      if (direct) {
        part = reinterpret_cast<A*>(win->peer(r) + o_back) + i * H;
      } else if (blocks) {  // at most S per source (primaries_error)
        const std::int64_t at = r * c.tokens + packed[static_cast<std::size_t>(r)]++;
        part = &scratch[static_cast<std::size_t>(at * H)];
        scratch_idx[static_cast<std::size_t>(at)] = static_cast<std::int32_t>(i);
      } else {
        part = &scratch[static_cast<std::size_t>(s * H)];
      }
      // (Whole rows through core/row_loops.hpp: the same operations in the
      // same order, vectorised for the CPU it runs on.)
      if (weighted)
        rows::scale(part, A(rw[s]), &y(s, 0), H);
      else
        rows::widen(part, &y(s, 0), H);
      const std::int32_t j = group_of[static_cast<std::size_t>(s)];
      if (j >= 0)
        for (std::int32_t q = p.dup_groups[3 * j + 1]; q < p.dup_groups[3 * j + 1] + p.dup_groups[3 * j + 2]; ++q) {
          const std::int64_t slot = p.dup_loffs[q];
          if (weighted)
            rows::add_scaled(part, A(rw[slot]), &y(slot, 0), H);
          else
            rows::add(part, &y(slot, 0), H);
        }
      if (!direct && !blocks) win->put(part, row_bytes, r, o_back + i * row_bytes);
    }
    if (blocks) put_back_blocks();
    win->fence(op);
    if (blocks) find_back_rows(p);
    A* acc_row = acc.data();
    for (std::int64_t t = 0; t < p.entries / K; ++t) {
      bool first = true;
      for (std::int64_t k = 0; k < K; ++k) {
        if (p.dst[t * K + k] < 0) continue;  // a duplicate: in its primary's partial row
        const A* row = blocks ? row_of[static_cast<std::size_t>(t * K + k)] : back_row(t * K + k);
        if (first)
          std::copy(row, row + H, acc_row);
        else
          rows::add(acc_row, row, H);
        first = false;
      }
      rows::narrow(&out(t, 0), acc_row, H);
    }
  }
  std::vector<A> acc;  // [H] a token's sum at the source

  // Rma with blocks, at the destination: each source's partial rows and
  // their entries as one MPI_Put each into its back[me] and back_idx[me].
  void put_back_blocks() {
    const std::int64_t row_bytes = H * std::int64_t(sizeof(A)), idx_bytes = sizeof(std::int32_t);
    for (int r = 0; r < c.ranks; ++r) {
      const std::int64_t n = packed[static_cast<std::size_t>(r)], at = std::int64_t{r} * c.tokens;
      if (n == 0) continue;
      win->put(&scratch[static_cast<std::size_t>(at * H)], n * row_bytes, r, o_back + me * c.tokens * row_bytes);
      win->put(&scratch_idx[static_cast<std::size_t>(at)], n * idx_bytes, r,
               o_back_idx + me * c.tokens * idx_bytes);
    }
  }
  // Rma with blocks, at the source after the fence: row_of[i] for every
  // primary entry i. Destination d sent as many rows as this rank's plan
  // has primaries there; an index outside them (plans of different steps
  // on different ranks) is ignored, and an entry nobody sent reads zeros.
  void find_back_rows(const MpiLayerPlan& p) {
    std::fill(packed.begin(), packed.end(), 0);
    for (std::int64_t i = 0; i < p.entries; ++i) {
      row_of[static_cast<std::size_t>(i)] = zero_row.data();
      if (p.dst[i] >= 0) ++packed[static_cast<std::size_t>(decode(p.dst[i]).rank)];
    }
    const std::int32_t* idx = local<std::int32_t>(o_back_idx);
    for (int d = 0; d < c.ranks; ++d)
      for (std::int64_t k = 0; k < std::min<std::int64_t>(packed[static_cast<std::size_t>(d)], c.tokens); ++k) {
        const std::int64_t at = std::int64_t{d} * c.tokens + k, i = idx[at];
        if (i >= 0 && i < p.entries) row_of[static_cast<std::size_t>(i)] = back_row(at);
      }
  }
  std::vector<A> zero_row;  // [H] (blocks)

  // Both combines: the checks, then the sums.
  void combine(const MpiLayerPlan& p, const const_rows_view& y, bool weighted, const rows_view& out) {
    start("combine", p,
          layer::first_error({layer::extent_error("y", y, nvs, H, "NvS", "H"),
                              layer::extent_error("out", out, c.tokens, H, "S", "H")}),
          true);
    reduce_to_sources("combine", p, y, weighted, out);
  }

  // Per-entry values going back to their sources (combine's backward's
  // grad_w, dispatch's backward's grad_recv_w): begin, a value per filled
  // slot, end (before the fence), then each source reads back_value(i).
  // Shared world: stored straight into the source's back_w. Rma world:
  // gathered per source rank here, then one MPI_Put per source rank into
  // its in_w[me] (as dispatch's weights go), not one per slot.
  void begin_back() {
    if (!win->direct()) std::fill(sends_to.begin(), sends_to.end(), 0);
  }
  void send_back_w(std::int32_t src, W value) {
    const int r = static_cast<int>(src / nvs);
    const std::int64_t i = src % nvs;
    if (win->direct()) {
      reinterpret_cast<W*>(win->peer(r) + o_back_w)[i] = value;
      return;
    }
    scratch_back[static_cast<std::size_t>(r * c.entries() + i)] = value;
    sends_to[static_cast<std::size_t>(r)] = 1;
  }
  void end_back() {
    if (win->direct()) return;
    const std::int64_t n = c.entries(), bytes_w = sizeof(W);
    for (int r = 0; r < c.ranks; ++r)
      if (sends_to[static_cast<std::size_t>(r)])
        win->put(&scratch_back[static_cast<std::size_t>(r * n)], n * bytes_w, r, o_in_w + me * n * bytes_w);
  }
  // After the fence: the value entry i (destination code `code`) got back.
  W back_value(std::int64_t i, std::int32_t code) const {
    if (win->direct()) return back_w()[i];
    return local<W>(o_in_w)[std::int64_t{decode(code).rank} * c.entries() + i];
  }
  std::vector<W> scratch_back;  // [R][S*K] per-entry values before their MPI_Put (rma)
};

template <class T>
MpiLayer<T>::MpiLayer(MpiWorld& world, const Config& config, int hidden) : config_(config), hidden_(hidden) {
  std::string error;
  try {
    validate(config);
  } catch (const InputError& e) {
    error = e.what();
  }
  if (error.empty() && hidden < 1) error = "H must be at least 1, got " + std::to_string(hidden);
  if (error.empty() && config.ranks != world.size())
    error = "the configuration has ranks = " + std::to_string(config.ranks) + " but the world " +
            std::to_string(world.size());
  if (!world.all_ok(error.empty()))
    throw InputError("MpiLayer: " + (error.empty() ? std::string("refused on another rank (bad configuration or H)")
                                                   : error));
  impl_ = std::make_unique<Impl>(world, config, hidden);
  impl_->acc.resize(static_cast<std::size_t>(hidden));
}

template <class T>
MpiLayer<T>::~MpiLayer() = default;

template <class T>
bool MpiLayer<T>::broken() const {
  return impl_->win->broken();
}

template <class T>
typename MpiLayer<T>::rows_view MpiLayer<T>::recv() const {
  return rows_view(impl_->recv_row(0), impl_->nvs, impl_->H);
}
template <class T>
typename MpiLayer<T>::slot_weights_view MpiLayer<T>::recv_w() const {
  return slot_weights_view(impl_->recv_w(), impl_->nvs);
}

template <class T>
void MpiLayer<T>::dispatch(const MpiLayerPlan& plan, const const_rows_view& x, const weights_view& w) {
  Impl& m = *impl_;
  const char* op = "dispatch";
  const std::string error = layer::first_error({layer::extent_error("x", x, config_.tokens, m.H, "S", "H"),
                                                layer::extent_error("w", w, config_.tokens, m.K, "S", "K")});
  m.start(op, plan, error);
  const std::int64_t row_bytes = m.H * std::int64_t(sizeof(T)), w_bytes = sizeof(weight_type);
  // On the rma world the weights go as one block per destination rank
  // (every entry's, into in_w[me]; the destination picks its slots' after
  // the fence): an MPI_Put per entry cost more than the rows.
  const bool block_w = !m.win->direct();
  std::fill(m.sends_to.begin(), m.sends_to.end(), 0);
  for (std::int64_t i = 0; i < plan.entries; ++i) {
    const auto to = m.decode(plan.dst[i]);
    const std::int64_t t = i / m.K;
    if (block_w)
      m.sends_to[static_cast<std::size_t>(to.rank)] = 1;
    else
      m.win->put(&w(t, i % m.K), w_bytes, to.rank, m.o_recv_w + to.loff * w_bytes);
    if (to.primary) m.win->put(&x(t, 0), row_bytes, to.rank, m.o_recv + to.loff * row_bytes);
  }
  if (block_w) {
    const weight_type* all_w = w.data();
    if (!w.span_is_contiguous()) {  // a padded view: its entries packed once more
      for (std::int64_t i = 0; i < plan.entries; ++i) m.w_stage[static_cast<std::size_t>(i)] = w(i / m.K, i % m.K);
      all_w = m.w_stage.data();
    }
    for (int r = 0; r < config_.ranks; ++r)
      if (m.sends_to[static_cast<std::size_t>(r)])
        m.win->put(all_w, plan.entries * w_bytes, r, m.o_in_w + m.me * config_.entries() * w_bytes);
  }
  m.win->fence(op);
  if (block_w) {
    const weight_type* in_w = m.template local<weight_type>(m.o_in_w);
    weight_type* rw = m.recv_w();
    for (std::int64_t s = 0; s < m.nvs; ++s) {
      const std::int32_t src = plan.src_info[s];
      if (src >= 0) rw[s] = in_w[(src / m.nvs) * config_.entries() + src % m.nvs];
    }
  }
  m.zero_padding(plan, [&](std::int64_t s) { return m.recv_row(s); }, m.recv_w());
  m.each_duplicate(plan, [&](std::int64_t p, std::int64_t q) {
    std::copy(m.recv_row(p), m.recv_row(p) + m.H, m.recv_row(q));
  });
}

template <class T>
void MpiLayer<T>::combine(const MpiLayerPlan& plan, const const_rows_view& y, const rows_view& out) {
  impl_->combine(plan, y, true, out);
}

template <class T>
void MpiLayer<T>::combine_unweighted(const MpiLayerPlan& plan, const const_rows_view& y, const rows_view& out) {
  impl_->combine(plan, y, false, out);
}

namespace {
// Combine's backward, both forms: the gradient rows travel like a dispatch
// into grad_in; at the destination duplicates take their primary's row,
// grad_w's dot products go back per entry (weighted), and grad_y is made.
template <class T, class Impl, class Rows, class ConstRows, class GradW>
void combine_backward_impl(Impl& m, const MpiLayerPlan& plan, const ConstRows& grad_out, const ConstRows* y,
                           const Rows& grad_y, const GradW* grad_w) {
  using A = accum_t<T>;
  const char* op = "combine backward";
  const bool weighted = grad_w != nullptr;
  const std::int64_t row_bytes = m.H * std::int64_t(sizeof(T));
  for (std::int64_t i = 0; i < plan.entries; ++i) {
    const auto to = m.decode(plan.dst[i]);
    if (to.primary) m.win->put(&grad_out(i / m.K, 0), row_bytes, to.rank, m.o_grad_in + to.loff * row_bytes);
  }
  m.win->fence(op);
  m.each_duplicate(plan, [&](std::int64_t p, std::int64_t q) {
    std::copy(m.grad_in_row(p), m.grad_in_row(p) + m.H, m.grad_in_row(q));
  });
  const auto* rw = m.recv_w();
  m.begin_back();
  for (std::int64_t s = 0; s < m.nvs; ++s) {
    if (plan.src_info[s] < 0) continue;
    const T* g = m.grad_in_row(s);
    if (weighted) {
      A dot = 0;
      for (std::int64_t h = 0; h < m.H; ++h) dot += m.widen(g[h]) * m.widen((*y)(s, h));
      m.send_back_w(plan.src_info[s], dot);
      const A f = rw[s];
      for (std::int64_t h = 0; h < m.H; ++h) grad_y(s, h) = m.round(f * m.widen(g[h]));
    } else {
      for (std::int64_t h = 0; h < m.H; ++h) grad_y(s, h) = g[h];
    }
  }
  m.zero_padding(plan, [&](std::int64_t s) { return &grad_y(s, 0); }, nullptr);
  if (!weighted) return;
  m.end_back();
  m.win->fence(op);
  for (std::int64_t i = 0; i < plan.entries; ++i) (*grad_w)(i / m.K, i % m.K) = m.back_value(i, plan.dst[i]);
}
}  // namespace

template <class T>
void MpiLayer<T>::combine_backward(const MpiLayerPlan& plan, const const_rows_view& grad_out, const const_rows_view& y,
                                   const rows_view& grad_y, const grad_weights_view& grad_w) {
  Impl& m = *impl_;
  const std::string error = layer::first_error(
      {layer::extent_error("grad_out", grad_out, config_.tokens, m.H, "S", "H"),
       layer::extent_error("y", y, m.nvs, m.H, "NvS", "H"),
       layer::extent_error("grad_y", grad_y, m.nvs, m.H, "NvS", "H"),
       layer::extent_error("grad_w", grad_w, config_.tokens, m.K, "S", "K")});
  m.start("combine backward", plan, error);
  combine_backward_impl<T>(m, plan, grad_out, &y, grad_y, &grad_w);
}

template <class T>
void MpiLayer<T>::combine_backward_unweighted(const MpiLayerPlan& plan, const const_rows_view& grad_out,
                                              const rows_view& grad_y) {
  Impl& m = *impl_;
  const std::string error = layer::first_error(
      {layer::extent_error("grad_out", grad_out, config_.tokens, m.H, "S", "H"),
       layer::extent_error("grad_y", grad_y, m.nvs, m.H, "NvS", "H")});
  m.start("combine backward", plan, error);
  combine_backward_impl<T>(m, plan, grad_out, static_cast<const const_rows_view*>(nullptr), grad_y,
                           static_cast<const grad_weights_view*>(nullptr));
}

template <class T>
void MpiLayer<T>::dispatch_backward(const MpiLayerPlan& plan, const const_rows_view& grad_recv,
                                    const rows_view& grad_x) {
  Impl& m = *impl_;
  const std::string error = layer::first_error({layer::extent_error("grad_recv", grad_recv, m.nvs, m.H, "NvS", "H"),
                                                layer::extent_error("grad_x", grad_x, config_.tokens, m.H, "S", "H")});
  m.start("dispatch backward", plan, error, true);
  m.reduce_to_sources("dispatch backward", plan, grad_recv, false, grad_x);
}

template <class T>
void MpiLayer<T>::dispatch_backward(const MpiLayerPlan& plan, const const_rows_view& grad_recv,
                                    const const_slot_weights_view& grad_recv_w, const rows_view& grad_x,
                                    const grad_weights_view& grad_w) {
  Impl& m = *impl_;
  const char* op = "dispatch backward";
  const std::string error = layer::first_error({layer::extent_error("grad_recv", grad_recv, m.nvs, m.H, "NvS", "H"),
                                                layer::extent_error("grad_recv_w", grad_recv_w, m.nvs, "NvS"),
                                                layer::extent_error("grad_x", grad_x, config_.tokens, m.H, "S", "H"),
                                                layer::extent_error("grad_w", grad_w, config_.tokens, m.K, "S", "K")});
  m.start(op, plan, error, true);
  // The per-entry weight gradients go back before the rows' fence.
  m.begin_back();
  for (std::int64_t s = 0; s < m.nvs; ++s)
    if (plan.src_info[s] >= 0) m.send_back_w(plan.src_info[s], grad_recv_w(s));
  m.end_back();
  m.reduce_to_sources(op, plan, grad_recv, false, grad_x);
  for (std::int64_t i = 0; i < plan.entries; ++i) grad_w(i / m.K, i % m.K) += m.back_value(i, plan.dst[i]);
}

template class MpiLayer<float>;
template class MpiLayer<double>;
template class MpiLayer<bf16>;

}  // namespace moonep
