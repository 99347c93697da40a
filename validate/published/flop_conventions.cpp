#include "validate/published/flop_conventions.hpp"

#include "traces/error.hpp"

namespace dtsim::sim {

std::string flop_convention_name(FlopConvention c) {
  switch (c) {
    case FlopConvention::PALM: return "palm";
    case FlopConvention::MEGATRON_2021: return "megatron-2021";
    case FlopConvention::MEGATRON_CORE_2025: return "megatron-core-2025";
  }
  DTSIM_ASSERT(false, "unknown FlopConvention");
  return "";
}

std::optional<FlopConvention> flop_convention_named(const std::string& name) {
  for (const auto c : {FlopConvention::PALM, FlopConvention::MEGATRON_2021, FlopConvention::MEGATRON_CORE_2025})
    if (flop_convention_name(c) == name) return c;
  return std::nullopt;
}

namespace {

/// PaLM Appendix B, per token.
double palm_per_token(const TransformerSpec& m) {
  const double n = static_cast<double>(m.active_params());
  return 6.0 * n + 12.0 * m.num_layers * m.heads * static_cast<double>(m.head_dim()) * m.seq_len;
}

/// Narayanan et al. 2021, per token, no recomputation.
double megatron_2021_per_token(const TransformerSpec& m) {
  const double l = m.num_layers, h = m.hidden, s = m.seq_len, v = m.vocab;
  return 72.0 * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * l * h));
}

/// Megatron-LM num_floating_point_operations (df0430d), per token.
double megatron_core_2025_per_token(const TransformerSpec& m) {
  const double h = m.hidden, s = m.seq_len, layers = m.num_layers;
  const double g = m.mlp == MlpKind::SWIGLU ? 1.5 : 1.0;
  const double moe_layers = m.num_moe_layers(), dense_layers = layers - moe_layers;
  // expansion 12 = 3 (forward, wgrad, dgrad) x 2 (two GEMMs of the size) x 2 (multiply-add)
  double mlp = dense_layers * m.ffn_hidden * g;
  if (m.moe.enabled())
    mlp += moe_layers * (static_cast<double>(m.moe.expert_ffn_hidden) * m.moe.top_k * g + m.moe.shared_ffn_hidden * g);
  mlp *= 12.0 * h;
  double attention = 0;
  if (m.mla.enabled()) {
    const auto& a = m.mla;
    const double heads = m.heads, qk = double(a.qk_nope_head_dim) + a.qk_rope_head_dim;
    const double q_term = a.q_lora_rank == 0 ? h * heads * qk : a.q_lora_rank * (h + heads * qk + 1);
    attention = 6.0 * layers *
                (q_term + a.kv_lora_rank * (h + heads * (double(a.qk_nope_head_dim) + a.v_head_dim) + 1) +
                 h * a.qk_rope_head_dim + heads * a.v_head_dim * h + s * heads * qk / 2 + s * heads * a.v_head_dim / 2);
  } else {
    const double ratio = static_cast<double>(m.q_dim()) / h;
    attention = 12.0 * layers * h * h * ((1.0 + double(m.kv_heads) / m.heads + s / h / 2.0) * ratio);
  }
  const double logits = 6.0 * h * m.vocab;
  return mlp + attention + logits;
}

}  // namespace

double convention_flops_per_iteration(FlopConvention c, const TransformerSpec& m, std::int64_t global_batch) {
  const double tokens = static_cast<double>(global_batch) * m.seq_len;
  switch (c) {
    case FlopConvention::PALM: return tokens * palm_per_token(m);
    case FlopConvention::MEGATRON_2021: return tokens * megatron_2021_per_token(m);
    case FlopConvention::MEGATRON_CORE_2025: return tokens * megatron_core_2025_per_token(m);
  }
  DTSIM_ASSERT(false, "unknown FlopConvention");
  return 0;
}

}  // namespace dtsim::sim
