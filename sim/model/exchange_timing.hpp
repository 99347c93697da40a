// The times of an all-to-all lowered as one task per member (Exchange, task_graph.hpp) on the analytic network: each
// piece alone on its route (latency + bytes / bottleneck bandwidth, Platform), a member's pieces one after another on
// each of its lanes after its start-up latency. Shared by the analytic engine (task durations, link statistics) and
// the trace's link counters, so both see the pieces the one-FLOW-per-piece lowering would have had.
#pragma once
#include <algorithm>
#include <vector>

#include "sim/model/platform.hpp"
#include "sim/model/task_graph.hpp"

namespace dtsim::sim {

/// The FLOW task piece (from, to) of exchange `x` stands for (the member task's stream, phase, name and position).
inline Task exchange_piece(const Exchange& x, const std::vector<Task>& tasks, int from, int to) {
  Task f = tasks[static_cast<std::size_t>(x.tasks[static_cast<std::size_t>(from)])];
  f.kind = TaskKind::FLOW;
  f.duration_s = 0;
  f.rank = x.ranks[static_cast<std::size_t>(from)];
  f.peer = x.ranks[static_cast<std::size_t>(to)];
  f.path = x.path(from, to);
  f.mirror = false;
  f.bytes = x.bytes[x.at(from, to)];
  return f;
}

/// Times exchange `x` from its members' common start: returns each member's duration (its start-up latency, then the
/// later of its last piece sent and the last piece addressed to it arriving) and calls
/// `each(from, to, flow, start_offset_s, end_offset_s, route)` for every piece, in member order and, within a member,
/// in its sending order (round r = 1 .. n - 1: to member from + r).
template <class Each>
std::vector<double> time_exchange(const Exchange& x, const std::vector<Task>& tasks, const Platform& pf, Each&& each,
                                  std::vector<int>* route) {
  const int n = x.n();
  std::vector<double> received(static_cast<std::size_t>(n), 0.0), sent(static_cast<std::size_t>(n), 0.0);
  for (int j = 0; j < n; ++j) {
    const double startup =
        std::max(0.0, tasks[static_cast<std::size_t>(x.tasks[static_cast<std::size_t>(j)])].duration_s);
    double lane[2] = {startup, startup};
    for (int r = 1; r < n; ++r) {
      const int i = (j + r) % n;
      if (!x.has_piece(j, i)) continue;
      const Task f = exchange_piece(x, tasks, j, i);
      pf.route_into(f, route);
      double& at = lane[x.lane(j, i)];
      const double start = at;
      at = start + (pf.latency_s(*route) + f.bytes / pf.bandwidth_Bps(f));
      received[static_cast<std::size_t>(i)] = std::max(received[static_cast<std::size_t>(i)], at);
      each(j, i, f, start, at, *route);
    }
    sent[static_cast<std::size_t>(j)] = std::max(lane[0], lane[1]);
  }
  for (int j = 0; j < n; ++j)
    sent[static_cast<std::size_t>(j)] =
        std::max(sent[static_cast<std::size_t>(j)], received[static_cast<std::size_t>(j)]);
  return sent;
}

}  // namespace dtsim::sim
