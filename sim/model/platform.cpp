#include "sim/model/platform.hpp"

#include <algorithm>
#include <map>

namespace dtsim::sim {

Platform describe_platform(const ClusterSpec& c, const Calibration& cal, const std::vector<int>& gpu_of_rank) {
  Platform p;
  auto add = [&](std::string name, double bw, double lat) {
    p.links.push_back({std::move(name), bw, lat});
    return static_cast<int>(p.links.size() - 1);
  };
  std::map<std::pair<int, int>, Port> nics;
  for (int gpu : gpu_of_rank) {
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
        port.up = add("nic-up" + id, nic_bw, c.inter.latency_s / 2);
        port.down = add("nic-down" + id, nic_bw, c.inter.latency_s / 2);
        it = nics.emplace(key, port).first;
      }
      net = it->second;
    }
    p.net.push_back(net);
  }
  return p;
}

std::array<int, 2> Platform::route(const Task& f) const {
  const auto& ports = f.path == Path::INTRA_NODE ? nvl : net;
  const int dst = f.mirror ? f.rank : f.peer;
  return {ports[f.rank].up, ports[dst].down};
}

double Platform::latency_s(const Task& f) const {
  auto r = route(f);
  return links[r[0]].latency_s + links[r[1]].latency_s;
}

double Platform::bandwidth_Bps(const Task& f) const {
  auto r = route(f);
  return std::min(links[r[0]].bandwidth_Bps, links[r[1]].bandwidth_Bps);
}

}  // namespace dtsim::sim
