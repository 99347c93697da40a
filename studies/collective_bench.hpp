// Collective benchmarks in simulation, with nccl-tests' definitions of bandwidth (NVIDIA/nccl-tests,
// doc/PERFORMANCE.md): algbw = S / t; busbw = algbw * 2(n-1)/n for all-reduce, algbw * (n-1)/n for
// all-gather and reduce-scatter (S = the full buffer).
#pragma once
#include <string>
#include <vector>

#include "sim/model/footprint.hpp"
#include "sim/model/lowering.hpp"

namespace dtsim::sim {

struct CollectivePoint {
  double bytes = 0;
  double time_s = 0;
  double algbw_Bps = 0;
  double busbw_Bps = 0;
  std::uint64_t tasks = 0;
};

double bus_factor(cost::CollectiveKind kind, int n);
cost::CollectiveKind collective_kind_from_string(const std::string& s, const std::string& ctx);

/// One collective over the first `n` GPUs of `cluster` (all at once, from t = 0). Uses the SimGrid engine when
/// options.network is FLOW, so it can run once per process; collective_sweep isolates each point.
CollectivePoint run_collective(const ClusterSpec& cluster, const Calibration& cal, const SimOptions& options, int n,
                               cost::CollectiveKind kind, double bytes);
/// The footprint run_collective would have (sim::estimate_collective_footprint on the same model and plan).
Footprint collective_footprint(const ClusterSpec& cluster, const Calibration& cal, const SimOptions& options, int n,
                               cost::CollectiveKind kind, double bytes);
/// Every size in its own child process (SimGrid: one engine per process).
std::vector<CollectivePoint> collective_sweep(const ClusterSpec& cluster, const Calibration& cal,
                                              const SimOptions& options, int n, cost::CollectiveKind kind,
                                              const std::vector<double>& sizes);

}  // namespace dtsim::sim
