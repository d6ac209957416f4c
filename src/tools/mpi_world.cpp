// --world mpi: moonep-plan as one MPI process per rank,
//   mpirun -np R moonep-plan --world mpi --input problem.json --output plan.json
// Every process reads the problem, plans routing[rank] with the portable
// Planner over an MPI world (moonep/mpi_world.hpp), and rank 0 gathers every
// rank's plan and writes the same plan file as the in-process run.
//
// Failures: every stage ends with all processes agreeing on success, so one
// process's bad input (or unreadable file) makes every process exit non-zero
// and none waits forever in a collective. Rank 0 prints the one error line
// (the first failing rank's message, forwarded), the others exit silently
// with the same status, and run_mpi_world returns it rather than throwing. Nothing is written unless every rank planned.
#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "error_line.hpp"
#include "kokkos_session.hpp"
#include "moonep/error.hpp"
#include "moonep/io.hpp"
#include "moonep/mpi_world.hpp"
#include "moonep/planner.hpp"
#include "plan_summary.hpp"
#include "plan_worlds.hpp"
#include "problem_source.hpp"

namespace moonep::tools {
namespace {

// MPI for the lifetime of the object (moonep-plan may also be run as a
// singleton without mpirun: one process, one rank).
class MpiSession {
 public:
  MpiSession() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) throw RuntimeError("MPI_Init failed");
      owner_ = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiSession() {
    if (owner_) MPI_Finalize();
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  bool owner_ = false;
  int rank_ = 0, size_ = 1;
};

// How many processes of MPI_COMM_WORLD share this node (and its memory).
int processes_on_this_node() {
  MPI_Comm node = MPI_COMM_NULL;
  int n = 1;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_size(node, &n);
    MPI_Comm_free(&node);
  }
  return n;
}

// Exit status main() gives each kind of failure: 2 bad usage or input,
// 1 anything else.
int status_of(const std::exception& e) {
  if (dynamic_cast<const InputError*>(&e) || dynamic_cast<const UsageError*>(&e)) return 2;
  return 1;
}

// Runs `stage` on every process and agrees on its outcome (collective).
// Returns 0 when every process succeeded. Otherwise every process returns
// the worst status (2 bad usage or input, 1 other failures) and rank 0 has
// printed the first failing rank's error as the one line on stderr.
int agreed_stage(const std::function<void()>& stage, int rank, int size) {
  int status = 0;
  std::string message;
  try {
    stage();
  } catch (const std::exception& e) {
    status = status_of(e);
    message = e.what();
  } catch (...) {
    status = 1;
    message = "unknown failure";
  }
  int mine[2] = {status, status != 0 ? rank : size};
  int worst = 0, first = size;
  MPI_Allreduce(&mine[0], &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&mine[1], &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (worst == 0) return 0;
  // The first failing rank's message goes to rank 0.
  if (first != 0) {
    if (rank == first) {
      MPI_Send(message.data(), static_cast<int>(message.size()), MPI_CHAR, 0, 0, MPI_COMM_WORLD);
    } else if (rank == 0) {
      MPI_Status st;
      int len = 0;
      MPI_Probe(first, 0, MPI_COMM_WORLD, &st);
      MPI_Get_count(&st, MPI_CHAR, &len);
      message.assign(static_cast<std::size_t>(len), '\0');
      MPI_Recv(&message[0], len, MPI_CHAR, first, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  }
  // Rank 0 prints the line itself, before anybody exits: mpirun kills the
  // remaining processes as soon as one exits non-zero, which would lose a
  // line printed later by main(). Same format as main()'s.
  if (rank == 0) print_error_line(message);
  MPI_Barrier(MPI_COMM_WORLD);
  return worst;
}

// The world kind: --mpi-world, else the MOONEP_MPI_WORLD environment
// variable (the CLI tests use it), else auto.
MpiWorldKind world_kind(const PlanOptions& o) {
  std::string name = o.mpi_world;
  if (name.empty()) {
    const char* env = std::getenv("MOONEP_MPI_WORLD");
    name = env && *env ? env : "auto";
  }
  return mpi_world_kind_from_string(name);
}

// The flat arrays of a rank's plan, in the order they travel.
constexpr int kFields = 9;
std::array<std::vector<std::int32_t>*, kFields> fields(HostRankPlan& p) {
  return {&p.dst,        &p.cu_seqlens, &p.zero_fill_ranges, &p.experts_to_copy, &p.remote_stats,
          &p.src_info,   &p.dup_groups, &p.dup_loffs,        &p.dup_counts};
}

// Collective: every rank's plan, on rank 0 (in rank order); the others get
// an empty HostPlan. One MPI_Gather of the array sizes, one MPI_Gatherv of
// the concatenated arrays.
HostPlan gather_plans(const Config& config, HostRankPlan mine, int rank, int size) {
  std::array<int, kFields> sizes{};
  std::vector<std::int32_t> flat;
  {
    auto f = fields(mine);
    std::size_t total = 0;
    for (auto* v : f) total += v->size();
    flat.reserve(total);
    for (int i = 0; i < kFields; ++i) {
      sizes[i] = static_cast<int>(f[i]->size());
      flat.insert(flat.end(), f[i]->begin(), f[i]->end());
    }
  }
  // MPI_Gatherv counts and displacements are int: refuse (on every rank,
  // so nobody is left waiting) a plan too large to gather in one call.
  long long my_total = static_cast<long long>(flat.size()), all_total = 0;
  MPI_Allreduce(&my_total, &all_total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (all_total > INT_MAX) {
    throw RuntimeError("the plans of all ranks hold " + std::to_string(all_total) +
                       " values, too many to gather on rank 0 (at most " + std::to_string(INT_MAX) + ")");
  }
  std::vector<int> all_sizes(rank == 0 ? static_cast<std::size_t>(kFields) * size : 0);
  MPI_Gather(sizes.data(), kFields, MPI_INT, all_sizes.data(), kFields, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> counts(rank == 0 ? size : 0), displs(rank == 0 ? size : 0);
  std::vector<std::int32_t> all(rank == 0 ? static_cast<std::size_t>(all_total) : 0);
  if (rank == 0) {
    int at = 0;
    for (int r = 0; r < size; ++r) {
      int n = 0;
      for (int i = 0; i < kFields; ++i) n += all_sizes[static_cast<std::size_t>(r) * kFields + i];
      counts[r] = n;
      displs[r] = at;
      at += n;
    }
  }
  MPI_Gatherv(flat.data(), static_cast<int>(flat.size()), MPI_INT32_T, all.data(), counts.data(), displs.data(),
              MPI_INT32_T, 0, MPI_COMM_WORLD);
  HostPlan plan;
  plan.config = config;
  if (rank != 0) return plan;
  plan.ranks.resize(static_cast<std::size_t>(size));
  std::size_t at = 0;
  for (int r = 0; r < size; ++r) {
    auto f = fields(plan.ranks[r]);
    for (int i = 0; i < kFields; ++i) {
      const std::size_t n = static_cast<std::size_t>(all_sizes[static_cast<std::size_t>(r) * kFields + i]);
      f[i]->assign(all.begin() + static_cast<std::ptrdiff_t>(at), all.begin() + static_cast<std::ptrdiff_t>(at + n));
      at += n;
    }
  }
  return plan;
}

}  // namespace

int run_mpi_world(const PlanOptions& o, const char* program) {
  MpiSession mpi;
  const int rank = mpi.rank(), size = mpi.size();

  // Stage 1: options and the problem, on every process (each reads the
  // file itself); the process count must be the problem's rank count.
  Problem problem;
  MpiWorldKind kind = MpiWorldKind::automatic;
  if (int s = agreed_stage(
          [&] {
            if (o.input == "-") {
              throw UsageError("--world mpi reads the problem in every process; give a file, not '-' (standard input)");
            }
            if (o.backend && *o.backend != Backend::portable) {
              throw UsageError(std::string("--world mpi plans with the portable backend, not ") + to_string(*o.backend));
            }
            kind = world_kind(o);
            RunShape run;
            run.backend = Backend::portable;
            run.mpi = true;
            run.gathers_plans = rank == 0;
            run.writes_plan = !o.output.empty();
            run.writes_problem = !o.save_problem.empty();
            problem = load_problem(o, run, memory_limit_of(o, processes_on_this_node()));
            if (problem.config.ranks != size) {
              throw InputError("the problem has ranks = " + std::to_string(problem.config.ranks) + " but " +
                               std::to_string(size) + " MPI process" + (size == 1 ? " was" : "es were") +
                               " started; run mpirun -np " + std::to_string(problem.config.ranks));
            }
          },
          rank, size)) {
    return s;
  }

  // Stage 2: plan this process's rank, o.steps times. The time of a step is
  // the slowest rank's (all start together after a barrier).
  HostRankPlan mine;
  std::vector<double> seconds;
  std::string world_name;
  if (int s = agreed_stage(
          [&] {
            KokkosSession kokkos(program, o.kokkos_args);
            using Exec = Kokkos::DefaultHostExecutionSpace;
            using HostView = Kokkos::View<std::int32_t*, Kokkos::HostSpace>;
            auto world = make_mpi_world(MPI_COMM_WORLD, kind);
            world_name = to_string(world->kind());
            Planner<Exec> planner(problem.config, *world);
            const auto& row = problem.routing[static_cast<std::size_t>(rank)];
            HostView topk("moonep-plan.routing", row.size());
            std::copy(row.begin(), row.end(), topk.data());
            std::vector<Planner<Exec>::input_view> routing{topk}, tpe;
            if (problem.tokens_per_expert) {
              const auto& t = (*problem.tokens_per_expert)[static_cast<std::size_t>(rank)];
              HostView v("moonep-plan.tokens_per_expert", t.size());
              std::copy(t.begin(), t.end(), v.data());
              tpe.push_back(v);
            }
            for (int i = 0; i < o.steps; ++i) {
              MPI_Barrier(MPI_COMM_WORLD);
              const auto t0 = std::chrono::steady_clock::now();
              planner.plan(routing, problem.tokens_per_expert ? &tpe : nullptr);
              const double mine_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
              double slowest = 0;
              MPI_Allreduce(&mine_s, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
              seconds.push_back(slowest);
            }
            mine = planner.last_plan().to_host(0);
          },
          rank, size)) {
    return s;
  }

  // Stage 3: rank 0 gathers and writes; everyone learns whether it worked.
  return agreed_stage(
      [&] {
        const HostPlan plan = gather_plans(problem.config, std::move(mine), rank, size);
        if (rank != 0) return;
        if (!o.output.empty()) write_plan_file(plan, o.output);
        if (!o.save_problem.empty()) write_problem_file(problem, o.save_problem);
        if (o.synthetic() || o.summary) {
          char timing[200];
          std::snprintf(timing, sizeof timing, "%.1f us (median of %d step%s, slowest of %d MPI ranks, %s world)",
                        median_us(seconds), o.steps, o.steps == 1 ? "" : "s", size, world_name.c_str());
          print_summary(writes_to_standard_output(o.output) ? std::cerr : std::cout, summarize(plan, problem.routing),
                        describe_source(o), timing);
        }
      },
      rank, size);
}

}  // namespace moonep::tools
