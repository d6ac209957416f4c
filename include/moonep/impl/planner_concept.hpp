// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/planner_concept.hpp — the one interface every implementation
// behind moonep::Planner offers (moonep/planner.hpp), checked at compile
// time (C++17 detection; the same checks a C++20 concept would make), so a
// path that drifts from it does not compile. moonep::Planner checks its
// implementation; each implementation's header checks itself.
//
// The interface (P an implementation):
//   P::execution_space, P::memory_space
//   P::world_type        what the constructor plans over
//   P::input_view        Kokkos::View<const std::int32_t*, memory_space>
//   P::plan_type         moonep::Plan<memory_space>
//   P(const Config&, world_type&, const execution_space&)   not copyable
//   p.plan(const std::vector<input_view>& routing,
//          const std::vector<input_view>* tokens_per_expert = nullptr,
//          const input_view* tokens_per_rank = nullptr) -> const plan_type&
//   p.config() -> const Config&      p.world() -> world_type&
//   p.local_ranks() -> const std::vector<int>&   (routing[i] is local_ranks()[i]'s)
//   p.last_plan() -> const plan_type&
//   P::path_name() -> const char*    P::uses_cuda_specialization (constexpr bool)
// The errors (every path, the same words for the same fault): InputError for
// a bad configuration or world at construction and for bad input in plan()
// (moonep/impl/input_shapes.hpp for the host facts, validate_rank_input's
// words, moonep/reference.hpp, for what the kernels find), after which the
// planner is usable; RuntimeError for what the machine cannot do.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "moonep/config.hpp"
#include "moonep/impl/kokkos_compat.hpp"
#include "moonep/impl/rank_plan_view.hpp"

namespace moonep::impl::planner_concept {

template <class...>
using void_t = void;

template <class P, class = void>
struct has_types : std::false_type {};
template <class P>
struct has_types<P, void_t<typename P::execution_space, typename P::memory_space, typename P::world_type,
                           typename P::input_view, typename P::plan_type>>
    : std::integral_constant<bool, std::is_same<typename P::input_view,
                                                Kokkos::View<const std::int32_t*, typename P::memory_space>>::value &&
                                       std::is_same<typename P::plan_type, Plan<typename P::memory_space>>::value> {};

template <class P, class = void>
struct plans : std::false_type {};
template <class P>
struct plans<P, void_t<decltype(std::declval<P&>().plan(std::declval<const std::vector<typename P::input_view>&>(),
                                                        std::declval<const std::vector<typename P::input_view>*>(),
                                                        std::declval<const typename P::input_view*>())),
                       decltype(std::declval<P&>().plan(std::declval<const std::vector<typename P::input_view>&>()))>>
    : std::integral_constant<
          bool, std::is_same<decltype(std::declval<P&>().plan(
                                 std::declval<const std::vector<typename P::input_view>&>(),
                                 std::declval<const std::vector<typename P::input_view>*>(),
                                 std::declval<const typename P::input_view*>())),
                             const typename P::plan_type&>::value> {};

template <class P, class = void>
struct has_accessors : std::false_type {};
template <class P>
struct has_accessors<P, void_t<decltype(std::declval<const P&>().config()), decltype(std::declval<const P&>().world()),
                               decltype(std::declval<const P&>().local_ranks()),
                               decltype(std::declval<const P&>().last_plan()), decltype(P::path_name()),
                               decltype(P::uses_cuda_specialization)>>
    : std::integral_constant<
          bool, std::is_same<decltype(std::declval<const P&>().config()), const Config&>::value &&
                    std::is_same<decltype(std::declval<const P&>().world()), typename P::world_type&>::value &&
                    std::is_same<decltype(std::declval<const P&>().local_ranks()), const std::vector<int>&>::value &&
                    std::is_same<decltype(std::declval<const P&>().last_plan()), const typename P::plan_type&>::value &&
                    std::is_same<decltype(P::path_name()), const char*>::value &&
                    std::is_same<std::remove_cv_t<decltype(P::uses_cuda_specialization)>, bool>::value> {};

template <class P, class = void>
struct constructible : std::false_type {};
template <class P>
struct constructible<P, void_t<typename P::world_type, typename P::execution_space>>
    : std::integral_constant<bool, std::is_constructible<P, const Config&, typename P::world_type&,
                                                         const typename P::execution_space&>::value &&
                                       !std::is_copy_constructible<P>::value> {};

}  // namespace moonep::impl::planner_concept

// Each requirement its own assertion, so a compile error names the one missed.
#define MOONEP_ASSERT_PLANNER(...)                                                                              \
  static_assert(::moonep::impl::planner_concept::has_types<__VA_ARGS__>::value,                                \
                "a moonep planner has execution_space, memory_space, world_type, input_view "                   \
                "(View<const int32_t*, memory_space>) and plan_type (Plan<memory_space>)");                     \
  static_assert(::moonep::impl::planner_concept::constructible<__VA_ARGS__>::value,                            \
                "a moonep planner is made from (const Config&, world_type&, const execution_space&) and is "   \
                "not copyable");                                                                                \
  static_assert(::moonep::impl::planner_concept::plans<__VA_ARGS__>::value,                                    \
                "a moonep planner has plan(routing, tokens_per_expert = nullptr, tokens_per_rank = nullptr) "  \
                "returning const plan_type&");                                                                  \
  static_assert(::moonep::impl::planner_concept::has_accessors<__VA_ARGS__>::value,                            \
                "a moonep planner has config(), world(), local_ranks(), last_plan(), static path_name() and "  \
                "uses_cuda_specialization")
