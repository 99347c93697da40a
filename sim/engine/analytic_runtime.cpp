#include "sim/engine/analytic_runtime.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

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
  // Link accounting in two passes, so that the per-link event lists exist for one link at a time: the timing pass
  // counts each link's flows; the flows are then listed per link (4 bytes per link crossed, in task order) and each
  // link's events are built, sorted and swept alone. Keeping every link's events for the whole run cost 72 bytes per
  // link crossed and made the analytic engine the largest consumer of memory on MoE runs (issue Guard: the
  // footprint estimate missed it by a quarter on Qwen3-235B-A22B at EP 8).
  std::vector<int> route;
  std::vector<std::int64_t> crossings(pf.links.size() + 1, 0);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::int32_t id = order[k];
    const Task& t = g.tasks()[id];
    double dur = 0;
    if (t.kind == TaskKind::COMPUTE || t.kind == TaskKind::DELAY) dur = std::max(0.0, t.duration_s);
    if (t.kind == TaskKind::FLOW) {
      pf.route_into(t, &route);
      const double bw = pf.bandwidth_Bps(t), lat = pf.latency_s(route);
      dur = lat + t.bytes / bw;
      ++res.activities;
      for (int l : route) {
        res.link_stats[l].bytes += t.bytes;
        ++crossings[static_cast<std::size_t>(l) + 1];
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
  order = {};
  // The flows of each link (CSR, in task order).
  for (std::size_t l = 0; l < pf.links.size(); ++l) crossings[l + 1] += crossings[l];
  std::vector<std::int32_t> flows(static_cast<std::size_t>(crossings.back()));
  {
    std::vector<std::int64_t> fill(crossings.begin(), crossings.end() - 1);
    for (std::size_t i = 0; i < n; ++i) {
      const Task& t = g.tasks()[i];
      if (t.kind != TaskKind::FLOW) continue;
      pf.route_into(t, &route);
      for (int l : route)
        flows[static_cast<std::size_t>(fill[static_cast<std::size_t>(l)]++)] = static_cast<std::int32_t>(i);
    }
  }
  // Busy time (at least one payload streaming) and peak load per link.
  struct Edge {
    double t, rate;
    int count;  // flows on the link (busy from a flow's start to its end, latency included)
  };
  std::vector<Edge> ev;
  for (std::size_t l = 0; l < pf.links.size(); ++l) {
    ev.clear();
    for (std::int64_t k = crossings[l]; k < crossings[l + 1]; ++k) {
      const std::int32_t id = flows[static_cast<std::size_t>(k)];
      const Task& t = g.tasks()[id];
      pf.route_into(t, &route);
      const double bw = pf.bandwidth_Bps(t), lat = pf.latency_s(route);
      // The payload streams at the bottleneck rate after the latency.
      const double load = bw * pf.links[l].multiplicity;  // every folded copy streams alike
      ev.push_back({res.start_s[id], 0, 1});
      ev.push_back({res.start_s[id] + lat, load, 0});
      ev.push_back({res.end_s[id], -load, -1});
    }
    // Ends before starts at the same instant: back-to-back flows neither overlap nor leave a gap. Equal keys are
    // equal events: the order among them does not change the sweep.
    std::sort(ev.begin(), ev.end(), [](const Edge& a, const Edge& b) {
      if (a.t != b.t) return a.t < b.t;
      if (a.rate + a.count != b.rate + b.count) return a.rate + a.count < b.rate + b.count;
      if (a.rate != b.rate) return a.rate < b.rate;
      return a.count < b.count;
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
    // Unshared flows: the demand may pass the capacity; the utilisation cannot (issue Guard).
    res.link_stats[l].peak_demand = peak / res.link_stats[l].bandwidth_Bps;
    res.link_stats[l].peak_utilization = std::min(1.0, res.link_stats[l].peak_demand);
  }
  count_folded_copies(pf, &res);
  return res;
}

}  // namespace dtsim::sim
