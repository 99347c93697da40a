// Capacity planning: the largest model of a ladder that each planner can fit on a cluster (RaNNC's headline
// comparison, "models five times larger than Megatron-LM", seed-algorithms §1), judged by each planner's own
// memory check and the analytic memory model of dtsim (every returned candidate fits it).
#pragma once
#include <string>
#include <vector>

#include "strategies/planner.hpp"

namespace dtsim::planning {

/// The baseline of the comparison: Megatron-LM's 2019 hybrid parallelism -- 1-D tensor parallelism inside a node,
/// data parallelism across, no pipeline, no ZeRO (activation recompute allowed) -- taken from the grid search.
inline constexpr const char* kMegatronBaseline = "megatron-tp";

struct CapacityRow {
  std::string planner;
  std::string largest_model;  ///< "" when none of the ladder fits
  double largest_params = 0;
  ParallelPlan plan;              ///< the planner's best candidate for that model
  std::vector<std::string> fits;  ///< every model of the ladder that fits, in ladder order
};

/// Model ladder: the Megatron-LM SC'21 Table-1 family, smallest first.
std::vector<std::string> default_capacity_ladder();

/// For each planner (planner_names() plus kMegatronBaseline), walks the ladder from the smallest model and
/// records which fit (a planner returns at least one candidate). `base` gives cluster, calibration, batch and
/// memory limit; its model is replaced by each rung.
std::vector<CapacityRow> capacity(const PlannerInput& base, const std::vector<std::string>& ladder,
                                  const std::vector<std::string>& planners);

}  // namespace dtsim::planning
