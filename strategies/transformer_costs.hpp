// Per-layer cost model of a transformer under tensor/sequence parallelism and recompute: the operations
// (FLOPs, HBM bytes), the tensor-parallel collectives between them, parameters and stored activations.
// Activation formulas: Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models"
// (MLSys 2023), Table 2, generalised to ffn_hidden != 4h, GQA and SwiGLU (see seed-algorithms.md §6.6).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "strategies/flex_dispatch.hpp"
#include "traces/calibration.hpp"
#include "traces/cluster.hpp"
#include "traces/model.hpp"
#include "traces/plan.hpp"

namespace dtsim::cost {

/// ALL_TO_ALL: every member sends S/n bytes to every other member (S = the buffer each member holds).
/// BROADCAST / REDUCE: from / to the group's first member, as a pipelined chain in chunks (NCCL's ring
/// broadcast and reduce).
enum class CollectiveKind { ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL, BROADCAST, REDUCE };
std::string to_string(CollectiveKind k);

/// One GPU kernel: a GEMM (tensor cores) or a memory-bound kernel.
struct Op {
  std::string name;
  bool gemm = false;
  double flops = 0;          ///< FLOPs per TP rank
  double bytes = 0;          ///< HBM bytes moved per TP rank
  bool weight_grad = false;  ///< a weight-gradient GEMM (the W pass when the backward is split)
  /// GEMM shape per TP rank: batch x (m x k) * (k x n), flops = 2 batch m k n (0 when not a GEMM). The cost model
  /// needs only flops and bytes; the executor (validate/) runs kernels of these shapes.
  double m = 0, k = 0, n = 0, batch = 1;
  /// A fused attention kernel (FlashAttention forward or backward): runs at Calibration::flash_attention_efficiency
  /// of the tensor-core peak (not the GEMM curve); `bytes` still bounds it from below.
  bool flash = false;
  /// A fused attention kernel's keys per query (causal: half the keys; a ring block's own), which sets its
  /// efficiency on the calibration's curve (Calibration::flash_attention_half_kv); 0 = not attention.
  double attention_kv = 0;
  /// A GEMM in a low-precision format (FP8 recipes, MXFP8: GpuSpec::peak_fp8_flops; NVFP4: peak_fp4_flops), at the
  /// format's efficiency scale of the calibration. BF16 = the model's dtype.
  Precision precision = Precision::BF16;
  /// Sub-layer atom of a dense layer's op (see kLayerAtoms); -1 = not tagged (other kinds of layers).
  std::int8_t atom = -1;
  /// A grouped GEMM: `batch` separate GEMMs of flops / batch each (one per local expert, Transformer Engine's
  /// GroupedLinear: one cuBLAS GEMM per group over several streams), with m (k for a weight gradient) the mean tokens
  /// per group. Each group runs at the efficiency of its own size with its tokens padded to whole tiles; a batched
  /// GEMM (grouped = false: attention's score products) is one kernel over all of its batch.
  bool grouped = false;
  /// Bytes the GEMM's epilogue reads and writes to accumulate into an existing output (a weight gradient fused into
  /// an fp32 main_grad buffer: 8 per weight element), at HBM bandwidth: after a grouped GEMM's main loop, inside a
  /// dense GEMM's memory roofline (Calibration::gemm_accumulate_epilogue). 0 = the output is written once (counted
  /// in `bytes`).
  double accumulate_bytes = 0;
  /// One of `pieces` equal row-pieces of a GEMM pipelined with its tensor-parallel all-gather or reduce-scatter
  /// (gemm_piece; ParallelPlan::tp_comm_overlap). Transformer Engine issues the pieces round-robin on up to three
  /// compute streams (transformer_engine/common/comm_gemm_overlap/comm_gemm_overlap.cpp, split_overlap_ag /
  /// split_overlap_rs: `_stream_compute[i % _stream_compute.size()]`; pytorch/cpp_extensions/gemm.py
  /// _NUM_MAX_UB_STREAMS = 3), so one piece's launch and wave tail overlap the next piece's main loop and the pieces
  /// together keep the SMs as full as the whole GEMM: a piece runs at the efficiency of the whole GEMM's size
  /// (flops x pieces), not at that of a GEMM of its own size. 1 = a whole GEMM.
  int pieces = 1;
  /// The MoE unpermute: the routed tokens' bytes (T k h e) it reads. With the stack's fused kernel
  /// (Calibration::moe_permute_fusion) the op is `bytes` at the memory efficiency; eager, it is a probability multiply
  /// (these bytes read and written, streaming) and an atomic scatter-add of them into the output (these bytes plus the
  /// output, bytes - 2 x these, read and written) at Calibration::scatter_add_bandwidth_efficiency. 0 = not one.
  double scatter_src_bytes = 0;
  /// An RMSNorm (or its backward) run as PyTorch's composite ops in eager mode: the bytes those kernels move, used
  /// instead of `bytes` where the stack's norm is that composite (Calibration::eager_rmsnorm). 0 = not one, or
  /// compiled (Shape::torch_compile: Inductor fuses it into one kernel).
  double eager_norm_bytes = 0;
  /// A GEMM the stack runs as separate linear modules where others fuse one (Calibration::fused_projections false:
  /// torchtitan's wq, wk, wv for the QKV projection and w1, w3 for SwiGLU's FC1): the share of the fused GEMM's output
  /// features each module computes (empty = one GEMM). The split dimension is the forward's and the weight gradient's
  /// n, the activation gradient's k (its reduction: autograd then sums the modules' input gradients).
  std::vector<double> separate{};
  bool separate_on_k = false;  ///< the activation gradient of such a GEMM (split along k)
};

/// Which ranks of a tensor-parallel group a collective runs over. ALL: the whole group (1-D). The others are
/// the axes of the 2-D / 2.5-D grid (ROW: ranks of one grid row, COL: of one column, DEPTH: the d layers of one
/// (row, column) cell) and of the 3-D cube (INPUT = j, WEIGHT = i, OUTPUT = l of device (i, j, l)), with the
/// tp index t laid out as t = (k q + i) q + j (2-D: k = 0; 2.5-D: k the depth layer) and t = (i q + j) q + l (3-D).
enum class TpAxis { ALL, ROW, COL, DEPTH, INPUT, WEIGHT, OUTPUT };
std::string to_string(TpAxis a);
/// tp indexes of the members of `axis`'s group that contains tp index `t` (ascending).
std::vector<int> tp_axis_members(TpLayout layout, int tp, int depth, TpAxis axis, int t);

/// The rank group a collective step runs over: the tensor-parallel group (with its layout axis), the
/// context-parallel group, the expert-parallel group, or the expert-tensor-parallel group.
enum class CommGroup { TP, CP, EP, ETP };
std::string to_string(CommGroup g);

/// A step of a layer pass: a run of kernels on the compute stream, one collective (TP_COLLECTIVE: on the TP group
/// by default, or on `group`), or ring attention (RING_ATTENTION: `ring_steps` blocks of `ops` on the compute
/// stream, each block after the previous block's KV transfer of `collective_bytes` to the CP ring successor; the
/// transfer of block i overlaps the attention of block i; `ring_tail_bytes` more are sent after the last block (the
/// backward's dK, dV returning to their owner)).
struct Step {
  enum class Kind { COMPUTE, TP_COLLECTIVE, RING_ATTENTION } kind = Kind::COMPUTE;
  std::string name;
  std::vector<Op> ops;  ///< COMPUTE
  CollectiveKind collective = CollectiveKind::ALL_REDUCE;
  double collective_bytes = 0;  ///< TP_COLLECTIVE: size of the full (unsharded) buffer S, bytes
  TpAxis axis = TpAxis::ALL;    ///< TP_COLLECTIVE: the ranks it runs over
  int group_size = 0;           ///< TP_COLLECTIVE: members (0 = the whole TP group)
  CommGroup group = CommGroup::TP;
  /// ALL_TO_ALL on the EP group under skewed routing: the fraction of the routed token-slots each EP rank's
  /// experts receive (ep entries, by EP index; empty = balanced). Dispatch-shaped: member i sends
  /// collective_bytes x a2a_loads[j] to member j; combine-shaped (a2a_combine): it sends
  /// collective_bytes x a2a_loads[i] to every member j (the tokens its experts processed for j).
  std::vector<double> a2a_loads;
  bool a2a_combine = false;
  /// ALL_TO_ALL of the flex dispatcher (deepep, hybridep): collective_bytes is then the rank's tokens counted once
  /// each, sent as flex_pieces (strategies/flex_dispatch.hpp) says.
  FlexDispatch flex;
  int ring_steps = 0;          ///< RING_ATTENTION: blocks (= cp)
  double ring_tail_bytes = 0;  ///< RING_ATTENTION: bytes sent after the last block
  std::int8_t atom = -1;       ///< TP_COLLECTIVE of a dense layer: the atom it belongs to (see kLayerAtoms)
  /// The host waits for this step to end before it issues anything more (a dropless MoE dispatcher copying the token
  /// counts to the host: Calibration::moe_dispatch_sync decides whether the stack does).
  bool host_sync = false;
  /// Kernels the host issues for a COMPUTE step (0 = one per op): a SequentialMLP's expert step issues its ops once
  /// per local expert.
  double host_issues = 0;
  /// A TP all-gather whose output is quantized before its GEMM (torchao's rowwise recipe gathers in high precision):
  /// PyTorch's async-TP pass does not fuse it into an all-gather-matmul (pytorch/pytorch issue 149990, 2025-03: "the
  /// all-gather-matmul patterns were NOT being fused" with rowwise scales; the matmul-reduce-scatters were), so
  /// ParallelPlan::tp_comm_overlap leaves it whole before the GEMM.
  bool gather_unfused = false;
  double flops() const;
};

/// Shape of the per-rank work: micro-batch b, tensor-parallel degree t, sequence parallel, recompute.
struct Shape {
  int micro_batch = 1;
  int tp = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::NONE;
  /// With selective recompute: Megatron-Core's recompute_modules (RecomputeModule bits); 0 = Korthikanti's.
  unsigned recompute_modules = 0;
  TpLayout layout = TpLayout::D1;  ///< 2-D/2.5-D/3-D partition every activation over the tp ranks (as SP)
  int tp_depth = 1;
  int cp = 1;  ///< context parallel: each rank holds seq_len / cp tokens of every sequence
  CpKind cp_kind = CpKind::RING;
  int ep = 1, etp = 1;  ///< expert parallel and expert tensor parallel degrees
  Dispatcher dispatcher = Dispatcher::ALL_TO_ALL;
  /// Experts padded to a fixed capacity (Routing::pad_to_capacity with a capacity factor): the dispatch sizes are
  /// static, so no token counts are exchanged and the host does not wait for them.
  bool moe_padded = false;
  /// The local experts run one after another, each issued by the host (ParallelPlan::moe_grouped_gemm false).
  bool sequential_experts = false;
  /// Fraction of the routed token-slots each EP rank's experts receive (ep entries; empty = balanced, 1/ep each).
  std::vector<double> ep_loads = {};
  /// The EP rank whose expert work this shape describes (its load is ep_loads[ep_rank]); -1 = the most loaded.
  int ep_rank = -1;
  /// Balanced dropless routing with each token's experts drawn at random (Routing::exact false): the counts of a
  /// micro-batch scatter about the mean and every EP rank waits for the most loaded one (sampling_load_factor).
  bool random_routing = false;
  /// Precision of the linear layers' GEMMs, and the share of a weight's quantization each forward pays (1: cast every
  /// micro-batch, torchao; 1 / micro-batches: Transformer Engine casts on the first micro-batch and caches).
  Precision precision = Precision::BF16;
  double weight_cast_share = 1;
  /// Weight gradients accumulate into fp32 buffers inside their GEMM (ParallelPlan::fp32_grads: Megatron's main_grad
  /// with gradient_accumulation_fusion, its default): each weight-gradient GEMM carries Op::accumulate_bytes.
  bool fp32_grad_accumulation = false;
  /// The model runs under torch.compile (ParallelPlan::torch_compile): no eager composite norms.
  bool torch_compile = false;
  /// Load of this shape's EP rank relative to the balanced share (1 = balanced).
  double ep_load_factor() const;
};
/// The expected load of the most loaded of `sh.ep` EP ranks relative to the mean, under random balanced dropless
/// routing (Shape::random_routing; 1 otherwise): each of the rank's `slots` routed token-slots (its mean count per
/// micro-batch) lands on it as a draw of top_k of the E experts without replacement, so its count has variance
/// slots (E - k) / (E - 1) (1 - 1/ep); the ep counts sum to a constant, and the expected maximum of such exchangeable
/// counts is the mean + sqrt(slots (E - k) / (E - 1)) E[max of ep standard normals]
/// (strategies/straggler_model.hpp). Every rank waits for that one at the layer's combine, so its tokens set the
/// expert GEMMs' and the all-to-all's size. A lower bound on a trained router's imbalance.
double sampling_load_factor(const MoeSpec& moe, const Shape& sh, double slots);
/// The shape of `plan`'s per-rank work at micro-batch `micro_batch` (a replicated stage's share).
Shape shape_of(const ParallelPlan& plan, int micro_batch);

struct LayerPasses {
  std::vector<Step> forward;
  std::vector<Step> recompute;  ///< run before backward (full: the whole forward; selective: attention core)
  std::vector<Step> backward;   ///< the whole backward
  /// The backward split for zero-bubble schedules (Qi et al. 2024): B = `backward` without the weight-gradient
  /// GEMMs (same collectives), W = the weight-gradient GEMMs as one compute step (no communication).
  std::vector<Step> backward_input, backward_weight;
};

/// The backward GEMMs of a forward GEMM: the activation gradient (dgrad: dY x W^T) and the weight gradient (wgrad:
/// X^T x dY, weight_grad = true), of the forward's FLOPs each.
std::vector<Op> gemm_bwd(const Op& fwd);
/// Fills `backward_input` and `backward_weight` of `p` from `p.backward`.
void split_backward(LayerPasses& p);

/// Forward, recompute and backward passes of one transformer layer on one TP rank: a dense layer, or (moe) a layer
/// with the mixture-of-experts FFN (router, permute, dispatch, grouped expert GEMMs, combine, shared experts).
LayerPasses layer_passes(const TransformerSpec& m, const Shape& sh, bool moe = false);
/// The passes of a layer of kind `kind` (TransformerSpec::layer_kind): the standard layers as above (a sliding
/// window's attention core over its window only), the other kinds as their blocks (Mamba-2, Gated DeltaNet, attention,
/// MLP or MoE, each between its norm and its residual add with its TP collectives).
LayerPasses layer_passes(const TransformerSpec& m, const Shape& sh, LayerKind kind);
/// Fraction of the routed token-slots each of the ep EP ranks' experts receive under `routing` (experts are
/// assigned to EP ranks in contiguous blocks, as Megatron-Core does).
std::vector<double> ep_rank_loads(const Routing& routing, int experts, int ep);
/// Bytes one rank sends in a MoE all-to-all dispatch (and receives in the combine) under balanced routing:
/// tokens x top_k x hidden x dtype bytes, of which (ep - 1) / ep leave the rank.
double moe_dispatch_bytes(const TransformerSpec& m, const Shape& sh);

/// Whether Megatron-LM runs its fused scale-mask-softmax kernel for causal attention over `attn_batches`
/// (micro-batch x heads per rank) score matrices of seq_len x seq_len elements of element_bytes; otherwise the
/// layer pays its PyTorch fallback (five kernels over fp32 scores: more host issue slots and HBM traffic).
bool megatron_fused_softmax(int attn_batches, long long seq_len, double element_bytes);
/// Input embedding (first stage) and output head + loss (last stage).
LayerPasses embedding_passes(const TransformerSpec& m, const Shape& sh);
LayerPasses head_passes(const TransformerSpec& m, const Shape& sh);
/// One multi-token-prediction depth (TransformerSpec::mtp_layers) on the last stage: the shifted tokens' embedding,
/// two norms, the 2h -> h projection with its TP collectives, a layer of mtp_kind() and the shared output head + loss.
LayerPasses mtp_passes(const TransformerSpec& m, const Shape& sh);

/// Activation bytes of one layer for one micro-batch that stay stored between forward and backward.
struct ActivationBytes {
  double stored = 0;     ///< kept from forward to backward
  double transient = 0;  ///< extra bytes alive while the layer's backward runs (recomputed activations)
};
ActivationBytes layer_activation_bytes(const TransformerSpec& m, const Shape& sh, bool moe = false);
ActivationBytes layer_activation_bytes(const TransformerSpec& m, const Shape& sh, LayerKind kind);
/// Embedding output/dropout mask (first stage) and logits + fp32 loss buffers (last stage), per micro-batch.
ActivationBytes embedding_activation_bytes(const TransformerSpec& m, const Shape& sh);
ActivationBytes head_activation_bytes(const TransformerSpec& m, const Shape& sh);
ActivationBytes mtp_activation_bytes(const TransformerSpec& m, const Shape& sh);

/// Sub-layer atoms of a dense layer (kLayerAtoms, traces/plan.hpp; ParallelPlan::stage_cut_atoms): 0 first norm +
/// QKV projection, 1 attention core, 2 output projection with its TP reduction, dropout and residual add, 3 second
/// norm + FC1 + activation, 4 FC2 with its TP reduction, dropout and residual. "ln1-qkv", "attention-core", "proj",
/// "ln2-fc1", "fc2".
const char* atom_name(int atom);
/// The passes of atoms [lo, hi) of a dense layer: the ops and collectives tagged with those atoms, in order (a
/// compute step of several atoms keeps its part).
LayerPasses slice_atoms(const LayerPasses& layer, int lo, int hi);
/// Activation bytes of atoms [lo, hi) of a dense layer (they sum to layer_activation_bytes over [0, kLayerAtoms);
/// full recompute keeps the slice's inputs: the hidden state and what crosses the cut at lo).
ActivationBytes layer_activation_bytes_atoms(const TransformerSpec& m, const Shape& sh, int lo, int hi);
/// Parameters of atoms [lo, hi) of a dense layer on one TP rank (they sum to layer_params_per_rank).
double layer_params_per_rank_atoms(const TransformerSpec& m, int tp, int lo, int hi);
/// Bytes per micro-batch on one TP rank that cross a cut before atom `a`, besides the hidden state (the residual
/// stream): the QKV output (a = 1), the attention core's output (a = 2), the activation's output (a = 4); 0 otherwise.
double cut_extra_bytes(const TransformerSpec& m, const Shape& sh, int a);

/// Parameters of a dense layer every TP rank holds whole: the norms (and a GELU MLP's row-parallel biases).
double layer_replicated_params(const TransformerSpec& m);
/// Parameters held by one TP rank: one layer, and the extra parameters of the first and last stages.
/// `weight_replicas`: copies of each weight inside the TP group (2.5-D: the depth d; else 1).
double layer_params_per_rank(const TransformerSpec& m, int tp, int weight_replicas = 1);
/// One MoE layer's parameters on one rank: the part replicated over the data-parallel ranks (attention, router,
/// shared experts; split by tp) and the routed experts it holds (experts / ep of them, each split by etp).
struct MoeLayerParams {
  double dense = 0, expert = 0;
};
MoeLayerParams moe_layer_params_per_rank(const TransformerSpec& m, int tp, int ep, int etp);
/// One layer of kind `kind` on one rank: dense (split by tp but norms and router) and routed-expert parameters.
/// One multi-token-prediction depth on one rank: its layer's split, plus the projection (split by tp) and norms.
MoeLayerParams mtp_params_per_rank(const TransformerSpec& m, int tp, int ep, int etp);
MoeLayerParams kind_params_per_rank(const TransformerSpec& m, LayerKind kind, int tp, int ep, int etp,
                                    int weight_replicas = 1);
/// A layer kind the lowering and the estimator cost from their dense-layer or MoE-layer entries: a full-attention
/// layer with a dense or MoE FFN. Every other kind has its own entry (PassCosts::kinds).
inline bool base_kind(LayerKind k) { return k.mixer == MixerKind::ATTENTION && k.ffn != FfnKind::NONE; }
/// The kinds of `m`'s layers that are not base kinds, in order of first appearance.
std::vector<LayerKind> other_kinds(const TransformerSpec& m);
double first_stage_extra_params(const TransformerSpec& m, int tp);
double last_stage_extra_params(const TransformerSpec& m, int tp, int pp);

/// Bytes per element of a low-precision format's data, its block scales included (FP8 1, MXFP8 1 + 1/32, NVFP4
/// 0.5 + 1/16); `dtype_bytes` for BF16.
double precision_bytes(Precision p, double dtype_bytes);
/// Turns the linear layers' GEMMs of `p` (forward, backward) into `sh.precision` GEMMs and adds the recipe's
/// quantization kernels (amax passes, casts with cached transposes), its low-precision sequence-parallel all-gathers
/// and its amax all-reduces. No change for BF16. Called by layer_passes before the backward is split.
void apply_precision(LayerPasses& p, const TransformerSpec& m, const Shape& sh);

/// TP communication overlap (ParallelPlan::tp_comm_overlap), shared by the lowering and the estimator: whether `st`
/// is a whole-TP-group collective of `kind` that can be pipelined with a GEMM; the index of the first (or last) GEMM
/// of `ops` (-1: none); one of k pieces of a GEMM (split along its rows, at the whole GEMM's efficiency: Op::pieces).
bool tp_overlappable(const Step& st, CollectiveKind kind);
int gemm_index(const std::vector<Op>& ops, bool first);
Op gemm_piece(Op op, int k);

/// Transformer Engine's default comm-GEMM overlap methods (transformer_engine/pytorch/module/base.py, initialize_ub's
/// get_default_config; Megatron-Core passes no ub_cfgs of its own by default): the all-gathers feeding qkv_fprop,
/// fc1_fprop, proj_dgrad and fc2_dgrad by "ring_exchange" in tp pieces (num_splits = tp_size); the forward
/// reduce-scatters after proj_fprop and fc2_fprop by "pipeline" in 4 pieces (num_splits = 4); the backward
/// reduce-scatters of qkv_dgrad and fc1_dgrad by "bulk": the whole collective beside the weight-gradient GEMM
/// (qkv_wgrad, fc1_wgrad), since what it reduces is the data gradient computed before it. `chunks` > 0
/// (ParallelPlan::tp_overlap_chunks) sets the pieces of every chunked collective instead.
constexpr int kTePipelineSplits = 4;
int tp_overlap_pieces(CollectiveKind kind, int tp, int chunks);
/// Whether a reduce-scatter after `last_gemm` runs whole beside it (TE's bulk overlap): `last_gemm` is a weight
/// gradient.
bool tp_overlap_bulk(const Op& last_gemm);

/// Roofline time of one kernel with calibrated efficiencies, launch overhead included.
/// The tensor-core peak a GEMM of the model's dtype runs at: FP32 GEMMs at the TF32 peak where the stack enables it.
double gemm_peak_flops(const GpuSpec& gpu, DType dtype, const Calibration& cal);
double op_time_s(const Op& op, const GpuSpec& gpu, DType dtype, const Calibration& cal);
double step_time_s(const Step& step, const GpuSpec& gpu, DType dtype, const Calibration& cal);
/// The share of a layer's kernel time (forward and backward, burst clocks: sustained_tensor_ratio 1) spent in
/// tensor-core kernels (GEMMs, fused attention), over the model's layers (dense and MoE weighted by their counts) at
/// one sequence per micro-batch without model parallelism: a property of the model, so that every plan of a search and
/// the simulation of each see the same ratio (TP and batch scale a layer's GEMMs and memory-bound kernels alike). What
/// sets the board's power draw during a step.
double tensor_time_share(const TransformerSpec& m, const GpuSpec& gpu, const Calibration& cal);
/// The sustained ratio a step holds at tensor-core share `share`: 1 at or below half of the time, linear to
/// `full_load_ratio` at all of it. Measured on one 700 W H200 (profiler/bench/sustained.py --mixes, 2026-12-04):
/// 8192^3 GEMMs alternating with idle gaps (52% of the time in GEMMs) or HBM copies (41%) kept their back-to-back
/// burst speed (0.989, 1.016; this line 0.994, 1), with copies at 75% they ran at 0.921 (this line: 0.923), back to
/// back under load at 0.847.
double sustained_ratio_at_share(double full_load_ratio, double share);
/// `cal` with compute.sustained_tensor_ratio (the full-load ratio) replaced by the one the model's tensor-core share
/// holds; `cal` unchanged when the ratio is 1. The simulator's lowering, the estimator and the layer-chain planners
/// all cost with it (apply it once: the result holds the applied ratio).
Calibration at_tensor_share(Calibration cal, const TransformerSpec& m, const GpuSpec& gpu);
/// GEMM efficiency curve eff(f) = eff_max * f^p / (f^p + f_half^p) (p = gemm_efficiency_exponent), held at its
/// value at gemm_monotone_flops below that size, so that a GEMM's time never grows as its FLOPs shrink.
double gemm_efficiency(double flops, const Calibration& cal);
/// The size at which a GEMM of `flops` at `peak_flops` reads the efficiency curve (fitted on FP16/BF16 GEMMs): that of
/// the BF16 GEMM of the same duration, flops x peak_bf16 / peak_flops (the FP16 peak on GPUs without BF16). A GEMM's
/// fixed costs (launch, tile quantisation, epilogue) are the same in time whatever its format runs at, so a slower
/// format (FP32 on the CUDA cores: 1/14.8 of the BF16 rate on Hopper) saturates at a smaller size and a faster one
/// (FP8, FP4) at a larger. Measured on one H200 (tests/data/h200/gemm_sweep_2026-11-26.csv,
/// tests/oracle/test_gemm_formats_h200.cpp): 102 FP32 shapes and 105 FP8 ones.
double gemm_curve_flops(double flops, double peak_flops, const GpuSpec& gpu);
/// The fraction of the tensor-core peak `op` (op.flash) reaches: FlashAttention-2's fraction where the stack runs it,
/// else the calibration's forward or backward curve over the call's keys per query (Op::attention_kv,
/// Calibration::flash_attention_*); a kernel that borrows the attention efficiency (the SSD scan, the gated delta
/// rule: attention_kv 0) its flash_attention_efficiency.
double flash_attention_efficiency(const Op& op, const Calibration& cal);
/// The GEMM size f* = f_half (p - 1)^(1/p) below which f / eff(f) would grow as f shrinks (p > 1); 0 for p <= 1.
double gemm_monotone_flops(const Calibration& cal);
/// The fraction of a grouped GEMM group's padded tiles its tokens fill: tokens / (tile x E[ceil(X / tile)]) for a
/// token count X of mean `tokens` and variance `tokens` (balanced routing). 1 when tile is 0 (off).
double grouped_tile_fill(double tokens, double tile);
/// E[ceil(X / tile)] for a group's token count X of mean and variance `tokens` (balanced routing): the tiles a group
/// fills on average. Both arguments positive.
double grouped_expected_tiles(double tokens, double tile);
/// Main-loop time of a grouped GEMM run as one persistent kernel over all groups' tiles (the stack's
/// Calibration::grouped_gemm_single_kernel; torch._grouped_mm): ceil(tiles / SMs) waves of one tile each at
/// `peak_flops` / SMs x the dense curve's asymptote. Needs GpuSpec::sm_count.
double single_kernel_grouped_s(const Op& op, const GpuSpec& gpu, double peak_flops, const Calibration& cal);
/// The largest power of two (at most 16) bytes that divides every dimension (m, k, n) of a GEMM in `dtype`
/// elements: the widest vector its operands can be loaded with. 16 for an op without a shape or a memory op.
double gemm_alignment_bytes(const Op& op, DType dtype);
/// A GEMM with a dimension that is not a multiple of 16 bytes of `dtype` elements.
bool gemm_misaligned(const Op& op, DType dtype);
/// The factor on a GEMM's efficiency for its alignment: 1 at 16 bytes; each halving below costs the same factor,
/// and Calibration::gemm_misaligned_efficiency is the factor at 2 bytes (an odd fp16 dimension): 8-byte alignment
/// pays its cube root, 4-byte (also an odd fp32 dimension) the square of the cube root.
double gemm_alignment_factor(const Op& op, DType dtype, const Calibration& cal);

/// Model FLOPs of one forward pass of one sample (all layers, embedding and head, no parallelism); MoE layers count
/// the routed token-slots a capacity factor keeps (`routed_kept_fraction`, Routing::kept_fraction).
double model_forward_flops_per_sample(const TransformerSpec& m, double routed_kept_fraction = 1.0);

}  // namespace dtsim::cost
