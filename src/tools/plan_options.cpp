// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-plan's command line: --name value or --name=value.
#include "plan_options.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "kokkos_options.hpp"
#include "memory_budget.hpp"
#include "moonep/error.hpp"
#include "moonep/moonep_config.hpp"

namespace moonep::tools {
namespace {

int to_int(const std::string& name, const std::string& text, long long lo, long long hi) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0')
    throw UsageError(name + ": expected an integer, got '" + text + "'");
  if (errno == ERANGE || v < lo || v > hi) {
    throw UsageError(name + ": " + text + " is outside " + std::to_string(lo) + ".." +
                     std::to_string(hi));
  }
  return static_cast<int>(v);
}

std::uint64_t to_u64(const std::string& name, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || *end != '\0')
    throw UsageError(name + ": expected a non-negative integer, got '" + text + "'");
  if (errno == ERANGE) throw UsageError(name + ": " + text + " is outside 0..18446744073709551615");
  return v;
}

std::string number(double v) {
  std::ostringstream m;
  m << v;
  return m.str();
}

double to_double(const std::string& name, const std::string& text, double lo, double hi) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    throw UsageError(name + ": expected a number, got '" + text + "'");
  if (v < lo || v > hi)
    throw UsageError(name + ": " + text + " is outside " + number(lo) + ".." + number(hi));
  return v;
}

}  // namespace

int default_copy_slots(const Config& c) {
  if (c.ranks < 1 || c.ranks > kMaxRanks || c.experts < 1 || c.experts % c.ranks != 0) return 1;
  if (c.ranks == 1) return 1;
  const std::int64_t room = INT32_MAX / c.ranks - static_cast<std::int64_t>(c.experts);
  return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(c.experts / c.ranks, room)));
}

std::string plan_usage() {
  return R"(usage: moonep-plan --input PROBLEM.json [--output PLAN.json|-] [options]
       moonep-plan [synthetic options] [--output PLAN.json|-] [options]

Plans one MoonEP step: every rank receives exactly tokens*topk routed entries.
With --input it plans the problem file (docs/spec/formats.md) and writes
the plan file. Without --input it plans a synthetic step with skewed
(lognormal) expert popularity and prints a summary: load per rank before
and after, max/mean, experts copied, padding and time per step.

options:
  --input PATH          problem file ("-" reads standard input)
  --output PATH         plan file to write ("-" = standard output); written
                        whole or not at all
  --backend NAME        reference | portable | cuda (default: the fastest
                        available here)
  --world NAME          inprocess (default: every rank planned in this
                        process) | mpi (one process per rank, under mpirun)
                        | gpu (one launch per rank, each on its own GPU:
                        moonep::cuda::GpuWorld; under mpirun one process
                        per rank; builds with CUDA)
  --devices LIST        with --world gpu: rank r on the (r mod n)-th GPU of
                        LIST, e.g. 0,1,2,3 or 0,0,0,0 (default: every
                        visible GPU in turn)
  --multicast           with --world gpu: NVLink multicast for the gathered
                        counts and counters; refused unless MoonEP was
                        built with MoonEP_ENABLE_MULTICAST and every rank
                        has its own GPU with multicast support (never run
                        yet)
  --mpi-world KIND      with --world mpi: auto (default: shared memory when
                        every rank is on one node, else MPI RMA) | shared |
                        rma
  --steps N             plan N times, report the median time per step
                        (default 20 in synthetic mode, 1 with --input)
  --summary             with --input, print the summary too
  --json                print the summary as one JSON object (implies
                        --summary)
  --table STYLE         the summary's per-rank table: auto (default: every
                        rank up to 32 ranks, else the extremes and a
                        histogram) | full | compact
  --memory-limit SIZE   refuse (exit 2) a run estimated to need more memory
                        than SIZE (512M, 4G, none; default 4G or half of
                        this machine's memory, whichever is less)
  --mpi-timeout SEC     with --world mpi: the longest wait for the other
                        processes at any one point (default
                        $MOONEP_MPI_TIMEOUT, else 300)
  --help                this text
  --version             the version and what this build has

synthetic options (defaults in brackets):
  --ranks R [8]  --experts E [256]  --topk K [8]  --tokens S [4096]
  --copy-slots B [E/R]     copy slots per rank; E/R always suffices
                           (1 with one rank, where no expert is remote)
  --token-padding TP [128]
  --imbalance SIGMA [1.0]  sigma of the lognormal expert popularity
                           (0 = uniform, 1 = typical, 3 = extreme)
  --seed N [1]
  --save-problem PATH      also write the synthetic problem file
  --ragged                 a ragged step: each rank holds s_r tokens, drawn
                           uniformly from 0..S (reproducible by --seed)

The summary goes to standard output, or to standard error when the plan
does. Kokkos options (--kokkos-...) are passed on to Kokkos.
Exit status: 0 success, 2 bad usage or input, 1 runtime failure.
)";
}

std::string plan_version() {
  std::string v = "moonep-plan " MOONEP_VERSION_STRING "\n";
  v += "built with Kokkos " MOONEP_KOKKOS_VERSION_BUILT "\n";
  v += "backends: reference, portable";
  v += MOONEP_HAVE_CUDA ? ", cuda (CUDA specialization)\n" : " (no CUDA specialization)\n";
  v += MOONEP_HAVE_MPI ? "worlds: inprocess, mpi\n" : "worlds: inprocess (no MPI worlds)\n";
  return v;
}

PlanOptions parse_plan_options(int argc, const char* const* argv) {
  PlanOptions o;
  std::string synthetic_flag;  // a synthetic option seen, for the --input check
  bool copy_slots_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--kokkos-", 0) == 0) {
      check_kokkos_option(arg);  // Kokkos would stoi it: one line of ours instead
      o.kokkos_args.push_back(arg);
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      continue;
    }
    if (arg == "--summary") {
      o.summary = true;
      continue;
    }
    if (arg == "--ragged") {
      o.ragged = true;
      synthetic_flag = arg;
      continue;
    }
    if (arg == "--multicast") {
      o.multicast = true;
      continue;
    }
    if (arg == "--json") {
      o.json = true;
      continue;
    }
    if (arg == "--version") {
      o.version = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0 || arg.size() == 2)
      throw UsageError("unexpected argument '" + arg + "' (see --help)");
    std::string name = arg, value;
    const auto eq = arg.find('=');
    if (eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else {
      static const char* const known[] = {
          "--input", "--output", "--backend", "--world", "--devices", "--mpi-world", "--steps", "--ranks", "--experts",
          "--topk", "--tokens", "--copy-slots", "--token-padding", "--imbalance", "--seed",
          "--save-problem", "--memory-limit", "--mpi-timeout", "--table"};
      bool is_known = false;
      for (const char* k : known) is_known = is_known || name == k;
      if (!is_known) throw UsageError("unknown option '" + arg + "' (see --help)");
      if (i + 1 >= argc) throw UsageError(name + " needs a value");
      value = argv[++i];
    }
    Config& c = o.config;
    if (name == "--input") {
      if (value.empty()) throw UsageError("--input needs a file name");
      o.input = value;
    } else if (name == "--output") {
      if (value.empty()) throw UsageError("--output needs a file name (or - for standard output)");
      o.output = value;
    } else if (name == "--save-problem") {
      if (value.empty()) throw UsageError("--save-problem needs a file name");
      o.save_problem = value;
      synthetic_flag = name;
    } else if (name == "--backend") {
      try {
        o.backend = backend_from_string(value);
      } catch (const InputError& e) {
        throw UsageError(std::string("--backend: ") + e.what());
      }
    } else if (name == "--world") {
      if (value == "inprocess") o.world = World::inprocess;
      else if (value == "mpi") o.world = World::mpi;
      else if (value == "gpu") o.world = World::gpu;
      else throw UsageError("--world: unknown world '" + value + "' (expected inprocess, mpi or gpu)");
    } else if (name == "--devices") {
      o.devices.clear();
      std::size_t at = 0;
      while (at <= value.size()) {
        const std::size_t comma = std::min(value.find(',', at), value.size());
        o.devices.push_back(to_int(name, value.substr(at, comma - at), 0, 1023));
        at = comma + 1;
      }
    } else if (name == "--mpi-world") {
      if (value != "auto" && value != "shared" && value != "rma")
        throw UsageError("--mpi-world: unknown kind '" + value + "' (expected auto, shared or rma)");
      o.mpi_world = value;
    } else if (name == "--table") {
      if (value == "auto") o.table = TableStyle::automatic;
      else if (value == "full") o.table = TableStyle::full;
      else if (value == "compact") o.table = TableStyle::compact;
      else throw UsageError("--table: unknown style '" + value + "' (expected auto, full or compact)");
    } else if (name == "--memory-limit") {
      o.memory_limit = parse_memory_size(name, value);
    } else if (name == "--mpi-timeout") {
      o.mpi_timeout = to_double(name, value, 0.001, 1e6);
    } else if (name == "--steps") {
      o.steps = to_int(name, value, 1, 1000000);
    } else if (name == "--imbalance") {
      o.imbalance = to_double(name, value, 0.0, 20.0);
      synthetic_flag = name;
    } else if (name == "--seed") {
      o.seed = to_u64(name, value);
      synthetic_flag = name;
    } else {
      // Configuration sizes: any int here, the rules of docs/spec/planning.md
      // are checked by moonep::validate with its own messages.
      int* field = name == "--ranks"           ? &c.ranks
                   : name == "--experts"       ? &c.experts
                   : name == "--topk"          ? &c.topk
                   : name == "--tokens"        ? &c.tokens
                   : name == "--copy-slots"    ? &c.copy_slots
                   : name == "--token-padding" ? &c.token_padding
                                               : nullptr;
      if (!field) throw UsageError("unknown option '" + name + "' (see --help)");
      *field = to_int(name, value, INT_MIN, INT_MAX);
      synthetic_flag = name;
      copy_slots_given = copy_slots_given || field == &c.copy_slots;
    }
  }
  if (!o.input.empty() && !synthetic_flag.empty()) {
    throw UsageError(synthetic_flag + " is for synthetic mode; the problem file given with --input "
                     "fixes the configuration and routing");
  }
  if (!o.devices.empty() && o.world != World::gpu) throw UsageError("--devices is for --world gpu");
  if (o.multicast && o.world != World::gpu) throw UsageError("--multicast is for --world gpu");
  if (o.world == World::gpu && o.backend && *o.backend != Backend::cuda) {
    throw UsageError(std::string("--world gpu plans with the cuda backend, not --backend ") + to_string(*o.backend));
  }
  // After the loop: --ranks and --experts may come after --copy-slots.
  if (!copy_slots_given) o.config.copy_slots = default_copy_slots(o.config);
  if (o.steps == 0) o.steps = o.synthetic() ? 20 : 1;
  return o;
}

}  // namespace moonep::tools
