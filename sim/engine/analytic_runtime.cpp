#include "sim/engine/analytic_runtime.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "sim/model/exchange_timing.hpp"
#include "sim/model/sort_runs.hpp"
#include "traces/parallel.hpp"

namespace dtsim::sim {

namespace {
/// The per-link sweep's unit of work on a thread, and the link crossings from which the listing and the sweep take
/// more than one thread: spawning one costs ~0.1 ms, sweeping a million crossings ~40 ms on this project's 2-core
/// machine (2026-12-07).
constexpr std::size_t kLinksPerSweepBlock = 64;
constexpr std::int64_t kCrossingsPerExtraThread = 1'000'000;
/// The per-link lists are filled in 2 x kFillParts parts (the tasks' flows in kFillParts ranges of task ids, then the
/// exchanges' pieces in kFillParts ranges of exchanges), each part writing its own stretch of every link's list, so
/// that the parts can fill on several threads and every list still comes in the order of one pass: tasks, then pieces.
constexpr std::size_t kFillParts = 4;

/// One link's busy time (at least one payload streaming) and peak load, from the flows listed for it: ids below the
/// task count are flow tasks, the rest exchange pieces (n + k: piece k of all exchanges, started at piece_start[k]).
/// Four sorted lists per link rather than one list of every event (sorting that list took a fifth of a
/// 15-million-task run): the flows' starts and ends for the busy time, ends first at the same instant (back-to-back
/// flows neither overlap nor leave a gap); and the loads flows add after their latency and remove at their end for
/// the peak, removals first at the same instant (larger first), additions smaller first. That is the order of the
/// single sorted list this replaced, so the sums (and their rounding) are the same; equal entries are equal events,
/// whose order changes nothing. One per block of links on a thread: its lists are reused from link to link.
class LinkSweep {
public:
  LinkSweep(const TaskGraph& g, const Platform& pf, const EngineResult& res, const std::vector<std::size_t>& piece_base,
            const double* piece_start)
      : g_(g), pf_(pf), res_(res), piece_base_(piece_base), piece_start_(piece_start) {}

  void operator()(std::size_t l, const std::int32_t* first, const std::int32_t* last, LinkStats* out) {
    const std::size_t n = g_.size();
    const auto& xs = g_.exchanges();
    starts_.clear();
    ends_.clear();
    adds_.clear();
    removes_.clear();
    for (const std::int32_t* it = first; it != last; ++it) {
      const std::int32_t id = *it;
      double start = 0, end = 0, bw = 0, lat = 0;
      if (static_cast<std::size_t>(id) < n) {
        const Task& t = g_.tasks()[id];
        pf_.route_into(t, &route_);
        bw = pf_.bandwidth_Bps(route_);
        lat = pf_.latency_s(route_);
        start = res_.start_s[static_cast<std::size_t>(id)];
        end = res_.end_s[static_cast<std::size_t>(id)];
      } else {  // an exchange's piece (a link's pieces of one exchange come together: the last one found first)
        const std::size_t p = static_cast<std::size_t>(id) - n;
        if (p < piece_base_[e_] || p >= piece_base_[e_ + 1])
          e_ = static_cast<std::size_t>(std::upper_bound(piece_base_.begin(), piece_base_.end(), p) -
                                        piece_base_.begin() - 1);
        const int nn = xs[e_].n(), from = static_cast<int>((p - piece_base_[e_]) / static_cast<std::size_t>(nn)),
                  to = static_cast<int>((p - piece_base_[e_]) % static_cast<std::size_t>(nn));
        const Task f = exchange_flow(xs[e_], from, to);
        pf_.route_into(f, &route_);
        bw = pf_.bandwidth_Bps(route_);
        lat = pf_.latency_s(route_);
        start = piece_start_[p];
        end = start + (lat + f.bytes / bw);
      }
      // The payload streams at the bottleneck rate after the latency.
      const double load = bw * pf_.links[l].multiplicity;  // every folded copy streams alike
      starts_.push_back(start);
      ends_.push_back(end);
      adds_.emplace_back(start + lat, load);
      removes_.emplace_back(end, -load);
    }
    // A link's flows come in task order, which is time order for each rank's streams: the lists are a few ascending
    // runs (268 in 9.3 million entries of Llama 3 405B on 576 GB200s), merged rather than sorted (sort_runs.hpp).
    sort_runs(starts_, runs_);
    sort_runs(ends_, runs_);
    sort_runs(adds_, runs_);
    sort_runs(removes_, runs_);
    double since = 0;
    int active = 0;
    for (std::size_t i = 0, j = 0; i < starts_.size() || j < ends_.size();) {
      if (j < ends_.size() && (i == starts_.size() || ends_[j] <= starts_[i])) {
        if (--active == 0) out->busy_s += ends_[j] - since;
        ++j;
      } else {
        if (active++ == 0) since = starts_[i];
        ++i;
      }
    }
    double load = 0, peak = 0;
    for (std::size_t i = 0, j = 0; i < adds_.size() || j < removes_.size();) {
      if (j < removes_.size() && (i == adds_.size() || removes_[j].first <= adds_[i].first))
        load += removes_[j++].second;
      else load += adds_[i++].second;
      peak = std::max(peak, load);
    }
    // Unshared flows: the demand may pass the capacity; the utilisation cannot (issue Guard).
    out->peak_demand = peak / out->bandwidth_Bps;
    out->peak_utilization = std::min(1.0, out->peak_demand);
  }

private:
  const TaskGraph& g_;
  const Platform& pf_;
  const EngineResult& res_;  ///< the tasks' start and end times (its link figures are written through `out`)
  const std::vector<std::size_t>& piece_base_;
  const double* piece_start_;
  std::vector<double> starts_, ends_;
  std::vector<std::pair<double, double>> adds_, removes_;  // (time, load), (time, -load)
  std::vector<std::size_t> runs_;
  std::vector<int> route_;
  std::size_t e_ = 0;  ///< the exchange of the last piece seen
};
}  // namespace

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
  // Counted per fill part (kFillParts above): part_crossings[part * num_links + link].
  std::vector<int> route;
  const std::size_t num_links = pf.links.size();
  std::vector<std::int64_t> crossings(num_links + 1, 0), part_crossings(2 * kFillParts * num_links, 0);
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
  // The fill part of task id and of exchange e; the first task id and exchange of a part.
  auto task_part = [&](std::size_t id) { return id * kFillParts / n; };
  auto exchange_part = [&](std::size_t e) { return kFillParts + e * kFillParts / xs.size(); };
  auto part_begin = [](std::size_t part, std::size_t count) { return (part * count + kFillParts - 1) / kFillParts; };
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
        std::int64_t* part_count = part_crossings.data() + exchange_part(e) * num_links;
        member_start.clear();
        for (auto m : x.tasks) member_start.push_back(res.start_s[static_cast<std::size_t>(m)]);
        const auto ends = time_exchange(
            x, g.tasks(), pf, member_start,
            [&](int from, int to, const Task& f, double start, double, const std::vector<int>& links) {
              piece_start[piece_base[e] + x.at(from, to)] = start;
              ++res.activities;
              for (int l : links) {
                res.link_stats[l].bytes += f.bytes;
                ++part_count[l];
              }
            },
            &route, g.exchange_receive_bound);
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
      std::int64_t* part_count = part_crossings.data() + task_part(static_cast<std::size_t>(id)) * num_links;
      for (int l : route) {
        res.link_stats[l].bytes += t.bytes;
        ++part_count[l];
      }
    } else if (t.kind != TaskKind::JOIN && dur > 0) {
      ++res.activities;
    }
    res.end_s[id] = res.start_s[id] + dur;
    release(id);
  }
  DTSIM_ASSERT(order.size() == n, "task graph has a cycle");
  order = {};
  // The flows of each link (CSR, in task order), and where each fill part starts in every link's list.
  for (std::size_t l = 0; l < num_links; ++l) {
    std::int64_t at = crossings[l];
    for (std::size_t part = 0; part < 2 * kFillParts; ++part) {
      const std::int64_t count = part_crossings[part * num_links + l];
      part_crossings[part * num_links + l] = at;
      at += count;
    }
    crossings[l + 1] = at;
  }
  const auto flows = std::make_unique_for_overwrite<std::int32_t[]>(static_cast<std::size_t>(crossings.back()));
  const int threads = crossings.back() >= kCrossingsPerExtraThread ? worker_threads() : 1;
  parallel_for(2 * kFillParts, threads, [&](std::size_t part) {
    std::int64_t* fill = part_crossings.data() + part * num_links;
    std::vector<int> flow_route;
    if (part < kFillParts) {
      for (std::size_t i = part_begin(part, n), end = part_begin(part + 1, n); i < end; ++i) {
        const Task& t = g.tasks()[i];
        if (t.kind != TaskKind::FLOW) continue;
        pf.route_into(t, &flow_route);
        for (int l : flow_route)
          flows[static_cast<std::size_t>(fill[static_cast<std::size_t>(l)]++)] = static_cast<std::int32_t>(i);
      }
      return;
    }
    for (std::size_t e = part_begin(part - kFillParts, xs.size()), end = part_begin(part + 1 - kFillParts, xs.size());
         e < end; ++e) {
      // Step by step (step k: each member's k-th piece, Exchange::target), so that a member's up-links get its pieces
      // in sending order and its down-links get theirs in the order they were sent: ascending runs for sort_runs (in
      // arrival order where the pieces are alike).
      const int nn = xs[e].n();
      for (int k = 0; k + 1 < nn; ++k)
        for (int j = 0; j < nn; ++j) {
          const int i = xs[e].target(j, k);
          if (!xs[e].has_piece(j, i)) continue;
          pf.route_into(exchange_flow(xs[e], j, i), &flow_route);
          const auto id = static_cast<std::int32_t>(n + piece_base[e] + xs[e].at(j, i));
          for (int l : flow_route) flows[static_cast<std::size_t>(fill[static_cast<std::size_t>(l)]++)] = id;
        }
    }
  });
  // The links are independent here: swept in blocks over worker threads (traces/parallel.hpp), each block with its
  // own lists, every link's figures in its own slot, so the output is the same on any thread count. Not worth a thread
  // below a million crossings.
  const std::size_t blocks = (num_links + kLinksPerSweepBlock - 1) / kLinksPerSweepBlock;
  parallel_for(blocks, threads, [&](std::size_t block) {
    LinkSweep sweep(g, pf, res, piece_base, piece_start.get());
    const std::size_t last = std::min(num_links, (block + 1) * kLinksPerSweepBlock);
    for (std::size_t l = block * kLinksPerSweepBlock; l < last; ++l)
      sweep(l, flows.get() + crossings[l], flows.get() + crossings[l + 1], &res.link_stats[l]);
  });
  count_folded_copies(pf, &res);
  return res;
}

}  // namespace dtsim::sim
