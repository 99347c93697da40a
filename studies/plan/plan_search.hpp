// Planner + simulator: the planner ranks candidates by its own prediction; the best `top` of them are simulated
// (each in its own process) and the fastest that fits memory in simulation is chosen.
#pragma once
#include <string>
#include <vector>

#include "sim/simulate.hpp"
#include "strategies/planner.hpp"

namespace dtsim::sim {

struct EvaluatedPlan {
  planning::Candidate candidate;
  double simulated_s = 0;
  double peak_bytes = 0;  ///< largest simulated peak over the ranks
  bool fits = false;
};

struct PlanSearch {
  planning::PlannerResult planner;
  std::vector<EvaluatedPlan> evaluated;  ///< in the planner's order
  int best = -1;                         ///< index into evaluated; -1 if none fits
  double simulate_s = 0;                 ///< wall time of the simulations
};

PlanSearch search_plan(const planning::PlannerInput& in, const std::string& planner, int top,
                       const SimOptions& options);

}  // namespace dtsim::sim
