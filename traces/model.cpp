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

std::int64_t TransformerSpec::layer_params() const {
  const std::int64_t h = hidden, kv = kv_dim(), f = ffn_hidden;
  std::int64_t attn = h * (h + 2 * kv) + (h + 2 * kv)    // QKV weight + bias
                      + h * h + h;                       // output projection
  std::int64_t ffn = mlp == MlpKind::SWIGLU ? 3 * h * f  // gate, up, down (no biases, as LLaMA)
                                            : 2 * h * f + f + h;
  std::int64_t norms = 4 * h;  // two layer norms, scale and shift
  return attn + ffn + norms;
}

std::int64_t TransformerSpec::embedding_params() const {
  return static_cast<std::int64_t>(vocab) * hidden +
         (learned_pos_embedding ? static_cast<std::int64_t>(seq_len) * hidden : 0);
}

std::int64_t TransformerSpec::head_params() const {
  return tied_embeddings ? 0 : static_cast<std::int64_t>(vocab) * hidden;
}

std::int64_t TransformerSpec::total_params() const {
  return num_layers * layer_params() + embedding_params() + head_params() + final_norm_params();
}

void TransformerSpec::validate() const {
  const std::string ctx = "model '" + name + "'";
  auto positive = [&](long v, const char* field) {
    if (v <= 0) throw ConfigError(ctx + ": field '" + field + "' must be positive, got " + std::to_string(v));
  };
  positive(num_layers, "num_layers");
  positive(hidden, "hidden");
  positive(heads, "heads");
  positive(kv_heads, "kv_heads");
  positive(ffn_hidden, "ffn_hidden");
  positive(seq_len, "seq_len");
  positive(vocab, "vocab");
  if (hidden % heads != 0)
    throw ConfigError(ctx + ": hidden " + std::to_string(hidden) + " is not divisible by heads " +
                      std::to_string(heads));
  if (heads % kv_heads != 0)
    throw ConfigError(ctx + ": heads " + std::to_string(heads) + " is not divisible by kv_heads " +
                      std::to_string(kv_heads));
  // total_params() and the per-layer sizes are int64 products of these fields: bound them (in double) first.
  const double h = hidden, kv = static_cast<double>(kv_dim()), f = ffn_hidden;
  const double params = num_layers * (h * (h + 2 * kv) + h * h + 3 * h * f + 4 * h + 2 * kv + f) + 2.0 * vocab * h +
                        static_cast<double>(seq_len) * h + 2 * h;
  if (!(params <= kMaxParams))
    throw ConfigError(ctx + ": " + std::to_string(num_layers) + " layers of hidden " + std::to_string(hidden) +
                      ", ffn_hidden " + std::to_string(ffn_hidden) + ", vocab " + std::to_string(vocab) +
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
  return {{"schema_version", 1},
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
          {"mlp", m.mlp == MlpKind::SWIGLU ? "swiglu" : "gelu"},
          {"params", m.total_params()}};
}

TransformerSpec model_from_json(const nlohmann::json& j, const std::string& ctx) {
  json_util::check_schema_version(j, ctx, 1);
  json_util::reject_unknown(j, ctx,
                            {"schema_version", "name", "num_layers", "hidden", "heads", "kv_heads", "ffn_hidden",
                             "seq_len", "vocab", "dtype", "tied_embeddings", "learned_pos_embedding", "mlp", "params"});
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
  else throw ConfigError(ctx + ": unknown mlp '" + mlp + "' (known: gelu, swiglu)");
  return m;
}

}  // namespace dtsim
