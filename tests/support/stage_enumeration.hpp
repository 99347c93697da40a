// The oracle of the UniAP planner tests: every per-stage assignment of a set of stage kinds (replicas and intra-layer
// strategy) to a plan's placement, each simulated, and the fastest that fits the planner's memory limit.
#pragma once
#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "sim/simulate.hpp"
#include "strategies/planner.hpp"

namespace dtsim::testing {

struct TimeAndPeak {
  double time_s = 0, peak_bytes = 0;
};

/// `plan` simulated on the analytic network with `in`'s model, cluster and calibration: iteration time, largest peak.
inline TimeAndPeak simulate_analytic(const planning::PlannerInput& in, const ParallelPlan& plan) {
  sim::SimOptions opt;
  opt.network = sim::NetworkMode::ANALYTIC;
  sim::Inputs x{&in.model, &in.cluster, &plan, &in.calibration, &opt};
  const sim::Simulation s = sim::simulate(x);
  TimeAndPeak out{s.report.iteration_time_s, 0};
  for (const auto& rr : s.report.ranks) out.peak_bytes = std::max(out.peak_bytes, rr.peak_bytes);
  return out;
}

struct Enumeration {
  int combos = 1, fit = 0;
  double best_s = std::numeric_limits<double>::infinity();
};

/// Every assignment of `kinds` ((stage replicas, strategy); replicas 0 = no stage replication) to the stages of
/// `pick` (its layers, degrees and batch kept), simulated; the fastest within in.memory_limit_bytes.
inline Enumeration enumerate_stage_kinds(const planning::PlannerInput& in, const ParallelPlan& pick,
                                         const std::vector<std::pair<int, StageStrategy>>& kinds) {
  Enumeration e;
  const int k = static_cast<int>(kinds.size());
  for (int s = 0; s < pick.pp; ++s) e.combos *= k;
  for (int c = 0; c < e.combos; ++c) {
    ParallelPlan q = pick;
    q.stage_strategies.clear();
    q.stage_replicas.clear();
    for (int s = 0, code = c; s < pick.pp; ++s, code /= k) {
      const auto& [reps, st] = kinds[static_cast<std::size_t>(code % k)];
      if (reps > 0) q.stage_replicas.push_back(reps);
      q.stage_strategies.push_back(st);
    }
    const TimeAndPeak r = simulate_analytic(in, q);
    if (r.peak_bytes > in.memory_limit_bytes) continue;
    ++e.fit;
    e.best_s = std::min(e.best_s, r.time_s);
  }
  return e;
}

}  // namespace dtsim::testing
