// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Backend registry: names, availability, and the HostPlanner factory. Each
// backend contributes a make_*_host_planner function from its own directory;
// the ones not compiled in are reported as unavailable with the reason.
#include <optional>
#include <sstream>
#include <utility>

#include "moonep/backend.hpp"
#include "moonep/error.hpp"
#include "moonep/moonep_config.hpp"
#include "moonep/reference.hpp"
#include "backend_factories.hpp"

namespace moonep {
namespace {

class ReferenceHostPlanner final : public HostPlanner {
 public:
  explicit ReferenceHostPlanner(const Config& c) : config_(c) { validate(c); }
  Backend backend() const override { return Backend::reference; }
  using HostPlanner::load;
  void load(const Routing& routing, const TokensPerExpert* tpe, const TokensPerRank* tokens) override {
    validate_problem(config_, routing, tpe, tokens);
    routing_ = routing;
    has_tpe_ = tpe != nullptr;
    if (tpe) tpe_ = *tpe;
    tokens_.reset();
    if (tokens) tokens_ = *tokens;
  }
  void step() override {
    plan_ = plan_reference(config_, routing_, has_tpe_ ? &tpe_ : nullptr, tokens_ ? &*tokens_ : nullptr);
  }
  HostPlan result() const override { return plan_; }

 private:
  Config config_;
  Routing routing_;
  TokensPerExpert tpe_;
  std::optional<TokensPerRank> tokens_;
  bool has_tpe_ = false;
  HostPlan plan_;
};

}  // namespace

const char* to_string(Backend b) {
  switch (b) {
    case Backend::reference: return "reference";
    case Backend::portable: return "portable";
    case Backend::cuda: return "cuda";
  }
  return "unknown";
}

Backend backend_from_string(const std::string& name) {
  if (name == "reference") return Backend::reference;
  if (name == "portable") return Backend::portable;
  if (name == "cuda") return Backend::cuda;
  throw InputError("unknown backend '" + name + "' (expected reference, portable or cuda)");
}

bool backend_available(Backend b, std::string* why_not) {
  std::string why;
  bool ok = true;
  switch (b) {
    case Backend::reference: break;
    case Backend::portable: ok = impl::portable_backend_available(&why); break;
    case Backend::cuda: ok = impl::cuda_backend_available(&why); break;
  }
  if (why_not) *why_not = why;
  return ok;
}

Backend default_backend() {
  if (backend_available(Backend::cuda)) return Backend::cuda;
  if (backend_available(Backend::portable)) return Backend::portable;
  return Backend::reference;
}

std::unique_ptr<HostPlanner> make_host_planner(Backend b, const Config& c) {
  validate(c);
  std::string why;
  if (!backend_available(b, &why)) {
    throw RuntimeError(std::string("backend ") + to_string(b) + " is not available: " + why);
  }
  switch (b) {
    case Backend::reference: return std::make_unique<ReferenceHostPlanner>(c);
    case Backend::portable: return impl::make_portable_host_planner(c);
    case Backend::cuda: return impl::make_cuda_host_planner(c);
  }
  throw RuntimeError("unknown backend");
}

HostPlan plan_host(Backend b, const Config& c, const Routing& routing, const TokensPerExpert* tpe,
                   const TokensPerRank* tokens_per_rank) {
  auto planner = make_host_planner(b, c);
  planner->load(routing, tpe, tokens_per_rank);
  planner->step();
  return planner->result();
}

}  // namespace moonep
