#include "sim/replay/exec_replay.hpp"

#include <algorithm>
#include <map>
#include <regex>
#include <tuple>
#include <unordered_map>

#include "traces/error.hpp"

namespace dtsim::sim {

ExecReplay replay_exec_graphs(const std::vector<ExecGraph>& graphs, const ExecReplayOptions& opt) {
  ExecReplay out;
  // Global node indexes: graph k's nodes start at base[k].
  std::vector<std::size_t> base(graphs.size() + 1, 0);
  for (std::size_t k = 0; k < graphs.size(); ++k) base[k + 1] = base[k] + graphs[k].nodes.size();
  const std::size_t n = base.back();
  out.nodes = n;
  std::vector<int> rank_of_graph(graphs.size());
  for (std::size_t k = 0; k < graphs.size(); ++k)
    rank_of_graph[k] = graphs[k].rank >= 0 ? graphs[k].rank : static_cast<int>(k);
  std::vector<std::regex> patterns;
  for (const auto& ks : opt.kernel_scales) patterns.emplace_back(ks.pattern);

  // Durations after the edits.
  std::vector<double> dur(n, 0.0);
  std::vector<std::size_t> graph_of(n);
  for (std::size_t k = 0; k < graphs.size(); ++k)
    for (std::size_t i = 0; i < graphs[k].nodes.size(); ++i) {
      const ExecNode& e = graphs[k].nodes[i];
      const std::size_t g = base[k] + i;
      graph_of[g] = k;
      double d = e.duration_ns >= 0 ? static_cast<double>(e.duration_ns) * 1e-9 : -1;
      if (e.kind == ExecNodeKind::COMMUNICATION) {
        if (opt.comm_bandwidth_Bps > 0 && e.comm.bytes > 0)
          d = opt.comm_alpha_s + e.comm.bytes / opt.comm_bandwidth_Bps;
        if (d >= 0) d *= opt.comm_time_scale;
      } else if (d >= 0 && e.gpu) {
        for (std::size_t p = 0; p < patterns.size(); ++p)
          if (std::regex_search(e.name, patterns[p])) {
            d *= opt.kernel_scales[p].factor;
            break;
          }
      }
      if (d < 0) {
        ++out.untimed;
        d = 0;
      }
      dur[g] = d;
    }

  // Units: a node alone, a matched send/receive pair, or a collective instance across ranks.
  std::vector<std::size_t> unit_of(n);
  std::vector<std::vector<std::size_t>> members;
  auto new_unit = [&](std::vector<std::size_t> m) {
    for (std::size_t g : m) unit_of[g] = members.size();
    members.push_back(std::move(m));
  };
  std::map<std::tuple<int, int, std::int64_t>, std::vector<std::size_t>> sends, recvs;  // (from, to, tag)
  std::map<std::tuple<std::string, std::string, int>, std::vector<std::size_t>> colls;  // (group, op, occurrence)
  for (std::size_t k = 0; k < graphs.size(); ++k) {
    std::map<std::pair<std::string, std::string>, int> seen;
    for (std::size_t i = 0; i < graphs[k].nodes.size(); ++i) {
      const ExecNode& e = graphs[k].nodes[i];
      const std::size_t g = base[k] + i;
      if (e.kind == ExecNodeKind::COMMUNICATION && e.comm.op == "send" && e.peer >= 0)
        sends[{rank_of_graph[k], e.peer, e.tag}].push_back(g);
      else if (e.kind == ExecNodeKind::COMMUNICATION && e.comm.op == "recv" && e.peer >= 0)
        recvs[{e.peer, rank_of_graph[k], e.tag}].push_back(g);
      else if (e.kind == ExecNodeKind::COMMUNICATION && !e.comm.op.empty() && e.comm.op != "send" &&
               e.comm.op != "recv")
        colls[{e.comm.process_group, e.comm.op, seen[{e.comm.process_group, e.comm.op}]++}].push_back(g);
      else new_unit({g});
    }
  }
  for (auto& [key, ss] : sends) {
    auto it = recvs.find(key);
    std::vector<std::size_t>* rs = it == recvs.end() ? nullptr : &it->second;
    // Pairs in order of appearance; the rest run alone.
    for (std::size_t j = 0; j < ss.size(); ++j) {
      if (rs && j < rs->size()) {
        new_unit({ss[j], (*rs)[j]});
        ++out.transfers;
      } else {
        new_unit({ss[j]});
        ++out.unmatched_p2p;
      }
    }
    if (rs)
      for (std::size_t j = ss.size(); j < rs->size(); ++j) {
        new_unit({(*rs)[j]});
        ++out.unmatched_p2p;
      }
    if (it != recvs.end()) recvs.erase(it);
  }
  for (auto& [key, rs] : recvs)
    for (std::size_t g : rs) {
      new_unit({g});
      ++out.unmatched_p2p;
    }
  for (auto& [key, cs] : colls) {
    new_unit(cs);
    ++out.collectives;
  }

  // Dependencies between units (within a rank: ids -> node indexes).
  const std::size_t nu = members.size();
  std::vector<std::vector<std::size_t>> succ(n);
  std::vector<std::size_t> pending(nu, 0);
  for (std::size_t k = 0; k < graphs.size(); ++k) {
    std::unordered_map<std::int64_t, std::size_t> index;
    index.reserve(graphs[k].nodes.size());
    for (std::size_t i = 0; i < graphs[k].nodes.size(); ++i) index.emplace(graphs[k].nodes[i].id, base[k] + i);
    for (std::size_t i = 0; i < graphs[k].nodes.size(); ++i) {
      const ExecNode& e = graphs[k].nodes[i];
      const std::size_t g = base[k] + i;
      for (const auto* deps : {&e.data_deps, &e.ctrl_deps})
        for (std::int64_t d : *deps) {
          if (d == e.id || (deps == &e.ctrl_deps && d > e.id)) {  // on itself, or a later control: dropped
            ++out.forward_ctrl_deps;
            continue;
          }
          auto it = index.find(d);
          if (it == index.end()) {  // as Chakra's feeder: a dependency on a node not in the file is dropped
            ++out.dangling_deps;
            continue;
          }
          succ[it->second].push_back(g);
          ++pending[unit_of[g]];
        }
    }
  }
  // Kahn over units: a unit starts when all its members' dependencies have ended.
  std::vector<double> ready(nu, 0.0), end_of(n, 0.0);
  std::vector<std::size_t> queue;
  for (std::size_t u = 0; u < nu; ++u)
    if (pending[u] == 0) queue.push_back(u);
  std::size_t done = 0;
  while (!queue.empty()) {
    const std::size_t u = queue.back();
    queue.pop_back();
    ++done;
    double d = 0;
    for (std::size_t g : members[u]) d = std::max(d, dur[g]);
    if (members[u].size() == 2 &&
        graphs[graph_of[members[u][0]]].nodes[members[u][0] - base[graph_of[members[u][0]]]].comm.op == "send")
      d = dur[members[u][0]] > 0 ? dur[members[u][0]] : dur[members[u][1]];  // a transfer: the send's time
    const double end = ready[u] + d;
    for (std::size_t g : members[u]) {
      end_of[g] = end;
      for (std::size_t s : succ[g]) {
        const std::size_t v = unit_of[s];
        ready[v] = std::max(ready[v], end);
        if (--pending[v] == 0) queue.push_back(v);
      }
    }
  }
  if (done != nu) {
    for (std::size_t u = 0; u < nu; ++u)
      if (pending[u] > 0) {
        const std::size_t g = members[u].front(), k = graph_of[g];
        const ExecNode& e = graphs[k].nodes[g - base[k]];
        throw FormatError(graphs[k].source + ": node " + std::to_string(e.id) + " ('" + e.name +
                          "') never runs: a dependency cycle, or transfers and collectives waiting on each other");
      }
  }
  out.rank_span_s.assign(graphs.size(), 0.0);
  for (std::size_t g = 0; g < n; ++g) out.rank_span_s[graph_of[g]] = std::max(out.rank_span_s[graph_of[g]], end_of[g]);
  for (double s : out.rank_span_s) out.span_s = std::max(out.span_s, s);
  return out;
}

}  // namespace dtsim::sim
