#include "traces/model.hpp"

#include <algorithm>
#include <cstdint>

#include "traces/error.hpp"
#include "traces/json_util.hpp"

namespace dtsim {
using json_util::get;
using json_util::get_or;

namespace {
constexpr double kMaxParams = 1e15;  // ~1000x the largest published dense models; keeps every size an exact int64
constexpr int kMaxSeqLen = 1 << 24;  // tokens per sequence (see validate())
}  // namespace

int dtype_bytes(DType d) { return d == DType::FP32 ? 4 : 2; }

std::string to_string(DType d) {
  switch (d) {
    case DType::FP16: return "fp16";
    case DType::BF16: return "bf16";
    case DType::FP32: return "fp32";
  }
  return "?";
}

DType dtype_from_string(const std::string& s, const std::string& ctx) {
  if (s == "fp16") return DType::FP16;
  if (s == "bf16") return DType::BF16;
  if (s == "fp32") return DType::FP32;
  throw ConfigError(ctx + ": unknown dtype '" + s + "' (known: fp16, bf16, fp32)");
}

std::string to_string(AttentionKind a) {
  switch (a) {
    case AttentionKind::UNFUSED: return "unfused";
    case AttentionKind::FLASH: return "flash";
  }
  return "?";
}

AttentionKind attention_kind_from_string(const std::string& s, const std::string& ctx) {
  if (s == "unfused") return AttentionKind::UNFUSED;
  if (s == "flash") return AttentionKind::FLASH;
  throw ConfigError(ctx + ": unknown attention '" + s + "' (known: unfused, flash)");
}

std::string to_string(LayerKind k) {
  std::string mixer;
  switch (k.mixer) {
    case MixerKind::ATTENTION: mixer = "attention"; break;
    case MixerKind::SLIDING_ATTENTION: mixer = "sliding-attention"; break;
    case MixerKind::MAMBA2: mixer = "mamba2"; break;
    case MixerKind::GATED_DELTANET: mixer = "gated-deltanet"; break;
    case MixerKind::NONE: break;
  }
  const char* ffn = k.ffn == FfnKind::DENSE ? "mlp" : k.ffn == FfnKind::MOE ? "moe" : "";
  if (mixer.empty()) return ffn;
  return *ffn ? mixer + "+" + ffn : mixer;
}

LayerKind TransformerSpec::layer_kind(int layer) const {
  const FfnKind whole = moe.enabled() && layer >= moe.dense_layers ? FfnKind::MOE : FfnKind::DENSE;
  if (layer_pattern.empty()) return {MixerKind::ATTENTION, whole};
  switch (layer_pattern[static_cast<std::size_t>(layer) % layer_pattern.size()]) {
    case 'M': return {MixerKind::MAMBA2, FfnKind::NONE};
    case '*': return {MixerKind::ATTENTION, FfnKind::NONE};
    case '-': return {MixerKind::NONE, FfnKind::DENSE};
    case 'E': return {MixerKind::NONE, FfnKind::MOE};
    case 'S': return {MixerKind::SLIDING_ATTENTION, whole};
    case 'G': return {MixerKind::GATED_DELTANET, whole};
    default: return {MixerKind::ATTENTION, whole};  // 'A' (validate() refuses any other character)
  }
}

bool TransformerSpec::hybrid() const {
  for (char c : layer_pattern)
    if (c != 'A') return true;
  return false;
}

int TransformerSpec::num_moe_layers() const {
  if (!moe.enabled()) return 0;
  if (layer_pattern.empty()) return num_layers - moe.dense_layers;
  int n = 0;
  for (int l = 0; l < num_layers; ++l) n += is_moe_layer(l) ? 1 : 0;
  return n;
}

// Biases: GPT (GELU) layers have them on every linear layer (QKV, projection, both FFN GEMMs); SwiGLU models
// (LLaMA, Mixtral, DeepSeek, Qwen3) have none, except the routed experts of a MoE with expert_bias (GPT-OSS). Norms:
// two per layer counted as 4h (LayerNorm scale and shift; an RMSNorm has only the scale, 2h less per layer -- under
// 0.01% of any preset), and MLA's two low-rank norms.
namespace {
// One feed-forward block of width f (dense FFN, one expert, or the shared experts together).
std::int64_t ffn_params(const TransformerSpec& m, std::int64_t f, bool bias) {
  const std::int64_t h = m.hidden;
  const bool glu = m.mlp == MlpKind::SWIGLU;
  return (glu ? 3 : 2) * h * f + (bias ? (glu ? 2 : 1) * f + h : 0);
}
bool gpt_biases(const TransformerSpec& m) { return m.mlp == MlpKind::GELU; }
}  // namespace

std::int64_t TransformerSpec::attention_params() const {
  const std::int64_t h = hidden, a = heads;
  // The layer's two norms (before attention, before the FFN); a parallel block has one.
  const std::int64_t norms = (parallel_block ? 2 : 4) * h;
  if (mla.enabled()) {
    // DeepSeek-V2/V3 MLA, no biases: q down (h x q_lora) + its norm + q up (q_lora x heads*(nope+rope)), or q
    // directly (h x heads*(nope+rope)); kv down (h x (kv_lora + rope)) + its norm + kv up (kv_lora x heads*(nope+v));
    // output (heads*v x h).
    const std::int64_t ql = mla.q_lora_rank, kl = mla.kv_lora_rank, nope = mla.qk_nope_head_dim,
                       rope = mla.qk_rope_head_dim, v = mla.v_head_dim;
    const std::int64_t q = ql > 0 ? h * ql + ql + ql * a * (nope + rope) : h * a * (nope + rope);
    const std::int64_t kv = h * (kl + rope) + kl + kl * a * (nope + v);
    const std::int64_t out = a * v * h;
    return q + kv + out + norms;
  }
  const std::int64_t qd = a * head_dim(), kv = static_cast<std::int64_t>(kv_heads) * head_dim();
  std::int64_t p = h * (qd + 2 * kv) + qd * h;  // QKV and output projection weights
  if (gpt_biases(*this)) p += (qd + 2 * kv) + h;
  return p + norms;
}

std::int64_t TransformerSpec::layer_params() const {
  return attention_params() + ffn_params(*this, ffn_hidden, gpt_biases(*this));
}

std::int64_t TransformerSpec::expert_params() const {
  if (!moe.enabled()) return 0;
  return ffn_params(*this, moe.expert_ffn_hidden, gpt_biases(*this) || moe.expert_bias);
}

namespace {
// The FFN-side parameters of one MoE layer with `experts` routed experts: router (h x experts, no bias), the experts,
// the shared experts (one FFN of their total width).
std::int64_t moe_ffn_params(const TransformerSpec& m, std::int64_t experts) {
  const std::int64_t h = m.hidden;
  const std::int64_t shared = m.moe.shared_ffn_hidden > 0 ? ffn_params(m, m.moe.shared_ffn_hidden, gpt_biases(m)) : 0;
  return h * m.moe.experts + experts * m.expert_params() + shared;
}
}  // namespace

std::int64_t TransformerSpec::moe_layer_params() const {
  if (!moe.enabled()) return layer_params();
  return attention_params() + moe_ffn_params(*this, moe.experts);
}

std::int64_t TransformerSpec::mixer_params(MixerKind x) const {
  const std::int64_t h = hidden;
  switch (x) {
    case MixerKind::ATTENTION:
    case MixerKind::SLIDING_ATTENTION: {
      // attention_params() without its two norms; a gated attention's query projection also makes the gate.
      return attention_params() - (parallel_block ? 2 : 4) * h +
             (attention_gate ? h * static_cast<std::int64_t>(q_dim()) : 0);
    }
    case MixerKind::MAMBA2: {
      // Megatron-Core MambaMixer (and Hugging Face's NemotronHMamba2Mixer), no linear biases: in_proj h x (2 d_inner +
      // 2 groups state + heads), conv1d over x, B, C with a bias (kernel + 1 per channel), dt_bias, A_log and D per
      // head, the gated RMSNorm's d_inner scale, out_proj d_inner x h.
      const std::int64_t di = mamba.inner(), gn = static_cast<std::int64_t>(mamba.groups) * mamba.state,
                         nh = mamba.heads;
      return h * (2 * di + 2 * gn + nh) + (di + 2 * gn) * (mamba.conv_kernel + 1) + 3 * nh + di + di * h;
    }
    case MixerKind::GATED_DELTANET: {
      // Qwen3-Next's Qwen3NextGatedDeltaNet: in_proj_qkvz h x (2 key_dim + 2 value_dim), in_proj_ba h x 2 value
      // heads, conv1d over q, k, v without a bias, dt_bias and A_log per value head, the gated RMSNorm's
      // value_head_dim scale, out_proj value_dim x h.
      const std::int64_t kd = linear.key_dim(), vd = linear.value_dim(), vh = linear.value_heads;
      return h * (2 * kd + 2 * vd + 2 * vh) + (2 * kd + vd) * linear.conv_kernel + 2 * vh + linear.value_head_dim +
             vd * h;
    }
    case MixerKind::NONE: return 0;
  }
  return 0;
}

std::int64_t TransformerSpec::kind_expert_params(LayerKind k) const {
  return k.ffn == FfnKind::MOE ? static_cast<std::int64_t>(moe.experts) * expert_params() : 0;
}

std::int64_t TransformerSpec::kind_params(LayerKind k) const {
  if (k == LayerKind{MixerKind::ATTENTION, FfnKind::DENSE}) return layer_params();
  if (k == LayerKind{MixerKind::ATTENTION, FfnKind::MOE}) return moe_layer_params();
  const std::int64_t h = hidden;
  std::int64_t p = 0;
  // One norm per block (counted as 2h, as attention_params() counts its two).
  if (k.mixer != MixerKind::NONE) p += mixer_params(k.mixer) + 2 * h;
  if (k.ffn == FfnKind::DENSE) p += ffn_params(*this, ffn_hidden, gpt_biases(*this)) + 2 * h;
  if (k.ffn == FfnKind::MOE) p += moe_ffn_params(*this, moe.experts) + 2 * h;
  return p;
}

std::int64_t TransformerSpec::mtp_depth_params() const {
  const std::int64_t h = hidden;
  return 2 * h * h + 6 * h + kind_params(mtp_kind());
}

std::int64_t TransformerSpec::embedding_params() const {
  return static_cast<std::int64_t>(vocab) * hidden +
         (learned_pos_embedding ? static_cast<std::int64_t>(seq_len) * hidden : 0);
}

std::int64_t TransformerSpec::head_params() const {
  return tied_embeddings ? 0 : static_cast<std::int64_t>(vocab) * hidden;
}

std::int64_t TransformerSpec::total_params() const {
  const std::int64_t mtp = mtp_layers * (mtp_layers > 0 ? mtp_depth_params() : 0);
  if (!layer_pattern.empty()) {
    std::int64_t p = embedding_params() + head_params() + final_norm_params() + mtp;
    for (int l = 0; l < num_layers; ++l) p += kind_params(layer_kind(l));
    return p;
  }
  const std::int64_t moe_layers = num_moe_layers();
  return (num_layers - moe_layers) * layer_params() + (moe_layers > 0 ? moe_layers * moe_layer_params() : 0) +
         embedding_params() + head_params() + final_norm_params() + mtp;
}

std::int64_t TransformerSpec::active_params() const {
  // Each MoE block (and each MTP depth's MoE layer) with top_k of its routed experts.
  const std::int64_t inactive =
      moe.enabled() ? static_cast<std::int64_t>(moe.experts - moe.top_k) * expert_params() : 0;
  const std::int64_t mtp_active =
      mtp_layers > 0 ? mtp_layers * (mtp_depth_params() - (mtp_kind().ffn == FfnKind::MOE ? inactive : 0)) : 0;
  if (!layer_pattern.empty()) {
    std::int64_t p = total_params() - mtp_layers * (mtp_layers > 0 ? mtp_depth_params() : 0) + mtp_active;
    for (int l = 0; l < num_layers; ++l)
      if (is_moe_layer(l)) p -= inactive;
    return p;
  }
  const std::int64_t moe_layers = num_moe_layers();
  const std::int64_t moe_layer =
      moe_layers > 0 ? attention_params() + moe_ffn_params(*this, moe.top_k) : 0;  // top_k routed experts
  return (num_layers - moe_layers) * layer_params() + moe_layers * moe_layer + embedding_params() + head_params() +
         final_norm_params() + mtp_active;
}

void TransformerSpec::validate() const {
  const std::string ctx = "model '" + name + "'";
  auto positive = [&](long v, const char* field) {
    if (v <= 0) throw ConfigError(ctx + ": field '" + field + "' must be positive, got " + std::to_string(v));
  };
  auto non_negative = [&](long v, const char* field) {
    if (v < 0) throw ConfigError(ctx + ": field '" + field + "' must not be negative, got " + std::to_string(v));
  };
  positive(num_layers, "num_layers");
  positive(hidden, "hidden");
  positive(heads, "heads");
  positive(kv_heads, "kv_heads");
  positive(ffn_hidden, "ffn_hidden");
  positive(seq_len, "seq_len");
  // 2^24 = 16,777,216 tokens: beyond the longest context trained in 2026 (10M, Llama 4 Scout), and small enough that
  // token counts (seq_len x micro-batch) and the attention's seq_len^2 terms stay exact in the cost model's doubles.
  if (seq_len > kMaxSeqLen)
    throw ConfigError(ctx + ": field 'seq_len' must be at most " + std::to_string(kMaxSeqLen) + ", got " +
                      std::to_string(seq_len));
  positive(vocab, "vocab");
  non_negative(head_dim_override, "head_dim");
  // Mixture of experts: experts == 0 is a dense model (the other moe fields are then not used).
  non_negative(moe.experts, "moe.experts");
  if (moe.enabled()) {
    if (moe.top_k < 1 || moe.top_k > moe.experts)
      throw ConfigError(ctx + ": field 'moe.top_k' must be from 1 to the " + std::to_string(moe.experts) +
                        " experts, got " + std::to_string(moe.top_k));
    positive(moe.expert_ffn_hidden, "moe.expert_ffn_hidden");
    non_negative(moe.shared_experts, "moe.shared_experts");
    non_negative(moe.shared_ffn_hidden, "moe.shared_ffn_hidden");
    if (moe.shared_experts > 0 && moe.shared_ffn_hidden == 0)
      throw ConfigError(ctx + ": field 'moe.shared_ffn_hidden' must be positive (the total width of the " +
                        std::to_string(moe.shared_experts) + " shared experts), got 0");
    if (moe.router_groups != 0 || moe.router_group_topk != 0) {
      if (moe.router_groups < 1 || moe.experts % moe.router_groups != 0)
        throw ConfigError(ctx + ": field 'moe.router_groups' must divide the " + std::to_string(moe.experts) +
                          " experts, got " + std::to_string(moe.router_groups));
      if (moe.router_group_topk < 1 || moe.router_group_topk > moe.router_groups ||
          moe.router_group_topk * (moe.experts / moe.router_groups) < moe.top_k)
        throw ConfigError(ctx + ": field 'moe.router_group_topk' must be from 1 to the " +
                          std::to_string(moe.router_groups) + " groups and its groups must hold top_k = " +
                          std::to_string(moe.top_k) + " experts, got " + std::to_string(moe.router_group_topk));
    }
    if (moe.dense_layers < 0 || moe.dense_layers >= num_layers)
      throw ConfigError(ctx + ": field 'moe.dense_layers' must be from 0 to num_layers - 1 = " +
                        std::to_string(num_layers - 1) + ", got " + std::to_string(moe.dense_layers));
  }
  // Multi-head latent attention: kv_lora_rank == 0 is ordinary attention (the other mla fields are then not used).
  non_negative(mla.kv_lora_rank, "mla.kv_lora_rank");
  if (mla.enabled()) {
    non_negative(mla.q_lora_rank, "mla.q_lora_rank");
    positive(mla.qk_nope_head_dim, "mla.qk_nope_head_dim");
    positive(mla.qk_rope_head_dim, "mla.qk_rope_head_dim");
    positive(mla.v_head_dim, "mla.v_head_dim");
  }
  // Layer kinds (layer_pattern) and the mixers they name.
  if (!layer_pattern.empty()) {
    for (char c : layer_pattern)
      if (std::string("ASGM*-E").find(c) == std::string::npos)
        throw ConfigError(ctx + ": field 'layer_pattern' has '" + std::string(1, c) +
                          "' (known: A attention layer, S sliding-window attention layer, G Gated DeltaNet layer, M "
                          "Mamba-2 block, * attention block, - MLP block, E MoE block)");
    if (num_layers % static_cast<int>(layer_pattern.size()) != 0)
      throw ConfigError(ctx + ": field 'layer_pattern' has " + std::to_string(layer_pattern.size()) +
                        " characters, which do not divide num_layers " + std::to_string(num_layers));
    auto needs = [&](char c, bool ok, const std::string& what) {
      if (layer_pattern.find(c) != std::string::npos && !ok)
        throw ConfigError(ctx + ": field 'layer_pattern' has '" + std::string(1, c) + "' layers but " + what);
    };
    needs('M', mamba.enabled(), "no 'mamba' object (heads, head_dim, groups, state)");
    needs('G', linear.enabled(), "no 'linear_attention' object (key_heads, value_heads, head dims)");
    needs('S', sliding_window > 0, "no positive 'sliding_window'");
    needs('E', moe.enabled(), "no 'moe' object");
  }
  non_negative(sliding_window, "sliding_window");
  if (parallel_block && (moe.enabled() || hybrid() || mtp_layers > 0))
    throw ConfigError(ctx + ": field 'parallel_block' models dense full-attention layers only ('" + name +
                      "' has experts, other layer kinds or multi-token prediction)");
  if (mtp_layers < 0 || mtp_layers > 8)
    throw ConfigError(ctx + ": field 'mtp_layers' must be from 0 to 8, got " + std::to_string(mtp_layers));
  non_negative(mamba.heads, "mamba.heads");
  if (mamba.enabled()) {
    positive(mamba.head_dim, "mamba.head_dim");
    positive(mamba.groups, "mamba.groups");
    positive(mamba.state, "mamba.state");
    positive(mamba.conv_kernel, "mamba.conv_kernel");
    positive(mamba.chunk, "mamba.chunk");
    if (mamba.heads % mamba.groups != 0)
      throw ConfigError(ctx + ": mamba.heads " + std::to_string(mamba.heads) + " is not divisible by mamba.groups " +
                        std::to_string(mamba.groups));
  }
  non_negative(linear.value_heads, "linear_attention.value_heads");
  if (linear.enabled()) {
    positive(linear.key_heads, "linear_attention.key_heads");
    positive(linear.key_head_dim, "linear_attention.key_head_dim");
    positive(linear.value_head_dim, "linear_attention.value_head_dim");
    positive(linear.conv_kernel, "linear_attention.conv_kernel");
    positive(linear.chunk, "linear_attention.chunk");
    if (linear.value_heads % linear.key_heads != 0)
      throw ConfigError(ctx + ": linear_attention.value_heads " + std::to_string(linear.value_heads) +
                        " is not divisible by key_heads " + std::to_string(linear.key_heads));
  }
  if (head_dim_override == 0 && !mla.enabled() && hidden % heads != 0)
    throw ConfigError(ctx + ": hidden " + std::to_string(hidden) + " is not divisible by heads " +
                      std::to_string(heads) + " (or give head_dim)");
  if (heads % kv_heads != 0)
    throw ConfigError(ctx + ": heads " + std::to_string(heads) + " is not divisible by kv_heads " +
                      std::to_string(kv_heads));
  // q_dim() and kv_dim() are int products: heads x head_dim must fit (it is at most hidden without head_dim).
  const double hd = head_dim_override > 0 ? head_dim_override : static_cast<double>(hidden) / heads;
  if (static_cast<double>(heads) * hd > INT32_MAX)
    throw ConfigError(ctx + ": heads " + std::to_string(heads) + " x head_dim " + std::to_string(head_dim_override) +
                      " is beyond what dtsim models (at most " + std::to_string(INT32_MAX) + ")");
  // total_params() and the per-layer sizes are int64 products of these fields: bound them (in double) first. Every
  // term below bounds one of the int64 products of attention_params(), layer_params(), expert_params() and
  // moe_layer_params(); the sum bounds total_params().
  const double h = hidden, a = heads, qd = a * hd, kv = kv_heads * hd, f = ffn_hidden;
  double attn = h * (qd + 2 * kv) + (qd + 2 * kv) + qd * h + h + 4 * h;
  if (mla.enabled()) {
    const double ql = mla.q_lora_rank, kl = mla.kv_lora_rank, qk = double(mla.qk_nope_head_dim) + mla.qk_rope_head_dim;
    attn = h * ql + ql + ql * a * qk + h * a * qk + h * (kl + mla.qk_rope_head_dim) + kl +
           kl * a * (double(mla.qk_nope_head_dim) + mla.v_head_dim) + a * mla.v_head_dim * h + 4 * h;
  }
  double ffn = 3 * h * f + 2 * f + h;
  if (moe.enabled()) {
    const double E = moe.experts, ef = moe.expert_ffn_hidden, sf = moe.shared_ffn_hidden;
    ffn = std::max(ffn, h * E + E * (3 * h * ef + 2 * ef + h) + 3 * h * sf + 2 * sf + h);
  }
  // The other mixers' products (in and out projections, conv1d channels), in double.
  const double di = static_cast<double>(mamba.heads) * mamba.head_dim,
               gn = static_cast<double>(mamba.groups) * mamba.state;
  attn =
      std::max(attn, h * (2 * di + 2 * gn + mamba.heads) + (di + 2 * gn) * (mamba.conv_kernel + 1.0) + di * h + 2 * h);
  const double kd = static_cast<double>(linear.key_heads) * linear.key_head_dim,
               vd = static_cast<double>(linear.value_heads) * linear.value_head_dim;
  attn = std::max(
      attn, h * (2 * kd + 2 * vd + 2.0 * linear.value_heads) + (2 * kd + vd) * linear.conv_kernel + vd * h + 2 * h);
  if (attention_gate) attn += h * qd;
  const double params = (num_layers + std::max(0, mtp_layers)) * (attn + ffn + 2 * h * h) + 2.0 * vocab * h +
                        static_cast<double>(seq_len) * h + 2 * h;
  if (!(params <= kMaxParams))
    throw ConfigError(ctx + ": " + std::to_string(num_layers) + " layers of hidden " + std::to_string(hidden) +
                      ", ffn_hidden " + std::to_string(ffn_hidden) + ", vocab " + std::to_string(vocab) +
                      (moe.enabled() ? ", " + std::to_string(moe.experts) + " experts of expert_ffn_hidden " +
                                           std::to_string(moe.expert_ffn_hidden)
                                     : std::string()) +
                      " make more than 10^15 parameters, beyond what dtsim models");
}

namespace {
TransformerSpec gpt(const std::string& name, int layers, int hidden, int heads, int seq, int vocab) {
  TransformerSpec m;
  m.name = name;
  m.num_layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.ffn_hidden = 4 * hidden;
  m.seq_len = seq;
  m.vocab = vocab;
  m.dtype = DType::FP16;
  m.tied_embeddings = true;
  m.learned_pos_embedding = true;
  m.mlp = MlpKind::GELU;
  return m;
}
TransformerSpec llama(const std::string& name, int layers, int hidden, int heads, int kv, int ffn) {
  TransformerSpec m = gpt(name, layers, hidden, heads, 4096, 32000);
  m.kv_heads = kv;
  m.ffn_hidden = ffn;
  m.dtype = DType::BF16;
  m.tied_embeddings = false;
  m.learned_pos_embedding = false;
  m.mlp = MlpKind::SWIGLU;
  return m;
}

// A current open-weight decoder as its Hugging Face config.json describes it: bf16, SwiGLU, rotary positions (no
// learned table), untied embeddings, no attention biases, FlashAttention kernels.
TransformerSpec open_weights(const std::string& name, int layers, int hidden, int heads, int kv, int ffn, int vocab,
                             int seq) {
  TransformerSpec m = llama(name, layers, hidden, heads, kv, ffn);
  m.vocab = vocab;
  m.seq_len = seq;
  m.attention = AttentionKind::FLASH;
  return m;
}
TransformerSpec with_moe(TransformerSpec m, int experts, int top_k, int expert_ffn) {
  m.moe.experts = experts;
  m.moe.top_k = top_k;
  m.moe.expert_ffn_hidden = expert_ffn;
  return m;
}
// DeepSeek-V3's layout (61 layers of 7168, MLA, experts of 2048 with one shared, sigmoid router).
TransformerSpec deepseek_like(const std::string& name, int heads, int experts, int dense_layers, int vocab) {
  TransformerSpec m = with_moe(open_weights(name, 61, 7168, heads, heads, 18432, vocab, 4096), experts, 8, 2048);
  m.moe.shared_experts = 1;
  m.moe.shared_ffn_hidden = 2048;
  m.moe.dense_layers = dense_layers;
  m.moe.sigmoid_router = true;
  m.mla = {1536, 512, 128, 64, 128};
  return m;
}
// Node-limited routing: 8 groups of 32 experts, a token's experts from its best 4 (config.json n_group 8,
// topk_group 4; report section 2.1.2). Kimi K2 and GLM-4.5 route without a group limit (n_group 1).
TransformerSpec deepseek_v3() {
  TransformerSpec m = deepseek_like("deepseek-v3", 128, 256, 3, 129280);
  m.moe.router_groups = 8;
  m.moe.router_group_topk = 4;
  return m;
}
// DeepSeek-V3 as trained: with its one multi-token-prediction depth (report section 2.2).
TransformerSpec deepseek_v3_mtp() {
  TransformerSpec m = deepseek_v3();
  m.name = "deepseek-v3-mtp";
  m.mtp_layers = 1;
  return m;
}
// Kimi K2: DeepSeek-V3's architecture with 384 experts, 64 heads and one dense layer.
TransformerSpec kimi_k2() { return deepseek_like("kimi-k2", 64, 384, 1, 163840); }
TransformerSpec glm45() {
  TransformerSpec m = with_moe(open_weights("glm-4.5", 92, 5120, 96, 8, 12288, 151552, 4096), 160, 8, 1536);
  m.head_dim_override = 128;
  m.moe.shared_experts = 1;
  m.moe.shared_ffn_hidden = 1536;
  m.moe.dense_layers = 3;
  m.moe.sigmoid_router = true;
  return m;
}
TransformerSpec qwen3_moe(const std::string& name, int layers, int hidden, int heads, int kv, int ffn, int expert_ffn) {
  TransformerSpec m = with_moe(open_weights(name, layers, hidden, heads, kv, ffn, 151936, 4096), 128, 8, expert_ffn);
  m.head_dim_override = 128;
  return m;
}
TransformerSpec gpt_oss_120b() {
  TransformerSpec m = with_moe(open_weights("gpt-oss-120b", 36, 2880, 64, 8, 2880, 201088, 4096), 128, 4, 2880);
  m.head_dim_override = 64;
  m.moe.expert_bias = true;
  m.layer_pattern = "SA";  // layer_types: sliding_attention and full_attention alternate, sliding first
  m.sliding_window = 128;
  return m;
}

// Nemotron-H (Megatron-Core hybrid): Mamba-2 blocks of 64-wide heads in 8 groups, squared-ReLU MLP blocks, GQA
// attention blocks of 8 groups of 128, no biases, untied embeddings, vocabulary 131072, seq 8192.
TransformerSpec nemotron_h(const std::string& name, const std::string& pattern, int hidden, int heads, int ffn,
                           int mamba_heads, int mamba_state) {
  TransformerSpec m = open_weights(name, static_cast<int>(pattern.size()), hidden, heads, 8, ffn, 131072, 8192);
  m.head_dim_override = 128;
  m.mlp = MlpKind::RELU2;
  m.layer_pattern = pattern;
  m.mamba = {mamba_heads, 64, 8, mamba_state, 4, 128};
  return m;
}
TransformerSpec nemotron_3_nano() {
  TransformerSpec m =
      nemotron_h("nemotron-3-nano", "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", 2688, 32, 1856, 64, 128);
  m.kv_heads = 2;
  m.moe = {128, 6, 1856, 1, 3712, 0, true, false};
  return m;
}
TransformerSpec qwen3_next_80b() {
  TransformerSpec m = with_moe(open_weights("qwen3-next-80b-a3b", 48, 2048, 16, 2, 5120, 151936, 4096), 512, 10, 512);
  m.head_dim_override = 256;
  m.moe.shared_experts = 1;
  m.moe.shared_ffn_hidden = 512;
  m.layer_pattern = "GGGA";
  m.attention_gate = true;
  m.linear = {16, 32, 128, 128, 4, 64};
  return m;
}

struct Preset {
  const char* name;
  TransformerSpec spec;
};

// GPT-3 shapes: Brown et al. 2020, Table 2.1 (175B: 96 layers, d_model 12288, 96 heads; XL/1.3B: 24 layers,
// d_model 2048 with 16 heads of 128 as Megatron-LM configures it -- the table lists 24 heads of 128, which does
// not divide 2048),
// vocabulary padded to 51200 as Megatron-LM does. Megatron family: Narayanan et al. SC'21, Table 1
// (seq 2048, vocab 51200). LLaMA 2: Touvron et al. 2023 (7B: 32x4096, 32 heads, ffn 11008; 70B: 80x8192,
// 64 heads, 8 kv heads, ffn 28672; seq 4096, vocab 32000).
// Open-weight models, shapes from each model's config.json on Hugging Face (hidden_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, head_dim, intermediate_size, vocab_size, tie_word_embeddings = false for
// all of them; MoE: num_local_experts / num_experts / n_routed_experts, num_experts_per_tok, moe_intermediate_size):
//   llama3-8b, -70b: meta-llama/Meta-Llama-3-8B and Meta-Llama-3-70B config.json; llama3-405b:
//     meta-llama/Llama-3.1-405B config.json (405B shipped with Llama 3.1); seq 8192 (Llama 3's pre-training length).
//   mixtral-8x7b: mistralai/Mixtral-8x7B-v0.1 config.json (8 experts, top-2, every layer MoE, each expert the FFN of
//     14336); seq 4096, not the 32768 of max_position_embeddings, so that it runs with the plans of llama2-7b without
//     context parallelism (a 32k run is this preset's JSON with "seq_len": 32768).
//   deepseek-v3: deepseek-ai/DeepSeek-V3 config.json (also inference/configs/config_671B.json in the GitHub
//     repository): MLA q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128;
//     first_k_dense_replace 3 dense layers of 18432; 256 routed experts of 2048, top-8, n_shared_experts 1 of 2048;
//     scoring_func sigmoid; seq 4096 (DeepSeek-V3 report, pre-training length). deepseek-v3-mtp adds the MTP depth
//     (num_nextn_predict_layers 1; report section 2.2: embedding and output head shared with the main model, which
//     the checkpoint's 14B MTP module stores again).
//   qwen3-30b-a3b, qwen3-235b-a22b: Qwen/Qwen3-30B-A3B and Qwen/Qwen3-235B-A22B config.json (head_dim 128, 128
//     experts, top-8, no shared experts, every layer MoE); seq 4096 (Qwen3 report, general pre-training stage).
//   gpt-oss-120b: openai/gpt-oss-120b config.json (head_dim 64, 128 experts of 2880, top-4, experts with biases;
//     attention biases and sinks, 8000 + 64 per layer, are not counted); seq 4096 (initial_context_length); layer_types
//     alternate a sliding window of 128 tokens (sliding_window) and full attention. The sinks (one logit per head in
//     the softmax's denominator) cost nothing the model counts.
//   nemotron-h-8b, nemotron-h-56b, nemotron-3-nano: Megatron-Bridge src/megatron/bridge/models/nemotronh/
//     nemotron_h_provider.py (NemotronHModelProvider8B / 56B, Nemotron3NanoProvider: hybrid_layer_pattern,
//     hidden_size, mamba_num_heads, mamba_state_dim, ffn_hidden_size, num_attention_heads; the base class:
//     mamba_num_groups 8, mamba_head_dim 64, num_query_groups 8, squared_relu, seq_length 8192); Nemotron 3 Nano: 2
//     query groups, 128 experts of 1856, top-6, a shared expert of 3712, sigmoid router, seq 8192 here (its provider's
//     262144 is the long-context length).
//   kimi-k2: moonshotai/Kimi-K2-Base config.json (DeepSeek-V3's MLA and MoE layout: 64 heads, 384 experts of 2048,
//     top-8, one shared expert, first_k_dense_replace 1, sigmoid scoring, vocab 163840); seq 4096 (Kimi K2 report,
//     arXiv 2507.20534: pre-trained at 4k, then extended).
//   glm-4.5: zai-org/GLM-4.5 config.json (92 layers, hidden 5120, 96 heads of 128 and 8 kv heads, 160 experts of
//     1536, top-8, one shared expert, first_k_dense_replace 3, vocab 151552; its qkv biases and QK norms, 15k per
//     layer, are not counted); seq 4096 (GLM-4.5 report, arXiv 2508.06471: 4k in general pre-training). MTP layers of
//     both are not modelled.
//   qwen3-next-80b-a3b: Qwen/Qwen3-Next-80B-A3B-Instruct config.json (hidden 2048, 48 layers, full_attention_interval
//     4: three Gated DeltaNet layers, then one gated attention layer of 16 heads of 256 and 2 kv heads; linear
//     attention 16 key heads and 32 value heads of 128, conv kernel 4; 512 experts of 512, top-10, a shared expert of
//     512, every layer MoE); seq 4096 as the qwen3 presets. Its MTP module is not modelled.
const std::vector<Preset>& presets() {
  static const std::vector<Preset> list = {
      {"gpt3-1.3b", gpt("gpt3-1.3b", 24, 2048, 16, 2048, 51200)},
      {"gpt3-175b", gpt("gpt3-175b", 96, 12288, 96, 2048, 51200)},
      {"megatron-1.7b", gpt("megatron-1.7b", 24, 2304, 24, 2048, 51200)},
      {"megatron-3.6b", gpt("megatron-3.6b", 30, 3072, 32, 2048, 51200)},
      {"megatron-7.5b", gpt("megatron-7.5b", 36, 4096, 32, 2048, 51200)},
      {"megatron-18b", gpt("megatron-18b", 40, 6144, 48, 2048, 51200)},
      {"megatron-39b", gpt("megatron-39b", 48, 8192, 64, 2048, 51200)},
      {"megatron-76b", gpt("megatron-76b", 60, 10240, 80, 2048, 51200)},
      {"megatron-145b", gpt("megatron-145b", 80, 12288, 96, 2048, 51200)},
      {"megatron-310b", gpt("megatron-310b", 96, 16384, 128, 2048, 51200)},
      {"megatron-530b", gpt("megatron-530b", 105, 20480, 128, 2048, 51200)},
      {"megatron-1t", gpt("megatron-1t", 128, 25600, 160, 2048, 51200)},
      {"llama2-7b", llama("llama2-7b", 32, 4096, 32, 32, 11008)},
      {"llama2-70b", llama("llama2-70b", 80, 8192, 64, 8, 28672)},
      {"llama3-8b", open_weights("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192)},
      {"llama3-70b", open_weights("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192)},
      {"llama3-405b", open_weights("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192)},
      {"mixtral-8x7b", with_moe(open_weights("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 4096), 8, 2, 14336)},
      {"deepseek-v3", deepseek_v3()},
      {"deepseek-v3-mtp", deepseek_v3_mtp()},
      {"qwen3-30b-a3b", qwen3_moe("qwen3-30b-a3b", 48, 2048, 32, 4, 6144, 768)},
      {"qwen3-235b-a22b", qwen3_moe("qwen3-235b-a22b", 94, 4096, 64, 4, 12288, 1536)},
      {"gpt-oss-120b", gpt_oss_120b()},
      {"nemotron-h-8b",
       nemotron_h("nemotron-h-8b", "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-", 4096, 32, 21504, 128, 128)},
      {"nemotron-h-56b", nemotron_h("nemotron-h-56b",
                                    "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-"
                                    "M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
                                    8192, 64, 32768, 256, 256)},
      {"nemotron-3-nano", nemotron_3_nano()},
      {"kimi-k2", kimi_k2()},
      {"glm-4.5", glm45()},
      {"qwen3-next-80b-a3b", qwen3_next_80b()},
  };
  return list;
}

std::string known_list() {
  std::string s;
  for (const auto& p : presets()) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}
}  // namespace

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const auto& p : presets()) names.emplace_back(p.name);
  return names;
}

TransformerSpec model_preset(const std::string& name) {
  for (const auto& p : presets())
    if (name == p.name) return p.spec;
  throw ConfigError("unknown model preset '" + name + "' (known: " + known_list() + ")");
}

TransformerSpec load_model(const std::string& name_or_path) {
  bool is_file = name_or_path.find('/') != std::string::npos ||
                 (name_or_path.size() > 5 && name_or_path.substr(name_or_path.size() - 5) == ".json");
  TransformerSpec m = is_file ? model_from_json(json_util::read_file(name_or_path), "model file '" + name_or_path + "'")
                              : model_preset(name_or_path);
  m.validate();
  return m;
}

nlohmann::json to_json(const TransformerSpec& m) {
  nlohmann::json j = {{"schema_version", 1},
                      {"name", m.name},
                      {"num_layers", m.num_layers},
                      {"hidden", m.hidden},
                      {"heads", m.heads},
                      {"kv_heads", m.kv_heads},
                      {"ffn_hidden", m.ffn_hidden},
                      {"seq_len", m.seq_len},
                      {"vocab", m.vocab},
                      {"dtype", to_string(m.dtype)},
                      {"tied_embeddings", m.tied_embeddings},
                      {"learned_pos_embedding", m.learned_pos_embedding},
                      {"mlp", m.mlp == MlpKind::SWIGLU  ? "swiglu"
                              : m.mlp == MlpKind::RELU2 ? "squared-relu"
                                                        : "gelu"},
                      {"params", m.total_params()}};
  // The newer keys only where they differ from their defaults: a model without them writes what dtsim wrote before
  // (summary.json of the golden scenarios, the sweep's scenario ids hash this text).
  if (m.head_dim_override > 0) j["head_dim"] = m.head_dim_override;
  if (m.attention != AttentionKind::UNFUSED) j["attention"] = to_string(m.attention);
  if (!m.causal) j["causal"] = false;
  if (m.moe.enabled()) {
    j["moe"] = {{"experts", m.moe.experts},
                {"top_k", m.moe.top_k},
                {"expert_ffn_hidden", m.moe.expert_ffn_hidden},
                {"shared_experts", m.moe.shared_experts},
                {"shared_ffn_hidden", m.moe.shared_ffn_hidden},
                {"dense_layers", m.moe.dense_layers},
                {"router", m.moe.sigmoid_router ? "sigmoid" : "softmax"},
                {"expert_bias", m.moe.expert_bias}};
    if (m.moe.router_groups > 0) {  // only where set: other models write what they wrote before
      j["moe"]["router_groups"] = m.moe.router_groups;
      j["moe"]["router_group_topk"] = m.moe.router_group_topk;
    }
    j["active_params"] = m.active_params();
  }
  if (!m.layer_pattern.empty()) j["layer_pattern"] = m.layer_pattern;
  if (m.sliding_window > 0) j["sliding_window"] = m.sliding_window;
  if (m.attention_gate) j["attention_gate"] = true;
  if (m.parallel_block) j["parallel_block"] = true;
  if (!m.attention_dropout) j["attention_dropout"] = false;
  if (!m.hidden_dropout) j["hidden_dropout"] = false;
  if (m.mtp_layers > 0) j["mtp_layers"] = m.mtp_layers;
  if (m.mamba.enabled())
    j["mamba"] = {{"heads", m.mamba.heads}, {"head_dim", m.mamba.head_dim},       {"groups", m.mamba.groups},
                  {"state", m.mamba.state}, {"conv_kernel", m.mamba.conv_kernel}, {"chunk", m.mamba.chunk}};
  if (m.linear.enabled())
    j["linear_attention"] = {{"key_heads", m.linear.key_heads},       {"value_heads", m.linear.value_heads},
                             {"key_head_dim", m.linear.key_head_dim}, {"value_head_dim", m.linear.value_head_dim},
                             {"conv_kernel", m.linear.conv_kernel},   {"chunk", m.linear.chunk}};
  if (m.mla.enabled())
    j["mla"] = {{"q_lora_rank", m.mla.q_lora_rank},
                {"kv_lora_rank", m.mla.kv_lora_rank},
                {"qk_nope_head_dim", m.mla.qk_nope_head_dim},
                {"qk_rope_head_dim", m.mla.qk_rope_head_dim},
                {"v_head_dim", m.mla.v_head_dim}};
  return j;
}

namespace {
// An optional sub-object ("moe", "mla"): null when absent.
const nlohmann::json* sub_object(const nlohmann::json& j, const std::string& ctx, const std::string& key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  if (!it->is_object())
    throw ConfigError(ctx + ": field '" + key + "' has the wrong type (" + it->type_name() + "; expected an object)");
  return &*it;
}
}  // namespace

TransformerSpec model_from_json(const nlohmann::json& j, const std::string& ctx) {
  json_util::check_schema_version(j, ctx, 1);
  json_util::reject_unknown(j, ctx,
                            {"schema_version",
                             "name",
                             "num_layers",
                             "hidden",
                             "heads",
                             "kv_heads",
                             "ffn_hidden",
                             "seq_len",
                             "vocab",
                             "dtype",
                             "tied_embeddings",
                             "learned_pos_embedding",
                             "mlp",
                             "head_dim",
                             "attention",
                             "causal",
                             "moe",
                             "mla",
                             "layer_pattern",
                             "sliding_window",
                             "attention_gate",
                             "parallel_block",
                             "attention_dropout",
                             "hidden_dropout",
                             "mtp_layers",
                             "mamba",
                             "linear_attention",
                             "params",
                             "active_params"});
  TransformerSpec m;
  m.name = get_or<std::string>(j, ctx, "name", "custom");
  m.num_layers = get<int>(j, ctx, "num_layers");
  m.hidden = get<int>(j, ctx, "hidden");
  m.heads = get<int>(j, ctx, "heads");
  m.kv_heads = get_or<int>(j, ctx, "kv_heads", m.heads);
  // The default 4 * hidden in 64 bits: a hidden of 2^30 or more makes it too large for validate() to accept.
  m.ffn_hidden = get_or<int>(j, ctx, "ffn_hidden", static_cast<int>(std::min<std::int64_t>(4LL * m.hidden, INT32_MAX)));
  m.seq_len = get<int>(j, ctx, "seq_len");
  m.vocab = get<int>(j, ctx, "vocab");
  m.dtype = dtype_from_string(get_or<std::string>(j, ctx, "dtype", "fp16"), ctx);
  m.tied_embeddings = get_or<bool>(j, ctx, "tied_embeddings", true);
  m.learned_pos_embedding = get_or<bool>(j, ctx, "learned_pos_embedding", true);
  std::string mlp = get_or<std::string>(j, ctx, "mlp", "gelu");
  if (mlp == "gelu") m.mlp = MlpKind::GELU;
  else if (mlp == "swiglu") m.mlp = MlpKind::SWIGLU;
  else if (mlp == "squared-relu") m.mlp = MlpKind::RELU2;
  else throw ConfigError(ctx + ": unknown mlp '" + mlp + "' (known: gelu, swiglu, squared-relu)");
  m.head_dim_override = get_or<int>(j, ctx, "head_dim", 0);
  m.attention = attention_kind_from_string(get_or<std::string>(j, ctx, "attention", "unfused"), ctx);
  m.causal = get_or<bool>(j, ctx, "causal", true);
  if (const auto* e = sub_object(j, ctx, "moe")) {
    const std::string ectx = ctx + " (moe)";
    json_util::reject_unknown(*e, ectx,
                              {"experts", "top_k", "expert_ffn_hidden", "shared_experts", "shared_ffn_hidden",
                               "dense_layers", "router", "expert_bias", "router_groups", "router_group_topk"});
    m.moe.experts = get<int>(*e, ectx, "experts");
    m.moe.top_k = get<int>(*e, ectx, "top_k");
    m.moe.expert_ffn_hidden = get<int>(*e, ectx, "expert_ffn_hidden");
    m.moe.shared_experts = get_or<int>(*e, ectx, "shared_experts", 0);
    m.moe.shared_ffn_hidden = get_or<int>(*e, ectx, "shared_ffn_hidden", 0);
    m.moe.dense_layers = get_or<int>(*e, ectx, "dense_layers", 0);
    const std::string router = get_or<std::string>(*e, ectx, "router", "softmax");
    if (router == "sigmoid") m.moe.sigmoid_router = true;
    else if (router != "softmax")
      throw ConfigError(ectx + ": unknown router '" + router + "' (known: softmax, sigmoid)");
    m.moe.expert_bias = get_or<bool>(*e, ectx, "expert_bias", false);
    m.moe.router_groups = get_or<int>(*e, ectx, "router_groups", 0);
    m.moe.router_group_topk = get_or<int>(*e, ectx, "router_group_topk", 0);
  }
  m.layer_pattern = get_or<std::string>(j, ctx, "layer_pattern", "");
  m.sliding_window = get_or<int>(j, ctx, "sliding_window", 0);
  m.attention_gate = get_or<bool>(j, ctx, "attention_gate", false);
  m.parallel_block = get_or<bool>(j, ctx, "parallel_block", false);
  m.attention_dropout = get_or<bool>(j, ctx, "attention_dropout", true);
  m.hidden_dropout = get_or<bool>(j, ctx, "hidden_dropout", true);
  m.mtp_layers = get_or<int>(j, ctx, "mtp_layers", 0);
  if (const auto* x = sub_object(j, ctx, "mamba")) {
    const std::string xctx = ctx + " (mamba)";
    json_util::reject_unknown(*x, xctx, {"heads", "head_dim", "groups", "state", "conv_kernel", "chunk"});
    m.mamba.heads = get<int>(*x, xctx, "heads");
    m.mamba.head_dim = get_or<int>(*x, xctx, "head_dim", 64);
    m.mamba.groups = get_or<int>(*x, xctx, "groups", 8);
    m.mamba.state = get_or<int>(*x, xctx, "state", 128);
    m.mamba.conv_kernel = get_or<int>(*x, xctx, "conv_kernel", 4);
    m.mamba.chunk = get_or<int>(*x, xctx, "chunk", 128);
  }
  if (const auto* x = sub_object(j, ctx, "linear_attention")) {
    const std::string xctx = ctx + " (linear_attention)";
    json_util::reject_unknown(*x, xctx,
                              {"key_heads", "value_heads", "key_head_dim", "value_head_dim", "conv_kernel", "chunk"});
    m.linear.key_heads = get<int>(*x, xctx, "key_heads");
    m.linear.value_heads = get<int>(*x, xctx, "value_heads");
    m.linear.key_head_dim = get_or<int>(*x, xctx, "key_head_dim", 128);
    m.linear.value_head_dim = get_or<int>(*x, xctx, "value_head_dim", 128);
    m.linear.conv_kernel = get_or<int>(*x, xctx, "conv_kernel", 4);
    m.linear.chunk = get_or<int>(*x, xctx, "chunk", 64);
  }
  if (const auto* a = sub_object(j, ctx, "mla")) {
    const std::string actx = ctx + " (mla)";
    json_util::reject_unknown(*a, actx,
                              {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"});
    m.mla.q_lora_rank = get_or<int>(*a, actx, "q_lora_rank", 0);
    m.mla.kv_lora_rank = get<int>(*a, actx, "kv_lora_rank");
    m.mla.qk_nope_head_dim = get<int>(*a, actx, "qk_nope_head_dim");
    m.mla.qk_rope_head_dim = get<int>(*a, actx, "qk_rope_head_dim");
    m.mla.v_head_dim = get<int>(*a, actx, "v_head_dim");
  }
  return m;
}

}  // namespace dtsim
