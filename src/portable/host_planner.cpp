// The portable backend's HostPlanner: every rank of the problem planned in
// this process by the portable phases on the default execution space,
// moonep::Planner<Kokkos::DefaultExecutionSpace, PortablePhases>, over an
// InProcessWorld (on Kokkos::Cuda too: the cuda backend is the CUDA
// specialization's HostPlanner). load() validates on the host and copies the routing into
// views allocated once; step() is the planner alone; result() copies out.
#include <memory>
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
  }

  Backend backend() const override { return Backend::portable; }
  std::string details() const override { return std::string("Kokkos ") + Exec::name(); }

  void load(const Routing& routing, const TokensPerExpert* tpe) override {
    validate_problem(config_, routing, tpe);  // throws before anything changes
    for (int r = 0; r < config_.ranks; ++r) {
      Kokkos::deep_copy(routing_[r], HostInput(routing[r].data(), routing[r].size()));
      if (tpe) Kokkos::deep_copy(tpe_[r], HostInput((*tpe)[r].data(), (*tpe)[r].size()));
    }
    has_tpe_ = tpe != nullptr;
    loaded_ = true;
  }

  void step() override {
    if (!loaded_) throw RuntimeError("portable HostPlanner: step() before load()");
    planner_.plan(routing_in_, has_tpe_ ? &tpe_in_ : nullptr);
    planned_ = true;
  }

  HostPlan result() const override {
    if (!planned_) throw RuntimeError("portable HostPlanner: result() before step()");
    HostPlan out;
    out.config = config_;
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
