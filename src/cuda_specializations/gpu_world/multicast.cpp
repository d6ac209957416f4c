// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The NVLink multicast opt-in (multicast.hpp), built with
// -DMoonEP_ENABLE_MULTICAST=ON only.
#include "multicast.hpp"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "../host_checks.hpp"

namespace moonep::cuda::impl {
namespace {

const char* const kNoMulticastObject = "; no multicast object was created";

// The driver calls of multicast: the device queries of its refusals and
// the object's life. They came with CUDA 12.1, so they are asked for as of
// that version (as of 12.0 the driver would not give them).
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

// Each piece is recorded as soon as it exists, so that the destructor
// undoes exactly what was done, also after a throw half-way.
struct Multicast::State {
  const Vmm& vmm;
  std::vector<int> devices, local;
  WorldPeers* peers;
  MulticastApi api;
  std::size_t gran = 0, bytes = 0;
  CUmemGenericAllocationHandle handle{};
  bool held = false;  // handle is this process's to release
  std::vector<CUdevice> bound;
  CUdeviceptr va = 0;
  bool mapped = false;

  State(const Vmm& v, const std::vector<int>& d, const std::vector<int>& l, WorldPeers* p)
      : vmm(v), devices(d), local(l), peers(p) {}
  ~State() {
    // In the reverse of its making: no mapping, no binding, no handle, no range.
    if (mapped) vmm.unmap(va, bytes);
#if CUDA_VERSION >= 12010
    for (CUdevice d : bound) api.unbind(handle, d, 0, bytes);  // offset and size as bound
#endif
    if (held) vmm.release(handle);
    if (va) vmm.address_free(va, bytes);
  }
  int ranks() const { return static_cast<int>(devices.size()); }
  void refuse(const std::string& who);
  void size(std::size_t sym_bytes, const std::string& who);
};

// One process: ranks sharing a device, then each device's support. One
// process per rank: every process's GPU first (its UUID: the same ordinal
// may be another GPU in another process), then every process's support,
// each gathered before anyone refuses.
void Multicast::State::refuse(const std::string& who) {
  const int R = ranks();
  const std::string head = who + ": ";
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
    for (int r = 0; r < R; ++r) {
      bool supported = false;
      try {
        supported = multicast_supported(api, vmm, devices[r]);
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

  const int me = peers->rank();
  struct Facts {
    unsigned char uuid[16];
    int device;  // numbered as in its process
    int failed;  // its query failed (its own error says why)
  };
  Facts mine{};
  mine.device = devices[me];
  std::string error;
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
  std::vector<int> failed;
  for (int r = 0; r < R; ++r) {
    if (all[r].failed) failed.push_back(r);
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
  int supported = -1;  // -1: the query failed
  try {
    supported = multicast_supported(api, vmm, devices[me]) ? 1 : 0;
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

// The minimum granularity, which is what cuMulticastCreate,
// cuMulticastBindMem and cuMulticastUnbind require of sizes and offsets
// (typically 2 MiB, the allocation granularity): every chunk is padded to
// it, and the recommended granularity can be hundreds of MiB.
void Multicast::State::size(std::size_t sym_bytes, const std::string& who) {
#if CUDA_VERSION >= 12010
  all_or_none(peers, "query the multicast granularity", who, [&] {
    CUmulticastObjectProp prop{};
    prop.numDevices = static_cast<unsigned>(ranks());
    prop.size = sym_bytes;
    prop.handleTypes = peers ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    DeviceScope on(devices[local[0]]);
    vmm.ok(api.granularity(&gran, &prop, CU_MULTICAST_GRANULARITY_MINIMUM), "cuMulticastGetGranularity");
    if (gran == 0) throw RuntimeError("cuMulticastGetGranularity gave a granularity of 0");
  });
  if (peers) {
    // (Powers of two: the largest is a multiple of every process's.)
    const unsigned long long mine = gran;
    std::vector<unsigned long long> all(static_cast<std::size_t>(ranks()));
    peers->allgather(&mine, sizeof mine, all.data());
    gran = static_cast<std::size_t>(*std::max_element(all.begin(), all.end()));
  }
  bytes = (sym_bytes + gran - 1) / gran * gran;
#else
  (void)sym_bytes;
  throw RuntimeError(who + ": MoonEP was built with CUDA older than 12.1: no NVLink multicast" + kNoMulticastObject);
#endif
}

Multicast::Multicast(const Vmm& vmm, const std::vector<int>& devices, const std::vector<int>& local,
                     WorldPeers* peers, std::size_t sym_bytes, const std::string& who)
    : s_(std::make_unique<State>(vmm, devices, local, peers)) {
  s_->refuse(who);
  s_->size(sym_bytes, who);
}

Multicast::~Multicast() = default;
std::size_t Multicast::bytes() const { return s_->bytes; }
std::int32_t* Multicast::mapping() const { return s_->mapped ? reinterpret_cast<std::int32_t*>(s_->va) : nullptr; }

// One process: create the object, add every device, bind every chunk. One
// process per rank: rank 0 creates it and hands it over as a file
// descriptor, each process adds its own device, and only when every
// process has (a bind or a mapping would otherwise wait for the rest
// without bound) binds its chunk.
void Multicast::bind(const SymmetricMapping& chunks, const std::string& who) {
#if CUDA_VERSION >= 12010
  State& s = *s_;
  CUmulticastObjectProp prop{};
  prop.numDevices = static_cast<unsigned>(s.ranks());  // a device per rank (refuse)
  prop.size = s.bytes;
  prop.handleTypes = s.peers ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  prop.flags = 0;
  const auto cu_device = [&](int ordinal) {
    CUdevice d = 0;
    s.vmm.ok(s.api.device_get(&d, ordinal), "cuDeviceGet");
    return d;
  };
  const bool creator = !s.peers || s.peers->rank() == 0;
  Descriptor shared;  // with peers: the object as a file descriptor (rank 0's export, the others' import)
  all_or_none(s.peers, "create the multicast object", who, [&] {
    if (!creator) return;
    DeviceScope on(s.devices[s.local[0]]);
    s.vmm.ok(s.api.create(&s.handle, &prop), "cuMulticastCreate");
    s.held = true;
    if (s.peers) {
      s.vmm.ok(s.vmm.export_handle(&shared.fd, s.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
               "cuMemExportToShareableHandle (the multicast object)");
    }
  });
  if (s.peers) {
    const int fd = s.peers->share_descriptor(creator ? shared.fd : -1);
    if (!creator) shared.fd = fd;
  }
  all_or_none(s.peers, "add its device to the multicast object", who, [&] {
    if (!creator) {
      s.vmm.ok(s.vmm.import_handle(&s.handle, reinterpret_cast<void*>(static_cast<std::intptr_t>(shared.fd)),
                                   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
               "cuMemImportFromShareableHandle (the multicast object)");
      s.held = true;
    }
    for (int r : s.local) {
      DeviceScope on(s.devices[r]);
      s.vmm.ok(s.api.add_device(s.handle, cu_device(s.devices[r])), "cuMulticastAddDevice");
    }
  });
  // Every device of the world is in the object now (all_or_none above is
  // the barrier between the processes).
  all_or_none(s.peers, "bind its chunk to the multicast object", who, [&] {
    for (int r : s.local) {
      DeviceScope on(s.devices[r]);
      const CUdevice d = cu_device(s.devices[r]);
      s.vmm.ok(s.api.bind_mem(s.handle, 0, chunks.handle(r), 0, s.bytes, 0), "cuMulticastBindMem (a rank's chunk)");
      s.bound.push_back(d);
    }
    s.vmm.ok(s.vmm.reserve(&s.va, s.bytes, s.gran, 0, 0), "cuMemAddressReserve (the multicast mapping)");
    s.vmm.ok(s.vmm.map(s.va, s.bytes, 0, s.handle, 0), "cuMemMap (the multicast object)");
    s.mapped = true;
    const std::vector<CUmemAccessDesc>& access = chunks.access();
    s.vmm.ok(s.vmm.set_access(s.va, s.bytes, access.data(), access.size()), "cuMemSetAccess (the multicast mapping)");
  });
#else
  (void)chunks;
  throw RuntimeError(who + ": MoonEP was built with CUDA older than 12.1: no NVLink multicast");
#endif
}

}  // namespace moonep::cuda::impl
