// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The portable backend's HostPlanner: every rank of the problem planned in
// this process by the portable phases on the default execution space,
// moonep::Planner<Kokkos::DefaultExecutionSpace, PortablePhases>, over an
// InProcessWorld (on Kokkos::Cuda too: the cuda backend is the CUDA
// specialization's HostPlanner). load() validates on the host and copies the routing into
// views allocated once (S*K ids per rank, of which a ragged step fills s_r*K,
// and R token counts); step() is the planner alone; result() copies out.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/backend_factories.hpp"
#include "moonep/error.hpp"
#include "moonep/planner.hpp"
#include "moonep/reference.hpp"
#include "moonep/world.hpp"

namespace moonep::impl {
namespace {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;
using PortablePlanner = Planner<Exec, PortablePhases>;
using InputView = Kokkos::View<std::int32_t*, Mem>;
using HostInput = Kokkos::View<const std::int32_t*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;

class PortableHostPlanner final : public HostPlanner {
 public:
  explicit PortableHostPlanner(const Config& c) : config_(c), world_(c.ranks), planner_(c, world_) {
    for (int r = 0; r < c.ranks; ++r) {
      const std::string tag = "moonep::portable_host.rank" + std::to_string(r) + ".";
      routing_.emplace_back(Kokkos::view_alloc(Kokkos::WithoutInitializing, tag + "routing"), c.entries());
      tpe_.emplace_back(Kokkos::view_alloc(Kokkos::WithoutInitializing, tag + "tpe"), c.experts);
      routing_in_.push_back(routing_.back());
      tpe_in_.push_back(tpe_.back());
    }
    tokens_ = InputView(Kokkos::view_alloc(Kokkos::WithoutInitializing, "moonep::portable_host.tokens_per_rank"),
                        c.ranks);
    tokens_in_ = tokens_;
  }

  Backend backend() const override { return Backend::portable; }
  std::string details() const override { return std::string("Kokkos ") + Exec::name(); }

  using HostPlanner::load;
  void load(const Routing& routing, const TokensPerExpert* tpe, const TokensPerRank* tokens) override {
    validate_problem(config_, routing, tpe, tokens);  // throws before anything changes
    for (int r = 0; r < config_.ranks; ++r) {
      const auto filled = Kokkos::make_pair(std::size_t(0), routing[r].size());
      Kokkos::deep_copy(Kokkos::subview(routing_[r], filled), HostInput(routing[r].data(), routing[r].size()));
      if (tpe) Kokkos::deep_copy(tpe_[r], HostInput((*tpe)[r].data(), (*tpe)[r].size()));
    }
    if (tokens) Kokkos::deep_copy(tokens_, HostInput(tokens->data(), tokens->size()));
    has_tpe_ = tpe != nullptr;
    tokens_given_.reset();
    if (tokens) tokens_given_ = *tokens;
    loaded_ = true;
  }

  void step() override {
    if (!loaded_) throw RuntimeError("portable HostPlanner: step() before load()");
    planner_.plan(routing_in_, has_tpe_ ? &tpe_in_ : nullptr, tokens_given_ ? &tokens_in_ : nullptr);
    planned_ = true;
    planned_tokens_ = tokens_given_;
  }

  HostPlan result() const override {
    if (!planned_) throw RuntimeError("portable HostPlanner: result() before step()");
    HostPlan out;
    out.config = config_;
    out.tokens_per_rank = planned_tokens_;
    const auto& plan = planner_.last_plan();
    for (std::size_t i = 0; i < plan.ranks.size(); ++i) out.ranks.push_back(plan.to_host(i));
    return out;
  }

 private:
  Config config_;
  InProcessWorld<Mem> world_;
  PortablePlanner planner_;
  std::vector<InputView> routing_, tpe_;
  std::vector<PortablePlanner::input_view> routing_in_, tpe_in_;
  InputView tokens_;
  PortablePlanner::input_view tokens_in_;
  std::optional<TokensPerRank> tokens_given_, planned_tokens_;
  bool has_tpe_ = false, loaded_ = false, planned_ = false;
};

}  // namespace

// Always available when compiled in: it runs on whatever Kokkos backend
// this build has. Kokkos must be initialized before a planner is made, a
// precondition of use rather than of availability (moonep-plan decides on
// a backend before it starts Kokkos).
bool portable_backend_available(std::string* why_not) {
  if (why_not) why_not->clear();
  return true;
}

// Without Kokkos running, the Planner member's constructor throws
// RuntimeError (moonep/impl/input_shapes.hpp, checked_config) before any
// view is made.
std::unique_ptr<HostPlanner> make_portable_host_planner(const Config& config) {
  return std::make_unique<PortableHostPlanner>(config);
}

}  // namespace moonep::impl
