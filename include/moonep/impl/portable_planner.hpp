// moonep/impl/portable_planner.hpp — the portable path of moonep::Planner
// (moonep/planner.hpp): every rank plans its own step with Kokkos kernels
// over a World (moonep/world.hpp), exchanging only what the seed exchanges
// (docs/spec/PLANNING.md, "How the seed runs it"):
//
//   validate   host facts (rank arrays, lengths), then each local rank's
//              expert histogram (= tokens per expert) and checks;
//              world.all_ok() so that one bad rank stops them all before
//              anything touches the shared buffer.
//   Phase A    each rank clears its receive slots and puts its tokens per
//              expert into rank 0's chunk; Phase C1 (its stable counting
//              sort by expert) needs nothing else and runs here too.
//   barrier
//   Phase B    rank 0: steps 1-5 for every rank; sends each rank its tables.
//   barrier
//   Phase C2   each rank: destinations, dedup, and per-slot (src_info, dup
//              link) published into the destination ranks' chunks.
//   barrier
//   Phase D    each rank: its outputs (src_info, dup structures, tables).
//
// Runs on any Kokkos execution space. Construction allocates everything
// (the symmetric buffer, through the world, and all scratch); plan()
// allocates nothing on the success path. plan() reads a few scalars back to
// the host per step (the validation counts, rank 0's pair count, each
// rank's run count: the sizes the world's puts need).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moonep/config.hpp"
#include "moonep/error.hpp"
#include "moonep/impl/chunk_layout.hpp"
#include "moonep/impl/input_shapes.hpp"
#include "moonep/impl/kokkos_compat.hpp"
#include "moonep/impl/phase_b.hpp"
#include "moonep/impl/phase_c2.hpp"
#include "moonep/impl/phase_d.hpp"
#include "moonep/impl/phase_input.hpp"
#include "moonep/impl/rank_plan_view.hpp"
#include "moonep/reference.hpp"
#include "moonep/world.hpp"

namespace moonep::impl {

template <class ExecutionSpace>
class PortablePlanner {
 public:
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
      : config_(checked_config(config, world.size())), layout_(config_), world_(world), claim_(world), exec_(exec) {
    world_.allocate(layout_.total);
    plan_.config = config_;
    for (const int r : world_.local_ranks()) {
      const std::string tag = "moonep::portable::rank" + std::to_string(r) + ".";
      Local l;
      l.rank = r;
      l.input = portable::InputScratch<ExecutionSpace>(exec_, layout_.E, layout_.N, tag);
      l.publish = portable::PublishScratch<ExecutionSpace>(layout_, tag);
      l.slot_dstart = Kokkos::View<std::int32_t*, memory_space>(tag + "slot_dstart", layout_.NvS);
      l.tpe_run = Kokkos::View<PutRun*, memory_space>(tag + "tpe_run", 1);
      auto h = Kokkos::create_mirror_view(l.tpe_run);
      h(0) = PutRun{0, 0, layout_.tpe_in + static_cast<std::int64_t>(r) * layout_.E, 0, layout_.E};
      Kokkos::deep_copy(l.tpe_run, h);
      local_.push_back(l);
      plan_.ranks.emplace_back(config_, r);
      if (r == 0) root_ = portable::RootScratch<ExecutionSpace>(layout_);
    }
  }

  // One planner per world: it owns the world's buffer layout and scratch.
  PortablePlanner(const PortablePlanner&) = delete;
  PortablePlanner& operator=(const PortablePlanner&) = delete;

  const Config& config() const { return config_; }
  world_type& world() const { return world_; }
  const plan_type& last_plan() const { return plan_; }

  // Plans one step. routing[i] (and tokens_per_expert[i], when given, which
  // must match the routing) belong to world().local_ranks()[i]. Collective.
  // Bad input on any rank: InputError on every rank, the shared buffer
  // untouched, the planner still usable.
  const plan_type& plan(const std::vector<input_view>& routing,
                        const std::vector<input_view>* tokens_per_expert = nullptr) {
    compat::ProfilingRegion region("moonep::portable::plan");
    validate_all(routing, tokens_per_expert);
    phase_a(routing);
    world_.barrier();
    phase_b();
    world_.barrier();
    phase_c2(routing);
    world_.barrier();
    phase_d();
    compat::fence(exec_, "moonep::portable::plan_done");
    return plan_;
  }

 private:
  struct Local {
    int rank = -1;
    portable::InputScratch<ExecutionSpace> input;
    portable::PublishScratch<ExecutionSpace> publish;
    Kokkos::View<std::int32_t*, memory_space> slot_dstart;
    Kokkos::View<PutRun*, memory_space> tpe_run;
  };

  // The exact message of validate_rank_input, computed on the host (only
  // on the failure path, so the copies do not matter).
  std::string host_message(int rank, const input_view& topk, const input_view* tpe) const {
    const Kokkos::View<const std::int32_t*, Kokkos::HostSpace> h_topk =
        Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), topk);
    Kokkos::View<const std::int32_t*, Kokkos::HostSpace> h_tpe;
    if (tpe) h_tpe = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), *tpe);
    try {
      validate_rank_input(config_, rank, h_topk.data(), static_cast<std::int64_t>(h_topk.extent(0)),
                          tpe ? h_tpe.data() : nullptr, tpe ? static_cast<std::int64_t>(h_tpe.extent(0)) : 0);
    } catch (const InputError& e) {
      return e.what();
    }
    return "rank " + std::to_string(rank) + ": input rejected";
  }

  void validate_all(const std::vector<input_view>& routing, const std::vector<input_view>* tpe) {
    compat::ProfilingRegion region("moonep::portable::validate");
    std::string why = input_shape_error(config_, world_.local_ranks(), routing, tpe);
    for (std::size_t li = 0; why.empty() && li < local_.size(); ++li) {
      const input_view* t = tpe ? &(*tpe)[li] : nullptr;
      const std::int64_t problems = portable::histogram_and_check(
          exec_, local_[li].input, layout_.E, routing[li], t ? *t : input_view(), t != nullptr);
      if (problems > 0) why = host_message(local_[li].rank, routing[li], t);
    }
    if (!world_.all_ok(why.empty())) {
      throw InputError(why.empty() ? std::string("input rejected on another rank; nothing was planned") : why);
    }
  }

  void phase_a(const std::vector<input_view>& routing) {
    compat::ProfilingRegion region("moonep::portable::phaseA");
    const std::int64_t slots_at = layout_.slots, slots_len = 3 * layout_.NvS;
    for (std::size_t li = 0; li < local_.size(); ++li) {
      const Local& l = local_[li];
      portable::clear_slots(exec_, world_.local_chunk(l.rank), slots_at, slots_len);
      portable::stable_counting_sort(exec_, l.input, layout_.E, routing[li]);
      compat::fence(exec_, "moonep::portable::phaseA_before_put");
      world_.put_runs(l.rank, l.input.counts, l.tpe_run);
    }
  }

  void phase_b() {
    if (root_.alloc.extent(0) == 0) return;  // rank 0 is not planned here
    compat::ProfilingRegion region("moonep::portable::phaseB");
    const std::int64_t npairs = portable::plan_root(exec_, layout_, root_, world_.local_chunk(0));
    if (npairs > layout_.pair_capacity) {
      throw RuntimeError("moonep portable planner: " + std::to_string(npairs) +
                         " (expert, rank) pairs exceed the bound " + std::to_string(layout_.pair_capacity) +
                         " (internal error)");
    }
    compat::fence(exec_, "moonep::portable::phaseB_before_broadcast");
    portable::broadcast(exec_, layout_, root_, world_, npairs);
  }

  typename portable::Types<ExecutionSpace>::ivec shared_tables(int rank) const {
    return world_.directly_addressable() ? world_.chunk(0) : world_.local_chunk(rank);
  }

  void phase_c2(const std::vector<input_view>& routing) {
    compat::ProfilingRegion region("moonep::portable::phaseC2");
    for (std::size_t li = 0; li < local_.size(); ++li) {
      const Local& l = local_[li];
      auto own = world_.local_chunk(l.rank);
      auto shared = shared_tables(l.rank);
      portable::destinations_and_dedup(exec_, layout_, l.rank, l.input, l.publish, routing[li], shared,
                                             own, plan_.ranks[li].dst);
      const std::int64_t nruns = portable::publication_runs(exec_, layout_, l.input, l.publish, shared, own);
      compat::fence(exec_, "moonep::portable::phaseC2_before_put");
      world_.put_runs(l.rank, l.publish.staging,
                      Kokkos::subview(l.publish.runs, Kokkos::make_pair(std::int64_t(0), nruns)));
    }
  }

  void phase_d() {
    compat::ProfilingRegion region("moonep::portable::phaseD");
    for (std::size_t li = 0; li < local_.size(); ++li) {
      const Local& l = local_[li];
      portable::rank_outputs(exec_, layout_, l.rank, shared_tables(l.rank), world_.local_chunk(l.rank),
                                   l.slot_dstart, plan_.ranks[li]);
    }
  }

  Config config_;
  ChunkLayout layout_;
  world_type& world_;
  WorldClaim<world_type> claim_;
  ExecutionSpace exec_;
  std::vector<Local> local_;
  portable::RootScratch<ExecutionSpace> root_;
  plan_type plan_;
};

}  // namespace moonep::impl
