// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep-layer --world mpi: one MPI process per rank,
//   mpirun -np R moonep-layer --world mpi --input problem.json --x x.npy ...
// Every process reads the problem and the inputs and takes its own rank's
// rows; it plans its rank with the portable Planner over an MPI world
// (moonep/mpi_world.hpp; $MOONEP_MPI_WORLD: auto, shared or rma) and runs
// dispatch, combine and with --grad-out both backwards on moonep::MpiLayer
// (moonep/mpi_layer.hpp), or with --experts the linear layer on
// moonep::MpiMoeLayer (moonep/mpi_moe_layer.hpp: fetch, dispatch, GEMMs,
// combine; backward down to reduce), each process holding its rank's
// experts h*epn ..; rank 0 gathers every rank's results and writes the
// same files as the in-process run.
//
// Three stages (reading, the layer, writing), each ending with every
// process agreeing on its outcome (MpiStages, as moonep-plan --world mpi):
// one process's bad input makes every process exit with the same status
// and one error line for the job; no wait is unbounded
// ($MOONEP_MPI_TIMEOUT); nothing is written unless every rank ran.
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "error_line.hpp"
#include "kokkos_session.hpp"
#include "layer_bits.hpp"
#include "layer_run.hpp"
#include "moonep/mpi_layer.hpp"
#include "moonep/mpi_moe_layer.hpp"
#include "moonep/planner.hpp"
#include "mpi_session.hpp"
#include "mpi_stages.hpp"
#include "plan_options.hpp"

namespace moonep::tools {

namespace {

template <class V>
void append_view(Bits& bits, const V& view) {
  std::vector<double> v(view.size());
  for (std::size_t i = 0; i < view.size(); ++i)
    v[i] = static_cast<double>(static_cast<accum_t<typename V::non_const_value_type>>(view.data()[i]));
  append_bits(bits, v.data(), v.size());
}

// Rank r's rows of a [R][rows][width] file as a view of V (values rounded).
template <class V>
Kokkos::View<V**, Kokkos::LayoutRight, Kokkos::HostSpace> rank_rows(const char* label, const io::NpyArray& a, int r) {
  const std::int64_t rows = a.shape[1], width = a.shape[2];
  Kokkos::View<V**, Kokkos::LayoutRight, Kokkos::HostSpace> v(std::string(label), rows, width);
  const double* from = a.values.data() + static_cast<std::size_t>(r) * rows * width;
  for (std::int64_t i = 0; i < rows * width; ++i) v.data()[i] = static_cast<V>(static_cast<accum_t<V>>(from[i]));
  return v;
}

// Plans this rank of the problem (its S*K ids; a ragged step's tail is
// never read) with `planner`.
void plan_rank(Planner<Kokkos::DefaultHostExecutionSpace>& planner, const Problem& p, int me) {
  using Exec = Kokkos::DefaultHostExecutionSpace;
  using HostView = Kokkos::View<std::int32_t*, Kokkos::HostSpace>;
  const Config& c = p.config;
  const auto& row = p.routing[static_cast<std::size_t>(me)];
  HostView ids("moonep-layer.routing", static_cast<std::size_t>(c.entries()));
  std::copy(row.begin(), row.end(), ids.data());
  std::vector<Planner<Exec>::input_view> routing{ids}, tpe;
  if (p.tokens_per_expert) {
    const auto& t = (*p.tokens_per_expert)[static_cast<std::size_t>(me)];
    HostView v("moonep-layer.tokens_per_expert", t.size());
    std::copy(t.begin(), t.end(), v.data());
    tpe.push_back(v);
  }
  HostView counts("moonep-layer.tokens_per_rank", p.tokens_per_rank ? p.tokens_per_rank->size() : 0);
  if (p.tokens_per_rank) std::copy(p.tokens_per_rank->begin(), p.tokens_per_rank->end(), counts.data());
  const Planner<Exec>::input_view counts_in = counts;
  planner.plan(routing, p.tokens_per_expert ? &tpe : nullptr, p.tokens_per_rank ? &counts_in : nullptr);
}

// Rank h's experts P_h [epn][H*H'] of the experts file M [E][H][H'].
template <class T>
Kokkos::View<T**, Kokkos::LayoutRight, Kokkos::HostSpace> rank_experts(const io::NpyArray& m, const Config& c, int h) {
  const std::int64_t epn = c.experts_per_rank(), q = m.shape[1] * m.shape[2];
  Kokkos::View<T**, Kokkos::LayoutRight, Kokkos::HostSpace> v("experts", epn, q);
  const double* from = m.values.data() + static_cast<std::size_t>(h * epn * q);
  for (std::int64_t i = 0; i < epn * q; ++i) v.data()[i] = static_cast<T>(static_cast<accum_t<T>>(from[i]));
  return v;
}

template <class T>
Bits run_rank(MpiWorld& world, const LayerFiles& f, bool grads) {
  using W = weight_t<T>;
  const Config& c = f.problem.config;
  const int me = world.rank();
  Planner<Kokkos::DefaultHostExecutionSpace> planner(c, world);
  plan_rank(planner, f.problem, me);

  MpiLayer<T> layer(world, c, f.hidden);
  Kokkos::deep_copy(layer.recv(), T(0));  // undefined slots are written as 0 (before anyone writes here)
  layer.dispatch(planner.last_plan(), rank_rows<T>("x", f.x, me), rank_rows<W>("w", f.w, me));
  const std::int64_t S = c.tokens, H = f.hidden, K = c.topk, nvs = c.slots();
  Kokkos::View<T**, Kokkos::LayoutRight, Kokkos::HostSpace> out("out", S, H);  // zeroed: rows past s_r
  layer.combine(planner.last_plan(), layer.recv(), out);  // identity experts: y = recv
  Bits bits;
  append_view(bits, out);
  append_view(bits, layer.recv());
  if (!grads) return bits;
  Kokkos::View<T**, Kokkos::LayoutRight, Kokkos::HostSpace> gy("grad_y", nvs, H), gx("grad_x", S, H);
  Kokkos::View<W**, Kokkos::LayoutRight, Kokkos::HostSpace> gw("grad_w", S, K);
  layer.combine_backward(planner.last_plan(), rank_rows<T>("grad_out", f.grad_out, me), layer.recv(), gy, gw);
  layer.dispatch_backward(planner.last_plan(), gy, gx);  // identity experts: recv_w unused, no gradient
  append_view(bits, gx);
  append_view(bits, gw);
  return bits;
}

// --experts: the linear layer, forward and with --grad-out backward.
template <class T>
Bits run_rank_linear(MpiWorld& world, const LayerFiles& f, bool grads) {
  using W = weight_t<T>;
  const Config& c = f.problem.config;
  const int me = world.rank();
  Planner<Kokkos::DefaultHostExecutionSpace> planner(c, world);
  plan_rank(planner, f.problem, me);

  MpiMoeLayer<T> layer(world, c, f.hidden, f.hidden_out);
  Kokkos::deep_copy(layer.recv(), T(0));  // undefined slots are written as 0 (before anyone writes here)
  const auto experts = rank_experts<T>(f.experts, c, me);
  const std::int64_t S = c.tokens, H = f.hidden, O = f.hidden_out, K = c.topk;
  Kokkos::View<T**, Kokkos::LayoutRight, Kokkos::HostSpace> out("out", S, O);  // zeroed: rows past s_r
  layer.forward(planner.last_plan(), rank_rows<T>("x", f.x, me), rank_rows<W>("w", f.w, me), experts, out);
  Bits bits;
  append_view(bits, out);
  append_view(bits, layer.recv());
  if (!grads) return bits;
  Kokkos::View<T**, Kokkos::LayoutRight, Kokkos::HostSpace> gx("grad_x", S, H), gm("grad_experts", experts.extent(0),
                                                                                     experts.extent(1));
  Kokkos::View<W**, Kokkos::LayoutRight, Kokkos::HostSpace> gw("grad_w", S, K);
  layer.backward(planner.last_plan(), rank_rows<T>("grad_out", f.grad_out, me), experts, gx, gw, gm);
  append_view(bits, gx);
  append_view(bits, gw);
  append_view(bits, gm);
  return bits;
}

}  // namespace

int run_layer_mpi(const LayerOptions& o) {
  set_error_line_program("moonep-layer");
  std::string bad_timeout;
  const double timeout = env_mpi_timeout(&bad_timeout);
  const char* words = "$MOONEP_MPI_TIMEOUT";
  MpiSession session(timeout, words);
  MpiStages mpi(timeout, words);
  const int size = mpi.size();

  // Stage 1: every process reads the problem and the inputs.
  LayerFiles files;
  MpiWorldKind kind = MpiWorldKind::automatic;
  if (int s = mpi.run("reading the input", [&] {
        if (!bad_timeout.empty()) throw UsageError(bad_timeout);
        const char* env = std::getenv("MOONEP_MPI_WORLD");
        kind = mpi_world_kind_from_string(env && *env ? env : "auto");
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

  // Stage 2: plan this rank and run the layer on it.
  Bits mine;
  if (int s = mpi.run("running the layer", [&] {
        KokkosSession kokkos("moonep-layer", {});
        auto world = make_mpi_world(MPI_COMM_WORLD, kind, timeout);
        switch (o.dtype) {
          case LayerDtype::float64:
            mine = linear ? run_rank_linear<double>(*world, files, grads) : run_rank<double>(*world, files, grads);
            break;
          case LayerDtype::bfloat16:
            mine = linear ? run_rank_linear<bf16>(*world, files, grads) : run_rank<bf16>(*world, files, grads);
            break;
          case LayerDtype::float32:
            mine = linear ? run_rank_linear<float>(*world, files, grads) : run_rank<float>(*world, files, grads);
            break;
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
