// Transformer model specification (the "what is trained" input) with presets and JSON (schema_version 1).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dtsim {

enum class DType { FP16, BF16, FP32 };
/// Feed-forward activation: GELU (two matrices), SWIGLU (gated: three), RELU2 (squared ReLU, two matrices: Nemotron-H,
/// Megatron-Core's squared_relu; costed as GELU).
enum class MlpKind { GELU, SWIGLU, RELU2 };
/// Attention kernels: UNFUSED is Megatron-LM 2021 (QK^T GEMM, (fused) softmax, dropout, AV GEMM; the s x s scores
/// are stored for the backward); FLASH is FlashAttention-2/3 (one fused forward kernel, a fused backward that
/// recomputes the scores; only the output and the log-sum-exp are stored).
enum class AttentionKind { UNFUSED, FLASH };
std::string to_string(AttentionKind a);
AttentionKind attention_kind_from_string(const std::string& s, const std::string& ctx);

/// Mixture-of-experts feed-forward blocks (Megatron-Core naming). experts == 0: a dense model.
struct MoeSpec {
  int experts = 0;            ///< routed experts per MoE layer
  int top_k = 0;              ///< routed experts per token
  int expert_ffn_hidden = 0;  ///< FFN width of one routed expert
  int shared_experts = 0;     ///< always-active experts (DeepSeek, Qwen2-MoE); informative, widths below
  int shared_ffn_hidden = 0;  ///< total FFN width of the shared experts (Megatron moe_shared_expert_intermediate_size)
  int dense_layers = 0;       ///< the first dense_layers layers keep the dense FFN of ffn_hidden (DeepSeek: 3)
  bool sigmoid_router = false;  ///< DeepSeek-V3 scores with sigmoid; softmax otherwise
  bool expert_bias = false;     ///< GPT-OSS: routed experts have biases
  /// Group-limited routing (DeepSeek-V3's node-limited routing, report section 2.1.2; Megatron-Core
  /// --moe-router-num-groups / --moe-router-group-topk): the experts form router_groups equal contiguous groups and a
  /// token's top_k experts come from its router_group_topk best groups. 0: no limit.
  int router_groups = 0;
  int router_group_topk = 0;
  bool enabled() const { return experts > 0; }
  bool operator==(const MoeSpec&) const = default;
};

/// Multi-head latent attention (DeepSeek-V2/V3): low-rank q and kv projections with a decoupled rope key.
/// kv_lora_rank == 0: ordinary (GQA) attention.
struct MlaSpec {
  int q_lora_rank = 0;  ///< 0: q is projected from the hidden state directly
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  bool enabled() const { return kv_lora_rank > 0; }
  bool operator==(const MlaSpec&) const = default;
};

/// Token mixer of a layer: softmax attention (full, or a sliding window of TransformerSpec::sliding_window tokens),
/// a Mamba-2 (SSD) mixer, a Gated DeltaNet linear-attention mixer, or none (a feed-forward-only block).
enum class MixerKind { ATTENTION, SLIDING_ATTENTION, MAMBA2, GATED_DELTANET, NONE };
/// Feed-forward block of a layer: the dense FFN of ffn_hidden, the mixture of experts, or none (a mixer-only block).
enum class FfnKind { DENSE, MOE, NONE };
/// What one layer is. The transformer layers of before are {ATTENTION, DENSE} and {ATTENTION, MOE}.
struct LayerKind {
  MixerKind mixer = MixerKind::ATTENTION;
  FfnKind ffn = FfnKind::DENSE;
  /// A full attention layer with a dense or MoE FFN: the layer the cost model has always built.
  bool standard() const { return mixer == MixerKind::ATTENTION && ffn != FfnKind::NONE; }
  bool operator==(const LayerKind&) const = default;
};
/// "attention+dense", "mamba2", "gated-deltanet+moe", "mlp", ...
std::string to_string(LayerKind k);

/// A Mamba-2 mixer (Dao & Gu, "Transformers are SSMs", ICML 2024; Megatron-Core's MambaMixer naming): in_proj to
/// z, x, B, C, dt; a causal depthwise conv1d over x, B, C; the chunked SSD scan; a gated RMSNorm; out_proj.
/// d_inner = heads x head_dim; B and C are shared by the heads of each of `groups` groups. heads == 0: none.
struct MambaSpec {
  int heads = 0;        ///< mamba_num_heads
  int head_dim = 64;    ///< mamba_head_dim
  int groups = 8;       ///< mamba_num_groups
  int state = 128;      ///< mamba_state_dim (d_state)
  int conv_kernel = 4;  ///< d_conv
  int chunk = 128;      ///< SSD chunk length (mamba_ssm's chunk_size)
  bool enabled() const { return heads > 0; }
  int inner() const { return heads * head_dim; }
  bool operator==(const MambaSpec&) const = default;
};

/// A Gated DeltaNet linear-attention mixer (Yang, Kautz, Hatamizadeh, "Gated Delta Networks", ICLR 2025; Qwen3-Next's
/// linear_attention layers): projections to q, k (key_heads x key_head_dim), v (value_heads x value_head_dim), the
/// output gate z and the per-head beta and decay; a causal conv1d over q, k, v; the chunked gated delta rule
/// (flash-linear-attention's chunk_gated_delta_rule, chunk 64); a gated RMSNorm; out_proj. value_heads == 0: none.
struct LinearAttentionSpec {
  int key_heads = 0, value_heads = 0;
  int key_head_dim = 128, value_head_dim = 128;
  int conv_kernel = 4;
  int chunk = 64;
  bool enabled() const { return value_heads > 0; }
  int key_dim() const { return key_heads * key_head_dim; }
  int value_dim() const { return value_heads * value_head_dim; }
  bool operator==(const LinearAttentionSpec&) const = default;
};

int dtype_bytes(DType d);
std::string to_string(DType d);
DType dtype_from_string(const std::string& s, const std::string& ctx);

/// A decoder-only transformer. All sizes are element counts; bytes come from `dtype`.
struct TransformerSpec {
  std::string name;
  int num_layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;    ///< = heads for multi-head attention; fewer for GQA/MQA
  int ffn_hidden = 0;  ///< 4*hidden for GPT
  int seq_len = 0;
  int vocab = 0;
  DType dtype = DType::FP16;
  bool tied_embeddings = true;
  bool learned_pos_embedding = true;  ///< GPT: learned position table of seq_len x hidden; LLaMA: rotary (none)
  MlpKind mlp = MlpKind::GELU;
  int head_dim_override = 0;  ///< explicit head dimension (Qwen3, GPT-OSS); 0 = hidden / heads
  AttentionKind attention = AttentionKind::UNFUSED;
  bool causal = true;  ///< causal mask (decoder LM); FLASH skips the masked half of the score blocks
  MoeSpec moe;
  MlaSpec mla;
  MambaSpec mamba;
  LinearAttentionSpec linear;
  /// Which kind each layer is, one character per layer, repeated when shorter than num_layers (its length must divide
  /// num_layers). Megatron-Core's hybrid_override_pattern blocks (one norm and one residual each): 'M' Mamba-2 mixer,
  /// '*' attention, '-' dense MLP, 'E' mixture of experts. Whole layers (mixer, then the FFN: MoE from
  /// moe.dense_layers on when the model has experts, else dense): 'A' full attention, 'S' sliding-window attention,
  /// 'G' Gated DeltaNet. Empty: every layer 'A'.
  std::string layer_pattern;
  /// Tokens each query of a sliding-window ('S') layer attends to, itself included (GPT-OSS: 128). 0: none.
  int sliding_window = 0;
  /// Gated attention (Qwen3-Next): the query projection also produces a sigmoid gate on the attention output.
  bool attention_gate = false;
  /// Parallel transformer block (GPT-J, PaLM section 2, GPT-NeoX's use_parallel_residual, MegaScale NSDI'24 section
  /// 3.1): y = x + Attention(LN(x)) + MLP(LN(x)). One norm per layer; attention and MLP read the same normalised
  /// input, so with tensor parallelism their partial outputs are summed before one all-reduce (one all-gather before
  /// and one reduce-scatter after, sequence parallel) instead of two. Dense full-attention layers only.
  bool parallel_block = false;
  /// Dropout as Megatron's GPT applies it (--attention-dropout, --hidden-dropout): on the attention probabilities
  /// (unfused attention keeps its 1-byte mask and its output per score), and on the attention's and the MLP's outputs
  /// and the embedding's (a 1-byte mask per element each). false: trained without (dropout 0: PyTorch's dropout returns
  /// its input, no kernel and no mask). torchtitan's Llama has no dropout module; SAILOR's OPT applies none, its
  /// GPT-Neo the hidden ones only.
  bool attention_dropout = true;
  bool hidden_dropout = true;
  /// Multi-token prediction depth D (DeepSeek-V3: 1; Megatron-Core's mtp_num_layers): each depth embeds the tokens one
  /// further ahead (the shared embedding), normalises them and the previous depth's hidden state, projects the pair
  /// (2h -> h), runs one layer of mtp_kind() and the shared output head with its loss, on the last pipeline stage.
  int mtp_layers = 0;

  int head_dim() const { return head_dim_override > 0 ? head_dim_override : hidden / heads; }
  int kv_dim() const { return kv_heads * head_dim(); }
  /// Width of the attention's query / output projection: heads x head_dim (= hidden unless head_dim is explicit;
  /// MLA: heads x v_head_dim on the output side).
  int q_dim() const { return heads * head_dim(); }
  /// What layer `layer` (0-based) is (layer_pattern).
  LayerKind layer_kind(int layer) const;
  /// Whether any layer is not a standard full-attention layer (layer_pattern names other kinds).
  bool hybrid() const;
  /// Whether layer `layer` (0-based) has a mixture-of-experts FFN.
  bool is_moe_layer(int layer) const { return layer_kind(layer).ffn == FfnKind::MOE; }
  int num_moe_layers() const;
  /// Parameters of one layer of kind `k` (all of it, before any parallelism): its mixer, its FFN (all routed experts)
  /// and one norm per block.
  std::int64_t kind_params(LayerKind k) const;
  /// Of kind_params(k), the routed experts'.
  std::int64_t kind_expert_params(LayerKind k) const;
  /// Parameters of a mixer alone (no norm).
  std::int64_t mixer_params(MixerKind x) const;
  /// The layer each multi-token-prediction depth runs: full attention with the model's FFN (MoE when it has experts).
  LayerKind mtp_kind() const { return {MixerKind::ATTENTION, moe.enabled() ? FfnKind::MOE : FfnKind::DENSE}; }
  /// Parameters of one multi-token-prediction depth besides the shared embedding and head: two norms, the 2h x h
  /// projection, its layer and the norm before the head.
  std::int64_t mtp_depth_params() const;
  /// Parameters of one dense transformer layer (weights and biases, all of it, before tensor parallelism).
  std::int64_t layer_params() const;
  /// Parameters of the attention block of one layer (projections, norms).
  std::int64_t attention_params() const;
  /// Parameters of one MoE layer: attention, router, all routed experts, the shared experts.
  std::int64_t moe_layer_params() const;
  /// Parameters of one routed expert (its FFN).
  std::int64_t expert_params() const;
  /// Parameters a token passes through: the attention, the shared experts, top_k routed experts, the router
  /// (dense layers: all), embedding and head (Mixtral/DeepSeek "active parameters").
  std::int64_t active_params() const;
  /// Word embedding parameters (vocab x hidden), plus the position table when learned.
  std::int64_t embedding_params() const;
  /// Output projection parameters when not tied (vocab x hidden), else 0.
  std::int64_t head_params() const;
  /// Final layer norm.
  std::int64_t final_norm_params() const { return 2LL * hidden; }
  std::int64_t total_params() const;
  /// Throws ConfigError naming the field when the spec is inconsistent.
  void validate() const;
};

/// Named presets; `names` lists them in a stable order.
std::vector<std::string> model_preset_names();
/// Throws ConfigError("unknown model preset 'x' (known: ...)").
TransformerSpec model_preset(const std::string& name);
/// A preset name or a path to a JSON file (anything ending in .json or containing '/').
TransformerSpec load_model(const std::string& name_or_path);

nlohmann::json to_json(const TransformerSpec& m);
TransformerSpec model_from_json(const nlohmann::json& j, const std::string& ctx);

}  // namespace dtsim
