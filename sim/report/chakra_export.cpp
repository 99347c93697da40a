#include "sim/report/chakra_export.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <queue>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "traces/error.hpp"

namespace dtsim::sim {
namespace {

enum class UnitKind : std::uint8_t { COMP, HOST, COLL, SEND, RECV };

/// One exported node before numbering.
struct Unit {
  UnitKind kind = UnitKind::COMP;
  int rank = -1;  ///< simulated rank
  Stream stream = Stream::COMPUTE;
  std::int32_t task = -1;    ///< COMP: the task; SEND/RECV: the flow; COLL: the rendezvous join; HOST: the gated task
  std::int32_t record = -1;  ///< COLL: index into Lowered::collectives
  double end_s = 0;          ///< simulated end
  double ready_s = 0;        ///< max of the dependencies' ends (filled once dependencies are known)
  double start_s = 0;        ///< COMP/SEND: simulated start (SEND: of its delay)
  std::vector<std::int32_t> deps;  ///< unit indexes, same rank
};

const char* kind_name(TaskKind k) {
  switch (k) {
    case TaskKind::COMPUTE: return "compute";
    case TaskKind::DELAY: return "delay";
    case TaskKind::FLOW: return "flow";
    case TaskKind::JOIN: return "join";
  }
  return "?";
}

std::string task_label(const TaskGraph& g, const Task& t) {
  std::string s = t.name >= 0 ? g.names()[static_cast<std::size_t>(t.name)] : std::string(kind_name(t.kind));
  if (t.layer >= 0) s += " L" + std::to_string(t.layer);
  if (t.microbatch >= 0) s += " mb" + std::to_string(t.microbatch);
  return s;
}

}  // namespace

ChakraExport chakra_export(const Lowered& low, const EngineResult& res) {
  const TaskGraph& g = low.graph;
  const auto& tasks = g.tasks();
  const std::size_t n = tasks.size();
  const int nranks = static_cast<int>(low.ranks.size());
  DTSIM_ASSERT(!g.edges_released(), "chakra_export needs the graph's dependencies");
  DTSIM_ASSERT(res.end_s.size() == n && res.start_s.size() == n, "engine times do not match the graph");
  if (static_cast<int>(low.sim_index_of.size()) != nranks)
    throw ConfigError("the Chakra export needs every rank simulated (--fold none): " + std::to_string(nranks) +
                      " simulated ranks stand for " + std::to_string(low.sim_index_of.size()));
  DTSIM_ASSERT(low.collectives_recorded, "chakra_export needs SimOptions::record_collectives");

  // 1. Collective membership of every task.
  std::vector<std::int32_t> coll_of(n, -1);
  std::vector<std::map<int, int>> pos_in(low.collectives.size());  // record -> (simulated rank -> member index)
  for (std::size_t c = 0; c < low.collectives.size(); ++c) {
    const auto& rec = low.collectives[c];
    for (std::int32_t t = rec.first_task; t < rec.end_task; ++t)
      coll_of[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(c);
    for (std::size_t i = 0; i < rec.members.size(); ++i) pos_in[c][rec.members[i]] = static_cast<int>(i);
  }
  // Predecessor lists.
  std::vector<std::vector<std::int32_t>> preds(n);
  for (std::size_t t = 0; t < n; ++t)
    for (const std::int32_t* s = g.succ_begin(static_cast<std::int32_t>(t));
         s != g.succ_end(static_cast<std::int32_t>(t)); ++s)
      preds[static_cast<std::size_t>(*s)].push_back(static_cast<std::int32_t>(t));
  auto is_p2p = [&](std::size_t t) {
    const Task& k = tasks[t];
    return coll_of[t] < 0 && k.kind == TaskKind::FLOW;
  };

  // 2. Units.
  std::vector<Unit> units;
  std::vector<std::int32_t> unit_of(n, -1), recv_of(n, -1);
  std::vector<std::vector<std::int32_t>> coll_units(low.collectives.size());
  for (std::size_t c = 0; c < low.collectives.size(); ++c) {
    const auto& rec = low.collectives[c];
    for (std::size_t i = 0; i < rec.members.size(); ++i) {
      Unit u;
      u.kind = UnitKind::COLL;
      u.rank = rec.members[i];
      u.task = rec.first_task;
      u.record = static_cast<std::int32_t>(c);
      u.stream = tasks[static_cast<std::size_t>(rec.first_task)].stream;
      u.end_s = res.end_s[static_cast<std::size_t>(rec.done[i])];
      coll_units[c].push_back(static_cast<std::int32_t>(units.size()));
      units.push_back(u);
    }
  }
  // The unit of one task, with the task's rank, stream and simulated times.
  auto task_unit = [&](UnitKind kind, std::size_t t) {
    Unit u;
    u.kind = kind;
    u.rank = tasks[t].rank;
    u.stream = tasks[t].stream;
    u.task = static_cast<std::int32_t>(t);
    u.end_s = res.end_s[t];
    u.start_s = res.start_s[t];
    return u;
  };
  for (std::size_t t = 0; t < n; ++t) {
    const Task& k = tasks[t];
    if (coll_of[t] >= 0) continue;
    if (k.kind == TaskKind::FLOW) {
      if (k.mirror || k.peer < 0 || k.peer == k.rank)
        throw ConfigError(
            "the Chakra export needs every rank simulated (--fold none): a transfer goes to a folded "
            "rank's mirror");
      const Unit s = task_unit(UnitKind::SEND, t);
      unit_of[t] = static_cast<std::int32_t>(units.size());
      units.push_back(s);
      Unit r = s;
      r.kind = UnitKind::RECV;
      r.rank = k.peer;
      recv_of[t] = static_cast<std::int32_t>(units.size());
      units.push_back(r);
    } else if (k.kind == TaskKind::COMPUTE || k.kind == TaskKind::DELAY) {
      unit_of[t] = static_cast<std::int32_t>(units.size());
      units.push_back(task_unit(UnitKind::COMP, t));
    }
  }
  // A transfer's start-up DELAY (its only successor is the flow, on the same rank) is part of the send.
  for (std::size_t t = 0; t < n; ++t) {
    const Task& k = tasks[t];
    if (coll_of[t] >= 0 || k.kind != TaskKind::DELAY) continue;
    const std::int32_t* b = g.succ_begin(static_cast<std::int32_t>(t));
    if (g.succ_end(static_cast<std::int32_t>(t)) - b != 1) continue;
    const auto f = static_cast<std::size_t>(*b);
    // (A blocking transfer also waits for its receiver, a predecessor on the peer's rank: the receive node's.)
    if (!is_p2p(f) || tasks[f].rank != k.rank) continue;
    if (std::count_if(preds[f].begin(), preds[f].end(), [&](std::int32_t q) {
          return tasks[static_cast<std::size_t>(q)].rank != tasks[f].peer ||
                 tasks[static_cast<std::size_t>(q)].rank == k.rank;
        }) != 1)
      continue;
    Unit& s = units[static_cast<std::size_t>(unit_of[f])];
    s.start_s = std::min(s.start_s, res.start_s[t]);
    units[static_cast<std::size_t>(unit_of[t])].rank = -1;  // dropped
    unit_of[t] = unit_of[f];
  }

  // 3. Dependencies, in a topological order of the tasks (joins pass their predecessors' nodes on).
  std::vector<std::vector<std::int32_t>> outs(n);  // contracted joins: the nodes (on the join's rank) they stand for
  auto fail = [&](std::size_t a, std::size_t b) {
    throw ConfigError("the Chakra export cannot express a dependency from rank " +
                      std::to_string(low.ranks[static_cast<std::size_t>(tasks[a].rank)].global_rank) + " ('" +
                      task_label(g, tasks[a]) + "') to rank " +
                      std::to_string(low.ranks[static_cast<std::size_t>(tasks[b].rank)].global_rank) + " ('" +
                      task_label(g, tasks[b]) + "'): neither a collective nor a transfer");
  };
  // The nodes on rank `r` that task p's end stands for.
  auto as_seen = [&](std::size_t p, int r, std::size_t v, std::vector<std::int32_t>& into) {
    const Task& k = tasks[p];
    if (coll_of[p] >= 0) {
      const auto c = static_cast<std::size_t>(coll_of[p]);
      const auto it = pos_in[c].find(r);
      if (it == pos_in[c].end()) fail(p, v);
      into.push_back(coll_units[c][static_cast<std::size_t>(it->second)]);
    } else if (unit_of[p] >= 0) {
      if (k.rank == r) into.push_back(unit_of[p]);
      else if (k.kind == TaskKind::FLOW && k.peer == r) into.push_back(recv_of[p]);
      else fail(p, v);
    } else {  // a contracted join
      if (k.rank != r) fail(p, v);
      into.insert(into.end(), outs[p].begin(), outs[p].end());
    }
  };
  {
    std::vector<std::int32_t> pending = g.pred_count();
    std::vector<std::int32_t> ready;
    for (std::size_t t = 0; t < n; ++t)
      if (pending[t] == 0) ready.push_back(static_cast<std::int32_t>(t));
    std::size_t done = 0;
    while (!ready.empty()) {
      const auto v = static_cast<std::size_t>(ready.back());
      ready.pop_back();
      ++done;
      const Task& k = tasks[v];
      for (std::int32_t p32 : preds[v]) {
        const auto p = static_cast<std::size_t>(p32);
        if (coll_of[v] >= 0) {
          const auto c = static_cast<std::size_t>(coll_of[v]);
          if (coll_of[p] == coll_of[v]) continue;  // inside the collective
          // Into the rendezvous: a dependency of the predecessor's own member node (the receiver of a transfer).
          int r = k.rank;
          if (static_cast<std::int32_t>(v) == low.collectives[c].first_task) {
            r = tasks[p].rank;
            if (is_p2p(p) && !pos_in[c].count(r)) r = tasks[p].peer;
          }
          const auto it = pos_in[c].find(r);
          if (it == pos_in[c].end()) fail(p, v);
          as_seen(p, r, v, units[static_cast<std::size_t>(coll_units[c][static_cast<std::size_t>(it->second)])].deps);
        } else if (unit_of[v] >= 0) {
          if (unit_of[p] == unit_of[v]) continue;  // a send's own delay
          // A blocking transfer's rendezvous (calibration p2p_sync): it waits for the receiver to post its receive,
          // which is the receive node's own dependency on the receiver's rank.
          if (k.kind == TaskKind::FLOW && tasks[p].rank == k.peer && tasks[p].rank != k.rank) {
            as_seen(p, k.peer, v, units[static_cast<std::size_t>(recv_of[v])].deps);
            continue;
          }
          as_seen(p, k.rank, v, units[static_cast<std::size_t>(unit_of[v])].deps);
        } else {
          as_seen(p, k.rank, v, outs[v]);
        }
      }
      if (unit_of[v] < 0 && coll_of[v] < 0) {
        auto& o = outs[v];
        std::sort(o.begin(), o.end());
        o.erase(std::unique(o.begin(), o.end()), o.end());
      }
      for (const std::int32_t* s = g.succ_begin(static_cast<std::int32_t>(v));
           s != g.succ_end(static_cast<std::int32_t>(v)); ++s)
        if (--pending[static_cast<std::size_t>(*s)] == 0) ready.push_back(*s);
    }
    DTSIM_ASSERT(done == n, "the task graph has a cycle");
  }

  // 4. Host issue (release times): a chain of CPU nodes per rank, each ending at a released task's release.
  if (g.has_releases()) {
    std::vector<std::vector<std::pair<double, std::int32_t>>> rel(static_cast<std::size_t>(nranks));
    for (std::size_t t = 0; t < n; ++t) {
      const double r = g.release_s(static_cast<std::int32_t>(t));
      if (r > 0 && coll_of[t] < 0 && unit_of[t] >= 0)
        rel[static_cast<std::size_t>(tasks[t].rank)].emplace_back(r, static_cast<std::int32_t>(t));
    }
    for (int r = 0; r < nranks; ++r) {
      auto& list = rel[static_cast<std::size_t>(r)];
      std::sort(list.begin(), list.end());
      std::int32_t prev = -1;
      for (const auto& [at, t] : list) {
        Unit h;
        h.kind = UnitKind::HOST;
        h.rank = r;
        h.stream = Stream::HOST;
        h.task = t;
        h.end_s = at;
        if (prev >= 0) h.deps.push_back(prev);
        prev = static_cast<std::int32_t>(units.size());
        units.push_back(h);
        units[static_cast<std::size_t>(unit_of[static_cast<std::size_t>(t)])].deps.push_back(prev);
      }
    }
  }

  // 5. Ready times and durations.
  for (auto& u : units) {
    std::sort(u.deps.begin(), u.deps.end());
    u.deps.erase(std::unique(u.deps.begin(), u.deps.end()), u.deps.end());
  }
  for (auto& u : units) {
    if (u.kind == UnitKind::RECV) u.deps.clear();
    double ready = 0;
    for (auto d : u.deps) ready = std::max(ready, units[static_cast<std::size_t>(d)].end_s);
    u.ready_s = ready;
  }
  std::vector<double> rendezvous(low.collectives.size(), 0);
  for (std::size_t c = 0; c < low.collectives.size(); ++c) {
    for (auto ui : coll_units[c]) rendezvous[c] = std::max(rendezvous[c], units[static_cast<std::size_t>(ui)].ready_s);
    for (auto ui : coll_units[c]) units[static_cast<std::size_t>(ui)].ready_s = rendezvous[c];
  }

  // 6. Communicator groups: one per member set (global ranks, sorted), ids from 1 in order of first use.
  ChakraExport ex;
  std::map<std::vector<int>, std::string> group_id;
  std::vector<std::string> group_of(low.collectives.size());
  for (std::size_t c = 0; c < low.collectives.size(); ++c) {
    std::vector<int> m;
    for (int si : low.collectives[c].members) m.push_back(low.ranks[static_cast<std::size_t>(si)].global_rank);
    std::sort(m.begin(), m.end());
    auto [it, fresh] = group_id.emplace(m, std::to_string(group_id.size() + 1));
    if (fresh) ex.groups.emplace_back(it->second, m);
    group_of[c] = it->second;
  }

  // 7. Nodes per rank, numbered in a topological order (ready time, then the task that identifies the node).
  std::vector<std::vector<std::int32_t>> by_rank(static_cast<std::size_t>(nranks));
  for (std::size_t i = 0; i < units.size(); ++i)
    if (units[i].rank >= 0) by_rank[static_cast<std::size_t>(units[i].rank)].push_back(static_cast<std::int32_t>(i));
  std::vector<std::int64_t> id_of(units.size(), -1);
  std::map<std::pair<int, int>, std::int64_t> tags;  // (src, dst) global ranks -> transfers so far
  std::vector<std::int64_t> tag_of(n, -1);
  for (std::size_t t = 0; t < n; ++t)
    if (is_p2p(t)) {
      const int a = low.ranks[static_cast<std::size_t>(tasks[t].rank)].global_rank;
      const int b = low.ranks[static_cast<std::size_t>(tasks[t].peer)].global_rank;
      tag_of[t] = tags[{a, b}]++;
    }
  ex.ranks.resize(static_cast<std::size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    const auto& mine = by_rank[static_cast<std::size_t>(r)];
    const int grank = low.ranks[static_cast<std::size_t>(r)].global_rank;
    ExecGraph& eg = ex.ranks[static_cast<std::size_t>(grank)];
    eg.rank = grank;
    eg.format = "chakra-et";
    eg.schema = "0.0.4";
    eg.source = "rank " + std::to_string(grank);
    std::map<std::int32_t, std::vector<std::int32_t>> succ;
    std::map<std::int32_t, int> left;
    for (auto ui : mine) {
      left[ui] = static_cast<int>(units[static_cast<std::size_t>(ui)].deps.size());
      for (auto d : units[static_cast<std::size_t>(ui)].deps) succ[d].push_back(ui);
    }
    using Key = std::tuple<double, int, std::int32_t, std::int32_t>;
    auto key = [&](std::int32_t ui) {
      const Unit& u = units[static_cast<std::size_t>(ui)];
      return Key{u.ready_s, u.kind == UnitKind::HOST ? 0 : 1, u.task, ui};
    };
    std::priority_queue<Key, std::vector<Key>, std::greater<>> q;
    for (auto ui : mine)
      if (left[ui] == 0) q.push(key(ui));
    while (!q.empty()) {
      const std::int32_t ui = std::get<3>(q.top());
      q.pop();
      id_of[static_cast<std::size_t>(ui)] = static_cast<std::int64_t>(eg.nodes.size());
      const Unit& u = units[static_cast<std::size_t>(ui)];
      ExecNode e;
      e.id = id_of[static_cast<std::size_t>(ui)];
      const auto t = static_cast<std::size_t>(u.task);
      const Task& k = tasks[t];
      double dur = std::max(0.0, u.end_s - u.ready_s);
      switch (u.kind) {
        case UnitKind::COMP:
          e.kind = ExecNodeKind::COMPUTE;
          e.name = task_label(g, k);
          e.gpu = k.stream != Stream::HOST;
          if (k.kind == TaskKind::COMPUTE) {
            // num_ops and tensor_size (the kernels' FLOPs and HBM bytes): what ASTRA-sim's roofline mode times a
            // compute node by (Workload::issue_comp: num_ops / roofline(num_ops / tensor_size)).
            e.flops = k.flops;
            for (const auto& kernel : g.kernels(u.task)) e.tensor_bytes += kernel.bytes;
          }
          break;
        case UnitKind::HOST:
          e.kind = ExecNodeKind::COMPUTE;
          e.name = "host issue: " + task_label(g, k);
          e.gpu = false;
          break;
        case UnitKind::COLL: {
          const auto& rec = low.collectives[static_cast<std::size_t>(u.record)];
          e.kind = ExecNodeKind::COMMUNICATION;
          e.name = task_label(g, k);
          e.gpu = true;
          e.comm.op = cost::to_string(rec.kind);
          e.comm.bytes = rec.bytes;
          e.comm.group_size = static_cast<int>(rec.members.size());
          e.comm.process_group = group_of[static_cast<std::size_t>(u.record)];
          break;
        }
        case UnitKind::SEND:
        case UnitKind::RECV:
          e.kind = ExecNodeKind::COMMUNICATION;
          e.name = (u.kind == UnitKind::SEND ? "send: " : "recv: ") + task_label(g, k);
          e.gpu = true;
          e.comm.op = u.kind == UnitKind::SEND ? "send" : "recv";
          e.comm.bytes = k.bytes;
          e.comm.group_size = 2;
          e.comm_src = low.ranks[static_cast<std::size_t>(k.rank)].global_rank;
          e.comm_dst = low.ranks[static_cast<std::size_t>(k.peer)].global_rank;
          e.comm_tag = tag_of[t];
          if (u.kind == UnitKind::RECV) dur = 0;
          break;
      }
      e.duration_ns = std::llround(dur * 1e9);
      for (auto d : u.deps) {
        const auto did = id_of[static_cast<std::size_t>(d)];
        DTSIM_ASSERT(did >= 0, "dependency numbered after its dependent");
        // Every dependency, program order on a stream included, is a data_dep: Chakra's feeder, which ASTRA-sim
        // runs, issues a node once its data_deps are done and does not wait on ctrl_deps (Chakra's PyTorch
        // converter uses those for caller/callee links), so order kept only there let ASTRA-sim start a stream's
        // nodes together (issue Interop: 337.9 ms against dtsim's 369.7 ms on gpt3-1.3b, 16 A100s).
        e.data_deps.push_back(did);
      }
      std::sort(e.data_deps.begin(), e.data_deps.end());
      e.data_deps.erase(std::unique(e.data_deps.begin(), e.data_deps.end()), e.data_deps.end());
      eg.nodes.push_back(std::move(e));
      for (auto s : succ[ui])
        if (--left[s] == 0) q.push(key(s));
    }
    DTSIM_ASSERT(eg.nodes.size() == mine.size(), "rank " << grank << ": a dependency cycle among exported nodes");
  }
  return ex;
}

std::vector<std::pair<std::string, std::string>> chakra_export_files(const ChakraExport& ex,
                                                                     const std::string& prefix) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& g : ex.ranks) files.emplace_back(prefix + "." + std::to_string(g.rank) + ".et", chakra_et_bytes(g));
  files.emplace_back(prefix + ".comm_group.json", chakra_comm_groups_json(ex.groups));
  return files;
}

}  // namespace dtsim::sim
