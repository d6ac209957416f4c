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
  // Validates (InputError on bad input, state unchanged) and stages the input
  // of a full step (every rank holds S tokens).
  virtual void load(const Routing& routing, const TokensPerExpert* tokens_per_expert = nullptr) = 0;
  // The same for a step that may be ragged (docs/spec/planning.md "Ragged
  // steps"): tokens_per_rank holds R counts s_r (null: every rank S) and
  // routing[r] s_r*K ids. The reference and portable backends plan ragged
  // steps; this default, which the cuda backend keeps, validates the input
  // (InputError) and then refuses a ragged step with RuntimeError ("the cuda
  // backend does not plan ragged steps yet; use --backend portable"), state
  // unchanged; counts of S everywhere are a full step and go to load above.
  virtual void load(const Routing& routing, const TokensPerExpert* tokens_per_expert,
                    const TokensPerRank* tokens_per_rank);
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
