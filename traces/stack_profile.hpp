// Software-stack profiles: what a training framework and version adds to the hardware's kernel and link times
// (host issue and synchronisation, point-to-point issue, which fused kernels it runs, per-iteration work), kept
// apart from the hardware calibration of a GPU and fabric (traces/calibration.hpp). Shipped profiles live in
// traces/stacks/<name>.json and are compiled in; a plan names its stack (ParallelPlan::stack, `--stack`).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "traces/calibration.hpp"

namespace dtsim {

struct StackProfile {
  std::string name;           ///< "megatron-lm", "megatron-deepspeed", "megatron-core", "torchtitan" or a file's name
  std::string framework;      ///< e.g. "Megatron-LM (NVIDIA), 2020-2022 releases"
  nlohmann::json provenance;  ///< where every value comes from (copied into summary.json)
  /// Development sources (file names under ../shared/measurements or tests/data/published) whose measured runs the
  /// fitted values of this profile saw: leave-one-source-out refits them without the held-out source.
  std::vector<std::string> fitted_on;

  // Host: see Calibration::host_issue_s, host_sync_each_pass, host_collective_issue_s.
  double host_issue_s = 0;
  bool host_sync_each_pass = false;
  double host_collective_issue_s = 0;
  /// A dropless MoE layer's forward waits once on the host for the token counts (Calibration::moe_dispatch_sync).
  bool moe_dispatch_sync = false;
  /// Grouped expert GEMMs run as one persistent kernel over all groups (torch._grouped_mm), not one GEMM per group
  /// (Transformer Engine's GroupedLinear) (Calibration::grouped_gemm_single_kernel).
  bool grouped_gemm_single_kernel = false;
  /// The MoE permute and unpermute run as Transformer Engine's fused kernels (Calibration::moe_permute_fusion).
  bool moe_permute_fusion = true;
  /// BF16 runs use DeepSpeed's BF16_Optimizer (Calibration::bf16_optimizer).
  bool bf16_optimizer = false;
  /// The stack's gradient buckets where the plan gives no size (Calibration::dp_bucket_min_params,
  /// dp_bucket_params_per_dp, dp_buckets_first_chunk_only).
  double dp_bucket_min_params = 0;
  double dp_bucket_params_per_dp = 0;
  bool dp_buckets_first_chunk_only = false;
  /// Software cost per pipeline send/receive (Megatron's batched isend/irecv: microseconds; DeepSpeed's pipeline
  /// engine: blocking broadcasts between interpreted instructions).
  double p2p_overhead_s = 5e-6;
  /// Which pipeline schedules' sends and receives block the rank (Calibration::p2p_sync): "none",
  /// "non_interleaved" or "all".
  std::string p2p_sync = "none";
  /// How pipeline stages with TP pass activations (Calibration::pp_scatter_gather): "none", "without_sp" or
  /// "always".
  std::string pp_scatter_gather = "none";
  /// The stack's fused attention is FlashAttention-2 (PyTorch SDPA's flash backend), which on Hopper and later reaches
  /// far less than cuDNN's or FlashAttention-3's kernels (Calibration::fa2_attention_efficiency); false = the best.
  bool fa2_attention = false;
  /// The stack's RMSNorm runs as PyTorch's composite ops when the model is not compiled (Calibration::eager_rmsnorm).
  bool eager_rmsnorm = false;
  /// The stack fuses the QKV and SwiGLU gate/up projections into one GEMM each (Calibration::fused_projections).
  bool fused_projections = true;
  /// Host time per iteration outside the passes: data loader, logging, timers, learning-rate schedule (seconds).
  double per_iteration_s = 0;
  /// Gradient clipping by global norm: a pass over the rank's gradients, then an all-reduce of the norm over the
  /// model-parallel and data-parallel groups, before the optimizer step.
  bool grad_clip = true;
  /// FP32 matrix products run on TF32 tensor cores: NVIDIA's PyTorch containers (NGC) set
  /// TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1, which overrides PyTorch's fp32 default.
  bool tf32_matmul = false;

  void validate(const std::string& ctx) const;
};

/// The stack a CLI run uses when it names none.
inline constexpr const char* kDefaultStack = "megatron-core";

/// A shipped profile by name, or a JSON file (a name ending in ".json"); ConfigError naming the known ones.
StackProfile stack_profile(const std::string& name_or_path);
/// Names of the shipped profiles, sorted.
std::vector<std::string> stack_names();
StackProfile stack_profile_from_json(const nlohmann::json& j, const std::string& ctx);
nlohmann::json to_json(const StackProfile& s);

/// The calibration a run uses: the hardware calibration `hw` with the software values of `stack` filled in, except
/// those the calibration pins (set explicitly in its file or by a fit: Calibration::pinned_software).
Calibration with_stack(const Calibration& hw, const StackProfile& stack);
/// The same for a stack named by a plan ("" = kDefaultStack). Cached per name.
Calibration with_stack(const Calibration& hw, const std::string& stack_name);

}  // namespace dtsim
