// Analytic (closed-form) estimate of a plan's iteration time and peak memory, without simulation: the cost
// model's kernel times, alpha-beta ring collectives, a pipeline formula per schedule and the analytic memory
// model. Used by planners to prune and rank, and by sweeps as a pre-filter; the simulator is the reference.
#pragma once
#include <vector>

#include "strategies/nccl_model.hpp"
#include "strategies/transformer_costs.hpp"
#include "traces/calibration.hpp"
#include "traces/cluster.hpp"
#include "traces/model.hpp"
#include "traces/plan.hpp"

namespace dtsim::estimate {

struct Estimate {
  double iteration_s = 0;
  double pipeline_s = 0;          ///< forward/backward of all micro-batches including fill and drain
  double bottleneck_stage_s = 0;  ///< forward + backward of one micro-batch on the slowest stage
  double dp_exposed_s = 0;        ///< gradient synchronisation not hidden behind the last backward
  double optimizer_s = 0;
  /// Waiting for the job's slowest GPU (per-GPU speed variability, strategies/straggler_model.hpp): the pace
  /// fraction times the bottleneck stage's passes over all micro-batches.
  double variability_wait_s = 0;
  std::vector<double> stage_peak_bytes;
  double peak_bytes = 0;
  bool fits = true;  ///< every stage under the device memory
};

/// What NCCL's protocol model of a ring needs besides its shape (strategies/nccl_model.hpp); OFF = not applied.
struct NcclContext {
  nccl::Setting setting = nccl::Setting::OFF;
  int compute_capability = 90;
  bool nvlink = true;
};
/// The calibration's setting on the cluster's GPU and node fabric.
NcclContext nccl_context(const ClusterSpec& c, const Calibration& cal);
/// NCCL's choice for a ring of `bytes` over `n` ranks on `nodes` nodes whose Simple bus bandwidth is `bus_Bps`.
/// `ring_only`: NCCL restricted to its ring (no tree or PAT alternative).
nccl::Choice nccl_choice(const NcclContext& nc, bool all_reduce, int n, int nodes, double bytes, double bus_Bps,
                         bool ring_only = false);

/// Time of one ring collective of `bytes` over `n` ranks whose ring hops have latency `alpha_s` and bandwidth
/// `bw_Bps` (+ the calibration's per-step overhead): steps (alpha + o + bytes / (n bw)); with `nc` NCCL's modelled
/// latency is a floor on the steps' latency and its protocol's bandwidth factor applies (`across_nodes`: every hop
/// crosses a node boundary, else none does), as the simulator's lowering charges them.
double ring_time_s(bool all_reduce, int n, double bytes, double alpha_s, double bw_Bps, double step_overhead_s,
                   const NcclContext& nc = {}, bool across_nodes = false);
/// A ring over `per_node` GPUs on each of `nodes` nodes whose channels cross every node through each member's NIC
/// (NCCL's rings; sim Lowerer::spread_ring): per step the larger of the NVLink share ((g-1)/g of the chunk) and the
/// NIC share (1/g); latency of (nodes - 1) inter-node steps (twice for an all-reduce) and NVLink for the rest.
double spread_ring_time_s(bool all_reduce, int per_node, int nodes, double bytes, double intra_alpha_s,
                          double intra_Bps, double inter_alpha_s, double inter_Bps, double step_overhead_s,
                          const NcclContext& nc = {});
/// The hierarchical all-reduce over the same shape: node-local reduce-scatter, all-reduce of the 1/g shard across
/// nodes, node-local all-gather, one after the other.
double hierarchical_all_reduce_time_s(int per_node, int nodes, double bytes, double intra_alpha_s, double intra_Bps,
                                      double inter_alpha_s, double inter_Bps, double step_overhead_s,
                                      const NcclContext& nc = {});

/// Time of a pass (compute steps and tensor-parallel collectives over `tp` ranks inside a node).
double steps_time_s(const std::vector<cost::Step>& steps, const ClusterSpec& c, const Calibration& cal, DType dt,
                    int tp);

/// Requires a plan valid for the model and cluster (ParallelPlan::validate).
Estimate estimate(const TransformerSpec& model, const ClusterSpec& cluster, const Calibration& cal,
                  const ParallelPlan& plan);

}  // namespace dtsim::estimate
