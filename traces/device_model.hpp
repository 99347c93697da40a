// Device model: the calibration of a GPU nothing was measured on, derived from a measured GPU of the same process
// generation by board power (sustained tensor-core throughput is power-limited, not clock-limited).
//
// Mechanism. A large GEMM keeps the tensor cores busy enough that the board reaches its power limit and GPU Boost
// lowers the clock until it holds there (NVIDIA's GPU Boost / power capping, nvidia-smi --power-limit): the
// "maximum achievable" matmul throughput of a GPU is then its board power divided by the energy of one tensor FLOP,
// not its datasheet peak (which is quoted at the boost clock). On the same process generation the energy per
// FLOP is taken to be the same, so the sustained throughput of the reference GPU, measured, scales with board power:
//   sustained_ref  = gemm_efficiency_max_ref x r x peak_bf16_ref   (measured: the reference's calibration; r its
//                    compute.sustained_tensor_ratio, burst -> power-capped, profiler/bench/sustained.py)
//   sustained_tgt  = sustained_ref x board_power_tgt / board_power_ref        (constant energy per tensor FLOP)
//   gemm_efficiency_max_tgt = min(gemm_efficiency_max_ref, sustained_tgt / (r x peak_bf16_tgt))   (r copied)
// A part that has more power per unit of tensor hardware than the reference is capped at the reference's
// efficiency (its clock cannot exceed the boost clock). The same factor applies to every tensor-core kernel (fused
// attention: flash_attention_efficiency, fa2_attention_efficiency); FP8/FP4 keep their scale relative to BF16 (their
// peaks are the same multiples of BF16 on Hopper and Blackwell). FlashAttention-2 is also capped at the reference's
// rate per SM on the target's SMs: its warp-level MMA (mma.sync) is not the instruction the newer peaks count
// (fa2_attention_efficiency below; on a B200 333 TFLOP/s, where FlashAttention-2 was measured at 333-362). The GEMM
// curve's half-efficiency size stands for a fixed time per GEMM (launch, prologue, wave tail): held in seconds, it
// scales with the sustained throughput. Memory-bound kernels (HBM bandwidth efficiency), host and launch costs, network
// and memory values are copied: the board power does not limit them in this model.
//
// Sources: board powers in the GPU presets (traces/cluster.cpp, datasheets); process generations from NVIDIA's
// architecture papers (Hopper GH100: TSMC 4N; Blackwell B200/B300: TSMC 4NP, a refinement of 4N). Checks, not
// fits: SimuMax's measured B200 GEMM efficiencies (MooreThreads/SimuMax configs/system/b200_bf16_ceperm.json:
// 0.45-0.50 of 2,250 TFLOP/s for large BF16 GEMMs, this model: 0.51) and the torchtitan tables' 500 W H100
// (docs/modelling.md, "Device model"). Not modelled: voltage-frequency scaling (energy per FLOP falls at lower
// clocks, so a power-capped part is faster than linear), architectural changes of the tensor cores' energy.
#pragma once

#include <string>

#include "traces/calibration.hpp"
#include "traces/cluster.hpp"

namespace dtsim {

/// The device model's arithmetic for one reference / target pair (BF16 tensor-core throughput).
struct DeviceModelScaling {
  double reference_sustained_flops = 0;  ///< gemm_efficiency_max_ref x sustained_tensor_ratio x peak_bf16_ref, FLOP/s
  double power_limited_flops = 0;        ///< reference_sustained_flops x board power ratio, FLOP/s
  double gemm_efficiency_max = 0;  ///< the target's: min(reference's, power_limited_flops / (ratio x peak_bf16_tgt))
  double tensor_factor = 0;        ///< gemm_efficiency_max_tgt / gemm_efficiency_max_ref (<= 1)
  double throughput_ratio = 0;     ///< sustained_tgt / sustained_ref (scales the half-efficiency size)
  bool power_limited = false;      ///< the target is capped below the reference's efficiency
};

/// The scaling from `reference_gpu` (calibrated by `reference`) to `target`. Throws ConfigError when either GPU
/// has no board power or no BF16 peak.
DeviceModelScaling device_model_scaling(const Calibration& reference, const GpuSpec& reference_gpu,
                                        const GpuSpec& target);

/// FlashAttention-2's efficiency on the target (Calibration::fa2_attention_efficiency): the reference's scaled by the
/// tensor factor, capped at the reference's throughput per SM on the target's SMs (its warp-level MMA does not use
/// the newer tensor-core instructions the target's peak counts). The power-scaled value where either SM count is 0.
double fa2_attention_efficiency(const Calibration& reference, const GpuSpec& reference_gpu, const GpuSpec& target,
                                const DeviceModelScaling& s);

/// The calibration of `target` derived from `reference` (the calibration of `reference_gpu`, from the file
/// `reference_source`, named in the provenance) by device_model_scaling. Every value the model does not scale is
/// copied; the provenance says which were scaled, by what, and keeps the reference's own status.
Calibration device_model_calibration(const Calibration& reference, const GpuSpec& reference_gpu, const GpuSpec& target,
                                     const std::string& reference_source);

}  // namespace dtsim
