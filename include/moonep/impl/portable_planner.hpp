// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/portable_planner.hpp — the portable path of moonep::Planner
// (moonep/planner.hpp): the ranks plan their step with Kokkos kernels over
// a World (moonep/world.hpp), exchanging only what the seed exchanges
// (docs/spec/planning.md, "How the original GPU planner runs a step"):
//
//   validate   host facts (rank arrays, lengths), then every local rank's
//              expert histogram (= tokens per expert) and checks, their
//              result a count of problems kept on the device; with ranks
//              in other processes, that count is read and passed to
//              world.all_ok() so that one bad rank stops them all before
//              anything touches the shared buffer. With every rank in this
//              process nothing is read here: every later kernel reads the
//              count and does nothing when it is set, and the host reads
//              it once, after the step (see "in-process steps" below).
//   Phase A    each rank clears its receive slots and sends its tokens per
//              expert to rank 0; Phase C1 (its stable counting sort by
//              expert) needs nothing else and runs here too.
//   barrier    (only with ranks in other processes)
//   Phase B    rank 0: steps 1-5 for every rank; sends each rank its tables.
//   barrier
//   Phase C2   each rank: destinations, dedup, and per-slot (src_info, dup
//              link) sent into the destination ranks' chunks.
//   barrier
//   Phase D    each rank: its outputs (src_info, dup structures, tables).
//              In the device form's in-process step (ranks in order) C2
//              writes them itself and Phase D does not run
//              (phase_c2_outputs.hpp).
//
// Every phase runs the process's local ranks together: each kernel's policy
// spans all of them (moonep/impl/portable_types.hpp, LocalRanks), so a step
// launches the same kernels whatever the number of local ranks: on an
// in-process world 6 in the device form (validate 2, A+C1 1, B 2, C2 1;
// parallel_for only; D 2 more where C2 fills the receive slots) and 10 in
// the host form (validate 2, A 1, C1 1, B 4, C2 1, D 1; counted by
// test_portable_labels' Kokkos Tools callback).
//
// Data for another rank is stored in place when that rank is local and the
// world is directly addressable (one process: nothing is put at all), and
// goes through world.put_runs otherwise, one put per local source rank and
// phase; in a directly addressable world ranks read rank 0's shared tables
// in place rather than receive a copy.
//
// In-process steps (every rank in this process, L == R, in a directly
// addressable world: the InProcessWorld, or an MPI shared-memory world of
// one process; nothing is put): no barrier (one process
// and one execution space instance order every kernel), no all_ok, no
// value read back before the end of the step; the step ends with one fence
// and the validation count and the pair count read on the host (copied
// back, or, in a step graph, stored by its last kernel where the host
// reads them: host_status_), after which bad input throws exactly what it
// threw when it was checked before the phases (the first bad local rank's
// validate_rank_input words).
// In the device form such a step is one Kokkos::Experimental::Graph of its
// six kernels (portable::StepGraph), Phase B's two on a branch beside
// the validation's second kernel and A+C1's (build_step_graph), built at
// construction (on a device space on an instance of the planner's own) and submitted on the planner's
// instance once per step: on Kokkos::Cuda one graph launch, then
// the fence. Where Kokkos has no usable graph (before 4.5:
// MOONEP_KOKKOS_HAS_GRAPH), or a kernel's team scratch would not fit level
// 0 (large E: a graph would hold level-1 scratch), the same kernels are
// launched one by one on the one instance. Either way nothing is allocated
// and nothing waits for the device until the step's end.
//
// The form of the kernels (host or device) is a template argument, by
// default the execution space's (portable::default_phase_form); so is how
// an in-process step is submitted (portable::default_step_submission).
//
// What must stay true:
//  * Construction allocates everything (the world's symmetric buffer, all
//    scratch, the plan's storage, the step graph); plan() allocates nothing
//    (test_portable_labels counts Kokkos' allocations in a step: none).
//  * Host syncs per step, in-process: one, at the end (the validation and
//    pair counts, read with the final fence: one copy, none in a graph).
//    With ranks in other processes: the validation count, a fence before
//    each phase's puts (none without puts), the world's barriers, and the
//    end of the step (the pair count on rank 0's process). No size is read
//    back for a put: runs have fixed sizes (empty runs are allowed).
//  * Bad input is found before the shared buffer is touched, and reported
//    with validate_rank_input's words for the first bad local rank.
//  * The pointers handed to kernels (LocalRanks) stay valid: chunks are
//    fixed at construction, input pointers are refreshed whenever the
//    caller's views move.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "moonep/config.hpp"
#include "moonep/error.hpp"
#include "moonep/impl/alignment.hpp"
#include "moonep/impl/chunk_layout.hpp"
#include "moonep/impl/input_shapes.hpp"
#include "moonep/impl/kokkos_compat.hpp"
#include "moonep/impl/phase_b_root.hpp"
#include "moonep/impl/phase_c2_destinations.hpp"
#include "moonep/impl/phase_d_outputs.hpp"
#include "moonep/impl/phase_a_local.hpp"
#include "moonep/impl/portable_instances.hpp"
#include "moonep/impl/planner_concept.hpp"
#include "moonep/impl/planner_select.hpp"
#include "moonep/impl/rank_plan_view.hpp"
#include "moonep/reference.hpp"
#include "moonep/world.hpp"

namespace moonep::impl {

template <class ExecutionSpace, class Form, class Submission>
class PortablePlanner {
 public:
  // The kernels' form (portable::HostForm or portable::DeviceForm).
  using phase_form = Form;
  static constexpr bool host_form = portable::is_host_form<Form>::value;
  // How an in-process step is submitted (portable::StepGraph or
  // portable::StepSequence).
  using step_submission = Submission;
  using execution_space = ExecutionSpace;
  using memory_space = typename ExecutionSpace::memory_space;
  using world_type = World<memory_space>;
  // Routing (S*K expert ids) or tokens per expert (E counts) of one rank.
  using input_view = Kokkos::View<const std::int32_t*, memory_space>;
  using plan_type = Plan<memory_space>;

  static constexpr bool uses_cuda_specialization = false;
  static const char* path_name() { return "portable"; }

  // Throws InputError for a bad config or a world of the wrong size.
  // Collective (allocates the world's symmetric buffer).
  PortablePlanner(const Config& config, world_type& world, const ExecutionSpace& exec = ExecutionSpace())
      : config_(checked_config(config, world.size())), layout_(config_, host_form ? 3 : 4), world_(world), claim_(world), exec_(exec) {
    world_.allocate(layout_.total);
    const std::vector<int>& ranks = world_.local_ranks();
    const int L = static_cast<int>(ranks.size());
    const bool da = world_.directly_addressable();
    using T = portable::Types<ExecutionSpace>;

    std::vector<std::int32_t*> direct(static_cast<std::size_t>(layout_.R), nullptr);
    if (da) {
      for (const int r : ranks) direct[r] = world_.local_chunk(r).data();
    }
    needs_puts_ = !da || L < layout_.R;
    // Every rank here and nothing to put (a directly addressable world):
    // the step needs neither barriers nor agreement.
    in_process_ = L == layout_.R && !needs_puts_;

    lr_.count = L;
    lr_.rank = Kokkos::View<int*, memory_space>("moonep::portable::local.rank", L);
    lr_.chunk = typename T::refs("moonep::portable::local.chunk", L);
    lr_.shared_tables = typename T::refs("moonep::portable::local.shared_tables", L);
    lr_.direct_chunk = typename T::refs("moonep::portable::local.direct_chunk", layout_.R);
    lr_.routing = typename T::crefs("moonep::portable::local.routing", L);
    lr_.tpe = typename T::crefs("moonep::portable::local.tpe", L);
    lr_.routing_len = typename T::lvec("moonep::portable::local.routing_len", L);
    lr_.tokens_per_rank = typename T::crefs("moonep::portable::local.tokens_per_rank", 1);
    lr_.S = config_.tokens;
    lr_.K = config_.topk;
    auto h_rank = Kokkos::create_mirror_view(lr_.rank);
    auto h_chunk = Kokkos::create_mirror_view(lr_.chunk);
    auto h_shared = Kokkos::create_mirror_view(lr_.shared_tables);
    auto h_direct = Kokkos::create_mirror_view(lr_.direct_chunk);
    for (int l = 0; l < L; ++l) {
      const int r = ranks[l];
      h_rank(l) = r;
      h_chunk(l).at = world_.local_chunk(r).data();
      h_shared(l).at = (da ? world_.chunk(0).data() : h_chunk(l).at) + layout_.shared;
      plan_.ranks.push_back(RankPlanView<memory_space>(r));
    }
    for (int d = 0; d < layout_.R; ++d) h_direct(d).at = direct[d];
    Kokkos::deep_copy(lr_.rank, h_rank);
    Kokkos::deep_copy(lr_.chunk, h_chunk);
    Kokkos::deep_copy(lr_.shared_tables, h_shared);
    Kokkos::deep_copy(lr_.direct_chunk, h_direct);
    h_routing_ = Kokkos::create_mirror_view(lr_.routing);
    h_tpe_ = Kokkos::create_mirror_view(lr_.tpe);
    h_routing_len_ = Kokkos::create_mirror_view(lr_.routing_len);
    h_tokens_per_rank_ = Kokkos::create_mirror_view(lr_.tokens_per_rank);

    input_ = portable::InputScratch<ExecutionSpace>(exec_, L, layout_.E, layout_.N, host_form);
    lr_.stop = input_.problems.data();
    publish_ = portable::PublishScratch<ExecutionSpace>(layout_, L, needs_puts_);
    publish_.quads = layout_.slot_ints == 4 && aligned16(publish_.staging.data());
    for (const std::int32_t* c : direct) publish_.quads = publish_.quads && (!c || aligned16(c + layout_.slots));
    lr_.slot_quads = layout_.slot_ints == 4;
    for (const int r : ranks) lr_.slot_quads = lr_.slot_quads && aligned16(world_.local_chunk(r).data() + layout_.slots);
    store_ = portable::PlanStore<ExecutionSpace>(config_, L, host_form);
    // The device form's in-process step, ranks in order (local index =
    // world rank): C2 writes the plan's per-slot outputs itself and Phase
    // D does not run (phase_c2_outputs.hpp).
    for (int l = 0; l < L; ++l) ranks_in_order_ = ranks_in_order_ && ranks[l] == l;
    outputs_ = portable::C2Outputs<ExecutionSpace>(layout_, lr_, store_,
                                                   !host_form && in_process_ && ranks_in_order_ && L > 0);
    plan_.config = config_;
    for (int l = 0; l < L; ++l) plan_.ranks[l] = store_.view(l, ranks[l]);
    if (!direct[0]) {
      counts_runs_ = Kokkos::View<PutRun*, memory_space>("moonep::portable::local.counts_runs", L);
      auto h = Kokkos::create_mirror_view(counts_runs_);
      for (int l = 0; l < L; ++l) h(l) = portable::put_counts_run(layout_, ranks[l], l);
      Kokkos::deep_copy(counts_runs_, h);
    }
    if (L > 0 && ranks[0] == 0) {
      root_ = portable::RootScratch<ExecutionSpace>(layout_, direct, da, input_.status.data() + 1);
      root_.stop = input_.problems.data();
    }
#if MOONEP_KOKKOS_HAS_GRAPH
    if constexpr (std::is_same<Submission, portable::StepGraph>::value && !host_form) {
      if (in_process_ && L > 0 && scratch_fits_level0()) build_step_graph();
    }
#endif
  }

  // One planner per world: it owns the world's buffer layout and scratch.
  PortablePlanner(const PortablePlanner&) = delete;
  PortablePlanner& operator=(const PortablePlanner&) = delete;

  const Config& config() const { return config_; }
  world_type& world() const { return world_; }
  const std::vector<int>& local_ranks() const { return world_.local_ranks(); }
  const plan_type& last_plan() const { return plan_; }
  // The kernels of the step graph in their order, when in-process steps are
  // one graph (else empty: the kernels are launched one by one). For tools
  // and tests: Kokkos Tools see no kernel of a graph.
  const std::vector<std::string>& step_graph_kernels() const { return graph_kernels_; }

  // Plans one step. routing[i] (and tokens_per_expert[i], when given, which
  // must match the routing) belong to world().local_ranks()[i]. Collective.
  // Bad input on any rank: InputError on every rank, the shared buffer
  // untouched, the planner still usable.
  //
  // tokens_per_rank makes the step ragged (docs/spec/planning.md "Ragged
  // steps"): a view of R counts s_r by world rank, read on the device (only
  // the local ranks' entries; the others may hold anything). routing[i]
  // then holds at least s_r*K ids (a view of S*K always does; ids past
  // s_r*K are ignored) and tokens_per_expert[i] counts those s_r*K. Null: a
  // full step, every routing view exactly S*K. Nothing is allocated either
  // way; plan views keep dst's S*K capacity and RankPlanView::entries says
  // how much of it the step wrote.
  const plan_type& plan(const std::vector<input_view>& routing,
                        const std::vector<input_view>* tokens_per_expert = nullptr,
                        const input_view* tokens_per_rank = nullptr) {
    compat::ProfilingRegion region("moonep::portable::plan");
    if (in_process_) {
      // Every rank here: validation's result stays on the device until the
      // step's end (the kernels between do nothing when it is set).
      validate_all(routing, tokens_per_expert, tokens_per_rank, /*deferred=*/true);
#if MOONEP_KOKKOS_HAS_GRAPH
      if (graph_) {
        compat::ProfilingRegion graph_region("moonep::portable::step_graph");
        graph_->submit(exec_);
        finish(&routing, tokens_per_expert, tokens_per_rank, /*from_host_status=*/host_status_.extent(0) == 2);
        return plan_;
      }
#endif
      phase_a();
      phase_b();
      phase_c2();
      phase_d();
      finish(&routing, tokens_per_expert, tokens_per_rank);
      return plan_;
    }
    validate_all(routing, tokens_per_expert, tokens_per_rank, /*deferred=*/false);
    phase_a();
    world_.barrier();
    phase_b();
    world_.barrier();
    phase_c2();
    world_.barrier();
    phase_d();
    finish(nullptr, nullptr, nullptr);
    return plan_;
  }

 private:
  using T = portable::Types<ExecutionSpace>;

  // The exact message of validate_rank_input for local rank li, computed
  // on the host (only on the failure path, so the copies do not matter);
  // "" if the rank's input is fine.
  // A ragged rank's routing is read as its first s_r*K ids (all of them
  // when the view is shorter, which validate_rank_input then names).
  std::string host_message(std::size_t li, const input_view& routing, const input_view* tpe,
                           const input_view* tokens_per_rank) const {
    const int rank = world_.local_ranks()[li];
    // (Vectors, not host mirrors: compat::host_vector says why.)
    const std::vector<std::int32_t> h_routing = compat::host_vector(routing);
    const std::vector<std::int32_t> h_tpe = tpe ? compat::host_vector(*tpe) : std::vector<std::int32_t>();
    std::int64_t len = static_cast<std::int64_t>(h_routing.size());
    std::int32_t tokens = config_.tokens;
    if (tokens_per_rank) {
      Kokkos::deep_copy(Kokkos::View<std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(&tokens, 1),
                        Kokkos::subview(*tokens_per_rank, Kokkos::make_pair(rank, rank + 1)));
      const std::int64_t want = static_cast<std::int64_t>(tokens) * config_.topk;
      if (tokens >= 0 && want < len) len = want;
    }
    try {
      validate_rank_input(config_, rank, h_routing.data(), len, tpe ? h_tpe.data() : nullptr,
                          tpe ? static_cast<std::int64_t>(h_tpe.size()) : 0, tokens);
    } catch (const InputError& e) {
      return e.what();
    }
    return {};
  }

  // Points the kernels' input tables at the caller's views (a copy to the
  // device only when a pointer changed since the last step).
  // (and their lengths, which bound what a ragged step reads; the counts'
  // pointer travels in LocalRanks by value, with every kernel).
  void bind_inputs(const std::vector<input_view>& routing, const std::vector<input_view>* tpe,
                   const input_view* tokens_per_rank) {
    bool changed = false;
    for (std::size_t li = 0; li < routing.size(); ++li) {
      const std::int32_t* r = routing[li].data();
      const std::int32_t* t = tpe ? (*tpe)[li].data() : nullptr;
      const std::int64_t n = static_cast<std::int64_t>(routing[li].extent(0));
      changed = changed || h_routing_(li).at != r || h_tpe_(li).at != t || h_routing_len_(li) != n;
      h_routing_(li).at = r;
      h_tpe_(li).at = t;
      h_routing_len_(li) = n;
    }
    const std::int32_t* counts = tokens_per_rank ? tokens_per_rank->data() : nullptr;
    const bool counts_changed = h_tokens_per_rank_(0).at != counts;
    h_tokens_per_rank_(0).at = counts;
    // On the step's instance, without a fence: the mirrors are not
    // written again before the step's final fence.
    if (changed) {
      Kokkos::deep_copy(exec_, lr_.routing, h_routing_);
      Kokkos::deep_copy(exec_, lr_.tpe, h_tpe_);
      Kokkos::deep_copy(exec_, lr_.routing_len, h_routing_len_);
    }
    if (counts_changed) Kokkos::deep_copy(exec_, lr_.tokens_per_rank, h_tokens_per_rank_);
  }

  // The words for input the kernels rejected: the first bad local rank's.
  std::string kernel_problem_message(const std::vector<input_view>& routing, const std::vector<input_view>* tpe,
                                     const input_view* tokens_per_rank) const {
    std::string why;
    for (std::size_t li = 0; why.empty() && li < routing.size(); ++li) {
      why = host_message(li, routing[li], tpe ? &(*tpe)[li] : nullptr, tokens_per_rank);
    }
    if (why.empty()) why = "input rejected on this process (no rank's check names the problem)";
    return why;
  }

  // The host facts, then the kernels' checks. `deferred` (in-process
  // steps): the kernels' count stays on the device, read by finish().
  void validate_all(const std::vector<input_view>& routing, const std::vector<input_view>* tpe,
                    const input_view* tokens_per_rank, bool deferred) {
    compat::ProfilingRegion region("moonep::portable::validate");
    std::string why = input_shape_error(config_, world_.local_ranks(), routing, tpe, tokens_per_rank);
    if (why.empty() && lr_.count > 0) {
      bind_inputs(routing, tpe, tokens_per_rank);
      if (deferred && !graph_kernels_.empty()) return;  // the step graph validates
      if constexpr (host_form) {
        portable::validate_host(exec_, input_, lr_, tpe != nullptr);
      } else {
        portable::validate_device(portable::Launcher<ExecutionSpace>(exec_), input_, lr_);
      }
      if (deferred) return;
      std::int64_t problems = 0;
      Kokkos::deep_copy(exec_, Kokkos::View<std::int64_t, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(&problems),
                        input_.problems);
      compat::fence(exec_, "moonep::portable::validated");
      if (problems > 0) why = kernel_problem_message(routing, tpe, tokens_per_rank);
    }
    if (deferred) {
      if (!why.empty()) throw InputError(why);
      return;
    }
    if (!world_.all_ok(why.empty())) {
      throw InputError(why.empty() ? std::string("input rejected on another rank; nothing was planned") : why);
    }
  }

  void phase_a() {
    compat::ProfilingRegion region("moonep::portable::phaseA");
    if (lr_.count == 0) return;
    if constexpr (host_form) {
      portable::clear_slots(exec_, layout_, input_, lr_);
      portable::stable_counting_sort(exec_, input_, lr_);
    } else {
      portable::clear_and_scatter(portable::Launcher<ExecutionSpace>(exec_), layout_, input_, lr_, outputs_);
    }
    if (counts_runs_.extent(0) > 0) {
      compat::fence(exec_, "moonep::portable::phaseA_before_put");
      for (int l = 0; l < lr_.count; ++l) {
        world_.put_runs(world_.local_ranks()[l], input_.counts,
                        Kokkos::subview(counts_runs_, Kokkos::make_pair(l, l + 1)));
      }
    }
  }

  void phase_b() {
    if (root_.alloc.extent(0) == 0) return;  // rank 0 is not planned here
    compat::ProfilingRegion region("moonep::portable::phaseB");
    std::int32_t* chunk0 = world_.local_chunk(0).data();
    portable::plan_root(portable::Launcher<ExecutionSpace>(exec_), layout_, root_, chunk0, chunk0 + layout_.tpe_in,
                        host_form);
    if (root_.own_runs.extent(0) > 0 || root_.shared_runs.extent(0) > 0) {
      compat::fence(exec_, "moonep::portable::phaseB_before_broadcast");
      portable::broadcast(root_, world_);
    }
  }

  void phase_c2() {
    compat::ProfilingRegion region("moonep::portable::phaseC2");
    if (lr_.count == 0) return;
    portable::destinations_and_dedup(portable::Launcher<ExecutionSpace>(exec_), layout_, input_, publish_, lr_,
                                     store_.dst, host_form, outputs_);
    if (!needs_puts_) return;
    portable::publication_runs(exec_, layout_, input_, publish_, lr_);
    compat::fence(exec_, "moonep::portable::phaseC2_before_put");
    const std::int64_t n = layout_.slot_ints * layout_.N, cap = layout_.pair_capacity;
    for (int l = 0; l < lr_.count; ++l) {
      world_.put_runs(world_.local_ranks()[l], Kokkos::subview(publish_.staging, Kokkos::make_pair(l * n, (l + 1) * n)),
                      Kokkos::subview(publish_.runs, Kokkos::make_pair(l * cap, (l + 1) * cap)));
    }
  }

  void phase_d() {
    if (outputs_.on) return;  // C2 wrote the outputs
    compat::ProfilingRegion region("moonep::portable::phaseD");
    if (lr_.count == 0) return;
    portable::rank_outputs(portable::Launcher<ExecutionSpace>(exec_), layout_, lr_, store_, host_form);
  }

  // The step's end: the plan is in the views. On rank 0's process, the
  // pair count comes back with it (an internal error beyond the bound). An
  // in-process step (`routing` given) also reads the validation count here,
  // with the same fence, and throws the InputError validation would have
  // thrown (the kernels between did nothing).
  // `from_host_status` (a step graph's): its last kernel has stored the
  // status in host_status_, which is read after the fence (no copy).
  void finish(const std::vector<input_view>* routing, const std::vector<input_view>* tpe,
              const input_view* tokens_per_rank, bool from_host_status = false) {
    // status: [0] the validation count, [1] the pair count (one copy, or
    // the graph's store).
    std::int64_t status[2] = {0, 0};
    if (!from_host_status && input_.status.extent(0) == 2 && (routing || root_.alloc.extent(0) > 0)) {
      Kokkos::deep_copy(exec_, Kokkos::View<std::int64_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(status, 2),
                        input_.status);
    }
    compat::fence(exec_, "moonep::portable::plan_done");
#if MOONEP_KOKKOS_HAS_GRAPH
    if (from_host_status) {
      status[0] = host_status_(0);
      status[1] = host_status_(1);
    }
#endif
    const std::int64_t problems = routing ? status[0] : 0;
    const std::int64_t npairs = root_.alloc.extent(0) > 0 ? status[1] : 0;
    if (problems > 0) throw InputError(kernel_problem_message(*routing, tpe, tokens_per_rank));
    if (npairs > layout_.pair_capacity) {
      throw RuntimeError("moonep portable planner: " + std::to_string(npairs) +
                         " (expert, rank) pairs exceed the bound " + std::to_string(layout_.pair_capacity) +
                         " (internal error)");
    }
  }

#if MOONEP_KOKKOS_HAS_GRAPH
  // The device form's kernels of an in-process step as one graph, in the
  // order plan() launches them otherwise but for Phase B's branch (below):
  // every input they read each step
  // (the routing, tokens_per_expert and tokens_per_rank pointers and
  // lengths) is in LocalRanks' device tables, so the graph is built once.
  // On a device space the graph and its kernels' policies are on an
  // instance of the planner's own (a new stream on Kokkos::Cuda: a graph's
  // team kernels hold their instance's team scratch pools as long as it
  // lives, kokkos_compat.hpp), and plan() submits it on exec_.
  void build_step_graph() {
    ExecutionSpace space = exec_;
    if constexpr (!portable::Types<ExecutionSpace>::host) {
      space = Kokkos::Experimental::partition_space(exec_, 1)[0];
    }
    // Phase B on a branch of its own (local index l is world rank l here,
    // so its counts can come straight from validation): its first kernel
    // reads the tallies validate_histogram sums and stores nothing but
    // Phase B's scratch, so it runs beside the rest of validation; its
    // second, which publishes, waits for validation too; C2 waits for it
    // and for Phase A + C1. Phase B's kernels are small teams, a latency
    // each, which the other branch's kernels over every entry hide.
    std::int32_t* chunk0 = world_.local_chunk(0).data();
    if constexpr (Kokkos::SpaceAccessibility<ExecutionSpace, Kokkos::SharedHostPinnedSpace>::accessible) {
      host_status_ = host_status_view("moonep::portable::host_status", 2);
    }
    // The graph's last kernel stores the status: C2 when it writes the
    // outputs (a copy of outputs_ that only the graph's C2 holds).
    portable::C2Outputs<ExecutionSpace> outputs = outputs_;
    if (outputs.on && host_status_.extent(0) == 2) {
      outputs.status = input_.status.data();
      outputs.host_status = host_status_.data();
    }
    graph_ = Kokkos::Experimental::create_graph(space, [&](const auto& root) {
      using node_type = typename portable::Launcher<ExecutionSpace>::node_type;
      node_type last = root;
      const portable::Launcher<ExecutionSpace> launch(space, last, graph_kernels_);
      std::int32_t* tallies = ranks_in_order_ ? input_.tallies.data() : nullptr;
      portable::validate_histogram(launch, input_, lr_, tallies);
      const node_type counted = last;
      portable::validate_block_offsets(launch, input_, lr_, tallies);
      const node_type validated = last;
      portable::clear_and_scatter(launch, layout_, input_, lr_, outputs_);
      if (ranks_in_order_) {
        const node_type scattered = last;
        last = counted;
        portable::phase_b_moves_and_split(launch, layout_, root_, tallies, nullptr);
        last = Kokkos::Experimental::when_all(validated, last);
        portable::phase_b_layout(launch, layout_, root_, chunk0, true, tallies);
        last = Kokkos::Experimental::when_all(scattered, last);
      } else {
        portable::plan_root(launch, layout_, root_, chunk0, chunk0 + layout_.tpe_in, false);
      }
      portable::destinations_and_dedup(launch, layout_, input_, publish_, lr_, store_.dst, false, outputs);
      if (!outputs.on) {
        portable::rank_outputs_device(launch, layout_, lr_, store_, input_.status.data(),
                                      host_status_.extent(0) == 2 ? host_status_.data() : nullptr);
      }
    });
    graph_->instantiate();
  }
#endif

  // Whether every device-form kernel's team scratch fits level 0 (else the
  // step stays a sequence: a graph would hold level-1 scratch pools).
  // (The requests of portable::with_scratch in the phases.)
  bool scratch_fits_level0() const {
    using i32 = typename T::scratch_i32;
    using i64 = typename T::scratch_i64;
    const std::size_t E = static_cast<std::size_t>(layout_.E), R = static_cast<std::size_t>(layout_.R),
                      epn = static_cast<std::size_t>(layout_.epn);
    const std::size_t ac1 = static_cast<std::size_t>(portable::ac1_scratch_ints(input_.block_len));
    const std::size_t bytes[] = {i32::shmem_size(E + 1),       i32::shmem_size(ac1),
                                 i64::shmem_size(5 * R + epn), i32::shmem_size(2 * epn + 2 * E), i64::shmem_size(static_cast<std::size_t>(store_.tiles) + 1),
                                 i32::shmem_size(static_cast<std::size_t>(
                                     outputs_.on ? portable::c2_outputs_scratch_ints(layout_.R) : portable::kC2Scratch)),
                                 i32::shmem_size(static_cast<std::size_t>(
                                     portable::BlockOffsetsShape::of(layout_.E, input_.nblocks).items()))};
    for (const std::size_t b : bytes) {
      if (compat::scratch_level_for(b) != 0) return false;
    }
    return true;
  }

  Config config_;
  ChunkLayout layout_;
  world_type& world_;
  WorldClaim<world_type> claim_;
  ExecutionSpace exec_;
  bool needs_puts_ = true;
  bool in_process_ = false;  // every rank in this process, nothing put (see "In-process steps")
  bool ranks_in_order_ = true;  // local index l is world rank l
  portable::LocalRanks<ExecutionSpace> lr_;
  typename T::crefs::HostMirror h_routing_, h_tpe_;
  typename T::lvec::HostMirror h_routing_len_;
  typename T::crefs::HostMirror h_tokens_per_rank_;
  portable::InputScratch<ExecutionSpace> input_;
  portable::PublishScratch<ExecutionSpace> publish_;
  portable::PlanStore<ExecutionSpace> store_;
  portable::C2Outputs<ExecutionSpace> outputs_;  // on: C2 writes the outputs, no Phase D
  Kokkos::View<PutRun*, memory_space> counts_runs_;
  portable::RootScratch<ExecutionSpace> root_;
  plan_type plan_;
  std::vector<std::string> graph_kernels_;  // the step graph's kernels (empty: no graph)
#if MOONEP_KOKKOS_HAS_GRAPH
  std::optional<Kokkos::Experimental::Graph<ExecutionSpace>> graph_;
  // The step graph's status for the host ([0] validation, [1] pairs), in
  // memory the host and the execution space both reach (host-pinned on a
  // GPU): the graph's last kernel stores it, finish() reads it after the
  // fence, so that no copy back (a launch and a wait of its own on a GPU)
  // follows the graph. Empty where the space cannot reach such memory:
  // then the copy.
  using host_status_view = Kokkos::View<std::int64_t*, Kokkos::SharedHostPinnedSpace>;
  host_status_view host_status_;
#endif
};

// The interface of moonep/impl/planner_concept.hpp.
MOONEP_ASSERT_PLANNER(PortablePlanner<Kokkos::DefaultHostExecutionSpace>);

}  // namespace moonep::impl
