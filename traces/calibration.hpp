// Calibration: efficiency factors and overheads that turn hardware peaks into achieved speeds (schema_version 1).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "traces/accuracy_bands.hpp"

namespace dtsim {

struct ParallelPlan;

/// Message-size dependent correction of one link class, after SimGrid's piecewise network factors: a message of
/// m <= max_bytes bytes sees latency x latency_factor and bandwidth x bandwidth_factor (on top of the link's
/// calibrated efficiency). The first segment whose max_bytes >= m applies; none = factors 1.
struct NetworkSegment {
  std::string link;  ///< "intra" (NVLink/NVSwitch/PCIe) or "inter" (NICs)
  double max_bytes = 0;
  double latency_factor = 1;
  double bandwidth_factor = 1;
};

/// NCCL-like algorithm choice by message size: the first rule whose op matches and max_bytes >= the message
/// size gives the algorithm ("ring", "tree", "hierarchical").
struct AlgorithmRule {
  std::string op = "all-reduce";
  double max_bytes = 0;
  std::string algorithm;
};

struct Calibration {
  std::string name;           ///< e.g. "a100-sxm4-80gb default"
  std::string gpu;            ///< GPU preset this file was made for
  nlohmann::json provenance;  ///< where every number comes from (copied verbatim into summary.json)

  // Compute (roofline with efficiency): time = max(flops / (peak * eff_gemm(flops)), bytes / (hbm * eff_mem)).
  double gemm_efficiency_max = 0.7;  ///< asymptotic fraction of tensor-core peak for large GEMMs
  /// Tensor-core throughput under sustained load as a fraction of a short burst's (GPU Boost's power capping): the
  /// GEMM curve and attention efficiencies of a calibration fitted on kernel sweeps are burst figures (each call
  /// timed between synchronisations, the SM clock at boost), while a training step keeps the tensor cores busy for
  /// seconds, the board at its power limit and the clock lowered. Divides the compute time of every GEMM and fused
  /// attention kernel (strategies/transformer_costs.cpp op_time_s); memory-bound kernels keep HBM speed. Measured
  /// 0.847 on one 700 W H200 (profiler/bench/sustained.py, tests/data/h200/sustained_2026-12-04.*: 1,980 -> ~1,450
  /// MHz, "SW power cap", within 0.1 s, five GEMM shapes bf16 and FP8 alike). 1 = the efficiencies are already
  /// sustained (a calibration fitted on end-to-end training runs).
  double sustained_tensor_ratio = 1.0;
  double gemm_half_efficiency_flops = 1e9;  ///< GEMM size (FLOPs) at which efficiency is half the maximum
  /// Sharpness of the efficiency curve: eff(f) = max * f^p / (f^p + half^p). 1 = the hyperbola f / (f + half);
  /// larger p rises faster from half to max (real cuBLAS curves saturate within a few times the half size).
  double gemm_efficiency_exponent = 1.0;
  /// Efficiency factor of a GEMM whose dimensions are multiples of only 2 bytes' worth of elements (an odd fp16
  /// dimension): cuBLAS cannot use its vectorised tensor-core kernels on such leading dimensions (e.g. an unpadded
  /// GPT-2 vocabulary of 50,257 in the LM head). Graded: each halving of the vector width below 16 bytes costs
  /// the same factor, so 8-byte alignment pays its cube root and 4-byte the square of that root. 1 = no penalty.
  double gemm_misaligned_efficiency = 1.0;
  /// Tile quantisation of grouped GEMMs (one GEMM per local expert, Transformer Engine's GroupedLinear): each
  /// group's token dimension is padded to whole thread-block tiles, gemm_tile_m rows where the tokens are the rows
  /// (forward, activation gradient) and gemm_tile_k where they are the reduction (weight gradient). CUTLASS's and
  /// cuBLAS's BF16 tensor-core kernels on sm80/sm90/sm100 use 128 x (128|256) x 64 thread-block tiles. Dense GEMMs
  /// keep their fitted curve (the sweeps it was fitted on hold their own quantisation). 0 = no tile quantisation.
  double gemm_tile_m = 128;
  double gemm_tile_k = 64;
  /// The output-column tile of a single-kernel grouped GEMM (grouped_gemm_single_kernel): CUTLASS's Hopper grouped
  /// kernel as PyTorch dispatches it runs 128 x 256 x 64 tiles (aten/src/ATen/native/cuda/GroupMM.cu; its 64 x 128
  /// ping-pong variant for small groups runs two tiles per SM, the same area per wave; Blackwell's 256 x 256 tile
  /// spans two SMs, again 128 x 256 per SM).
  double gemm_tile_n = 256;
  /// The stack runs a grouped GEMM as one persistent kernel over every group's tiles (torch._grouped_mm: torchtitan's
  /// MoE since 2025-04), not one GEMM per group: the tiles of all groups fill the GPU's SMs together, a wave at a
  /// time, so many small groups run far faster than each alone (strategies/transformer_costs.cpp,
  /// single_kernel_grouped_s). Software: from the stack profile.
  bool grouped_gemm_single_kernel = false;
  /// A weight-gradient GEMM that accumulates into an fp32 gradient buffer (Megatron's gradient_accumulation_fusion
  /// into main_grad: cuBLAS with beta = 1 and an fp32 output) reads and writes that buffer in its epilogue, after the
  /// main loop: 8 bytes per weight element at HBM bandwidth, added to a grouped GEMM's time (its per-group kernels
  /// run the epilogue after their main loop) and joined to a dense GEMM's memory roofline (its persistent kernel
  /// overlaps it). false = hidden (free).
  bool gemm_accumulate_epilogue = true;
  double memory_bandwidth_efficiency = 0.8;  ///< fraction of HBM bandwidth reached by memory-bound kernels
  /// Fraction of HBM bandwidth an atomic bf16 scatter-add reaches (torch scatter_add_ / index_add_ adding each routed
  /// token's expert output into its token: the eager MoE unpermute, moe_permute_fusion false), over the bytes it reads
  /// and writes (the routed tokens once, the output twice). Measured on one H200 (tests/data/h200/
  /// moe_memory_2026-12-04.csv, profiler/bench/moe_sweep.py: weighted index_add_ over 4,096 and 16,384 tokens of five
  /// MoE shapes, less the probability multiply's two streaming passes): 0.052-0.056 with top-8, 0.063 with top-4,
  /// 0.082-0.083 with top-2; the median 0.0545 here, carried to other GPUs as the same fraction (an estimate).
  double scatter_add_bandwidth_efficiency = 0.0545;
  /// Fraction of the tensor-core peak reached by fused (Flash) attention kernels, forward and backward: with
  /// flash_attention_half_kv > 0 the forward's asymptote of the curve eff(x) = max x^p / (x^p + half^p) over the keys
  /// each query attends to in one call, x (half the sequence for causal attention; a ring-attention block's own
  /// keys), held at its minimum-time length where p > 1 (as the GEMM curve). Each thread block loops over x keys for
  /// its query tile, so its fixed costs (prologue, epilogue, the causal diagonal's masked tiles) weigh on short
  /// sequences (FlashAttention-2, Dao 2023, Figures 4-7: throughput rises with sequence length at constant tokens).
  /// Measured on one H200 (tests/data/h200/hw_sweep_2026-11-26.json, PyTorch SDPA's cuDNN kernels, causal, head dim
  /// 128): forward 0.39 of peak at 2k tokens, 0.65 at 16k; backward 0.25 and 0.50.
  double flash_attention_efficiency = 0.55;
  double flash_attention_half_kv = 0;            ///< the forward curve's half-efficiency key count; 0 = no curve
  double flash_attention_exponent = 1;           ///< the forward curve's p
  double flash_attention_backward_ratio = 1;     ///< the backward's asymptote over the forward's
  double flash_attention_backward_half_kv = 0;   ///< the backward curve's half key count; 0 = no curve
  double flash_attention_backward_exponent = 1;  ///< the backward curve's p
  /// The same for FlashAttention-2 kernels (PyTorch SDPA's flash backend), used where the stack runs them
  /// (fa2_attention): on Hopper they lack the architecture's asynchronous tensor-core instructions and reach about
  /// 0.6 of cuDNN's fused attention. 0 = as flash_attention_efficiency (Ampere, where FlashAttention-2 is the best).
  double fa2_attention_efficiency = 0;
  /// Software (the stack's): its RMSNorm runs, unless the model is compiled, as PyTorch's composite of element-wise
  /// kernels in fp32 (torchtitan's RMSNorm, torchtitan/models/norms.py: x.float(), pow, mean, rsqrt, two multiplies,
  /// type_as): the norms move Op::eager_norm_bytes instead of one fused kernel's bytes.
  bool eager_rmsnorm = false;
  /// Software (the stack's): the attention's query, key and value projections run as one GEMM, and SwiGLU's gate and
  /// up projections as one (Megatron's linear_qkv and linear_fc1, DeepSpeed's query_key_value). false: one GEMM per
  /// projection (torchtitan's wq, wk, wv and w1, w3: Op::separate), each at the efficiency of its own size.
  bool fused_projections = true;
  /// Low-precision GEMMs: the fraction of the format's own tensor-core peak a GEMM reaches, relative to what the same
  /// GEMM reaches in BF16 (the efficiency curve above times this factor). FP8 GEMMs sit further from their peak than
  /// BF16 ones (scaling epilogues, the same memory traffic per FLOP doubled); rowwise scaling costs more again.
  double fp8_gemm_efficiency_scale = 0.85;
  double fp8_rowwise_gemm_efficiency_scale = 0.75;
  double fp4_gemm_efficiency_scale = 0.7;
  /// Interference of overlapped kernels and collectives on one GPU (SMs and HBM shared with the NCCL kernels): while a
  /// collective of the rank moves data, its kernels run slower by these fractions (GEMM, memory-bound, fused
  /// attention), and while a kernel runs, the rank's collective transfers are slowed by collective_slowdown. Applied by
  /// the flow engine to the overlapping part only; 0 = no interference.
  double interference_gemm_slowdown = 0.189;
  double interference_memory_slowdown = 0.378;
  double interference_flash_slowdown = 0.21;
  double interference_collective_slowdown = 0.189;
  double kernel_launch_s = 4e-6;  ///< fixed cost per kernel (launch + tail), seconds
  /// Host (framework + launch API) time per modelled kernel: a kernel never takes less than this, because the
  /// CPU issues kernels no faster (eager PyTorch at small micro-batches is host-bound). 0 = GPU-bound only.
  double host_issue_s = 0;
  /// The host waits for the GPU (all of the rank's streams) before it issues each pass (the forward or backward of
  /// a micro-batch on a model chunk), as Megatron-LM's timers do (torch.cuda.synchronize() around every
  /// forward-compute / backward-compute): the host cannot run ahead across passes. Only with host_issue_s > 0.
  bool host_sync_each_pass = false;
  /// A dropless MoE layer's forward makes the host wait for the device once (Megatron-Core's token dispatchers read
  /// the per-expert token counts on the CPU to size the all-to-all and the grouped GEMMs: token_dispatcher.py,
  /// _maybe_dtoh_and_synchronize at cuda_sync_point; the all-gather dispatcher's .cpu(); torchtitan's .tolist() of
  /// the splits): after the router, the count exchange (a small all-gather over the EP group) and its copy to the
  /// host, the host issues nothing until the device has got there, so the host cannot run ahead across MoE layers.
  /// Experts padded to capacity (ParallelPlan routing pad_to_capacity) have static sizes and do not wait. Only with
  /// host_issue_s > 0.
  bool moe_dispatch_sync = false;
  /// Host time per collective that a pass issues (tensor-parallel all-reduce / all-gather / reduce-scatter inside a
  /// layer): the framework's autograd function, torch.distributed's call and NCCL's enqueue. It occupies the same
  /// host thread as host_issue_s, so kernels after the collective are issued later; the collective itself cannot
  /// start before it is issued. 0 = collectives cost the host nothing.
  double host_collective_issue_s = 0;
  double optimizer_bytes_per_param = 28;  ///< HBM traffic of one fused Adam step per parameter, bytes
  /// Per-GPU speed variability (strategies/straggler_model.hpp): the coefficient of variation of GPUs' sustained
  /// kernel speed across a fleet of one SKU. A synchronous step runs at the pace of its slowest GPU, so each rank
  /// waits cv x (E[max of N normals] - E[max of gpu_speed_reference_gpus normals]) x its compute time. 0.015 from
  /// Sinha et al., SC'22 (8% spread between GPUs of one SKU, read as the span of their box plots' whiskers, +-2.70
  /// standard deviations of a normal spread). 0 = off.
  double gpu_speed_cv = 0.015;
  /// The GPU count whose slowest member the compute values already hold: 1 for kernel sweeps on one GPU and for
  /// specification-based values; the size of the measured runs for a calibration fitted to iteration times.
  double gpu_speed_reference_gpus = 1;

  // Software-stack values (traces/stack_profile.hpp): filled in from the run's stack profile by with_stack(), unless
  // pinned. host_issue_s, host_sync_each_pass, host_collective_issue_s above and p2p_overhead_s below are of this kind.
  bool fa2_attention = false;  ///< the stack's attention runs FlashAttention-2 kernels (fa2_attention_efficiency)
  double per_iteration_s = 0;  ///< host time per iteration outside the passes (data loader, logging, timers)
  bool tf32_matmul = false;    ///< FP32 GEMMs run on TF32 tensor cores (NVIDIA's PyTorch containers' default)
  /// The MoE permute and unpermute run as Transformer Engine's fused kernels (Megatron-Core --moe-permute-fusion):
  /// the unpermute gathers each token's expert outputs and sums them in one streaming pass. false = eager PyTorch
  /// (torchtitan's moe.py; Megatron-Core without the flag, moe_utils.unpermute): a probability multiply, then an
  /// atomic scatter-add at scatter_add_bandwidth_efficiency.
  bool moe_permute_fusion = true;
  bool grad_clip = false;  ///< gradient clipping by global norm before the optimizer step
  /// BF16 runs train with DeepSpeed's BF16_Optimizer (deepspeed/runtime/bf16_optimizer.py, microsoft/DeepSpeed#1801,
  /// 2022-04): after every micro-batch's backward a separate pass adds the bf16 gradients into fp32 copies
  /// (update_hp_grads: a cast and an add per tensor), and under ZeRO-1 the gradients are all-reduced in full, not
  /// reduce-scattered (the pipeline engine's _bf16_reduce_grads -> buffered_allreduce_fallback), before the step
  /// and the all-gather of the updated bf16 shards (all_gather_dp_groups). See bf16_optimizer_active.
  bool bf16_optimizer = false;
  /// Data-parallel gradient buckets as the stack sizes them where the plan gives no size (ParallelPlan::dp_bucket_bytes
  /// = 0): max(dp_bucket_min_params, dp_bucket_params_per_dp x DP) parameters of gradients per bucket. Megatron-Core
  /// since 0fda386c04 (2024-04-11): max(40 M, 1 M x DP), "larger DP sizes need larger buckets to ensure collectives
  /// do not become latency-bound" (megatron/core/distributed/distributed_data_parallel.py). Both 0: PyTorch DDP's
  /// 25 MiB (kPytorchDdpBucketBytes). See dp_bucket_bytes.
  double dp_bucket_min_params = 0;
  double dp_bucket_params_per_dp = 0;
  /// Megatron's DDP keeps one gradient buffer per model chunk and buckets only the first pipeline stage's first
  /// chunk: on every other chunk (pp_rank > 0, or disable_bucketing for model_chunk_idx > 0) and without
  /// overlap_grad_reduce the chunk's whole gradient is one bucket (bucket_size = None), reduced when the chunk's last
  /// backward ends; buckets never span chunks.
  bool dp_buckets_first_chunk_only = false;
  /// Software fields this calibration sets itself (present in its file, or set by a fit): a stack profile does not
  /// override them. Names as in kSoftwareFields.
  std::vector<std::string> pinned_software;
  std::string stack;  ///< the stack profile whose values were filled in ("" = none yet)

  // Network.
  double intra_bandwidth_efficiency = 0.8;   ///< achieved / nominal NVLink bandwidth for large transfers
  double inter_bandwidth_efficiency = 0.9;   ///< achieved / nominal NIC bandwidth for large transfers
  double collective_step_overhead_s = 2e-6;  ///< software cost per ring step of a collective, seconds
  double p2p_overhead_s = 5e-6;              ///< software cost per point-to-point transfer, seconds
  /// NCCL's protocol model for ring collectives (strategies/nccl_model.hpp, after NCCL's src/graph/tuning.cc):
  /// "auto" (NCCL's choice of LL / LL128 / Simple by size; its modelled latency is a floor on the ring's simulated
  /// latency), "off" (route latencies and collective_step_overhead_s only), or "ll" / "ll128" / "simple" forced.
  std::string nccl_protocol = "auto";
  /// Pipeline sends and receives that block the rank (software-stack value): "none" (they run beside the compute),
  /// "non_interleaved" (blocking except in interleaved schedules) or "all". A blocking exchange starts when the
  /// receiving rank has posted its receive (finished the pass before the one that consumes it) and the sending rank
  /// computes nothing more until it has ended: Megatron's batched isend/irecv followed by req.wait() and
  /// torch.cuda.synchronize() (megatron/core/pipeline_parallel/p2p_communication.py, batch_p2p_sync).
  std::string p2p_sync = "none";
  /// How pipeline stages with TP pass activations (software-stack value): "none" (each TP rank sends its own copy:
  /// the sequence-parallel shard with sequence parallelism, the whole tensor without; Megatron-Core's
  /// p2p_communication.py since 39b83c7953, 2023-01-31), "without_sp" (each TP rank sends 1/t of the tensor and the
  /// receivers all-gather it over TP, except under sequence parallelism, whose shard is sent as it is: Megatron-LM's
  /// scatter_gather_tensors_in_pipeline, megatron/p2p_communication.py from 27fc468964, 2021-01, to 2023-01) or
  /// "always" (1/t and an all-gather whatever the plan: DeepSpeed's pipe_partitioned PartitionedTensor).
  std::string pp_scatter_gather = "none";

  std::vector<NetworkSegment> network_segments;      ///< sorted by link, then max_bytes
  std::vector<AlgorithmRule> collective_algorithms;  ///< in order; empty = choose by group shape

  // Memory.
  double reserved_memory_bytes = 0;  ///< CUDA context, library workspaces, allocator slack

  /// Prediction intervals of a calibration fitted to measured runs of its own cluster (`dtsim calibrate runs`): 90%
  /// bands of ln(measured / predicted) keyed by scale ("1-node", "multi-node"), from the fit's leave-one-out
  /// residuals. A run of a listed scale takes its interval from here instead of the shipped leave-one-source-out
  /// bands (traces/accuracy_bands.hpp); empty = the shipped bands. accuracy_method says how they were made.
  std::vector<AccuracyBand> accuracy_bands;
  std::string accuracy_method;

  bool pinned(const std::string& field) const;
  void pin(const std::string& field);

  /// (latency factor, bandwidth factor) for a message of `bytes` on link class `link`.
  std::pair<double, double> segment_factors(const std::string& link, double bytes) const;

  void validate(const std::string& ctx) const;
};

/// The calibration fields that belong to the software stack rather than the hardware.
inline const std::vector<std::string> kSoftwareFields = {"host_issue_s",
                                                         "host_sync_each_pass",
                                                         "host_collective_issue_s",
                                                         "p2p_overhead_s",
                                                         "p2p_sync",
                                                         "pp_scatter_gather",
                                                         "fa2_attention",
                                                         "eager_rmsnorm",
                                                         "fused_projections",
                                                         "per_iteration_s",
                                                         "grad_clip",
                                                         "tf32_matmul",
                                                         "moe_dispatch_sync",
                                                         "grouped_gemm_single_kernel",
                                                         "moe_permute_fusion",
                                                         "bf16_optimizer",
                                                         "dp_bucket_min_params",
                                                         "dp_bucket_params_per_dp",
                                                         "dp_buckets_first_chunk_only"};

/// Whether a calibration's p2p_sync makes the pipeline transfers of a schedule blocking (`interleaved`: the plan
/// runs the interleaved 1F1B schedule, whose transfers Megatron-Core overlaps since 2023-10).
bool p2p_blocking(const Calibration& c, bool interleaved);
/// How a plan's pipeline exchanges wait under a calibration (Megatron's batch_isend_irecv + wait + synchronize,
/// megatron/core/pipeline_parallel/p2p_communication.py): `sender` — after its sends a rank computes nothing until
/// they have ended (p2p_blocking, unless the plan overlaps its exchanges, pp_comm_overlap); `receiver` — a transfer
/// also starts only once the receiver has posted its receive, which a per-pass order expresses in GPipe and 1F1B
/// only. Both false without pipeline parallelism. The lowering, its footprint estimate and the estimator use this.
/// Whether a plan's MoE layers make the host wait for the device (Calibration::moe_dispatch_sync, with the host
/// modelled: host_issue_s > 0), for a model with MoE layers (`moe_model`): dropless routing only (padded experts
/// have static sizes).
bool moe_dispatch_waits(const Calibration& c, const ParallelPlan& plan, bool moe_model);
/// Whether DeepSpeed's BF16_Optimizer runs (Calibration::bf16_optimizer): a bf16 model (`bf16_model`) under ZeRO stage
/// 0 or 1 (DeepSpeed takes its ZeRO stage 1 / 2 optimizer at higher stages).
bool bf16_optimizer_active(const Calibration& c, bool bf16_model, int zero_stage);
/// Bytes one BF16_Optimizer gradient-accumulation pass moves per parameter: the cast of the bf16 gradient to fp32
/// (read 2, write 4) and the add into the fp32 copy (read 4 + 4, write 4).
inline constexpr double kBf16OptimizerAccumulateBytesPerParam = 18;
/// PyTorch DDP's default gradient bucket (torch.nn.parallel.DistributedDataParallel, bucket_cap_mb = 25).
inline constexpr double kPytorchDdpBucketBytes = 25.0 * 1048576.0;
/// The gradient bucket size, bytes, of local model chunk `chunk` of pipeline stage `stage`: the plan's
/// dp_bucket_bytes where it gives one, else the stack's (Calibration::dp_bucket_min_params, dp_bucket_params_per_dp,
/// dp_buckets_first_chunk_only; gradients of `grad_bytes_per_param` each), else PyTorch DDP's. Infinite where the
/// chunk's whole gradient is one bucket.
double dp_bucket_bytes(const Calibration& c, const ParallelPlan& plan, int stage, int chunk,
                       double grad_bytes_per_param);
struct P2pWait {
  bool sender = false;
  bool receiver = false;
};
P2pWait p2p_wait(const Calibration& c, const ParallelPlan& plan);
/// ConfigError unless `value` is a p2p_sync value ("none", "non_interleaved", "all"); `ctx` names the field.
void check_p2p_sync(const std::string& value, const std::string& ctx);
/// ConfigError unless `value` is a pp_scatter_gather value ("none", "without_sp", "always"); `ctx` names the field.
void check_pp_scatter_gather(const std::string& value, const std::string& ctx);
/// Whether a stage of TP degree > 1 receives 1/t of each pipeline transfer per TP rank and all-gathers it over TP
/// (Calibration::pp_scatter_gather) under a plan with or without sequence parallelism.
bool pp_scatter_gather(const Calibration& c, bool sequence_parallel);
/// Whether a TP rank sends 1/t of each pipeline transfer (its sequence-parallel shard, or the stack's scatter-gather)
/// rather than its own whole copy: the one rule the lowering's send_pieces and the estimator's transfer share.
bool pp_transfer_sliced(const Calibration& c, bool sequence_parallel);

/// The default calibration shipped for a GPU preset (compiled in from traces/calibration/<gpu>.json).
Calibration default_calibration(const std::string& gpu_name);
Calibration load_calibration(const std::string& path);
/// The calibration a user names: `path` (a JSON file), or "" for the default of `gpu_name`. Every front end and
/// study resolves it this way (dtsim::resolve_calibration, sweeps, plan search).
Calibration calibration_or_default(const std::string& path, const std::string& gpu_name);
nlohmann::json to_json(const Calibration& c);
Calibration calibration_from_json(const nlohmann::json& j, const std::string& ctx);

}  // namespace dtsim
