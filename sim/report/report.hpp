// Turns a simulated task graph into results: iteration time, throughput, MFU, per-rank breakdown
// (compute / exposed communication / bubble), per-rank memory timeline and peak, OOM list; and renders
// summary.json, trace.json (Chrome trace) and the human summary.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/engine/simgrid_runtime.hpp"
#include "sim/model/lowering.hpp"

namespace dtsim::sim {

struct RankReport {
  int sim_index = 0;
  int global_rank = 0;
  RankCoord coord;
  double compute_s = 0;        ///< compute stream busy
  double exposed_comm_s = 0;   ///< compute stream idle while communication of this rank is in flight
  double bubble_s = 0;         ///< compute stream idle with no communication in flight
  double peak_bytes = 0;       ///< peak device memory
  double peak_time_s = 0;      ///< first time the peak is reached
  double peak_activation_bytes = 0;  ///< activations (and recompute buffers) at the peak
  std::vector<std::pair<double, double>> memory_timeline;  ///< (time s, bytes in use) after each change
};

struct OomEntry {
  int global_rank = 0;
  double peak_bytes = 0;
  double capacity_bytes = 0;
  double peak_time_s = 0;
};

struct Inputs {
  const TransformerSpec* model;
  const ClusterSpec* cluster;
  const ParallelPlan* plan;
  const Calibration* calibration;
  const SimOptions* options;
};

struct Report {
  double iteration_time_s = 0;
  double samples_per_s = 0;
  double tokens_per_s = 0;
  double model_tflops_per_gpu = 0;     ///< model FLOPs (no recompute) per second per GPU, in TFLOP/s
  double hardware_tflops_per_gpu = 0;  ///< executed FLOPs (with recompute) per second per GPU
  double mfu = 0;                      ///< model FLOPs utilisation against the dtype's dense peak
  double hand_estimate_s = 0;          ///< k*params*tokens / (GPUs * peak * gemm_efficiency_max), k = 6 or 8
  std::vector<RankReport> ranks;       ///< one per simulated rank
  std::vector<OomEntry> oom;           ///< every global rank over capacity
  std::uint64_t tasks = 0, activities = 0;
};

Report analyze(const Inputs& in, const Lowered& low, const EngineResult& res);

nlohmann::json summary_json(const Inputs& in, const Lowered& low, const EngineResult& res, const Report& rep);
std::string trace_json(const Inputs& in, const Lowered& low, const EngineResult& res, const Report& rep);
std::string human_summary(const Inputs& in, const Lowered& low, const EngineResult& res, const Report& rep);

}  // namespace dtsim::sim
