// PipeDream planner (Narayanan et al., SOSP'19), after its released optimizer (seed-algorithms §6.2
// [C optimizer_graph_hierarchical.py]): a hierarchical dynamic program, one level per bandwidth class.
//   T(i..j, m) = ( sum_l T_l + 4 (m-1) |w_{i..j}| / (m B_k) ) / m          (compute plus weight sync, as the code)
//   A(i..j, m) = min( T(i..j, m), min_{i<=s<j, 1<=m'<m} max( A(i..s, m-m'), 2 C_s, T(s+1..j, m') ) )
// Level 1 runs inside a node (devices of a node, NVLink/NVSwitch bandwidth) for every layer range; level 2 treats
// the best one-node pipeline of each range as its compute time and partitions over nodes (NIC bandwidth).
// The result is flattened into stages with replicas: a level-2 stage on n nodes whose level-1 pipeline has a
// sub-stage on m devices becomes a stage with m * n replicas. PipeDream trains asynchronously (weight
// stashing); dtsim simulates the plan with the synchronous 1F1B schedule (PipeDream-Flush), the flushed variant
// of the same order, and so charges the gradient synchronisation PipeDream would overlap. Replica counts are
// restricted to powers of two so that micro-batches split evenly; the micro-batch is the smallest power of two
// that every stage's replicas divide, and the planner's memory check is its own: stashed activations and
// weights x ceil(downstream devices / m') against the device memory.
#include <algorithm>
#include <chrono>
#include <limits>

#include "strategies/planners/layer_chain.hpp"
#include "strategies/planners/registry.hpp"

namespace dtsim::planning {
namespace {

struct Level {
  int devices;    // devices at this level (per node at level 1, nodes at level 2)
  LinkCost link;  // bandwidth class of the level
};

/// One level of the hierarchical DP over layer ranges [i, j) and device counts m (powers of two).
/// `base[i][j]` is the per-sample time of range [i, j) on one device of this level, `weights` its bytes.
struct LevelDP {
  int L = 0, W = 0;
  std::vector<double> A;         // [i][j][m]
  std::vector<int> split, reps;  // argmin: split point (-1 = single stage) and the last stage's devices
  std::size_t at(int i, int j, int m) const { return (static_cast<std::size_t>(i) * (L + 1) + j) * (W + 1) + m; }
};

LevelDP run_level(int L, const Level& lv, const std::vector<double>& base, const LayerChain& ch, double dtype_b,
                  const std::vector<double>& stage_mem_per_sample, int unit_devices, int total_devices_below) {
  LevelDP dp;
  dp.L = L;
  dp.W = lv.devices;
  dp.A.assign(static_cast<std::size_t>(L + 1) * (L + 1) * (lv.devices + 1), kInf);
  dp.split.assign(dp.A.size(), -1);
  dp.reps.assign(dp.A.size(), 0);
  auto basef = [&](int i, int j) { return base[static_cast<std::size_t>(i) * (L + 1) + j]; };
  auto T = [&](int i, int j, int m) {
    const double w = ch.range_params(i, j) * dtype_b;
    return (basef(i, j) + 4.0 * (m - 1) * w / (m * lv.link.bw_Bps)) / m;
  };
  auto fits = [&](int i, int j, int m, int downstream) {
    // PipeDream's check: weights and stashed activations x ceil(downstream / m); a unit of `unit_devices`
    // devices (a node at level 2) spreads them over its devices.
    const int copies = std::max(1, (downstream + m - 1) / m);
    return (ch.range_static(i, j) + stage_mem_per_sample[static_cast<std::size_t>(i) * (L + 1) + j] * copies) /
               unit_devices <=
           ch.memory_limit_bytes - ch.reserved_bytes;
  };
  const double comm = 2.0 * lv.link.time_s(ch.boundary_bytes);
  for (int len = 1; len <= L; ++len)
    for (int i = 0; i + len <= L; ++i) {
      const int j = i + len;
      for (int m = 1; m <= lv.devices; m *= 2) {
        auto& best = dp.A[dp.at(i, j, m)];
        if (fits(i, j, m, total_devices_below)) best = T(i, j, m), dp.reps[dp.at(i, j, m)] = m;
        for (int s = i + 1; s < j; ++s)
          for (int mp = 1; mp < m; mp *= 2) {
            if (!fits(s, j, mp, total_devices_below - (m - mp))) continue;
            const double v = std::max({dp.A[dp.at(i, s, m - mp)], comm, T(s, j, mp)});
            if (v < best) best = v, dp.split[dp.at(i, j, m)] = s, dp.reps[dp.at(i, j, m)] = mp;
          }
      }
    }
  return dp;
}

/// Stages (layer count, devices) of range [i, j) on m devices, front to back.
void unwind(const LevelDP& dp, int i, int j, int m, std::vector<std::pair<std::pair<int, int>, int>>& out) {
  const int s = dp.split[dp.at(i, j, m)];
  if (s < 0) {
    out.push_back({{i, j}, m});
    return;
  }
  const int mp = dp.reps[dp.at(i, j, m)];
  unwind(dp, i, s, m - mp, out);
  out.push_back({{s, j}, mp});
}

class PipeDreamPlanner final : public Planner {
public:
  std::string name() const override { return "pipedream"; }

  PlannerResult plan(const PlannerInput& in) const override {
    const auto t0 = std::chrono::steady_clock::now();
    PlannerResult r;
    r.planner = name();
    const LayerChain ch = build_chain(in, in.tensor_parallel);
    const int L = ch.num_layers;
    const double eb = dtype_bytes(in.model.dtype);
    auto pow2_floor = [](int n) {
      int p = 1;
      while (p * 2 <= n) p *= 2;
      return p;
    };
    const int per_node = pow2_floor(ch.devices_per_node);
    const int nodes = pow2_floor(ch.devices / ch.devices_per_node);
    std::vector<double> base((L + 1) * static_cast<std::size_t>(L + 1), 0.0), act(base.size(), 0.0);
    for (int i = 0; i <= L; ++i)
      for (int j = i + 1; j <= L; ++j)
        base[i * (L + 1) + j] = ch.range_compute(i, j), act[i * (L + 1) + j] = ch.range_act(i, j);
    const LevelDP l1 = run_level(L, {per_node, ch.intra}, base, ch, eb, act, 1, per_node);
    std::vector<double> base2(base.size(), kInf);
    for (int i = 0; i < L; ++i)
      for (int j = i + 1; j <= L; ++j) base2[i * (L + 1) + j] = l1.A[l1.at(i, j, per_node)];
    // Level 2's unit is a node: its time per sample is the one-node pipeline's bottleneck.
    const LinkCost node_link{ch.inter.alpha_s, ch.inter.bw_Bps * ch.devices_per_node};  // all NICs of a node
    const LevelDP l2 = run_level(L, {nodes, node_link}, base2, ch, eb, act, per_node, nodes);
    ++r.considered;
    if (l2.A[l2.at(0, L, nodes)] == kInf) {
      ++r.over_memory;
    } else {
      std::vector<std::pair<std::pair<int, int>, int>> top, sub;
      unwind(l2, 0, L, nodes, top);
      std::vector<int> layers, reps;
      for (const auto& [range, n] : top) {
        sub.clear();
        unwind(l1, range.first, range.second, per_node, sub);
        for (const auto& [rg, m] : sub) layers.push_back(rg.second - rg.first), reps.push_back(m * n);
      }
      const int width = [&] {
        int s = 0;
        for (int x : reps) s += x;
        return s;
      }();
      const int mbs = *std::max_element(reps.begin(), reps.end());
      const int dp = ch.devices / width;
      if (in.global_batch_size % (mbs * dp) != 0) {
        ++r.invalid;
      } else {
        ParallelPlan plan = pipeline_plan(in, ch, layers, reps, dp, mbs, Schedule::ONE_F_ONE_B);
        // PipeDream's own prediction: the bottleneck stage's time per sample times the samples of an iteration
        // per pipeline (it has no fill or drain in steady asynchronous operation).
        const double per_sample = l2.A[l2.at(0, L, nodes)];
        const double predicted = per_sample * in.global_batch_size / dp;
        auto cand = make_candidate(in, std::move(plan), predicted, per_sample * mbs);
        if (cand.estimate.fits) r.ranked.push_back(std::move(cand));
        else ++r.over_memory;  // PipeDream's stash rule admitted it; dtsim's memory model does not
      }
    }
    finish(r, t0);
    return r;
  }
};

}  // namespace

std::unique_ptr<Planner> make_pipedream_planner() { return std::make_unique<PipeDreamPlanner>(); }

}  // namespace dtsim::planning
