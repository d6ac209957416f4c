// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep::cuda::GpuWorld (moonep/gpu_world.hpp): one cooperative launch per
// rank and the world-wide status check (bad input, ranks that never came,
// reset), over the parts in this folder: the symmetric buffer
// (symmetric_mapping.hpp), what the ranks agree on (agreement.hpp), the
// processes of a world of one process per rank (peers.hpp, mpi_peers.cpp)
// and the NVLink multicast opt-in (multicast.hpp).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../bench_access.hpp"
#include "../launch_setup.hpp"
#include "agreement.hpp"
#include "driver_api.hpp"
#include "layer_access.hpp"
#include "moonep/error.hpp"
#include "moonep/gpu_world.hpp"
#include "multicast.hpp"
#include "peers.hpp"
#include "symmetric_mapping.hpp"

namespace moonep::cuda {
namespace {
using i64 = std::int64_t;
using impl::check_cuda;
using impl::DeviceScope;
// The longest bad-input message handed between processes (they name a
// rank, an index and two numbers: well under this).
constexpr std::size_t kMessageBytes = 512;
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
  impl::Vmm vmm;
  // Bytes of a chunk before the rank's scratch: the symmetric part
  // (sym.words), with multicast padded to the part of every chunk bound to
  // the multicast object. The same in every chunk and every process.
  std::size_t sym_bytes = 0;
  // Declared in this order so the multicast object (bound to the chunks)
  // goes before the chunks.
  std::unique_ptr<impl::SymmetricMapping> chunks;
  std::unique_ptr<impl::Multicast> multicast;  // WorldOptions::multicast only
  std::vector<cudaStream_t> streams;      // per local rank (indexed by rank)
  std::vector<cudaEvent_t> joined;        // per local rank: its part of the step done
  cudaEvent_t forked = nullptr;           // on the first local rank's device: `origin` reached the step
  std::vector<impl::DeviceStatus*> status;       // per local rank, on its device
  std::vector<impl::DeviceStatus> host_status;   // per rank, after check() gathered them
  std::vector<DeviceRankPlan> rank_plans;
  std::vector<const std::int32_t*> last_routing, last_tpe, last_counts;
  std::vector<std::int64_t> last_routing_len;  // -1: room for S*K
  unsigned steps = 0;  // steps every rank finished since the last reset (= each rank's epoch)

  std::int32_t* chunk(int r) const { return chunks->chunk(r); }
  std::size_t chunk_bytes() const { return chunks->chunk_bytes(); }
  bool is_local(int r) const { return std::find(local.begin(), local.end(), r) != local.end(); }

  void build(const Config& config, const WorldOptions& options, const char* who);

  ~State() {
    for (std::size_t r = 0; r < streams.size(); ++r) {
      if (streams[r]) cudaStreamSynchronize(streams[r]);
    }
    for (auto* st : status) if (st) cudaFree(st);
    for (auto e : joined) if (e) cudaEventDestroy(e);
    if (forked) cudaEventDestroy(forked);
    for (auto st : streams) if (st) cudaStreamDestroy(st);
    // Then the members: the multicast object, then the chunks.
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
  if (!peers) impl::check_peer_access(devices, local, who);
  choice = impl::agreed_launch(config, options, devices, local, peers.get(), who);
  impl::KernelParams& p = base;
  impl::fill_params(p, config, choice);
  // Multicast is refused here, before any multicast object or chunk
  // exists, or sized: its part of every chunk.
  sym_bytes = static_cast<std::size_t>(p.sym.words) * 4;
  if (options.multicast) {
    multicast = std::make_unique<impl::Multicast>(vmm, devices, local, peers.get(), sym_bytes, who);
    sym_bytes = multicast->bytes();
  }
  // One chunk per rank: [symmetric | scratch | outputs].
  chunks = std::make_unique<impl::SymmetricMapping>(
      vmm, devices, local, sym_bytes + static_cast<std::size_t>(p.loc.words + p.out.words) * 4, peers.get());
  if (multicast) multicast->bind(*chunks, who);

  host_status.assign(static_cast<std::size_t>(R), impl::kCleanStatus);
  p.groups = 1;
  // System scope whenever ranks may be on different devices (another
  // process's rank may be), and with multicast (its reductions are
  // system-scope, and the polls that see them must be too).
  p.sys_scope = (here.size() > 1 || peers || options.system_scope || options.multicast) ? 1 : 0;
  p.timeout_ns = impl::timeout_ns_of(options.timeout_s, who);
  p.sym_base = chunk(0);
  p.sym_stride = static_cast<i64>(chunk_bytes() / 4);
  p.loc_stride = p.sym_stride;
  p.out_stride = p.sym_stride;
  // The kernel reduces the gathered counts and the counters into every
  // chunk at once through this mapping (byte 0 bound to byte 0 of every
  // rank's chunk), at the offsets of sym_base's, and reads its own chunk.
  p.mc_sym = multicast ? multicast->mapping() : nullptr;
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
    check_cuda(cudaMemset(chunk(r), 0, chunk_bytes()), "clearing a rank's chunk");
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
  last_routing_len.assign(R, -1);
}

GpuWorld::~GpuWorld() = default;

std::unique_ptr<GpuWorld> impl::WorldFactory::over(const Config& config, int device, std::unique_ptr<WorldPeers> peers,
                                                   const WorldOptions& options) {
  return std::unique_ptr<GpuWorld>(new GpuWorld(config, device, std::move(peers), options));
}

impl::WorldPeers* impl::LayerAccess::peers(GpuWorld& world) { return world.s_->peers.get(); }
double impl::LayerAccess::timeout_s(const GpuWorld& world) { return world.s_->options.timeout_s; }

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
                         const std::int32_t* d_tokens, std::int64_t routing_len) {
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
  q.routing_tokens[0] = impl::routing_tokens_of(s.config, routing_len);
  s.last_routing_len[rank] = routing_len;
  s.last_routing[rank] = d_routing;
  s.last_tpe[rank] = d_tpe;
  s.last_counts[rank] = d_tokens;
  DeviceScope on(s.devices[rank]);
  void* args[] = {&q};
  impl::launch_cooperative(s.choice.func, s.choice.bpr, s.choice.smem, args, stream,
                           "launching a rank's planning kernel");
}

void GpuWorld::plan(const std::int32_t* const* d_routing, const std::int32_t* const* d_tpe, cudaStream_t origin,
                    const std::int32_t* const* d_tokens, const std::int64_t* routing_len) {
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
    plan_rank(r, d_routing[r], d_tpe ? d_tpe[r] : nullptr, s.streams[r], d_tokens ? d_tokens[r] : nullptr,
              routing_len ? routing_len[r] : -1);
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
  // The bad rank's words, computed by the process that holds it (from its
  // inputs read back) and handed to every process.
  std::string bad_input;
  const int bad_rank = impl::first_bad_rank(all);
  if (bad_rank >= 0) {
    if (s.is_local(bad_rank)) {
      DeviceScope on(s.devices[bad_rank]);
      bad_input = impl::rank_input_error(s.config, bad_rank,
                                         {s.last_routing[bad_rank], s.last_routing_len[bad_rank],
                                          s.last_tpe[bad_rank], s.last_counts[bad_rank]});
    }
    if (s.peers) {
      char mine[kMessageBytes] = {};
      bad_input.copy(mine, sizeof mine - 1);
      std::vector<char> every(static_cast<std::size_t>(R) * kMessageBytes);
      s.peers->allgather(mine, sizeof mine, every.data());
      bad_input.assign(&every[static_cast<std::size_t>(bad_rank) * kMessageBytes]);
    }
  }
  // Reset before throwing: statuses, and after a late wait every chunk
  // (counters, step counts, gathered counts) as the constructor left it,
  // on every process before any starts the next step.
  for (int r : s.local) {
    DeviceScope on(s.devices[r]);
    check_cuda(cudaMemcpy(s.status[r], &impl::kCleanStatus, sizeof impl::kCleanStatus, cudaMemcpyHostToDevice),
               "resetting a rank's status");
    if (all.late) check_cuda(cudaMemset(s.chunk(r), 0, s.chunk_bytes()), "resetting a rank's chunk");
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
  impl::throw_status(all, s.config, [&](int) { return bad_input; }, late.str());
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
