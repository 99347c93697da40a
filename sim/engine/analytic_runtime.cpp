#include "sim/engine/analytic_runtime.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "sim/model/exchange_timing.hpp"
#include "sim/model/sort_runs.hpp"

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
  // All-to-alls as one task per member (Exchange). A member's start is its own (the rendezvous, and its host's issue of
  // the call where that comes later); its end needs every member's start (the pieces addressed to it leave on the
  // senders' clocks), so a member's successors are released once all members have started, and the ends then come
  // from the pieces' closed form (time_exchange). No cycle can follow: in the one-flow-per-piece form every member's
  // end depends on every member's start already. Each piece's start is kept, numbered after the tasks (piece k of all
  // exchanges: n + k), for the link statistics below, which count the pieces as the flows they stand for.
  const auto& xs = g.exchanges();
  std::vector<std::size_t> piece_base(xs.size() + 1, 0);
  for (std::size_t e = 0; e < xs.size(); ++e)
    piece_base[e + 1] = piece_base[e] + static_cast<std::size_t>(xs[e].n()) * static_cast<std::size_t>(xs[e].n());
  DTSIM_ASSERT(n + piece_base.back() < static_cast<std::size_t>(INT32_MAX), "too many all-to-all pieces");
  // Written for every piece before it is read, so left uninitialised (zeroing it was a pass over 134 MB of a skewed
  // DeepSeek-V3 run's memory for nothing; the same for the per-link lists below).
  const auto piece_start = std::make_unique_for_overwrite<double[]>(piece_base.back());
  std::vector<int> started(xs.size(), 0);
  std::vector<double> member_start;
  auto release = [&](std::int32_t id) {
    for (auto* s = g.succ_begin(id); s != g.succ_end(id); ++s) {
      res.start_s[*s] = std::max(res.start_s[*s], res.end_s[id]);
      if (--pending[*s] == 0) order.push_back(*s);
    }
  };
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::int32_t id = order[k];
    const Task& t = g.tasks()[id];
    if (t.kind == TaskKind::DELAY && !xs.empty()) {
      if (const auto ex = g.exchange_of(id).first; ex >= 0) {
        const auto e = static_cast<std::size_t>(ex);
        const Exchange& x = xs[e];
        if (++started[e] < x.n()) continue;  // its end waits for the other members' starts
        member_start.clear();
        for (auto m : x.tasks) member_start.push_back(res.start_s[static_cast<std::size_t>(m)]);
        const auto ends = time_exchange(
            x, g.tasks(), pf, member_start,
            [&](int from, int to, const Task& f, double start, double, const std::vector<int>& links) {
              piece_start[piece_base[e] + x.at(from, to)] = start;
              ++res.activities;
              for (int l : links) {
                res.link_stats[l].bytes += f.bytes;
                ++crossings[static_cast<std::size_t>(l) + 1];
              }
            },
            &route);
        for (int m = 0; m < x.n(); ++m) {
          const auto mid = x.tasks[static_cast<std::size_t>(m)];
          res.end_s[static_cast<std::size_t>(mid)] = ends[static_cast<std::size_t>(m)];
          if (ends[static_cast<std::size_t>(m)] > res.start_s[static_cast<std::size_t>(mid)]) ++res.activities;
          release(mid);
        }
        continue;
      }
    }
    double dur = 0;
    if (t.kind == TaskKind::COMPUTE || t.kind == TaskKind::DELAY) dur = std::max(0.0, t.duration_s);
    if (t.kind == TaskKind::FLOW) {
      pf.route_into(t, &route);
      const double bw = pf.bandwidth_Bps(route), lat = pf.latency_s(route);
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
    release(id);
  }
  DTSIM_ASSERT(order.size() == n, "task graph has a cycle");
  order = {};
  // The flows of each link (CSR, in task order).
  for (std::size_t l = 0; l < pf.links.size(); ++l) crossings[l + 1] += crossings[l];
  const auto flows = std::make_unique_for_overwrite<std::int32_t[]>(static_cast<std::size_t>(crossings.back()));
  {
    std::vector<std::int64_t> fill(crossings.begin(), crossings.end() - 1);
    for (std::size_t i = 0; i < n; ++i) {
      const Task& t = g.tasks()[i];
      if (t.kind != TaskKind::FLOW) continue;
      pf.route_into(t, &route);
      for (int l : route)
        flows[static_cast<std::size_t>(fill[static_cast<std::size_t>(l)]++)] = static_cast<std::int32_t>(i);
    }
    for (std::size_t e = 0; e < xs.size(); ++e) {
      // Round by round (round r: member j to member j + r), so that a member's up-links get its pieces in sending
      // order and its down-links get theirs in the order they were sent: ascending runs for sort_runs (in arrival
      // order where the pieces are alike).
      const int nn = xs[e].n();
      for (int r = 1; r < nn; ++r)
        for (int j = 0; j < nn; ++j) {
          const int i = (j + r) % nn;
          if (!xs[e].has_piece(j, i)) continue;
          pf.route_into(exchange_flow(xs[e], j, i), &route);
          const auto id = static_cast<std::int32_t>(n + piece_base[e] + xs[e].at(j, i));
          for (int l : route) flows[static_cast<std::size_t>(fill[static_cast<std::size_t>(l)]++)] = id;
        }
    }
  }
  // Busy time (at least one payload streaming) and peak load per link, from four sorted lists per link rather than
  // one list of every event (sorting that list took a fifth of a 15-million-task run): the flows' starts and ends
  // for the busy time, ends first at the same instant (back-to-back flows neither overlap nor leave a gap); and the
  // loads flows add after their latency and remove at their end for the peak, removals first at the same instant
  // (larger first), additions smaller first. That is the order of the single sorted list this replaced, so the
  // sums (and their rounding) are the same; equal entries are equal events, whose order changes nothing.
  std::vector<double> starts, ends;
  std::vector<std::pair<double, double>> adds, removes;  // (time, load), (time, -load)
  // A link's flows come in task order, which is time order for each rank's streams: the lists are a few ascending
  // runs (268 in 9.3 million entries of Llama 3 405B on 576 GB200s), merged rather than sorted (sort_runs.hpp).
  std::vector<std::size_t> runs;
  std::size_t e = 0;  // the exchange of the last piece seen
  for (std::size_t l = 0; l < pf.links.size(); ++l) {
    starts.clear();
    ends.clear();
    adds.clear();
    removes.clear();
    for (std::int64_t k = crossings[l]; k < crossings[l + 1]; ++k) {
      const std::int32_t id = flows[static_cast<std::size_t>(k)];
      double start = 0, end = 0, bw = 0, lat = 0;
      if (static_cast<std::size_t>(id) < n) {
        const Task& t = g.tasks()[id];
        pf.route_into(t, &route);
        bw = pf.bandwidth_Bps(route);
        lat = pf.latency_s(route);
        start = res.start_s[id];
        end = res.end_s[id];
      } else {  // an exchange's piece (a link's pieces of one exchange come together: the last one found first)
        const std::size_t p = static_cast<std::size_t>(id) - n;
        if (p < piece_base[e] || p >= piece_base[e + 1])
          e = static_cast<std::size_t>(std::upper_bound(piece_base.begin(), piece_base.end(), p) - piece_base.begin() -
                                       1);
        const int nn = xs[e].n(), from = static_cast<int>((p - piece_base[e]) / static_cast<std::size_t>(nn)),
                  to = static_cast<int>((p - piece_base[e]) % static_cast<std::size_t>(nn));
        const Task f = exchange_flow(xs[e], from, to);
        pf.route_into(f, &route);
        bw = pf.bandwidth_Bps(route);
        lat = pf.latency_s(route);
        start = piece_start[p];
        end = start + (lat + f.bytes / bw);
      }
      // The payload streams at the bottleneck rate after the latency.
      const double load = bw * pf.links[l].multiplicity;  // every folded copy streams alike
      starts.push_back(start);
      ends.push_back(end);
      adds.emplace_back(start + lat, load);
      removes.emplace_back(end, -load);
    }
    sort_runs(starts, runs);
    sort_runs(ends, runs);
    sort_runs(adds, runs);
    sort_runs(removes, runs);
    double since = 0;
    int active = 0;
    for (std::size_t i = 0, j = 0; i < starts.size() || j < ends.size();) {
      if (j < ends.size() && (i == starts.size() || ends[j] <= starts[i])) {
        if (--active == 0) res.link_stats[l].busy_s += ends[j] - since;
        ++j;
      } else {
        if (active++ == 0) since = starts[i];
        ++i;
      }
    }
    double load = 0, peak = 0;
    for (std::size_t i = 0, j = 0; i < adds.size() || j < removes.size();) {
      if (j < removes.size() && (i == adds.size() || removes[j].first <= adds[i].first)) load += removes[j++].second;
      else load += adds[i++].second;
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
