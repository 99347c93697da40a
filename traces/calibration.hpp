// Calibration: efficiency factors and overheads that turn hardware peaks into achieved speeds (schema_version 1).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace dtsim {

struct Calibration {
  std::string name;        ///< e.g. "a100-sxm4-80gb default"
  std::string gpu;         ///< GPU preset this file was made for
  nlohmann::json provenance;  ///< where every number comes from (copied verbatim into summary.json)

  // Compute (roofline with efficiency): time = max(flops / (peak * eff_gemm(flops)), bytes / (hbm * eff_mem)).
  double gemm_efficiency_max = 0.7;         ///< asymptotic fraction of tensor-core peak for large GEMMs
  double gemm_half_efficiency_flops = 1e9;  ///< GEMM size (FLOPs) at which efficiency is half the maximum
  double memory_bandwidth_efficiency = 0.8; ///< fraction of HBM bandwidth reached by memory-bound kernels
  double kernel_launch_s = 4e-6;            ///< fixed cost per kernel (launch + tail), seconds
  double optimizer_bytes_per_param = 28;    ///< HBM traffic of one fused Adam step per parameter, bytes

  // Network.
  double intra_bandwidth_efficiency = 0.8;  ///< achieved / nominal NVLink bandwidth for large transfers
  double inter_bandwidth_efficiency = 0.9;  ///< achieved / nominal NIC bandwidth for large transfers
  double collective_step_overhead_s = 2e-6; ///< software cost per ring step of a collective, seconds
  double p2p_overhead_s = 5e-6;             ///< software cost per point-to-point transfer, seconds

  // Memory.
  double reserved_memory_bytes = 0;         ///< CUDA context, library workspaces, allocator slack

  void validate(const std::string& ctx) const;
};

/// The default calibration shipped for a GPU preset (compiled in from traces/calibration/<gpu>.json).
Calibration default_calibration(const std::string& gpu_name);
Calibration load_calibration(const std::string& path);
nlohmann::json to_json(const Calibration& c);
Calibration calibration_from_json(const nlohmann::json& j, const std::string& ctx);

}  // namespace dtsim
