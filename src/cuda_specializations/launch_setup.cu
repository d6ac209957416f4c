// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// launch_setup.hpp: the kernel and grid choice, the chunk layouts, the
// cooperative launch and the status report both planning hosts share.
#include "launch_setup.hpp"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "moonep/error.hpp"
#include "moonep/reference.hpp"
#include "table_layout.hpp"

namespace moonep::cuda::impl {
namespace {

using i64 = std::int64_t;
using ::moonep::impl::field_capacity;
using ::moonep::impl::field_columns;
using ::moonep::impl::field_prefix_values;
using ::moonep::impl::field_rows;
using ::moonep::impl::FieldHeld;
using ::moonep::impl::kPlanFields;
using ::moonep::impl::PlanField;
namespace plan_field_index = ::moonep::impl::plan_field_index;

i64 round4(i64 n) { return (n + 3) / 4 * 4; }

// Hands out 4-word aligned offsets one region after another.
struct Bump {
  i64 next = 0;
  i64 take(i64 words) {
    const i64 at = next;
    next += round4(std::max<i64>(words, 1));
    return at;
  }
};

// Blocks of a rank that own tokens: all but block 0 when there are two or
// more (block 0 stores the rank's layout instead).
int workers_of(int bpr) { return bpr > 1 ? bpr - 1 : 1; }

// The most tokens a worker holds, ceil(S / nworkers).
int block_tokens_of(const Config& c, int nworkers) { return (c.tokens + nworkers - 1) / nworkers; }

// The tables of a block holding block_tokens_of tokens: what the host sizes
// shared memory or the global slices by.
TableLayout tables_for(const Config& c, int nworkers) {
  return table_layout(c.ranks, c.experts, c.copy_slots, c.topk, block_tokens_of(c, nworkers));
}

}  // namespace

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw RuntimeError(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(err));
  }
}

LaunchChoice choose_launch(const Config& config, const Options& options, int device, int resident_ranks,
                           Launches launches, const char* who) {
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  if (!prop.cooperativeLaunch) throw RuntimeError(std::string(who) + ": the CUDA device does not support cooperative launches");
  const i64 ranks_here = resident_ranks;

  // Any launch may take up to the device's opt-in maximum less the
  // kernel's static shared memory (a larger value is an invalid argument).
  auto max_dynamic_of = [&](const void* f) {
    cudaFuncAttributes fattr{};
    check_cuda(cudaFuncGetAttributes(&fattr, f), "cudaFuncGetAttributes");
    const i64 m = static_cast<i64>(prop.sharedMemPerBlockOptin) - static_cast<i64>(fattr.sharedSizeBytes);
    check_cuda(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(m)),
               "cudaFuncSetAttribute");
    return m;
  };
  const bool world = launches == Launches::one_per_rank;
  const void* const shared_func =
      reinterpret_cast<const void*>(world ? plan_kernel_shared_tables_world : plan_kernel_shared_tables);
  const void* const global_func =
      reinterpret_cast<const void*>(world ? plan_kernel_global_tables_world : plan_kernel_global_tables);
  const i64 max_shared = max_dynamic_of(shared_func);
  // Blocks co-resident on the device for a kernel and its shared memory,
  // at most TuningPolicy::blocks_per_sm per SM (every block plans the
  // step; see kernel_params.hpp).
  auto resident_with = [&](const void* f, i64 smem) {
    int per_sm = 0;
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, kThreads, static_cast<size_t>(smem)),
               "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    per_sm = std::min(per_sm, TuningPolicy::blocks_per_sm);
    return static_cast<i64>(per_sm) * prop.multiProcessorCount;
  };
  auto table_words_at = [&](int bpr) { return tables_for(config, workers_of(bpr)).words; };

  LaunchChoice c;
  // Shared tables, at the largest blocks per rank <= the one asked for
  // whose blocks (fewer blocks: more entries each, more shared memory) fit
  // and are co-resident. Their entries then also fit steps 7-8's tile.
  if (options.kernel != Kernel::global_tables) {
    for (int bpr = options.blocks_per_rank; bpr >= 1 && c.bpr == 0; --bpr) {
      const i64 smem = table_words_at(bpr) * 4;
      if (smem > max_shared) break;  // fewer blocks only need more
      if (ranks_here * bpr <= resident_with(shared_func, smem)) {
        c.bpr = bpr;
        c.smem = smem;
      }
    }
    if (c.bpr == 0 && options.kernel == Kernel::shared_tables) {
      std::ostringstream m;
      m << who << ": shared tables cannot plan " << describe(config) << ": a block needs "
        << table_words_at(1) * 4 << " bytes of shared memory at one block per rank, the device allows "
        << max_shared << " with every block co-resident; use Kernel::automatic or Kernel::global_tables";
      throw RuntimeError(m.str());
    }
  }
  if (c.bpr > 0) {
    c.kernel = Kernel::shared_tables;
    c.func = shared_func;
    c.nworkers = workers_of(c.bpr);
    return c;
  }
  // Global tables: the same kernel with each block's tables in its slice of
  // the rank's scratch; every block co-resident, one per SM.
  c.kernel = Kernel::global_tables;
  c.func = global_func;
  c.smem = 0;
  const i64 resident = resident_with(global_func, 0);
  c.bpr = options.blocks_per_rank;
  if (ranks_here * c.bpr > resident) c.bpr = static_cast<int>(resident / ranks_here);
  if (c.bpr < 1) {
    std::ostringstream m;
    m << who << ": " << ranks_here << " ranks on one device need at least " << ranks_here
      << " co-resident blocks, the device holds " << resident;
    throw RuntimeError(m.str());
  }
  if (table_words_at(c.bpr) >= (i64{1} << 31)) {
    std::ostringstream m;
    m << who << ": " << describe(config) << " needs " << table_words_at(c.bpr)
      << " words of tables per block, more than 2^31";
    throw RuntimeError(m.str());
  }
  c.nworkers = workers_of(c.bpr);
  return c;
}

void fill_params(KernelParams& p, const Config& config, const LaunchChoice& c) {
  const int R = config.ranks, E = config.experts, B = config.copy_slots;
  const i64 NvS = config.slots(), N = config.entries();

  Bump sym;
  p.sym.ctrl = sym.take(kNumCtrl * kCtrlStride);
  // Gathered counts, double-buffered by step parity (one buffer is zeroed
  // while the other fills).
  p.sym.tpe_half = round4(static_cast<i64>(R) * E);
  p.sym.tpe_all = sym.take(2 * p.sym.tpe_half);
  p.sym.words = (sym.next + 63) / 64 * 64;

  const TableLayout tables = tables_for(config, c.nworkers);
  Bump loc;
  p.loc.epoch = loc.take(32);
  // Each worker block's expert counts, a row [E] per worker.
  p.loc.hist = loc.take(static_cast<i64>(c.nworkers) * E);
  // Global tables: every block's own, one after the other.
  p.table_words = c.kernel == Kernel::global_tables ? tables.words : 0;
  p.loc.tables = loc.take(p.table_words * c.bpr);
  p.loc.words = (loc.next + 63) / 64 * 64;

  // Every output region holds its rows rounded up to 4 (16-byte access).
  Bump out;
#define MOONEP_OUT_REGION(name, ...)                                       \
  {                                                                        \
    const PlanField& f = kPlanFields[plan_field_index::name];              \
    p.out.name = out.take(round4(field_rows(f, config)) * field_columns(f, config)); \
  }
  MOONEP_PLAN_FIELDS(MOONEP_OUT_REGION)
#undef MOONEP_OUT_REGION
  p.out.entries = out.take(4);
  p.out.words = (out.next + 63) / 64 * 64;

  p.R = R;
  p.E = E;
  p.K = config.topk;
  p.S = config.tokens;
  p.B = B;
  p.tp = config.token_padding;
  p.tp_magic = p.tp > 1 ? ~0ull / static_cast<unsigned long long>(p.tp) + 1ull : 0ull;
  p.epn = config.experts_per_rank();
  p.N = static_cast<int>(N);
  p.NvS = static_cast<int>(NvS);
  p.bpr = c.bpr;
  p.nworkers = c.nworkers;
  p.block_tokens = block_tokens_of(config, c.nworkers);
  p.tables = table_regions(tables);
  for (int g = 0; g < kMaxGroups; ++g) p.routing_tokens[g] = config.tokens;
}

int routing_tokens_of(const Config& config, std::int64_t routing_len) {
  if (routing_len < 0) return config.tokens;
  const std::int64_t held = routing_len / config.topk;
  return held < config.tokens ? static_cast<int>(held) : config.tokens;
}

std::string rank_input_error(const Config& config, int rank, const RankInputs& in) {
  std::int32_t tokens = config.tokens;
  if (in.count) check_cuda(cudaMemcpy(&tokens, in.count, sizeof tokens, cudaMemcpyDeviceToHost), "reading a token count back");
  // Only the first s_r*K ids are read (all of them when the routing is
  // shorter, which validate_rank_input then names), as the portable
  // phases read them.
  std::int64_t len = in.routing_len >= 0 ? in.routing_len : config.entries();
  if (in.count && tokens >= 0) len = std::min(len, static_cast<std::int64_t>(tokens) * config.topk);
  std::vector<std::int32_t> routing(static_cast<std::size_t>(len > 0 ? len : 0));
  if (!routing.empty()) {
    check_cuda(cudaMemcpy(routing.data(), in.routing, routing.size() * 4, cudaMemcpyDeviceToHost),
               "reading a rank's routing back");
  }
  std::vector<std::int32_t> tpe(in.tpe ? static_cast<std::size_t>(config.experts) : 0);
  if (in.tpe) {
    check_cuda(cudaMemcpy(tpe.data(), in.tpe, tpe.size() * 4, cudaMemcpyDeviceToHost),
               "reading a rank's tokens_per_expert back");
  }
  try {
    validate_rank_input(config, rank, routing.data(), len, in.tpe ? tpe.data() : nullptr,
                        static_cast<std::int64_t>(tpe.size()), tokens);
  } catch (const InputError& e) {
    return e.what();
  }
  return {};
}

void launch_cooperative(const void* func, int blocks, i64 smem, void** args, cudaStream_t stream, const char* what) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(blocks));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeCooperative;
  attr.val.cooperative = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  check_cuda(cudaLaunchKernelExC(&cfg, func, args), what);
}

HostPlan copy_plans_out(const Config& c, const std::vector<DeviceRankPlan>& plans,
                        const std::function<void(int)>& before_rank, const std::optional<TokensPerRank>& tokens) {
  HostPlan plan;
  plan.config = c;
  plan.ranks.resize(c.ranks);
  plan.tokens_per_rank = tokens;
  auto fetch = [](std::vector<std::int32_t>& v, const std::int32_t* src, i64 n) {
    v.resize(static_cast<size_t>(n));
    if (n > 0) check_cuda(cudaMemcpy(v.data(), src, n * 4, cudaMemcpyDeviceToHost), "copying a plan out");
  };
  for (int r = 0; r < c.ranks; ++r) {
    if (before_rank) before_rank(r);
    const DeviceRankPlan& d = plans[r];
    HostRankPlan& h = plan.ranks[r];
    // dup_counts first: it says how much of the prefixed fields is held.
    fetch(h.dup_counts, d.dup_counts, 2);
    // A ragged step's dst: the rank's s_r*K entries (the rest is undefined).
    auto held = [&](const PlanField& f) -> i64 {
      if (f.held != FieldHeld::whole) return field_prefix_values(f, h.dup_counts[0], h.dup_counts[1]);
      if (f.rows == ::moonep::impl::FieldRows::entries && tokens) {
        return static_cast<i64>((*tokens)[r]) * c.topk * field_columns(f, c);
      }
      return field_capacity(f, c);
    };
#define MOONEP_FETCH_FIELD(name, ...) fetch(h.name, d.name, held(kPlanFields[plan_field_index::name]));
    MOONEP_PLAN_FIELDS(MOONEP_FETCH_FIELD)
#undef MOONEP_FETCH_FIELD
  }
  return plan;
}

unsigned long long timeout_ns_of(double timeout_s, const char* who) {
  if (!(timeout_s > 0 && timeout_s <= 86400)) {
    throw InputError(std::string(who) + ": timeout_s = " + std::to_string(timeout_s) +
                     " must be a number of seconds in (0, 86400]");
  }
  return static_cast<unsigned long long>(timeout_s * 1e9);
}

std::string late_counters(unsigned late) {
  static const char* const names[kNumCtrl] = {"the counts gather", "the previous step's end"};
  static_assert(kGather == 0 && kDone == 1, "names in Ctrl order");
  std::string s;
  for (int c = 0; c < kNumCtrl; ++c) {
    if (!(late & (1u << c))) continue;
    if (!s.empty()) s += " and ";
    s += names[c];
  }
  return s;
}

int first_bad_rank(const DeviceStatus& st) {
  const unsigned long long key = std::min({st.bad_count, st.bad_entry, st.bad_tpe});
  return key == ~0ull ? -1 : static_cast<int>(key >> 32);
}

void throw_status(const DeviceStatus& st, const Config& config,
                  const std::function<std::string(int rank)>& input_error, const std::string& late_text) {
  if (status_clean(st)) return;
  const int rank = first_bad_rank(st);
  if (rank >= 0) {
    const std::string why = input_error(rank);
    if (!why.empty()) throw InputError(why);
    throw RuntimeError("moonep::cuda: the planning kernel refused rank " + std::to_string(rank) +
                       "'s input, but its check on the host finds nothing wrong (" + describe(config) + ")");
  }
  if (st.late != 0) throw RuntimeError(late_text);
  throw RuntimeError("moonep::cuda: internal inconsistency detected in the planning kernel (" + describe(config) + ")");
}

}  // namespace moonep::cuda::impl
