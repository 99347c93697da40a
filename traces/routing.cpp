#include "traces/routing.hpp"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <limits>

#include "traces/error.hpp"

namespace dtsim {

struct GraphRouting::Impl {
  using Graph =
      boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property,
                            boost::property<boost::edge_weight_t, double, boost::property<boost::edge_index_t, int>>>;
  const TopologyGraph& topo;
  Graph g;
  std::vector<int> out_node, in_node;  // per topology vertex
  std::map<int, int> vertex_of_gpu;
  struct Tree {
    std::vector<Graph::vertex_descriptor> pred;
    std::vector<double> dist;
  };
  mutable std::map<int, Tree> trees;  // per source GPU
  mutable std::map<std::pair<int, int>, std::vector<int>> routes;

  explicit Impl(const TopologyGraph& t) : topo(t) {
    int n = 0;
    for (std::size_t v = 0; v < t.vertices.size(); ++v) {
      out_node.push_back(n++);
      in_node.push_back(t.vertices[v].gpu >= 0 ? n++ : out_node.back());
      if (t.vertices[v].gpu >= 0) vertex_of_gpu[t.vertices[v].gpu] = static_cast<int>(v);
    }
    for (int i = 0; i < n; ++i) boost::add_vertex(g);
    constexpr double kHop = 1e-12;  // prefers fewer hops among equal latencies
    for (std::size_t i = 0; i < t.links.size(); ++i) {
      const auto& l = t.links[i];
      boost::add_edge(out_node[l.a], in_node[l.b], {l.latency_s + kHop, static_cast<int>(2 * i)}, g);
      boost::add_edge(out_node[l.b], in_node[l.a], {l.latency_s + kHop, static_cast<int>(2 * i + 1)}, g);
    }
  }

  const Tree& tree(int src_gpu) const {
    auto it = trees.find(src_gpu);
    if (it != trees.end()) return it->second;
    Tree tr;
    const auto n = boost::num_vertices(g);
    tr.pred.resize(n);
    tr.dist.resize(n);
    auto& gg = const_cast<Graph&>(g);
    boost::dijkstra_shortest_paths(
        gg, static_cast<Graph::vertex_descriptor>(out_node[vertex_of_gpu.at(src_gpu)]),
        boost::predecessor_map(boost::make_iterator_property_map(tr.pred.begin(), boost::get(boost::vertex_index, gg)))
            .distance_map(boost::make_iterator_property_map(tr.dist.begin(), boost::get(boost::vertex_index, gg))));
    return trees.emplace(src_gpu, std::move(tr)).first->second;
  }
};

GraphRouting::GraphRouting(const TopologyGraph& graph) : impl_(std::make_unique<Impl>(graph)) {}
GraphRouting::~GraphRouting() = default;

const std::vector<int>& GraphRouting::route(int from, int to) const {
  auto key = std::make_pair(from, to);
  auto it = impl_->routes.find(key);
  if (it != impl_->routes.end()) return it->second;
  const auto& tr = impl_->tree(from);
  const auto& g = impl_->g;
  auto v = static_cast<Impl::Graph::vertex_descriptor>(impl_->in_node[impl_->vertex_of_gpu.at(to)]);
  const auto src = static_cast<Impl::Graph::vertex_descriptor>(impl_->out_node[impl_->vertex_of_gpu.at(from)]);
  if (tr.dist[v] == std::numeric_limits<double>::max() || (tr.pred[v] == v && v != src))
    throw ConfigError("network graph: GPU " + std::to_string(from) + " cannot reach GPU " + std::to_string(to) +
                      " (the graph is disconnected)");
  std::vector<int> path;
  auto weight = boost::get(boost::edge_weight, g);
  auto index = boost::get(boost::edge_index, g);
  while (v != src) {
    const auto u = tr.pred[v];
    DTSIM_ASSERT(u != v, "broken shortest-path tree");
    int best = -1;
    double best_w = 0;
    for (auto [e, end] = boost::out_edges(u, g); e != end; ++e)
      if (boost::target(*e, g) == v && (best < 0 || boost::get(weight, *e) < best_w)) {
        best = boost::get(index, *e);
        best_w = boost::get(weight, *e);
      }
    path.push_back(best);
    v = u;
  }
  std::reverse(path.begin(), path.end());
  return impl_->routes.emplace(key, std::move(path)).first->second;
}

double GraphRouting::latency_s(int from, int to) const {
  double l = 0;
  for (int d : route(from, to)) l += impl_->topo.links[d / 2].latency_s;
  return l;
}

bool is_network_link(const std::string& kind) { return kind == "ib" || kind == "nic" || kind == "ethernet"; }

double calibrated_bandwidth_Bps(const TopologyGraph::Link& link, const Calibration& cal) {
  return link.bandwidth_Bps *
         (is_network_link(link.kind) ? cal.inter_bandwidth_efficiency : cal.intra_bandwidth_efficiency);
}

double route_bandwidth_Bps(const GraphRouting& routing, const TopologyGraph& graph, const Calibration& cal, int from,
                           int to) {
  double bw = 1e300;
  for (int d : routing.route(from, to)) bw = std::min(bw, calibrated_bandwidth_Bps(graph.links[d / 2], cal));
  return bw;
}

PairLinks::PairLinks(const ClusterSpec& cluster, const Calibration& cal)
    : c_(cluster), cal_(cal), routing_(cluster.has_graph() ? std::make_unique<GraphRouting>(cluster.graph) : nullptr) {}
PairLinks::~PairLinks() = default;

PairLink PairLinks::get(int a, int b) const {
  DTSIM_ASSERT(a >= 0 && b >= 0 && a < c_.total_gpus() && b < c_.total_gpus(),
               "GPU " << a << " or " << b << " out of range");
  PairLink pl;
  if (a == b) {
    pl.bandwidth_Bps = c_.gpu.hbm_Bps * cal_.memory_bandwidth_efficiency;
    return pl;
  }
  if (routing_) {
    pl = {routing_->latency_s(a, b), route_bandwidth_Bps(*routing_, c_.graph, cal_, a, b)};
  } else if (c_.node_of(a) == c_.node_of(b)) {
    pl = {c_.intra.latency_s, c_.intra.bandwidth_Bps * cal_.intra_bandwidth_efficiency};
  } else {
    const bool spine = c_.leaf_of(a) != c_.leaf_of(b);
    pl.latency_s = c_.inter.latency_s + (spine ? c_.inter.spine_latency_s : 0.0);
    pl.bandwidth_Bps = c_.inter.nic_bandwidth_Bps * cal_.inter_bandwidth_efficiency /
                       (spine && c_.inter.topology != "switch" ? c_.inter.oversubscription : 1.0);
  }
  pl.latency_s += cal_.p2p_overhead_s;
  return pl;
}

}  // namespace dtsim
