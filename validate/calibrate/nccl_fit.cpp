#include "validate/calibrate/nccl_fit.hpp"

#include <algorithm>
#include <cmath>

#include "traces/error.hpp"

namespace dtsim::sim {

NcclFit fit_nccl_tests(const NcclTestsRun& run, const ClusterSpec& cluster, const Calibration& base, std::string op,
                       int ranks, const std::string& source) {
  if (op.empty()) op = run.op;
  if (ranks <= 0) ranks = run.ranks;
  if (op.empty()) throw ConfigError(source + ": the log does not name its collective; pass --op");
  if (ranks < 2) throw ConfigError(source + ": the log does not give the number of ranks; pass --ranks");
  if (op != "all-reduce" && op != "all-gather" && op != "reduce-scatter")
    throw ConfigError(source + ": fitting supports all-reduce, all-gather and reduce-scatter, not '" + op + "'");
  if (ranks > cluster.total_gpus())
    throw ConfigError(source + ": " + std::to_string(ranks) + " ranks do not fit cluster '" + cluster.name + "'");
  const int n = ranks;
  const double steps = op == "all-reduce" ? 2.0 * (n - 1) : n - 1.0;
  const bool intra = n <= cluster.gpus_per_node;
  const double alpha = intra ? cluster.intra.latency_s : cluster.inter.latency_s;
  const double B = intra ? cluster.intra.bandwidth_Bps * base.intra_bandwidth_efficiency
                         : cluster.inter.nic_bandwidth_Bps * base.inter_bandwidth_efficiency;
  const double o = base.collective_step_overhead_s;

  NcclFit fit;
  fit.link = intra ? "intra" : "inter";
  fit.calibration = base;
  // The measurements are NCCL itself (its protocol choice and latencies): the fitted segments replace NCCL's modelled
  // protocol latencies (strategies/nccl_model.hpp), which would otherwise be charged again as a floor.
  fit.calibration.nccl_protocol = "off";
  auto& segs = fit.calibration.network_segments;
  segs.erase(std::remove_if(segs.begin(), segs.end(), [&](const NetworkSegment& g) { return g.link == fit.link; }),
             segs.end());

  std::vector<NcclTestsRow> rows = run.rows;
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
  if (rows.size() < 2 || rows.front().bytes == rows.back().bytes)
    throw ConfigError(source + ": need at least two message sizes to fit");
  const double bounds[] = {64 * 1024.0, 1024 * 1024.0, 16 * 1024 * 1024.0, 1e300};
  std::vector<std::vector<NcclTestsRow>> groups;
  std::vector<double> group_max;
  std::size_t r = 0;
  std::vector<NcclTestsRow> pending;
  for (double bound : bounds) {
    while (r < rows.size() && rows[r].bytes <= bound) pending.push_back(rows[r++]);
    std::vector<double> sizes;
    sizes.reserve(pending.size());
    for (const auto& p : pending) sizes.push_back(p.bytes);
    std::sort(sizes.begin(), sizes.end());
    const bool enough = std::unique(sizes.begin(), sizes.end()) - sizes.begin() >= 2;
    if (enough || (bound == bounds[3] && !pending.empty())) {
      if (!enough && !groups.empty()) {  // a lone last point joins the previous segment
        groups.back().insert(groups.back().end(), pending.begin(), pending.end());
        group_max.back() = bound;
      } else {
        groups.push_back(pending);
        group_max.push_back(bound);
      }
      pending.clear();
    }
  }
  if (groups.empty()) throw ConfigError(source + ": need at least two message sizes to fit");
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const auto& g = groups[gi];
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const auto& p : g) {
      const double x = p.bytes, y = p.time_us * 1e-6;
      sx += x, sy += y, sxx += x * x, sxy += x * y;
    }
    const double k = static_cast<double>(g.size());
    const double den = k * sxx - sx * sx;
    double C = den > 0 ? (k * sxy - sx * sy) / den : 0;
    double A = (sy - C * sx) / k;
    NetworkSegment seg;
    seg.link = fit.link;
    // The simulator applies factors per message: one ring step carries S/n bytes.
    seg.max_bytes = group_max[gi] >= 1e300 ? 1e300 : group_max[gi] / n;
    seg.latency_factor = alpha > 0 ? std::max(0.0, (A / steps - o) / alpha) : 1.0;
    seg.bandwidth_factor = C > 0 ? std::clamp(steps / (n * B * C), 1e-3, 1e3) : 1e3;
    segs.push_back(seg);
  }
  std::stable_sort(segs.begin(), segs.end(), [](const NetworkSegment& a, const NetworkSegment& b) {
    return a.link < b.link || (a.link == b.link && a.max_bytes < b.max_bytes);
  });
  // Residuals of the fitted model against every measurement.
  double sum = 0;
  for (const auto& p : rows) {
    const auto [lf, bf] = fit.calibration.segment_factors(fit.link, p.bytes / n);
    const double predicted = steps * (alpha * lf + o + (p.bytes / n) / (B * bf));
    const double measured = p.time_us * 1e-6;
    const double rel = std::abs(predicted - measured) / measured;
    fit.points.push_back({p.bytes, measured, predicted});
    fit.max_rel_error = std::max(fit.max_rel_error, rel);
    sum += rel;
  }
  fit.mean_rel_error = sum / static_cast<double>(rows.size());
  fit.calibration.name = base.name + " + nccl-tests fit (" + fit.link + ")";
  fit.calibration.provenance["network_segments_" + fit.link] = {
      {"source", source},
      {"collective", op},
      {"ranks", n},
      {"method",
       "least-squares line T = A + C*S per message-size segment, inverted through the ring model "
       "T = steps (alpha lf + o + (S/n)/(B bf)); see sim/calibrate.hpp"},
      {"max_relative_error", fit.max_rel_error},
      {"mean_relative_error", fit.mean_rel_error}};
  return fit;
}

}  // namespace dtsim::sim
