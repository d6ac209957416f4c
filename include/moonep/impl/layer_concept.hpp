// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/layer_concept.hpp — the one interface every view-based layer
// (dispatch, combine and their backward, docs/spec/layer.md) offers,
// checked at compile time (C++17 detection, the checks a C++20 concept
// would make), as moonep/impl/planner_concept.hpp does for the planners:
// a layer that drifts from the others does not compile. Each layer's
// header asserts it of itself (MOONEP_ASSERT_LAYER): moonep::InProcessLayer
// (moonep/layer.hpp) and moonep::MpiLayer (moonep/mpi_layer.hpp).
//
// The interface (L a layer):
//   L::element_type      T: float, double or moonep::bf16 (is_layer_element_v)
//   L::weight_type       weight_t<T>          L::accum_type   accum_t<T>
//   L::memory_space      where its views live
//   L::plan_type         what every operation takes as the plan
//   L::rows_view         View<T[R]**, LayoutRight, memory_space>: rows of H
//                        (out, grad_y, grad_x; recv where the caller owns it)
//   L::const_rows_view   the same of const T (x, y, grad_out, grad_recv)
//   L::weights_view      View<const weight_type[R]**>: w [S][K]
//   L::grad_weights_view View<weight_type[R]**>: grad_w [S][K]
//   L::slot_weights_view, L::const_slot_weights_view
//                        View<(const) weight_type[R]*>: recv_w [NvS]
//   ([R] is a leading rank extent where one object holds every rank's
//   buffers, InProcessLayer's; none where it holds one rank's, MpiLayer's:
//   every view of a layer has it or none do.)
//   l.config() -> const Config&     l.hidden() -> int
//   l.combine_unweighted(plan, y, out)
//   l.combine_backward_unweighted(plan, grad_out, grad_y)
//   l.dispatch_backward(plan, grad_recv, grad_x)
//   l.dispatch_backward(plan, grad_recv, grad_recv_w, grad_x, grad_w)
// and the receive buffers, in one of two forms:
//   the caller's (InProcessLayer):
//     l.dispatch(plan, x, w, recv, recv_w)
//     l.combine(plan, y, recv_w, out)
//     l.combine_backward(plan, grad_out, y, recv_w, grad_y, grad_w)
//   or the layer's own symmetric memory (MpiLayer), where dispatch
//   delivers and the weighted operations read the delivered weights:
//     l.recv() -> rows_view           l.recv_w() -> slot_weights_view
//     l.dispatch(plan, x, w)
//     l.combine(plan, y, out)
//     l.combine_backward(plan, grad_out, y, grad_y, grad_w)
// Every operation returns void and is called on a const or non-const
// layer as the layer declares (the detection uses a non-const one). The
// errors are the contract's: InputError, before anything is written, for
// a plan of another configuration or views of other extents.
#pragma once

#include <type_traits>
#include <utility>

#include "moonep/config.hpp"
#include "moonep/impl/kokkos_compat.hpp"
#include "moonep/layer_reference.hpp"

namespace moonep::impl::layer_concept {

template <class...>
using void_t = void;

// The view V has value type Value, layout LayoutRight, memory space Mem
// and rank `rank`.
template <class V, class Value, class Mem, unsigned rank>
inline constexpr bool view_of =
    std::is_same<typename V::value_type, Value>::value &&
    std::is_same<typename V::array_layout, Kokkos::LayoutRight>::value &&
    std::is_same<typename V::memory_space, Mem>::value && static_cast<unsigned>(V::rank) == rank;

template <class L, class = void>
struct has_types : std::false_type {};
template <class L>
struct has_types<L, void_t<typename L::element_type, typename L::weight_type, typename L::accum_type,
                           typename L::memory_space, typename L::plan_type, typename L::rows_view,
                           typename L::const_rows_view, typename L::weights_view, typename L::grad_weights_view,
                           typename L::slot_weights_view, typename L::const_slot_weights_view>> {
  using T = typename L::element_type;
  using W = typename L::weight_type;
  using M = typename L::memory_space;
  static constexpr unsigned rows_rank = static_cast<unsigned>(L::rows_view::rank);
  static constexpr bool value =
      is_layer_element_v<T> && std::is_same<W, weight_t<T>>::value &&
      std::is_same<typename L::accum_type, accum_t<T>>::value && (rows_rank == 2 || rows_rank == 3) &&
      view_of<typename L::rows_view, T, M, rows_rank> &&
      view_of<typename L::const_rows_view, const T, M, rows_rank> &&
      view_of<typename L::weights_view, const W, M, rows_rank> &&
      view_of<typename L::grad_weights_view, W, M, rows_rank> &&
      view_of<typename L::slot_weights_view, W, M, rows_rank - 1> &&
      view_of<typename L::const_slot_weights_view, const W, M, rows_rank - 1>;
};

template <class L, class = void>
struct has_accessors : std::false_type {};
template <class L>
struct has_accessors<L, void_t<decltype(std::declval<const L&>().config()), decltype(std::declval<const L&>().hidden())>>
    : std::integral_constant<bool, std::is_same<decltype(std::declval<const L&>().config()), const Config&>::value &&
                                       std::is_same<decltype(std::declval<const L&>().hidden()), int>::value> {};

// Shorthands for the detection expressions below.
template <class L>
using plan_arg = const typename L::plan_type&;
template <class L>
using rows_arg = const typename L::rows_view&;
template <class L>
using const_rows_arg = const typename L::const_rows_view&;

// The operations every layer has with the same arguments.
template <class L, class = void>
struct has_common_operations : std::false_type {};
template <class L>
struct has_common_operations<
    L, void_t<decltype(std::declval<L&>().combine_unweighted(std::declval<plan_arg<L>>(),
                                                              std::declval<const_rows_arg<L>>(),
                                                              std::declval<rows_arg<L>>())),
              decltype(std::declval<L&>().combine_backward_unweighted(
                  std::declval<plan_arg<L>>(), std::declval<const_rows_arg<L>>(), std::declval<rows_arg<L>>())),
              decltype(std::declval<L&>().dispatch_backward(std::declval<plan_arg<L>>(),
                                                             std::declval<const_rows_arg<L>>(),
                                                             std::declval<rows_arg<L>>())),
              decltype(std::declval<L&>().dispatch_backward(
                  std::declval<plan_arg<L>>(), std::declval<const_rows_arg<L>>(),
                  std::declval<const typename L::const_slot_weights_view&>(), std::declval<rows_arg<L>>(),
                  std::declval<const typename L::grad_weights_view&>()))>>
    : std::integral_constant<
          bool,
          std::is_void<decltype(std::declval<L&>().combine_unweighted(
              std::declval<plan_arg<L>>(), std::declval<const_rows_arg<L>>(), std::declval<rows_arg<L>>()))>::value &&
              std::is_void<decltype(std::declval<L&>().dispatch_backward(
                  std::declval<plan_arg<L>>(), std::declval<const_rows_arg<L>>(),
                  std::declval<rows_arg<L>>()))>::value> {};

// Receive buffers the caller owns (InProcessLayer).
template <class L, class = void>
struct has_caller_buffers : std::false_type {};
template <class L>
struct has_caller_buffers<
    L, void_t<decltype(std::declval<L&>().dispatch(
                  std::declval<plan_arg<L>>(), std::declval<const_rows_arg<L>>(),
                  std::declval<const typename L::weights_view&>(), std::declval<rows_arg<L>>(),
                  std::declval<const typename L::slot_weights_view&>())),
              decltype(std::declval<L&>().combine(std::declval<plan_arg<L>>(), std::declval<const_rows_arg<L>>(),
                                                   std::declval<const typename L::const_slot_weights_view&>(),
                                                   std::declval<rows_arg<L>>())),
              decltype(std::declval<L&>().combine_backward(
                  std::declval<plan_arg<L>>(), std::declval<const_rows_arg<L>>(), std::declval<const_rows_arg<L>>(),
                  std::declval<const typename L::const_slot_weights_view&>(), std::declval<rows_arg<L>>(),
                  std::declval<const typename L::grad_weights_view&>()))>> : std::true_type {};

// Receive buffers in the layer's own symmetric memory (MpiLayer).
template <class L, class = void>
struct has_own_buffers : std::false_type {};
template <class L>
struct has_own_buffers<
    L, void_t<decltype(std::declval<const L&>().recv()), decltype(std::declval<const L&>().recv_w()),
              decltype(std::declval<L&>().dispatch(std::declval<plan_arg<L>>(), std::declval<const_rows_arg<L>>(),
                                                    std::declval<const typename L::weights_view&>())),
              decltype(std::declval<L&>().combine(std::declval<plan_arg<L>>(), std::declval<const_rows_arg<L>>(),
                                                   std::declval<rows_arg<L>>())),
              decltype(std::declval<L&>().combine_backward(
                  std::declval<plan_arg<L>>(), std::declval<const_rows_arg<L>>(), std::declval<const_rows_arg<L>>(),
                  std::declval<rows_arg<L>>(), std::declval<const typename L::grad_weights_view&>()))>>
    : std::integral_constant<
          bool, std::is_same<std::decay_t<decltype(std::declval<const L&>().recv())>, typename L::rows_view>::value &&
                    std::is_same<std::decay_t<decltype(std::declval<const L&>().recv_w())>,
                                 typename L::slot_weights_view>::value> {};

template <class L>
struct has_receive_buffers
    : std::integral_constant<bool, has_caller_buffers<L>::value || has_own_buffers<L>::value> {};

// Everything at once (the tests' shorthand).
template <class L>
inline constexpr bool is_layer_v = has_types<L>::value && has_accessors<L>::value &&
                                   has_common_operations<L>::value && has_receive_buffers<L>::value;

}  // namespace moonep::impl::layer_concept

// Each requirement its own assertion, so a compile error names the one missed.
#define MOONEP_ASSERT_LAYER(...)                                                                                \
  static_assert(::moonep::impl::layer_concept::has_types<__VA_ARGS__>::value,                                  \
                "a moonep layer has element_type (float, double or moonep::bf16), weight_type, accum_type, "   \
                "memory_space, plan_type and its LayoutRight views of one rank (rows_view, const_rows_view, "  \
                "weights_view, grad_weights_view; slot_weights_view, const_slot_weights_view one rank less)"); \
  static_assert(::moonep::impl::layer_concept::has_accessors<__VA_ARGS__>::value,                              \
                "a moonep layer has config() -> const Config& and hidden() -> int");                            \
  static_assert(::moonep::impl::layer_concept::has_common_operations<__VA_ARGS__>::value,                      \
                "a moonep layer has combine_unweighted(plan, y, out), combine_backward_unweighted(plan, "      \
                "grad_out, grad_y) and dispatch_backward(plan, grad_recv, [grad_recv_w,] grad_x[, grad_w])");  \
  static_assert(::moonep::impl::layer_concept::has_receive_buffers<__VA_ARGS__>::value,                        \
                "a moonep layer has dispatch, combine and combine_backward with the caller's receive buffers " \
                "(recv, recv_w arguments) or with its own (recv(), recv_w())")
