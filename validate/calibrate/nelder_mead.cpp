#include "validate/calibrate/nelder_mead.hpp"

#include <algorithm>
#include <numeric>

#include "traces/error.hpp"

namespace dtsim::sim {

std::pair<std::vector<double>, double> nelder_mead(const std::function<double(const std::vector<double>&)>& f,
                                                   const std::vector<double>& start, const std::vector<double>& steps,
                                                   int max_evaluations, int& evaluations) {
  const std::size_t n = start.size();
  DTSIM_ASSERT(steps.size() == n && n > 0, "nelder_mead: " << n << " coordinates, " << steps.size() << " steps");
  std::vector<std::vector<double>> simplex(n + 1, start);
  std::vector<double> value(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) simplex[i + 1][i] += steps[i];
  const int limit = evaluations + max_evaluations;
  for (std::size_t i = 0; i <= n; ++i) value[i] = f(simplex[i]), ++evaluations;
  std::vector<std::size_t> order(n + 1);
  while (evaluations < limit) {
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return value[a] < value[b]; });
    const std::size_t best = order[0], worst = order[n], second = order[n - 1];
    if (value[worst] - value[best] < 1e-5) break;
    std::vector<double> centroid(n, 0.0);
    for (std::size_t i = 0; i <= n; ++i)
      if (i != worst)
        for (std::size_t k = 0; k < n; ++k) centroid[k] += simplex[i][k] / static_cast<double>(n);
    auto along = [&](double t) {
      std::vector<double> x(n);
      for (std::size_t k = 0; k < n; ++k) x[k] = centroid[k] + t * (simplex[worst][k] - centroid[k]);
      return x;
    };
    const auto xr = along(-1.0);
    const double fr = f(xr);
    ++evaluations;
    if (fr < value[best]) {
      const auto xe = along(-2.0);
      const double fe = f(xe);
      ++evaluations;
      if (fe < fr) simplex[worst] = xe, value[worst] = fe;
      else simplex[worst] = xr, value[worst] = fr;
    } else if (fr < value[second]) {
      simplex[worst] = xr, value[worst] = fr;
    } else {
      const auto xc = along(fr < value[worst] ? -0.5 : 0.5);
      const double fc = f(xc);
      ++evaluations;
      if (fc < std::min(fr, value[worst])) {
        simplex[worst] = xc, value[worst] = fc;
      } else {
        for (std::size_t i = 0; i <= n; ++i)
          if (i != best) {
            for (std::size_t k = 0; k < n; ++k)
              simplex[i][k] = simplex[best][k] + 0.5 * (simplex[i][k] - simplex[best][k]);
            value[i] = f(simplex[i]);
            ++evaluations;
          }
      }
    }
  }
  std::size_t best = 0;
  for (std::size_t i = 1; i <= n; ++i)
    if (value[i] < value[best]) best = i;
  return {simplex[best], value[best]};
}

}  // namespace dtsim::sim
