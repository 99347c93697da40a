#include "studies/collective_bench.hpp"

#include <algorithm>
#include <array>

#include "sim/engine/isolate.hpp"
#include "sim/simulate.hpp"

namespace dtsim::sim {

double bus_factor(cost::CollectiveKind kind, int n) {
  switch (kind) {
    case cost::CollectiveKind::ALL_REDUCE: return 2.0 * (n - 1) / n;
    case cost::CollectiveKind::BROADCAST:
    case cost::CollectiveKind::REDUCE: return 1.0;
    default: return (n - 1.0) / n;  // all-gather, reduce-scatter, all-to-all
  }
}

cost::CollectiveKind collective_kind_from_string(const std::string& s, const std::string& ctx) {
  if (s == "all-reduce") return cost::CollectiveKind::ALL_REDUCE;
  if (s == "all-gather") return cost::CollectiveKind::ALL_GATHER;
  if (s == "reduce-scatter") return cost::CollectiveKind::REDUCE_SCATTER;
  if (s == "all-to-all") return cost::CollectiveKind::ALL_TO_ALL;
  if (s == "broadcast") return cost::CollectiveKind::BROADCAST;
  if (s == "reduce") return cost::CollectiveKind::REDUCE;
  throw ConfigError(ctx + ": unknown collective '" + s +
                    "' (known: all-reduce, all-gather, reduce-scatter, all-to-all, broadcast, reduce)");
}

namespace {
/// The model, plan and options a collective is lowered with: one TP group of n ranks.
struct Setup {
  TransformerSpec model = model_preset("gpt3-1.3b");  // only its dtype is used
  ParallelPlan plan;
  SimOptions opt;
};
Setup setup(const ClusterSpec& cluster, const SimOptions& options, int n, cost::CollectiveKind kind, double bytes) {
  if (n < 1 || n > cluster.total_gpus())
    throw ConfigError("collective: group of " + std::to_string(n) + " ranks does not fit the " +
                      std::to_string(cluster.total_gpus()) + " GPUs of cluster '" + cluster.name + "'");
  if (!(bytes > 0)) throw ConfigError("collective: message size must be positive");
  Setup s;
  s.plan.tp = n;
  s.plan.global_batch_size = 1;
  s.opt = options;
  if (kind == cost::CollectiveKind::BROADCAST || kind == cost::CollectiveKind::REDUCE) s.opt.fold = FoldMode::NONE;
  return s;
}
}  // namespace

Footprint collective_footprint(const ClusterSpec& cluster, const Calibration& cal, const SimOptions& options, int n,
                               cost::CollectiveKind kind, double bytes) {
  const Setup s = setup(cluster, options, n, kind, bytes);
  return estimate_collective_footprint(s.model, cluster, s.plan, cal, s.opt, kind, bytes);
}

CollectivePoint run_collective(const ClusterSpec& cluster, const Calibration& cal, const SimOptions& options, int n,
                               cost::CollectiveKind kind, double bytes) {
  const Setup s = setup(cluster, options, n, kind, bytes);
  const ParallelPlan& plan = s.plan;
  Lowered low = lower_collective(s.model, cluster, plan, cal, s.opt, kind, bytes);
  const auto [gpus, share] = platform_ranks(low, plan, 0);
  EngineResult res = run_engine(low, cluster, cal, s.opt, gpus, share);
  CollectivePoint pt;
  pt.bytes = bytes;
  for (double e : res.end_s) pt.time_s = std::max(pt.time_s, e);
  pt.algbw_Bps = bytes / pt.time_s;
  pt.busbw_Bps = pt.algbw_Bps * bus_factor(kind, n);
  pt.tasks = low.graph.size();
  return pt;
}

std::vector<CollectivePoint> collective_sweep(const ClusterSpec& cluster, const Calibration& cal,
                                              const SimOptions& options, int n, cost::CollectiveKind kind,
                                              const std::vector<double>& sizes) {
  std::vector<CollectivePoint> out;
  for (double bytes : sizes) {
    std::vector<double> v;
    try {
      v = run_isolated(
          [&] {
            auto pt = run_collective(cluster, cal, options, n, kind, bytes);
            return std::vector<double>{pt.time_s, static_cast<double>(pt.tasks)};
          },
          2);
    } catch (const std::runtime_error&) {
      throw std::runtime_error("collective sweep: the simulation of " + std::to_string(bytes) + " bytes failed");
    }
    CollectivePoint pt;
    pt.bytes = bytes;
    pt.time_s = v[0];
    pt.tasks = static_cast<std::uint64_t>(v[1]);
    pt.algbw_Bps = bytes / pt.time_s;
    pt.busbw_Bps = pt.algbw_Bps * bus_factor(kind, n);
    out.push_back(pt);
  }
  return out;
}

}  // namespace dtsim::sim
