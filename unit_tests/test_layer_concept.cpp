// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The layer interface (moonep/impl/layer_concept.hpp) accepts every
// view-based layer of this build (InProcessLayer for each element type on
// every execution space; MpiLayer where MoonEP has MPI) and refuses a type
// that misses any one of its parts: an element type the contract does not
// have, a weight type other than weight_t<T>, views of mixed ranks or
// layouts, a missing hidden(), a combine_unweighted that returns a value,
// a missing dispatch_backward with weights, a dispatch without receive
// buffers (neither the caller's nor its own), recv() of the wrong type.
#include "catch2_compat.hpp"

#include <cstddef>
#include <type_traits>

#include "moonep/layer.hpp"
#include "moonep/moonep_config.hpp"
#if MOONEP_HAVE_MPI
#include "moonep/mpi_layer.hpp"
#endif

// Named, not anonymous: the fakes' members are never called, and nvcc
// warns of unreferenced functions with internal linkage.
namespace layer_concept_test {

using namespace moonep;
using namespace moonep::impl::layer_concept;

using Mem = Kokkos::HostSpace;
template <class V>
using View = Kokkos::View<V, Kokkos::LayoutRight, Mem>;

// The views and accessors every layer has, of rank 3 or 2 (a leading
// rank extent or none).
template <class T, bool AllRanks>
struct Base {
  template <class V>
  using rows = std::conditional_t<AllRanks, View<V***>, View<V**>>;
  template <class V>
  using slots = std::conditional_t<AllRanks, View<V**>, View<V*>>;
  using element_type = T;
  using weight_type = weight_t<T>;
  using accum_type = accum_t<T>;
  using memory_space = Mem;
  using plan_type = Plan<Mem>;
  using rows_view = rows<T>;
  using const_rows_view = rows<const T>;
  using weights_view = rows<const weight_type>;
  using grad_weights_view = rows<weight_type>;
  using slot_weights_view = slots<weight_type>;
  using const_slot_weights_view = slots<const weight_type>;
  const Config& config() const { return config_; }
  int hidden() const { return 1; }
  void combine_unweighted(const plan_type&, const const_rows_view&, const rows_view&) const {}
  void combine_backward_unweighted(const plan_type&, const const_rows_view&, const rows_view&) const {}
  void dispatch_backward(const plan_type&, const const_rows_view&, const rows_view&) const {}
  void dispatch_backward(const plan_type&, const const_rows_view&, const const_slot_weights_view&, const rows_view&,
                         const grad_weights_view&) const {}
  Config config_{};
};

// The caller's receive buffers (as InProcessLayer).
template <class T = float>
struct CallerBuffers : Base<T, true> {
  using B = Base<T, true>;
  void dispatch(const typename B::plan_type&, const typename B::const_rows_view&, const typename B::weights_view&,
                const typename B::rows_view&, const typename B::slot_weights_view&) const {}
  void combine(const typename B::plan_type&, const typename B::const_rows_view&,
               const typename B::const_slot_weights_view&, const typename B::rows_view&) const {}
  void combine_backward(const typename B::plan_type&, const typename B::const_rows_view&,
                        const typename B::const_rows_view&, const typename B::const_slot_weights_view&,
                        const typename B::rows_view&, const typename B::grad_weights_view&) const {}
};

// Its own receive buffers (as MpiLayer): one rank's views.
struct OwnBuffers : Base<double, false> {
  rows_view recv() const { return rows_view(); }
  slot_weights_view recv_w() const { return slot_weights_view(); }
  void dispatch(const plan_type&, const const_rows_view&, const weights_view&) {}
  void combine(const plan_type&, const const_rows_view&, const rows_view&) {}
  void combine_backward(const plan_type&, const const_rows_view&, const const_rows_view&, const rows_view&,
                        const grad_weights_view&) {}
};

// Each of these breaks one part.
struct IntElements : CallerBuffers<int> {};
struct DoubleWeightsForFloat : CallerBuffers<float> {
  using weight_type = double;
  using weights_view = View<const double***>;
};
struct MixedRanks : CallerBuffers<float> {
  using slot_weights_view = View<float***>;
};
struct LayoutLeftRows : CallerBuffers<float> {
  using rows_view = Kokkos::View<float***, Kokkos::LayoutLeft, Mem>;
};
struct NoHidden : CallerBuffers<float> {
  void hidden() const = delete;
};
struct HiddenAsSize : CallerBuffers<float> {
  std::size_t hidden() const { return 1; }
};
struct CombineReturnsValue : CallerBuffers<float> {
  int combine_unweighted(const plan_type&, const const_rows_view&, const rows_view&) const { return 0; }
};
struct NoWeightedDispatchBackward : CallerBuffers<float> {
  void dispatch_backward(const plan_type&, const const_rows_view&, const rows_view&) const {}
};
struct NoReceiveBuffers : Base<float, true> {
  void dispatch(const plan_type&, const const_rows_view&, const weights_view&) const {}
  void combine(const plan_type&, const const_rows_view&, const rows_view&) const {}
  void combine_backward(const plan_type&, const const_rows_view&, const const_rows_view&, const rows_view&,
                        const grad_weights_view&) const {}
};
struct RecvOfOtherType : OwnBuffers {
  View<float**> recv() const { return View<float**>(); }
};
struct CallerBuffersWithoutCombineBackward : Base<float, true> {
  void dispatch(const plan_type&, const const_rows_view&, const weights_view&, const rows_view&,
                const slot_weights_view&) const {}
  void combine(const plan_type&, const const_rows_view&, const const_slot_weights_view&, const rows_view&) const {}
};

template <class L>
constexpr bool all_parts() {
  return has_types<L>::value && has_accessors<L>::value && has_common_operations<L>::value &&
         has_receive_buffers<L>::value && is_layer_v<L>;
}

// InProcessLayer of every element type on one execution space.
template <class Exec>
constexpr bool in_process_layers() {
  return all_parts<InProcessLayer<float, Exec>>() && all_parts<InProcessLayer<double, Exec>>() &&
         all_parts<InProcessLayer<bf16, Exec>>() && has_caller_buffers<InProcessLayer<bf16, Exec>>::value &&
         !has_own_buffers<InProcessLayer<bf16, Exec>>::value;
}
#define MOONEP_TEST_IN_PROCESS_LAYERS(Exec) &&in_process_layers<Exec>()
constexpr bool every_in_process_layer = true MOONEP_KOKKOS_FOR_EACH_EXECUTION_SPACE(MOONEP_TEST_IN_PROCESS_LAYERS);
#undef MOONEP_TEST_IN_PROCESS_LAYERS

}  // namespace layer_concept_test

using namespace layer_concept_test;

TEST_CASE("the layer interface accepts every view-based layer of this build", "[concept]") {
  STATIC_REQUIRE(all_parts<CallerBuffers<float>>());
  STATIC_REQUIRE(all_parts<CallerBuffers<bf16>>());
  STATIC_REQUIRE(all_parts<OwnBuffers>());
  STATIC_REQUIRE(has_own_buffers<OwnBuffers>::value);
  STATIC_REQUIRE_FALSE(has_caller_buffers<OwnBuffers>::value);
  STATIC_REQUIRE(every_in_process_layer);
#if MOONEP_HAVE_MPI
  STATIC_REQUIRE(all_parts<MpiLayer<float>>());
  STATIC_REQUIRE(all_parts<MpiLayer<double>>());
  STATIC_REQUIRE(all_parts<MpiLayer<bf16>>());
  STATIC_REQUIRE(has_own_buffers<MpiLayer<bf16>>::value);
#endif
}

TEST_CASE("the layer interface refuses a type that misses any one part", "[concept]") {
  STATIC_REQUIRE_FALSE(has_types<IntElements>::value);
  STATIC_REQUIRE_FALSE(has_types<DoubleWeightsForFloat>::value);
  STATIC_REQUIRE_FALSE(has_types<MixedRanks>::value);
  STATIC_REQUIRE_FALSE(has_types<LayoutLeftRows>::value);
  STATIC_REQUIRE_FALSE(has_types<int>::value);
  STATIC_REQUIRE_FALSE(has_accessors<NoHidden>::value);
  STATIC_REQUIRE_FALSE(has_accessors<HiddenAsSize>::value);
  STATIC_REQUIRE_FALSE(has_common_operations<CombineReturnsValue>::value);
  STATIC_REQUIRE_FALSE(has_common_operations<NoWeightedDispatchBackward>::value);
  STATIC_REQUIRE_FALSE(has_receive_buffers<NoReceiveBuffers>::value);
  STATIC_REQUIRE_FALSE(has_receive_buffers<RecvOfOtherType>::value);
  STATIC_REQUIRE_FALSE(has_receive_buffers<CallerBuffersWithoutCombineBackward>::value);
  // Each is refused by the whole interface too, while the rest of it holds.
  STATIC_REQUIRE_FALSE(is_layer_v<IntElements>);
  STATIC_REQUIRE_FALSE(is_layer_v<NoHidden>);
  STATIC_REQUIRE_FALSE(is_layer_v<CombineReturnsValue>);
  STATIC_REQUIRE_FALSE(is_layer_v<NoWeightedDispatchBackward>);
  STATIC_REQUIRE_FALSE(is_layer_v<NoReceiveBuffers>);
  STATIC_REQUIRE_FALSE(is_layer_v<RecvOfOtherType>);
  STATIC_REQUIRE(has_types<NoReceiveBuffers>::value && has_accessors<NoReceiveBuffers>::value &&
                 has_common_operations<NoReceiveBuffers>::value);
  STATIC_REQUIRE(has_types<NoHidden>::value && has_common_operations<NoHidden>::value &&
                 has_receive_buffers<NoHidden>::value);
}
