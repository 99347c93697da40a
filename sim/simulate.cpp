#include "sim/simulate.hpp"

namespace dtsim::sim {

Simulation simulate(const Inputs& in) {
  in.model->validate();
  in.cluster->validate();
  in.plan->validate(*in.model, *in.cluster);
  in.calibration->validate("calibration '" + in.calibration->name + "'");
  Simulation s;
  s.lowered = lower(*in.model, *in.cluster, *in.plan, *in.calibration, *in.options);
  std::vector<int> gpus;
  for (const auto& r : s.lowered.ranks) gpus.push_back(r.global_rank);
  s.engine = run_on_simgrid(s.lowered.graph, *in.cluster, *in.calibration, gpus);
  s.report = analyze(in, s.lowered, s.engine);
  return s;
}

}  // namespace dtsim::sim
