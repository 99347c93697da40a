// Routing on an explicit network graph (ClusterSpec::graph) with Boost.Graph's Dijkstra: lowest latency, then
// fewest hops; GPUs are endpoints only (each GPU vertex is split into a source side and a sink side so no route
// passes through a GPU). Directed link 2i is graph link i from its first to its second vertex, 2i+1 the reverse.
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "traces/cluster.hpp"

namespace dtsim::sim {

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

}  // namespace dtsim::sim
