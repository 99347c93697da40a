// Public API, validation (included by dtsim/dtsim.hpp): everything that compares with measured reality. Score
// predictions against published measurements and fit a calibration to them, turn an executor run into a measured
// timeline, compare a predicted run with a measured one task by task, fit calibrations to nccl-tests logs and to
// kernel traces, and replay a PyTorch-profiler trace with what-if edits. Same conventions as dtsim.hpp: plain
// structs with typed results, `text` (what the CLI prints; the CLI adds its wall time and the "wrote DIR/..." line
// where the command has them, except calibrate, whose `text` names `out_dir` itself) and `files` (what `--out DIR`
// writes), ConfigError with the CLI's message; nothing is written to disk. Options the CLI requires (--out, the
// run directories, the trace, the nccl-tests log and its cluster) are checked by the CLI before the call; empty
// ones here fail where they are read.
//
// The formats and models behind each call: validate/published/published.hpp (published rows, the fit),
// validate/compare/compare.hpp and measured_timeline.hpp (timelines), validate/calibrate/nccl_fit.hpp and
// compute_fit.hpp (calibration fits), sim/replay/replay.hpp (replay and its edits).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dtsim/common.hpp"
#include "traces/calibration.hpp"
#include "traces/plan.hpp"
#include "traces/stack_profile.hpp"

namespace dtsim {

// ---- published measurements (`dtsim validate published`, `dtsim validate fit`) -----------------------------------

/// Files of measured runs, predicted row by row. Each row runs on its own GPU kind; a row is simulated with the
/// calibration of its GPU (`calibration` when given, which must then be of every row's GPU).
struct PublishedRequest {
  std::vector<std::string> data;     ///< files: vTrain CSV, CSV with named columns, JSON rows, measurements document
  std::string calibration;           ///< calibration JSON file ("" = the built-in one of each row's GPU)
  std::string split = "all";         ///< all | train (even rows of each file) | test (odd rows of each file)
  std::string network = "analytic";  ///< analytic | flow (flow: one child process per row)
  /// Scale extrapolation (issue Calibrate): > 0 refits each GPU's calibration (fit_published, `fit_max_evaluations`
  /// evaluations) on the timed rows with at most this many GPUs and scores the rows with more (PublishedResult::
  /// extrapolation). 0 = off.
  int fit_max_gpus = 0;
  int fit_max_evaluations = 300;
  double fit_max_error_weight = 0;
};

/// One predicted row (error = (predicted - measured) / measured).
struct PublishedRowResult {
  int index = 0;      ///< 0-based row of its file
  std::string group;  ///< rows of the same model shape (measurements documents: see validate/published)
  ParallelPlan plan;
  double measured_s = 0, predicted_s = 0, error = 0;
  double compute_s = 0, exposed_comm_s = 0, bubble_s = 0;  ///< of the slowest simulated rank
  bool oom = false;
  std::string failure;  ///< why the row could not be simulated or expressed ("" if it was simulated)
  std::string id;       ///< the row's label in its file ("" when the file has none)
  /// Peak device memory: measured (largest over ranks; 0 = not measured) and predicted (largest over the simulated
  /// ranks); memory_error = (predicted - measured) / measured, 0 without a measurement.
  double measured_peak_memory_bytes = 0, predicted_peak_memory_bytes = 0, memory_error = 0;
  bool measured_oom = false;  ///< the source reports only an out-of-memory outcome (no time; not scored)
  std::string precision;      ///< as measured ("bf16", "fp8", ...; "" not stated)
  std::string notes;          ///< caveats of the source and of the mapping, "; "-separated
};

/// The score of one model group.
struct PublishedGroupScore {
  std::string group;
  int rows = 0;
  double mape = 0, max_abs_error = 0, spearman = 0;
  int memory_rows = 0;     ///< rows with a measured peak memory
  double memory_mape = 0;  ///< their mean |memory error|
};

/// Rows with more GPUs predicted by calibrations fitted on rows with fewer (PublishedRequest::fit_max_gpus).
struct PublishedExtrapolation {
  int fit_max_gpus = 0;
  int fit_rows = 0;                 ///< timed rows with at most fit_max_gpus GPUs, of the GPUs refit
  int scored_rows = 0;              ///< rows with more GPUs, scored
  double mape = 0, mean_error = 0;  ///< of the scored rows (fractions)
  /// Per GPU kind of the scored rows: how its calibration was obtained ("refit on 12 rows: objective 9.1% -> 3.2%",
  /// or why not: too few rows for the fit's parameters, a row that does not simulate).
  std::vector<std::pair<std::string, std::string>> calibrations;
  std::vector<PublishedRowResult> results;  ///< the scored rows, predicted with those calibrations
};

struct PublishedResult {
  int rows = 0, failed = 0;
  double mape = 0;           ///< mean |error| (fraction: 0.06 = 6%)
  double max_abs_error = 0;  ///< largest |error|
  double mean_error = 0;     ///< signed mean error (bias)
  double spearman_min = 0;   ///< the smallest per-group Spearman rank correlation
  /// Peak memory over the simulated rows with a measured peak (fractions, as the times).
  int memory_rows = 0;
  double memory_mape = 0, memory_max_abs_error = 0, memory_mean_error = 0;
  /// Rows reporting only an out-of-memory outcome, and of them those the simulation also finds out of memory.
  int measured_oom_rows = 0, measured_oom_predicted = 0;
  std::vector<PublishedGroupScore> groups;
  std::vector<std::pair<std::string, double>> mape_by_feature;  ///< MAPE of the rows exercising each mechanism
  std::vector<PublishedRowResult> results;                      ///< every row of the split, in file order
  std::optional<PublishedExtrapolation> extrapolation;          ///< with fit_max_gpus > 0
  std::string text;                                             ///< the score, per group and per feature
  Files files;  ///< validation.json, validation.csv, predicted_vs_measured.svg
};
/// Predicts every row of the split and scores the predictions.
PublishedResult validate_published(const PublishedRequest& req);

/// The calibration fitted to the rows of a split: Nelder-Mead over log parameters minimising the mean over model
/// groups of (the group's MAPE + max_error_weight x its largest |error|), analytic network (`network` is checked
/// but not used). The rows must run on one GPU kind.
struct FitRequest : PublishedRequest {
  int max_evaluations = 300;    ///< objective evaluations (each predicts every row), at least 10
  double max_error_weight = 0;  ///< weight of each group's largest |error| next to its MAPE, >= 0
};
struct FitResult {
  Calibration calibration;                           ///< the fitted one; its provenance records the fit
  std::size_t rows = 0;                              ///< rows fitted
  double objective_before = 0, objective_after = 0;  ///< fractions (0.06 = 6%)
  int evaluations = 0;
  std::string text;  ///< the objective before and after and the fitted values
  Files files;       ///< calibration.json
};
FitResult fit(const FitRequest& req);

/// Leave-one-source-out cross-validation over the files of `req.data` (each file one source; validate/published/
/// cross_validate.hpp): per source its MAPE, bias, Spearman, memory MAPE and the coverage of the 90% intervals built
/// from the other sources; the bands. req.max_evaluations bounds each refit.
struct CrossValidateResult {
  int rows = 0;
  double pooled_mape = 0;
  int covered = 0, banded = 0;
  std::string text;  ///< the leave-one-source-out table
  Files files;       ///< cross_validation.json, bands.json
};
CrossValidateResult cross_validate(const FitRequest& req);

// ---- executor measurements (`dtsim validate measured`) ------------------------------------------------------------

/// An executor run (dtsim-exec's measurements.json) of a simulated run (a `dtsim simulate --out` directory) as a
/// measured run directory in the simulator's format: the predicted graph re-timed with the measured compute
/// durations (communication keeps its predicted times), with the measured peak memory. Runs the simulator once
/// (SimGrid: once per process).
struct MeasuredRequest {
  std::string predicted_dir;      ///< the `dtsim simulate --out` directory the executor ran
  std::string measurements_file;  ///< dtsim-exec's measurements.json
};
struct MeasuredResult {
  std::string device;              ///< the GPU the executor ran on
  std::size_t compute_tasks = 0;   ///< compute tasks of the graph
  std::size_t measured_tasks = 0;  ///< of them, those with measured durations
  double iteration_time_s = 0;     ///< of the re-timed graph
  struct FailedRank {
    int sim_rank = 0, global_rank = 0;
    std::string error;
  };
  std::vector<FailedRank> failed_ranks;  ///< ranks the executor could not run
  std::string text;                      ///< the coverage and the re-timed iteration, then each failed rank
  Files files;                           ///< summary.json, trace.json
};
MeasuredResult validate_measured(const MeasuredRequest& req);

// ---- predicted vs measured run (`dtsim compare`) ------------------------------------------------------------------

/// Two run directories in the format `dtsim simulate --out` writes (trace.json + summary.json), aligned task by task.
struct CompareRequest {
  std::string predicted_dir;
  std::string measured_dir;  ///< in the same format
};

/// A predicted and a measured value; error = measured / predicted - 1 (NaN when predicted is 0 or a side lacks it).
struct CompareMetric {
  double predicted = 0, measured = 0, error = 0;
};

struct CompareResult {
  CompareMetric iteration_time_s;
  std::size_t matched_tasks = 0;         ///< tasks present on both sides
  std::size_t only_predicted_tasks = 0;  ///< tasks the measured side lacks
  std::size_t only_measured_tasks = 0;   ///< tasks the predicted side lacks
  /// Per simulated rank: compute, exposed communication and bubble time.
  struct Rank {
    int rank = 0;
    CompareMetric compute_s, exposed_comm_s, bubble_s;
  };
  std::vector<Rank> ranks;                               ///< by rank
  std::map<std::string, CompareMetric> phase_compute_s;  ///< compute-stream time per phase
  std::map<int, CompareMetric> peak_memory_bytes;        ///< by global rank
  std::size_t compute_tasks = 0;                         ///< matched compute-stream tasks with a finite error
  double compute_task_mape = 0;                          ///< their mean |error|
  double compute_task_weighted_mape = 0;                 ///< sum |measured - predicted| / sum predicted
  double compute_task_max_abs_error = 0;
  std::string text;  ///< end to end, per rank, per phase, memory, the worst tasks
  Files files;       ///< compare.json, compare_trace.json (both sides in one Chrome trace)
};
CompareResult compare(const CompareRequest& req);

// ---- calibration fits (`dtsim calibrate nccl-tests`, `dtsim calibrate compute`) -----------------------------------

/// The network's message-size segments (latency and bandwidth factors per size range) of one link class ("intra"
/// when the log's ranks fit in one node, else "inter") fitted to an nccl-tests log.
struct CalibrateNcclRequest {
  std::string log;          ///< the nccl-tests text output
  std::string cluster;      ///< the cluster it was measured on: preset NAME:GPUS or cluster JSON file
  std::string calibration;  ///< the base: calibration JSON file ("" = the built-in one of the cluster's GPU)
  std::string op;           ///< all-reduce | all-gather | reduce-scatter ("" = what the log says)
  int ranks = 0;            ///< ranks (0 = what the log says)
  std::string out_dir;      ///< where the caller writes `files`, named in `text` ("" = not named)
};
struct CalibrateNcclResult {
  Calibration calibration;  ///< the base with the fitted segments
  std::string link;         ///< "intra" or "inter"
  std::size_t sizes = 0;    ///< message sizes in the log
  struct Point {
    double bytes = 0, measured_s = 0, predicted_s = 0;
  };
  std::vector<Point> points;                     ///< every size, measured and as the fitted calibration predicts it
  double mean_rel_error = 0, max_rel_error = 0;  ///< |predicted - measured| / measured over the points
  std::string text;                              ///< the fitted segments and the residuals
  Files files;                                   ///< calibration.json
};
CalibrateNcclResult calibrate_nccl_tests(const CalibrateNcclRequest& req);

/// The compute fields (kernel launch overhead, memory-bandwidth and GEMM efficiency) fitted to the kernel times of
/// PyTorch-profiler traces recorded with shapes and/or GEMM sweep CSVs. At least one trace or CSV.
struct CalibrateComputeRequest {
  std::vector<std::string> traces;     ///< Kineto traces: .json, .json.gz, or a .tar.gz / .tgz / .tar of ranks
  std::vector<std::string> gemm_csvs;  ///< GEMM sweep CSVs (m,n,k,dtype,time_s,tflops)
  std::string gpu;                     ///< GPU preset or JSON file ("" = the traces' GPU; required with CSVs only)
  std::string base;                    ///< base calibration: JSON file or GPU preset ("" = the GPU's built-in one)
  /// The stack profile (name or JSON file; "" = kDefaultStack) that stack.json copies with the traces' measured
  /// host issue time in it (written only when a trace measures it).
  std::string stack;
  std::string out_dir;  ///< where the caller writes `files`, named in `text` ("" = not named)
};
struct CalibrateComputeResult {
  Calibration calibration;  ///< the base with the fitted compute fields; its provenance records the fit
  std::string gpu;          ///< the GPU fitted
  std::size_t samples = 0;  ///< GEMM and memory-bound operator samples
  double median_rel_error = 0, mean_rel_error = 0, max_rel_error = 0;  ///< |residual| over the samples
  std::vector<std::string> notes;                                      ///< caveats of the inputs and the fit
  /// The median over the traces of the host's issue time per launch measured on their CPU side
  /// (validate/calibrate/host_issue.hpp; 0 when no trace measures it; each trace's figure is in the text and the
  /// calibration's provenance "host_issue"): a software-stack value (a stack profile's host_issue_s), so it is
  /// reported, not set in the hardware calibration.
  double host_issue_s = 0;
  std::string text;  ///< fitted values, residuals overall and per class, skip reasons, notes, host issue
  Files files;       ///< calibration.json, points.csv; stack.json when a trace measures the host issue time
};
CalibrateComputeResult calibrate_compute(const CalibrateComputeRequest& req);

/// The calibration of a GPU nothing was measured on, derived from a measured GPU of the same process generation by
/// board power (traces/device_model.hpp: sustained tensor-core throughput is power-limited).
struct CalibrateDeviceModelRequest {
  std::string gpu;        ///< the target: GPU preset or JSON file (needs board_power_w)
  std::string reference;  ///< the measured GPU: preset or JSON file ("" = h100-sxm5-80gb)
  std::string base;       ///< the reference's calibration: JSON file ("" = the reference's built-in one)
  std::string out_dir;    ///< where the caller writes `files`, named in `text` ("" = not named)
};
struct CalibrateDeviceModelResult {
  Calibration calibration;  ///< the derived calibration
  std::string text;         ///< the scaling and the values it changed
  Files files;              ///< calibration.json
};
CalibrateDeviceModelResult calibrate_device_model(const CalibrateDeviceModelRequest& req);

/// A calibration of the user's own GPUs, fabric and software stack from a few measured runs
/// (validate/calibrate/runs_fit.hpp): only the values the runs identify are fitted; the report says why each other
/// value was kept. Writes a hardware calibration and a stack profile (with `simulate --calibration --stack`).
struct CalibrateRunsRequest {
  std::vector<std::string> data;  ///< files of runs: the published-data formats, rows naming "model" and "plan"
  std::string calibration;        ///< base hardware calibration JSON ("" = the runs' GPU's built-in one)
  std::string stack;              ///< base stack: name or profile JSON ("" = the runs' own, which must agree)
  /// Fit on the runs with at most this many GPUs (0 = no limit) and predict the others with the fit (held out).
  int fit_max_gpus = 0;
  /// Fit on at most this many of those runs, evenly spaced in file order (0 = all); the rest are held out.
  int fit_runs = 0;
  int max_evaluations = 300;
  double noise = 0.02;  ///< assumed relative noise of one measured time (what counts as identified)
  std::string out_dir;  ///< where the caller writes `files`, named in `text` ("" = not named)
};
struct CalibrateRunsResult {
  Calibration calibration;  ///< the fitted hardware calibration with the fitted stack's values filled in
  StackProfile stack;       ///< the fitted stack profile
  int runs = 0;             ///< runs fitted on
  int fitted_values = 0;
  double rms_before = 0, rms_after = 0;  ///< rms ln(measured / predicted) over the fitted runs
  /// Held-out runs (fit_max_gpus / fit_runs), predicted with the fit: count, mean |error|, mean error, by scale.
  struct HeldOut {
    std::string scale;  ///< "1-node", "multi-node"
    int runs = 0;
    double mape = 0, bias = 0;
    int covered = 0;  ///< inside their 90% interval (the fit's, where it has one for the scale)
  };
  std::vector<HeldOut> held_out;
  std::string text;  ///< the fit report
  Files files;       ///< calibration.json, stack.json, fit_report.json
};
CalibrateRunsResult calibrate_runs(const CalibrateRunsRequest& req);

// ---- trace replay (`dtsim replay`) --------------------------------------------------------------------------------

/// A Kineto trace replayed as a dependency graph (analytic engine), with optional what-if edits of durations.
/// Unset edits keep the measured value. Chakra execution traces (a directory of .et files, or .et files: `trace`
/// and `more_traces`) are replayed together as one multi-rank graph (sim/replay/et_replay.hpp): collectives
/// rendezvous across their group, sends and receives pair up; the kernel and collective edits apply, the CPU,
/// runtime, launch-latency and group-size ones are refused.
struct ReplayRequest {
  std::string trace;  ///< .json, .json.gz, or a .tar.gz / .tgz / .tar of one trace per rank; or Chakra (see above)
  std::vector<std::string> more_traces;  ///< Chakra: further .et files (one per rank) after `trace`
  std::string comm_groups;               ///< Chakra: communicator-group JSON ("" = the directory's, or none)
  std::string member;                    ///< with an archive: replay only this member ("" = every rank, one by one)
  /// "REGEX=FACTOR": multiply the duration of non-collective GPU tasks whose name matches (first match wins).
  std::vector<std::string> scale_kernels;
  double collective_bw_scale = 1.0;          ///< collective (NCCL) bandwidth x F (alpha-beta model)
  std::optional<double> collective_bw_GBps;  ///< collective bus bandwidth for collectives of known size, > 0
  std::optional<int> collective_group;       ///< new collective group size, >= 2
  double collective_alpha_us = 0;            ///< per-step latency of the alpha-beta model, microseconds
  double collective_time_scale = 1.0;        ///< every collective kernel's time x F
  double cpu_scale = 1.0;                    ///< CPU gaps (host work between runtime calls) x F
  double runtime_scale = 1.0;                ///< runtime calls' own time x F
  std::optional<double> launch_latency_us;   ///< launch latency, >= 0 (unset: fitted from the trace)
  bool keep_unexplained_gaps = true;         ///< false: drop GPU idle time no dependency explains (the model alone)
  bool chrome_trace = true;                  ///< render replay_trace.json into `files` (the largest output)
};

/// One replayed trace (spans from the trace's first replayed event, nanoseconds).
struct ReplayTraceResult {
  std::string source;
  int rank = -1, world_size = 0;
  std::int64_t measured_span_ns = 0, replayed_span_ns = 0;
  double error_pct = 0;  ///< 100 (replayed - measured) / measured
  bool edited = false;
  std::string edits;                   ///< the edits in words ("" when none)
  std::int64_t predicted_span_ns = 0;  ///< with the edits (= replayed_span_ns when not edited)
  double change_pct = 0;               ///< 100 (predicted - replayed) / replayed
};
struct ReplayResult {
  std::string format = "kineto";  ///< "kineto", or "chakra-et" (Chakra execution traces, every rank at once)
  /// One per replayed trace (archive members in name order). Chakra: one per rank, spans from t = 0, no measurement
  /// (measured_span_ns and error_pct 0).
  std::vector<ReplayTraceResult> traces;
  /// Chakra: the iteration time, the latest end over every rank (replayed, and with the edits).
  std::int64_t span_ns = 0, predicted_span_ns = 0;
  std::string text;  ///< one summary per trace (without the wall time)
  Files files;       ///< replay.json; replay_trace.json (Chrome trace of the replayed timelines) with chrome_trace
};
ReplayResult replay(const ReplayRequest& req);

}  // namespace dtsim
