// Nelder-Mead simplex minimisation (standard coefficients: reflection 1, expansion 2, contraction 1/2, shrink 1/2),
// used by the calibration fits over the logs of their parameters (validate/published/published.cpp fit_published,
// validate/calibrate/runs_fit.cpp). Deterministic: the same start and steps give the same point.
#pragma once
#include <functional>
#include <utility>
#include <vector>

namespace dtsim::sim {

/// Minimises `f` from `start`, the initial simplex stepping each coordinate by `steps[k]`; stops when the simplex's
/// values span less than 1e-5 or after `max_evaluations` more evaluations (counted in `evaluations`). Returns the
/// best point and its value.
std::pair<std::vector<double>, double> nelder_mead(const std::function<double(const std::vector<double>&)>& f,
                                                   const std::vector<double>& start, const std::vector<double>& steps,
                                                   int max_evaluations, int& evaluations);

}  // namespace dtsim::sim
