// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/moe_layer.hpp — the linear MoE layer (docs/spec/layer.md "The
// linear layer") through the library's operations, for the plan of an
// in-process world: fetch (InProcessExpertCopies), dispatch
// (InProcessLayer), one GEMM per non-empty group, combine; and the
// backward: combine's backward, the groups' GEMMs' backward (input and
// weight gradients), dispatch's backward, reduce.
//
// Group g of destination rank d (slots cu_seqlens[g-1] .. cu_seqlens[g])
// runs y = recv @ M: for g < E with the rank's own expert P_d[g mod epn],
// for g = E + b with its copy slot b (experts_to_copy[d][b]). Experts are
// M_e [H][H'] row-major, given as P [R][epn][Q] with Q = H*H'.
//
// GEMMs: KokkosBlas::gemm when the includer defines
// MOONEP_GEMM_WITH_KOKKOSKERNELS=1 and links Kokkos::kokkoskernels (host
// memory spaces only: Kokkos Kernels 3.x takes no execution space instance,
// so the layer fences its instance around them); otherwise, or with
// GemmKind::portable, a simple Kokkos kernel per group on the instance,
// accumulating in accum_t<T> (bfloat16, moonep::bf16, always takes this
// kernel: float sums, one rounding to bf16). Either way every GEMM value is
// one rounding of a sum in T's accumulation type; only the summation order
// may differ.
//
// What must stay true: the GEMMs are launched from the host, so each step
// reads the plan's group sizes (cu_seqlens, R*(E+B) values) on the host into
// a buffer made once (one small copy that waits for the plan); every other
// buffer (recv, y, copies, their gradients) is made once in the
// constructor, nothing per step. Bad input is refused before anything is
// written to the caller's views (the plan with a remote expert that is not
// copied included, in check_experts_runnable's words).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#if MOONEP_GEMM_WITH_KOKKOSKERNELS
#include <KokkosBlas3_gemm.hpp>
#endif

#include "moonep/expert_copies.hpp"
#include "moonep/layer.hpp"

namespace moonep {

enum class GemmKind {
  automatic,  // Kokkos Kernels where the build has it (host), else portable
  portable,   // always the layer's own Kokkos kernel
};

template <class T, class ExecutionSpace = Kokkos::DefaultExecutionSpace>
class InProcessMoeLayer {
 public:
  using execution_space = ExecutionSpace;
  using memory_space = typename ExecutionSpace::memory_space;
  using rows = InProcessLayer<T, ExecutionSpace>;
  using copies_type = InProcessExpertCopies<T, ExecutionSpace>;
  using rows_view = typename rows::rows_view;              // [R][rows][width]
  using const_rows_view = typename rows::const_rows_view;
  using weights_view = typename rows::weights_view;        // w [R][S][K]
  using grad_weights_view = typename rows::grad_weights_view;
  using params_view = typename copies_type::params_view;   // [R][epn or B][Q]
  using const_params_view = typename copies_type::const_params_view;
  using plan_type = Plan<memory_space>;

  // Kokkos Kernels for float and double on host memory; bfloat16 always
  // takes the portable kernel (moonep::bf16 is not a Kokkos Kernels scalar).
  static constexpr bool kokkos_kernels_gemm =
#if MOONEP_GEMM_WITH_KOKKOSKERNELS
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, memory_space>::accessible && !std::is_same_v<T, bf16>;
#else
      false;
#endif

  // Buffers for tokens of H values and experts H -> H'. InputError for a
  // bad config, H or H' below 1.
  InProcessMoeLayer(const Config& config, int hidden, int hidden_out, GemmKind gemm = GemmKind::automatic,
                    ExecutionSpace exec = ExecutionSpace())
      : config_(config),
        hidden_(hidden),
        hidden_out_(hidden_out),
        use_kokkos_kernels_(kokkos_kernels_gemm && gemm == GemmKind::automatic),
        exec_(exec),
        in_(config, hidden, exec),
        out_(config, hidden_out < 1 ? 1 : hidden_out, exec),
        copies_(config, std::int64_t{hidden < 1 ? 1 : hidden} * (hidden_out < 1 ? 1 : hidden_out), exec) {
    if (hidden_out < 1)
      throw InputError("InProcessMoeLayer: H' must be at least 1, got " + std::to_string(hidden_out));
    const std::int64_t R = config.ranks, nvs = config.slots(), B = config.copy_slots, Q = params();
    // Zeroed once: slots no step writes (undefined) read as 0 in recv().
    recv_ = rows_view("moonep::moe::recv", R, nvs, hidden);
    recv_w_ = typename rows::slot_weights_view("moonep::moe::recv_w", R, nvs);
    y_ = rows_view("moonep::moe::y", R, nvs, hidden_out);
    grad_y_ = rows_view("moonep::moe::grad_y", R, nvs, hidden_out);
    grad_recv_ = rows_view("moonep::moe::grad_recv", R, nvs, hidden);
    copies_buf_ = params_view("moonep::moe::copies", R, B, Q);
    grad_copies_ = params_view("moonep::moe::grad_copies", R, B, Q);
    cu_host_.resize(static_cast<std::size_t>(R * config.groups()));
  }

  const Config& config() const { return config_; }
  int hidden() const { return hidden_; }
  int hidden_out() const { return hidden_out_; }
  std::int64_t params() const { return std::int64_t{hidden_} * hidden_out_; }
  // "kokkos-kernels" or "portable": which GEMM this layer runs.
  const char* gemm_name() const { return use_kokkos_kernels_ ? "kokkos-kernels" : "portable"; }

  // out [R][S][H'] = sum_k w * (x @ M_e) for t < s_r (rows past s_r
  // untouched), from x [R][S][H], w [R][S][K], experts P [R][epn][Q].
  // Keeps recv, recv_w, y and the copies for backward.
  void forward(const plan_type& plan, const const_rows_view& x, const weights_view& w,
               const const_params_view& experts, const rows_view& out) {
    check_rows("forward", "out", out, config_.tokens, hidden_out_);
    read_groups(plan, "forward");
    copies_.fetch(plan, experts, copies_buf_);  // checks the plan (runnable) and P first
    in_.dispatch(plan, x, w, recv_, recv_w_);   // checks x, w
    run_gemms(experts, Pass::forward);
    out_.combine(plan, y_, recv_w_, out);
  }

  // After forward with the same plan, x, w and experts: from grad_out
  // [R][S][H'], grad_x [R][S][H] (rows past s_r untouched), grad_w
  // [R][S][K] (entries past s_r*K untouched) and grad_experts [R][epn][Q]
  // (every expert's, its own groups' plus its copies' reduced; written, not
  // added to).
  void backward(const plan_type& plan, const const_rows_view& grad_out, const const_params_view& experts,
                const rows_view& grad_x, const grad_weights_view& grad_w, const params_view& grad_experts) {
    check_rows("backward", "grad_out", grad_out, config_.tokens, hidden_out_);
    check_rows("backward", "grad_x", grad_x, config_.tokens, hidden_);
    check_params("backward", "P", experts, config_.experts_per_rank());
    check_params("backward", "grad_P", grad_experts, config_.experts_per_rank());
    if (grad_w.extent(0) != std::size_t(config_.ranks) || grad_w.extent(1) != std::size_t(config_.tokens) ||
        grad_w.extent(2) != std::size_t(config_.topk))
      throw InputError("backward: grad_w is not [R][S][K]");
    read_groups(plan, "backward");
    copies_.check_runnable(plan);
    out_.combine_backward(plan, grad_out, y_, recv_w_, grad_y_, grad_w);
    Kokkos::deep_copy(exec_, grad_experts, static_cast<T>(0.0f));
    Kokkos::deep_copy(exec_, grad_copies_, static_cast<T>(0.0f));
    run_gemms(experts, Pass::backward, grad_experts);
    in_.dispatch_backward(plan, grad_recv_, grad_x);
    copies_.reduce(plan, grad_copies_, grad_experts);
  }

  // The step's buffers (valid after forward; undefined slots 0).
  const rows_view& recv() const { return recv_; }
  const rows_view& y() const { return y_; }
  const params_view& copies() const { return copies_buf_; }

  enum class Pass { forward, backward };

  // Every non-empty group of every rank: forward y = recv @ M; backward
  // grad_recv = grad_y @ M^T and grad_M += recv^T @ grad_y (grad_M the
  // own expert's gradient or the copy slot's, zeroed before).
  void run_gemms(const const_params_view& experts, Pass pass, const params_view& grad_experts = params_view()) {
    const std::int64_t E = config_.experts, epn = config_.experts_per_rank(), nvs = config_.slots(),
                       G = config_.groups(), Q = params();
    if (use_kokkos_kernels_) exec_.fence();  // Kokkos Kernels runs on the default instance
    for (int d = 0; d < config_.ranks; ++d)
      for (std::int64_t g = 0; g < G; ++g) {
        const std::int32_t* cu = &cu_host_[static_cast<std::size_t>(d * G)];
        const std::int64_t from = clip(g == 0 ? 0 : cu[g - 1], nvs), to = clip(cu[g], nvs);
        if (to <= from) continue;
        const std::int64_t n = to - from;
        const std::int64_t slot = g < E ? g % epn : g - E;
        // Pointers into the views (taking them reads no element, so this
        // holds for device memory too): rows from..to of rank d, and the
        // group's parameters, P_d[slot] or copy slot `slot`.
        const std::int64_t own = (d * epn + slot) * Q, copy = (d * config_.copy_slots + slot) * Q;
        const std::int64_t in_rows = (d * nvs + from) * hidden_, out_rows = (d * nvs + from) * hidden_out_;
        const const_matrix M(g < E ? experts.data() + own : copies_buf_.data() + copy, hidden_, hidden_out_);
        if (pass == Pass::forward) {
          gemm(false, false, const_matrix(recv_.data() + in_rows, n, hidden_), M,
               matrix(y_.data() + out_rows, n, hidden_out_), 0);
        } else {
          T* gm = g < E ? grad_experts.data() + own : grad_copies_.data() + copy;
          gemm(false, true, const_matrix(grad_y_.data() + out_rows, n, hidden_out_), M,
               matrix(grad_recv_.data() + in_rows, n, hidden_), 0);
          gemm(true, false, const_matrix(recv_.data() + in_rows, n, hidden_),
               const_matrix(grad_y_.data() + out_rows, n, hidden_out_), matrix(gm, hidden_, hidden_out_), 1);
        }
      }
    if (use_kokkos_kernels_) Kokkos::fence();
  }

  using matrix = Kokkos::View<T**, Kokkos::LayoutRight, memory_space, Kokkos::MemoryUnmanaged>;
  using const_matrix = Kokkos::View<const T**, Kokkos::LayoutRight, memory_space, Kokkos::MemoryUnmanaged>;

  // C = op(A) @ op(B) + beta * C (beta 0 or 1), op a transpose when asked.
  void gemm(bool trans_a, bool trans_b, const const_matrix& a, const const_matrix& b, const matrix& c, int beta) {
#if MOONEP_GEMM_WITH_KOKKOSKERNELS
    if constexpr (kokkos_kernels_gemm) {
      if (use_kokkos_kernels_) {
        KokkosBlas::gemm(trans_a ? "T" : "N", trans_b ? "T" : "N", T(1), a, b, T(beta), c);
        return;
      }
    }
#endif
    portable_gemm(trans_a, trans_b, a, b, c, beta);
  }

  // One kernel: every C(i, j) summed over the inner index in accum_t<T>.
  void portable_gemm(bool trans_a, bool trans_b, const const_matrix& a, const const_matrix& b, const matrix& c,
                     int beta) const {
    using A = accum_t<T>;
    using policy = impl::layer_policy<ExecutionSpace>;
    const std::int64_t cols = c.extent(1), inner = trans_a ? a.extent(0) : a.extent(1);
    Kokkos::parallel_for(
        "moonep::moe::gemm", policy(exec_, 0, std::int64_t(c.extent(0)) * cols), KOKKOS_LAMBDA(const std::int64_t n) {
          const std::int64_t i = n / cols, j = n % cols;
          A acc = 0;
          for (std::int64_t l = 0; l < inner; ++l)
            acc += A(trans_a ? a(l, i) : a(i, l)) * A(trans_b ? b(j, l) : b(l, j));
          c(i, j) = beta ? static_cast<T>(A(c(i, j)) + acc) : static_cast<T>(acc);
        });
  }

 private:
  static std::int64_t clip(std::int64_t v, std::int64_t nvs) { return v < 0 ? 0 : v > nvs ? nvs : v; }

  // Every rank's cu_seqlens into cu_host_ (waits for the plan; one copy for
  // a portable Planner's plan), after checking that the plan is of this
  // configuration and world.
  void read_groups(const plan_type& plan, const char* op) {
    impl::check_in_process_plan(plan, config_, op);
    impl::read_group_sizes(plan, config_, cu_host_.data());
  }

  template <class V>
  void check_rows(const char* op, const char* name, const V& v, std::int64_t rows, std::int64_t width) const {
    if (v.extent(0) != std::size_t(config_.ranks) || v.extent(1) != std::size_t(rows) ||
        v.extent(2) != std::size_t(width))
      throw InputError(std::string(op) + ": " + name + " is [" + std::to_string(v.extent(0)) + "][" +
                       std::to_string(v.extent(1)) + "][" + std::to_string(v.extent(2)) + "], expected [" +
                       std::to_string(config_.ranks) + "][" + std::to_string(rows) + "][" + std::to_string(width) +
                       "]");
  }
  template <class V>
  void check_params(const char* op, const char* name, const V& v, std::int64_t experts) const {
    check_rows(op, name, v, experts, params());
  }

  Config config_;
  int hidden_, hidden_out_;
  bool use_kokkos_kernels_;
  ExecutionSpace exec_;
  rows in_, out_;  // dispatch and its backward over H; combine and its backward over H'
  copies_type copies_;
  rows_view recv_, y_, grad_y_, grad_recv_;
  typename rows::slot_weights_view recv_w_;
  params_view copies_buf_, grad_copies_;
  std::vector<std::int32_t> cu_host_;  // [R][E+B]
};

}  // namespace moonep
