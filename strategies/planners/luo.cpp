// Pipeline planner "after Luo et al." (Luo, Yi, Long, Fan, Wu, Yang, Lin, "Efficient Pipeline Planning for
// Expedited Distributed DNN Training", INFOCOM 2022). The paper body is not available to us (seed-algorithms §5):
// this is our own design for the problem its abstract states -- synchronous pipeline training with a
// per-iteration barrier (gradients of all micro-batches aggregated before the update) on GPUs with ARBITRARY
// connectivity: (1) partition the layers into stages and map the stages (and their data-parallel copies) onto
// GPUs using the pairwise bandwidths of the actual network, and (2) order the forward/backward tasks of the
// micro-batches on every stage. It is not the paper's algorithm and makes no claim to its bounds.
//
// Planner devices are tensor-parallel groups of `tp` consecutive GPUs of a node (1 = plain GPUs). For every
// pipeline degree p dividing the D devices (dp = D / p pipeline copies) and micro-batch size b:
//
//  1. Partition (exact for given links). With the cost c_k of stage boundary k (activation forward + gradient
//     back, slowest copy), a dynamic program over (layer prefix, stages) minimises the bottleneck
//         max( max_s b T(stage s), max_k c_k )
//     over contiguous partitions whose stages fit memory with the 1F1B in-flight count min(M, p - s).
//     Optimal for the given boundary costs (min-max over contiguous splits is decomposable).
//  2. Mapping (local search, deterministic). The p x dp positions (stage s, copy d) are assigned to devices with
//     the pairwise latency/bandwidth of the cluster (traces/routing.hpp PairLinks: routed paths on graphs,
//     NVSwitch/NIC on two-level clusters). Objective J: the barrier time of the 1F1B list schedule (step 3's
//     evaluator) with the mapped boundary delays and, after each stage's last backward, AR_s = the ring
//     all-reduce of its gradients over its dp copies in copy order (slowest hop). Starting points: Megatron's layout
//     (copies inside a node), pipeline-inner layout, a greedy pipeline chain (each next stage on the unassigned device
//     nearest the previous one) and greedy data-parallel rings; the best is improved by first-improvement pairwise
//     swaps until no swap helps or an evaluation budget is spent. Guarantee: a local optimum of J under swaps (when the
//     budget is not hit), never worse than the best starting layout. Steps 1 and 2 alternate (the partition re-run with
//     the mapped boundary costs) until the partition stops changing (at most 4 rounds).
//  3. Micro-batch scheduler. Every stage runs "warm-up K_s forwards, then backward/forward in turn, then the
//     remaining backwards" (K_s = p - s is DAPPLE's early backward = Megatron's 1F1B; K_s >= M is GPipe). A list
//     schedule of the task graph {F(i,s), B(i,s), transfers, AR_s after the last B} with the mapped boundary
//     delays evaluates an order; coordinate descent moves each K_s by +-1 within its memory cap while the
//     barrier time improves. Guarantee: the emitted order is deadlock-free (validated) and, under this
//     evaluation, no slower than 1F1B. Orders that differ from 1F1B are emitted as a custom schedule.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include "strategies/planners/luo.hpp"

#include "strategies/planners/layer_chain.hpp"
#include "strategies/planners/registry.hpp"
#include "strategies/schedule.hpp"
#include "traces/routing.hpp"

namespace dtsim::planning {
namespace {

/// Local-search budget per (p, b) candidate. On a two-level cluster every GPU of a node sees the same links and
/// every node the same network, so the mapping is essentially which axis lives inside a node -- the starting
/// layouts cover that and a small budget suffices; arbitrary graphs get the large one.
constexpr std::size_t kSwapEvaluationsGraph = 20000;
constexpr std::size_t kSwapEvaluationsTwoLevel = 1000;
constexpr int kRounds = 4;  ///< partition <-> mapping alternations

/// Pairwise links between planner devices (device g = GPUs g*tp .. g*tp+tp-1; TP rank t talks to TP rank t of the
/// other group, so the link of GPU g*tp to GPU h*tp stands for all of them).
struct DeviceLinks {
  int n = 0;
  std::vector<PairLink> link;
  const PairLink& at(int a, int b) const { return link[static_cast<std::size_t>(a) * n + b]; }
};

DeviceLinks device_links(const PlannerInput& in, int tp) {
  PairLinks pl(in.cluster, in.calibration);
  DeviceLinks d;
  d.n = in.cluster.total_gpus() / tp;
  d.link.resize(static_cast<std::size_t>(d.n) * d.n);
  for (int a = 0; a < d.n; ++a)
    for (int b = 0; b < d.n; ++b) d.link[static_cast<std::size_t>(a) * d.n + b] = pl.get(a * tp, b * tp);
  return d;
}

/// One (p, dp, b) problem.
struct Problem {
  const LayerChain* ch = nullptr;
  const DeviceLinks* links = nullptr;
  int p = 1, dp = 1, mbs = 1, M = 1;
  double step_overhead_s = 0;
  double grad_bytes_per_param = 2;
  bool graph = false;                            ///< the cluster is an explicit network graph
  std::vector<std::vector<PipeOp>> orders_1f1b;  ///< K_s = min(M, p - s): the orders the mapping is scored with
};

struct Partition {
  std::vector<int> layers;  ///< per stage
  std::vector<double> T;    ///< compute of one micro-batch per stage (b * per-sample)
  std::vector<double> F;    ///< forward part of T
  std::vector<double> grad_bytes;
};

/// Position (s, d) -> device, stored at s * dp + d.
using Mapping = std::vector<int>;

struct MappedCosts {
  std::vector<double> boundary_s;  ///< c_k: both directions of boundary k for one micro-batch, slowest copy
  std::vector<double> all_reduce_s;
  double block = 0, objective = 0;
};

/// The list scheduler's view of a partition under a mapping: forward/backward per stage, one-way transfers.
luo::StageTimes stage_times(const Partition& part, const MappedCosts& mc) {
  luo::StageTimes st;
  st.forward_s = part.F;
  for (std::size_t s = 0; s < part.T.size(); ++s) st.backward_s.push_back(part.T[s] - part.F[s]);
  for (double c : mc.boundary_s) st.send_s.push_back(c / 2);
  st.all_reduce_s = mc.all_reduce_s;
  return st;
}

MappedCosts mapped_costs(const Problem& pr, const Partition& part, const Mapping& map) {
  MappedCosts mc;
  const double bytes = pr.mbs * pr.ch->boundary_bytes;
  mc.boundary_s.assign(static_cast<std::size_t>(pr.p - 1), 0.0);
  for (int k = 0; k + 1 < pr.p; ++k)
    for (int d = 0; d < pr.dp; ++d)
      mc.boundary_s[k] =
          std::max(mc.boundary_s[k], 2.0 * pr.links->at(map[k * pr.dp + d], map[(k + 1) * pr.dp + d]).time_s(bytes));
  mc.all_reduce_s.assign(static_cast<std::size_t>(pr.p), 0.0);
  if (pr.dp > 1)
    for (int s = 0; s < pr.p; ++s) {
      double lat = 0, bw = kInf;
      for (int d = 0; d < pr.dp; ++d) {
        const PairLink& l = pr.links->at(map[s * pr.dp + d], map[s * pr.dp + (d + 1) % pr.dp]);
        lat = std::max(lat, l.latency_s);
        bw = std::min(bw, l.bandwidth_Bps);
      }
      const int n = pr.dp;
      mc.all_reduce_s[s] = 2.0 * (n - 1) * (lat + pr.step_overhead_s) + 2.0 * (n - 1) / n * part.grad_bytes[s] / bw;
    }
  double fill = 0, xfers = 0;
  for (double t : part.T) mc.block = std::max(mc.block, t), fill += t;
  for (double c : mc.boundary_s) mc.block = std::max(mc.block, c), xfers += c;
  if (part.F.empty()) {  // no partition yet (round 0 only needs the boundary costs)
    mc.objective = (pr.M - 1) * mc.block + fill + xfers;
    return mc;
  }
  mc.objective = luo::evaluate_orders(pr.orders_1f1b, stage_times(part, mc), pr.M);
  return mc;
}

/// Step 1: min-max contiguous partition for given boundary costs; nullopt if no partition fits memory.
std::optional<Partition> partition(const Problem& pr, const std::vector<double>& boundary_s) {
  const LayerChain& ch = *pr.ch;
  const int L = ch.num_layers, p = pr.p;
  if (p > L) return std::nullopt;
  const double limit = ch.memory_limit_bytes - ch.reserved_bytes;
  const auto idx = [L](int s, int j) { return static_cast<std::size_t>(s) * (L + 1) + j; };
  std::vector<double> A(static_cast<std::size_t>(p + 1) * (L + 1), kInf);
  std::vector<int> from(A.size(), -1);
  A[idx(0, 0)] = 0;
  for (int s = 1; s <= p; ++s) {
    const int in_flight = std::min(pr.M, p - (s - 1));
    const double edge = s > 1 ? boundary_s[s - 2] : 0.0;
    for (int j = s; j <= L - (p - s); ++j)
      for (int i = s - 1; i < j; ++i) {
        if (A[idx(s - 1, i)] == kInf) continue;
        if (ch.range_static(i, j) + pr.mbs * ch.range_act(i, j) * in_flight > limit) continue;
        const double v = std::max({A[idx(s - 1, i)], pr.mbs * ch.range_compute(i, j), edge});
        if (v < A[idx(s, j)]) A[idx(s, j)] = v, from[idx(s, j)] = i;
      }
  }
  if (A[idx(p, L)] == kInf) return std::nullopt;
  Partition part;
  for (int s = p, j = L; s > 0; --s) {
    const int i = from[idx(s, j)];
    part.layers.push_back(j - i);
    j = i;
  }
  std::reverse(part.layers.begin(), part.layers.end());
  for (int s = 0, first = 0; s < p; first += part.layers[s++]) {
    const int last = first + part.layers[s];
    part.T.push_back(pr.mbs * ch.range_compute(first, last));
    part.F.push_back(pr.mbs * ch.range_forward(first, last));
    part.grad_bytes.push_back(ch.range_params(first, last) * pr.grad_bytes_per_param);
  }
  return part;
}

/// Starting layouts of step 2.
std::vector<Mapping> initial_mappings(const Problem& pr, const Partition& part) {
  const int p = pr.p, dp = pr.dp, D = p * dp;
  std::vector<Mapping> out;
  Mapping m(static_cast<std::size_t>(D));
  for (int s = 0; s < p; ++s)
    for (int d = 0; d < dp; ++d) m[s * dp + d] = s * dp + d;  // Megatron: copies of a stage adjacent
  out.push_back(m);
  for (int s = 0; s < p; ++s)
    for (int d = 0; d < dp; ++d) m[s * dp + d] = d * p + s;  // pipelines adjacent
  out.push_back(m);
  const double bytes = pr.mbs * pr.ch->boundary_bytes;
  auto nearest = [&](int from, const std::vector<char>& used, double payload) {
    int best = -1;
    double best_t = kInf;
    for (int g = 0; g < D; ++g)
      if (!used[g]) {
        const double t = pr.links->at(from, g).time_s(payload);
        if (t < best_t) best_t = t, best = g;
      }
    return best;
  };
  {  // greedy pipeline chains
    std::vector<char> used(static_cast<std::size_t>(D), 0);
    for (int d = 0; d < dp; ++d) {
      int g = static_cast<int>(std::find(used.begin(), used.end(), 0) - used.begin());
      for (int s = 0; s < p; ++s) {
        if (s > 0) g = nearest(m[(s - 1) * dp + d], used, bytes);
        m[s * dp + d] = g;
        used[g] = 1;
      }
    }
    out.push_back(m);
  }
  {  // greedy data-parallel rings
    std::vector<char> used(static_cast<std::size_t>(D), 0);
    for (int s = 0; s < p; ++s) {
      int g = static_cast<int>(std::find(used.begin(), used.end(), 0) - used.begin());
      for (int d = 0; d < dp; ++d) {
        if (d > 0) g = nearest(m[s * dp + d - 1], used, std::max(1.0, part.grad_bytes[s] / dp));
        m[s * dp + d] = g;
        used[g] = 1;
      }
    }
    out.push_back(m);
  }
  return out;
}

struct MapResult {
  Mapping map;
  MappedCosts costs;
};

/// Step 2: best starting layout, then first-improvement pairwise swaps.
MapResult map_devices(const Problem& pr, const Partition& part) {
  MapResult best;
  best.costs.objective = kInf;
  for (auto& m : initial_mappings(pr, part)) {
    MappedCosts c = mapped_costs(pr, part, m);
    if (c.objective < best.costs.objective * (1 - 1e-12)) best = {std::move(m), std::move(c)};
  }
  const int D = pr.p * pr.dp;
  const std::size_t budget = pr.graph ? kSwapEvaluationsGraph : kSwapEvaluationsTwoLevel;
  std::size_t evals = 0;
  bool improved = true;
  while (improved && evals < budget) {
    improved = false;
    for (int a = 0; a < D && evals < budget; ++a)
      for (int b = a + 1; b < D && evals < budget; ++b) {
        // Swapping two copies of the same stage is a pure relabelling unless a ring order changes.
        std::swap(best.map[a], best.map[b]);
        MappedCosts c = mapped_costs(pr, part, best.map);
        ++evals;
        if (c.objective < best.costs.objective * (1 - 1e-9)) {
          best.costs = std::move(c);
          improved = true;
        } else {
          std::swap(best.map[a], best.map[b]);
        }
      }
  }
  return best;
}

}  // namespace

namespace luo {

std::vector<PipeOp> warmup_order(int M, int K) {
  std::vector<PipeOp> o;
  K = std::clamp(K, 1, M);
  int f = 0, b = 0;
  for (; f < K; ++f) o.push_back({PipeOp::Kind::F, f, 0});
  while (b < M) {
    o.push_back({PipeOp::Kind::B, b++, 0});
    if (f < M) o.push_back({PipeOp::Kind::F, f++, 0});
  }
  return o;
}

double evaluate_orders(const std::vector<std::vector<PipeOp>>& orders, const StageTimes& st, int M) {
  const int p = static_cast<int>(orders.size());
  std::vector<double> f_end(static_cast<std::size_t>(p) * M, -1), b_end(f_end.size(), -1);
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<double> free_at(static_cast<std::size_t>(p), 0);
  std::size_t remaining = 0;
  for (const auto& o : orders) remaining += o.size();
  const auto at = [M](int s, int i) { return static_cast<std::size_t>(s) * M + i; };
  while (remaining > 0) {
    bool progress = false;
    for (int s = 0; s < p; ++s)
      while (next[s] < orders[s].size()) {
        const PipeOp& op = orders[s][next[s]];
        double ready;
        if (op.kind == PipeOp::Kind::F) {
          if (s > 0 && f_end[at(s - 1, op.microbatch)] < 0) break;
          ready = s > 0 ? f_end[at(s - 1, op.microbatch)] + st.send_s[s - 1] : 0.0;
        } else {
          if (f_end[at(s, op.microbatch)] < 0) break;
          if (s + 1 < p && b_end[at(s + 1, op.microbatch)] < 0) break;
          ready =
              std::max(f_end[at(s, op.microbatch)], s + 1 < p ? b_end[at(s + 1, op.microbatch)] + st.send_s[s] : 0.0);
        }
        const double start = std::max(ready, free_at[s]);
        free_at[s] = start + (op.kind == PipeOp::Kind::F ? st.forward_s[s] : st.backward_s[s]);
        (op.kind == PipeOp::Kind::F ? f_end : b_end)[at(s, op.microbatch)] = free_at[s];
        ++next[s];
        --remaining;
        progress = true;
      }
    if (!progress) return kInf;
  }
  double t = 0;
  for (int s = 0; s < p; ++s) t = std::max(t, free_at[s] + st.all_reduce_s[s]);
  return t;
}

}  // namespace luo

namespace {

struct ScheduleChoice {
  std::vector<int> K;
  double time_s = kInf;
};

/// Step 3: coordinate descent on the warm-up counts within each stage's memory cap.
ScheduleChoice choose_schedule(const Problem& pr, const Partition& part, const MappedCosts& mc) {
  const LayerChain& ch = *pr.ch;
  const double limit = ch.memory_limit_bytes - ch.reserved_bytes;
  std::vector<int> cap(static_cast<std::size_t>(pr.p));
  for (int s = 0, first = 0; s < pr.p; first += part.layers[s++]) {
    const int last = first + part.layers[s];
    const double per = pr.mbs * ch.range_act(first, last);
    const double room = limit - ch.range_static(first, last);
    cap[s] = per > 0 ? static_cast<int>(std::clamp(std::floor(room / per), 1.0, static_cast<double>(pr.M))) : pr.M;
  }
  auto orders_of = [&](const std::vector<int>& K) {
    std::vector<std::vector<PipeOp>> o;
    o.reserve(pr.p);
    for (int s = 0; s < pr.p; ++s) o.push_back(luo::warmup_order(pr.M, K[s]));
    return o;
  };
  const luo::StageTimes st = stage_times(part, mc);
  ScheduleChoice best;
  for (int s = 0; s < pr.p; ++s) best.K.push_back(std::min({pr.M, pr.p - s, std::max(cap[s], 1)}));
  best.time_s = luo::evaluate_orders(orders_of(best.K), st, pr.M);
  for (int pass = 0; pass < 50; ++pass) {
    bool improved = false;
    for (int s = 0; s < pr.p; ++s)
      for (int delta : {+1, -1}) {
        std::vector<int> K = best.K;
        K[s] += delta;
        if (K[s] < 1 || K[s] > cap[s]) continue;
        const double t = luo::evaluate_orders(orders_of(K), st, pr.M);
        if (t < best.time_s * (1 - 1e-9)) best = {std::move(K), t}, improved = true;
      }
    if (!improved) break;
  }
  return best;
}

class LuoPlanner final : public Planner {
public:
  std::string name() const override { return "luo"; }

  PlannerResult plan(const PlannerInput& in) const override {
    const auto t0 = std::chrono::steady_clock::now();
    PlannerResult r;
    r.planner = name();
    const int tp = in.tensor_parallel;
    const LayerChain ch = build_chain(in, tp);
    const DeviceLinks links = device_links(in, tp);
    const int D = ch.devices;
    for (int p = 1; p <= std::min(D, ch.num_layers); ++p) {
      if (D % p != 0) continue;
      const int dp = D / p;
      for (int mbs = 1; mbs * dp <= in.global_batch_size; mbs *= 2) {
        if (in.global_batch_size % (mbs * dp) != 0) continue;
        ++r.considered;
        Problem pr;
        pr.ch = &ch;
        pr.links = &links;
        pr.p = p;
        pr.dp = dp;
        pr.mbs = mbs;
        pr.M = in.global_batch_size / (mbs * dp);
        pr.step_overhead_s = in.calibration.collective_step_overhead_s;
        pr.grad_bytes_per_param = dtype_bytes(in.model.dtype);
        pr.graph = in.cluster.has_graph();
        for (int s = 0; s < p; ++s) pr.orders_1f1b.push_back(luo::warmup_order(pr.M, std::min(pr.M, p - s)));
        if (auto cand = solve(in, ch, pr)) r.ranked.push_back(std::move(*cand));
        else ++r.over_memory;
      }
    }
    finish(r, t0);
    return r;
  }

private:
  static std::optional<Candidate> solve(const PlannerInput& in, const LayerChain& ch, const Problem& pr) {
    // Round 0 assumes the Megatron layout's links, then alternates partition and mapping.
    Mapping identity(static_cast<std::size_t>(pr.p * pr.dp));
    for (std::size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<int>(i);
    std::vector<double> boundary(static_cast<std::size_t>(std::max(pr.p - 1, 0)), 0.0);
    {
      Partition probe;
      probe.grad_bytes.assign(static_cast<std::size_t>(pr.p), 0.0);
      probe.T.assign(static_cast<std::size_t>(pr.p), 0.0);
      boundary = mapped_costs(pr, probe, identity).boundary_s;
    }
    std::optional<Partition> part;
    MapResult mapped;
    for (int round = 0; round < kRounds; ++round) {
      auto next = partition(pr, boundary);
      if (!next) return std::nullopt;
      if (part && next->layers == part->layers) break;
      part = std::move(next);
      mapped = map_devices(pr, *part);
      boundary = mapped.costs.boundary_s;
    }
    const ScheduleChoice sc = choose_schedule(pr, *part, mapped.costs);
    if (!std::isfinite(sc.time_s)) return std::nullopt;

    ParallelPlan plan = pipeline_plan(in, ch, part->layers, std::vector<int>(static_cast<std::size_t>(pr.p), 1), pr.dp,
                                      pr.mbs, Schedule::ONE_F_ONE_B);
    plan.dapple_warmup = true;
    bool is_1f1b = true;
    for (int s = 0; s < pr.p; ++s) is_1f1b = is_1f1b && sc.K[s] == std::min(pr.M, pr.p - s);
    if (!is_1f1b) {
      plan.schedule = Schedule::CUSTOM;
      plan.dapple_warmup = false;
      plan.custom_source = "luo-scheduler";
      for (int s = 0; s < pr.p; ++s) plan.custom_order.push_back(luo::warmup_order(pr.M, sc.K[s]));
    }
    // Ranks (tp t, copy d, stage s) in the plan's default tp,dp,pp layout -> GPUs of the mapped device.
    const int tp = ch.tp;
    std::vector<int> dmap(static_cast<std::size_t>(plan.world_size()));
    for (int s = 0; s < pr.p; ++s)
      for (int d = 0; d < pr.dp; ++d)
        for (int t = 0; t < tp; ++t) dmap[plan.rank_of({t, d, s, 0})] = mapped.map[s * pr.dp + d] * tp + t;
    plan.place_ranks(std::move(dmap));
    auto cand = make_candidate(in, std::move(plan), sc.time_s, mapped.costs.block);
    if (!cand.estimate.fits) return std::nullopt;
    return cand;
  }
};

}  // namespace

std::unique_ptr<Planner> make_luo_planner() { return std::make_unique<LuoPlanner>(); }

}  // namespace dtsim::planning
