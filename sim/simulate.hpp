// One simulation end to end: lower the plan, run it on SimGrid, analyse the result.
#pragma once
#include <functional>
#include "sim/engine/simgrid_runtime.hpp"
#include "sim/model/lowering.hpp"
#include "sim/report/report.hpp"

namespace dtsim::sim {

struct Simulation {
  Lowered lowered;
  EngineResult engine;
  Report report;
};

/// ConfigError on inconsistent inputs: each of model, cluster, plan and calibration, the pipeline orders (complete,
/// no duplicates, no deadlock), and on an explicit graph that every GPU reaches every other.
void validate_inputs(const Inputs& in);

/// Validates the inputs (validate_inputs), then simulates. Once per process (SimGrid).
/// `adjust`, when given, edits the lowered graph before it runs (e.g. measured task durations). The returned graph
/// keeps its tasks and host spans but not its dependency lists or release times (TaskGraph::release_edges; lower()
/// gives a graph with them). `inspect`, when given, sees the graph with its dependencies and release times and the
/// engine's times once it has run, before they are freed (the Chakra export reads them).
/// Runs a lowered graph on the engine `opt` selects: analytic, or the flow engines (FlowEngine::AUTO: SimGrid up to
/// kSimgridUpToRanks simulated ranks, dtsim's max-min above).
EngineResult run_engine(const Lowered& low, const ClusterSpec& cluster, const Calibration& cal, const SimOptions& opt,
                        const std::vector<int>& gpus, const std::vector<RankShare>& share);

Simulation simulate(const Inputs& in, const std::function<void(Lowered&)>& adjust = {},
                    const std::function<void(const Lowered&, const EngineResult&)>& inspect = {});

}  // namespace dtsim::sim
