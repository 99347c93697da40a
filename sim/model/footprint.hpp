// The footprint of one simulation predicted before it runs: how many tasks and dependency edges the lowering would
// emit, over how many simulated ranks, and the peak resident memory of the whole run (lowering, engine, report), so
// that a run that cannot fit is refused up front instead of dying of std::bad_alloc after minutes.
//
// No graph is built: the folding decision comes from the lowering's rank setup (lower_ranks, O(world), no tasks), the
// task count from the same cost-model step lists the lowering walks (cost::layer_passes through
// default_pass_costs, the schedule's pass order, the collectives each step becomes in FLOW or STEPS mode, the
// pipeline transfers, gradient buckets and the optimizer step), and the bytes from per-task constants measured on
// real runs (footprint.cpp, kBytes*).
#pragma once
#include <cstdint>
#include <string>

#include "sim/model/lowering.hpp"

namespace dtsim::sim {

struct Footprint {
  double tasks = 0;             ///< tasks of the lowered graph (estimate)
  double edges = 0;             ///< dependency edges (estimate)
  double host_spans = 0;        ///< host-issue spans kept outside the graph (TaskGraph::host_spans; estimate)
  double exchange_pieces = 0;   ///< all-to-all pieces kept beside the graph (Exchange, analytic network; estimate)
  double concurrent_flows = 0;  ///< flows in flight at once, where known (dtsim collective); 0 = not estimated
  int simulated_ranks = 0;
  int world = 0;  ///< ranks of the plan
  bool fold_tp = false, fold_dp = false, fold_edp = false;
  std::string fold_reason;  ///< the lowering's own folding decision (from the probe)
  std::string engine;       ///< the engine the run would use: simgrid-flow | dtsim-maxmin | analytic
  double bytes = 0;         ///< predicted peak resident memory of the process, bytes
};

/// The files a run renders besides summary.json; each costs memory per task.
struct FootprintOutputs {
  bool trace = false;     ///< trace.json
  int trace_ranks = 0;    ///< ranks in trace.json: 0 = the default selection (trace_select.hpp), -1 = all, N = N listed
  bool perfetto = false;  ///< trace.pftrace (every simulated rank)
  bool chakra = false;    ///< the Chakra export (every rank's execution graph and .et bytes)
};

/// Predicts the footprint of simulating `plan`. The inputs must already be validated (sim::validate_inputs).
Footprint estimate_footprint(const TransformerSpec& model, const ClusterSpec& cluster, const ParallelPlan& plan,
                             const Calibration& cal, const SimOptions& opt, const FootprintOutputs& outputs = {});

/// Predicts the footprint of one `kind` collective of `bytes` over the TP group of `plan` (dtsim collective lowers
/// it with lower_collective; tp = the group). Inputs as for estimate_footprint.
Footprint estimate_collective_footprint(const TransformerSpec& model, const ClusterSpec& cluster,
                                        const ParallelPlan& plan, const Calibration& cal, const SimOptions& opt,
                                        cost::CollectiveKind kind, double bytes);

/// Bytes as the memory guard writes them: "44.6 MB" below 1 GB, else "2.4 GB".
std::string bytes_text(double bytes);
/// "9.1 GB (24.4 M tasks over 1,024 simulated ranks)", with `note` inside the parentheses after a "; ".
std::string describe(const Footprint& f, const std::string& note = "");

}  // namespace dtsim::sim
