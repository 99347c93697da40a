// Leave-one-source-out cross-validation of the published-data harness, and the error bands (prediction intervals)
// it yields.
//
// Each development source (one measurements file) is predicted with calibrations and stack profiles whose fit did
// not see it: a shipped value whose provenance lists the source in `fitted_on` (hardware calibration: provenance
// "fitted_on"; stack profile: StackProfile::fitted_on) is refitted (fit_published, from the estimates every fit
// starts from, not from the shipped optimum) on the other sources of that fit that are given, and the source is
// predicted with the refit. A source whose values saw nothing of it is predicted with the shipped values; one whose
// fit has no other given source is reported as in-sample.
//
// Error bands: r = ln(measured / predicted) of every cross-validated row; for a class of runs (GPU, stack, scale:
// one node or several) a 90% interval [p e^q05, p e^q95] around a prediction p. A run dtsim is asked about comes from
// a cluster and stack no development source measured, so its error is that source's bias plus a row's scatter about
// it, and the sources' biases differ more than their rows do (held out, vTrain's A100 rows are -32% as one block,
// the other A100 sources -16..+7%): the band is a random-effects interval (the one-way random-effects model of a
// meta-analysis, e.g. DerSimonian & Laird, Controlled Clinical Trials 7(3), 1986). Each unit (a source file, or a
// publication within one: PublishedRow::series) has a bias b_u, the mean of its r; a new unit's bias is drawn from
// N(mu, tau^2) with mu the mean of the class's unit biases and tau^2 their variance, pooled with the variance over
// every unit given (kBandPriorDof degrees of freedom) so that a class of one or two units is not taken to agree with
// itself; a row adds a residual r - b_u drawn from the class's residuals with each unit weighing the same (a source
// of 1,440 rows does not outweigh one of 8). q05 and q95 solve sum_j w_j Phi((q - mu - e_j) / tau) = 0.05 / 0.95.
// A source's coverage is scored with bands built from the other sources' rows only.
#pragma once
#include <string>
#include <vector>

#include "traces/accuracy_bands.hpp"
#include "validate/published/published.hpp"

namespace dtsim::sim {

struct CvSource {
  std::string name;  ///< file name (as the provenance lists it)
  std::vector<PublishedRow> rows;
};

/// The 90% band of one class of runs (traces/accuracy_bands.hpp).
using ErrorBand = AccuracyBand;

/// One scored row of a held-out source and the band (built without its source) it was scored against.
struct CvRow {
  std::string id, unit, gpu, stack, scale;
  int gpus = 0;
  double measured_s = 0, predicted_s = 0, log_ratio = 0;
  std::string band_key;  ///< "" when no class of the row had a band
  double q05 = 0, q95 = 0;
  bool covered = false;
};

struct CvSourceResult {
  std::string source, gpus, stacks;
  std::string values_from;  ///< "shipped (never saw it)", "refit without it on ...", "in-sample: ..."
  std::vector<RowResult> results;
  ValidationScore score;
  double spearman_all = 0;      ///< rank correlation over all the source's scored rows
  int covered = 0, banded = 0;  ///< rows inside their band (built without this source), rows with a band
  std::string band_keys;        ///< the band classes used
  std::vector<CvRow> rows;      ///< every timed row, as scored for coverage
  double fit_objective = -1;    ///< the refit's final objective (-1: no refit)
};

struct CvReport {
  std::vector<CvSourceResult> sources;
  int rows = 0;                 ///< scored rows over all sources
  double pooled_mape = 0;       ///< over all scored rows
  double mean_source_mape = 0;  ///< mean of the sources' MAPEs (each source weighs the same)
  int covered = 0, banded = 0;
  double mean_source_coverage = 0;  ///< mean over the sources with a band of covered / banded (each weighs the same)
  std::vector<ErrorBand> bands;     ///< from every source's cross-validated rows (what simulate uses)
};

/// Scale class of a row's run: "1-node" or "multi-node".
std::string scale_class(const PublishedRow& row);
/// One cross-validated row: its run, ln(measured / predicted), and the unit whose bias it shares ("file/series").
struct BandSample {
  const PublishedRow* row = nullptr;
  double log_ratio = 0;
  std::string unit;
};
/// Prior degrees of freedom of the pooled between-unit variance (see the file comment).
inline constexpr double kBandPriorDof = 2.0;
/// Random-effects bands of every class with at least `min_rows` rows (file comment). With one unit in all the
/// samples, no spread between units is known: the band is the 5th and 95th percentiles of its rows' r.
std::vector<ErrorBand> error_bands(const std::vector<BandSample>& samples, int min_rows);

CvReport cross_validate(const std::vector<CvSource>& sources, int max_evaluations, double max_error_weight);

/// The report as text (the leave-one-source-out table) and JSON.
std::string cv_text(const CvReport& r);
nlohmann::json cv_json(const CvReport& r);

}  // namespace dtsim::sim
