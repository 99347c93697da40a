#include "studies/plan/plan_search.hpp"

#include <chrono>

#include "sim/engine/isolate.hpp"

namespace dtsim::sim {

PlanSearch search_plan(const planning::PlannerInput& in, const std::string& planner, int top,
                       const SimOptions& options) {
  PlanSearch out;
  out.planner = planning::make_planner(planner)->plan(in);
  const auto t0 = std::chrono::steady_clock::now();
  const double limit = in.memory_limit_bytes > 0 ? in.memory_limit_bytes : in.cluster.gpu.memory_bytes;
  for (int i = 0; i < top && i < static_cast<int>(out.planner.ranked.size()); ++i) {
    EvaluatedPlan ev;
    ev.candidate = out.planner.ranked[i];
    ev.candidate.plan.precision = in.precision;  // planners that do not set it search in bf16 (PlannerInput)
    auto v = run_isolated(
        [&] {
          Inputs sin{&in.model, &in.cluster, &ev.candidate.plan, &in.calibration, &options};
          auto s = simulate(sin);
          double peak = 0;
          for (const auto& r : s.report.ranks) peak = std::max(peak, r.peak_bytes);
          return std::vector<double>{s.report.iteration_time_s, peak};
        },
        2);
    ev.simulated_s = v[0];
    ev.peak_bytes = v[1];
    ev.fits = ev.peak_bytes <= limit;
    out.evaluated.push_back(ev);
    if (ev.fits && (out.best < 0 || ev.simulated_s < out.evaluated[out.best].simulated_s))
      out.best = static_cast<int>(out.evaluated.size() - 1);
  }
  out.simulate_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace dtsim::sim
