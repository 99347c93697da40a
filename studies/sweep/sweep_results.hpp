// Sweep results (`dtsim sweep --out DIR` writes DIR/results.jsonl): one JSON object per scenario per line, read back
// into rows for `dtsim pareto` and `dtsim report`.
//
// Row schema (every key required; unknown keys ignored): id, index, model, params, cluster, gpu, gpus, nodes,
// network, planner ("" for grid points), tp, pp, dp, vp, mbs, gbs, schedule, zero, recompute, tp_layout,
// sequence_parallel, precision, tp_comm_overlap, overlap_param_gather, cuda_graphs, dispatcher, overlap_moe_comm,
// megatron_fsdp (these seven optional: bf16 / false / alltoall in rows written before they existed), status ("ok" |
// "oom" | "failed" | "crashed"), error, iteration_time_s, tokens_per_s, samples_per_s, mfu, model_tflops_per_gpu,
// peak_memory_bytes (max over ranks), memory_capacity_bytes, fits, memory_bytes {weights, gradients, optimizer,
// activations, reserved}, compute_s, exposed_comm_s, bubble_s, sim_wall_s. Rows whose status is not "ok" have null
// metrics (read as NaN, fits false); an "ok" row must carry tokens_per_s, peak_memory_bytes and fits.
#pragma once
#include <istream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtsim::sim {

struct SweepMemory {
  double weights = 0, gradients = 0, optimizer = 0, activations = 0, reserved = 0;  ///< bytes; NaN when null
};

struct SweepRow {
  std::string id;
  int index = 0;
  std::string model;
  double params = 0;
  std::string cluster, gpu;
  int gpus = 0, nodes = 0;
  std::string network, planner;
  int tp = 1, pp = 1, dp = 1, vp = 1, mbs = 1, gbs = 1;
  int cp = 1, ep = 1;  ///< context- and expert-parallel degrees (1 in rows written before they existed)
  std::string schedule;
  int zero = 0;
  std::string recompute, tp_layout;
  bool sequence_parallel = false;
  std::string precision;  ///< "bf16", "fp8-delayed", ... ("" for a planner row that did not run)
  bool tp_comm_overlap = false, overlap_param_gather = false, cuda_graphs = false;
  std::string dispatcher = "alltoall";  ///< MoE token dispatcher ("" for a planner row that did not run)
  bool overlap_moe_comm = false;
  bool megatron_fsdp = false;  ///< ZeRO 2/3 as Megatron-FSDP runs them (ParallelPlan::megatron_fsdp)
  std::string status, error;
  // Metrics: NaN (fits false) when null, which they are for every row whose status is not "ok".
  double iteration_time_s = 0, tokens_per_s = 0, samples_per_s = 0, mfu = 0, model_tflops_per_gpu = 0;
  double peak_memory_bytes = 0, memory_capacity_bytes = 0;
  bool fits = false;
  SweepMemory memory_bytes;
  double compute_s = 0, exposed_comm_s = 0, bubble_s = 0, sim_wall_s = 0;

  bool ok() const { return status == "ok"; }
  /// Ran and fits in memory: the rows that compete for the Pareto front and the top-strategy tables.
  bool usable() const { return ok() && fits; }
  /// "tp2 pp4 dp1 vp1 mbs1 zero0 recompute=full layout=1d" (+ " sp" with sequence parallelism, then the precision
  /// unless bf16 and " tp-overlap", " param-gather-overlap", " cuda-graphs" where set); planner rows
  /// are "planner NAME: " followed by the plan it chose.
  std::string strategy() const;
};

struct SweepResults {
  std::string path;  ///< the results.jsonl that was read
  std::vector<SweepRow> rows;
};

/// How many rows ended how: ran and fit, ran but over capacity, out of memory, failed, crashed.
struct StatusCounts {
  int total = 0, ok_fit = 0, ok_over = 0, oom = 0, failed = 0, crashed = 0;
  void add(const SweepRow& r);
  StatusCounts& operator+=(const StatusCounts& o);
};
StatusCounts count_status(const std::vector<SweepRow>& rows);

/// Reads RESULTS: a results.jsonl file, or a sweep output directory holding one. Blank lines are skipped. A line
/// that is not a row in the schema throws FormatError "FILE:LINE: ..."; a last line that lacks its newline and
/// does not parse is reported as torn (an interrupted write) instead of being used or dropped.
SweepResults load_sweep_results(const std::string& path);
/// The same from a stream; `name` stands for the file in messages.
std::vector<SweepRow> parse_sweep_results(std::istream& in, const std::string& name);
/// One row in the schema above (NaN metrics as null): what the sweep writes, one per line.
nlohmann::json to_json(const SweepRow& row);

}  // namespace dtsim::sim
