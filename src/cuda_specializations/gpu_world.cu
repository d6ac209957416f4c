// moonep::cuda::GpuWorld: the symmetric buffer as one VMM mapping of every
// rank's own allocation, one cooperative launch per rank, and the
// world-wide status check (bad input, ranks that never came, reset).
#include <cuda.h>  // driver API types only: the functions come through cudaGetDriverEntryPoint*

#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench_access.hpp"
#include "launch_setup.hpp"
#include "moonep/error.hpp"
#include "moonep/gpu_world.hpp"

namespace moonep::cuda {
namespace {

using i64 = std::int64_t;
using impl::check_cuda;

// The driver's virtual memory management calls, found through the
// runtime (no link against libcuda: the runtime has loaded the driver
// already, and a build machine without one can still link).
struct Vmm {
  decltype(&::cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&::cuMemCreate) create = nullptr;
  decltype(&::cuMemRelease) release = nullptr;
  decltype(&::cuMemAddressReserve) reserve = nullptr;
  decltype(&::cuMemAddressFree) address_free = nullptr;
  decltype(&::cuMemMap) map = nullptr;
  decltype(&::cuMemUnmap) unmap = nullptr;
  decltype(&::cuMemSetAccess) set_access = nullptr;
  decltype(&::cuGetErrorString) error_string = nullptr;

  template <class F>
  static void find(F& fn, const char* name) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
    check_cuda(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found), name);
#else
    check_cuda(cudaGetDriverEntryPoint(name, &p, cudaEnableDefault, &found), name);
#endif
    if (found != cudaDriverEntryPointSuccess || !p) {
      throw RuntimeError(std::string("moonep::cuda::GpuWorld: the CUDA driver has no ") + name);
    }
    fn = reinterpret_cast<F>(p);
  }
  Vmm() {
    find(granularity, "cuMemGetAllocationGranularity");
    find(create, "cuMemCreate");
    find(release, "cuMemRelease");
    find(reserve, "cuMemAddressReserve");
    find(address_free, "cuMemAddressFree");
    find(map, "cuMemMap");
    find(unmap, "cuMemUnmap");
    find(set_access, "cuMemSetAccess");
    find(error_string, "cuGetErrorString");
  }
  void ok(CUresult r, const char* what) const {
    if (r == CUDA_SUCCESS) return;
    const char* text = nullptr;
    if (error_string(r, &text) != CUDA_SUCCESS || !text) text = "unknown error";
    throw RuntimeError(std::string("CUDA driver error in ") + what + ": " + text);
  }
};

// Makes `device` current for a scope, restoring the caller's afterwards.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    check_cuda(cudaGetDevice(&saved_), "cudaGetDevice");
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceScope() { cudaSetDevice(saved_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int saved_ = 0;
};

std::string ranks_text(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i) s += i + 1 == ranks.size() ? " and " : ", ";
    s += std::to_string(ranks[i]);
  }
  return s;
}

}  // namespace

struct GpuWorld::State {
  Config config;
  WorldOptions options;
  std::vector<int> devices;
  impl::LaunchChoice choice;
  impl::KernelParams base{};              // what every rank's launch shares
  std::vector<impl::KernelParams> params;  // per rank: its bases, status, routing
  Vmm vmm;
  CUdeviceptr va = 0;                     // the symmetric buffer: R chunks of `chunk_bytes`
  std::size_t chunk_bytes = 0;
  std::vector<CUmemGenericAllocationHandle> handles;
  std::size_t mapped = 0;                 // chunks mapped so far (for the destructor)
  std::vector<cudaStream_t> streams;
  std::vector<cudaEvent_t> joined;        // per rank: its part of the step done
  cudaEvent_t forked = nullptr;           // on rank 0's device: `origin` reached the step
  std::vector<impl::DeviceStatus*> status;       // per rank, on its device
  impl::DeviceStatus* host_status = nullptr;     // [R], pinned
  std::vector<DeviceRankPlan> rank_plans;
  std::vector<const std::int32_t*> last_routing, last_tpe;
  unsigned steps = 0;  // steps every rank finished since the last reset (= each rank's epoch)

  std::int32_t* chunk(int r) const { return reinterpret_cast<std::int32_t*>(va + static_cast<std::size_t>(r) * chunk_bytes); }

  ~State() {
    for (std::size_t r = 0; r < streams.size(); ++r) {
      if (streams[r]) cudaStreamSynchronize(streams[r]);
    }
    for (auto* st : status) cudaFree(st);
    for (auto e : joined) cudaEventDestroy(e);
    if (forked) cudaEventDestroy(forked);
    for (auto st : streams) cudaStreamDestroy(st);
    if (host_status) cudaFreeHost(host_status);
    for (std::size_t r = 0; r < mapped; ++r) vmm.unmap(va + r * chunk_bytes, chunk_bytes);
    for (auto h : handles) vmm.release(h);
    if (va) vmm.address_free(va, chunk_bytes * devices.size());
  }
};

GpuWorld::GpuWorld(const Config& config, const std::vector<int>& devices, const WorldOptions& options)
    : s_(std::make_unique<State>()) {
  const char* who = "moonep::cuda::GpuWorld";
  validate(config);
  const int R = config.ranks;
  if (static_cast<int>(devices.size()) != R) {
    throw InputError(std::string(who) + ": " + std::to_string(devices.size()) + " devices given for " +
                     std::to_string(R) + " ranks (one device per rank; a device may repeat)");
  }
  if (options.blocks_per_rank < 1) {
    throw InputError("blocks_per_rank = " + std::to_string(options.blocks_per_rank) + " must be >= 1");
  }
  const unsigned long long timeout_ns = impl::timeout_ns_of(options.timeout_s, who);
  std::string why;
  if (!device_available(&why)) throw RuntimeError(std::string(who) + ": " + why);
  int ndev = 0;
  check_cuda(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount");
  for (int r = 0; r < R; ++r) {
    if (devices[r] < 0 || devices[r] >= ndev) {
      throw InputError(std::string(who) + ": device " + std::to_string(devices[r]) + " of rank " +
                       std::to_string(r) + " does not exist (" + std::to_string(ndev) + " visible)");
    }
  }
  const std::set<int> distinct(devices.begin(), devices.end());
  for (int a : distinct) {
    for (int b : distinct) {
      int can = 1;
      if (a != b) check_cuda(cudaDeviceCanAccessPeer(&can, a, b), "cudaDeviceCanAccessPeer");
      if (!can) {
        throw RuntimeError(std::string(who) + ": device " + std::to_string(a) + " cannot access device " +
                           std::to_string(b) + "'s memory (no peer access): its ranks cannot meet");
      }
    }
  }

  State& s = *s_;
  s.config = config;
  s.options = options;
  s.devices = devices;
  // Every rank's launch is chosen alike, for the device that holds the
  // most ranks (their blocks must all be resident there at once).
  int busiest = devices[0], most = 0;
  for (int d : distinct) {
    const int n = static_cast<int>(std::count(devices.begin(), devices.end(), d));
    if (n > most) most = n, busiest = d;
  }
  {
    // (A world of different GPU models would need the choice per device;
    // every rank's launch must be the same kernel with the same layouts.)
    DeviceScope on(busiest);
    s.choice = impl::choose_launch(config, Options{options.blocks_per_rank, options.kernel}, busiest, most, who);
  }
  impl::KernelParams& p = s.base;
  impl::fill_params(p, config, s.choice);

  // One chunk per rank: [symmetric | scratch | outputs], rounded to the
  // allocation granularity of every device.
  std::size_t gran = 1;
  for (int d : distinct) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = d;
    std::size_t g = 0;
    s.vmm.ok(s.vmm.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), "cuMemGetAllocationGranularity");
    gran = std::max(gran, g);
  }
  const std::size_t words = static_cast<std::size_t>(p.sym.words + p.loc.words + p.out.words);
  s.chunk_bytes = (words * 4 + gran - 1) / gran * gran;
  s.vmm.ok(s.vmm.reserve(&s.va, s.chunk_bytes * R, gran, 0, 0), "cuMemAddressReserve (the symmetric buffer)");
  for (int r = 0; r < R; ++r) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = devices[r];
    CUmemGenericAllocationHandle h{};
    s.vmm.ok(s.vmm.create(&h, s.chunk_bytes, &prop, 0), "cuMemCreate (a rank's chunk)");
    s.handles.push_back(h);
    s.vmm.ok(s.vmm.map(s.va + r * s.chunk_bytes, s.chunk_bytes, 0, h, 0), "cuMemMap (a rank's chunk)");
    s.mapped = r + 1;
  }
  std::vector<CUmemAccessDesc> access;
  for (int d : distinct) {
    CUmemAccessDesc a{};
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = d;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    access.push_back(a);
  }
  s.vmm.ok(s.vmm.set_access(s.va, s.chunk_bytes * R, access.data(), access.size()), "cuMemSetAccess");

  check_cuda(cudaMallocHost(reinterpret_cast<void**>(&s.host_status), sizeof(impl::DeviceStatus) * R),
             "cudaMallocHost");
  p.groups = 1;
  p.sys_scope = (distinct.size() > 1 || options.system_scope) ? 1 : 0;
  p.timeout_ns = timeout_ns;
  p.sym_base = s.chunk(0);
  p.sym_stride = static_cast<i64>(s.chunk_bytes / 4);
  p.loc_stride = p.sym_stride;
  p.out_stride = p.sym_stride;
  s.params.assign(R, p);
  s.rank_plans.resize(R);
  s.streams.assign(R, nullptr);
  s.joined.assign(R, nullptr);
  s.status.assign(R, nullptr);
  for (int r = 0; r < R; ++r) {
    DeviceScope on(devices[r]);
    check_cuda(cudaMemset(s.chunk(r), 0, s.chunk_bytes), "clearing a rank's chunk");
    check_cuda(cudaStreamCreateWithFlags(&s.streams[r], cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaEventCreateWithFlags(&s.joined[r], cudaEventDisableTiming), "cudaEventCreate");
    if (r == 0) check_cuda(cudaEventCreateWithFlags(&s.forked, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&s.status[r]), sizeof(impl::DeviceStatus)), "allocating a status");
    check_cuda(cudaMemcpy(s.status[r], &impl::kCleanStatus, sizeof impl::kCleanStatus, cudaMemcpyHostToDevice),
               "initialising a status");
    impl::KernelParams& q = s.params[r];
    q.rank_base = r;
    std::int32_t* own = s.chunk(r);
    q.loc_base = own + p.sym.words;
    q.out_base = own + p.sym.words + p.loc.words;
    q.status = s.status[r];
    std::int32_t* o = q.out_base;
    s.rank_plans[r] = DeviceRankPlan{o + p.out.dst,        o + p.out.cu,        o + p.out.zfr,
                                     o + p.out.etc,        o + p.out.rs,        o + p.out.src_info,
                                     o + p.out.dup_groups, o + p.out.dup_loffs, o + p.out.dup_counts};
  }
  s.last_routing.assign(R, nullptr);
  s.last_tpe.assign(R, nullptr);
}

GpuWorld::~GpuWorld() = default;

void impl::PlannerAccess::set_trace(GpuWorld& world, unsigned long long* trace) {
  GpuWorld::State& s = *world.s_;
  for (std::size_t r = 0; r < s.params.size(); ++r) {
    s.params[r].trace = trace ? trace + static_cast<i64>(r) * s.choice.bpr * kTracePoints : nullptr;
  }
}

const Config& GpuWorld::config() const { return s_->config; }
int GpuWorld::ranks() const { return s_->config.ranks; }
int GpuWorld::device(int rank) const { return s_->devices.at(rank); }
cudaStream_t GpuWorld::stream(int rank) const { return s_->streams.at(rank); }
Kernel GpuWorld::kernel() const { return s_->choice.kernel; }
int GpuWorld::blocks_per_rank() const { return s_->choice.bpr; }
bool GpuWorld::system_scope() const { return s_->base.sys_scope != 0; }
const DeviceRankPlan& GpuWorld::rank_plan(int rank) const { return s_->rank_plans.at(rank); }

void GpuWorld::plan_rank(int rank, const std::int32_t* d_routing, const std::int32_t* d_tpe, cudaStream_t stream) {
  State& s = *s_;
  if (rank < 0 || rank >= s.config.ranks) {
    throw InputError("moonep::cuda::GpuWorld::plan_rank: rank " + std::to_string(rank) + " is not in [0, " +
                     std::to_string(s.config.ranks) + ")");
  }
  if (!d_routing) {
    throw InputError("moonep::cuda::GpuWorld::plan_rank: the routing of rank " + std::to_string(rank) + " is null");
  }
  impl::KernelParams& q = s.params[rank];
  q.topk[0] = d_routing;
  q.tpe[0] = d_tpe;
  s.last_routing[rank] = d_routing;
  s.last_tpe[rank] = d_tpe;
  DeviceScope on(s.devices[rank]);
  void* args[] = {&q};
  impl::launch_cooperative(s.choice.func, s.choice.bpr, s.choice.smem, args, stream,
                           "launching a rank's planning kernel");
}

void GpuWorld::plan(const std::int32_t* const* d_routing, const std::int32_t* const* d_tpe, cudaStream_t origin) {
  State& s = *s_;
  const int R = s.config.ranks;
  if (!d_routing) throw InputError("moonep::cuda::GpuWorld::plan: d_routing is null");
  for (int r = 0; r < R; ++r) {
    if (!d_routing[r]) throw InputError("moonep::cuda::GpuWorld::plan: d_routing[" + std::to_string(r) + "] is null");
  }
  {
    // `origin` is a stream of rank 0's device (an event is recorded on a
    // stream of its own device); the ranks' streams may wait on it anywhere.
    DeviceScope on(s.devices[0]);
    check_cuda(cudaEventRecord(s.forked, origin), "forking the step to the ranks' streams");
  }
  for (int r = 0; r < R; ++r) {
    check_cuda(cudaStreamWaitEvent(s.streams[r], s.forked, 0), "forking the step to the ranks' streams");
  }
  for (int r = 0; r < R; ++r) {
    plan_rank(r, d_routing[r], d_tpe ? d_tpe[r] : nullptr, s.streams[r]);
    DeviceScope on(s.devices[r]);
    check_cuda(cudaEventRecord(s.joined[r], s.streams[r]), "joining the ranks' streams");
  }
  for (int r = 0; r < R; ++r) {
    check_cuda(cudaStreamWaitEvent(origin, s.joined[r], 0), "joining the ranks' streams");
  }
}

void GpuWorld::check() {
  State& s = *s_;
  const int R = s.config.ranks;
  for (int r = 0; r < R; ++r) {
    DeviceScope on(s.devices[r]);
    check_cuda(cudaStreamSynchronize(s.streams[r]), "waiting for a rank's planning kernel");
    check_cuda(cudaMemcpy(s.host_status + r, s.status[r], sizeof(impl::DeviceStatus), cudaMemcpyDeviceToHost),
               "reading a rank's planning status");
  }
  // The step's status: the lowest bad entry and tokens_per_expert value of
  // any rank, every late wait; which ranks waited in vain and which never
  // finished (their epoch did not move while the others waited for them).
  impl::DeviceStatus all = impl::kCleanStatus;
  std::vector<int> waited, missing;
  for (int r = 0; r < R; ++r) {
    const impl::DeviceStatus& st = s.host_status[r];
    all.bad_entry = std::min(all.bad_entry, st.bad_entry);
    all.bad_tpe = std::min(all.bad_tpe, st.bad_tpe);
    all.internal |= st.internal;
    all.late |= st.late;
    if (st.late) waited.push_back(r);
  }
  if (impl::status_clean(all)) {
    ++s.steps;
    return;
  }
  if (all.late) {
    // A rank that neither waited nor finished the step (its step count
    // did not move) never ran its part.
    for (int r = 0; r < R; ++r) {
      DeviceScope on(s.devices[r]);
      unsigned epoch = 0;
      check_cuda(cudaMemcpy(&epoch, s.params[r].loc_base + s.base.loc.epoch, 4, cudaMemcpyDeviceToHost),
                 "reading a rank's step count");
      if (!s.host_status[r].late && epoch == s.steps) missing.push_back(r);
    }
    s.steps = 0;
  } else {
    ++s.steps;  // bad input: every rank still finished the step
  }
  // Reset before throwing: statuses, and after a late wait every chunk
  // (counters, epochs, gathered counts) as the constructor left it.
  for (int r = 0; r < R; ++r) {
    DeviceScope on(s.devices[r]);
    check_cuda(cudaMemcpy(s.status[r], &impl::kCleanStatus, sizeof impl::kCleanStatus, cudaMemcpyHostToDevice),
               "resetting a rank's status");
    if (all.late) check_cuda(cudaMemset(s.chunk(r), 0, s.chunk_bytes), "resetting a rank's chunk");
  }
  std::ostringstream late;
  late << "moonep::cuda::GpuWorld: ";
  if (!missing.empty()) {
    late << ranks_text(missing) << " did not arrive within "
         << s.options.timeout_s << " s: ";
  }
  late << ranks_text(waited) << " gave up waiting at " << impl::late_counters(all.late);
  if (missing.empty()) late << " (every rank ran; their blocks were not all resident at once)";
  late << "; the step was abandoned and the world reset";
  impl::throw_status(
      all, s.config,
      [&](int rank, bool is_tpe, i64 index) {
        std::int32_t value = 0;
        const std::int32_t* src = (is_tpe ? s.last_tpe : s.last_routing).at(rank);
        if (!src) return value;
        DeviceScope on(s.devices[rank]);
        check_cuda(cudaMemcpy(&value, src + index, sizeof value, cudaMemcpyDeviceToHost), "reading the bad input value");
        return value;
      },
      late.str());
}

HostPlan GpuWorld::copy_out() {
  check();
  const State& s = *s_;
  DeviceScope keep(s.devices[0]);  // the caller's device is current again afterwards
  return impl::copy_plans_out(s.config, s.rank_plans, [&](int r) { check_cuda(cudaSetDevice(s.devices[r]), "cudaSetDevice"); });
}

}  // namespace moonep::cuda
