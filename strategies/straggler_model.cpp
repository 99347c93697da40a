#include "strategies/straggler_model.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace dtsim::straggler {
namespace {

/// ln Phi(x), accurate in both tails (log1p where Phi is near 1).
double log_cdf(double x) {
  const double tail = 0.5 * std::erfc(std::abs(x) / std::sqrt(2.0));
  return x < 0 ? std::log(tail) : std::log1p(-tail);
}

double integrate(std::int64_t n) {
  // The integrand x n phi(x) Phi(x)^(n-1) is negligible outside [-9, 10] for every n >= 2 up to 2^31 (its mass sits
  // near sqrt(2 ln n) <= 6.6 with a width of about 1 / sqrt(2 ln n)).
  constexpr double lo = -9, hi = 10;
  constexpr int steps = 38000;  // even; h = 5e-4
  const double h = (hi - lo) / steps, nn = static_cast<double>(n), inv_sqrt_2pi = 1 / std::sqrt(2 * M_PI);
  auto f = [&](double x) { return x * nn * inv_sqrt_2pi * std::exp(-0.5 * x * x + (nn - 1) * log_cdf(x)); };
  double sum = f(lo) + f(hi);
  for (int i = 1; i < steps; ++i) sum += (i % 2 ? 4 : 2) * f(lo + i * h);
  return sum * h / 3;
}

}  // namespace

double expected_max_standard_normal(std::int64_t n) {
  if (n <= 1) return 0;
  // Planners and sweeps ask for the same few world sizes many times.
  thread_local std::map<std::int64_t, double> cache;
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  const double e = integrate(n);
  if (cache.size() < 4096) cache.emplace(n, e);
  return e;
}

double pace_fraction(const Calibration& cal, std::int64_t world_gpus) {
  if (cal.gpu_speed_cv <= 0) return 0;
  const double e = expected_max_standard_normal(world_gpus),
               e_ref = expected_max_standard_normal(static_cast<std::int64_t>(cal.gpu_speed_reference_gpus));
  return cal.gpu_speed_cv * std::max(0.0, e - e_ref);
}

}  // namespace dtsim::straggler
