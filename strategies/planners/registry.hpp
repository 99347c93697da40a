// Factories of the planners (one file each under strategies/planners/) and helpers they share.
#pragma once
#include <chrono>
#include <memory>

#include "strategies/planner.hpp"

namespace dtsim::planning {

std::unique_ptr<Planner> make_grid_planner();
std::unique_ptr<Planner> make_pipedream_planner();
std::unique_ptr<Planner> make_dapple_planner();
/// `per_stage`: the MILP chooses each stage's intra-layer strategy ("uniap"); otherwise one for the model ("uniap-k1").
std::unique_ptr<Planner> make_uniap_planner(bool per_stage);
/// After Luo et al. (INFOCOM'22): partition + device mapping over pairwise links + micro-batch scheduler.
std::unique_ptr<Planner> make_luo_planner();
/// `paper_constants`: the released code's 20 GiB/s P2P and 10 GiB/s all-reduce instead of the cluster's links;
/// `op_atoms`: sub-layer atoms (stages may end inside a layer) instead of whole layers.
std::unique_ptr<Planner> make_rannc_planner(bool paper_constants, bool op_atoms);

/// Sorts the feasible candidates by the planner's prediction (stable: ties keep generation order) and records
/// the search time since `t0`.
void finish(PlannerResult& r, std::chrono::steady_clock::time_point t0);

}  // namespace dtsim::planning
