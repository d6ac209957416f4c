// moonep::cuda::GpuWorld: the symmetric buffer as one VMM mapping of every
// rank's own allocation (with WorldOptions::multicast also one NVLink
// multicast object bound to the symmetric part of every chunk), one
// cooperative launch per rank, and the world-wide status check (bad input,
// ranks that never came, reset).
#include <cuda.h>  // driver API types only: the functions come through cudaGetDriverEntryPoint*

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench_access.hpp"
#include "launch_setup.hpp"
#include "moonep/error.hpp"
#include "moonep/gpu_world.hpp"
#include "world_peers.hpp"

namespace moonep::cuda {
namespace {

using i64 = std::int64_t;
using impl::check_cuda;
using impl::DeviceScope;

// A driver function found through the runtime (no link against libcuda:
// the runtime has loaded the driver already, and a build machine without
// one can still link), as of driver API version `version`; null if this
// driver has none.
void* driver_function(const char* name, int version) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
  check_cuda(cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &found), name);
#else
  (void)version;
  check_cuda(cudaGetDriverEntryPoint(name, &p, cudaEnableDefault, &found), name);
#endif
  return found == cudaDriverEntryPointSuccess ? p : nullptr;
}

// The driver's virtual memory management calls.
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
  decltype(&::cuMemExportToShareableHandle) export_handle = nullptr;
  decltype(&::cuMemImportFromShareableHandle) import_handle = nullptr;

  template <class F>
  static void find(F& fn, const char* name) {
    void* p = driver_function(name, 12000);
    if (!p) throw RuntimeError(std::string("moonep::cuda::GpuWorld: the CUDA driver has no ") + name);
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
    find(export_handle, "cuMemExportToShareableHandle");
    find(import_handle, "cuMemImportFromShareableHandle");
  }
  void ok(CUresult r, const char* what) const {
    if (r == CUDA_SUCCESS) return;
    const char* text = nullptr;
    if (error_string(r, &text) != CUDA_SUCCESS || !text) text = "unknown error";
    throw RuntimeError(std::string("CUDA driver error in ") + what + ": " + text);
  }
};

// The driver calls of the NVLink multicast opt-in (WorldOptions::
// multicast), looked up only by a world that asks for it: the device
// queries of its refusals and the multicast object's life. The multicast
// calls came with CUDA 12.1, so they are asked for as of that version (as
// of 12.0 the driver would not give them).
struct MulticastApi {
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetAttribute) device_attribute = nullptr;
#if CUDA_VERSION >= 12010
  decltype(&::cuMulticastGetGranularity) granularity = nullptr;
  decltype(&::cuMulticastCreate) create = nullptr;
  decltype(&::cuMulticastAddDevice) add_device = nullptr;
  decltype(&::cuMulticastBindMem) bind_mem = nullptr;
  decltype(&::cuMulticastUnbind) unbind = nullptr;
#endif
  std::string missing;  // the first call this driver (or build) lacks; empty: all there

  template <class F>
  void find(F& fn, const char* name, int version) {
    void* p = driver_function(name, version);
    if (!p && missing.empty()) missing = name;
    fn = reinterpret_cast<F>(p);
  }
  MulticastApi() {
    find(device_get, "cuDeviceGet", 12000);
    find(device_attribute, "cuDeviceGetAttribute", 12000);
#if CUDA_VERSION >= 12010
    find(granularity, "cuMulticastGetGranularity", 12010);
    find(create, "cuMulticastCreate", 12010);
    find(add_device, "cuMulticastAddDevice", 12010);
    find(bind_mem, "cuMulticastBindMem", 12010);
    find(unbind, "cuMulticastUnbind", 12010);
#else
    missing = "cuMulticastCreate (MoonEP was built with CUDA older than 12.1)";
#endif
  }
};


}  // namespace

struct GpuWorld::State {
  Config config;
  WorldOptions options;
  std::vector<int> devices;               // per rank; -1 for another process's rank
  std::vector<int> local;                 // the ranks this process launches
  std::unique_ptr<impl::WorldPeers> peers;  // null: this process holds every rank
  impl::LaunchChoice choice;
  impl::KernelParams base{};              // what every rank's launch shares
  std::vector<impl::KernelParams> params;  // per rank: its bases, status, routing
  Vmm vmm;
  CUdeviceptr va = 0;                     // the symmetric buffer: R chunks of `chunk_bytes`
  std::size_t chunk_bytes = 0;
  std::vector<CUmemGenericAllocationHandle> handles;
  std::size_t mapped = 0;                 // chunks mapped so far (for the destructor)
  // Bytes of a chunk before the rank's scratch: the symmetric part
  // (sym.words), with multicast rounded up to the multicast granularity,
  // the part of every chunk bound to the multicast object. The same in
  // every chunk and every process.
  std::size_t sym_bytes = 0;
  // NVLink multicast (WorldOptions::multicast; all empty without it): the
  // driver calls, the object (created here or imported from rank 0's
  // process), the local devices whose chunk is bound to it, and its
  // mapping in this process, `mc_bytes` from `mc_va`. Each is recorded as
  // soon as it exists, so that the destructor undoes exactly what a
  // constructor that threw half-way had done.
  std::unique_ptr<MulticastApi> mc;
  std::size_t mc_gran = 0, mc_bytes = 0;
  CUmemGenericAllocationHandle mc_handle{};
  bool mc_held = false;                   // mc_handle is this process's to release
  std::vector<CUdevice> mc_bound;
  CUdeviceptr mc_va = 0;
  bool mc_mapped = false;
  std::vector<cudaStream_t> streams;      // per local rank (indexed by rank)
  std::vector<cudaEvent_t> joined;        // per local rank: its part of the step done
  cudaEvent_t forked = nullptr;           // on the first local rank's device: `origin` reached the step
  std::vector<impl::DeviceStatus*> status;       // per local rank, on its device
  std::vector<impl::DeviceStatus> host_status;   // per rank, after check() gathered them
  std::vector<DeviceRankPlan> rank_plans;
  std::vector<const std::int32_t*> last_routing, last_tpe, last_counts;
  unsigned steps = 0;  // steps every rank finished since the last reset (= each rank's epoch)

  std::int32_t* chunk(int r) const { return reinterpret_cast<std::int32_t*>(va + static_cast<std::size_t>(r) * chunk_bytes); }
  bool is_local(int r) const { return std::find(local.begin(), local.end(), r) != local.end(); }

  void build(const Config& config, const WorldOptions& options, const char* who);
  void refuse_multicast(const char* who);
  void size_multicast(const char* who);
  void create_multicast(const std::vector<CUmemAccessDesc>& access, const char* who);
  template <class Step>
  void together(const char* what, const char* who, Step&& step);

  ~State() {
    for (std::size_t r = 0; r < streams.size(); ++r) {
      if (streams[r]) cudaStreamSynchronize(streams[r]);
    }
    for (auto* st : status) if (st) cudaFree(st);
    for (auto e : joined) if (e) cudaEventDestroy(e);
    if (forked) cudaEventDestroy(forked);
    for (auto st : streams) if (st) cudaStreamDestroy(st);
    // The multicast object before the chunks bound to it, in the reverse
    // of its making: no mapping of it, no binding, no handle, no range.
    if (mc_mapped) vmm.unmap(mc_va, mc_bytes);
#if CUDA_VERSION >= 12010
    for (CUdevice d : mc_bound) mc->unbind(mc_handle, d, 0, mc_bytes);  // offset and size as bound
#endif
    if (mc_held) vmm.release(mc_handle);
    if (mc_va) vmm.address_free(mc_va, mc_bytes);
    for (std::size_t r = 0; r < mapped; ++r) vmm.unmap(va + r * chunk_bytes, chunk_bytes);
    for (auto h : handles) if (h) vmm.release(h);
    if (va) vmm.address_free(va, chunk_bytes * devices.size());
  }
};

namespace {

void check_world_options(const WorldOptions& options, const char* who) {
  if (options.blocks_per_rank < 1) {
    throw InputError("blocks_per_rank = " + std::to_string(options.blocks_per_rank) + " must be >= 1");
  }
  impl::timeout_ns_of(options.timeout_s, who);
  std::string why;
  if (!device_available(&why)) throw RuntimeError(std::string(who) + ": " + why);
}

void check_device(int device, int rank, const char* who) {
  int ndev = 0;
  check_cuda(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount");
  if (device < 0 || device >= ndev) {
    throw InputError(std::string(who) + ": device " + std::to_string(device) + " of rank " + std::to_string(rank) +
                     " does not exist (" + std::to_string(ndev) + " visible)");
  }
}

}  // namespace

GpuWorld::GpuWorld(const Config& config, const std::vector<int>& devices, const WorldOptions& options)
    : s_(std::make_unique<State>()) {
  const char* who = "moonep::cuda::GpuWorld";
  validate(config);
  const int R = config.ranks;
  if (static_cast<int>(devices.size()) != R) {
    throw InputError(std::string(who) + ": " + std::to_string(devices.size()) + " devices given for " +
                     std::to_string(R) + " ranks (one device per rank; a device may repeat)");
  }
  check_world_options(options, who);
  for (int r = 0; r < R; ++r) check_device(devices[r], r, who);
  s_->devices = devices;
  for (int r = 0; r < R; ++r) s_->local.push_back(r);
  s_->build(config, options, who);
}

GpuWorld::GpuWorld(const Config& config, int device, std::unique_ptr<impl::WorldPeers> peers,
                   const WorldOptions& options)
    : s_(std::make_unique<State>()) {
  const char* who = "moonep::cuda::GpuWorld (one process per rank)";
  validate(config);
  if (peers->size() != config.ranks) {
    throw InputError(std::string(who) + ": " + std::to_string(peers->size()) + " processes for " +
                     std::to_string(config.ranks) + " ranks (one process per rank)");
  }
  check_world_options(options, who);
  check_device(device, peers->rank(), who);
  s_->devices.assign(static_cast<std::size_t>(config.ranks), -1);
  s_->devices[peers->rank()] = device;
  s_->local.push_back(peers->rank());
  s_->peers = std::move(peers);
  s_->build(config, options, who);
}

// Everything after the checks, for both ways of holding a world: the
// launch choice (agreed between processes), the chunks (this process's
// created, the others' imported), the mapping, each local rank's stream,
// status and launch parameters.
void GpuWorld::State::build(const Config& cfg, const WorldOptions& opts, const char* who) {
  config = cfg;
  options = opts;
  const int R = config.ranks;
  std::set<int> here;  // this process's devices
  for (int r : local) here.insert(devices[r]);
  if (!peers) {
    for (int a : here) {
      for (int b : here) {
        int can = 1;
        if (a != b) check_cuda(cudaDeviceCanAccessPeer(&can, a, b), "cudaDeviceCanAccessPeer");
        if (!can) {
          throw RuntimeError(std::string(who) + ": device " + std::to_string(a) + " cannot access device " +
                             std::to_string(b) + "'s memory (no peer access): its ranks cannot meet");
        }
      }
    }
  }
  // Every rank's launch is the same kernel with the same blocks (the
  // counters count R*bpr arrivals), chosen for the device that holds the
  // most of this process's ranks (their blocks must all be resident there
  // at once). Processes agree on the smallest blocks per rank any of them
  // can run, with rank 0's kernel. (A world of different GPU models would
  // need the choice per device.) They must also all ask for multicast or
  // all not: its set-up is collective.
  int busiest = devices[local[0]], most = 0;
  for (int d : here) {
    int n = 0;
    for (int r : local) n += devices[r] == d ? 1 : 0;
    if (n > most) most = n, busiest = d;
  }
  {
    DeviceScope on(busiest);
    choice = impl::choose_launch(config, Options{options.blocks_per_rank, options.kernel}, busiest, most,
                                 impl::Launches::one_per_rank, who);
    if (peers) {
      const int mine[3] = {choice.bpr, static_cast<int>(choice.kernel), options.multicast ? 1 : 0};
      std::vector<int> all(3 * static_cast<std::size_t>(R));
      peers->allgather(mine, sizeof mine, all.data());
      std::vector<int> on, off;
      for (int r = 0; r < R; ++r) (all[3 * r + 2] ? on : off).push_back(r);
      if (!on.empty() && !off.empty()) {
        throw RuntimeError(std::string(who) + ": WorldOptions::multicast is on for " + ranks_text(on) + " and off for " +
                           ranks_text(off) +
                           " (every process must ask for the same); no multicast object was created");
      }
      int bpr = choice.bpr;
      for (int r = 0; r < R; ++r) bpr = std::min(bpr, all[3 * r]);
      const Kernel kernel = static_cast<Kernel>(all[1]);
      if (bpr != choice.bpr || kernel != choice.kernel) {
        choice = impl::choose_launch(config, Options{bpr, kernel}, busiest, most, impl::Launches::one_per_rank, who);
      }
      if (choice.bpr != bpr) {
        throw RuntimeError(std::string(who) + ": the processes' devices cannot run the same launch (" +
                           std::to_string(bpr) + " blocks per rank of the " + kernel_name(kernel) + " kernel)");
      }
    }
  }
  impl::KernelParams& p = base;
  impl::fill_params(p, config, choice);
  // Multicast is refused here, before any multicast object or chunk
  // exists, or sized: its part of every chunk.
  sym_bytes = static_cast<std::size_t>(p.sym.words) * 4;
  if (options.multicast) {
    refuse_multicast(who);
    size_multicast(who);
    sym_bytes = mc_bytes;
  }

  // One chunk per rank: [symmetric | scratch | outputs], rounded to the
  // allocation granularity of this process's devices; with multicast the
  // symmetric part is padded to `mc_bytes` (the scratch starts after the
  // part bound to the multicast object).
  std::size_t gran = 1;
  for (int d : here) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = d;
    std::size_t g = 0;
    vmm.ok(vmm.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), "cuMemGetAllocationGranularity");
    gran = std::max(gran, g);
  }
  const std::size_t bytes = sym_bytes + static_cast<std::size_t>(p.loc.words + p.out.words) * 4;
  chunk_bytes = (bytes + gran - 1) / gran * gran;
  if (peers) {
    // Every process must map the same chunk size.
    const unsigned long long mine = chunk_bytes;
    std::vector<unsigned long long> all(static_cast<std::size_t>(R));
    peers->allgather(&mine, sizeof mine, all.data());
    chunk_bytes = *std::max_element(all.begin(), all.end());
  }
  vmm.ok(vmm.reserve(&va, chunk_bytes * R, gran, 0, 0), "cuMemAddressReserve (the symmetric buffer)");
  handles.assign(static_cast<std::size_t>(R), CUmemGenericAllocationHandle{});
  for (int r : local) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = devices[r];
    if (peers) prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    vmm.ok(vmm.create(&handles[r], chunk_bytes, &prop, 0), "cuMemCreate (a rank's chunk)");
  }
  if (peers) {
    // The other processes' chunks: their allocations, exported as file
    // descriptors, handed over and imported.
    const int me = peers->rank();
    int fd = -1;
    vmm.ok(vmm.export_handle(&fd, handles[me], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
           "cuMemExportToShareableHandle (this rank's chunk)");
    std::vector<int> fds = peers->exchange_descriptors(fd);
    ::close(fd);
    for (int r = 0; r < R; ++r) {
      if (r == me) continue;
      const CUresult got = vmm.import_handle(&handles[r], reinterpret_cast<void*>(static_cast<std::intptr_t>(fds[r])),
                                             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
      ::close(fds[r]);
      vmm.ok(got, "cuMemImportFromShareableHandle (another rank's chunk)");
    }
  }
  for (int r = 0; r < R; ++r) {
    vmm.ok(vmm.map(va + r * chunk_bytes, chunk_bytes, 0, handles[r], 0), "cuMemMap (a rank's chunk)");
    mapped = r + 1;
  }
  std::vector<CUmemAccessDesc> access;
  for (int d : here) {
    CUmemAccessDesc a{};
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = d;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    access.push_back(a);
  }
  vmm.ok(vmm.set_access(va, chunk_bytes * R, access.data(), access.size()), "cuMemSetAccess");
  if (options.multicast) create_multicast(access, who);

  host_status.assign(static_cast<std::size_t>(R), impl::kCleanStatus);
  p.groups = 1;
  // System scope whenever ranks may be on different devices (another
  // process's rank may be), and with multicast (its reductions are
  // system-scope, and the polls that see them must be too).
  p.sys_scope = (here.size() > 1 || peers || options.system_scope || options.multicast) ? 1 : 0;
  p.timeout_ns = impl::timeout_ns_of(options.timeout_s, who);
  p.sym_base = chunk(0);
  p.sym_stride = static_cast<i64>(chunk_bytes / 4);
  p.loc_stride = p.sym_stride;
  p.out_stride = p.sym_stride;
  // The kernel reduces the gathered counts and the counters into every
  // chunk at once through this mapping (byte 0 bound to byte 0 of every
  // rank's chunk), at the offsets of sym_base's, and reads its own chunk.
  p.mc_sym = mc_mapped ? reinterpret_cast<std::int32_t*>(mc_va) : nullptr;
  params.assign(R, p);
  rank_plans.resize(R);
  streams.assign(R, nullptr);
  joined.assign(R, nullptr);
  status.assign(R, nullptr);
  for (int r = 0; r < R; ++r) {
    impl::KernelParams& q = params[r];
    q.rank_base = r;
    std::int32_t* own = chunk(r);
    q.loc_base = own + sym_bytes / 4;
    q.out_base = own + sym_bytes / 4 + p.loc.words;
    std::int32_t* o = q.out_base;
    rank_plans[r] = impl::device_rank_plan(o, p.out);
  }
  for (int r : local) {
    DeviceScope on(devices[r]);
    check_cuda(cudaMemset(chunk(r), 0, chunk_bytes), "clearing a rank's chunk");
    check_cuda(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaEventCreateWithFlags(&joined[r], cudaEventDisableTiming), "cudaEventCreate");
    if (r == local[0]) check_cuda(cudaEventCreateWithFlags(&forked, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&status[r]), sizeof(impl::DeviceStatus)), "allocating a status");
    check_cuda(cudaMemcpy(status[r], &impl::kCleanStatus, sizeof impl::kCleanStatus, cudaMemcpyHostToDevice),
               "initialising a status");
    params[r].status = status[r];
  }
  // No rank may start before every chunk is cleared.
  for (int r : local) {
    DeviceScope on(devices[r]);
    check_cuda(cudaDeviceSynchronize(), "clearing the chunks");
  }
  if (peers) peers->barrier();
  last_routing.assign(R, nullptr);
  last_tpe.assign(R, nullptr);
  last_counts.assign(R, nullptr);
}

namespace {

const char* const kNoMulticastObject = "; no multicast object was created";

// MOONEP_FORBID_MULTICAST set to anything but "" or "0": this process must
// never create a multicast object (the shared test machines set it: one
// created there can take the host's GPUs down for days).
bool multicast_forbidden(std::string* value) {
  const char* v = std::getenv("MOONEP_FORBID_MULTICAST");
  if (!v || !*v || std::string(v) == "0") return false;
  *value = v;
  return true;
}

// Whether `device` supports NVLink multicast; RuntimeError where the
// driver lacks a call that multicast needs, or a query fails.
bool multicast_supported(const MulticastApi& mc, const Vmm& vmm, int device) {
  if (!mc.missing.empty()) throw RuntimeError("the CUDA driver has no " + mc.missing);
#if CUDA_VERSION >= 12010
  CUdevice d = 0;
  vmm.ok(mc.device_get(&d, device), "cuDeviceGet");
  int supported = 0;
  vmm.ok(mc.device_attribute(&supported, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, d),
         "cuDeviceGetAttribute (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED)");
  return supported != 0;
#else
  (void)vmm;
  (void)device;
  return false;
#endif
}

// nvidia-smi's spelling of a GPU's UUID.
std::string uuid_text(const unsigned char* u) {
  char text[48];
  std::snprintf(text, sizeof text, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  return text;
}

// A file descriptor closed with the object.
struct Descriptor {
  int fd = -1;
  Descriptor() = default;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

// Runs `step`, a part of the multicast set-up. With one process per rank
// every process then learns whether all got through theirs, so that all
// throw alike (the one that failed with its own error, the others naming
// it) and none waits in a later step for a process that gave up; a
// collective, bounded as every other.
template <class Step>
void GpuWorld::State::together(const char* what, const char* who, Step&& step) {
  std::exception_ptr failed;
  try {
    step();
  } catch (...) {
    if (!peers) throw;
    failed = std::current_exception();
  }
  if (!peers) return;
  const int mine = failed ? 1 : 0;
  std::vector<int> all(static_cast<std::size_t>(config.ranks));
  peers->allgather(&mine, sizeof mine, all.data());
  if (failed) std::rethrow_exception(failed);
  std::vector<int> bad;
  for (int r = 0; r < config.ranks; ++r) {
    if (all[r]) bad.push_back(r);
  }
  if (!bad.empty()) {
    throw RuntimeError(std::string(who) + ": " + ranks_text(bad) + " could not " + what + " (its own error says why)");
  }
}

// The refusals of WorldOptions::multicast, in this order, before any
// multicast object exists: ranks that do not each have their own device
// (a multicast object binds one chunk per device), MOONEP_FORBID_MULTICAST
// in the environment, a device without multicast support. With one
// process per rank every process learns every process's facts first, so
// that all refuse alike and none waits for one that refused.
void GpuWorld::State::refuse_multicast(const char* who) {
  const int R = config.ranks;
  const std::string head = std::string(who) + ": ";
  const std::string forbidden_why = " (set where a multicast object must never be created)";
  const std::string unsupported_why = " does not support NVLink multicast (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED is 0)";
  if (!peers) {
    for (int r = 0; r < R; ++r) {
      std::vector<int> same;
      for (int q = 0; q < R; ++q) {
        if (devices[q] == devices[r]) same.push_back(q);
      }
      if (same.size() > 1) {
        throw RuntimeError(head + "multicast needs every rank on its own device, but " + ranks_text(same) +
                           " are on device " + std::to_string(devices[r]) + kNoMulticastObject);
      }
    }
    std::string value;
    if (multicast_forbidden(&value)) {
      throw RuntimeError(head + "multicast is forbidden in this process by MOONEP_FORBID_MULTICAST=" + value +
                         forbidden_why + kNoMulticastObject);
    }
    mc = std::make_unique<MulticastApi>();
    for (int r = 0; r < R; ++r) {
      bool supported = false;
      try {
        supported = multicast_supported(*mc, vmm, devices[r]);
      } catch (const RuntimeError& e) {
        throw RuntimeError(head + "could not check multicast support: " + e.what() + kNoMulticastObject);
      }
      if (!supported) {
        throw RuntimeError(head + "device " + std::to_string(devices[r]) + " of rank " + std::to_string(r) +
                           unsupported_why + kNoMulticastObject);
      }
    }
    return;
  }

  // One process per rank: first every process's GPU (its UUID: the same
  // ordinal may be another GPU in another process) and environment...
  const int me = peers->rank();
  struct Facts {
    unsigned char uuid[16];
    int device;     // numbered as in its process
    int forbidden;  // MOONEP_FORBID_MULTICAST set there
    int failed;     // its query failed (its own error says why)
  };
  Facts mine{};
  mine.device = devices[me];
  std::string value, error;
  mine.forbidden = multicast_forbidden(&value) ? 1 : 0;
  try {
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, devices[me]), "cudaGetDeviceProperties");
    static_assert(sizeof prop.uuid.bytes == sizeof mine.uuid, "a CUDA UUID is 16 bytes");
    std::memcpy(mine.uuid, prop.uuid.bytes, sizeof mine.uuid);
  } catch (const RuntimeError& e) {
    mine.failed = 1;
    error = e.what();
  }
  std::vector<Facts> all(static_cast<std::size_t>(R));
  peers->allgather(&mine, sizeof mine, all.data());
  std::vector<int> failed, forbidden;
  for (int r = 0; r < R; ++r) {
    if (all[r].failed) failed.push_back(r);
    if (all[r].forbidden) forbidden.push_back(r);
  }
  if (mine.failed) throw RuntimeError(head + "could not check multicast: " + error + kNoMulticastObject);
  if (!failed.empty()) {
    throw RuntimeError(head + ranks_text(failed) + " could not check multicast (its own error says why)" +
                       kNoMulticastObject);
  }
  for (int r = 0; r < R; ++r) {
    std::vector<int> same;
    for (int q = 0; q < R; ++q) {
      if (std::memcmp(all[q].uuid, all[r].uuid, sizeof all[r].uuid) == 0) same.push_back(q);
    }
    if (same.size() > 1) {
      throw RuntimeError(head + "multicast needs every rank on its own device, but " + ranks_text(same) +
                         " are on one GPU (" + uuid_text(all[r].uuid) + ", device " + std::to_string(all[r].device) +
                         " in rank " + std::to_string(r) + "'s process)" + kNoMulticastObject);
    }
  }
  if (!forbidden.empty()) {
    throw RuntimeError(head + "multicast is forbidden by MOONEP_FORBID_MULTICAST in the process of " +
                       ranks_text(forbidden) + forbidden_why + kNoMulticastObject);
  }
  // ... then every process's multicast support (-1: the query failed).
  int supported = -1;
  try {
    mc = std::make_unique<MulticastApi>();
    supported = multicast_supported(*mc, vmm, devices[me]) ? 1 : 0;
  } catch (const RuntimeError& e) {
    error = e.what();
  }
  std::vector<int> support(static_cast<std::size_t>(R));
  peers->allgather(&supported, sizeof supported, support.data());
  failed.clear();
  for (int r = 0; r < R; ++r) {
    if (support[r] < 0) failed.push_back(r);
  }
  if (supported < 0) throw RuntimeError(head + "could not check multicast support: " + error + kNoMulticastObject);
  if (!failed.empty()) {
    throw RuntimeError(head + ranks_text(failed) + " could not check multicast support (its own error says why)" +
                       kNoMulticastObject);
  }
  for (int r = 0; r < R; ++r) {
    if (support[r] == 0) {
      throw RuntimeError(head + "device " + std::to_string(all[r].device) + " of rank " + std::to_string(r) +
                         unsupported_why + kNoMulticastObject);
    }
  }
}

// The multicast object's size: the symmetric part rounded up to the
// multicast granularity, the same in every process. The minimum
// granularity, which is what cuMulticastCreate, cuMulticastBindMem and
// cuMulticastUnbind require of sizes and offsets (typically 2 MiB, the
// allocation granularity): every chunk is padded to this size, and the
// recommended granularity can be hundreds of MiB.
void GpuWorld::State::size_multicast(const char* who) {
#if CUDA_VERSION >= 12010
  together("query the multicast granularity", who, [&] {
    CUmulticastObjectProp prop{};
    prop.numDevices = static_cast<unsigned>(config.ranks);
    prop.size = sym_bytes;
    prop.handleTypes = peers ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    DeviceScope on(devices[local[0]]);
    vmm.ok(mc->granularity(&mc_gran, &prop, CU_MULTICAST_GRANULARITY_MINIMUM), "cuMulticastGetGranularity");
    if (mc_gran == 0) throw RuntimeError("cuMulticastGetGranularity gave a granularity of 0");
  });
  if (peers) {
    // (Powers of two: the largest is a multiple of every process's.)
    const unsigned long long mine = mc_gran;
    std::vector<unsigned long long> all(static_cast<std::size_t>(config.ranks));
    peers->allgather(&mine, sizeof mine, all.data());
    mc_gran = static_cast<std::size_t>(*std::max_element(all.begin(), all.end()));
  }
  mc_bytes = (sym_bytes + mc_gran - 1) / mc_gran * mc_gran;
#else
  (void)who;
  throw RuntimeError("MoonEP was built with CUDA older than 12.1: no NVLink multicast");
#endif
}

// The multicast object over every rank's chunk, `mc_bytes` from byte 0 of
// each, mapped here for this process's devices (`access`). One process:
// create it, add every device, bind every chunk. One process per rank:
// rank 0 creates it and hands it over as a file descriptor, each process
// adds its own device, and only when every process has (a bind or a
// mapping would otherwise wait for the rest without bound) binds its
// chunk. Every step is recorded in the State as it succeeds, for the
// destructor.
void GpuWorld::State::create_multicast(const std::vector<CUmemAccessDesc>& access, const char* who) {
#if CUDA_VERSION >= 12010
  CUmulticastObjectProp prop{};
  prop.numDevices = static_cast<unsigned>(config.ranks);  // a device per rank (refuse_multicast)
  prop.size = mc_bytes;
  prop.handleTypes = peers ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  prop.flags = 0;
  const auto cu_device = [&](int ordinal) {
    CUdevice d = 0;
    vmm.ok(mc->device_get(&d, ordinal), "cuDeviceGet");
    return d;
  };
  const bool creator = !peers || peers->rank() == 0;
  Descriptor shared;  // with peers: the object as a file descriptor (rank 0's export, the others' import)
  together("create the multicast object", who, [&] {
    if (!creator) return;
    // refuse_multicast looked already; looked again right before the one
    // call that must never happen where the environment forbids it.
    std::string value;
    if (multicast_forbidden(&value)) {
      throw RuntimeError(std::string(who) + ": multicast is forbidden in this process by MOONEP_FORBID_MULTICAST=" +
                         value + kNoMulticastObject);
    }
    DeviceScope on(devices[local[0]]);
    vmm.ok(mc->create(&mc_handle, &prop), "cuMulticastCreate");
    mc_held = true;
    if (peers) {
      vmm.ok(vmm.export_handle(&shared.fd, mc_handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
             "cuMemExportToShareableHandle (the multicast object)");
    }
  });
  if (peers) {
    const int fd = peers->share_descriptor(creator ? shared.fd : -1);
    if (!creator) shared.fd = fd;
  }
  together("add its device to the multicast object", who, [&] {
    if (!creator) {
      vmm.ok(vmm.import_handle(&mc_handle, reinterpret_cast<void*>(static_cast<std::intptr_t>(shared.fd)),
                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
             "cuMemImportFromShareableHandle (the multicast object)");
      mc_held = true;
    }
    for (int r : local) {
      DeviceScope on(devices[r]);
      vmm.ok(mc->add_device(mc_handle, cu_device(devices[r])), "cuMulticastAddDevice");
    }
  });
  // Every device of the world is in the object now (together() above is
  // the barrier between the processes).
  together("bind its chunk to the multicast object", who, [&] {
    for (int r : local) {
      DeviceScope on(devices[r]);
      const CUdevice d = cu_device(devices[r]);
      vmm.ok(mc->bind_mem(mc_handle, 0, handles[r], 0, mc_bytes, 0), "cuMulticastBindMem (a rank's chunk)");
      mc_bound.push_back(d);
    }
    vmm.ok(vmm.reserve(&mc_va, mc_bytes, mc_gran, 0, 0), "cuMemAddressReserve (the multicast mapping)");
    vmm.ok(vmm.map(mc_va, mc_bytes, 0, mc_handle, 0), "cuMemMap (the multicast object)");
    mc_mapped = true;
    vmm.ok(vmm.set_access(mc_va, mc_bytes, access.data(), access.size()), "cuMemSetAccess (the multicast mapping)");
  });
#else
  (void)access;
  (void)who;
  throw RuntimeError("MoonEP was built with CUDA older than 12.1: no NVLink multicast");
#endif
}

GpuWorld::~GpuWorld() = default;

std::unique_ptr<GpuWorld> impl::WorldFactory::over(const Config& config, int device, std::unique_ptr<WorldPeers> peers,
                                                   const WorldOptions& options) {
  return std::unique_ptr<GpuWorld>(new GpuWorld(config, device, std::move(peers), options));
}

void impl::PlannerAccess::set_trace(GpuWorld& world, unsigned long long* trace) {
  GpuWorld::State& s = *world.s_;
  for (std::size_t r = 0; r < s.params.size(); ++r) {
    s.params[r].trace = trace ? trace + static_cast<i64>(r) * s.choice.bpr * kTracePoints : nullptr;
  }
}

const Config& GpuWorld::config() const { return s_->config; }
int GpuWorld::ranks() const { return s_->config.ranks; }
int GpuWorld::device(int rank) const { return s_->devices.at(rank); }
cudaStream_t GpuWorld::stream(int rank) const {
  if (!s_->is_local(rank)) {
    throw InputError("moonep::cuda::GpuWorld::stream: rank " + std::to_string(rank) + " is not one of this process's");
  }
  return s_->streams.at(rank);
}
int GpuWorld::process_rank() const { return s_->peers ? s_->peers->rank() : -1; }
Kernel GpuWorld::kernel() const { return s_->choice.kernel; }
int GpuWorld::blocks_per_rank() const { return s_->choice.bpr; }
bool GpuWorld::system_scope() const { return s_->base.sys_scope != 0; }
bool GpuWorld::multicast() const { return s_->base.mc_sym != nullptr; }
const DeviceRankPlan& GpuWorld::rank_plan(int rank) const { return s_->rank_plans.at(rank); }

void GpuWorld::plan_rank(int rank, const std::int32_t* d_routing, const std::int32_t* d_tpe, cudaStream_t stream,
                         const std::int32_t* d_tokens) {
  State& s = *s_;
  if (rank < 0 || rank >= s.config.ranks) {
    throw InputError("moonep::cuda::GpuWorld::plan_rank: rank " + std::to_string(rank) + " is not in [0, " +
                     std::to_string(s.config.ranks) + ")");
  }
  if (!s.is_local(rank)) {
    throw InputError("moonep::cuda::GpuWorld::plan_rank: rank " + std::to_string(rank) +
                     " is another process's (this one plans rank " + std::to_string(s.local[0]) + ")");
  }
  if (!d_routing) {
    throw InputError("moonep::cuda::GpuWorld::plan_rank: the routing of rank " + std::to_string(rank) + " is null");
  }
  impl::KernelParams& q = s.params[rank];
  q.routing[0] = d_routing;
  q.tpe[0] = d_tpe;
  q.counts[0] = d_tokens;
  s.last_routing[rank] = d_routing;
  s.last_tpe[rank] = d_tpe;
  s.last_counts[rank] = d_tokens;
  DeviceScope on(s.devices[rank]);
  void* args[] = {&q};
  impl::launch_cooperative(s.choice.func, s.choice.bpr, s.choice.smem, args, stream,
                           "launching a rank's planning kernel");
}

void GpuWorld::plan(const std::int32_t* const* d_routing, const std::int32_t* const* d_tpe, cudaStream_t origin,
                    const std::int32_t* const* d_tokens) {
  State& s = *s_;
  if (!d_routing) throw InputError("moonep::cuda::GpuWorld::plan: d_routing is null");
  for (int r : s.local) {
    if (!d_routing[r]) throw InputError("moonep::cuda::GpuWorld::plan: d_routing[" + std::to_string(r) + "] is null");
  }
  {
    // `origin` is a stream of the first local rank's device (an event is
    // recorded on a stream of its own device); the ranks' streams may wait
    // on it anywhere.
    DeviceScope on(s.devices[s.local[0]]);
    check_cuda(cudaEventRecord(s.forked, origin), "forking the step to the ranks' streams");
  }
  for (int r : s.local) {
    check_cuda(cudaStreamWaitEvent(s.streams[r], s.forked, 0), "forking the step to the ranks' streams");
  }
  for (int r : s.local) {
    plan_rank(r, d_routing[r], d_tpe ? d_tpe[r] : nullptr, s.streams[r], d_tokens ? d_tokens[r] : nullptr);
    DeviceScope on(s.devices[r]);
    check_cuda(cudaEventRecord(s.joined[r], s.streams[r]), "joining the ranks' streams");
  }
  for (int r : s.local) {
    check_cuda(cudaStreamWaitEvent(origin, s.joined[r], 0), "joining the ranks' streams");
  }
}

void GpuWorld::check() {
  State& s = *s_;
  const int R = s.config.ranks;
  std::vector<unsigned> epochs(static_cast<std::size_t>(R), 0u);
  for (int r : s.local) {
    DeviceScope on(s.devices[r]);
    check_cuda(cudaStreamSynchronize(s.streams[r]), "waiting for a rank's planning kernel");
    check_cuda(cudaMemcpy(&s.host_status[r], s.status[r], sizeof(impl::DeviceStatus), cudaMemcpyDeviceToHost),
               "reading a rank's planning status");
    check_cuda(cudaMemcpy(&epochs[r], s.params[r].loc_base + s.base.loc.epoch, 4, cudaMemcpyDeviceToHost),
               "reading a rank's step count");
  }
  if (s.peers) {
    // Every process learns every rank's status and step count (each
    // process contributes its one rank's).
    const int me = s.peers->rank();
    s.peers->allgather(&s.host_status[me], sizeof(impl::DeviceStatus), s.host_status.data());
    const unsigned mine = epochs[me];
    s.peers->allgather(&mine, sizeof mine, epochs.data());
  }
  // The step's status: the lowest bad entry and tokens_per_expert value of
  // any rank, every late wait; which ranks waited in vain and which never
  // ran their part (they neither waited nor finished: their step count did
  // not move).
  impl::DeviceStatus all = impl::kCleanStatus;
  std::vector<int> waited, missing;
  for (int r = 0; r < R; ++r) {
    const impl::DeviceStatus& st = s.host_status[r];
    all.bad_entry = std::min(all.bad_entry, st.bad_entry);
    all.bad_tpe = std::min(all.bad_tpe, st.bad_tpe);
    all.bad_count = std::min(all.bad_count, st.bad_count);
    all.internal |= st.internal;
    all.late |= st.late;
    if (st.late) waited.push_back(r);
    else if (epochs[r] == s.steps) missing.push_back(r);
  }
  if (impl::status_clean(all)) {
    ++s.steps;
    return;
  }
  // The bad value, read by the process that holds the rank, in the order
  // throw_status reports them: a count, an entry, a tokens_per_expert value.
  std::int32_t bad_value = 0;
  const unsigned long long bad_key = all.bad_count != ~0ull   ? all.bad_count
                                     : all.bad_entry != ~0ull ? all.bad_entry
                                                              : all.bad_tpe;
  if (bad_key != ~0ull) {
    const int rank = static_cast<int>(bad_key >> 32);
    const std::vector<const std::int32_t*>& from = all.bad_count != ~0ull   ? s.last_counts
                                                   : all.bad_entry != ~0ull ? s.last_routing
                                                                            : s.last_tpe;
    const std::int32_t* src = from.at(rank);
    if (s.is_local(rank) && src) {
      DeviceScope on(s.devices[rank]);
      check_cuda(cudaMemcpy(&bad_value, src + (bad_key & 0xffffffffull), sizeof bad_value, cudaMemcpyDeviceToHost),
                 "reading the bad input value");
    }
    if (s.peers) {
      std::vector<std::int32_t> values(static_cast<std::size_t>(R));
      s.peers->allgather(&bad_value, sizeof bad_value, values.data());
      bad_value = values[rank];
    }
  }
  // Reset before throwing: statuses, and after a late wait every chunk
  // (counters, step counts, gathered counts) as the constructor left it,
  // on every process before any starts the next step.
  for (int r : s.local) {
    DeviceScope on(s.devices[r]);
    check_cuda(cudaMemcpy(s.status[r], &impl::kCleanStatus, sizeof impl::kCleanStatus, cudaMemcpyHostToDevice),
               "resetting a rank's status");
    if (all.late) check_cuda(cudaMemset(s.chunk(r), 0, s.chunk_bytes), "resetting a rank's chunk");
    check_cuda(cudaDeviceSynchronize(), "resetting a rank's chunk");
  }
  if (s.peers) s.peers->barrier();
  if (all.late) {
    s.steps = 0;
  } else {
    ++s.steps;  // bad input: every rank still finished the step
  }
  std::ostringstream late;
  late << "moonep::cuda::GpuWorld: ";
  if (!missing.empty()) late << ranks_text(missing) << " did not arrive within " << s.options.timeout_s << " s: ";
  late << ranks_text(waited) << " gave up waiting at " << impl::late_counters(all.late);
  if (missing.empty()) late << " (every rank ran; their blocks were not all resident at once)";
  late << "; the step was abandoned and the world reset";
  impl::throw_status(all, s.config, [&](impl::BadInput, int, i64) { return bad_value; }, late.str());
}

HostPlan GpuWorld::copy_out() {
  check();
  const State& s = *s_;
  const int R = s.config.ranks;
  // The step's counts: each process reads its ranks' (S where none was
  // given); a step is ragged when any rank was given a count.
  std::vector<std::int32_t> counts(static_cast<std::size_t>(2 * R), 0);  // (given, s_r) per rank
  for (int r : s.local) {
    counts[2 * r + 1] = s.config.tokens;
    if (!s.last_counts[r]) continue;
    DeviceScope on(s.devices[r]);
    counts[2 * r] = 1;
    check_cuda(cudaMemcpy(&counts[2 * r + 1], s.last_counts[r], 4, cudaMemcpyDeviceToHost),
               "reading a rank's token count back");
  }
  if (s.peers) {
    const int me = s.peers->rank();
    const std::int32_t mine[2] = {counts[2 * me], counts[2 * me + 1]};
    s.peers->allgather(mine, sizeof mine, counts.data());
  }
  std::optional<TokensPerRank> tokens;
  for (int r = 0; r < R; ++r) {
    if (!counts[2 * r]) continue;
    tokens.emplace(static_cast<std::size_t>(R));
    for (int q = 0; q < R; ++q) (*tokens)[q] = counts[2 * q + 1];
    break;
  }
  // Every rank's outputs are mapped here; they are read through a device
  // of this process (the caller's device is current again afterwards).
  DeviceScope keep(s.devices[s.local[0]]);
  return impl::copy_plans_out(
      s.config, s.rank_plans,
      [&](int r) { check_cuda(cudaSetDevice(s.is_local(r) ? s.devices[r] : s.devices[s.local[0]]), "cudaSetDevice"); },
      tokens);
}

}  // namespace moonep::cuda
