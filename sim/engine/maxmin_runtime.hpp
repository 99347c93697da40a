// dtsim's own flow-level engine: the SimGrid adapter's model (CM02 max-min sharing, latency then bandwidth, no
// TCP window; execs sharing their host) re-implemented without SimGrid's per-activity costs, for runs with many
// simulated ranks.
//
// Why: SimGrid 3.32 keeps every activity started outside an actor in one list that each completion searches
// linearly, and its full-zone routing table is quadratic in the hosts; an unfolded 1,024-GPU iteration spent two
// thirds of its time in that search and ~700 MB in the table before the first task (profiles in docs/modelling.md,
// "Network"). This engine is the same model, event for event: tasks start when their last predecessor ends;
// COMPUTE and DELAY tasks run on their rank's compute host or on its stream's timer host (execs on one host share it
// in proportion to their priority); a FLOW waits for its route's latency, then shares every link of its route
// max-min fairly with the flows in their bandwidth phase. Rates are re-solved only in the connected component of
// links and flows that an event touched. Interference (TaskGraph::interference_on) is modelled as in the SimGrid
// adapter. Agreement with SimGrid is tested (tests/oracle/test_maxmin_engine.cpp).
#pragma once
#include <vector>

#include "sim/engine/simgrid_runtime.hpp"

namespace dtsim::sim {

/// How the engine finds each round's bottleneck when it re-solves rates: by a heap, by a scan of the component's
/// constraints, or (AUTO) by whichever is cheaper for the component's shape. The rates are the same to the bit
/// (maxmin_runtime.cpp, MaxMin::solve); the choice is there so that tests can hold the two to that.
enum class MaxMinSolver { AUTO, HEAP, SCAN };

/// Runs `g` like run_on_simgrid (same platform, same sharing model); may be called any number of times.
EngineResult run_maxmin(const TaskGraph& g, const ClusterSpec& cluster, const Calibration& cal,
                        const std::vector<int>& gpu_of_rank, const std::vector<RankShare>& share = {},
                        MaxMinSolver solver = MaxMinSolver::AUTO);

}  // namespace dtsim::sim
