// Cluster specification: GPU type, nodes x GPUs, intra-node switch fabric and inter-node NICs (schema_version 1).
#pragma once
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
  double hbm_Bps = 0;          ///< HBM bandwidth, bytes/s
  double memory_bytes = 0;     ///< device memory capacity, bytes
  double peak_flops(DType d) const;
};

/// Intra-node fabric: every GPU has a private full-duplex port into a non-blocking switch (NVSwitch).
struct IntraNodeFabric {
  std::string kind = "nvswitch";
  double bandwidth_Bps = 0;  ///< per GPU, per direction
  double latency_s = 0;      ///< GPU to GPU, one way
};

/// Inter-node network: NICs per node into one non-blocking switch (this issue); GPU i uses NIC i*nics/gpus.
struct InterNodeNetwork {
  int nics_per_node = 0;
  double nic_bandwidth_Bps = 0;  ///< per NIC, per direction
  double latency_s = 0;          ///< NIC to NIC through the switch, one way
};

struct ClusterSpec {
  std::string name;
  GpuSpec gpu;
  int num_nodes = 0;
  int gpus_per_node = 0;
  IntraNodeFabric intra;
  InterNodeNetwork inter;

  int total_gpus() const { return num_nodes * gpus_per_node; }
  int node_of(int gpu_id) const { return gpu_id / gpus_per_node; }
  /// NIC index (within its node) used by global GPU `gpu`.
  int nic_of(int gpu_id) const { return (gpu_id % gpus_per_node) * inter.nics_per_node / gpus_per_node; }
  void validate() const;
};

std::vector<std::string> gpu_preset_names();
GpuSpec gpu_preset(const std::string& name);

/// Cluster preset names ("dgx-a100", "dgx-h100"), used as "dgx-a100:N" with N GPUs.
std::vector<std::string> cluster_preset_names();
/// "dgx-a100:1024", "dgx-h100:16", a bare preset (one node), or a JSON file path.
ClusterSpec load_cluster(const std::string& name_or_path);

nlohmann::json to_json(const ClusterSpec& c);
ClusterSpec cluster_from_json(const nlohmann::json& j, const std::string& ctx);

}  // namespace dtsim
