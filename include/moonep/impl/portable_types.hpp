// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/impl/portable_types.hpp — shorthands shared by the portable
// planner's phases (all templates on the Kokkos execution space), and the
// one description of "the process's local ranks" every phase kernel runs
// over.
//
// Every phase plans all local ranks in one policy: index spaces are
// local-rank major (local index l = 0..L-1, L = world.local_ranks().size()),
// per-rank scratch is one allocation with a rank dimension, and what a
// kernel needs of rank l's chunks, inputs and outputs it finds through the
// tables of LocalRanks (Views of pointers: a kernel cannot hold a View of
// Views).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "moonep/impl/kokkos_compat.hpp"

namespace moonep::impl::portable {

// A pointer stored in a View (one entry per rank).
template <class T>
struct Ref {
  T* at;
};

template <class ExecutionSpace>
struct Types {
  using exec = ExecutionSpace;
  using mem = typename ExecutionSpace::memory_space;
  using ivec = Kokkos::View<std::int32_t*, mem>;
  using civec = Kokkos::View<const std::int32_t*, mem>;
  using lvec = Kokkos::View<std::int64_t*, mem>;
  using imat = Kokkos::View<std::int32_t**, Kokkos::LayoutRight, mem>;
  using refs = Kokkos::View<Ref<std::int32_t>*, mem>;
  using crefs = Kokkos::View<Ref<const std::int32_t>*, mem>;
  // Every kernel is marked light weight: on Kokkos::Cuda its functor then
  // travels as kernel arguments (up to 4 KiB). Without the hint, a functor
  // of 512 bytes or more (most of these: each carries LocalRanks' views) is
  // copied to constant memory, and that launch first waits on the host for
  // the previous constant-memory kernel to finish: a host round trip per
  // launch. Host execution spaces ignore the hint.
  using light = Kokkos::Experimental::WorkItemProperty::HintLightWeight_t;
  using range = Kokkos::RangePolicy<ExecutionSpace, light>;
  using team_policy = Kokkos::TeamPolicy<ExecutionSpace, light>;
  using member = typename team_policy::member_type;
  using scratch_space = typename ExecutionSpace::scratch_memory_space;
  using scratch_i64 = Kokkos::View<std::int64_t*, scratch_space, Kokkos::MemoryUnmanaged>;
  using scratch_i32 = Kokkos::View<std::int32_t*, scratch_space, Kokkos::MemoryUnmanaged>;

  // Serial, OpenMP, Threads: the execution space runs on the host.
  static constexpr bool host = Kokkos::SpaceAccessibility<ExecutionSpace, Kokkos::HostSpace>::accessible;
};

// How the kernels that have two forms walk their data, chosen at compile
// time from the execution space (as Kokkos Kernels picks its
// specializations): the host form (few, fat threads walking long ranges
// serially, which keeps caches warm) on an execution space that runs on
// the host, the device form (many threads, short blocks, teams) elsewhere.
// Both give the same plan. A planner may name the form it wants
// (PortablePlanner<Exec, DeviceForm>: the tests run the device form on the
// host spaces that way, so its kernels are checked without a GPU); nothing
// is read at run time.
struct HostForm {};
struct DeviceForm {};

template <class ExecutionSpace>
struct default_phase_form {
  using type = typename std::conditional<Types<ExecutionSpace>::host, HostForm, DeviceForm>::type;
};
template <class ExecutionSpace>
using default_phase_form_t = typename default_phase_form<ExecutionSpace>::type;

template <class Form>
struct is_host_form : std::is_same<Form, HostForm> {};

// How an in-process step (every rank here, nothing put; PortablePlanner)
// is submitted, also chosen at compile time: StepGraph, one
// Kokkos::Experimental::Graph of the device form's kernels built at
// construction and submitted once per step (on Kokkos::Cuda one
// cudaGraphLaunch, no host work between the kernels), where this Kokkos has
// graphs MoonEP can use (MOONEP_KOKKOS_HAS_GRAPH: 4.5 on); StepSequence, the
// kernels launched one by one, for the host form (a host space gains
// nothing from a graph: Kokkos runs its nodes one by one at submit, after a
// fence of its own) and elsewhere. Steps over worlds with barriers are
// always a sequence. The device form on a host space takes the graph too,
// so that the tests build and run it without a GPU.
struct StepSequence {};
struct StepGraph {};

template <class ExecutionSpace, class Form>
struct default_step_submission {
  using type = typename std::conditional<MOONEP_KOKKOS_HAS_GRAPH && !is_host_form<Form>::value, StepGraph,
                                         StepSequence>::type;
};
template <class ExecutionSpace, class Form>
using default_step_submission_t = typename default_step_submission<ExecutionSpace, Form>::type;

// Where a phase's kernels go: launched on the execution space at once, or,
// while a step graph is built, appended to it (each node after the last
// one: the graph is the same chain as the sequence). Its labels are kept
// then, since Kokkos Tools do not see a graph's kernels.
template <class Exec>
class Launcher {
 public:
  explicit Launcher(const Exec& exec) : exec_(exec) {}
#if MOONEP_KOKKOS_HAS_GRAPH
  using node_type = Kokkos::Experimental::GraphNodeRef<Exec>;
  Launcher(const Exec& exec, node_type& last, std::vector<std::string>& labels)
      : exec_(exec), last_(&last), labels_(&labels) {}
#endif

  const Exec& exec() const { return exec_; }

  template <class Policy, class Functor>
  void parallel_for(const std::string& label, const Policy& policy, const Functor& functor) const {
#if MOONEP_KOKKOS_HAS_GRAPH
    if (last_) {
      *last_ = last_->then_parallel_for(label, policy, functor);
      labels_->push_back(label);
      return;
    }
#endif
    Kokkos::parallel_for(label, policy, functor);
  }

 private:
  Exec exec_;
#if MOONEP_KOKKOS_HAS_GRAPH
  node_type* last_ = nullptr;
  std::vector<std::string>* labels_ = nullptr;
#endif
};

// Whether the calling team is the last of `n` teams to get here, for a
// kernel whose last team finishes what needs all of them (no team waits
// for another: no spin, no forward-progress assumption). Every thread's
// stores so far are released (a fence each) before the team counts itself
// once on `*counter`; the team that makes it n resets it to 0 for the next
// step and, with every one of its threads, fences again, so that it sees
// the other teams' stores (read them through volatile loads: not from a
// stale cache line). The whole team gets the answer (a broadcast), so it
// may return or go on together. What must stay true: every one of the n
// teams calls it once per step, or none does (the counter is back at 0
// after every step).
template <class Member>
KOKKOS_INLINE_FUNCTION bool last_team_to_arrive(const Member& team, std::int32_t* counter, int n) {
  Kokkos::memory_fence();
  team.team_barrier();
  int last = 0;
  Kokkos::single(
      Kokkos::PerTeam(team),
      [&](int& is_last) {
        is_last = Kokkos::atomic_fetch_add(counter, 1) == n - 1 ? 1 : 0;
        if (is_last) *counter = 0;
        Kokkos::memory_fence();
      },
      last);
  if (last) Kokkos::memory_fence();
  return last != 0;
}

// The local ranks of one planner, as kernels see them. Chunk pointers are
// fixed at construction (the planner allocates the world's buffer once);
// the input tables are refreshed by plan() when the caller's views move.
template <class Exec>
struct LocalRanks {
  using T = Types<Exec>;
  int count = 0;                             // L
  Kokkos::View<int*, typename T::mem> rank;  // [L] world rank of local index l
  typename T::refs chunk;                    // [L] local_chunk(rank[l]), its start
  typename T::refs shared_tables;            // [L] the shared tables region rank l reads
  // [R] by world rank d: the start of d's chunk when this process stores
  // into it in place (d local, world directly addressable), else null:
  // what goes to d then travels through put_runs.
  typename T::refs direct_chunk;
  typename T::crefs routing;                 // [L] routing[l].data()
  typename T::crefs tpe;                     // [L] tokens_per_expert[l].data(), or null
  typename T::lvec routing_len;              // [L] routing[l].extent(0)
  // [1] the step's tokens_per_rank (R counts by world rank, in the
  // execution space's memory), or null for a full step
  // (docs/spec/planning.md "Ragged steps"). Only the local ranks' counts
  // are read. In a table, as the input pointers: a step graph built once
  // reads every step's inputs from the device.
  typename T::crefs tokens_per_rank;
  int S = 1, K = 1;
  // Whether every local chunk's receive slots are four int32 (the device
  // form's ChunkLayout::slot_ints) at a 16-byte boundary, so that Phase D
  // loads a slot as one Int32x4 (alignment.hpp).
  bool slot_quads = false;
  // The step's validation result on the device (problems found, > 0: bad
  // input), or null. Every kernel after validation returns at once when it
  // is set, so that bad input leaves the world's buffer and the plan
  // untouched although the host reads the result only after the step
  // (PortablePlanner: in-process worlds).
  const std::int64_t* stop = nullptr;
  KOKKOS_INLINE_FUNCTION bool stopped() const { return stop && *stop > 0; }

  // s_l, the tokens local rank l holds this step: its count clamped to
  // 0..S and to what its routing view holds, so that no kernel reads past
  // the view whatever the count (a bad count is a validation problem,
  // bad_tokens).
  KOKKOS_INLINE_FUNCTION std::int64_t tokens(std::int64_t l) const {
    const std::int32_t* counts = tokens_per_rank(0).at;
    if (!counts) return S;
    std::int64_t s = counts[rank(l)];
    s = s < 0 ? 0 : s > S ? S : s;
    const std::int64_t held = routing_len(l) / K;
    return s < held ? s : held;
  }
  // N_l = s_l*K, the entries of rank l this step.
  KOKKOS_INLINE_FUNCTION std::int64_t entries(std::int64_t l) const { return tokens(l) * K; }
  // Whether rank l's count is outside 0..S or beyond its routing view.
  KOKKOS_INLINE_FUNCTION bool bad_tokens(std::int64_t l) const {
    const std::int32_t* counts = tokens_per_rank(0).at;
    if (!counts) return false;
    const std::int64_t s = counts[rank(l)];
    return s < 0 || s > S || s * K > routing_len(l);
  }
};

// Round count up to a multiple of tp (0 stays 0).
KOKKOS_INLINE_FUNCTION std::int64_t padded_size(std::int64_t count, std::int64_t tp) {
  return count > 0 ? (count + tp - 1) / tp * tp : 0;
}

// Splits a flat index i = q*d + r (local rank major) into q and r without
// an integer division, which costs tens of cycles per element on a CPU in
// the hot loops and is emulated on GPUs: a floating-point estimate of q,
// corrected by one. Exact for 0 <= i < 2^52.
struct IndexSplit {
  std::int64_t d = 1;
  double inv = 1.0;
  IndexSplit() = default;
  explicit IndexSplit(std::int64_t divisor) : d(divisor), inv(1.0 / static_cast<double>(divisor)) {}
  KOKKOS_INLINE_FUNCTION std::int64_t quotient(std::int64_t i) const {
    std::int64_t q = static_cast<std::int64_t>(static_cast<double>(i) * inv);
    if (q * d > i) {
      --q;
    } else if ((q + 1) * d <= i) {
      ++q;
    }
    return q;
  }
};

// Team scratch for `n` values of ScratchView; picks level 0 while small.
template <class ScratchView, class Policy>
Policy with_scratch(Policy policy, std::int64_t n, int* level) {
  const std::size_t bytes = ScratchView::shmem_size(static_cast<std::size_t>(n));
  *level = compat::scratch_level_for(bytes);
  return policy.set_scratch_size(*level, Kokkos::PerTeam(bytes));
}

// The team policy of a kernel that sizes its own teams (Phase B's): on a
// device space `threads` threads per team, as threads / v team threads of
// v vector lanes (v = `vector` clamped to the space's widest; 32 on
// Kokkos::Cuda: a team thread is then a warp, and its vector loops are
// shuffles without a team barrier), so that a TeamVectorRange spans the
// whole block; on a host space Kokkos::AUTO as every other kernel (vector
// loops are serial loops there).
template <class Exec>
typename Types<Exec>::team_policy sized_team_policy(const Exec& exec, int league, int threads, int vector) {
  using policy = typename Types<Exec>::team_policy;
  if constexpr (Types<Exec>::host) {
    (void)threads;
    (void)vector;
    return policy(exec, league, Kokkos::AUTO);
  } else {
    const int v = vector < policy::vector_length_max() ? vector : policy::vector_length_max();
    return policy(exec, league, threads / v, v);
  }
}

// The team policy of a kernel whose team scans `items` items (Phase B's
// layout and pairs), with team scratch of `scratch_n` values of
// ScratchView: on a device space one thread per item (vector length 1, a
// multiple of 32 threads, 1024 at most) so that the scan runs in one round
// (a Kokkos team scan over more items than threads repeats its team scan
// and its broadcast per round), clamped to what the kernel's registers and
// scratch allow (team_size_max of `functor`); on a host space Kokkos::AUTO.
template <class ScratchView, class Exec, class Functor>
typename Types<Exec>::team_policy one_round_team_policy(const Exec& exec, int league, std::int64_t items,
                                                        std::int64_t scratch_n, int* level, const Functor& functor) {
  using policy = typename Types<Exec>::team_policy;
  if constexpr (Types<Exec>::host) {
    (void)items;
    (void)functor;
    return with_scratch<ScratchView>(policy(exec, league, Kokkos::AUTO), scratch_n, level);
  } else {
    const policy probe = with_scratch<ScratchView>(policy(exec, league, 1), scratch_n, level);
    const std::int64_t most = probe.team_size_max(functor, Kokkos::ParallelForTag());
    std::int64_t threads = items < 1024 ? (items + 31) / 32 * 32 : 1024;
    if (threads < 32) threads = 32;
    if (threads > most) threads = most >= 32 ? most / 32 * 32 : most;
    return with_scratch<ScratchView>(policy(exec, league, static_cast<int>(threads)), scratch_n, level);
  }
}

}  // namespace moonep::impl::portable
