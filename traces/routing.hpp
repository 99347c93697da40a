// Routing on an explicit network graph (ClusterSpec::graph) with Boost.Graph's Dijkstra: lowest latency, then
// fewest hops; GPUs are endpoints only (each GPU vertex is split into a source side and a sink side so no route
// passes through a GPU). Directed link 2i is graph link i from its first to its second vertex, 2i+1 the reverse.
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "traces/calibration.hpp"
#include "traces/cluster.hpp"

namespace dtsim {

class GraphRouting {
public:
  explicit GraphRouting(const TopologyGraph& graph);
  ~GraphRouting();
  /// Directed links from GPU `from` to GPU `to` (global indices). Throws ConfigError if they are not connected.
  const std::vector<int>& route(int from, int to) const;
  double latency_s(int from, int to) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Whether a graph link kind is a network link (NIC/InfiniBand/Ethernet: the calibration's inter-node
/// efficiency applies) rather than an intra-node one (NVLink, PCIe, NVSwitch).
bool is_network_link(const std::string& kind);
/// A graph link's bandwidth after the calibration's efficiency for its kind.
double calibrated_bandwidth_Bps(const TopologyGraph::Link& link, const Calibration& cal);
/// Narrowest calibrated link on the routed path from GPU `from` to GPU `to`.
double route_bandwidth_Bps(const GraphRouting& routing, const TopologyGraph& graph, const Calibration& cal, int from,
                           int to);

/// Latency and bottleneck bandwidth between two GPUs as one point-to-point transfer sees them, after the
/// calibration's link efficiencies: on a graph, the routed path's summed latency and narrowest link; on a
/// two-level cluster, the NVSwitch port inside a node, else the GPU's NIC share (latency + spine latency when
/// the leaves differ, bandwidth divided by the oversubscription when the traffic crosses the spine).
struct PairLink {
  double latency_s = 0;
  double bandwidth_Bps = 0;
  double time_s(double bytes) const { return latency_s + bytes / bandwidth_Bps; }
};

/// Pairwise links of a cluster (computed on demand, cached). Throws ConfigError if a graph is disconnected.
class PairLinks {
public:
  PairLinks(const ClusterSpec& cluster, const Calibration& cal);
  ~PairLinks();
  PairLink get(int gpu_a, int gpu_b) const;
  const ClusterSpec& cluster() const { return c_; }

private:
  const ClusterSpec& c_;
  const Calibration& cal_;
  std::unique_ptr<GraphRouting> routing_;
};

}  // namespace dtsim
