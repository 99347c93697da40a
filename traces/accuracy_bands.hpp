// Prediction intervals: 90% bands of ln(measured / predicted) iteration time per class of runs (GPU, software
// stack, one node or several), from the leave-one-source-out cross-validation of the development sources
// (`dtsim validate published --cross-validate`, validate/published/cross_validate.hpp). The shipped bands are
// traces/accuracy/bands.json, compiled in; the simulator's summary prints the interval of the closest class.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace dtsim {

struct AccuracyBand {
  std::string key;          ///< the class: "gpu|stack|scale", "gpu|stack", "gpu", "stack|scale", "stack" or "all"
  int rows = 0;             ///< cross-validated rows behind it
  double q05 = 0, q95 = 0;  ///< 5th and 95th percentiles of ln(measured / predicted)
  int sources = 0;          ///< sources (files, or publications within one) behind it; 0: not stated
};

/// The classes a run falls into, most specific first (scale: "1-node" or "multi-node").
std::vector<std::string> band_keys(const std::string& gpu, const std::string& stack, const std::string& scale);
/// The shipped band of the most specific class that has one, if any.
std::optional<AccuracyBand> accuracy_band(const std::string& gpu, const std::string& stack, bool multi_node);
/// Every shipped band.
const std::vector<AccuracyBand>& shipped_bands();

}  // namespace dtsim
