// Device model: a calibration derived by board power from a measured GPU (see device_model.hpp).
#include "traces/device_model.hpp"

#include <algorithm>
#include <cmath>

#include "traces/error.hpp"

namespace dtsim {

DeviceModelScaling device_model_scaling(const Calibration& reference, const GpuSpec& reference_gpu,
                                        const GpuSpec& target) {
  for (const GpuSpec* g : {&reference_gpu, &target}) {
    if (g->board_power_w <= 0)
      throw ConfigError("device model: gpu '" + g->name +
                        "' states no board_power_w (the model scales sustained tensor throughput by board power)");
    if (g->peak_bf16_flops <= 0) throw ConfigError("device model: gpu '" + g->name + "' has no BF16 peak");
  }
  DeviceModelScaling s;
  // The reference's burst efficiency times its sustained ratio is what it holds at its power limit; the target keeps
  // the same ratio (copied), so its burst efficiency is its power-limited throughput over that ratio.
  const double r = reference.sustained_tensor_ratio;
  s.reference_sustained_flops = reference.gemm_efficiency_max * r * reference_gpu.peak_bf16_flops;
  s.power_limited_flops = s.reference_sustained_flops * target.board_power_w / reference_gpu.board_power_w;
  s.gemm_efficiency_max = std::min(reference.gemm_efficiency_max, s.power_limited_flops / (r * target.peak_bf16_flops));
  s.power_limited = s.gemm_efficiency_max < reference.gemm_efficiency_max;
  s.tensor_factor = s.gemm_efficiency_max / reference.gemm_efficiency_max;
  s.throughput_ratio = s.gemm_efficiency_max * r * target.peak_bf16_flops / s.reference_sustained_flops;
  return s;
}

double fa2_attention_efficiency(const Calibration& reference, const GpuSpec& reference_gpu, const GpuSpec& target,
                                const DeviceModelScaling& s) {
  const double power_scaled = reference.fa2_attention_efficiency * s.tensor_factor;
  if (reference_gpu.sm_count <= 0 || target.sm_count <= 0) return power_scaled;
  // FlashAttention-2 (PyTorch SDPA's flash backend) is built from Ampere's warp-level MMA (mma.sync), not the newer
  // tensor-core instructions (Hopper's wgmma, Blackwell's tcgen05) that the BF16 peak counts: its throughput is an
  // SM-bound rate, the reference's per SM on every SM of the target (same clocks), whichever of that and the
  // power-limited rate is lower. Checks, not fits (the H200's 297 TFLOP/s x 148 / 132 SMs = 333 on a B200):
  // FlashAttention-2 measured on B200s at 333-346 TFLOP/s forward + backward (head dim 64, sequence 8,192-16,384;
  // Dao-AILab/flash-attention issue 1589, 2025-04) and 352-362 forward (head dim 128, sequence 2,048-8,192;
  // meta-pytorch/tritonbench pull request 171, 2025-03), where scaling by board power gives 424.
  const double sm_bound = reference.fa2_attention_efficiency * reference_gpu.peak_bf16_flops / reference_gpu.sm_count *
                          target.sm_count / target.peak_bf16_flops;
  return std::min(power_scaled, sm_bound);
}

Calibration device_model_calibration(const Calibration& reference, const GpuSpec& reference_gpu, const GpuSpec& target,
                                     const std::string& reference_source) {
  const DeviceModelScaling s = device_model_scaling(reference, reference_gpu, target);
  Calibration c = reference;
  c.gpu = target.name;
  c.stack.clear();
  c.gemm_efficiency_max = s.gemm_efficiency_max;
  c.gemm_half_efficiency_flops = reference.gemm_half_efficiency_flops * s.throughput_ratio;
  c.flash_attention_efficiency = reference.flash_attention_efficiency * s.tensor_factor;
  c.fa2_attention_efficiency = fa2_attention_efficiency(reference, reference_gpu, target, s);
  // The attention curves' half key counts stand for a fixed time per thread block: they scale with the tensor
  // throughput of one SM (the whole GPU's ratio over the SM counts' where both are known).
  const double per_sm =
      s.throughput_ratio *
      (reference_gpu.sm_count > 0 && target.sm_count > 0 ? reference_gpu.sm_count / target.sm_count : 1.0);
  c.flash_attention_half_kv = reference.flash_attention_half_kv * per_sm;
  c.flash_attention_backward_half_kv = reference.flash_attention_backward_half_kv * per_sm;
  c.name = target.name + " (not measured: device model of " + reference_gpu.name + " by board power, " +
           std::to_string(static_cast<int>(target.board_power_w)) + " W vs " +
           std::to_string(static_cast<int>(reference_gpu.board_power_w)) + " W)";
  const auto tflops = [](double f) { return std::to_string(std::lround(f / 1e12)) + " TFLOP/s"; };
  nlohmann::json p = nlohmann::json::object();
  p["status"] =
      "no measurement on " + target.name +
      " calibrates any field. The tensor-core fields come from the device model "
      "(traces/device_model.hpp): sustained BF16 throughput is the reference's measured one (" +
      tflops(s.reference_sustained_flops) + " on " + reference_gpu.name + ") scaled by board power, " +
      std::to_string(static_cast<int>(target.board_power_w)) + " W / " +
      std::to_string(static_cast<int>(reference_gpu.board_power_w)) + " W, to " + tflops(s.power_limited_flops) +
      (s.power_limited ? ", below the reference's efficiency of the " + tflops(target.peak_bf16_flops) + " peak"
                       : ", not below the reference's efficiency: capped there") +
      "; every other value is the reference's, unchanged.";
  p["derived_from"] = reference_source + " (" + reference.name + ")";
  p["device_model"] = {
      {"reference_gpu", reference_gpu.name},
      {"reference_board_power_w", reference_gpu.board_power_w},
      {"target_board_power_w", target.board_power_w},
      {"reference_peak_bf16_flops", reference_gpu.peak_bf16_flops},
      {"target_peak_bf16_flops", target.peak_bf16_flops},
      {"reference_sustained_bf16_flops", s.reference_sustained_flops},
      {"power_limited_bf16_flops", s.power_limited_flops},
      {"tensor_factor", s.tensor_factor},
      {"throughput_ratio", s.throughput_ratio},
      {"scaled",
       "gemm_efficiency_max = min(reference, power_limited / (sustained_tensor_ratio x target peak)); "
       "flash_attention_efficiency x tensor_factor; fa2_attention_efficiency (FlashAttention-2's warp-level MMA) the "
       "lower of x tensor_factor and the reference's rate per SM on the target's SMs; gemm_half_efficiency_flops x "
       "throughput_ratio (a fixed time per "
       "GEMM); flash_attention_half_kv and flash_attention_backward_half_kv x throughput_ratio x reference SMs / "
       "target SMs (a fixed time per thread block)"},
      {"copied",
       "sustained_tensor_ratio, memory_bandwidth_efficiency, kernel_launch_s, fp8/fp4 scales, interference, optimizer "
       "bytes, software-stack "
       "values, network and memory sections"},
      {"assumption",
       "the same energy per tensor FLOP on both GPUs (same process generation: Hopper TSMC 4N, Blackwell TSMC 4NP), "
       "and the reference's large GEMMs at its board power limit"}};
  if (reference.provenance.is_object() && reference.provenance.contains("status"))
    p["reference_status"] = reference.provenance.at("status");
  // The network section is copied: so is what it says of itself.
  if (reference.provenance.is_object() && reference.provenance.contains("network"))
    p["network"] = reference.provenance.at("network");
  c.provenance = p;
  c.validate("device model of '" + target.name + "'");
  return c;
}

}  // namespace dtsim
