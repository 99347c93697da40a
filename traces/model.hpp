// Transformer model specification (the "what is trained" input) with presets and JSON (schema_version 1).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dtsim {

enum class DType { FP16, BF16, FP32 };
enum class MlpKind { GELU, SWIGLU };

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

  int head_dim() const { return hidden / heads; }
  int kv_dim() const { return kv_heads * head_dim(); }
  /// Parameters of one transformer layer (weights and biases, all of it, before tensor parallelism).
  std::int64_t layer_params() const;
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
