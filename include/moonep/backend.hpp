// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/backend.hpp — one interface over every planner implementation, for
// code that holds its problem in host memory: moonep-plan, the tests, the
// perf_tests. Library users on a device use the backend's own API
// (moonep/planner.hpp, moonep/cuda_planner.hpp) and skip the host copies.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "moonep/host_plan.hpp"

namespace moonep {

enum class Backend { reference, portable, cuda };

const char* to_string(Backend b);
// Throws InputError for an unknown name ("reference", "portable", "cuda").
Backend backend_from_string(const std::string& name);
// Compiled in and usable here (cuda also needs a visible GPU).
bool backend_available(Backend b, std::string* why_not = nullptr);
// The fastest available backend: cuda, else portable.
Backend default_backend();

// Plans a problem held in host memory, step after step, with one backend.
// Construction allocates everything; load/step/result allocate nothing
// beyond result's copy. Every rank is planned in this process (virtual ranks).
class HostPlanner {
 public:
  virtual ~HostPlanner() = default;
  virtual Backend backend() const = 0;
  // Validates (InputError on bad input, state unchanged) and stages the
  // input of a step that may be ragged (docs/spec/planning.md "Ragged
  // steps"): tokens_per_rank holds R counts s_r (null: every rank S) and
  // routing[r] s_r*K ids. Every backend plans ragged steps; the plan
  // (result()) then carries the counts and each dst its s_r*K entries.
  virtual void load(const Routing& routing, const TokensPerExpert* tokens_per_expert,
                    const TokensPerRank* tokens_per_rank) = 0;
  // The same for a full step (every rank holds S tokens).
  void load(const Routing& routing, const TokensPerExpert* tokens_per_expert = nullptr) {
    load(routing, tokens_per_expert, nullptr);
  }
  // Plans the staged input: the part worth timing.
  virtual void step() = 0;
  // The plan of the last step, copied to host memory.
  virtual HostPlan result() const = 0;
  // How this backend runs a step, for summaries (e.g. the Kokkos execution
  // space, or the CUDA kernel and its launch shape); empty if nothing.
  virtual std::string details() const { return {}; }
};

// Throws InputError for a bad configuration, RuntimeError if the backend is
// not available here (with the reason).
std::unique_ptr<HostPlanner> make_host_planner(Backend backend, const Config& config);

// Convenience: load + step + result.
HostPlan plan_host(Backend backend, const Config& config, const Routing& routing,
                   const TokensPerExpert* tokens_per_expert = nullptr,
                   const TokensPerRank* tokens_per_rank = nullptr);

}  // namespace moonep
