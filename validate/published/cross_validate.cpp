#include "validate/published/cross_validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "traces/cluster.hpp"
#include "traces/stack_profile.hpp"
#include "traces/text.hpp"
#include "validate/calibrate/host_issue.hpp"

namespace dtsim::sim {
namespace {

std::vector<std::string> calibration_fitted_on(const Calibration& c) {
  std::vector<std::string> out;
  if (c.provenance.is_object() && c.provenance.contains("fitted_on") && c.provenance.at("fitted_on").is_array())
    for (const auto& s : c.provenance.at("fitted_on"))
      if (s.is_string()) out.push_back(s.get<std::string>());
  return out;
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

/// The estimates a fit starts from (the Calibration defaults of every fitted field, and host costs of tens of
/// microseconds), so that a refit without a source does not start at the optimum that saw it. The host's issue time
/// per kernel is eager PyTorch's as measured on the development traces (kEagerHostIssueS,
/// validate/calibrate/host_issue.hpp), not fitted on any published run.
Calibration neutral_start(Calibration c) {
  const Calibration d;
  c.gemm_efficiency_max = d.gemm_efficiency_max;
  c.gemm_half_efficiency_flops = d.gemm_half_efficiency_flops;
  c.gemm_efficiency_exponent = d.gemm_efficiency_exponent;
  c.gemm_misaligned_efficiency = 0.9;  // the fit's log parameter is capped at 1: start inside
  c.memory_bandwidth_efficiency = d.memory_bandwidth_efficiency;
  c.kernel_launch_s = d.kernel_launch_s;
  c.intra_bandwidth_efficiency = d.intra_bandwidth_efficiency;
  c.collective_step_overhead_s = d.collective_step_overhead_s;
  c.host_issue_s = kEagerHostIssueS;
  c.host_collective_issue_s = 10e-6;
  c.p2p_overhead_s = 5e-6;
  for (const char* f : {"host_issue_s", "host_collective_issue_s", "p2p_overhead_s"}) c.pin(f);
  return c;
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

double mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

double sample_variance(const std::vector<double>& v) {
  if (v.size() < 2) return 0.0;
  const double mean = mean_of(v);
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return ss / static_cast<double>(v.size() - 1);
}

/// The p-quantile of mu + tau Z + e, Z standard normal and e one of the (residual, weight) pairs (weights summing to
/// 1): the root of sum_j w_j Phi((q - mu - e_j) / tau) = p by bisection, between bounds 10 tau beyond the extreme
/// residuals. With tau = 0 the weighted residuals' own quantile (the smallest whose cumulative weight reaches p).
double mixture_quantile(const std::vector<std::pair<double, double>>& residuals, double mu, double tau, double p) {
  if (!(tau > 0)) {
    auto sorted = residuals;
    std::sort(sorted.begin(), sorted.end());
    double cum = 0;
    for (const auto& [e, w] : sorted)
      if ((cum += w) >= p - 1e-12) return mu + e;
    return mu + sorted.back().first;
  }
  const auto [lo_e, hi_e] = std::minmax_element(residuals.begin(), residuals.end());
  double lo = mu + lo_e->first - 10 * tau, hi = mu + hi_e->first + 10 * tau;
  for (int it = 0; it < 200 && hi - lo > 1e-12; ++it) {
    const double x = 0.5 * (lo + hi);
    double f = 0;
    for (const auto& [e, w] : residuals) f += w * 0.5 * std::erfc(-(x - mu - e) / (tau * std::sqrt(2.0)));
    (f < p ? lo : hi) = x;
  }
  return 0.5 * (lo + hi);
}

/// The band for a run: the most specific class with a band.
const ErrorBand* band_for(const std::vector<ErrorBand>& bands, const PublishedRow& row) {
  for (const auto& k : band_keys(row.gpu, row.plan.stack, scale_class(row)))
    for (const auto& b : bands)
      if (b.key == k) return &b;
  return nullptr;
}

}  // namespace

std::string scale_class(const PublishedRow& row) {
  if (row.cluster.empty()) return "1-node";
  const ClusterSpec c = load_cluster(row.cluster);
  return row.plan.world_size() > c.gpus_per_node ? "multi-node" : "1-node";
}

std::vector<ErrorBand> error_bands(const std::vector<BandSample>& samples, int min_rows) {
  std::map<std::string, std::map<std::string, std::vector<double>>> by_key;  // class -> unit -> r
  for (const auto& s : samples)
    for (const auto& k : band_keys(s.row->gpu, s.row->plan.stack, scale_class(*s.row)))
      by_key[k][s.unit].push_back(s.log_ratio);
  // Every sample is in class "all": its unit biases give the pooled between-unit variance the classes borrow.
  std::vector<double> all_biases;
  if (const auto it = by_key.find("all"); it != by_key.end())
    for (const auto& [u, v] : it->second) all_biases.push_back(mean_of(v));
  const double var_all = sample_variance(all_biases);
  const double dof_all = std::max(0.0, static_cast<double>(all_biases.size()) - 1);
  std::vector<ErrorBand> out;
  for (const auto& [k, units] : by_key) {
    int rows = 0;
    for (const auto& [u, v] : units) rows += static_cast<int>(v.size());
    if (rows < min_rows) continue;
    const int n_units = static_cast<int>(units.size());
    if (all_biases.size() < 2) {  // no spread between units known: the rows' own percentiles
      std::vector<double> v;
      for (const auto& [u, r] : units) v.insert(v.end(), r.begin(), r.end());
      out.push_back({k, rows, quantile(v, 0.05), quantile(v, 0.95), n_units});
      continue;
    }
    std::vector<double> biases;
    std::vector<std::pair<double, double>> residuals;  // (r - b_u, weight): every unit weighs the same
    for (const auto& [u, v] : units) {
      biases.push_back(mean_of(v));
      const double w = 1.0 / (static_cast<double>(n_units) * static_cast<double>(v.size()));
      for (double x : v) residuals.emplace_back(x - biases.back(), w);
    }
    const double mu = mean_of(biases);
    // Pooled with the variance over every unit: kBandPriorDof degrees of freedom of it (all of it when the class
    // has one unit); never more degrees of freedom than that variance has. tau = 0 (every bias the same): the
    // weighted residuals' percentiles.
    const double prior_dof = std::min(kBandPriorDof, dof_all);
    const double dof = static_cast<double>(n_units) - 1;
    const double tau = std::sqrt(
        dof + prior_dof > 0 ? (sample_variance(biases) * dof + var_all * prior_dof) / (dof + prior_dof) : var_all);
    out.push_back(
        {k, rows, mixture_quantile(residuals, mu, tau, 0.05), mixture_quantile(residuals, mu, tau, 0.95), n_units});
  }
  return out;
}

CvReport cross_validate(const std::vector<CvSource>& sources, int max_evaluations, double max_error_weight) {
  constexpr int kMinBandRows = 10;
  CvReport rep;
  std::map<std::string, const CvSource*> by_name;
  for (const auto& s : sources) by_name[s.name] = &s;
  std::vector<std::vector<BandSample>> samples(sources.size());
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const CvSource& src = sources[i];
    CvSourceResult out;
    out.source = src.name;
    std::set<std::string> gpus, stacks;
    for (const auto& r : src.rows)
      if (r.failure.empty()) gpus.insert(r.gpu), stacks.insert(r.plan.stack.empty() ? kDefaultStack : r.plan.stack);
    for (const auto& g : gpus) out.gpus += (out.gpus.empty() ? "" : ", ") + g;
    for (const auto& s : stacks) out.stacks += (out.stacks.empty() ? "" : ", ") + s;
    // Per GPU of the source: the calibration its rows are predicted with.
    std::map<std::string, Calibration> cal_of_gpu;
    std::vector<std::string> notes;
    for (const auto& g : gpus) {
      const Calibration hw = default_calibration(g);
      std::vector<std::string> fitted_on = calibration_fitted_on(hw);
      for (const auto& s : stacks)
        for (const auto& f : stack_profile(s).fitted_on)
          if (!has(fitted_on, f)) fitted_on.push_back(f);
      if (!has(fitted_on, src.name)) {
        cal_of_gpu.emplace(g, hw);
        notes.push_back(g + ": shipped values (their fits never saw this source)");
        continue;
      }
      // Refit on the other given sources of that fit, rows of the same GPU, even rows (as the shipped fit).
      std::vector<PublishedRow> train;
      std::string used;
      for (const auto& f : fitted_on) {
        if (f == src.name || !by_name.count(f)) continue;
        for (const auto& r : select_split(by_name.at(f)->rows, "train"))
          if (r.failure.empty() && r.gpu == g) train.push_back(r);
        used += (used.empty() ? "" : ", ") + f;
      }
      if (train.empty()) {
        cal_of_gpu.emplace(g, hw);
        notes.push_back(g + ": in-sample (no other source of its fit given)");
        continue;
      }
      // Fewer rows than twice the fitted parameters identify nothing (a fit would pass through them): the source is
      // predicted with the estimates a fit starts from, i.e. as a GPU and stack with no measured runs would be.
      if (train.size() < 2 * fitted_fields().size()) {
        cal_of_gpu.emplace(g, neutral_start(hw));
        notes.push_back(g + ": unfitted estimates (without it, " + used + " leave " + std::to_string(train.size()) +
                        " rows, too few for the fit's " + std::to_string(fitted_fields().size()) + " parameters)");
        continue;
      }
      const FitResult fr = fit_published(train, neutral_start(hw), max_evaluations, max_error_weight);
      out.fit_objective = fr.objective_after;
      cal_of_gpu.emplace(g, fr.calibration);
      notes.push_back(g + ": refit without it on " + used + " (" + std::to_string(train.size()) + " rows, " +
                      std::to_string(fr.evaluations) + " evaluations, objective " +
                      format_number("%.2f%%", 100 * fr.objective_after) + ")");
    }
    for (const auto& n : notes) out.values_from += (out.values_from.empty() ? "" : "; ") + n;
    const Calibration fallback = default_calibration("a100-sxm4-80gb");
    out.results = predict_rows(
        src.rows,
        [&](const PublishedRow& r) -> const Calibration& {
          auto it = cal_of_gpu.find(r.gpu);
          return it != cal_of_gpu.end() ? it->second : fallback;
        },
        NetworkMode::ANALYTIC);
    out.score = score(out.results);
    std::vector<double> m, p;
    for (const auto& r : out.results)
      if (r.timed()) m.push_back(r.row.measured_s), p.push_back(r.predicted_s);
    out.spearman_all = spearman(m, p);
    rep.sources.push_back(std::move(out));
  }
  // Samples point into rep.sources' results, which are not resized from here on.
  for (std::size_t i = 0; i < rep.sources.size(); ++i) {
    samples[i].clear();
    for (const auto& r : rep.sources[i].results)
      if (r.timed())
        samples[i].push_back({&r.row, std::log(r.row.measured_s / r.predicted_s),
                              rep.sources[i].source + (r.row.series.empty() ? "" : "/" + r.row.series)});
  }
  std::vector<BandSample> all;
  double abs_sum = 0;
  for (std::size_t i = 0; i < rep.sources.size(); ++i) {
    for (const auto& s : samples[i]) all.push_back(s);
    for (const auto& r : rep.sources[i].results)
      if (r.timed()) abs_sum += std::fabs(r.error), ++rep.rows;
  }
  rep.pooled_mape = rep.rows > 0 ? abs_sum / rep.rows : 0;
  int with_rows = 0;
  for (const auto& s : rep.sources)
    if (s.score.rows > 0) rep.mean_source_mape += s.score.mape, ++with_rows;
  if (with_rows > 0) rep.mean_source_mape /= with_rows;
  rep.bands = error_bands(all, kMinBandRows);
  // Coverage: each source's rows against bands built from the other sources' rows.
  int banded_sources = 0;
  for (std::size_t i = 0; i < rep.sources.size(); ++i) {
    std::vector<BandSample> others;
    for (std::size_t j = 0; j < rep.sources.size(); ++j)
      if (j != i) others.insert(others.end(), samples[j].begin(), samples[j].end());
    const auto bands = error_bands(others, kMinBandRows);
    std::set<std::string> keys;
    auto& src = rep.sources[i];
    for (const auto& s : samples[i]) {
      CvRow out;
      out.id = s.row->id;
      out.unit = s.unit;
      out.gpu = s.row->gpu;
      out.stack = s.row->plan.stack.empty() ? kDefaultStack : s.row->plan.stack;
      out.scale = scale_class(*s.row);
      out.gpus = s.row->plan.world_size();
      out.measured_s = s.row->measured_s;
      out.predicted_s = s.row->measured_s / std::exp(s.log_ratio);
      out.log_ratio = s.log_ratio;
      if (const ErrorBand* b = band_for(bands, *s.row)) {
        keys.insert(b->key);
        ++src.banded;
        out.band_key = b->key;
        out.q05 = b->q05;
        out.q95 = b->q95;
        out.covered = s.log_ratio >= b->q05 && s.log_ratio <= b->q95;
        if (out.covered) ++src.covered;
      }
      src.rows.push_back(std::move(out));
    }
    for (const auto& k : keys) src.band_keys += (src.band_keys.empty() ? "" : ", ") + k;
    rep.covered += src.covered;
    rep.banded += src.banded;
    if (src.banded > 0) rep.mean_source_coverage += static_cast<double>(src.covered) / src.banded, ++banded_sources;
  }
  if (banded_sources > 0) rep.mean_source_coverage /= banded_sources;
  return rep;
}

std::string cv_text(const CvReport& r) {
  std::string t = "leave one source out: each source predicted by calibrations and stack profiles fitted without it\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-34s %5s %6s %8s %8s %9s %8s %9s  %s\n", "source", "rows", "failed", "MAPE",
                "bias", "Spearman", "mem MAPE", "90% cover", "GPU / stack");
  t += line;
  for (const auto& s : r.sources) {
    std::snprintf(line, sizeof line, "%-34s %5d %6d %7.2f%% %+7.2f%% %9.3f %7s %9s  %s / %s\n",
                  s.source.substr(0, 34).c_str(), s.score.rows, s.score.failed, 100 * s.score.mape,
                  100 * s.score.mean_error, s.spearman_all,
                  s.score.memory_rows > 0 ? format_number("%.2f%%", 100 * s.score.memory_mape).c_str() : "-",
                  s.banded > 0 ? (std::to_string(s.covered) + "/" + std::to_string(s.banded)).c_str() : "-",
                  s.gpus.c_str(), s.stacks.c_str());
    t += line;
  }
  std::snprintf(line, sizeof line,
                "pooled: %d rows, MAPE %.2f%% (mean of the sources' MAPEs %.2f%%); 90%% intervals cover %d of %d rows "
                "(%.1f%%; mean of the sources' coverage %.1f%%)\n",
                r.rows, 100 * r.pooled_mape, 100 * r.mean_source_mape, r.covered, r.banded,
                r.banded > 0 ? 100.0 * r.covered / r.banded : 0.0, 100 * r.mean_source_coverage);
  t += line;
  bool trends = false;
  for (const auto& s : r.sources) trends = trends || !s.score.scale_trends.empty();
  if (trends) {
    t += "\nscale trend (Spearman of the signed error vs GPU count, rows spanning >= " +
         std::to_string(kScaleTrendMinSpan) + "x in GPUs; |rho| <= 0.3: no trend):\n";
    for (const auto& s : r.sources)
      for (const auto& tr : s.score.scale_trends) {
        std::snprintf(line, sizeof line, "  %-34s %-22s %4d rows  %6d-%-6d GPUs  rho %+.2f\n",
                      s.source.substr(0, 34).c_str(), tr.series.c_str(), tr.rows, tr.min_gpus, tr.max_gpus,
                      tr.spearman);
        t += line;
      }
  }
  t += "\nvalues each source was predicted with:\n";
  for (const auto& s : r.sources) t += "  " + s.source + ": " + s.values_from + "\n";
  t += "\n90% random-effects bands of ln(measured / predicted) over sources (interval = prediction x [e^q05, e^q95]), "
       "classes with >= 10 rows:\n";
  for (const auto& b : r.bands) {
    std::snprintf(line, sizeof line, "  %-48s %5d rows %2d source%s  [%+.3f, %+.3f]  x[%.3f, %.3f]\n", b.key.c_str(),
                  b.rows, b.sources, b.sources == 1 ? " " : "s", b.q05, b.q95, std::exp(b.q05), std::exp(b.q95));
    t += line;
  }
  return t;
}

namespace {
nlohmann::json rows_json(const std::vector<CvRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json j = {{"id", r.id},
                        {"unit", r.unit},
                        {"gpu", r.gpu},
                        {"stack", r.stack},
                        {"scale", r.scale},
                        {"gpus", r.gpus},
                        {"measured_s", r.measured_s},
                        {"predicted_s", r.predicted_s},
                        {"log_ratio", r.log_ratio}};
    if (!r.band_key.empty()) {
      j["band"] = r.band_key;
      j["q05"] = r.q05;
      j["q95"] = r.q95;
      j["covered"] = r.covered;
    }
    out.push_back(std::move(j));
  }
  return out;
}
}  // namespace

nlohmann::json cv_json(const CvReport& r) {
  nlohmann::json srcs = nlohmann::json::array();
  for (const auto& s : r.sources)
    srcs.push_back({{"source", s.source},
                    {"gpus", s.gpus},
                    {"stacks", s.stacks},
                    {"values_from", s.values_from},
                    {"rows", s.score.rows},
                    {"failed", s.score.failed},
                    {"mape", s.score.mape},
                    {"mean_error", s.score.mean_error},
                    {"max_abs_error", s.score.max_abs_error},
                    {"spearman", s.spearman_all},
                    {"memory_rows", s.score.memory_rows},
                    {"memory_mape", s.score.memory_mape},
                    {"covered", s.covered},
                    {"banded", s.banded},
                    {"band_keys", s.band_keys},
                    {"scale_trends", scale_trends_json(s.score.scale_trends)},
                    {"row_results", rows_json(s.rows)}});
  nlohmann::json bands = nlohmann::json::array();
  for (const auto& b : r.bands)
    bands.push_back({{"key", b.key}, {"rows", b.rows}, {"sources", b.sources}, {"q05", b.q05}, {"q95", b.q95}});
  return {{"schema", "dtsim.cross_validation"},
          {"schema_version", 1},
          {"sources", srcs},
          {"rows", r.rows},
          {"pooled_mape", r.pooled_mape},
          {"mean_source_mape", r.mean_source_mape},
          {"covered", r.covered},
          {"banded", r.banded},
          {"mean_source_coverage", r.mean_source_coverage},
          {"bands", bands}};
}

}  // namespace dtsim::sim
