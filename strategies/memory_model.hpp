// Static memory per rank (weights, gradients, optimizer states; mixed-precision Adam, ZeRO-1) and the analytic
// activation peak per stage. The simulator produces the time-resolved version of the same quantities.
#pragma once
#include <vector>

#include "traces/calibration.hpp"
#include "traces/cluster.hpp"
#include "traces/model.hpp"
#include "traces/plan.hpp"

namespace dtsim::memory {

struct StaticMemory {
  double params = 0;           ///< parameters held by the rank
  double weight_bytes = 0;     ///< model-precision weights
  double gradient_bytes = 0;   ///< model-precision gradients (sharded over DP with ZeRO-2 and 3)
  double optimizer_bytes = 0;  ///< fp32 master weights + Adam m and v (sharded over DP with ZeRO >= 1)
  double expert_params = 0;    ///< of `params`, the routed experts' (MoE; reduced over the expert-data-parallel group)
  double step_params = 0;      ///< parameters this rank's optimizer step updates (its ZeRO shard)
  /// Low-precision copies of the linear layers' weights that Transformer Engine caches across micro-batches (FP8
  /// delayed, MXFP8, NVFP4): the row-wise and column-wise (transposed) copies with their scales.
  double lowp_weight_bytes = 0;
  /// Host memory the rank uses (ParallelPlan::optimizer_offload_fraction): the offloaded share of its optimizer
  /// states and the pinned fp32 gradients the CPU step reads. Not part of total() (device memory).
  double host_bytes = 0;
  double total() const { return weight_bytes + gradient_bytes + optimizer_bytes + lowp_weight_bytes; }
};

/// Host-memory traffic of PyTorch's CPU AdamW per fp32 parameter (torch/optim/adamw.py, _single_tensor_adamw, the
/// path for CPU tensors): eight elementwise passes (weight decay, lerp of m, v's mul and addcmul, sqrt, division,
/// eps, addcdiv) reading 48 and writing 32 bytes.
inline constexpr double kCpuAdamBytesPerParam = 80;

/// One rank's optimizer step, s: the GPU's share of the `step_params` as a memory-bound pass of
/// `gpu_bytes_per_param` at `gpu_Bps`; with optimizer offload (fraction F of the parameters on the host) the CPU
/// steps its share beside it -- F P kCpuAdamBytesPerParam at the host's memory bandwidth, after the fp32 gradients'
/// copy to the host and before the fp32 parameters' copy back (4 + 4 bytes each over the host link), or overlapping
/// them (overlap_optimizer_offload) -- and the step ends when both have.
double optimizer_step_s(const ParallelPlan& plan, const HostSpec& host, double step_params, double gpu_bytes_per_param,
                        double gpu_Bps);

/// Optimizer bytes per parameter before sharding: fp32 master copy (when the model is not fp32) + m + v.
double optimizer_bytes_per_param(DType dtype);

/// Static memory of `params` parameters under ZeRO stage `zero_stage` over `dp` data-parallel ranks
/// (Rajbhandari et al. 2020: (2 + 2 + K) bytes per parameter, K = 12 for mixed-precision Adam).
StaticMemory static_memory_for_params(double params, DType dtype, int zero_stage, int dp, bool fp32_grads = false);

/// Parameters held by one rank of pipeline stage `stage`.
double stage_params_per_rank(const TransformerSpec& m, const ParallelPlan& plan, int stage);
/// The global layer indexes of stage `stage` (all its model chunks, in order).
std::vector<int> stage_layer_indexes(const TransformerSpec& m, const ParallelPlan& plan, int stage);
/// Of stage_params_per_rank, the routed experts' parameters (0 for a dense model).
double stage_expert_params_per_rank(const TransformerSpec& m, const ParallelPlan& plan, int stage);
StaticMemory static_memory(const TransformerSpec& m, const ParallelPlan& plan, int stage);
/// DeepSpeed's BF16_Optimizer (bf16_optimizer_active) holds an fp32 copy of every gradient of the rank beside the bf16
/// gradients (bf16_optimizer.py's fp32_groups_gradients_flat, not partitioned): 4 bytes per parameter of `stage`, held
/// through the step; 0 where it does not run. Added to the gradient bytes by the lowering, the estimator and the
/// layer-chain planners' candidates (the sweep's analytic pre-filter leaves it out: the simulation then reports it).
double bf16_optimizer_grad_copy_bytes(const TransformerSpec& m, const ParallelPlan& plan, int stage,
                                      const Calibration& cal);

/// Stored activation bytes of one micro-batch on stage `stage` (its layers plus embedding/head).
double stage_activation_bytes_per_microbatch(const TransformerSpec& m, const ParallelPlan& plan, int stage);

/// Activation offloading (ParallelPlan::offload_activation_layers): of one micro-batch's stored activations on
/// `stage`, those of its offloaded layers (the first N decoder layers of each of its model chunks), and the largest
/// such layer's; and the host memory they take at most (times the most micro-batches the stage's order holds, per
/// chunk).
struct OffloadedActivations {
  double bytes = 0;          ///< per micro-batch, all the stage's chunks
  double largest_layer = 0;  ///< one offloaded layer's, per micro-batch
  double host_bytes = 0;     ///< at most at once on the host
};
OffloadedActivations offloaded_activations(const TransformerSpec& m, const ParallelPlan& plan, int stage);

/// Megatron-FSDP's all-gather prefetch (param_and_grad_buffer.py, AllGatherPipeline.all_gather_params): a unit's
/// pre-forward (pre-backward) hook gathers it and the units after it in the pass's order until the prefetched ones
/// hold `limit_params` parameters (suggested_communication_unit_size // 2: 500 M by default) or, with the double
/// buffer, one unit. For units of `unit_params` parameters in pass order, entry i is how many units before unit i
/// the hook that gathers it runs (0: its own).
constexpr double kMegatronFsdpPrefetchParams = 500e6;
std::vector<int> megatron_fsdp_prefetch(const std::vector<double>& unit_params, bool double_buffer,
                                        double limit_params = kMegatronFsdpPrefetchParams);

/// Analytic peak: static + in-flight micro-batches x activations + the largest per-layer transient
/// (ZeRO-3's gathered parameters and communication buffers are not included; the simulator tracks them).
double analytic_peak_bytes(const TransformerSpec& m, const ParallelPlan& plan, int stage, double reserved_bytes);

}  // namespace dtsim::memory
