// `dtsim calibrate runs`: a calibration of the user's own cluster and software stack from a few measured runs.
//
// The runs are rows of the accuracy harness (validate/published/published.hpp: a run in `dtsim simulate`'s terms —
// model, cluster, plan, stack — with its measured iteration time, or any published-table shape). The fit changes only
// the values those runs can identify and says, for every other value, why it kept the base one:
//
// 1. Sensitivities. For each candidate value v (GEMM efficiency curve, memory-bound, fused-attention and low-precision
//    efficiencies, launch cost, NVLink and NIC efficiencies, collective step cost; the stack's host issue, collective
//    issue, pipeline send and per-iteration costs), J[i][v] = d ln t_i / d ln v for every run i, by central
//    differences around the base (a value at zero is probed from a floor).
// 2. Identifiability. Values are chosen greedily by column-pivoted Gram-Schmidt on J: the value whose column keeps
//    the largest norm once the chosen values' columns are projected out is taken while that norm says the runs pin it
//    within x1.5 at one sigma under `noise` (2%) relative noise per run, and while at most (runs - 1) / 2 values are
//    chosen (half the runs are left to judge the fit). A value no run depends on is "not identified" (e.g. the NIC's
//    efficiency from single-node runs); one whose effect the chosen values already explain is "confounded with" the
//    value it correlates with most.
// 3. Fit. Nelder-Mead over the logs of the chosen values, minimising the sum over runs of ln(predicted / measured)^2.
// 4. Uncertainty. At the optimum: s^2 = SSR / (runs - chosen); covariance s^2 (J^T J)^-1 in log space; each value's
//    90% range exp(+-t s_v) (Student's t with runs - chosen degrees of freedom); each run's leverage h_i (diagonal of
//    the hat matrix) and its leave-one-out residual e_i / (1 - h_i) (the linearised fit without that run).
// 5. Intervals. Per scale (one node, several nodes) with at least two runs: the prediction interval of a new run,
//    the scale's mean residual +- t(0.95, runs - chosen) s_scale sqrt(1 + chosen / runs), s_scale from the scale's
//    residuals with the fit's share of the degrees of freedom removed; written into the calibration, so that
//    `dtsim simulate --calibration` prints it for runs of that scale (other scales keep the shipped bands). (The
//    leave-one-out residuals are reported per run but not used: one high-leverage run inflates them without bound.)
//
// The result is two files, as the project keeps them apart: the hardware calibration (the base with the fitted
// hardware values and the intervals; no software values, which a stack fills in) and a stack profile (the base
// stack with the fitted software values).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "traces/stack_profile.hpp"
#include "validate/published/published.hpp"

namespace dtsim::sim {

struct RunsFitOptions {
  int max_evaluations = 300;  ///< of the fit's objective (one evaluation predicts every run)
  double noise = 0.02;        ///< assumed relative noise of one measured iteration time (identifiability threshold)
  std::vector<std::string> sources;  ///< the data files (provenance)
  /// Fit hardware values only (calibration.json), the stack's values as given: for rows of several stacks.
  bool hardware_only = false;
};

struct FittedValue {
  std::string field;  ///< "compute.gemm_efficiency_max", "network.inter_bandwidth_efficiency", "stack.host_issue_s"
  std::string file;   ///< "calibration.json" or "stack.json"
  double before = 0, after = 0;
  bool fitted = false;
  double sigma_log = 0;      ///< standard error of ln(after) (fitted values with residual degrees of freedom)
  double low = 0, high = 0;  ///< 90% range of the value (fitted values), within its bounds
  bool at_bound = false;     ///< the fit pushed it to a bound (e.g. an efficiency of 1): its range is one-sided
  double sensitivity = 0;    ///< largest |d ln t / d ln value| over the runs, at the base
  std::vector<std::string> determined_by;  ///< the runs that move most with it (up to three)
  std::string reason;                      ///< why it kept the base value (empty when fitted)
};

struct FittedRun {
  std::string label;  ///< the run's id, else "file row N"
  std::string scale;  ///< "1-node" or "multi-node"
  int gpus = 0;
  double measured_s = 0, before_s = 0, after_s = 0;
  double error_before = 0, error_after = 0;  ///< (predicted - measured) / measured
  double leverage = 0;                       ///< h_i
  double loo_error = 0;                      ///< the linearised leave-one-out error (relative)
  bool loo_defined = true;                   ///< false: the run alone determines a value (h_i ~ 1)
  bool unexplained = false;                  ///< the fitted values leave it off by more than 10%
};

struct RunsFit {
  Calibration calibration;  ///< the effective calibration after the fit (hardware + software values, all pinned)
  StackProfile stack;       ///< the stack profile with the fitted software values
  std::vector<FittedValue> values;
  std::vector<FittedRun> runs;
  std::vector<std::string> skipped;  ///< runs not used, with the reason
  std::vector<std::string> notes;
  int evaluations = 0;
  int dof = 0;                           ///< runs - fitted values
  double rms_before = 0, rms_after = 0;  ///< of ln(measured / predicted)
  double residual_sigma = 0;             ///< s
  std::vector<AccuracyBand> bands;       ///< by scale ("1-node", "multi-node")
};

/// Fits `hardware` (a GPU's calibration) and `stack` to `rows` (runs on that GPU). ConfigError when fewer than three
/// runs can be simulated, or when the runs name several GPUs.
RunsFit fit_runs(const std::vector<PublishedRow>& rows, const Calibration& hardware, const StackProfile& stack,
                 const RunsFitOptions& options);

/// `calibration` with the fit's hardware values (calibration.json) set, nothing else changed.
Calibration with_fitted_hardware(Calibration calibration, const RunsFit& f);

/// The fit as text (values, what could not be identified and why, runs, intervals) and as JSON (fit_report.json).
std::string runs_fit_text(const RunsFit& f);
nlohmann::json runs_fit_json(const RunsFit& f);
/// The hardware calibration file: the fitted calibration without software values (the stack profile holds them),
/// with its intervals and the fit in its provenance.
nlohmann::json runs_fit_calibration_json(const RunsFit& f, const std::vector<std::string>& sources);
/// The stack profile file.
nlohmann::json runs_fit_stack_json(const RunsFit& f);

}  // namespace dtsim::sim
