// The network of the simulated ranks, independent of any engine: links (bandwidth, latency) and the route of
// every flow. The SimGrid engine builds exactly these links and routes; the analytic engine times flows on them.
//
// Every GPU has a private full-duplex port into the node's non-blocking switch (NVSwitch): links "nvl-up<g>" and
// "nvl-down<g>". GPU g reaches other nodes through NIC g*nics/gpus of its node into one non-blocking switch:
// links "nic-up<node>.<nic>" and "nic-down<node>.<nic>", shared by the GPUs of that NIC. Latencies are split
// in half over the two links of a route, so a route's latency is the fabric's one-way latency. With a fat-tree
// or rail fabric, a leaf's traffic to other leaves also crosses "leaf-up<l>" and the receiving "leaf-down<l>"
// (capacity: the leaf's NIC capacity / oversubscription; latency: the spine's, split in half).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "sim/model/lowering.hpp"
#include "sim/model/task_graph.hpp"
#include "traces/calibration.hpp"
#include "traces/cluster.hpp"
#include "traces/routing.hpp"

namespace dtsim::sim {

struct PlatformLink {
  std::string name;
  double bandwidth_Bps = 0;  ///< nominal x calibrated efficiency, / multiplicity: what the simulated flows share
  double latency_s = 0;
  /// Folding with multiplicity: each simulated flow on this link stands for this many identical real flows (the
  /// folded-away ranks' copies), so the link runs at 1/multiplicity of its real capacity.
  int multiplicity = 1;
};

/// Per simulated rank: the multiplicities of its NIC's links and of its leaf and pod uplinks (SimRank).
struct RankShare {
  int nic = 1, fabric = 1;
};

struct Port {
  int up = -1, down = -1;  ///< link indices (towards the switch, from the switch)
};

struct Platform {
  std::vector<PlatformLink> links;
  std::vector<Port> nvl;          ///< per simulated rank: NVSwitch port
  std::vector<Port> net;          ///< per simulated rank: NIC port (up = -1 on a single node without NICs)
  std::vector<int> leaf;          ///< per simulated rank: its NIC's leaf (rail) switch
  std::vector<Port> leaf_uplink;  ///< per leaf used: aggregate link to (up) and from (down) the spines
  std::vector<int> pod;           ///< per simulated rank: its pod (three-level fat-tree), index into pod_uplink
  std::vector<Port> pod_uplink;   ///< per pod used: aggregate link to and from the core
  /// Explicit network graph (ClusterSpec::graph): links are the graph's, two per graph link (one per direction),
  /// and routes come from `routing`.
  bool graph_mode = false;
  std::vector<int> gpu;  ///< per simulated rank: global GPU
  std::shared_ptr<GraphRouting> routing;
  /// Links crossed by a flow task: the sender's up-link, the leaf uplinks when it crosses the spine, and the
  /// receiver's (or the mirror's) down-link.
  std::vector<int> route(const Task& flow) const;
  /// route() into `out` (cleared first): no allocation once `out` has grown (engines' hot loops).
  void route_into(const Task& flow, std::vector<int>* out) const;
  double latency_s(const Task& flow) const;
  /// Latency of a route from route_into: its links' latencies summed in order (no allocation).
  double latency_s(const std::vector<int>& route) const;
  /// Bottleneck bandwidth of the route, at the links' real capacities (a flow alone: its folded copies do not
  /// count).
  double bandwidth_Bps(const Task& flow) const;
  /// bandwidth_Bps of a route from route_into (no allocation).
  double bandwidth_Bps(const std::vector<int>& route) const;
  /// What one flow gets of link `l` alone: its bandwidth times its multiplicity (a route's is the least of these).
  double link_bandwidth_Bps(int l) const {
    const auto& k = links[static_cast<std::size_t>(l)];
    return k.bandwidth_Bps * k.multiplicity;
  }
};

/// The simulated ranks of a lowering as the platform takes them: each one's GPU (first_gpu + the plan's GPU of its
/// global rank) and its multiplicities.
struct PlatformRanks {
  std::vector<int> gpu;
  std::vector<RankShare> share;
};
PlatformRanks platform_ranks(const Lowered& low, const ParallelPlan& plan, int first_gpu);

/// `share`: per simulated rank (empty: every multiplicity 1).
Platform describe_platform(const ClusterSpec& cluster, const Calibration& cal, const std::vector<int>& gpu_of_rank,
                           const std::vector<RankShare>& share = {});

}  // namespace dtsim::sim
