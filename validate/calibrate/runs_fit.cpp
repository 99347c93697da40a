#include "validate/calibrate/runs_fit.hpp"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <set>
#include <sstream>

#include "traces/cluster.hpp"
#include "traces/error.hpp"
#include "traces/text.hpp"
#include "validate/calibrate/nelder_mead.hpp"
#include "validate/compare/measurements.hpp"
#include "validate/published/cross_validate.hpp"

namespace dtsim::sim {

namespace {

/// A value the runs may determine: a member of the calibration, its file, bounds, and how it is probed.
struct Candidate {
  const char* field;            ///< as reported ("compute.gemm_efficiency_max", "stack.host_issue_s")
  const char* file;             ///< "calibration.json" or "stack.json"
  double Calibration::*member;  ///< where the value lives in the effective calibration
  double lo, hi;                ///< bounds of the value
  double floor;                 ///< a base value below this is probed (and fitted) from here
  double step;                  ///< ln of the probe's and the simplex's step
  const char* unseen;           ///< why a set of runs may not depend on it at all
  /// Where known: whether a run has what `unseen` says no run has (then the report says the runs have it but their
  /// times do not depend on it, instead of `unseen`), and how that is named ("pipeline parallelism").
  bool (*present)(const PublishedRow&) = nullptr;
  const char* present_as = nullptr;
};

bool has_pipeline(const PublishedRow& r) { return r.plan.pp > 1; }
bool has_layer_collectives(const PublishedRow& r) { return r.plan.tp > 1 || r.plan.cp > 1 || r.plan.ep > 1; }

std::vector<Candidate> candidates(const Calibration& cal, double median_measured_s, bool hardware_only) {
  const double r12 = std::log(1.2), r2 = std::log(2.0), r3 = std::log(3.0);
  std::vector<Candidate> c = {
      {"compute.gemm_efficiency_max", "calibration.json", &Calibration::gemm_efficiency_max, 0.02, 1, 0, r12,
       "no run's time depends on its GEMMs"},
      {"compute.gemm_half_efficiency_flops", "calibration.json", &Calibration::gemm_half_efficiency_flops, 1e5, 1e15, 0,
       r3, "no run's GEMMs sit on the rising part of the efficiency curve"},
      {"compute.gemm_efficiency_exponent", "calibration.json", &Calibration::gemm_efficiency_exponent, 0.25, 8, 0,
       std::log(1.5), "no run's GEMMs sit on the rising part of the efficiency curve"},
      {"compute.memory_bandwidth_efficiency", "calibration.json", &Calibration::memory_bandwidth_efficiency, 0.02, 1, 0,
       r12, "no run's time depends on memory-bound kernels"},
      {"compute.flash_attention_efficiency", "calibration.json", &Calibration::flash_attention_efficiency, 0.02, 1, 0,
       r12, "no run's attention runs fused kernels at this efficiency"},
  };
  if (cal.fa2_attention)
    c.push_back({"compute.fa2_attention_efficiency", "calibration.json", &Calibration::fa2_attention_efficiency, 0.02,
                 1, cal.flash_attention_efficiency, r12, "no run's attention runs FlashAttention-2"});
  const std::vector<Candidate> rest = {
      {"compute.fp8_gemm_efficiency_scale", "calibration.json", &Calibration::fp8_gemm_efficiency_scale, 0.05, 1.5, 0,
       r12, "no run computes in FP8 with per-tensor scaling"},
      {"compute.fp8_rowwise_gemm_efficiency_scale", "calibration.json", &Calibration::fp8_rowwise_gemm_efficiency_scale,
       0.05, 1.5, 0, r12, "no run computes in FP8 with rowwise or block scaling (MXFP8)"},
      {"compute.fp4_gemm_efficiency_scale", "calibration.json", &Calibration::fp4_gemm_efficiency_scale, 0.05, 1.5, 0,
       r12, "no run computes in FP4"},
      {"compute.kernel_launch_s", "calibration.json", &Calibration::kernel_launch_s, 1e-8, 1e-3, 1e-7, r2,
       "no run is bound by per-kernel costs"},
      {"network.intra_bandwidth_efficiency", "calibration.json", &Calibration::intra_bandwidth_efficiency, 0.02, 1, 0,
       r12, "no run communicates over NVLink (inside a node)"},
      {"network.inter_bandwidth_efficiency", "calibration.json", &Calibration::inter_bandwidth_efficiency, 0.02, 1, 0,
       r12, "no run communicates across nodes (single-node runs cannot see the NICs and the fabric)"},
      {"network.collective_step_overhead_s", "calibration.json", &Calibration::collective_step_overhead_s, 1e-8, 1e-3,
       1e-7, r2, "no run's collectives are latency-bound"},
      {"stack.host_issue_s", "stack.json", &Calibration::host_issue_s, 1e-7, 1e-3, 1e-6, r2,
       "no run is bound by the host's kernel issue"},
      {"stack.host_collective_issue_s", "stack.json", &Calibration::host_collective_issue_s, 1e-7, 1e-2, 1e-6, r2,
       "no run issues collectives inside its layers", has_layer_collectives,
       "collectives inside their layers (TP, CP or EP)"},
      {"stack.p2p_overhead_s", "stack.json", &Calibration::p2p_overhead_s, 1e-8, 1e-2, 1e-7, r2,
       "no run has pipeline parallelism", has_pipeline, "pipeline parallelism"},
      {"stack.per_iteration_s", "stack.json", &Calibration::per_iteration_s, 1e-6, 1e3,
       std::max(1e-5, 0.02 * median_measured_s), r2, "no run's time depends on per-iteration host work"},
  };
  c.insert(c.end(), rest.begin(), rest.end());
  if (hardware_only)
    c.erase(std::remove_if(c.begin(), c.end(),
                           [](const Candidate& x) { return x.file != std::string("calibration.json"); }),
            c.end());
  return c;
}

/// t quantile (one-sided 0.95) with `dof` degrees of freedom (1.645 for none: the normal's).
double t95(int dof) {
  if (dof < 1) return 1.6448536269514722;
  return boost::math::quantile(boost::math::students_t(static_cast<double>(dof)), 0.95);
}

/// Inverse of a small symmetric positive matrix (Gauss-Jordan, partial pivoting); false when it is singular.
bool invert(std::vector<std::vector<double>> a, std::vector<std::vector<double>>& inv) {
  const std::size_t n = a.size();
  inv.assign(n, std::vector<double>(n, 0.0));
  for (std::size_t i = 0; i < n; ++i) inv[i][i] = 1;
  double scale = 0;
  for (const auto& row : a)
    for (double v : row) scale = std::max(scale, std::abs(v));
  for (std::size_t col = 0; col < n; ++col) {
    std::size_t piv = col;
    for (std::size_t r = col + 1; r < n; ++r)
      if (std::abs(a[r][col]) > std::abs(a[piv][col])) piv = r;
    if (!(std::abs(a[piv][col]) > 1e-12 * scale)) return false;
    std::swap(a[piv], a[col]);
    std::swap(inv[piv], inv[col]);
    const double d = a[col][col];
    for (std::size_t k = 0; k < n; ++k) a[col][k] /= d, inv[col][k] /= d;
    for (std::size_t r = 0; r < n; ++r)
      if (r != col && a[r][col] != 0) {
        const double f = a[r][col];
        for (std::size_t k = 0; k < n; ++k) a[r][k] -= f * a[col][k], inv[r][k] -= f * inv[col][k];
      }
  }
  return true;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

std::string label_of(const PublishedRow& r) {
  return r.id.empty() ? r.group + " row " + std::to_string(r.index) : r.id;
}

}  // namespace

RunsFit fit_runs(const std::vector<PublishedRow>& rows, const Calibration& hardware, const StackProfile& stack,
                 const RunsFitOptions& options) {
  RunsFit fit;
  // The runs that can be used: expressible, timed iterations on one GPU.
  std::vector<PublishedRow> used;
  for (const auto& r : rows) {
    if (!r.failure.empty()) fit.skipped.push_back(label_of(r) + ": " + r.failure);
    else if (r.measure != "iteration") fit.skipped.push_back(label_of(r) + ": a layer time, not an iteration");
    else if (!(r.measured_s > 0)) fit.skipped.push_back(label_of(r) + ": no measured time");
    else used.push_back(r);
  }
  std::set<std::string> gpus;
  for (const auto& r : used) gpus.insert(r.gpu);
  if (gpus.size() > 1) {
    std::string list;
    for (const auto& g : gpus) list += (list.empty() ? "" : ", ") + g;
    throw ConfigError("calibrate runs: the runs are on several GPUs (" + list +
                      "); fit one GPU's runs at a time (one calibration per GPU)");
  }
  if (used.size() < 3)
    throw ConfigError("calibrate runs: " + std::to_string(used.size()) +
                      " usable runs; a fit needs at least 3 measured iterations");
  if (!gpus.empty() && !hardware.gpu.empty() && *gpus.begin() != hardware.gpu)
    throw ConfigError("calibrate runs: the runs are on " + *gpus.begin() + ", the base calibration is for " +
                      hardware.gpu);
  // One effective calibration for every run: the hardware with the stack's values, all pinned (the runs' own
  // stack names then change nothing).
  // (hardware_only: each run's own stack fills the software values in, as the harness runs it.)
  Calibration base = options.hardware_only ? hardware : with_stack(hardware, stack);
  if (!options.hardware_only)
    for (const auto& f : kSoftwareFields) base.pin(f);
  base.accuracy_bands.clear();

  const std::size_t n = used.size();
  std::vector<double> ln_measured(n);
  for (std::size_t i = 0; i < n; ++i) ln_measured[i] = std::log(used[i].measured_s);
  std::vector<double> measured(n);
  for (std::size_t i = 0; i < n; ++i) measured[i] = used[i].measured_s;
  const auto cands = candidates(base, exec::median(measured), options.hardware_only);
  const std::size_t K = cands.size();

  // ln of each candidate's value: the base's, or its probe floor.
  auto clamp_log = [&](std::size_t k, double x) { return std::clamp(x, std::log(cands[k].lo), std::log(cands[k].hi)); };
  std::vector<double> x_base(K), x_probe(K);
  for (std::size_t k = 0; k < K; ++k) {
    const double v = base.*cands[k].member;
    x_base[k] = v > 0 ? std::log(v) : -1e300;
    x_probe[k] = clamp_log(k, std::log(std::max(v, std::max(cands[k].floor, cands[k].lo))));
  }
  auto calibration_at = [&](const std::vector<double>& x) {
    Calibration c = base;
    for (std::size_t k = 0; k < K; ++k)
      if (x[k] > -1e299) c.*cands[k].member = std::exp(clamp_log(k, x[k]));
    return c;
  };
  // ln predicted time of every run (empty when a run fails to simulate).
  auto predict = [&](const std::vector<double>& x) {
    std::vector<double> lp;
    for (const auto& res : predict_rows(used, calibration_at(x), NetworkMode::ANALYTIC)) {
      if (!res.failure.empty() || !(res.predicted_s > 0)) return std::vector<double>{};
      lp.push_back(std::log(res.predicted_s));
    }
    return lp;
  };
  const auto before = predict(x_base);
  if (before.empty()) {
    for (const auto& res : predict_rows(used, calibration_at(x_base), NetworkMode::ANALYTIC))
      if (!res.failure.empty())
        throw ConfigError("calibrate runs: " + label_of(res.row) + " cannot be simulated: " + res.failure);
    throw ConfigError("calibrate runs: a run predicts no time");
  }
  ++fit.evaluations;

  // 1. Sensitivities d ln t_i / d ln v_k around the probe point (central differences inside the bounds).
  std::vector<std::vector<double>> J(K, std::vector<double>(n, 0.0));
  auto jacobian_column = [&](const std::vector<double>& at, std::size_t k) {
    std::vector<double> up = at, down = at;
    up[k] = clamp_log(k, at[k] + cands[k].step);
    down[k] = clamp_log(k, at[k] - cands[k].step);
    const auto a = predict(up), b = predict(down);
    fit.evaluations += 2;
    std::vector<double> col(n, 0.0);
    if (a.empty() || b.empty() || !(up[k] > down[k])) return col;
    for (std::size_t i = 0; i < n; ++i) col[i] = (a[i] - b[i]) / (up[k] - down[k]);
    return col;
  };
  for (std::size_t k = 0; k < K; ++k) {
    std::vector<double> at = x_base;
    at[k] = x_probe[k];
    J[k] = jacobian_column(at, k);
  }

  // 2. Identifiability: column-pivoted Gram-Schmidt.
  const double threshold = options.noise / std::log(1.5);
  const std::size_t max_values = std::max<std::size_t>(1, (n - 1) / 2);
  std::vector<std::size_t> chosen;
  std::vector<std::vector<double>> basis;
  std::vector<double> norm0(K);
  for (std::size_t k = 0; k < K; ++k) norm0[k] = std::sqrt(dot(J[k], J[k]));
  std::vector<bool> taken(K, false);
  // A value that one run alone moves (no other run within a quarter of its sensitivity) would fit that run and
  // nothing else: left out.
  std::vector<bool> lone_run(K, false);
  for (std::size_t k = 0; k < K; ++k) {
    double top = 0;
    for (double v : J[k]) top = std::max(top, std::abs(v));
    int moved = 0;
    for (double v : J[k]) moved += top > 0 && std::abs(v) >= 0.25 * top;
    lone_run[k] = top >= 1e-3 && moved < 2;
  }
  bool limit_reached = false;
  while (true) {
    std::size_t best = K;
    double best_norm = 0;
    for (std::size_t k = 0; k < K; ++k) {
      if (taken[k] || lone_run[k]) continue;
      auto r = J[k];
      for (const auto& q : basis) {
        const double c = dot(q, r);
        for (std::size_t i = 0; i < n; ++i) r[i] -= c * q[i];
      }
      const double nr = std::sqrt(dot(r, r));
      if (nr > best_norm) best = k, best_norm = nr;
    }
    if (best == K || best_norm < threshold) break;
    if (chosen.size() >= max_values) {
      limit_reached = true;
      break;
    }
    auto r = J[best];
    for (const auto& q : basis) {
      const double c = dot(q, r);
      for (std::size_t i = 0; i < n; ++i) r[i] -= c * q[i];
    }
    for (double& v : r) v /= best_norm;
    basis.push_back(r);
    chosen.push_back(best);
    taken[best] = true;
  }

  // Reasons for the values kept.
  for (std::size_t k = 0; k < K; ++k) {
    FittedValue v;
    v.field = cands[k].field;
    v.file = cands[k].file;
    v.before = base.*cands[k].member;
    v.after = v.before;
    for (double s : J[k]) v.sensitivity = std::max(v.sensitivity, std::abs(s));
    std::vector<std::size_t> idx(n);
    std::iota(idx.begin(), idx.end(), std::size_t{0});
    std::stable_sort(idx.begin(), idx.end(),
                     [&](std::size_t a, std::size_t b) { return std::abs(J[k][a]) > std::abs(J[k][b]); });
    for (std::size_t j = 0; j < std::min<std::size_t>(3, n); ++j)
      if (std::abs(J[k][idx[j]]) >= 1e-3) v.determined_by.push_back(label_of(used[idx[j]]));
    if (!taken[k]) {
      if (v.sensitivity < 1e-3) {
        // Say what the runs show: without the feature, that none has it; with it, that their times do not move.
        const auto with = cands[k].present ? std::count_if(used.begin(), used.end(),
                                                           [&](const auto& r) { return cands[k].present(r); })
                                           : 0;
        v.reason = "not identified: " +
                   (with > 0 ? std::to_string(with) + " of the " + std::to_string(n) + " runs have " +
                                   cands[k].present_as + ", but their times do not depend on it"
                             : std::string(cands[k].unseen)) +
                   " (largest |d ln t / d ln v| " + format_number("%.4f", v.sensitivity) + ")";
      } else if (lone_run[k]) {
        v.reason = "one run alone depends on it (" + (v.determined_by.empty() ? "" : v.determined_by.front()) +
                   "): a fit would match that run and nothing else";
      } else if (norm0[k] < threshold) {
        v.reason = "too weak: the runs would pin it only within x" +
                   format_number("%.2f", std::exp(options.noise / norm0[k])) + " at one sigma of " +
                   format_number("%.0f", 100 * options.noise) + "% noise per run";
      } else {
        // Confounded: the chosen value whose column it resembles most.
        std::size_t with = K;
        double best_cos = 0;
        for (std::size_t c : chosen) {
          const double cs = std::abs(dot(J[c], J[k])) / (norm0[c] * norm0[k]);
          if (cs > best_cos) best_cos = cs, with = c;
        }
        if (limit_reached && with != K && best_cos < 0.9)
          v.reason = "not fitted: " + std::to_string(n) + " runs support at most " + std::to_string(max_values) +
                     " fitted values and stronger ones took them";
        else
          v.reason = std::string("confounded with ") + (with == K ? "the fitted values" : cands[with].field) +
                     ": the runs move them together (|cos| " + format_number("%.2f", best_cos) + ")";
      }
    }
    fit.values.push_back(std::move(v));
  }

  // 3. Fit the chosen values (logs), the rest at the base.
  std::vector<double> x = x_base;
  std::vector<double> x_fit_start, steps;
  for (std::size_t k : chosen) x_fit_start.push_back(x_probe[k]), steps.push_back(cands[k].step);
  auto full = [&](const std::vector<double>& y) {
    std::vector<double> z = x_base;
    for (std::size_t j = 0; j < chosen.size(); ++j) z[chosen[j]] = clamp_log(chosen[j], y[j]);
    return z;
  };
  auto ssr = [&](const std::vector<double>& lp) {
    double s = 0;
    for (std::size_t i = 0; i < n; ++i) s += (lp[i] - ln_measured[i]) * (lp[i] - ln_measured[i]);
    return s;
  };
  if (!chosen.empty()) {
    auto [y, v] = nelder_mead(
        [&](const std::vector<double>& yy) {
          const auto lp = predict(full(yy));
          return lp.empty() ? 1e9 : ssr(lp);
        },
        x_fit_start, steps, options.max_evaluations, fit.evaluations);
    if (v < ssr(before)) x = full(y);
    else fit.notes.push_back("the fit found nothing better than the base values; they are kept");
  } else {
    fit.notes.push_back("the runs identify no value: the base calibration and stack are kept");
  }
  const auto after = predict(x);
  ++fit.evaluations;
  DTSIM_ASSERT(!after.empty(), "calibrate runs: the fitted values predict no time");

  // 4. Uncertainty at the optimum.
  const std::size_t k_fit = chosen.size();
  fit.dof = static_cast<int>(n) - static_cast<int>(k_fit);
  const double s2 = fit.dof > 0 ? ssr(after) / fit.dof : 0;
  fit.residual_sigma = std::sqrt(s2);
  std::vector<std::vector<double>> Jf(k_fit);  // chosen columns at the optimum
  for (std::size_t j = 0; j < k_fit; ++j) Jf[j] = jacobian_column(x, chosen[j]);
  std::vector<std::vector<double>> inv;
  bool have_cov = false;
  if (k_fit > 0) {
    std::vector<std::vector<double>> jtj(k_fit, std::vector<double>(k_fit));
    for (std::size_t a = 0; a < k_fit; ++a)
      for (std::size_t b = 0; b < k_fit; ++b) jtj[a][b] = dot(Jf[a], Jf[b]);
    have_cov = invert(jtj, inv);
    if (!have_cov)
      fit.notes.push_back("the fitted values' sensitivities are degenerate at the optimum: no uncertainties");
  }
  const double t = t95(fit.dof);
  for (std::size_t j = 0; j < k_fit; ++j) {
    auto& v = fit.values[chosen[j]];
    v.fitted = true;
    v.after = std::exp(clamp_log(chosen[j], x[chosen[j]]));
    v.sigma_log = have_cov && fit.dof > 0 ? std::sqrt(std::max(0.0, s2 * inv[j][j])) : 0;
    v.low = std::max(cands[chosen[j]].lo, v.after * std::exp(-t * v.sigma_log));
    v.high = std::min(cands[chosen[j]].hi, v.after * std::exp(t * v.sigma_log));
    v.at_bound = v.after <= cands[chosen[j]].lo * (1 + 1e-9) || v.after >= cands[chosen[j]].hi * (1 - 1e-9);
  }
  if (fit.dof <= 0) fit.notes.push_back("no residual degrees of freedom: no uncertainties or intervals");

  // Runs: errors, leverage, leave-one-out.
  double sb = 0, sa = 0;
  for (std::size_t i = 0; i < n; ++i) {
    FittedRun r;
    const auto& row = used[i];
    r.label = label_of(row);
    r.gpus = static_cast<int>(row.plan.world_size());
    r.scale = scale_class(row);
    r.measured_s = row.measured_s;
    r.before_s = std::exp(before[i]);
    r.after_s = std::exp(after[i]);
    r.error_before = relative_error(r.before_s, r.measured_s);
    r.error_after = relative_error(r.after_s, r.measured_s);
    sb += (before[i] - ln_measured[i]) * (before[i] - ln_measured[i]);
    sa += (after[i] - ln_measured[i]) * (after[i] - ln_measured[i]);
    double h = 0;
    if (have_cov)
      for (std::size_t a = 0; a < k_fit; ++a)
        for (std::size_t b = 0; b < k_fit; ++b) h += Jf[a][i] * inv[a][b] * Jf[b][i];
    r.leverage = h;
    const double e = ln_measured[i] - after[i];  // ln(measured / predicted)
    r.loo_defined = h < 0.99;
    const double e_loo = r.loo_defined ? e / (1 - h) : e;
    r.loo_error = std::exp(-e_loo) - 1;  // (predicted - measured) / measured without the run
    r.unexplained = std::abs(r.error_after) > 0.10;
    fit.runs.push_back(r);
  }
  fit.rms_before = std::sqrt(sb / static_cast<double>(n));
  fit.rms_after = std::sqrt(sa / static_cast<double>(n));

  // 5. Intervals per scale: the prediction interval of a new run, centre the scale's mean residual, half-width
  // t(0.95, runs - fitted) s_scale sqrt(1 + fitted / runs), where s_scale^2 = the scale's mean squared deviation
  // / (1 - fitted / runs) (the fit's share of the degrees of freedom).
  const double share = static_cast<double>(k_fit) / static_cast<double>(n);
  if (fit.dof > 0)
    for (const char* scale : {"1-node", "multi-node"}) {
      std::vector<double> e;
      for (std::size_t i = 0; i < n; ++i)
        if (fit.runs[i].scale == scale) e.push_back(ln_measured[i] - after[i]);
      if (e.size() < 2) continue;
      const double m = static_cast<double>(e.size());
      const double mean = std::accumulate(e.begin(), e.end(), 0.0) / m;
      double ss = 0;
      for (double v : e) ss += (v - mean) * (v - mean);
      const double s_scale = std::sqrt(ss / (m - 1) / (1 - share));
      const double half = t * s_scale * std::sqrt(1 + share);
      fit.bands.push_back({scale, static_cast<int>(e.size()), mean - half, mean + half, 0});
    }

  // The results: the effective calibration and the stack profile.
  fit.calibration = calibration_at(x);
  fit.calibration.accuracy_bands = fit.bands;
  fit.calibration.accuracy_method = "prediction interval from the residuals of `dtsim calibrate runs` (" +
                                    std::to_string(n) + " runs, " + std::to_string(k_fit) + " fitted values)";
  fit.stack = stack;
  fit.stack.host_issue_s = fit.calibration.host_issue_s;
  fit.stack.host_collective_issue_s = fit.calibration.host_collective_issue_s;
  fit.stack.p2p_overhead_s = fit.calibration.p2p_overhead_s;
  fit.stack.per_iteration_s = fit.calibration.per_iteration_s;
  fit.stack.host_sync_each_pass = fit.calibration.host_sync_each_pass;
  fit.stack.p2p_sync = fit.calibration.p2p_sync;
  fit.stack.pp_scatter_gather = fit.calibration.pp_scatter_gather;
  fit.stack.fa2_attention = fit.calibration.fa2_attention;
  fit.stack.grad_clip = fit.calibration.grad_clip;
  fit.stack.tf32_matmul = fit.calibration.tf32_matmul;
  fit.stack.moe_dispatch_sync = fit.calibration.moe_dispatch_sync;
  fit.stack.bf16_optimizer = fit.calibration.bf16_optimizer;
  fit.stack.dp_bucket_min_params = fit.calibration.dp_bucket_min_params;
  fit.stack.dp_bucket_params_per_dp = fit.calibration.dp_bucket_params_per_dp;
  fit.stack.dp_buckets_first_chunk_only = fit.calibration.dp_buckets_first_chunk_only;
  fit.stack.name = stack.name + "-fitted";
  fit.stack.framework = stack.framework + "; fitted to " + std::to_string(n) + " measured runs";
  fit.stack.fitted_on = options.sources;
  fit.stack.provenance["fitted_by"] =
      "dtsim calibrate runs (validate/calibrate/runs_fit.cpp) from the profile '" + stack.name + "'";
  for (const auto& v : fit.values)
    if (v.file == std::string("stack.json"))
      fit.stack.provenance[v.field.substr(6)] = v.fitted ? "fitted: " + format_number("%.4g", v.after) + " (90% " +
                                                               format_number("%.4g", v.low) + "-" +
                                                               format_number("%.4g", v.high) + ")"
                                                         : "kept from '" + stack.name + "': " + v.reason;
  return fit;
}

Calibration with_fitted_hardware(Calibration calibration, const RunsFit& f) {
  for (const auto& cand : candidates(f.calibration, 1.0, true))
    for (const auto& v : f.values)
      if (v.fitted && v.field == cand.field) calibration.*cand.member = f.calibration.*cand.member;
  return calibration;
}

std::string runs_fit_text(const RunsFit& f) {
  std::ostringstream o;
  o << "calibrate runs: " << f.runs.size() << " runs used, " << f.skipped.size() << " skipped";
  int fitted = 0;
  for (const auto& v : f.values) fitted += v.fitted;
  o << ", " << fitted << " values fitted, " << f.evaluations << " evaluations\n";
  o << "rms |ln(measured / predicted)|: " << format_number("%.2f", 100 * f.rms_before) << "% with the base values, "
    << format_number("%.2f", 100 * f.rms_after) << "% fitted";
  if (f.dof > 0)
    o << " (s = " << format_number("%.2f", 100 * f.residual_sigma) << "% over " << f.dof << " degrees of freedom)";
  o << "\n\nfitted:\n";
  for (const auto& v : f.values)
    if (v.fitted) {
      o << "  " << v.field << "  " << format_number("%.4g", v.before) << " -> " << format_number("%.4g", v.after);
      if (v.sigma_log > 0)
        o << "  (90% " << format_number("%.4g", v.low) << "-" << format_number("%.4g", v.high) << ")";
      if (v.at_bound) o << "  at its bound";
      o << "  [" << v.file << "; determined by";
      for (const auto& d : v.determined_by) o << " " << d;
      o << "]\n";
    }
  o << "kept (the runs cannot determine them):\n";
  for (const auto& v : f.values)
    if (!v.fitted) o << "  " << v.field << "  " << format_number("%.4g", v.before) << "  " << v.reason << "\n";
  o << "\nruns (error = (predicted - measured) / measured):\n";
  o << "  run                                      gpus  measured s  base err  fitted err  leave-one-out err\n";
  for (const auto& r : f.runs) {
    char line[256];
    std::snprintf(line, sizeof line, "  %-40s %5d  %10.4f  %+7.1f%%  %+9.1f%%  %s%s\n", r.label.substr(0, 40).c_str(),
                  r.gpus, r.measured_s, 100 * r.error_before, 100 * r.error_after,
                  r.loo_defined ? format_number("%+8.1f%%", 100 * r.loo_error).c_str() : "  (alone determines a value)",
                  r.unexplained ? "  <- not explained" : "");
    o << line;
  }
  for (const auto& s : f.skipped) o << "  skipped: " << s << "\n";
  o << "\n90% intervals of `dtsim simulate --calibration` with this calibration:\n";
  for (const char* scale : {"1-node", "multi-node"}) {
    const auto it = std::find_if(f.bands.begin(), f.bands.end(), [&](const AccuracyBand& b) { return b.key == scale; });
    if (it == f.bands.end())
      o << "  " << scale << ": none from these runs (fewer than two of this scale); the shipped bands apply\n";
    else
      o << "  " << scale << ": x" << format_number("%.3f", std::exp(it->q05)) << " to x"
        << format_number("%.3f", std::exp(it->q95)) << " of the prediction (" << it->rows << " runs)\n";
  }
  for (const auto& n : f.notes) o << "note: " << n << "\n";
  return o.str();
}

nlohmann::json runs_fit_json(const RunsFit& f) {
  nlohmann::json values = nlohmann::json::array(), runs = nlohmann::json::array(), bands = nlohmann::json::array();
  for (const auto& v : f.values) {
    nlohmann::json j = {{"field", v.field},
                        {"file", v.file},
                        {"before", v.before},
                        {"after", v.after},
                        {"fitted", v.fitted},
                        {"max_sensitivity", v.sensitivity},
                        {"determined_by", v.determined_by}};
    if (v.fitted) {
      j["sigma_log"] = v.sigma_log;
      j["low_90"] = v.low;
      j["high_90"] = v.high;
      j["at_bound"] = v.at_bound;
    } else {
      j["reason"] = v.reason;
    }
    values.push_back(j);
  }
  for (const auto& r : f.runs)
    runs.push_back({{"run", r.label},
                    {"gpus", r.gpus},
                    {"scale", r.scale},
                    {"measured_s", r.measured_s},
                    {"base_s", r.before_s},
                    {"fitted_s", r.after_s},
                    {"base_error", r.error_before},
                    {"fitted_error", r.error_after},
                    {"leverage", r.leverage},
                    {"leave_one_out_error", r.loo_defined ? nlohmann::json(r.loo_error) : nlohmann::json(nullptr)},
                    {"not_explained", r.unexplained}});
  for (const auto& b : f.bands) bands.push_back({{"scale", b.key}, {"rows", b.rows}, {"q05", b.q05}, {"q95", b.q95}});
  return {{"schema_version", 1},
          {"method",
           "validate/calibrate/runs_fit.hpp: sensitivities, column-pivoted selection, Nelder-Mead on "
           "sum of ln(predicted / measured)^2, covariance s^2 (J^T J)^-1, linearised leave-one-out"},
          {"evaluations", f.evaluations},
          {"degrees_of_freedom", f.dof},
          {"rms_log_error_base", f.rms_before},
          {"rms_log_error_fitted", f.rms_after},
          {"residual_sigma", f.residual_sigma},
          {"values", values},
          {"runs", runs},
          {"skipped", f.skipped},
          {"intervals", bands},
          {"notes", f.notes}};
}

nlohmann::json runs_fit_calibration_json(const RunsFit& f, const std::vector<std::string>& sources) {
  nlohmann::json j = to_json(f.calibration);
  // The software values live in the stack profile: absent here, so that the profile fills them in.
  for (const auto& field : kSoftwareFields) {
    j["compute"].erase(field);
    j["network"].erase(field);
  }
  j["name"] = f.calibration.name + " fitted to measured runs";
  j.erase("stack");
  nlohmann::json fitted = nlohmann::json::object(), kept = nlohmann::json::object();
  for (const auto& v : f.values) {
    if (v.file != std::string("calibration.json")) continue;
    if (v.fitted) fitted[v.field] = {{"before", v.before}, {"after", v.after}, {"low_90", v.low}, {"high_90", v.high}};
    else kept[v.field] = v.reason;
  }
  j["provenance"]["fitted_by"] = "dtsim calibrate runs (validate/calibrate/runs_fit.cpp)";
  j["provenance"]["fitted_on"] = sources;
  j["provenance"]["runs_fit"] = {{"fitted", fitted}, {"kept", kept}};
  return j;
}

nlohmann::json runs_fit_stack_json(const RunsFit& f) { return to_json(f.stack); }

}  // namespace dtsim::sim
