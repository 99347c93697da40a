#include "sim/report/chakra_export.hpp"

#include <cmath>
#include <cstdint>
#include <map>

#include "traces/chakra_et_writer.hpp"
#include "traces/error.hpp"

namespace dtsim::sim {

std::vector<ExecGraph> chakra_graphs(const Lowered& low, const EngineResult& res) {
  const TaskGraph& g = low.graph;
  DTSIM_ASSERT(!g.edges_released(), "chakra export needs the task graph's dependency lists");
  const std::size_t nranks = low.ranks.size();
  DTSIM_ASSERT(nranks == low.sim_index_of.size(), "chakra export needs every rank simulated (an unfolded run)");
  const auto& tasks = g.tasks();
  DTSIM_ASSERT(res.start_s.size() == tasks.size() && res.end_s.size() == tasks.size(), "engine times per task");
  std::vector<ExecGraph> out(nranks);
  for (std::size_t r = 0; r < nranks; ++r) {
    out[r].rank = low.ranks[r].global_rank;
    out[r].format = "chakra-et";
    out[r].source = "dtsim." + std::to_string(out[r].rank) + ".et";
  }
  auto add = [&](std::size_t r, ExecNode n) {
    const std::size_t id = out[r].nodes.size();
    n.id = static_cast<std::int64_t>(id);
    out[r].nodes.push_back(std::move(n));
    return id;
  };
  auto ns = [](double s) { return static_cast<std::int64_t>(std::llround(s * 1e9)); };
  const auto ntasks = tasks.size();
  // Node of each task on its own rank; for a flow, also its receive node on the peer's rank.
  std::vector<std::size_t> node_of(ntasks), recv_of(ntasks, SIZE_MAX);
  for (std::size_t i = 0; i < ntasks; ++i) {
    const Task& t = tasks[i];
    DTSIM_ASSERT(!t.mirror, "chakra export of a folded run (mirror flow)");
    const auto r = static_cast<std::size_t>(t.rank);
    ExecNode n;
    n.name = g.names()[static_cast<std::size_t>(t.name)];
    n.duration_ns = t.kind == TaskKind::JOIN ? 0 : ns(res.end_s[i] - res.start_s[i]);
    switch (t.kind) {
      case TaskKind::COMPUTE:
        n.kind = ExecNodeKind::COMPUTE;
        n.gpu = true;
        n.flops = t.flops;
        break;
      case TaskKind::DELAY:
      case TaskKind::JOIN: n.kind = ExecNodeKind::COMPUTE; break;
      case TaskKind::FLOW: {
        DTSIM_ASSERT(t.peer >= 0, "flow without a peer");
        const auto to = static_cast<std::size_t>(t.peer);
        n.kind = ExecNodeKind::COMMUNICATION;
        n.gpu = true;
        n.comm.op = "send";
        n.comm.bytes = t.bytes;
        n.peer = out[to].rank;
        n.tag = static_cast<std::int64_t>(i);
        ExecNode rv = n;
        rv.comm.op = "recv";
        rv.peer = out[r].rank;
        recv_of[i] = add(to, std::move(rv));
        break;
      }
    }
    node_of[i] = add(r, std::move(n));
  }
  // Dependencies. A cross-rank edge that is not a transfer's own becomes a zero-byte send/receive pair (one per
  // task and receiving rank).
  std::map<std::pair<std::size_t, std::size_t>, std::size_t> sync;  // (task, rank) -> receive node
  std::int64_t next_tag = static_cast<std::int64_t>(ntasks);
  auto completion_on = [&](std::size_t u, std::size_t rank) -> std::size_t {
    const Task& t = tasks[u];
    if (static_cast<std::size_t>(t.rank) == rank) return node_of[u];
    if (t.kind == TaskKind::FLOW && static_cast<std::size_t>(t.peer) == rank) return recv_of[u];
    const auto key = std::make_pair(u, rank);
    if (auto it = sync.find(key); it != sync.end()) return it->second;
    const auto from = static_cast<std::size_t>(t.rank);
    ExecNode s;
    s.name = "sync " + g.names()[static_cast<std::size_t>(t.name)];
    s.kind = ExecNodeKind::COMMUNICATION;
    s.comm.op = "send";
    s.duration_ns = 0;
    s.peer = out[rank].rank;
    s.tag = next_tag;
    s.data_deps.push_back(static_cast<std::int64_t>(node_of[u]));
    ExecNode rv = s;
    rv.comm.op = "recv";
    rv.peer = out[from].rank;
    rv.data_deps.clear();
    ++next_tag;
    add(from, std::move(s));
    const std::size_t id = add(rank, std::move(rv));
    sync.emplace(key, id);
    return id;
  };
  for (std::size_t u = 0; u < ntasks; ++u)
    for (const std::int32_t* it = g.succ_begin(static_cast<std::int32_t>(u));
         it != g.succ_end(static_cast<std::int32_t>(u)); ++it) {
      const auto v = static_cast<std::size_t>(*it);
      const auto rv = static_cast<std::size_t>(tasks[v].rank);
      const std::size_t dep = completion_on(u, rv);
      out[rv].nodes[node_of[v]].data_deps.push_back(static_cast<std::int64_t>(dep));
    }
  return out;
}

std::vector<std::pair<std::string, std::string>> chakra_files(const Lowered& low, const EngineResult& res,
                                                              const std::string& prefix) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const ExecGraph& eg : chakra_graphs(low, res))
    files.emplace_back(prefix + "." + std::to_string(eg.rank) + ".et", chakra_et_bytes(eg));
  return files;
}

}  // namespace dtsim::sim
