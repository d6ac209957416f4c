// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::MpiExpertCopies (moonep/mpi_expert_copies.hpp): fetch and reduce
// of docs/spec/layer.md for this process's rank. Each one: check (every
// process agrees), put this rank's side into its window buffer, fence,
// read the peers' one-sidedly, fence (nobody overwrites a buffer another
// still reads). Reduce sums as reduce_reference does: grad_P first, then
// the copies in increasing d, then b, in accum_t<T>, rounded once.
#include "moonep/mpi_expert_copies.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "core/layer_checks.hpp"
#include "mpi/mpi_layer_checks.hpp"
#include "mpi/mpi_layer_window.hpp"

namespace moonep {

namespace {
constexpr std::int64_t kAlign = 64;
std::int64_t aligned(std::int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// The copies' own plan errors for rank `me`: field lengths, copied experts
// out of range, group ends out of order, then a remote expert not copied.
std::string copies_plan_error(const MpiLayerPlan& p, const Config& c, int me) {
  const std::int64_t G = c.groups(), RB = std::int64_t{c.ranks} * c.copy_slots, nvs = c.slots();
  if (p.cu_seqlens == nullptr || p.cu_seqlens_len != G)
    return "the plan's cu_seqlens holds " + std::to_string(p.cu_seqlens_len) + " values, expected E+B = " +
           std::to_string(G);
  if ((p.experts_to_copy == nullptr && RB > 0) || p.experts_to_copy_len != RB)
    return "the plan's experts_to_copy holds " + std::to_string(p.experts_to_copy_len) + " values, expected R*B = " +
           std::to_string(RB);
  for (std::int64_t g = 0; g < G; ++g) {
    const std::int64_t from = g == 0 ? 0 : p.cu_seqlens[g - 1], to = p.cu_seqlens[g];
    if (to < from || to > nvs)
      return "cu_seqlens[" + std::to_string(g) + "] = " + std::to_string(to) + " is outside " + std::to_string(from) +
             "..NvS = " + std::to_string(from) + ".." + std::to_string(nvs);
  }
  for (std::int64_t b = 0; b < RB; ++b)
    if (p.experts_to_copy[b] < -1 || p.experts_to_copy[b] >= c.experts)
      return "experts_to_copy[" + std::to_string(b) + "] = " + std::to_string(p.experts_to_copy[b]) +
             " is outside -1..E-1 = -1.." + std::to_string(c.experts - 1);
  return layer::uncopied_expert_error(c, me, p.cu_seqlens);
}
}  // namespace

template <class T>
struct MpiExpertCopies<T>::Impl {
  using A = accum_type;
  Config c;
  std::int64_t Q, epn, B;
  int me;
  std::int64_t o_experts, o_grad_copies, bytes;
  std::unique_ptr<impl::MpiLayerWindow> win;
  std::vector<A> acc;   // [Q] an expert's gradient sum
  std::vector<T> stage; // [Q] a copy's gradient fetched by MPI_Get (rma)

  Impl(MpiWorld& w, const Config& config, std::int64_t params)
      : c(config), Q(params), epn(config.experts_per_rank()), B(config.copy_slots), me(w.rank()) {
    o_experts = 0;
    o_grad_copies = aligned(epn * Q * std::int64_t(sizeof(T)));
    bytes = o_grad_copies + aligned(B * Q * std::int64_t(sizeof(T)));
    const long long fingerprint[] = {c.ranks, c.experts, c.topk, c.tokens, c.copy_slots, c.token_padding, params,
                                     static_cast<long long>(sizeof(T)), std::is_same_v<T, bf16> ? 1 : 0};
    win = std::make_unique<impl::MpiLayerWindow>(w, bytes, fingerprint, 9, "MpiExpertCopies");
    acc.resize(static_cast<std::size_t>(Q));
    if (!win->direct()) stage.resize(static_cast<std::size_t>(Q));
  }
  T* local(std::int64_t offset) const { return reinterpret_cast<T*>(win->local() + offset); }
  std::int64_t row_bytes() const { return Q * std::int64_t(sizeof(T)); }
};

template <class T>
MpiExpertCopies<T>::MpiExpertCopies(MpiWorld& world, const Config& config, std::int64_t params)
    : config_(config), params_(params) {
  std::string error;
  try {
    validate(config);
  } catch (const InputError& e) {
    error = e.what();
  }
  if (error.empty() && params < 1) error = "Q must be at least 1, got " + std::to_string(params);
  if (error.empty() && config.ranks != world.size())
    error = "the configuration has ranks = " + std::to_string(config.ranks) + " but the world " +
            std::to_string(world.size());
  if (!world.all_ok(error.empty()))
    throw InputError("MpiExpertCopies: " +
                     (error.empty() ? std::string("refused on another rank (bad configuration or Q)") : error));
  impl_ = std::make_unique<Impl>(world, config, params);
}

template <class T>
MpiExpertCopies<T>::~MpiExpertCopies() = default;

template <class T>
bool MpiExpertCopies<T>::broken() const {
  return impl_->win->broken();
}

template <class T>
typename MpiExpertCopies<T>::params_view MpiExpertCopies<T>::experts() const {
  return params_view(impl_->local(impl_->o_experts), impl_->epn, params_);
}
template <class T>
typename MpiExpertCopies<T>::params_view MpiExpertCopies<T>::grad_copies() const {
  return params_view(impl_->local(impl_->o_grad_copies), impl_->B, params_);
}

template <class T>
void MpiExpertCopies<T>::start(const char* op, const MpiLayerPlan& plan, const std::string& error) {
  std::string plan_error = layer::mpi_plan_error(plan, config_, impl_->me);
  if (plan_error.empty()) plan_error = copies_plan_error(plan, config_, impl_->me);
  impl_->win->start(op, plan_error.empty() ? error : plan_error);
}

template <class T>
void MpiExpertCopies<T>::check_runnable(const MpiLayerPlan& plan, const char* op) {
  start(op, plan, "");
}

template <class T>
void MpiExpertCopies<T>::fetch(const MpiLayerPlan& plan, const const_params_view& experts, const params_view& copies) {
  const Impl& m = *impl_;
  start("fetch", plan,
        layer::first_error({layer::extent_error("P", experts, m.epn, m.Q, "epn", "Q"),
                            layer::extent_error("copies", copies, m.B, m.Q, "B", "Q")}));
  fetch_checked("fetch", plan, experts.data(), copies);
}

template <class T>
void MpiExpertCopies<T>::fetch_checked(const char* op, const MpiLayerPlan& plan, const T* experts,
                                       const params_view& copies) {
  Impl& m = *impl_;
  T* mine = m.local(m.o_experts);
  if (experts != mine && m.epn * m.Q > 0) std::memcpy(mine, experts, static_cast<std::size_t>(m.epn * m.row_bytes()));
  m.win->fence(op);  // every owner's experts are in place
  const std::int32_t* table = plan.experts_to_copy + std::int64_t{m.me} * m.B;
  for (std::int64_t b = 0; b < m.B; ++b) {
    const std::int32_t e = table[b];
    if (e < 0) continue;
    m.win->get(&copies(b, 0), m.row_bytes(), static_cast<int>(e / m.epn),
               m.o_experts + (e % m.epn) * m.row_bytes());
  }
  m.win->fence(op);  // nobody changes its experts while another still reads them
}

template <class T>
void MpiExpertCopies<T>::reduce(const MpiLayerPlan& plan, const const_params_view& grad_copies,
                                const params_view& grad_experts) {
  const Impl& m = *impl_;
  start("reduce", plan,
        layer::first_error({layer::extent_error("grad_copies", grad_copies, m.B, m.Q, "B", "Q"),
                            layer::extent_error("grad_P", grad_experts, m.epn, m.Q, "epn", "Q")}));
  reduce_checked("reduce", plan, grad_copies.data(), grad_experts);
}

template <class T>
void MpiExpertCopies<T>::reduce_checked(const char* op, const MpiLayerPlan& plan, const T* grad_copies,
                                        const params_view& grad_experts) {
  using A = accum_type;
  Impl& m = *impl_;
  T* mine = m.local(m.o_grad_copies);
  if (grad_copies != mine && m.B * m.Q > 0) std::memcpy(mine, grad_copies, static_cast<std::size_t>(m.B * m.row_bytes()));
  m.win->fence(op);  // every copier's gradients are in place
  const int R = config_.ranks;
  for (std::int64_t j = 0; j < m.epn; ++j) {
    const std::int32_t e = static_cast<std::int32_t>(m.me * m.epn + j);
    T* g = &grad_experts(j, 0);
    bool copied = false;
    for (int d = 0; d < R; ++d)
      for (std::int64_t b = 0; b < m.B; ++b) {
        if (plan.experts_to_copy[std::int64_t{d} * m.B + b] != e) continue;
        if (!copied)
          for (std::int64_t q = 0; q < m.Q; ++q) m.acc[q] = static_cast<A>(g[q]);
        copied = true;
        const std::int64_t offset = m.o_grad_copies + b * m.row_bytes();
        const T* row;
        if (m.win->direct() || d == m.me) {
          row = reinterpret_cast<const T*>(m.win->peer(d) + offset);
        } else {
          m.win->get(m.stage.data(), m.row_bytes(), d, offset);
          row = m.stage.data();
        }
        for (std::int64_t q = 0; q < m.Q; ++q) m.acc[q] += static_cast<A>(row[q]);
      }
    if (copied)
      for (std::int64_t q = 0; q < m.Q; ++q) g[q] = static_cast<T>(m.acc[q]);
  }
  m.win->fence(op);  // nobody changes its gradients while another still reads them
}

template class MpiExpertCopies<float>;
template class MpiExpertCopies<double>;
template class MpiExpertCopies<bf16>;

}  // namespace moonep
