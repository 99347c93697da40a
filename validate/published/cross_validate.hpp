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
// one node or several) the 5th and 95th percentiles of r give a 90% interval [p e^q05, p e^q95] around a prediction
// p. A source's coverage is scored with bands built from the other sources' rows only.
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

struct CvSourceResult {
  std::string source, gpus, stacks;
  std::string values_from;  ///< "shipped (never saw it)", "refit without it on ...", "in-sample: ..."
  std::vector<RowResult> results;
  ValidationScore score;
  double spearman_all = 0;      ///< rank correlation over all the source's scored rows
  int covered = 0, banded = 0;  ///< rows inside their band (built without this source), rows with a band
  std::string band_keys;        ///< the band classes used
  double fit_objective = -1;    ///< the refit's final objective (-1: no refit)
};

struct CvReport {
  std::vector<CvSourceResult> sources;
  int rows = 0;                 ///< scored rows over all sources
  double pooled_mape = 0;       ///< over all scored rows
  double mean_source_mape = 0;  ///< mean of the sources' MAPEs (each source weighs the same)
  int covered = 0, banded = 0;
  std::vector<ErrorBand> bands;  ///< from every source's cross-validated rows (what simulate uses)
};

/// Scale class of a row's run: "1-node" or "multi-node".
std::string scale_class(const PublishedRow& row);
/// Bands of every class with at least `min_rows` rows, from (row, ln(measured / predicted)) samples.
std::vector<ErrorBand> error_bands(const std::vector<std::pair<const PublishedRow*, double>>& samples, int min_rows);

CvReport cross_validate(const std::vector<CvSource>& sources, int max_evaluations, double max_error_weight);

/// The report as text (the leave-one-source-out table) and JSON.
std::string cv_text(const CvReport& r);
nlohmann::json cv_json(const CvReport& r);

}  // namespace dtsim::sim
