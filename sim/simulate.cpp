#include "sim/simulate.hpp"

#include "sim/engine/analytic_runtime.hpp"
#include "sim/engine/maxmin_runtime.hpp"
#include "sim/report/invariants.hpp"
#include "traces/routing.hpp"

#include "strategies/schedule.hpp"

namespace dtsim::sim {

void validate_inputs(const Inputs& in) {
  in.model->validate();
  in.cluster->validate();
  in.plan->validate(*in.model, *in.cluster);
  in.calibration->validate("calibration '" + in.calibration->name + "'");
  // Custom orders are checked before anything runs: complete, no duplicates, no deadlock (ConfigError).
  sched::validate_orders(sched::plan_orders(*in.plan), *in.plan);
  if (in.cluster->has_graph()) {
    // Every GPU must reach every other: one shortest-path tree from GPU 0 (links are full duplex and transit
    // rules symmetric, so this covers all pairs).
    GraphRouting routing(in.cluster->graph);
    for (int g = 1; g < in.cluster->total_gpus(); ++g) routing.route(0, g);
  }
}

EngineResult run_engine(const Lowered& low, const ClusterSpec& cluster, const Calibration& cal, const SimOptions& opt,
                        const std::vector<int>& gpus, const std::vector<RankShare>& share) {
  const FlowEngine fe = opt.engine;
  const bool maxmin =
      fe == FlowEngine::MAXMIN || (fe == FlowEngine::AUTO && static_cast<int>(low.ranks.size()) > kSimgridUpToRanks);
  return opt.network == NetworkMode::ANALYTIC ? run_analytic(low.graph, cluster, cal, gpus, share)
         : maxmin                             ? run_maxmin(low.graph, cluster, cal, gpus, share)
                                              : run_on_simgrid(low.graph, cluster, cal, gpus, share);
}

Simulation simulate(const Inputs& in, const std::function<void(Lowered&)>& adjust,
                    const std::function<void(const Lowered&, const EngineResult&)>& inspect) {
  validate_inputs(in);
  Simulation s;
  s.lowered = lower(*in.model, *in.cluster, *in.plan, *in.calibration, *in.options);
  if (adjust) adjust(s.lowered);
  const auto [gpus, share] = platform_ranks(s.lowered, *in.plan, in.options->first_gpu);
  s.engine = run_engine(s.lowered, *in.cluster, *in.calibration, *in.options, gpus, share);
  if (inspect) inspect(s.lowered, s.engine);
  // The reports need the tasks and their times, not the dependency lists: freed before the analysis (a large run's
  // peak memory).
  s.lowered.graph.release_edges();
  s.report = analyze(in, s.lowered, s.engine);
  check_invariants(in, s.lowered, s.engine, s.report);
  return s;
}

}  // namespace dtsim::sim
