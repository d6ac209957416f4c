// moonep::cuda::Planner: buffers, launch, error reporting and copy-out for
// the planning kernel with R virtual ranks on one GPU.
#include <algorithm>
#include <cstring>
#include <sstream>
#include <vector>

#include "moonep/cuda_planner.hpp"
#include "moonep/error.hpp"
#include "plan_kernel.hpp"
#include "replicated_layout.hpp"

namespace moonep::cuda {
namespace impl {
__global__ void plan_kernel(const __grid_constant__ KernelParams p);
__global__ void replicated_plan_kernel(const __grid_constant__ KernelParams p);
__global__ void empty_kernel();
__global__ void barrier_floor_kernel(const __grid_constant__ KernelParams p, unsigned* bar, int* sink);
}  // namespace impl

namespace {

using i64 = std::int64_t;

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw RuntimeError(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(err));
  }
}

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

// Device memory freed with the planner.
struct DeviceBuffer {
  void* ptr = nullptr;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  void allocate(i64 bytes, const char* what) {
    check_cuda(cudaMalloc(&ptr, static_cast<size_t>(std::max<i64>(bytes, 16))), what);
    check_cuda(cudaMemset(ptr, 0, static_cast<size_t>(std::max<i64>(bytes, 16))), what);
  }
  std::int32_t* words() const { return static_cast<std::int32_t*>(ptr); }
};

const impl::DeviceStatus kCleanStatus{~0ull, ~0ull, 0u, 0u};

}  // namespace

bool device_available(std::string* why_not) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why_not) *why_not = std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(err) + ")";
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return false;
  }
  if (n == 0) {
    if (why_not) *why_not = "no CUDA device is visible";
    return false;
  }
  return true;
}

struct Planner::State {
  Config config;
  Options options;
  int device = 0;
  int bpr = 0;
  i64 smem = 0;
  Kernel kernel = Kernel::rank0_tables;
  const void* func = nullptr;
  impl::KernelParams params{};
  DeviceBuffer sym, loc, out, status;
  DeviceBuffer floor;  // barrier_floor_kernel's counter (word 0) and one word per block (from word 4)
  impl::DeviceStatus* host_status = nullptr;  // pinned
  std::vector<DeviceRankPlan> rank_plans;
  std::vector<const std::int32_t*> last_topk, last_tpe;

  ~State() {
    if (host_status) cudaFreeHost(host_status);
  }
};

Planner::Planner(const Config& config, const Options& options) : s_(std::make_unique<State>()) {
  validate(config);
  std::string why;
  if (!device_available(&why)) throw RuntimeError("moonep::cuda::Planner: " + why);
  if (options.multicast) {
    // Virtual ranks share one GPU; a multicast object cannot span chunks of
    // one device. Never fall back silently: the caller asked for something
    // this planner will not do.
    throw RuntimeError(
        "moonep::cuda::Planner: NVLink multicast needs one GPU per rank; the virtual-rank "
        "planner broadcasts with unicast stores only (set Options::multicast = false)");
  }
  if (options.blocks_per_rank < 1) {
    throw InputError("blocks_per_rank = " + std::to_string(options.blocks_per_rank) + " must be >= 1");
  }
  State& s = *s_;
  s.config = config;
  s.options = options;
  check_cuda(cudaGetDevice(&s.device), "cudaGetDevice");
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, s.device), "cudaGetDeviceProperties");
  if (!prop.cooperativeLaunch) throw RuntimeError("the CUDA device does not support cooperative launches");

  const int R = config.ranks, E = config.experts, K = config.topk, S = config.tokens,
            B = config.copy_slots;
  const i64 NvS = config.slots(), N = config.entries();
  const i64 Gp = round4(E + B);

  // Any planner may launch with up to the device's opt-in maximum less the
  // kernel's static shared memory (a larger value is an invalid argument).
  // The empty kernel (the floor, launch_empty) takes the same dynamic
  // shared memory: without the opt-in above 48 KiB its cooperative launch
  // fails ("too many blocks").
  auto max_dynamic_of = [&](const void* f) {
    cudaFuncAttributes fattr{};
    check_cuda(cudaFuncGetAttributes(&fattr, f), "cudaFuncGetAttributes");
    const i64 m = static_cast<i64>(prop.sharedMemPerBlockOptin) - static_cast<i64>(fattr.sharedSizeBytes);
    check_cuda(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(m)),
               "cudaFuncSetAttribute");
    return m;
  };
  const void* const rank0_func = reinterpret_cast<const void*>(impl::plan_kernel);
  const void* const repl_func = reinterpret_cast<const void*>(impl::replicated_plan_kernel);
  const i64 max_rank0 = max_dynamic_of(rank0_func), max_repl = max_dynamic_of(repl_func);
  max_dynamic_of(reinterpret_cast<const void*>(impl::empty_kernel));
  max_dynamic_of(reinterpret_cast<const void*>(impl::barrier_floor_kernel));
  // Blocks co-resident on the whole GPU for a kernel and its shared memory:
  // all R*bpr blocks must be, for the software barriers. The replicated
  // kernel takes at most kReplicatedBlocksPerSM of them per SM (its blocks
  // plan redundantly; see plan_kernel.hpp).
  auto resident_with = [&](const void* f, i64 smem) {
    int per_sm = 0;
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, impl::kThreads, static_cast<size_t>(smem)),
               "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    if (f == reinterpret_cast<const void*>(impl::replicated_plan_kernel)) {
      per_sm = std::min(per_sm, impl::kReplicatedBlocksPerSM);
    }
    return static_cast<i64>(per_sm) * prop.multiProcessorCount;
  };

  // The replicated kernel, at the largest blocks_per_rank <= the one asked
  // for whose blocks (fewer blocks: more entries each, more shared memory)
  // fit and are co-resident.
  int repl_bpr = 0;
  i64 repl_smem = 0;
  if (options.kernel != Kernel::rank0_tables) {
    for (int bpr = options.blocks_per_rank; bpr >= 1 && repl_bpr == 0; --bpr) {
      const int workers = bpr > 1 ? bpr - 1 : 1;  // block 0 owns no tokens
      const int block_tokens = static_cast<int>((S + workers - 1) / workers);
      const i64 smem = impl::replicated_shared_bytes(R, E, B, K, block_tokens);
      if (smem > max_repl) break;  // fewer blocks only need more
      if (static_cast<i64>(R) * bpr <= resident_with(repl_func, smem)) {
        repl_bpr = bpr;
        repl_smem = smem;
      }
    }
    if (repl_bpr == 0 && options.kernel == Kernel::replicated) {
      std::ostringstream m;
      m << "moonep::cuda::Planner: the replicated kernel cannot run " << describe(config) << ": it needs "
        << impl::replicated_shared_bytes(R, E, B, K, S) << " bytes of shared memory per block at one block "
        << "per rank, the device allows " << max_repl
        << " with every block co-resident; use Kernel::automatic or Kernel::rank0_tables";
      throw RuntimeError(m.str());
    }
  }
  const int tile_tokens_max = std::max(1, impl::kTileEntries / K);
  int tile_tokens = 1, nworkers = 1;
  if (repl_bpr > 0) {
    s.kernel = Kernel::replicated;
    s.func = repl_func;
    s.bpr = repl_bpr;
    s.smem = repl_smem;
    nworkers = s.bpr > 1 ? s.bpr - 1 : 1;
  } else {
    // Rank-0 kernel: stage C2's lookup tables in shared memory when that
    // still lets R*blocks_per_rank blocks be resident; otherwise lower bpr
    // (blocks_per_rank() reports what was used).
    s.kernel = Kernel::rank0_tables;
    s.func = rank0_func;
    bool stage = (static_cast<i64>(E) * R) % 4 == 0;
    if (stage) {
      const i64 smem = impl::shared_bytes(R, E, B, tile_tokens_max, true);
      stage = smem <= max_rank0 &&
              static_cast<i64>(R) * options.blocks_per_rank <= resident_with(rank0_func, smem);
    }
    s.smem = impl::shared_bytes(R, E, B, tile_tokens_max, stage);
    if (s.smem > max_rank0) {
      std::ostringstream m;
      m << "moonep::cuda::Planner: " << describe(config) << " needs " << s.smem
        << " bytes of shared memory per block, the device allows " << max_rank0
        << " (experts too many for one block)";
      throw RuntimeError(m.str());
    }
    const i64 resident = resident_with(rank0_func, s.smem);
    s.bpr = options.blocks_per_rank;
    if (static_cast<i64>(R) * s.bpr > resident) s.bpr = static_cast<int>(resident / R);
    if (s.bpr < 1) {
      std::ostringstream m;
      m << "moonep::cuda::Planner: " << R << " virtual ranks need at least " << R
        << " co-resident blocks, the device holds " << resident;
      throw RuntimeError(m.str());
    }
    nworkers = s.bpr > 1 ? s.bpr - 1 : 1;
    tile_tokens = static_cast<int>(std::max<i64>(1, std::min<i64>((S + nworkers - 1) / nworkers, tile_tokens_max)));
    s.params.stage_tables = stage ? 1 : 0;
  }

  // Layouts.
  impl::KernelParams& p = s.params;
  Bump sym;
  p.sym.ctrl = sym.take(impl::kNumCtrl * impl::kCtrlStride);
  // Gathered counts, double-buffered by step parity (one buffer is zeroed
  // while the other fills).
  p.sym.tpe_half = round4(static_cast<i64>(R) * E);
  p.sym.tpe_all = sym.take(2 * p.sym.tpe_half);
  p.sym.acum = sym.take(static_cast<i64>(E) * R);
  p.sym.eoff = sym.take(static_cast<i64>(R) * E);
  p.sym.cum = sym.take(static_cast<i64>(R) * E);
  p.sym.words = (sym.next + 63) / 64 * 64;

  Bump loc;
  p.loc.gbar = loc.take(32);
  p.loc.epoch = loc.take(32);
  // Per-block expert counts [E][blocks rounded to 4] (the rank-0 kernel
  // uses nworkers <= bpr of the columns).
  p.loc.hist = loc.take(round4(s.bpr) * E);
  p.loc.pos = loc.take(N);
  p.loc.alloc = loc.take(static_cast<i64>(E) * R);
  p.loc.cand = loc.take(2LL * E);
  p.loc.ncand = loc.take(R);
  p.loc.words = (loc.next + 63) / 64 * 64;

  Bump out;
  p.out.dst = out.take(N);
  p.out.cu = out.take(Gp);
  p.out.zfr = out.take(2 * Gp);
  p.out.etc = out.take(static_cast<i64>(R) * B);
  p.out.rs = out.take(2);
  p.out.src_info = out.take(NvS);
  p.out.dup_groups = out.take(3 * NvS);
  p.out.dup_loffs = out.take(NvS);
  p.out.dup_counts = out.take(2);
  p.out.words = (out.next + 63) / 64 * 64;

  s.sym.allocate(p.sym.words * R * 4, "allocating the symmetric buffer");
  s.loc.allocate(p.loc.words * R * 4, "allocating rank scratch");
  s.out.allocate(p.out.words * R * 4, "allocating plan outputs");
  s.status.allocate(sizeof(impl::DeviceStatus), "allocating the status word");
  s.floor.allocate((4 + static_cast<i64>(R) * s.bpr) * 4, "allocating the barrier floor's words");
  check_cuda(cudaMemcpy(s.status.ptr, &kCleanStatus, sizeof kCleanStatus, cudaMemcpyHostToDevice),
             "initialising the status word");
  check_cuda(cudaMallocHost(reinterpret_cast<void**>(&s.host_status), sizeof(impl::DeviceStatus)),
             "cudaMallocHost");

  p.R = R;
  p.E = E;
  p.K = K;
  p.S = S;
  p.B = B;
  p.tp = config.token_padding;
  p.tp_magic = p.tp > 1 ? ~0ull / static_cast<unsigned long long>(p.tp) + 1ull : 0ull;
  p.epn = config.experts_per_rank();
  p.N = static_cast<int>(N);
  p.NvS = static_cast<int>(NvS);
  p.bpr = s.bpr;
  p.nworkers = nworkers;
  p.rank_base = 0;
  p.groups = R;
  p.tile_tokens = tile_tokens;
  p.block_tokens = static_cast<int>((S + nworkers - 1) / nworkers);
  if (s.kernel == Kernel::replicated) {
    p.repl = impl::replicated_regions(impl::replicated_layout(R, E, B, K, p.block_tokens));
  }
  p.sys_scope = 0;  // virtual ranks: one GPU
  p.trace = options.debug_trace;
  p.sym_base = s.sym.words();
  p.sym_stride = p.sym.words;
  p.loc_base = s.loc.words();
  p.loc_stride = p.loc.words;
  p.out_base = s.out.words();
  p.out_stride = p.out.words;
  p.status = static_cast<impl::DeviceStatus*>(s.status.ptr);

  s.rank_plans.resize(R);
  for (int r = 0; r < R; ++r) {
    std::int32_t* o = s.out.words() + static_cast<i64>(r) * p.out.words;
    s.rank_plans[r] = DeviceRankPlan{o + p.out.dst,      o + p.out.cu,         o + p.out.zfr,
                                     o + p.out.etc,      o + p.out.rs,         o + p.out.src_info,
                                     o + p.out.dup_groups, o + p.out.dup_loffs, o + p.out.dup_counts};
  }
  s.last_topk.assign(R, nullptr);
  s.last_tpe.assign(R, nullptr);
}

Planner::~Planner() = default;

const Config& Planner::config() const { return s_->config; }
int Planner::blocks_per_rank() const { return s_->bpr; }
Kernel Planner::kernel() const { return s_->kernel; }

const char* kernel_name(Kernel k) {
  switch (k) {
    case Kernel::replicated: return "replicated";
    case Kernel::rank0_tables: return "rank0_tables";
    case Kernel::automatic: break;
  }
  return "automatic";
}
int Planner::threads_per_block() { return impl::kThreads; }
const DeviceRankPlan& Planner::rank_plan(int rank) const { return s_->rank_plans.at(rank); }

namespace {
void launch_cooperative(const void* func, int blocks, i64 smem, void** args, cudaStream_t stream,
                        const char* what = "launching the planning kernel") {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(blocks));
  cfg.blockDim = dim3(impl::kThreads);
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeCooperative;
  attr.val.cooperative = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  check_cuda(cudaLaunchKernelExC(&cfg, func, args), what);
}
}  // namespace

namespace {
// Every rank's routing pointers (and given counts) into the launch
// parameters, each checked first: a null one throws before any is taken.
void take_routing(impl::KernelParams& p, int R, const std::int32_t* const* d_topk,
                  const std::int32_t* const* d_tpe, const char* who) {
  if (!d_topk) throw InputError(std::string(who) + ": d_topk is null");
  for (int r = 0; r < R; ++r) {
    if (!d_topk[r]) throw InputError(std::string(who) + ": d_topk[" + std::to_string(r) + "] is null");
  }
  for (int r = 0; r < R; ++r) {
    p.topk[r] = d_topk[r];
    p.tpe[r] = d_tpe ? d_tpe[r] : nullptr;
  }
}
}  // namespace

void Planner::plan(const std::int32_t* const* d_topk, const std::int32_t* const* d_tpe,
                   cudaStream_t stream) {
  State& s = *s_;
  take_routing(s.params, s.config.ranks, d_topk, d_tpe, "moonep::cuda::Planner::plan");
  for (int r = 0; r < s.config.ranks; ++r) {
    s.last_topk[r] = s.params.topk[r];
    s.last_tpe[r] = s.params.tpe[r];
  }
  void* args[] = {&s.params};
  launch_cooperative(s.func, s.config.ranks * s.bpr, s.smem, args, stream);
}

void Planner::launch_empty(cudaStream_t stream) {
  State& s = *s_;
  launch_cooperative(reinterpret_cast<const void*>(impl::empty_kernel), s.config.ranks * s.bpr, s.smem,
                     nullptr, stream, "launching the empty kernel");
}

void Planner::launch_barrier_floor(const std::int32_t* const* d_topk, cudaStream_t stream) {
  State& s = *s_;
  take_routing(s.params, s.config.ranks, d_topk, nullptr, "moonep::cuda::Planner::launch_barrier_floor");
  unsigned* bar = static_cast<unsigned*>(s.floor.ptr);
  int* sink = s.floor.words() + 4;
  void* args[] = {&s.params, &bar, &sink};
  launch_cooperative(reinterpret_cast<const void*>(impl::barrier_floor_kernel), s.config.ranks * s.bpr, s.smem,
                     args, stream, "launching the barrier floor kernel");
}

void Planner::check(cudaStream_t stream) {
  State& s = *s_;
  check_cuda(cudaMemcpyAsync(s.host_status, s.status.ptr, sizeof(impl::DeviceStatus),
                             cudaMemcpyDeviceToHost, stream),
             "reading the planning status");
  check_cuda(cudaStreamSynchronize(stream), "waiting for the planning kernel");
  const impl::DeviceStatus st = *s.host_status;
  if (st.bad_entry == ~0ull && st.bad_tpe == ~0ull && st.internal == 0) return;
  // Reset first so the planner stays usable whatever we throw.
  check_cuda(cudaMemcpyAsync(s.status.ptr, &kCleanStatus, sizeof kCleanStatus, cudaMemcpyHostToDevice, stream),
             "resetting the planning status");
  check_cuda(cudaStreamSynchronize(stream), "resetting the planning status");
  std::ostringstream m;
  if (st.bad_entry != ~0ull) {
    const int rank = static_cast<int>(st.bad_entry >> 32);
    const i64 index = static_cast<i64>(st.bad_entry & 0xffffffffull);
    std::int32_t value = 0;
    check_cuda(cudaMemcpy(&value, s.last_topk.at(rank) + index, sizeof value, cudaMemcpyDeviceToHost),
               "reading the bad routing entry");
    m << "routing[" << rank << "][" << index << "] = " << value << " is not an expert id in [0, "
      << s.config.experts << ")";
    throw InputError(m.str());
  }
  if (st.bad_tpe != ~0ull) {
    const int rank = static_cast<int>(st.bad_tpe >> 32);
    const int e = static_cast<int>(st.bad_tpe & 0xffffffffull);
    std::int32_t value = 0;
    check_cuda(cudaMemcpy(&value, s.last_tpe.at(rank) + e, sizeof value, cudaMemcpyDeviceToHost),
               "reading the bad tokens_per_expert entry");
    m << "tokens_per_expert[" << rank << "][" << e << "] = " << value << " does not match routing["
      << rank << "]";
    throw InputError(m.str());
  }
  m << "moonep::cuda::Planner: internal inconsistency detected in the planning kernel ("
    << describe(s.config) << ")";
  throw RuntimeError(m.str());
}

HostPlan Planner::copy_out(cudaStream_t stream) {
  check(stream);
  const State& s = *s_;
  const Config& c = s.config;
  HostPlan plan;
  plan.config = c;
  plan.ranks.resize(c.ranks);
  auto fetch = [](std::vector<std::int32_t>& v, const std::int32_t* src, i64 n) {
    v.resize(static_cast<size_t>(n));
    if (n > 0) check_cuda(cudaMemcpy(v.data(), src, n * 4, cudaMemcpyDeviceToHost), "copying a plan out");
  };
  for (int r = 0; r < c.ranks; ++r) {
    const DeviceRankPlan& d = s.rank_plans[r];
    HostRankPlan& h = plan.ranks[r];
    fetch(h.dst, d.dst, c.entries());
    fetch(h.cu_seqlens, d.cu_seqlens, c.groups());
    fetch(h.zero_fill_ranges, d.zero_fill_ranges, 2LL * c.groups());
    fetch(h.experts_to_copy, d.experts_to_copy, static_cast<i64>(c.ranks) * c.copy_slots);
    fetch(h.remote_stats, d.remote_stats, 2);
    fetch(h.src_info, d.src_info, c.slots());
    fetch(h.dup_counts, d.dup_counts, 2);
    fetch(h.dup_groups, d.dup_groups, 3LL * h.dup_counts[0]);
    fetch(h.dup_loffs, d.dup_loffs, h.dup_counts[1]);
  }
  return plan;
}

}  // namespace moonep::cuda
