#include "sim/replay/et_replay.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "traces/error.hpp"

namespace dtsim::sim {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

enum class Role : std::uint8_t { PLAIN, COLL, SEND, RECV };

Role role_of(const ExecNode& n) {
  if (n.kind != ExecNodeKind::COMMUNICATION) return Role::PLAIN;
  if (n.comm.op == "send") return Role::SEND;
  if (n.comm.op == "recv") return Role::RECV;
  return Role::COLL;
}

std::string node_text(const ExecGraph& g, const ExecNode& n) {
  return "rank " + std::to_string(g.rank) + " node " + std::to_string(n.id) + " ('" + n.name + "')";
}

std::string fmt_ms(std::int64_t ns) {
  char b[64];
  std::snprintf(b, sizeof b, "%.3f ms", static_cast<double>(ns) / 1e6);
  return b;
}

}  // namespace

EtWorkload load_et_workload(const std::vector<std::string>& paths, const std::string& comm_groups) {
  namespace fs = std::filesystem;
  if (paths.empty()) throw ConfigError("replay: no Chakra .et file given");
  std::vector<std::string> files;
  std::string groups = comm_groups;
  if (paths.size() == 1 && fs::is_directory(paths[0])) {
    std::vector<std::string> jsons;
    for (const auto& e : fs::directory_iterator(paths[0])) {
      const std::string p = e.path().string();
      if (!e.is_regular_file()) continue;
      if (ends_with(p, ".et") || ends_with(p, ".et.gz")) files.push_back(p);
      else if (ends_with(p, "comm_group.json")) jsons.push_back(p);
    }
    if (files.empty()) throw ConfigError("replay: directory '" + paths[0] + "' holds no .et file");
    if (groups.empty() && jsons.size() == 1) groups = jsons[0];
    if (groups.empty() && jsons.size() > 1)
      throw ConfigError("replay: directory '" + paths[0] +
                        "' holds several *comm_group.json files; name one with "
                        "--comm-groups");
  } else {
    files = paths;
  }
  EtWorkload w;
  std::map<int, std::string> seen;
  for (const auto& f : files) {
    ExecGraph g = import_chakra_et(f);
    // Chakra's converter output has dependencies on ids that are not in the file and control dependencies on the
    // node itself or on later nodes (an operator naming its kernel), which make cycles: dropped and counted.
    std::set<std::int64_t> ids;
    for (const auto& n : g.nodes) ids.insert(n.id);
    for (auto& n : g.nodes) {
      for (auto* deps : {&n.data_deps, &n.ctrl_deps}) {
        const bool ctrl = deps == &n.ctrl_deps;
        std::erase_if(*deps, [&](std::int64_t d) {
          if (!ids.count(d)) return ++w.dropped_missing_deps, true;
          if (d == n.id || (ctrl && d > n.id)) return ++w.dropped_cyclic_deps, true;
          return false;
        });
      }
    }
    if (g.rank < 0) throw FormatError(f + ": no rank in the file name (Chakra's convention is <prefix>.<rank>.et)");
    if (auto [it, fresh] = seen.emplace(g.rank, f); !fresh)
      throw FormatError(f + ": rank " + std::to_string(g.rank) + " is also " + it->second);
    w.ranks.push_back(std::move(g));
  }
  std::sort(w.ranks.begin(), w.ranks.end(), [](const ExecGraph& a, const ExecGraph& b) { return a.rank < b.rank; });
  if (!groups.empty()) {
    w.groups = read_chakra_comm_groups(groups);
    w.groups_source = groups;
  }
  return w;
}

EtTimeline run_et_replay(const EtWorkload& w, const ReplayOptions& o, EtReplayStats* stats_out) {
  o.validate();
  if (o.cpu_gap_scale != 1.0 || o.runtime_scale != 1.0 || o.launch_latency_ns >= 0 || o.collective_group_size > 0 ||
      !o.keep_unexplained_gaps)
    throw ConfigError(
        "replay: --cpu-scale, --runtime-scale, --launch-latency-us, --collective-group and "
        "--no-unexplained-gaps apply to Kineto traces, not to Chakra execution traces");
  EtReplayStats st;
  const std::size_t nr = w.ranks.size();
  std::map<int, std::size_t> index_of_rank;
  for (std::size_t r = 0; r < nr; ++r) index_of_rank[w.ranks[r].rank] = r;
  std::vector<std::regex> regexes;
  for (const auto& k : o.kernel_scales) regexes.emplace_back(k.pattern, std::regex::ECMAScript);

  // Global node numbering; dependencies by position.
  std::vector<std::size_t> base(nr + 1, 0);
  for (std::size_t r = 0; r < nr; ++r) base[r + 1] = base[r] + w.ranks[r].nodes.size();
  const std::size_t total = base[nr];
  std::vector<std::int64_t> dur(total, 0);
  std::vector<Role> role(total, Role::PLAIN);
  std::vector<std::vector<std::size_t>> succ(total);
  std::vector<std::size_t> pending(total, 0);
  std::vector<std::pair<std::size_t, std::size_t>> where(total);  // (rank index, node index)

  // Collectives: (group, k) -> instance; members per group.
  std::map<std::string, std::vector<int>> group_members;
  for (const auto& [id, ranks] : w.groups) group_members[id] = std::vector<int>(ranks.begin(), ranks.end());
  std::map<std::string, std::vector<std::vector<std::size_t>>> issued;  // group -> per rank index: its collectives
  // Sends / receives: (src, dst, tag) -> nodes in issue order.
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::vector<std::size_t>> sends, recvs;

  for (std::size_t r = 0; r < nr; ++r) {
    const ExecGraph& g = w.ranks[r];
    topological_order(g);  // every dependency names a node; acyclic (FormatError otherwise)
    std::map<std::int64_t, std::size_t> pos;
    for (std::size_t i = 0; i < g.nodes.size(); ++i) pos[g.nodes[i].id] = i;
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      const ExecNode& n = g.nodes[i];
      const std::size_t v = base[r] + i;
      where[v] = {r, i};
      role[v] = role_of(n);
      std::int64_t d = std::max<std::int64_t>(0, n.duration_ns);
      ++st.nodes;
      std::set<std::size_t> deps;
      for (auto id : n.ctrl_deps) deps.insert(base[r] + pos.at(id));
      for (auto id : n.data_deps) deps.insert(base[r] + pos.at(id));
      for (auto u : deps) succ[u].push_back(v);
      pending[v] = deps.size();
      switch (role[v]) {
        case Role::PLAIN:
          if (n.kind == ExecNodeKind::COMPUTE) {
            ++st.compute_nodes;
            if (n.gpu)
              for (std::size_t k = 0; k < regexes.size(); ++k)
                if (std::regex_search(n.name, regexes[k])) {
                  const double f = o.kernel_scales[k].factor;
                  if (f != 1.0) {
                    ++st.compute_scaled;
                    d = std::llround(static_cast<double>(d) * f);
                  }
                  break;
                }
          }
          break;
        case Role::COLL: {
          ++st.collective_nodes;
          const std::string grp = n.comm.process_group;
          auto& per_rank = issued[grp];
          per_rank.resize(nr);
          per_rank[r].push_back(v);
          break;
        }
        case Role::SEND:
        case Role::RECV: {
          const bool send = role[v] == Role::SEND;
          (send ? st.sends : st.recvs)++;
          const std::int64_t src = n.comm_src >= 0 ? n.comm_src : (send ? g.rank : -1);
          const std::int64_t dst = n.comm_dst >= 0 ? n.comm_dst : (send ? -1 : g.rank);
          if (src < 0 || dst < 0)
            throw FormatError(g.source + ": " + node_text(g, n) + " has no comm_" + (send ? "dst" : "src") +
                              " attribute (the peer of a " + (send ? "send" : "receive") + ")");
          if ((send ? src : dst) != g.rank)
            throw FormatError(g.source + ": " + node_text(g, n) + " is a " +
                              (send ? "send from rank " : "receive on rank ") + std::to_string(send ? src : dst) +
                              " in rank " + std::to_string(g.rank) + "'s trace");
          (send ? sends : recvs)[{src, dst, n.comm_tag}].push_back(v);
          break;
        }
      }
      if (role[v] == Role::COLL || role[v] == Role::SEND) {
        int members = 2;
        if (role[v] == Role::COLL) {
          const auto it = group_members.find(n.comm.process_group);
          members = it != group_members.end() ? static_cast<int>(it->second.size())
                    : n.comm.group_size > 0   ? n.comm.group_size
                                              : static_cast<int>(nr);
        }
        // Chakra's comm_size of an all-gather is each rank's input; the edits size a collective by its larger buffer
        // (nccl-tests' convention, as Kineto's imports do): the gathered output.
        const double bytes = n.comm.op == "all-gather" && role[v] == Role::COLL ? n.comm.bytes * members : n.comm.bytes;
        const CollectiveEdit ed = edit_collective(n.comm.op, bytes, members, d, o);
        st.collectives_modelled += ed.modelled;
        st.collectives_without_bytes += ed.without_bytes;
        d = ed.dur_ns;
      }
      dur[v] = d;
    }
  }

  // Point-to-point: the k-th receive of (src, dst, tag) waits for the k-th send.
  std::vector<std::size_t> matched_send(total, total);
  for (const auto& [key, rv] : recvs) {
    const auto it = sends.find(key);
    const std::size_t have = it == sends.end() ? 0 : it->second.size();
    if (have != rv.size()) {
      const auto [r, i] = where[rv.front()];
      if (!index_of_rank.count(static_cast<int>(std::get<0>(key))))
        throw FormatError(w.ranks[r].source + ": " + node_text(w.ranks[r], w.ranks[r].nodes[i]) +
                          " receives from rank " + std::to_string(std::get<0>(key)) + ", which has no trace");
      throw FormatError(w.ranks[r].source + ": " + node_text(w.ranks[r], w.ranks[r].nodes[i]) + ": " +
                        std::to_string(rv.size()) + " receive(s) from rank " + std::to_string(std::get<0>(key)) +
                        " (tag " + std::to_string(std::get<2>(key)) + ") but " + std::to_string(have) + " send(s)");
    }
    for (std::size_t k = 0; k < rv.size(); ++k) {
      succ[it->second[k]].push_back(rv[k]);
      ++pending[rv[k]];
      matched_send[rv[k]] = it->second[k];
    }
  }
  for (const auto& [key, sv] : sends)
    if (!recvs.count(key)) {
      const auto [r, i] = where[sv.front()];
      throw FormatError(w.ranks[r].source + ": " + node_text(w.ranks[r], w.ranks[r].nodes[i]) + ": a send to rank " +
                        std::to_string(std::get<1>(key)) +
                        (index_of_rank.count(static_cast<int>(std::get<1>(key))) ? " that no receive matches"
                                                                                 : ", which has no trace"));
    }

  // Collective instances: per group, the k-th collective of every member.
  std::vector<std::int64_t> instance_of(total, -1);
  std::vector<std::vector<std::size_t>> instances;
  for (auto& entry : issued) {
    // Named, not a structured binding: clang 14 (the fuzz build) cannot capture bindings in lambdas.
    const std::string& grp = entry.first;
    auto& per_rank = entry.second;
    std::vector<std::size_t> members;  // rank indexes
    const auto gm = group_members.find(grp);
    if (gm != group_members.end()) {
      for (int rk : gm->second) {
        const auto it = index_of_rank.find(rk);
        if (it == index_of_rank.end())
          throw FormatError((w.groups_source.empty() ? std::string("communicator groups") : w.groups_source) +
                            ": group '" + grp + "' names rank " + std::to_string(rk) + ", which has no trace");
        members.push_back(it->second);
      }
    } else if (grp.empty() || grp == "0" || !w.groups.empty()) {
      if (!grp.empty() && grp != "0") {
        const std::size_t r = [&] {
          for (std::size_t k = 0; k < nr; ++k)
            if (!per_rank[k].empty()) return k;
          return std::size_t{0};
        }();
        const auto [rr, i] = where[per_rank[r].front()];
        throw FormatError(w.ranks[rr].source + ": " + node_text(w.ranks[rr], w.ranks[rr].nodes[i]) + ": group '" + grp +
                          "' is not in " + w.groups_source);
      }
      for (std::size_t r = 0; r < nr; ++r) members.push_back(r);
    } else {
      for (std::size_t r = 0; r < nr; ++r)
        if (!per_rank[r].empty()) members.push_back(r);
    }
    std::set<std::size_t> member_set(members.begin(), members.end());
    for (std::size_t r = 0; r < nr; ++r)
      if (!per_rank[r].empty() && !member_set.count(r)) {
        const auto [rr, i] = where[per_rank[r].front()];
        throw FormatError(w.ranks[rr].source + ": " + node_text(w.ranks[rr], w.ranks[rr].nodes[i]) +
                          ": a collective on group '" + grp + "', which rank " + std::to_string(w.ranks[rr].rank) +
                          " is not a member of");
      }
    const std::size_t count = per_rank[members.front()].size();
    for (std::size_t r : members)
      if (per_rank[r].size() != count)
        throw FormatError("replay: group '" + grp + "': rank " + std::to_string(w.ranks[members.front()].rank) +
                          " issues " + std::to_string(count) + " collectives on it, rank " +
                          std::to_string(w.ranks[r].rank) + " " + std::to_string(per_rank[r].size()));
    for (std::size_t k = 0; k < count; ++k) {
      std::vector<std::size_t> inst;
      const ExecNode& first = w.ranks[members.front()].nodes[where[per_rank[members.front()][k]].second];
      for (std::size_t r : members) {
        const std::size_t v = per_rank[r][k];
        const ExecNode& n = w.ranks[r].nodes[where[v].second];
        if (n.comm.op != first.comm.op)
          throw FormatError(w.ranks[r].source + ": " + node_text(w.ranks[r], n) + ": collective #" + std::to_string(k) +
                            " on group '" + grp + "' is " + n.comm.op + " here but " + first.comm.op + " on rank " +
                            std::to_string(w.ranks[members.front()].rank));
        instance_of[v] = static_cast<std::int64_t>(instances.size());
        inst.push_back(v);
      }
      instances.push_back(std::move(inst));
    }
  }
  st.collective_instances = instances.size();

  // Event-free longest path: a node runs once its dependencies have ended; an instance once all members are ready.
  std::vector<std::int64_t> ready(total, 0), start(total, -1), end(total, -1), send_end(total, 0);
  std::vector<std::size_t> arrived(instances.size(), 0);
  std::vector<std::int64_t> inst_ready(instances.size(), 0);
  std::vector<std::size_t> stack;
  for (std::size_t v = 0; v < total; ++v)
    if (pending[v] == 0) stack.push_back(v);
  std::size_t finished = 0;
  auto finish = [&](std::size_t v, std::int64_t s) {
    start[v] = s;
    end[v] = role[v] == Role::RECV ? std::max(s + dur[v], send_end[v]) : s + dur[v];
    ++finished;
    for (auto x : succ[v]) {
      if (matched_send[x] == v) send_end[x] = end[v];  // a receive starts with its own dependencies
      else ready[x] = std::max(ready[x], end[v]);
      if (--pending[x] == 0) stack.push_back(x);
    }
  };
  while (!stack.empty()) {
    const std::size_t v = stack.back();
    stack.pop_back();
    if (instance_of[v] < 0) {
      finish(v, ready[v]);
      continue;
    }
    const auto c = static_cast<std::size_t>(instance_of[v]);
    inst_ready[c] = std::max(inst_ready[c], ready[v]);
    if (++arrived[c] == instances[c].size())
      for (auto m : instances[c]) finish(m, inst_ready[c]);
  }
  if (finished != total) {
    for (std::size_t v = 0; v < total; ++v)
      if (end[v] < 0) {
        const auto [r, i] = where[v];
        throw FormatError("replay: the ranks deadlock: " + node_text(w.ranks[r], w.ranks[r].nodes[i]) +
                          " never runs (" + std::to_string(total - finished) + " of " + std::to_string(total) +
                          " nodes wait; mismatched collectives or transfers?)");
      }
  }
  EtTimeline t;
  t.rank_span_ns.assign(nr, 0);
  t.start_ns.resize(nr);
  t.end_ns.resize(nr);
  for (std::size_t r = 0; r < nr; ++r) {
    t.start_ns[r].assign(start.begin() + static_cast<long>(base[r]), start.begin() + static_cast<long>(base[r + 1]));
    t.end_ns[r].assign(end.begin() + static_cast<long>(base[r]), end.begin() + static_cast<long>(base[r + 1]));
    for (auto e : t.end_ns[r]) t.rank_span_ns[r] = std::max(t.rank_span_ns[r], e);
    t.span_ns = std::max(t.span_ns, t.rank_span_ns[r]);
  }
  if (stats_out) *stats_out = st;
  return t;
}

EtReplayReport replay_et(const EtWorkload& w, const ReplayOptions& o) {
  EtReplayReport rep;
  rep.groups_source = w.groups_source;
  rep.dropped_missing_deps = w.dropped_missing_deps;
  rep.dropped_cyclic_deps = w.dropped_cyclic_deps;
  rep.groups = w.groups.size();
  ReplayOptions plain;
  plain.launch_latency_ns = o.launch_latency_ns;
  plain.keep_unexplained_gaps = o.keep_unexplained_gaps;
  plain.cpu_gap_scale = o.cpu_gap_scale;
  plain.runtime_scale = o.runtime_scale;
  plain.collective_group_size = o.collective_group_size;
  const EtTimeline base = run_et_replay(w, plain, &rep.stats);
  rep.span_ns = base.span_ns;
  rep.edited = o.has_edits();
  EtTimeline edited;
  if (rep.edited) {
    EtReplayStats es;
    edited = run_et_replay(w, o, &es);
    rep.stats.compute_scaled = es.compute_scaled;
    rep.stats.collectives_modelled = es.collectives_modelled;
    rep.stats.collectives_without_bytes = es.collectives_without_bytes;
    rep.edits = o.describe();
  }
  const EtTimeline& pred = rep.edited ? edited : base;
  rep.predicted_span_ns = pred.span_ns;
  rep.change_pct = rep.span_ns > 0 ? 100.0 * static_cast<double>(rep.predicted_span_ns - rep.span_ns) /
                                         static_cast<double>(rep.span_ns)
                                   : 0.0;
  for (std::size_t r = 0; r < w.ranks.size(); ++r) {
    const ExecGraph& g = w.ranks[r];
    EtReplayRank x;
    x.rank = g.rank;
    x.source = g.source;
    x.nodes = g.nodes.size();
    for (const auto& n : g.nodes) {
      const Role ro = role_of(n);
      if (ro == Role::PLAIN && n.kind == ExecNodeKind::COMPUTE) ++x.compute_nodes;
      x.collective_nodes += ro == Role::COLL;
      x.sends += ro == Role::SEND;
      x.recvs += ro == Role::RECV;
    }
    x.span_ns = base.rank_span_ns[r];
    x.predicted_span_ns = pred.rank_span_ns[r];
    rep.ranks.push_back(std::move(x));
  }
  return rep;
}

std::string et_replay_summary(const EtReplayReport& r) {
  std::string s = "Chakra execution traces: " + std::to_string(r.ranks.size()) + " ranks, " +
                  std::to_string(r.stats.nodes) + " nodes (" + std::to_string(r.stats.compute_nodes) + " compute, " +
                  std::to_string(r.stats.collective_nodes) + " collective in " +
                  std::to_string(r.stats.collective_instances) + " instances, " + std::to_string(r.stats.sends) +
                  " sends, " + std::to_string(r.stats.recvs) + " receives)\n";
  s += "communicator groups: " +
       (r.groups_source.empty() ? std::string("none given (by pg_name)")
                                : std::to_string(r.groups) + " from " + r.groups_source) +
       "\n";
  if (r.dropped_missing_deps + r.dropped_cyclic_deps > 0)
    s += "dependencies dropped: " + std::to_string(r.dropped_missing_deps) + " on nodes not in the file, " +
         std::to_string(r.dropped_cyclic_deps) + " on the node itself or later control dependencies\n";
  s += "iteration time (replayed span): " + fmt_ms(r.span_ns) + "\n";
  if (r.edited) {
    char b[64];
    std::snprintf(b, sizeof b, "%+.2f%%", r.change_pct);
    s += "what-if (" + r.edits + "): " + fmt_ms(r.predicted_span_ns) + " (" + b + ")\n";
  }
  auto line = [&](const EtReplayRank& x) {
    s += "  rank " + std::to_string(x.rank) + "  " + fmt_ms(x.span_ns);
    if (r.edited) s += " -> " + fmt_ms(x.predicted_span_ns);
    s += "  (" + std::to_string(x.nodes) + " nodes)\n";
  };
  constexpr std::size_t kListed = 16;  // above: the first and last rank to finish (replay.json has them all)
  if (r.ranks.size() <= kListed) {
    s += "per rank:\n";
    for (const auto& x : r.ranks) line(x);
  } else {
    const auto [lo, hi] = std::minmax_element(r.ranks.begin(), r.ranks.end(),
                                              [](const auto& a, const auto& b) { return a.span_ns < b.span_ns; });
    s += "ranks finishing first and last (every rank in replay.json):\n";
    line(*lo);
    line(*hi);
  }
  return s;
}

std::string et_replay_json(const EtReplayReport& r, const ReplayOptions& o) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& x : r.ranks)
    ranks.push_back({{"rank", x.rank},
                     {"source", x.source},
                     {"nodes", x.nodes},
                     {"compute_nodes", x.compute_nodes},
                     {"collective_nodes", x.collective_nodes},
                     {"sends", x.sends},
                     {"recvs", x.recvs},
                     {"span_ns", x.span_ns},
                     {"predicted_span_ns", x.predicted_span_ns}});
  nlohmann::json scales = nlohmann::json::array();
  for (const auto& k : o.kernel_scales) scales.push_back({{"pattern", k.pattern}, {"factor", k.factor}});
  const nlohmann::json j = {{"schema", "dtsim.replay.chakra"},
                            {"schema_version", 1},
                            {"options",
                             {{"kernel_scales", scales},
                              {"collective_time_scale", o.collective_time_scale},
                              {"collective_bw_scale", o.collective_bw_scale},
                              {"collective_bandwidth_Bps", o.collective_bandwidth_Bps},
                              {"collective_alpha_s", o.collective_alpha_s}}},
                            {"communicator_groups", r.groups_source},
                            {"stats",
                             {{"nodes", r.stats.nodes},
                              {"dropped_missing_dependencies", r.dropped_missing_deps},
                              {"dropped_cyclic_dependencies", r.dropped_cyclic_deps},
                              {"compute_nodes", r.stats.compute_nodes},
                              {"collective_nodes", r.stats.collective_nodes},
                              {"collective_instances", r.stats.collective_instances},
                              {"sends", r.stats.sends},
                              {"recvs", r.stats.recvs},
                              {"compute_scaled", r.stats.compute_scaled},
                              {"collectives_modelled", r.stats.collectives_modelled},
                              {"collectives_without_bytes", r.stats.collectives_without_bytes}}},
                            {"span_ns", r.span_ns},
                            {"edited", r.edited},
                            {"edits", r.edits},
                            {"predicted_span_ns", r.predicted_span_ns},
                            {"change_pct", r.change_pct},
                            {"ranks", ranks}};
  return j.dump(2) + "\n";
}

}  // namespace dtsim::sim
