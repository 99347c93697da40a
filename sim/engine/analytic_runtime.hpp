// The analytic (alpha-beta, contention-free) engine: every task starts when its last predecessor ends; a
// flow takes its route's latency plus bytes over the route's bottleneck bandwidth, as if it were alone on the
// network. No SimGrid: a longest-path pass over the task graph, for fast searches. It equals the flow-level
// engine exactly when no two flows share a link at the same time; where they do, its link statistics show
// peak utilisations above 1 (the oversubscription the flow-level engine resolves by sharing). With folding by
// multiplicity, a flow's copies do not contend either: it sees the links' real capacities.
#pragma once
#include "sim/engine/simgrid_runtime.hpp"

namespace dtsim::sim {

EngineResult run_analytic(const TaskGraph& g, const ClusterSpec& cluster, const Calibration& cal,
                          const std::vector<int>& gpu_of_rank, const std::vector<RankShare>& share = {});

}  // namespace dtsim::sim
