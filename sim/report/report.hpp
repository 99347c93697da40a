// Turns a simulated task graph into results: iteration time, throughput, MFU, per-rank breakdown
// (compute / exposed communication / bubble), per-rank memory timeline and peak, OOM list; and renders
// summary.json, trace.json (Chrome trace) and the human summary.
#pragma once
#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/engine/simgrid_runtime.hpp"
#include "sim/model/lowering.hpp"

namespace dtsim::sim {

/// Kinds of communication the breakdown separates: tensor parallel, context parallel (ring attention, a2a, KV
/// all-gather), expert parallel (MoE dispatch and combine, expert-TP gathers), data parallel (gradients, parameter
/// gathers), pipeline (stage-to-stage transfers).
inline constexpr int kNumCommKinds = 5;
const char* comm_kind_name(int kind);
/// The kind of a communication task from its name (see the lowering's task names).
int comm_kind_of(const std::string& task_name);

struct RankReport {
  int sim_index = 0;
  int global_rank = 0;
  RankCoord coord;
  double compute_s = 0;       ///< compute stream busy
  double exposed_comm_s = 0;  ///< compute stream idle while communication of this rank is in flight
  /// Of the compute stream's idle time, how much had communication of each kind in flight (kinds may overlap).
  std::array<double, kNumCommKinds> exposed_by_kind_s{};
  /// Communication of each kind in flight while the compute stream was busy (hidden behind compute).
  std::array<double, kNumCommKinds> overlapped_by_kind_s{};
  /// Latency NCCL's protocol model added to this rank's ring collectives of each kind beyond dtsim's own ring
  /// (strategies/nccl_model.hpp), whether exposed or hidden: part of those collectives' time, not an extra.
  std::array<double, kNumCommKinds> nccl_floor_by_kind_s{};
  /// Interference: how much longer this rank's kernels ran than their nominal time because collectives ran beside
  /// them (flow engine; 0 with interference off or on the analytic engine).
  double interference_s = 0;
  /// Waiting for the job's slowest GPU (per-GPU speed variability, strategies/straggler_model.hpp): not in compute_s,
  /// exposed_comm_s or bubble_s; the four add up to the iteration time.
  double variability_wait_s = 0;
  double bubble_s = 0;         ///< compute stream idle with no communication in flight
  double bubble_fraction = 0;  ///< idle / compute time: (p-1)/m for balanced GPipe and 1F1B (Megatron's t_pb/t_id)
  double peak_bytes = 0;       ///< peak device memory
  double peak_time_s = 0;      ///< first time the peak is reached
  double peak_activation_bytes = 0;                 ///< activations and recompute buffers at the peak
  std::array<double, kNumMemCategories> at_peak{};  ///< bytes per category at the peak
  std::string peak_event;                           ///< the task whose memory change reached the peak
  std::string oom_event;  ///< the first task whose allocation crossed the device capacity ("" if none)
  double oom_time_s = 0;
  /// (time s, bytes per category) after each change.
  std::vector<std::pair<double, std::array<double, kNumMemCategories>>> memory_timeline;
};

struct OomEntry {
  int global_rank = 0;
  double peak_bytes = 0;
  double capacity_bytes = 0;
  double peak_time_s = 0;
  std::string event;  ///< the first allocation that crossed the capacity
  double event_time_s = 0;
  int represents = 1;  ///< global ranks this entry stands for (> 1: one entry per simulated rank, see kListRanksUpTo)
};

/// summary.json lists every global rank (its "ranks" and "oom" arrays) up to this world size; above it, one entry
/// per simulated rank, each saying how many global ranks it stands for, so that outputs do not grow with a
/// folded world (a million folded GPUs would otherwise write half a gigabyte of identical rows).
inline constexpr int kListRanksUpTo = 16384;

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
  double hand_estimate_s = 0;          ///< k * params * tokens / (GPUs * peak * gemm_efficiency_max)
  double hand_estimate_flops_per_param_token =
      6;                           ///< k: 6, or 8 with full recompute (by layers in heterogeneous plans)
  double max_bubble_fraction = 0;  ///< largest bubble fraction over the stages
  std::vector<RankReport> ranks;   ///< one per simulated rank
  std::vector<OomEntry> oom;       ///< every global rank over capacity (per simulated rank above kListRanksUpTo)
  std::int64_t oom_ranks = 0;      ///< global ranks over capacity
  std::uint64_t tasks = 0, activities = 0;
};

Report analyze(const Inputs& in, const Lowered& low, const EngineResult& res);

nlohmann::json summary_json(const Inputs& in, const Lowered& low, const EngineResult& res, const Report& rep);
/// trace.json of every simulated rank (the comparisons with measured runs need them all; `dtsim simulate` bounds it
/// with sim/report/trace_select.hpp). With `link_tracks`, one counter track per used link (process "links") with its
/// load in GB/s over time, each flow counted at its average rate (bytes / duration) from start to end.
std::string trace_json(const Inputs& in, const Lowered& low, const EngineResult& res, const Report& rep,
                       bool link_tracks = false);
std::string human_summary(const Inputs& in, const Lowered& low, const EngineResult& res, const Report& rep);

}  // namespace dtsim::sim
