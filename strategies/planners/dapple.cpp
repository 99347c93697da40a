// DAPPLE planner (Fan et al., PPoPP'21), after the released planner (seed-algorithms §4 [C orchestrate.rs]):
// for every pipeline width w (devices of one pipeline; rp = devices / w identical pipeline replicas) and
// micro-batch size, a dynamic program over (layer prefix j, devices used m) chooses the last stage's layers and
// replica count m' minimising the bottleneck
//     A[j][m] = min_{k < j, m'} max( A[k][m - m'],  (b / m') * T(k..j),  2 X(boundary k) ),
// with memory per stage replica checked under the early-backward schedule (in flight: at most the micro-batches
// of the stages downstream, ceil((w - devices before) / m'), and at most M). The chosen plan is scored with the
// released planner's analytical latency
//     L = block (M - 1) + sum_s S_s + sum_boundaries 2 X_s + max(0, max_s(AR_s - s * block)),
// where S_s is stage s's time for one micro-batch (the code uses T_total / (rp M), which equals it when stages
// are not replicated) [Δ]. Devices are placed Append-First (stages fill nodes in order; pipeline replicas are
// consecutive blocks of w devices); Fresh-First and Scatter-First are not modelled (see README). Replica counts
// are powers of two and divide the micro-batch (the micro-batch is split evenly across a stage's replicas).
// Bandwidths and latencies come from the cluster and calibration, not the paper's V100 constants.
#include <algorithm>
#include <optional>
#include <chrono>
#include <cmath>
#include <limits>

#include "strategies/planners/layer_chain.hpp"
#include "strategies/planners/registry.hpp"

namespace dtsim::planning {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

class DapplePlanner final : public Planner {
public:
  std::string name() const override { return "dapple"; }

  PlannerResult plan(const PlannerInput& in) const override {
    const auto t0 = std::chrono::steady_clock::now();
    PlannerResult r;
    r.planner = name();
    const LayerChain ch = build_chain(in, in.tensor_parallel);
    const int G = ch.devices;
    for (int w = 1; w <= G; w *= 2) {
      if (G % w != 0) continue;
      const int rp = G / w;
      for (int mbs = 1; mbs * rp <= in.global_batch_size; mbs *= 2) {
        if (in.global_batch_size % (mbs * rp) != 0) continue;
        const int M = in.global_batch_size / (mbs * rp);
        ++r.considered;
        if (auto cand = solve(in, ch, w, rp, mbs, M)) r.ranked.push_back(std::move(*cand));
        else ++r.over_memory;
      }
    }
    finish(r, t0);
    return r;
  }

private:
  static std::optional<Candidate> solve(const PlannerInput& in, const LayerChain& ch, int w, int rp, int mbs, int M) {
    const int L = ch.num_layers;
    const auto idx = [w](int j, int m) { return static_cast<std::size_t>(j) * (w + 1) + m; };
    std::vector<double> A((L + 1) * static_cast<std::size_t>(w + 1), kInf);
    std::vector<int> from_k(A.size(), -1), from_r(A.size(), 0);
    A[idx(0, 0)] = 0;
    std::vector<int> reps;
    for (int r = 1; r <= std::min(w, mbs); r *= 2)
      if (mbs % r == 0) reps.push_back(r);
    const double limit = ch.memory_limit_bytes - ch.reserved_bytes;
    for (int j = 1; j <= L; ++j)
      for (int m = 1; m <= w; ++m)
        for (int r : reps) {
          if (r > m) break;
          const int before = m - r;
          const int in_flight = std::min(M, (w - before + r - 1) / r);
          const double per_replica = static_cast<double>(mbs) / r;
          const double x = before > 0 ? 2.0 * (ch.spans_nodes(0, before - 1, 2) ? ch.inter : ch.intra)
                                                   .time_s(mbs * ch.boundary_bytes)
                                      : 0.0;
          for (int k = before == 0 ? 0 : 1; k < j; ++k) {
            if (before == 0 && k != 0) break;
            const double prev = A[idx(k, before)];
            if (prev == kInf) continue;
            const double mem = ch.range_static(k, j) + per_replica * ch.range_act(k, j) * in_flight;
            if (mem > limit) continue;
            const double v = std::max({prev, per_replica * ch.range_compute(k, j), x});
            if (v < A[idx(j, m)]) A[idx(j, m)] = v, from_k[idx(j, m)] = k, from_r[idx(j, m)] = r;
          }
        }
    if (A[idx(L, w)] == kInf) return std::nullopt;
    // Reconstruct stages front to back.
    std::vector<int> layers, reps_of;
    for (int j = L, m = w; j > 0;) {
      const int k = from_k[idx(j, m)], r = from_r[idx(j, m)];
      layers.push_back(j - k);
      reps_of.push_back(r);
      j = k;
      m -= r;
    }
    std::reverse(layers.begin(), layers.end());
    std::reverse(reps_of.begin(), reps_of.end());
    const int p = static_cast<int>(layers.size());
    const double block = A[idx(L, w)];
    double fill = 0, xfers = 0, tail = 0;
    for (int s = 0, first = 0, off = 0; s < p; ++s) {
      const double per_replica = static_cast<double>(mbs) / reps_of[s];
      fill += per_replica * ch.range_compute(first, first + layers[s]);
      if (s > 0) xfers += 2.0 * (ch.spans_nodes(0, off - 1, 2) ? ch.inter : ch.intra).time_s(mbs * ch.boundary_bytes);
      // The stage's gradient group: its replicas in every pipeline replica (devices off.. of each w block).
      const int group = reps_of[s] * rp;
      const bool spans = ch.spans_nodes(0, off, (rp - 1) * w + reps_of[s]);
      const double ar = ch.all_reduce_s(ch.range_params(first, first + layers[s]) * dtype_bytes(in.model.dtype), group,
                                        spans ? ch.inter : ch.intra);
      tail = std::max(tail, ar - s * block);
      first += layers[s];
      off += reps_of[s];
    }
    const double predicted = block * (M - 1) + fill + xfers + std::max(0.0, tail);
    ParallelPlan plan = pipeline_plan(in, ch, layers, reps_of, rp, mbs, Schedule::ONE_F_ONE_B);
    plan.dapple_warmup = true;
    auto cand = make_candidate(in, std::move(plan), predicted, block);
    if (!cand.estimate.fits) return std::nullopt;  // the DP's memory check is the planner's; the model's decides
    return cand;
  }
};

}  // namespace

std::unique_ptr<Planner> make_dapple_planner() { return std::make_unique<DapplePlanner>(); }

}  // namespace dtsim::planning
