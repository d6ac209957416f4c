// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-layer --world gpu under an MPI launch: one MPI process per rank
// over one GPU world (moonep::cuda::make_mpi_gpu_world),
//   mpirun -np R moonep-layer --world gpu --input problem.json --x x.npy ...
// Process r holds rank r on GPU devices[r mod n] (--devices, else the
// visible GPUs in turn); every process must be on one node (they may share
// a GPU). Every process reads the problem and the inputs and stages its own
// rank's routing and rows on its device; the world plans each process's
// rank, moonep::cuda::GpuWorldLayer (made collectively) applies the plan
// (identity experts, any --dtype: the reference's bits), or with --experts
// moonep::cuda::GpuWorldMoeLayer runs the linear layer (each process
// writes its rank's experts into the layer's symmetric memory); rank 0
// gathers every rank's results and writes the same files as the
// in-process run.
// The stages (reading, the layer, writing) and their agreement are
// --world mpi's (MpiStages): one process's bad input stops every process
// with the same status and one line; every wait is bounded ($MOONEP_MPI_TIMEOUT,
// and the world's own waits within it).
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "error_line.hpp"
#include "layer_bits.hpp"
#include "layer_run.hpp"
#include "moonep/bf16.hpp"
#include "moonep/error.hpp"
#include "moonep/gpu_world.hpp"
#include "moonep/gpu_world_layer.hpp"
#include "moonep/gpu_world_moe_layer.hpp"
#include "moonep/gpu_world_mpi.hpp"
#include "moonep/layer_reference.hpp"
#include "mpi_session.hpp"
#include "mpi_stages.hpp"
#include "plan_options.hpp"

namespace moonep::tools {

namespace {

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw RuntimeError(std::string("--world gpu: ") + what + ": " + cudaGetErrorString(e));
}

// The GPU world's bound on every wait (its kernels' and the layer's
// barriers' waits for another rank; its collectives at three times that,
// plus a second) within the stages' timeout, so that a rank that never
// comes is named by the world before rank 0 gives up on the stage; at most
// the world's default (as moonep-plan --world gpu under mpirun).
double world_timeout(double stage_timeout) { return std::min(cuda::WorldOptions().timeout_s, stage_timeout / 4); }

// n values of V on this process's device, zeroed or copied from the host.
template <class V>
struct DeviceArray {
  V* p = nullptr;
  std::size_t n = 0;
  explicit DeviceArray(std::size_t count) : n(count) {
    ok(cudaMalloc(reinterpret_cast<void**>(&p), (n ? n : 1) * sizeof(V)), "allocating a buffer");
    ok(cudaMemset(p, 0, (n ? n : 1) * sizeof(V)), "zeroing a buffer");
  }
  explicit DeviceArray(const std::vector<V>& host) : DeviceArray(host.size()) {
    ok(cudaMemcpy(p, host.data(), n * sizeof(V), cudaMemcpyHostToDevice), "copying an input to this rank's device");
  }
  ~DeviceArray() { cudaFree(p); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

// A pointer table indexed by rank with only this process's entry set.
template <class P>
std::vector<P> only_mine(int ranks, int me, P mine) {
  std::vector<P> t(static_cast<std::size_t>(ranks), nullptr);
  t[static_cast<std::size_t>(me)] = mine;
  return t;
}

// Rank r's part [per] of a flat [R][per] array of doubles, as V.
template <class V>
std::vector<V> part(const std::vector<double>& values, int r, std::size_t per) {
  std::vector<V> out(per);
  for (std::size_t i = 0; i < per; ++i) out[i] = static_cast<V>(static_cast<accum_t<V>>(values[r * per + i]));
  return out;
}
template <class V>
void append_device(Bits& bits, const void* device_ptr, std::size_t n) {
  std::vector<V> h(n);
  ok(cudaMemcpy(h.data(), device_ptr, n * sizeof(V), cudaMemcpyDefault), "copying a result to the host");
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<double>(static_cast<accum_t<V>>(h[i]));
  append_bits(bits, v.data(), n);
}

cuda::Element element_of(LayerDtype d) {
  return d == LayerDtype::float64 ? cuda::Element::f64
                                  : (d == LayerDtype::bfloat16 ? cuda::Element::bf16 : cuda::Element::f32);
}

int device_of(const LayerOptions& o, int rank) {
  std::string why;
  if (!cuda::device_available(&why)) throw RuntimeError("--world gpu: " + why);
  int visible = 0;
  ok(cudaGetDeviceCount(&visible), "cudaGetDeviceCount");
  if (o.devices.empty()) return rank % visible;
  return o.devices[static_cast<std::size_t>(rank) % o.devices.size()];
}

// --experts: the linear layer on this process's rank of the planned step
// (moonep::cuda::GpuWorldMoeLayer, made collectively): its experts P_me
// (M [E][H][H'] from expert me*epn on) written into the layer's symmetric
// memory, forward, and with grads backward; its results as bits (out, its
// rank's recv, grad_x, grad_w, its experts' gradients).
template <class T>
Bits run_rank_linear(cuda::GpuWorld& world, const LayerFiles& f, LayerDtype dtype, bool grads, cudaStream_t origin) {
  using W = weight_t<T>;
  const Config& c = f.problem.config;
  const int R = c.ranks, me = world.process_rank();
  const std::size_t S = static_cast<std::size_t>(c.tokens), K = static_cast<std::size_t>(c.topk),
                    H = static_cast<std::size_t>(f.hidden), O = static_cast<std::size_t>(f.hidden_out),
                    nvs = static_cast<std::size_t>(c.slots()), PQ = static_cast<std::size_t>(c.experts_per_rank()) * H * O;
  cuda::GpuWorldMoeLayer layer(world, f.hidden, f.hidden_out, element_of(dtype), grads);
  const std::vector<T> p = part<T>(f.experts.values, me, PQ);
  ok(cudaMemcpy(layer.experts(me), p.data(), PQ * sizeof(T), cudaMemcpyHostToDevice), "copying this rank's experts");
  DeviceArray<T> x(part<T>(f.x.values, me, S * H)), out(S * O);
  DeviceArray<W> w(part<W>(f.w.values, me, S * K));
  const auto x_t = only_mine<const void*>(R, me, x.p), w_t = only_mine<const void*>(R, me, w.p);
  const auto out_t = only_mine<void*>(R, me, out.p);
  layer.forward(x_t.data(), w_t.data(), out_t.data(), origin);  // refuses an unrunnable plan on every process
  std::unique_ptr<DeviceArray<T>> g, gx, gm;
  std::unique_ptr<DeviceArray<W>> gw;
  if (grads) {
    g = std::make_unique<DeviceArray<T>>(part<T>(f.grad_out.values, me, S * O));
    gx = std::make_unique<DeviceArray<T>>(S * H);
    gw = std::make_unique<DeviceArray<W>>(S * K);
    gm = std::make_unique<DeviceArray<T>>(PQ);
    const auto g_t = only_mine<const void*>(R, me, g->p);
    const auto gx_t = only_mine<void*>(R, me, gx->p), gw_t = only_mine<void*>(R, me, gw->p),
               gm_t = only_mine<void*>(R, me, gm->p);
    layer.backward(g_t.data(), gx_t.data(), gw_t.data(), gm_t.data(), origin);
  }
  ok(cudaStreamSynchronize(origin), "running the step");
  layer.check();  // collective: a barrier that gave up fails the stage on every process
  Bits bits;
  append_device<T>(bits, out.p, S * O);
  append_device<T>(bits, layer.layer().recv(me), nvs * H);
  if (grads) {
    append_device<T>(bits, gx->p, S * H);
    append_device<W>(bits, gw->p, S * K);
    append_device<T>(bits, gm->p, PQ);
  }
  return bits;
}

// This process's rank of the step: planned by the world, dispatched,
// identity experts (y = recv; in the backward grad_recv = grad_y),
// combined, and with grads both backwards; its results as bits (out, its
// rank's recv, grad_x, grad_w). With --experts the linear layer instead
// (run_rank_linear).
template <class T>
Bits run_rank(cuda::GpuWorld& world, const LayerFiles& f, LayerDtype dtype, bool grads, bool linear) {
  using W = weight_t<T>;
  const Problem& p = f.problem;
  const Config& c = p.config;
  const int R = c.ranks, me = world.process_rank();
  const std::size_t S = static_cast<std::size_t>(c.tokens), K = static_cast<std::size_t>(c.topk),
                    H = static_cast<std::size_t>(f.hidden), nvs = static_cast<std::size_t>(c.slots());
  ok(cudaSetDevice(world.device(me)), "cudaSetDevice");
  // This rank's part of the problem on its device.
  const auto& ids = p.routing[static_cast<std::size_t>(me)];
  DeviceArray<std::int32_t> routing(ids);
  std::unique_ptr<DeviceArray<std::int32_t>> tpe, count;
  if (p.tokens_per_expert) tpe = std::make_unique<DeviceArray<std::int32_t>>((*p.tokens_per_expert)[me]);
  if (p.tokens_per_rank)
    count = std::make_unique<DeviceArray<std::int32_t>>(std::vector<std::int32_t>{(*p.tokens_per_rank)[me]});
  const auto routing_t = only_mine<const std::int32_t*>(R, me, routing.p);
  const auto tpe_t = only_mine<const std::int32_t*>(R, me, tpe ? tpe->p : nullptr);
  const auto count_t = only_mine<const std::int32_t*>(R, me, count ? count->p : nullptr);
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(R), -1);
  lengths[me] = static_cast<std::int64_t>(ids.size());
  cudaStream_t origin = nullptr;
  ok(cudaStreamCreateWithFlags(&origin, cudaStreamNonBlocking), "creating the origin stream");
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() {
      cudaStreamSynchronize(s);
      cudaStreamDestroy(s);
    }
  } guard{origin};
  world.plan(routing_t.data(), tpe ? tpe_t.data() : nullptr, origin, count ? count_t.data() : nullptr, lengths.data());
  world.check();  // collective; the problem was validated when read, this surfaces anything else
  if (linear) return run_rank_linear<T>(world, f, dtype, grads, origin);

  // Collective: every process makes the layer together (the slot buffers
  // start zeroed: undefined slots are written as 0).
  cuda::GpuWorldLayer layer(world, f.hidden, f.hidden, element_of(dtype), grads);
  DeviceArray<T> x(part<T>(f.x.values, me, S * H)), out(S * H);
  DeviceArray<W> w(part<W>(f.w.values, me, S * K));
  std::unique_ptr<DeviceArray<T>> g, gx;
  std::unique_ptr<DeviceArray<W>> gw;
  if (grads) {
    g = std::make_unique<DeviceArray<T>>(part<T>(f.grad_out.values, me, S * H));
    gx = std::make_unique<DeviceArray<T>>(S * H);
    gw = std::make_unique<DeviceArray<W>>(S * K);
  }
  const auto x_t = only_mine<const void*>(R, me, x.p), w_t = only_mine<const void*>(R, me, w.p);
  const auto out_t = only_mine<void*>(R, me, out.p);
  const std::size_t slot_bytes = nvs * H * sizeof(T);
  layer.dispatch(x_t.data(), w_t.data(), origin);
  // Identity experts on this rank: y = recv (every source's rows are in,
  // the dispatch's last barrier passed).
  ok(cudaMemcpyAsync(layer.y(me), layer.recv(me), slot_bytes, cudaMemcpyDeviceToDevice, origin), "the identity experts");
  layer.combine(out_t.data(), true, origin);
  if (grads) {
    const auto g_t = only_mine<const void*>(R, me, g->p);
    const auto gx_t = only_mine<void*>(R, me, gx->p), gw_t = only_mine<void*>(R, me, gw->p);
    layer.combine_backward(g_t.data(), true, gw_t.data(), origin);
    ok(cudaMemcpyAsync(layer.grad_recv(me), layer.grad_y(me), slot_bytes, cudaMemcpyDeviceToDevice, origin),
       "the identity experts' backward");
    layer.dispatch_backward(gx_t.data(), nullptr, origin);  // no recv_w gradient from identity experts
  }
  ok(cudaStreamSynchronize(origin), "running the step");
  layer.check();  // collective: a barrier that gave up fails the stage on every process
  Bits bits;
  append_device<T>(bits, out.p, S * H);
  append_device<T>(bits, layer.recv(me), nvs * H);
  if (grads) {
    append_device<T>(bits, gx->p, S * H);
    append_device<W>(bits, gw->p, S * K);
  }
  return bits;
}

}  // namespace

int run_layer_gpu_mpi(const LayerOptions& o) {
  set_error_line_program("moonep-layer");
  std::string bad_timeout;
  const double timeout = env_mpi_timeout(&bad_timeout);
  const char* words = "$MOONEP_MPI_TIMEOUT";
  MpiSession session(timeout, words);
  MpiStages mpi(timeout, words);
  const int size = mpi.size();

  // Stage 1: every process reads the problem and the inputs.
  LayerFiles files;
  if (int s = mpi.run("reading the input", [&] {
        if (!bad_timeout.empty()) throw UsageError(bad_timeout);
        if (mpi.rank() == 0) layer_outputs(o).check();  // before any work: a path that cannot be written
        files = read_layer_files(o);
        const int R = files.problem.config.ranks;
        if (R != size)
          throw InputError("the problem has ranks = " + std::to_string(R) + " but " + std::to_string(size) +
                           " MPI processes were started; run it with mpirun -np " + std::to_string(R));
      })) {
    return s;
  }
  const bool grads = !o.grad_out.empty(), linear = !o.experts.empty();

  // Stage 2: this process's rank of the GPU world, planned and applied.
  Bits mine;
  if (int s = mpi.run("running the layer", [&] {
        cuda::WorldOptions wo;
        wo.timeout_s = world_timeout(timeout);
        auto world = cuda::make_mpi_gpu_world(files.problem.config, MPI_COMM_WORLD, device_of(o, mpi.rank()), wo);
        switch (o.dtype) {
          case LayerDtype::float64: mine = run_rank<double>(*world, files, o.dtype, grads, linear); break;
          case LayerDtype::bfloat16: mine = run_rank<bf16>(*world, files, o.dtype, grads, linear); break;
          case LayerDtype::float32: mine = run_rank<float>(*world, files, o.dtype, grads, linear); break;
        }
      })) {
    return s;
  }

  // Stage 3: rank 0 gathers and writes; everyone learns whether it worked.
  return mpi.run("writing the files", [&] {
    const std::vector<int> all = mpi.gather(mine, "gathering the results");
    if (mpi.rank() == 0)
      write_layer_files(o, files, unpack_bits(all, files.problem.config, files.hidden, files.hidden_out, grads, linear));
  });
}

}  // namespace moonep::tools
