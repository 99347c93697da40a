// Grid search (Megatron-style baseline): every (tp, pp, dp, micro-batch, schedule, recompute, ZeRO, sequence
// parallelism) that divides the model and the cluster, pruned by the analytic memory model and ranked by the
// analytic estimator.
#include <algorithm>
#include <chrono>
#include <sstream>

#include "strategies/planners/registry.hpp"
#include "traces/error.hpp"

namespace dtsim::planning {

namespace {
std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

class GridPlanner final : public Planner {
public:
  std::string name() const override { return "grid"; }

  PlannerResult plan(const PlannerInput& in) const override {
    const auto t0 = std::chrono::steady_clock::now();
    PlannerResult r;
    r.planner = name();
    const auto& m = in.model;
    const auto& c = in.cluster;
    const int n = c.total_gpus();
    const double limit = in.memory_limit_bytes > 0 ? in.memory_limit_bytes : c.gpu.memory_bytes;
    for (int tp : divisors(std::min(n, c.gpus_per_node)))
      for (int pp : divisors(m.num_layers)) {
        if (n % (tp * pp) != 0) continue;
        const int dp = n / (tp * pp);
        for (int mbs : {1, 2, 4, 8})
          for (const char* sched : {"1f1b", "interleaved:2", "interleaved:3", "interleaved:4"})
            for (Recompute rc : {Recompute::NONE, Recompute::SELECTIVE, Recompute::FULL})
              for (int zero : {0, 1})
                for (bool sp : {false, true}) {
                  ParallelPlan p;
                  p.tp = tp;
                  p.pp = pp;
                  p.dp = dp;
                  p.micro_batch_size = mbs;
                  p.global_batch_size = in.global_batch_size;
                  p.recompute = rc;
                  p.zero_stage = zero;
                  p.sequence_parallel = sp;
                  if ((sp && tp == 1) || (zero > 0 && dp == 1)) continue;  // no-ops: skip duplicates
                  set_schedule(p, sched, "grid");
                  if (p.schedule == Schedule::INTERLEAVED && (pp == 1 || m.num_layers % (pp * p.virtual_stages) != 0))
                    continue;
                  ++r.considered;
                  try {
                    p.validate(m, c);
                  } catch (const ConfigError&) {
                    ++r.invalid;
                    continue;
                  }
                  auto e = estimate::estimate(m, c, in.calibration, p);
                  if (e.peak_bytes > limit) {
                    ++r.over_memory;
                    continue;
                  }
                  r.ranked.push_back({p, e});
                }
      }
    finish(r, t0);
    return r;
  }
};
}  // namespace

std::unique_ptr<Planner> make_grid_planner() { return std::make_unique<GridPlanner>(); }

}  // namespace dtsim::planning
