#include "sim/model/platform.hpp"

#include <algorithm>
#include <map>

namespace dtsim::sim {

PlatformRanks platform_ranks(const Lowered& low, const ParallelPlan& plan, int first_gpu) {
  PlatformRanks pr;
  pr.gpu.reserve(low.ranks.size());
  pr.share.reserve(low.ranks.size());
  for (const auto& r : low.ranks) {
    pr.gpu.push_back(first_gpu + plan.gpu_of_rank(r.global_rank));
    pr.share.push_back({r.nic_multiplicity, r.fabric_multiplicity});
  }
  return pr;
}

Platform describe_platform(const ClusterSpec& c, const Calibration& cal, const std::vector<int>& gpu_of_rank,
                           const std::vector<RankShare>& share) {
  DTSIM_ASSERT(share.empty() || share.size() == gpu_of_rank.size(), "one RankShare per simulated rank");
  Platform p;
  p.gpu = gpu_of_rank;
  auto add = [&](std::string name, double bw, double lat, int k = 1) {
    p.links.push_back({std::move(name), bw / k, lat, k});
    return static_cast<int>(p.links.size() - 1);
  };
  // A shared link gets one multiplicity for all the simulated ranks using it (the lowering checked that they agree).
  auto same_k = [&](const Port& port, int k) {
    DTSIM_ASSERT(p.links[port.up].multiplicity == k, "link " << p.links[port.up].name << " shared by ranks of "
                                                             << "multiplicity " << k << " and "
                                                             << p.links[port.up].multiplicity);
    return port;
  };
  if (c.has_graph()) {
    p.graph_mode = true;
    p.routing = std::make_shared<GraphRouting>(c.graph);
    for (const auto& l : c.graph.links) {
      const double bw = calibrated_bandwidth_Bps(l, cal);
      const std::string& a = c.graph.vertices[l.a].name;
      const std::string& b = c.graph.vertices[l.b].name;
      add(l.kind + ":" + a + "->" + b, bw, l.latency_s);
      add(l.kind + ":" + b + "->" + a, bw, l.latency_s);
    }
    p.nvl.assign(gpu_of_rank.size(), Port{});
    p.net.assign(gpu_of_rank.size(), Port{});
    p.leaf.assign(gpu_of_rank.size(), -1);
    p.pod.assign(gpu_of_rank.size(), -1);
    return p;
  }
  std::map<std::pair<int, int>, Port> nics;
  std::map<int, int> leaf_index;  // leaf switch -> index into leaf_uplink
  std::map<int, int> pod_index;   // pod -> index into pod_uplink
  for (std::size_t r = 0; r < gpu_of_rank.size(); ++r) {
    const int gpu = gpu_of_rank[r];
    const RankShare k = share.empty() ? RankShare{} : share[r];
    const double bw = c.intra.bandwidth_Bps * cal.intra_bandwidth_efficiency;
    Port nvl;
    nvl.up = add("nvl-up" + std::to_string(gpu), bw, c.intra.latency_s / 2);
    nvl.down = add("nvl-down" + std::to_string(gpu), bw, c.intra.latency_s / 2);
    p.nvl.push_back(nvl);
    Port net;
    if (c.inter.nics_per_node > 0) {
      auto key = std::make_pair(c.node_of(gpu), c.nic_of(gpu));
      auto it = nics.find(key);
      if (it == nics.end()) {
        const std::string id = std::to_string(key.first) + "." + std::to_string(key.second);
        const double nic_bw = c.inter.nic_bandwidth_Bps * cal.inter_bandwidth_efficiency;
        Port port;
        port.up = add("nic-up" + id, nic_bw, c.inter.latency_s / 2, k.nic);
        port.down = add("nic-down" + id, nic_bw, c.inter.latency_s / 2, k.nic);
        it = nics.emplace(key, port).first;
      }
      net = same_k(it->second, k.nic);
    }
    p.net.push_back(net);
    const int leaf = c.leaf_of(gpu);
    auto li = leaf_index.find(leaf);
    if (li == leaf_index.end() && c.inter.topology != "switch" && c.inter.nics_per_node > 0) {
      const int nics_under = c.inter.nodes_per_leaf * (c.inter.topology == "rail" ? 1 : c.inter.nics_per_node);
      const double up_bw =
          nics_under * c.inter.nic_bandwidth_Bps * cal.inter_bandwidth_efficiency / c.inter.oversubscription;
      Port up;
      up.up = add("leaf-up" + std::to_string(leaf), up_bw, c.inter.spine_latency_s / 2, k.fabric);
      up.down = add("leaf-down" + std::to_string(leaf), up_bw, c.inter.spine_latency_s / 2, k.fabric);
      p.leaf_uplink.push_back(up);
      li = leaf_index.emplace(leaf, static_cast<int>(p.leaf_uplink.size() - 1)).first;
    }
    if (li != leaf_index.end()) same_k(p.leaf_uplink[li->second], k.fabric);
    p.leaf.push_back(li == leaf_index.end() ? -1 : li->second);
    int pod = -1;
    if (c.inter.leaves_per_pod > 0 && c.inter.nics_per_node > 0) {
      const int id = c.pod_of(gpu);
      auto pi = pod_index.find(id);
      if (pi == pod_index.end()) {
        const double leaf_up = c.inter.nodes_per_leaf * c.inter.nics_per_node * c.inter.nic_bandwidth_Bps *
                               cal.inter_bandwidth_efficiency / c.inter.oversubscription;
        const double pod_bw = c.inter.leaves_per_pod * leaf_up / c.inter.pod_oversubscription;
        Port up;
        up.up = add("pod-up" + std::to_string(id), pod_bw, c.inter.spine_latency_s / 2, k.fabric);
        up.down = add("pod-down" + std::to_string(id), pod_bw, c.inter.spine_latency_s / 2, k.fabric);
        p.pod_uplink.push_back(up);
        pi = pod_index.emplace(id, static_cast<int>(p.pod_uplink.size() - 1)).first;
      }
      same_k(p.pod_uplink[pi->second], k.fabric);
      pod = pi->second;
    }
    p.pod.push_back(pod);
  }
  return p;
}

std::vector<int> Platform::route(const Task& f) const {
  std::vector<int> r;
  route_into(f, &r);
  return r;
}

void Platform::route_into(const Task& f, std::vector<int>* out) const {
  out->clear();
  if (graph_mode) {
    DTSIM_ASSERT(!f.mirror, "mirror flow on an explicit network graph (folding must be off)");
    const auto r = routing->route(gpu[f.rank], gpu[f.peer]);
    out->assign(r.begin(), r.end());
    return;
  }
  const auto& ports = f.path == Path::INTRA_NODE ? nvl : net;
  const int dst = f.mirror ? f.rank : f.peer;
  out->push_back(ports[f.rank].up);
  if (f.path == Path::CROSS_LEAF || f.path == Path::CROSS_POD) {
    DTSIM_ASSERT(leaf[f.rank] >= 0 && leaf[dst] >= 0, "cross-leaf flow without leaf switches");
    out->push_back(leaf_uplink[leaf[f.rank]].up);
    if (f.path == Path::CROSS_POD) {
      DTSIM_ASSERT(pod[f.rank] >= 0 && pod[dst] >= 0, "cross-pod flow without pod switches");
      out->push_back(pod_uplink[pod[f.rank]].up);
      out->push_back(pod_uplink[pod[dst]].down);
    }
    out->push_back(leaf_uplink[leaf[dst]].down);
  }
  out->push_back(ports[dst].down);
}

double Platform::latency_s(const Task& f) const { return latency_s(route(f)); }

double Platform::latency_s(const std::vector<int>& route) const {
  double l = 0;
  for (int i : route) l += links[i].latency_s;
  return l;
}

double Platform::bandwidth_Bps(const Task& f) const { return bandwidth_Bps(route(f)); }

double Platform::bandwidth_Bps(const std::vector<int>& route) const {
  double b = 1e300;
  for (int i : route) b = std::min(b, link_bandwidth_Bps(i));
  return b;
}

}  // namespace dtsim::sim
