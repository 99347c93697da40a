#include "sim/engine/analytic_runtime.hpp"

#include <algorithm>

namespace dtsim::sim {

EngineResult run_analytic(const TaskGraph& g, const ClusterSpec& cluster, const Calibration& cal,
                          const std::vector<int>& gpu_of_rank, const std::vector<RankShare>& share) {
  const Platform pf = describe_platform(cluster, cal, gpu_of_rank, share);
  EngineResult res;
  res.engine = "analytic";
  res.links = pf.links.size();
  res.link_stats = initial_link_stats(pf);
  const std::size_t n = g.size();
  res.start_s.assign(n, 0.0);
  res.end_s.assign(n, -1.0);
  // Kahn's order; the start of a task is the latest end of its predecessors (and its release time).
  // A task's release time (TaskGraph::release_s) is a lower bound of its start, as a predecessor ending then.
  std::vector<std::int32_t> pending = g.pred_count(), order;
  order.reserve(n);
  if (g.has_releases())
    for (std::size_t i = 0; i < n; ++i) res.start_s[i] = g.release_s(static_cast<std::int32_t>(i));
  for (std::size_t i = 0; i < n; ++i)
    if (pending[i] == 0) order.push_back(static_cast<std::int32_t>(i));
  struct Edge {
    double t, rate;
    int count;  // flows on the link (busy from a flow's start to its end, latency included)
  };
  std::vector<std::vector<Edge>> link_events(pf.links.size());
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::int32_t id = order[k];
    const Task& t = g.tasks()[id];
    double dur = 0;
    if (t.kind == TaskKind::COMPUTE || t.kind == TaskKind::DELAY) dur = std::max(0.0, t.duration_s);
    if (t.kind == TaskKind::FLOW) {
      const double bw = pf.bandwidth_Bps(t), lat = pf.latency_s(t);
      dur = lat + t.bytes / bw;
      ++res.activities;
      for (int l : pf.route(t)) {
        res.link_stats[l].bytes += t.bytes;
        // The payload streams at the bottleneck rate after the latency.
        link_events[l].push_back({res.start_s[id], 0, 1});
        const double load = bw * pf.links[l].multiplicity;  // every folded copy streams alike
        link_events[l].push_back({res.start_s[id] + lat, load, 0});
        link_events[l].push_back({res.start_s[id] + dur, -load, -1});
      }
    } else if (t.kind != TaskKind::JOIN && dur > 0) {
      ++res.activities;
    }
    res.end_s[id] = res.start_s[id] + dur;
    for (auto* s = g.succ_begin(id); s != g.succ_end(id); ++s) {
      res.start_s[*s] = std::max(res.start_s[*s], res.end_s[id]);
      if (--pending[*s] == 0) order.push_back(*s);
    }
  }
  DTSIM_ASSERT(order.size() == n, "task graph has a cycle");
  // Busy time (at least one payload streaming) and peak load per link.
  for (std::size_t l = 0; l < link_events.size(); ++l) {
    auto& ev = link_events[l];
    // Ends before starts at the same instant: back-to-back flows neither overlap nor leave a gap.
    std::sort(ev.begin(), ev.end(), [](const Edge& a, const Edge& b) {
      return a.t < b.t || (a.t == b.t && (a.rate + a.count) < (b.rate + b.count));
    });
    double load = 0, peak = 0, since = 0;
    int active = 0;
    for (const auto& e : ev) {
      if (active == 0 && e.count > 0) since = e.t;
      active += e.count;
      if (active == 0 && e.count < 0) res.link_stats[l].busy_s += e.t - since;
      load += e.rate;
      peak = std::max(peak, load);
    }
    res.link_stats[l].peak_utilization = peak / res.link_stats[l].bandwidth_Bps;
  }
  count_folded_copies(pf, &res);
  return res;
}

}  // namespace dtsim::sim
