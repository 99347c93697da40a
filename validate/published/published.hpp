// Accuracy harness: predictions of dtsim against published measured iteration times.
//
// Inputs: the vTrain CSV (VIA-Research/vTrain data/ground_truth_single.csv: GPUs, global batch, micro batch,
// hidden size, attention heads, # layers, sequence length, TP, DP, PP, iteration time (ms)), or a generic CSV with
// named columns (see GenericColumns in the .cpp / README) or a JSON list of rows, or a shared measurements document
// (TorchTitan / SimuMax / SAILOR tables with model shapes, measured time and peak memory; published_json.hpp has
// its mapping). Predictions carry the simulated peak memory next to the time; rows with a measured peak are scored
// on memory too.
//
// Config mapping for Megatron-DeepSpeed GPT runs (the vTrain rows; documented in docs/accuracy.md):
//   model  GPT-2 style: vocabulary 50,257 sharded as 50257 // TP rows per rank, unpadded, as vTrain's model code
//          does (generic rows: padded to a multiple of 128 x TP, Megatron's --make-vocab-size-divisible-by 128),
//          learned position embeddings, tied input/output embeddings,
//          FFN 4h, fp16 with Adam (mixed precision);
//   plan   TP x PP x DP as given, ranks TP innermost, 1F1B, activation recompute full (use_checkpoint: true),
//          no ZeRO, DP all-reduce overlapped with the last backward in 25 MiB buckets;
//   cluster one DGX A100 node (NVSwitch) with the row's GPU count.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/simulate.hpp"

namespace dtsim::sim {

/// One measured run.
struct PublishedRow {
  int index = 0;  ///< 0-based row of the file
  std::string gpu = "a100-sxm4-80gb";
  std::string cluster;  ///< cluster spec string ("dgx-a100:8") or JSON file
  TransformerSpec model;
  ParallelPlan plan;
  double measured_s = 0;
  std::string group;  ///< rows of the same model shape (for rank correlation)
  /// The publication the row comes from within its file (a measurements document's per-row "source", e.g.
  /// "megascale"); empty when the file is one source. Scale trends are scored per series.
  std::string series;
  /// "iteration" (a training iteration) or "layer" (forward + recompute + backward of one transformer layer for one
  /// micro-batch, e.g. Korthikanti et al.'s Table 4), predicted from the layer's passes with the TP group's links.
  std::string measure = "iteration";
  std::string id;                         ///< the row's label in its file ("" when the file has none)
  double measured_peak_memory_bytes = 0;  ///< measured peak device memory (largest over ranks); 0 when not measured
  /// The measured peak is the PyTorch caching allocator's (max_memory_allocated / reserved): it excludes the CUDA
  /// context and the libraries' own buffers, which the prediction's reserved_memory_bytes stands for.
  bool memory_from_allocator = false;
  bool measured_oom = false;  ///< the source reports only that the run ran out of memory (no time: not scored)
  std::string precision;      ///< the run's precision as the source states it ("bf16", "fp8", ...; "" not stated)
  bool compiled = false;      ///< the source ran it under torch.compile (the plan's torch_compile: fused eager norms)
  /// The source does not state the run's activation recomputation / optimizer sharding. The run was measured, so it
  /// fitted: where the plan as mapped does not, the prediction takes the first of Megatron's standard memory levers
  /// that makes it fit (distributed optimizer, then selective, then full recomputation, then sequence parallelism)
  /// and says so in the notes.
  bool recompute_unstated = false, zero_unstated = false, sp_unstated = false;
  /// The source states nothing about the run's data-parallel overlap (no "overlap" or "overlap_param_gather" field).
  bool overlap_unstated = false;
  /// Caveats, "; "-separated: the source's flags and how the harness mapped the row (e.g. an FP8 run predicted in
  /// bf16, a GPU simulated as the nearest preset).
  std::string notes;
  /// Non-empty when the row's model, plan or hardware cannot be expressed in dtsim (the reason, naming the file and
  /// row): the row is kept, not simulated, and counted as failed.
  std::string failure;
};

/// Reads the vTrain CSV (detected by its header), a generic CSV/JSON file, or a shared measurements document (a JSON
/// object with "model_shapes" and "rows", see published_json.hpp). FormatError on a bad file; a row of a
/// measurements document that cannot be expressed becomes a row with `failure` set instead.
std::vector<PublishedRow> load_published(const std::string& path);

struct RowResult {
  PublishedRow row;
  double predicted_s = 0;
  double error = 0;                                        ///< (predicted - measured) / measured
  double compute_s = 0, exposed_comm_s = 0, bubble_s = 0;  ///< of the slowest simulated rank
  bool oom = false;
  std::string failure;                     ///< non-empty when the row could not be simulated (the message)
  double predicted_peak_memory_bytes = 0;  ///< largest peak device memory over the simulated ranks
  /// (predicted - measured) / measured peak memory; 0 when the row has no measured memory (see has_memory()).
  double memory_error = 0;
  bool has_memory() const { return failure.empty() && row.measured_peak_memory_bytes > 0; }
  /// Simulated, with a measured and a predicted time to compare (not a row that only reports running out of memory).
  bool timed() const { return failure.empty() && !row.measured_oom && row.measured_s > 0 && predicted_s > 0; }
};

/// The reason of a row's failure without the row's own details: the text after "row N ('id'): " up to the first
/// " (", ", " or "; " ("heterogeneous cluster", "measured: no positive iteration_s", ...).
std::string failure_reason(const std::string& failure);

/// (predicted - measured) / measured; 0 when measured is not positive.
/// A row that leaves its data-parallel overlap unstated, on Megatron-Core with the distributed optimizer (ZeRO-1/2,
/// not Megatron-FSDP) and overlapped gradient reduction: its parameter all-gather is taken as overlapped with the next
/// forward too (--overlap-param-gather), as Megatron-LM's launch examples and NeMo's configurations set the pair.
bool param_gather_overlap_assumed(const ParallelPlan& p, bool overlap_unstated);
double relative_error(double predicted, double measured);

struct GroupScore {
  std::string group;
  int rows = 0;
  double mape = 0, max_abs_error = 0, spearman = 0;
  int memory_rows = 0;     ///< rows of the group with a measured peak memory
  double memory_mape = 0;  ///< their mean |memory error|
};

/// A pair of rows that differ in one switch only (FP8 vs BF16, TP communication overlap on vs off, torch.compile on
/// vs off): the measured and the predicted speedup of the variant over the base (time ratio base / variant).
struct SpeedupPair {
  std::string feature;  ///< "fp8", "tp overlap", "compile"
  std::string base_id, variant_id;
  double measured = 0, predicted = 0;
};
/// The pairs among `results` (simulated, timed rows of one model, cluster and plan otherwise identical).
std::vector<SpeedupPair> speedup_pairs(const std::vector<RowResult>& results);

/// Does the error trend with scale? Over the scored rows of one series (a file, or one publication within it) that
/// span at least kScaleTrendMinSpan x in GPU count: the Spearman correlation of the signed error with the GPU count
/// (issue Fidelity: |rho| <= 0.3 counts as no trend). A negative rho: the larger runs are predicted too fast.
struct ScaleTrend {
  std::string series;  ///< "all" (the file) or the publication
  int rows = 0;
  int min_gpus = 0, max_gpus = 0;
  double spearman = 0;
  double mean_error_small = 0, mean_error_large = 0;  ///< signed mean error at the smallest / largest GPU count
};
inline constexpr int kScaleTrendMinSpan = 8;
/// The trends of `results`: the whole set ("all") and each series, where the span allows.
std::vector<ScaleTrend> scale_trends(const std::vector<RowResult>& results);
/// The trends as validation.json / cross_validation.json write them.
nlohmann::json scale_trends_json(const std::vector<ScaleTrend>& trends);

struct ValidationScore {
  int rows = 0, failed = 0;
  /// The failed rows counted by reason (failure_reason), most frequent first.
  std::vector<std::pair<std::string, int>> failed_by_reason;
  double mape = 0;  ///< mean |error|
  double max_abs_error = 0;
  double mean_error = 0;    ///< signed (bias)
  double spearman_min = 0;  ///< the smallest per-group Spearman correlation
  std::vector<GroupScore> groups;
  /// MAPE of rows split by which mechanism they exercise (pipeline, tensor, data parallel, micro-batch size).
  std::vector<std::pair<std::string, double>> by_feature;
  /// Peak memory over the simulated rows with a measured peak: mean |error|, largest |error|, signed mean.
  int memory_rows = 0;
  double memory_mape = 0, memory_max_abs_error = 0, memory_mean_error = 0;
  /// Rows whose source reports only an out-of-memory outcome (not in rows / failed), and how many of them the
  /// simulation also finds out of memory.
  int measured_oom_rows = 0, measured_oom_predicted = 0;
  std::vector<SpeedupPair> speedups;
  std::vector<ScaleTrend> scale_trends;
};

/// "all", "train" (even rows) or "test" (odd rows): the fixed split used for fitting and held-out scoring.
std::vector<PublishedRow> select_split(const std::vector<PublishedRow>& rows, const std::string& split);

/// Predicts every row with `cal` (ANALYTIC network: single-node rows have GPU-private NVSwitch ports, where the
/// analytic engine equals the flow-level one; rows run on worker_threads() threads (traces/parallel.hpp), the result
/// the same for any count; FLOW runs each row in a child process, one at a time).
std::vector<RowResult> predict_rows(const std::vector<PublishedRow>& rows, const Calibration& cal, NetworkMode network);
/// Each row with its own calibration (e.g. the shipped one of the row's GPU).
std::vector<RowResult> predict_rows(const std::vector<PublishedRow>& rows,
                                    const std::function<const Calibration&(const PublishedRow&)>& calibration_of,
                                    NetworkMode network);

ValidationScore score(const std::vector<RowResult>& results);

/// Spearman rank correlation (average ranks for ties); 0 for fewer than 2 points.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

/// Fits the calibration (GEMM efficiency curve and misaligned-GEMM factor, memory-bound efficiency, launch overhead,
/// host issue time per kernel and per collective, NVLink efficiency, collective and p2p software costs) to `rows` by
/// minimising the mean over model groups of (the group's MAPE + `max_error_weight` x the group's largest |error|)
/// (Nelder-Mead over log-parameters, two starts), starting from `base`. One set of values for all rows: no per-row
/// or per-group terms. The objective's value before and after is reported as a fraction (0.06 = 6%). Rows with
/// `failure` set (not expressible) are left out; a row that fails to simulate makes the objective 1e9.
struct FitResult {
  Calibration calibration;
  double objective_before = 0, objective_after = 0;
  int evaluations = 0;
};
FitResult fit_published(const std::vector<PublishedRow>& rows, const Calibration& base, int max_evaluations,
                        double max_error_weight = 0);
/// The calibration fields fit_published fits ("section.field", in the order of its parameter vector).
const std::vector<std::string>& fitted_fields();

/// predicted-vs-measured scatter (log-log) as a standalone SVG.
std::string scatter_svg(const std::vector<RowResult>& results, const std::string& title);

}  // namespace dtsim::sim
