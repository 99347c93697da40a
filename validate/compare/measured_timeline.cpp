#include "validate/compare/measured_timeline.hpp"

#include <map>

#include "sim/simulate.hpp"
#include "traces/error.hpp"

namespace dtsim::exec {

MeasuredTimeline measured_timeline(const sim::RunConfig& config, const Measurements& m) {
  sim::RunConfig rc = config;
  const sim::Inputs in{&rc.model, &rc.cluster, &rc.plan, &rc.calibration, &rc.options};
  MeasuredTimeline out;
  auto s = sim::simulate(in, [&](sim::Lowered& low) {
    auto& tasks = low.graph.tasks();
    for (const auto& t : m.tasks) {
      if (t.task < 0 || static_cast<std::size_t>(t.task) >= tasks.size() ||
          tasks[t.task].kind != sim::TaskKind::COMPUTE)
        throw FormatError("measurements: task " + std::to_string(t.task) +
                          " is not a compute task of this plan's graph (measured for another plan?)");
      if (t.duration_s.empty()) continue;
      tasks[t.task].duration_s = median(t.duration_s);
      ++out.measured_tasks;
    }
    for (const auto& t : tasks) out.compute_tasks += t.kind == sim::TaskKind::COMPUTE;
  });
  out.summary = sim::summary_json(in, s.lowered, s.engine, s.report);
  std::map<int, const RankMeasurement*> by_global;
  for (const auto& r : m.ranks) by_global[r.global_rank] = &r;
  for (auto& r : out.summary["ranks"]) {
    auto it = by_global.find(r["simulated_as"].get<int>());
    if (it == by_global.end()) continue;
    r["predicted_peak_memory_bytes"] = r["peak_memory_bytes"];
    r["peak_memory_bytes"] = it->second->peak_memory_bytes;
  }
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& r : m.ranks)
    ranks.push_back({{"sim_rank", r.sim_rank},
                     {"global_rank", r.global_rank},
                     {"ok", r.ok},
                     {"error", r.error},
                     {"iteration_median_s", median(r.iteration_s)},
                     {"peak_memory_bytes", r.peak_memory_bytes},
                     {"context_bytes", r.context_bytes},
                     {"pool_used_high_bytes", r.pool_used_high_bytes},
                     {"scratch_bytes", r.scratch_bytes}});
  out.summary["measured"] = {{"device", m.device_name},
                             {"warmup", m.warmup},
                             {"iterations", m.iterations},
                             {"compute_tasks", out.compute_tasks},
                             {"measured_tasks", out.measured_tasks},
                             {"method",
                              "the predicted graph re-timed with the measured median duration of every "
                              "executed compute task; other tasks keep predicted durations"},
                             {"ranks", ranks}};
  out.trace = sim::trace_json(in, s.lowered, s.engine, s.report);
  return out;
}

}  // namespace dtsim::exec
