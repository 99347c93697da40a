// The times of an all-to-all lowered as one task per member (Exchange, task_graph.hpp) on the analytic network: each
// piece alone on its route (latency + bytes / bottleneck bandwidth, Platform), a member's pieces one after another on
// each of its lanes after its start-up latency. Shared by the analytic engine (task durations, link statistics) and
// the trace's link counters, so both see the pieces the one-FLOW-per-piece lowering would have had.
#pragma once
#include <algorithm>
#include <limits>
#include <vector>

#include "sim/model/platform.hpp"
#include "sim/model/task_graph.hpp"

namespace dtsim::sim {

/// Piece (from, to) of exchange `x` with only what routes and times it (rank, peer, path, payload): Platform's route,
/// latency and bandwidth of it equal those of exchange_piece's, without reading the member's task (the engine's
/// per-link sweep visits each piece once per link it crosses, in an order that would scatter those reads).
inline Task exchange_flow(const Exchange& x, int from, int to) {
  Task f;
  f.kind = TaskKind::FLOW;
  f.rank = x.ranks[static_cast<std::size_t>(from)];
  f.peer = x.ranks[static_cast<std::size_t>(to)];
  f.path = x.path(from, to);
  f.bytes = x.bytes(from, to);
  return f;
}

/// The FLOW task piece (from, to) of exchange `x` stands for: exchange_flow's, with the member task's stream, phase,
/// name and position.
inline Task exchange_piece(const Exchange& x, const std::vector<Task>& tasks, int from, int to) {
  Task f = tasks[static_cast<std::size_t>(x.tasks[static_cast<std::size_t>(from)])];
  const Task route = exchange_flow(x, from, to);
  f.kind = route.kind;
  f.duration_s = 0;
  f.rank = route.rank;
  f.peer = route.peer;
  f.path = route.path;
  f.mirror = false;
  f.bytes = route.bytes;
  return f;
}

/// Times exchange `x` whose members start at `start_s` (per member; the rendezvous, or later where a member's host
/// issues the call later): returns each member's end (its start-up latency, then the later of its last piece sent and
/// the last piece addressed to it arriving, and with `receive_bound` no earlier than its down-links could take the
/// pieces addressed to it) and calls `each(from, to, flow, start_s, end_s, route)` for every piece,
/// in member order and, within a member, in its sending order (Exchange::target).
template <class Each>
std::vector<double> time_exchange(const Exchange& x, const std::vector<Task>& tasks, const Platform& pf,
                                  const std::vector<double>& start_s, Each&& each, std::vector<int>* route,
                                  bool receive_bound = true) {
  const int n = x.n();
  std::vector<double> end(start_s);
  // The receive side (TaskGraph::exchange_receive_bound): the pieces addressed to a member that end on one of its
  // down-links (its route's last link: NVLink for a piece from its node, its NIC for the others) cannot arrive faster
  // than that link takes them, one after another from the first one's start: its end is at least that start + their
  // lowest route latency + the sum of their bytes / that link's bandwidth. A lower bound on what the flow network
  // gives (where a route's bottleneck is elsewhere its pieces are slower still). The sends alone leave the receives
  // unshared: under skewed routing the senders fall out of step and a loaded member's NIC down-link took up to 56
  // pieces at full rate at once (DeepSeek-V3, 2,048 H100s, skew:1.0: 81.7 s against 125.1 s on the flow network).
  // Keyed by the sender's lane instead, a member's NVLink and NIC pieces were summed on one link where the lowering
  // chains both on one lane, and the bound overshot the flow network (two nodes of four GPUs, skewed: +4.3%).
  struct Receive {
    int link = -1;  ///< the down-link; -2: pieces of this kind ended on different links (an explicit graph): no bound
    double first_s = std::numeric_limits<double>::infinity(), latency_s = std::numeric_limits<double>::infinity();
    double busy_s = 0;
  };
  std::vector<Receive> recv(receive_bound ? 2 * static_cast<std::size_t>(n) : 0);
  for (int j = 0; j < n; ++j) {
    const auto& member = tasks[static_cast<std::size_t>(x.tasks[static_cast<std::size_t>(j)])];
    const double t0 = start_s[static_cast<std::size_t>(j)] + std::max(0.0, member.duration_s);
    double lane[2] = {t0, t0};
    for (int k = 0; k + 1 < n; ++k) {
      const int i = x.target(j, k);
      if (!x.has_piece(j, i)) continue;
      const Task f = exchange_piece(x, tasks, j, i);
      pf.route_into(f, route);
      double& at = lane[x.lane(j, i)];
      const double start = at;
      const double lat = pf.latency_s(*route), busy = f.bytes / pf.bandwidth_Bps(*route);
      at = start + (lat + busy);
      if (receive_bound) {
        Receive& rc = recv[2 * static_cast<std::size_t>(i) + (f.path == Path::INTRA_NODE ? 0 : 1)];
        const int down = route->empty() ? -2 : route->back();
        if (rc.link == -1) rc.link = down;
        if (rc.link == down && down >= 0) {
          rc.first_s = std::min(rc.first_s, start);
          rc.latency_s = std::min(rc.latency_s, lat);
          rc.busy_s += f.bytes / pf.link_bandwidth_Bps(down);
        } else {
          rc.link = -2;
        }
      }
      end[static_cast<std::size_t>(i)] = std::max(end[static_cast<std::size_t>(i)], at);
      each(j, i, f, start, at, *route);
    }
    end[static_cast<std::size_t>(j)] = std::max({end[static_cast<std::size_t>(j)], lane[0], lane[1]});
  }
  for (std::size_t k = 0; k < recv.size(); ++k)
    if (recv[k].link >= 0) {
      double& e = end[k / 2];
      e = std::max(e, recv[k].first_s + recv[k].latency_s + recv[k].busy_s);
    }
  return end;
}

}  // namespace dtsim::sim
