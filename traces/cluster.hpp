// Cluster specification: GPU type, nodes x GPUs, intra-node switch fabric and inter-node NICs (schema_version 1).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "traces/model.hpp"

namespace dtsim {

struct GpuSpec {
  std::string name;
  double peak_fp16_flops = 0;  ///< dense tensor-core peak, FLOP/s
  double peak_bf16_flops = 0;
  double peak_fp32_flops = 0;  ///< plain FP32 (non tensor-core)
  /// Dense FP8 (E4M3/E5M2) tensor-core peak, FLOP/s; per-tensor, rowwise and MXFP8 (1x32 block) scaled GEMMs all run
  /// at it. 0 = no FP8 tensor cores (A100, V100).
  double peak_fp8_flops = 0;
  /// Dense FP4 (NVFP4, 1x16 blocks with FP8 scales) tensor-core peak, FLOP/s. 0 = no FP4 tensor cores (before
  /// Blackwell).
  double peak_fp4_flops = 0;
  double hbm_Bps = 0;       ///< HBM bandwidth, bytes/s
  double memory_bytes = 0;  ///< device memory capacity, bytes
  /// Board power limit (TDP) the GPU runs at, W; 0 = not stated. The device model (traces/device_model.hpp) scales
  /// a measured GPU's sustained tensor-core throughput to another GPU of the same process generation by it.
  double board_power_w = 0;
  /// Streaming multiprocessors: the slots a persistent kernel's thread-block tiles run on, one wave at a time (the
  /// single-kernel grouped GEMM's wave model, Calibration::grouped_gemm_single_kernel). 0 = not stated (that model
  /// then falls back to the per-group one).
  double sm_count = 0;
  double peak_flops(DType d) const;
};

/// Intra-node fabric: every GPU has a private full-duplex port into a non-blocking switch (NVSwitch).
struct IntraNodeFabric {
  std::string kind = "nvswitch";
  double bandwidth_Bps = 0;  ///< per GPU, per direction
  double latency_s = 0;      ///< GPU to GPU, one way
};

/// Inter-node network. GPU i of a node uses NIC i*nics/gpus. Topologies:
///  switch    every NIC on one non-blocking switch;
///  fat-tree  two levels: the NICs of nodes_per_leaf consecutive nodes on a leaf switch, leaves joined by spines;
///            each leaf's uplink capacity is its NICs' capacity / oversubscription (ECMP over the spines is
///            modelled as one aggregate link per direction);
///  rail      rail-optimised: NIC k of nodes_per_leaf consecutive nodes on rail switch k; traffic between rails
///            (or rail groups) crosses the spine, with the same uplink rule.
struct InterNodeNetwork {
  int nics_per_node = 0;
  double nic_bandwidth_Bps = 0;  ///< per NIC, per direction
  double latency_s = 0;          ///< NIC to NIC through the leaf switch, one way
  std::string topology = "switch";
  int nodes_per_leaf = 0;       ///< fat-tree, rail: nodes under one leaf (rail) switch
  double oversubscription = 1;  ///< fat-tree, rail: leaf downlink capacity / uplink capacity
  double spine_latency_s = 0;   ///< fat-tree, rail: extra one-way latency per switch level above the leaves
  int leaves_per_pod = 0;  ///< fat-tree with three levels: leaves under one pod (aggregation) switch; 0 = two levels
  double pod_oversubscription = 1;  ///< three levels: pod downlink capacity / uplink capacity to the core
};

/// An explicit network graph: GPUs, switches (NVSwitch, PCIe, NIC, IB) and full-duplex links between them.
/// Routes follow the lowest-latency path (fewest hops among equal latencies); traffic never passes *through* a
/// GPU (GPUs do not forward), only NVLink/PCIe/NIC/switch vertices do.
struct TopologyGraph {
  struct Vertex {
    std::string name;
    int gpu = -1;  ///< global GPU index for GPU vertices, -1 for switches
  };
  struct Link {
    int a = 0, b = 0;          ///< vertex indices
    double bandwidth_Bps = 0;  ///< per direction
    double latency_s = 0;      ///< one way
    std::string kind;          ///< "nvlink", "pcie", "ib", ...: which calibration efficiency applies
  };
  std::vector<Vertex> vertices;
  std::vector<Link> links;
};

/// The host side of one GPU (offloading: activations and optimizer states in host memory, a CPU optimizer step):
/// its link to the host and its share of the node's host memory and host-memory bandwidth. 0 = not known (a cluster
/// file without "host"): plans that offload are refused there.
struct HostSpec {
  double link_Bps = 0;      ///< GPU <-> host, per direction (PCIe x16, or NVLink-C2C on Grace superchips)
  double memory_bytes = 0;  ///< the GPU's share of the node's host memory
  double memory_Bps = 0;    ///< the GPU's share of the host's peak memory bandwidth
  bool known() const { return link_Bps > 0 && memory_bytes > 0 && memory_Bps > 0; }
};

struct ClusterSpec {
  std::string name;
  GpuSpec gpu;
  int num_nodes = 0;
  int gpus_per_node = 0;
  IntraNodeFabric intra;
  InterNodeNetwork inter;
  HostSpec host;
  /// When not empty, the whole network (intra and inter node) is this graph and `intra`/`inter` only give
  /// default latencies; folding is disabled.
  TopologyGraph graph;
  bool has_graph() const { return !graph.vertices.empty(); }

  int total_gpus() const { return num_nodes * gpus_per_node; }
  int node_of(int gpu_id) const { return gpu_id / gpus_per_node; }
  /// NIC index (within its node) used by global GPU `gpu`.
  int nic_of(int gpu_id) const {
    return static_cast<int>(static_cast<std::int64_t>(gpu_id % gpus_per_node) * inter.nics_per_node / gpus_per_node);
  }
  /// Leaf (or rail) switch of global GPU `gpu_id`'s NIC; 0 for a single switch.
  int leaf_of(int gpu_id) const;
  int num_leaves() const;
  /// Pod of global GPU `gpu_id` in a three-level fat-tree (leaf / leaves_per_pod); 0 otherwise.
  int pod_of(int gpu_id) const { return inter.leaves_per_pod > 0 ? leaf_of(gpu_id) / inter.leaves_per_pod : 0; }
  void validate() const;
};

std::vector<std::string> gpu_preset_names();
GpuSpec gpu_preset(const std::string& name);

/// DGX-1 with V100s: NVLink hybrid cube-mesh inside each node, PCIe switches to the CPUs and NICs, one
/// InfiniBand switch between nodes.
ClusterSpec dgx1_v100(int nodes);
/// A PCIe server: 8 A100 PCIe GPUs, two per PCIe gen4 switch, two switches per CPU socket, one HDR NIC per switch,
/// no NVLink; nodes joined by one InfiniBand switch. Built as an explicit graph.
ClusterSpec pcie_a100(int nodes);

/// Cluster preset names ("dgx-a100", "dgx-h100", "dgx1-v100"), used as "dgx-a100:N" with N GPUs.
std::vector<std::string> cluster_preset_names();
/// "dgx-a100:1024", "dgx-h100:16", a bare preset (one node), or a JSON file path. The inter-node fabric can be
/// chosen after the GPU count: "dgx-a100:256:fat-tree:16:2" (16 nodes per leaf, 2:1 oversubscribed) or
/// "dgx-a100:256:rail:32:1" (rails of 32 nodes, full bisection).
ClusterSpec load_cluster(const std::string& name_or_path);

nlohmann::json to_json(const ClusterSpec& c);
/// A GPU object as a cluster JSON's "gpu" holds it ("preset" to start from, then any field); fields as to_json writes.
GpuSpec gpu_from_json(const nlohmann::json& j, const std::string& ctx);
ClusterSpec cluster_from_json(const nlohmann::json& j, const std::string& ctx);

}  // namespace dtsim
