#include "validate/published/published_json.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "traces/error.hpp"
#include "traces/json_util.hpp"
#include "traces/stack_profile.hpp"
#include "traces/text.hpp"
#include "traces/units.hpp"
#include "validate/published/flop_conventions.hpp"

namespace dtsim::sim {
namespace {
using nlohmann::json;

/// The software stack that produced a document's rows (recognised from its "source").
enum class Stack {
  MEGATRON_CORE,      ///< Megatron-LM / Megatron-Core with TransformerEngine (SimuMax's B200 runs)
  TORCHTITAN,         ///< torchtitan: FSDP2, TP, PP, CP in PyTorch
  MEGATRON_DEEPSPEED  ///< SAILOR's Megatron-DeepSpeed fork
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

/// Collects the "; "-separated notes of a row.
struct Notes {
  std::vector<std::string> items;
  void add(const std::string& s) {
    if (!s.empty() && std::find(items.begin(), items.end(), s) == items.end()) items.push_back(s);
  }
  std::string joined() const {
    std::string out;
    for (const auto& s : items) out += (out.empty() ? "" : "; ") + s;
    return out;
  }
};

bool present(const json& j, const std::string& name) { return j.contains(name) && !j.at(name).is_null(); }

/// A required integer: absent -> "missing field", null -> "not stated by the source".
int req_int(const json& j, const std::string& ctx, const std::string& name) {
  if (j.contains(name) && j.at(name).is_null())
    throw ConfigError(ctx + ": field '" + name + "' is null (not stated by the source)");
  return json_util::get<int>(j, ctx, name);
}

std::optional<int> opt_int(const json& j, const std::string& ctx, const std::string& name) {
  if (!present(j, name)) return std::nullopt;
  return json_util::get<int>(j, ctx, name);
}

std::string opt_str(const json& j, const std::string& ctx, const std::string& name) {
  return json_util::get_or<std::string>(j, ctx, name, "");
}

std::optional<bool> opt_bool(const json& j, const std::string& ctx, const std::string& name) {
  if (!present(j, name)) return std::nullopt;
  return json_util::get<bool>(j, ctx, name);
}

std::optional<double> opt_number(const json& j, const std::string& ctx, const std::string& name) {
  if (!present(j, name)) return std::nullopt;
  const double v = json_util::get<double>(j, ctx, name);
  if (!std::isfinite(v)) throw ConfigError(ctx + ": field '" + name + "' is not a finite number");
  return v;
}

/// The document's software stack from its source; nullopt when the source does not name one (then each row's own
/// "framework" may, row_stack()).
std::optional<Stack> stack_of(const json& doc, const std::string& path) {
  const std::string src = lower(json_util::get_or<std::string>(doc, path, "source", ""));
  if (contains(src, "torchtitan")) return Stack::TORCHTITAN;
  if (contains(src, "simumax")) return Stack::MEGATRON_CORE;
  if (contains(src, "sailor")) return Stack::MEGATRON_DEEPSPEED;
  return std::nullopt;
}

/// A row's stack in a document of several sources (large_scale_papers.json): the framework the row names where it
/// is one dtsim has conventions for (BLOOM's "Megatron-DeepSpeed ..."), else Megatron-Core's conventions, noted.
Stack row_stack(const json& row, std::optional<Stack> doc_stack, Notes& notes) {
  if (doc_stack) return *doc_stack;
  const auto it = row.is_object() ? row.find("framework") : row.end();
  const std::string framework = it != row.end() && it->is_string() ? lower(it->get<std::string>()) : "";
  if (contains(framework, "megatron-deepspeed")) {
    notes.add("stack from the row's framework: megatron-deepspeed");
    return Stack::MEGATRON_DEEPSPEED;
  }
  notes.add("software stack not recognised from the source: Megatron-Core conventions assumed");
  return Stack::MEGATRON_CORE;
}

/// Megatron-LM commits that development rows name ("Megatron-LM @ 285068c8"), with their commit dates from the
/// NVIDIA/Megatron-LM history (git show -s --date=short).
std::string megatron_commit_date(const std::string& framework) {
  static const std::pair<const char*, const char*> known[] = {
      {"285068c8", "2023-01-11"},  // MegaScale's baseline (Merge branch 'tridao-flashattn')
      {"f1f03922", "2024-10-28"},  // MegaScale-MoE's baseline
  };
  const auto at = framework.find("megatron-lm @ ");
  if (at == std::string::npos) return "";
  const std::string hash = framework.substr(at + 14, 8);
  for (const auto& [h, date] : known)
    if (hash == h) return date;
  return "";
}

/// What a row's framework text says about the Megatron-LM release it ran, applied to its plan: releases before
/// 2023-05-31 (f9283c5a8a, "Add option to overlap p2p communication") block on every pipeline exchange (the
/// megatron-lm stack); before 2023-08-16 (2d5220a424, "Add --overlap-grad-reduce") the gradients are all-reduced
/// after the pipeline flush. A row that says its pipeline communication overlaps (MegaScale's PP overlap) does not
/// block. A run of Megatron-LM itself (framework "Megatron-LM @ <commit>", not a system built on it) with MoE layers
/// and no grouped GEMM named ran its experts as SequentialMLP: --moe-grouped-gemm is off by default (megatron/training/
/// arguments.py at every commit since it came, 9aa1afabb9 of 2023-11-06).
void framework_conventions(const json& row, const std::string& ctx, ParallelPlan& p, bool moe, Notes& notes) {
  const std::string framework = lower(opt_str(row, ctx, "framework"));
  if (contains(framework, "pp communication overlap") && p.pp > 1) {
    p.pp_comm_overlap = true;
    notes.add("pipeline exchanges overlapped (the row's framework says so)");
  }
  if (moe && starts_with(framework, "megatron-lm @ ") && !contains(framework, "grouped gemm") &&
      !contains(framework, "grouped-gemm")) {
    p.moe_grouped_gemm = false;
    notes.add("experts as Megatron-LM's SequentialMLP (--moe-grouped-gemm not stated; off by default)");
  }
  const std::string date = megatron_commit_date(framework);
  if (date.empty()) {
    if (contains(framework, "megatron-lm @ "))
      notes.add("Megatron-LM commit not dated here: current Megatron-Core conventions assumed");
    return;
  }
  if (present(row, "stack")) return;  // the row names its stack itself
  if (date < "2023-05-31" && !p.pp_comm_overlap) {
    p.stack = "megatron-lm";
    notes.add("Megatron-LM of " + date + ": blocking pipeline exchanges (megatron-lm stack)");
  }
  if (date < "2023-08-16" && p.dp_overlap && !contains(framework, "dp communication overlap") &&
      !contains(framework, "dp/pp communication overlap")) {
    p.dp_overlap = false;
    if (p.dp > 1) notes.add("Megatron-LM of " + date + ": gradients all-reduced after the pipeline flush");
  }
}

/// How far a MegaScale row goes in the paper's optimisations (Jiang et al., "MegaScale: Scaling Large Language Model
/// Training to More Than 10,000 GPUs", NSDI'24): Table 3 adds them cumulatively ("ablation step N": 2 parallel
/// transformer block, 3 sliding-window attention, 4 TP overlap, 5 PP overlap, 6 DP overlap, 7 efficient operators,
/// 8 misc, 9 LAMB with 3x the batch); its Table 2 and Figure 9 rows of the system itself ("MegaScale") have them all.
/// 0 for every other row.
int megascale_step(const json& row, const std::string& ctx) {
  const std::string system = lower(opt_str(row, ctx, "system"));
  if (system == "megascale") return 9;
  if (!starts_with(system, "ablation step ")) return 0;
  const std::string n =
      system.substr(14, system.find(':') == std::string::npos ? std::string::npos : system.find(':') - 14);
  if (n.empty() || !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; }) || n.size() > 2)
    throw ConfigError(ctx + ": system '" + system + "' does not name an ablation step number");
  return std::stoi(n);
}

/// A MegaScale row's model and plan as the paper describes the system (section 3): the parallel transformer block
/// (3.1; TransformerSpec::parallel_block), tensor-parallel communication fused with the parallel linear layers (3.2,
/// which shards the norms' activations: sequence parallel), pipeline sends and receives decoupled from the
/// computation (3.2), data-parallel all-gathers prefetched and reduce-scatters overlapped per model chunk (3.2).
/// Not modelled, and noted: the sliding window (its size is not stated; full causal attention is an upper bound on
/// the score FLOPs, which are s / (6h) of a layer's: 2.8% for the 175B model at s 2048), the efficient operators and
/// the data pipeline (3.3), and LAMB (timed as Adam: the same states; its per-layer trust ratios are norms).
void megascale_system(int step, TransformerSpec& model, ParallelPlan& p, Notes& notes) {
  if (step < 2) return;
  model.parallel_block = true;
  notes.add("MegaScale: parallel transformer block");
  if (step >= 3) notes.add("MegaScale: sliding-window attention of unstated window predicted as full attention");
  if (step >= 4 && p.tp > 1) {
    p.sequence_parallel = true;
    p.tp_comm_overlap = true;
    notes.add("MegaScale: TP communication overlapped with the parallel linear layers (sequence parallel)");
  }
  if (step >= 5 && p.pp > 1) {
    p.pp_comm_overlap = true;
    notes.add("MegaScale: pipeline exchanges overlapped");
  }
  if (step >= 6 && p.dp > 1) {
    p.dp_overlap = true;
    if (p.zero_stage == 1 || p.zero_stage == 2) p.overlap_param_gather = true;
    notes.add("MegaScale: data-parallel communication overlapped");
  }
  if (step >= 7) notes.add("MegaScale: efficient operators and data-pipeline optimisations not modelled");
  if (step >= 9) notes.add("MegaScale: LAMB timed as Adam");
}

/// The row's software-stack profile: its own "stack" field, else the document's stack.
std::string stack_name(const json& row, const std::string& ctx, Stack stack) {
  if (present(row, "stack")) {
    std::string s = json_util::get<std::string>(row, ctx, "stack");
    (void)stack_profile(s);  // ConfigError naming the known stacks
    return s;
  }
  switch (stack) {
    case Stack::TORCHTITAN: return "torchtitan";
    case Stack::MEGATRON_DEEPSPEED: return "megatron-deepspeed";
    case Stack::MEGATRON_CORE: break;
  }
  return "megatron-core";
}

// ---- model -------------------------------------------------------------------------------------------------

/// The model of a row: the document's shape `name` with the row's sequence length, depth and precision.
/// The released tokenizer's size of a model whose paper does not state it (large_scale_papers.json leaves it null):
/// Mixtral-8x22B and MoE Parallel Folding's fine-grained variant of it (mistralai/Mixtral-8x22B-v0.1 config.json,
/// the v3 tokenizer; 32,000 would change the FLOPs by 0.01%), Qwen2-57B-A14B (Qwen/Qwen2-57B-A14B config.json; the
/// data's note: --make-vocab-size-divisible-by 1187 x 128), DeepSeek-V3 (deepseek-ai/DeepSeek-V3 config.json, as
/// the deepseek-v3 preset). 0 when not known.
int known_vocab(const std::string& model) {
  if (model == "Mixtral-8x22B" || model == "Mixtral-8x22B-G8T8") return 32768;
  if (model == "Qwen2-57B-A14B") return 151936;
  if (model == "DeepSeek-V3") return 129280;
  return 0;
}

// What the MoE Parallel Folding paper's rows (source moe_parallel_folding) leave unstated, from its authors' benchmark
// harness of the same month: yanring/Megatron-MoE-ModelZoo @ 78fd4d6 (2025-04-03, "add Megatron MoE testing
// framework"; Z. Yan is the paper's second author; the data's model shapes come from the same repository),
// runtime_configs/benchmarking/runtime.conf (TP PP EP CP VPP MBS GBS per model: Mixtral-8x22B 2 8 8 1 1 1,
// Qwen2-57B-A14B 2 4 4 1 7 1) and model_configs/benchmarking/{Mixtral-8x22B,Qwen2-57B-A14B}.yaml (--attention-dropout
// 0.0, --hidden-dropout 0.0). The interleaving depth is taken only where the row's TP and PP are the config's (its
// ETP and EP may differ: the pipeline is the same); Mixtral-8x22B's config has none (VPP 1, 1F1B as assumed).
struct ModelZooConfig {
  bool known = false;
  int tp = 0, pp = 0, vpp = 1;
};

ModelZooConfig modelzoo_config(const std::string& source, const std::string& model_name) {
  if (source != "moe_parallel_folding") return {};
  if (model_name == "Mixtral-8x22B") return {true, 2, 8, 1};
  if (model_name == "Qwen2-57B-A14B") return {true, 2, 4, 7};
  return {};
}

TransformerSpec shape_model(const json& shapes, const std::string& name, const std::string& ctx, Stack stack,
                            const std::string& source, Notes& notes) {
  if (!shapes.contains(name)) throw ConfigError(ctx + ": model '" + name + "' is not in the file's model_shapes");
  const json& s = shapes.at(name);
  const std::string sctx = ctx + ": model_shapes['" + name + "']";
  if (!s.is_object()) throw ConfigError(sctx + ": expected a JSON object");
  if (present(s, "preset")) {
    // A dtsim preset by name (its layers, kinds and widths; the row gives the sequence length).
    TransformerSpec p = model_preset(json_util::get<std::string>(s, sctx, "preset"));
    p.name = name;
    return p;
  }
  TransformerSpec m;
  m.name = name;
  m.num_layers = req_int(s, sctx, "layers");
  m.hidden = req_int(s, sctx, "hidden");
  // Shapes a paper leaves out (large_scale_papers.json: MegaScale's GPT-175B/530B, Nemotron-4, MegaScale-MoE) follow
  // one rule, each with a note: a dense FFN of 4h (GPT's; the sources' own FLOP counts assume it), and an MoE model's
  // FFN width is its experts' (every layer MoE unless dense_layers says otherwise).
  const bool moe_shape = present(s, "moe");
  if (present(s, "ffn_hidden")) {
    m.ffn_hidden = req_int(s, sctx, "ffn_hidden");
  } else if (moe_shape) {
    m.ffn_hidden = req_int(s.at("moe"), sctx + ".moe", "expert_ffn_hidden");
    notes.add("ffn_hidden not stated: the experts' width assumed for dense layers");
  } else {
    m.ffn_hidden = 4 * m.hidden;
    notes.add("ffn_hidden not stated: 4h assumed");
  }
  m.heads = req_int(s, sctx, "heads");
  m.kv_heads = opt_int(s, sctx, "kv_heads").value_or(m.heads);
  if (present(s, "vocab") || !known_vocab(name)) {
    m.vocab = req_int(s, sctx, "vocab");
  } else {
    m.vocab = known_vocab(name);
    notes.add("vocab not stated by the source: the released tokenizer's " + std::to_string(m.vocab) + " assumed");
  }
  if (const auto hd = opt_int(s, sctx, "head_dim"); hd && (m.heads <= 0 || *hd * m.heads != m.hidden))
    m.head_dim_override = *hd;
  m.tied_embeddings = opt_bool(s, sctx, "tied_embeddings").value_or(false);
  m.learned_pos_embedding = starts_with(lower(opt_str(s, sctx, "position_embedding")), "learned");
  std::string mlp = lower(opt_str(s, sctx, "mlp"));
  if (mlp.empty()) {
    // Not stated: GPT's GELU MLP for a dense model, SwiGLU experts for an MoE (as every MoE of 2024-26 and the
    // MegaScale-MoE 352B's parameter count imply).
    mlp = moe_shape ? "swiglu" : "gelu";
    notes.add("mlp not stated: " + mlp + " assumed");
  }
  if (starts_with(mlp, "swiglu")) m.mlp = MlpKind::SWIGLU;
  else if (starts_with(mlp, "squared_relu") || starts_with(mlp, "squared-relu") || starts_with(mlp, "relu2"))
    m.mlp = MlpKind::RELU2;  // Nemotron's squared ReLU: two GEMMs, no biases
  else if (starts_with(mlp, "gelu") || starts_with(mlp, "relu")) m.mlp = MlpKind::GELU;  // ReLU: the same two GEMMs
  else throw ConfigError(sctx + ": mlp '" + mlp + "' is not known (known: swiglu, gelu, relu)");
  // Megatron-Core with TransformerEngine and torchtitan (SDPA) run flash attention; the 2023 Megatron-DeepSpeed
  // fork of SAILOR the unfused kernels.
  m.attention = stack == Stack::MEGATRON_DEEPSPEED ? AttentionKind::UNFUSED : AttentionKind::FLASH;
  m.causal = true;
  const std::string attention = lower(opt_str(s, sctx, "attention"));
  if (present(s, "mla")) {
    const json& a = s.at("mla");
    const std::string actx = sctx + ".mla";
    m.mla.q_lora_rank = opt_int(a, actx, "q_lora_rank").value_or(0);
    m.mla.kv_lora_rank = req_int(a, actx, "kv_lora_rank");
    m.mla.qk_nope_head_dim = req_int(a, actx, "qk_head_dim");  // Megatron's qk_head_dim: the part without rope
    m.mla.qk_rope_head_dim = req_int(a, actx, "qk_rope_head_dim");
    m.mla.v_head_dim = req_int(a, actx, "v_head_dim");
  } else if (starts_with(attention, "mla")) {
    // MLA's dimensions as a paper writes them in words (large_scale_papers.json, DeepSeek-V3: "MLA: q_lora_rank 1536,
    // kv_lora_rank 512, qk head dim 128 (+ 64 rope), v head dim 128"): each number after its name.
    auto dim = [&](const char* pattern) {
      std::smatch mt;
      if (!std::regex_search(attention, mt, std::regex(pattern)))
        throw ConfigError(sctx + ": attention 'mla' without an 'mla' block, and its text does not give " +
                          std::string(pattern).substr(0, std::string(pattern).find('[')));
      return std::stoi(mt[1].str());
    };
    m.mla.q_lora_rank = dim(R"(q_lora_rank[^0-9]*([0-9]+))");
    m.mla.kv_lora_rank = dim(R"(kv_lora_rank[^0-9]*([0-9]+))");
    m.mla.qk_nope_head_dim = dim(R"(qk head dim[^0-9]*([0-9]+))");
    m.mla.qk_rope_head_dim = dim(R"(\+ *([0-9]+) *rope)");
    m.mla.v_head_dim = dim(R"(v head dim[^0-9]*([0-9]+))");
    notes.add("MLA dimensions read from the attention text");
  }
  if (present(s, "moe")) {
    const json& e = s.at("moe");
    const std::string ectx = sctx + ".moe";
    m.moe.experts = req_int(e, ectx, "experts");
    if (e.contains("top_k") && e.at("top_k").is_null() && opt_int(e, ectx, "experts") == 8) {
      // An 8-expert model upcycled from a dense one whose paper does not state k (moe_parallel_folding's
      // Llama3-8x70B): the top-2 of Mixtral's 8 experts (Jiang et al. 2024), which the same group's upcycled Llama 3
      // also uses (Vavre et al., arXiv 2412.09952: "8-Expert Top-2"). The FLOP count that turns the row's MFU into
      // a time uses the same k, so the assumption moves measured and predicted times together.
      m.moe.top_k = 2;
      notes.add("top_k not stated by the source: 2 of 8 experts assumed (Mixtral's routing)");
    } else {
      m.moe.top_k = req_int(e, ectx, "top_k");
    }
    m.moe.expert_ffn_hidden = req_int(e, ectx, "expert_ffn_hidden");
    m.moe.shared_experts = opt_int(e, ectx, "shared_experts").value_or(0);
    m.moe.shared_ffn_hidden = opt_int(e, ectx, "shared_expert_ffn_hidden").value_or(0);
    m.moe.dense_layers = opt_int(e, ectx, "dense_layers").value_or(0);
    if (const auto ml = opt_int(e, ectx, "moe_layers"); ml && *ml + m.moe.dense_layers != m.num_layers)
      throw ConfigError(ectx + ": dense_layers " + std::to_string(m.moe.dense_layers) + " + moe_layers " +
                        std::to_string(*ml) + " is not the " + std::to_string(m.num_layers) + " layers");
    m.moe.sigmoid_router = contains(lower(opt_str(e, ectx, "router")), "sigmoid");
    // DeepSeek-V3's node-limited routing (report section 2.1.2: "each token will be sent to at most M nodes"): the
    // groups are the nodes of the row's EP group, set once the plan is known (node_limited_routing).
    m.moe.router_group_topk = opt_int(e, ectx, "node_limited_routing_max_nodes").value_or(0);
  }
  // Layer kinds (hybrid Mamba / linear-attention / sliding-window models) and multi-token prediction, as a model file
  // writes them; Megatron-Core's hybrid_override_pattern is the same string as layer_pattern.
  m.layer_pattern =
      opt_str(s, sctx, present(s, "hybrid_override_pattern") ? "hybrid_override_pattern" : "layer_pattern");
  m.sliding_window = opt_int(s, sctx, "sliding_window").value_or(0);
  m.attention_gate = opt_bool(s, sctx, "attention_gate").value_or(false);
  m.parallel_block = opt_bool(s, sctx, "parallel_block").value_or(false);
  // Dropout (TransformerSpec::attention_dropout, hidden_dropout): as the shape states it, else as the framework's
  // model source applies it. SAILOR's Megatron-DeepSpeed fork (eth-easl/sailor@cf2c8e3, third_party/Megatron-DeepSpeed/
  // megatron/model/opt_model.py) applies none in its OPT (the attention probabilities go straight into the AV product,
  // the hidden dropouts are commented out) and in its GPT-Neo (gpt_neo_model.py) the hidden ones only (attn_dropout
  // is built and never called); torchtitan's Llama (torchtitan/models/llama3/model.py) has no dropout module; the
  // MoE Parallel Folding rows' two models run without it in their authors' benchmark config (modelzoo_config).
  const std::string lname = lower(name);
  bool attn_drop = true, hid_drop = true;
  std::string why;
  if (stack == Stack::MEGATRON_DEEPSPEED && contains(lname, "opt")) {
    attn_drop = hid_drop = false;
    why = "SAILOR's opt_model.py applies none";
  } else if (stack == Stack::MEGATRON_DEEPSPEED && contains(lname, "gpt-neo")) {
    attn_drop = false;
    why = "SAILOR's gpt_neo_model.py never calls its attention dropout";
  } else if (stack == Stack::TORCHTITAN) {
    attn_drop = hid_drop = false;
    why = "torchtitan's Llama has no dropout module";
  } else if (modelzoo_config(source, name).known && !present(s, "attention_dropout") && !present(s, "hidden_dropout")) {
    attn_drop = hid_drop = false;  // a shape that states either keeps Megatron's default for the other
    why = "none, as the authors' Megatron-MoE-ModelZoo benchmark config sets it";
  }
  const auto attn_stated = opt_bool(s, sctx, "attention_dropout"), hid_stated = opt_bool(s, sctx, "hidden_dropout");
  m.attention_dropout = attn_stated.value_or(attn_drop);
  m.hidden_dropout = hid_stated.value_or(hid_drop);
  if (!why.empty() && (!attn_stated || !hid_stated)) notes.add("dropout not stated: " + why);
  m.mtp_layers = opt_int(s, sctx, present(s, "mtp_depth") ? "mtp_depth" : "mtp_layers").value_or(0);
  if (present(s, "mamba")) {
    const json& x = s.at("mamba");
    const std::string xctx = sctx + ".mamba";
    m.mamba.heads = req_int(x, xctx, "heads");
    m.mamba.head_dim = opt_int(x, xctx, "head_dim").value_or(64);
    m.mamba.groups = opt_int(x, xctx, "groups").value_or(8);
    m.mamba.state = opt_int(x, xctx, "state").value_or(128);
  }
  if (present(s, "linear_attention")) {
    const json& x = s.at("linear_attention");
    const std::string xctx = sctx + ".linear_attention";
    m.linear.key_heads = req_int(x, xctx, "key_heads");
    m.linear.value_heads = req_int(x, xctx, "value_heads");
    m.linear.key_head_dim = opt_int(x, xctx, "key_head_dim").value_or(128);
    m.linear.value_head_dim = opt_int(x, xctx, "value_head_dim").value_or(128);
  }
  return m;
}

// What the torchtitan train config a row ran sets where the row leaves it unstated. Of torchtitan's Llama 3 train
// configs only llama3_405b.toml turns on torch.compile (compile = true) and FSDP2's float8 all-gather
// (enable_fsdp_float8_all_gather with precompute_float8_dynamic_scale_for_fsdp), at 3faaa1a0d (2024-08), 9dec370 (the
// 2024-12 benchmarks) and 820504e (2025-06); the 8B and 70B configs leave both off.
struct TorchtitanConfig {
  bool compile = false;
  bool fsdp_float8_all_gather = false;
  std::string file;
};

TorchtitanConfig torchtitan_config(Stack stack, const std::string& model_name) {
  if (stack != Stack::TORCHTITAN || !contains(lower(model_name), "405b")) return {};
  return {true, true, "llama3_405b.toml"};
}

// Node-limited routing as a shape states it (moe.node_limited_routing_max_nodes: router_group_topk, no groups yet):
// the router's groups are the nodes the row's EP group spans (DeepSeek-V3: 256 experts over EP 64 on 8 nodes, 8
// groups, at most 4 per token, as its config's n_group 8 / topk_group 4). A limit no smaller than the nodes is none.
void node_limited_routing(const json& row, const std::string& ctx, TransformerSpec& m, const ParallelPlan& p,
                          Notes& notes) {
  if (m.moe.router_group_topk <= 0 || m.moe.router_groups > 0) return;
  const int gpn = opt_int(row, ctx, "gpus_per_node").value_or(8);
  const int nodes = std::max(1, p.ep / std::max(1, gpn));
  if (m.moe.router_group_topk >= nodes) {
    m.moe.router_group_topk = 0;
    notes.add("node-limited routing to more nodes than the EP group spans: no limit");
    return;
  }
  if (m.moe.experts % nodes != 0 || m.moe.router_group_topk * (m.moe.experts / nodes) < m.moe.top_k)
    throw ConfigError(ctx + ": node-limited routing to " + std::to_string(m.moe.router_group_topk) +
                      " nodes cannot hold top_k " + std::to_string(m.moe.top_k) + " of " +
                      std::to_string(m.moe.experts) + " experts over an EP group of " + std::to_string(nodes) +
                      " nodes");
  m.moe.router_groups = nodes;
  notes.add("node-limited routing: " + std::to_string(nodes) + " router groups (the EP group's nodes), " +
            std::to_string(m.moe.router_group_topk) + " per token");
}

// ---- hardware ----------------------------------------------------------------------------------------------

struct Hardware {
  std::string gpu;      ///< dtsim GPU preset
  std::string cluster;  ///< "preset:GPUS"
};

/// The scale-out NICs a row states (0: not stated): the fields "nics_per_node" and "nic_gbps", else read from its
/// "network" text. The text is read clause by clause (";"-separated); a clause about the scale-out network (it names
/// NICs, HCAs, InfiniBand, RoCE, Omni-Path, Ethernet or an interconnect, and not NVLink) gives the count ("eight 200G
/// NICs per server", "8 x 400 Gbps InfiniBand HCAs per node", "4 Omni-Path (OPA) links per node": a number before
/// NICs / HCAs / links / ports "per node" or "per server") and the line rate (the first "N Gbps", "N Gb/s" or "NG";
/// "N GB/s" is bytes: x 8). Omni-Path without a rate is 100 Gb/s: Intel's Omni-Path Architecture 100 Series is the
/// generation that was deployed (100 Gb/s per port, Intel OPA product brief).
struct StatedNics {
  int per_node = 0;
  double gbps = 0;
  std::string from;  ///< "network text" or "row fields"
};

StatedNics stated_nics(const json& row, const std::string& ctx) {
  StatedNics n;
  const auto count = opt_int(row, ctx, "nics_per_node");
  const auto rate = opt_number(row, ctx, "nic_gbps");
  if (count || rate) {
    if (count && *count < 1) throw ConfigError(ctx + ": nics_per_node must be at least 1");
    if (rate && !(*rate > 0)) throw ConfigError(ctx + ": nic_gbps must be positive");
    n.per_node = count.value_or(0);
    n.gbps = rate.value_or(0);
    n.from = "row fields";
    return n;
  }
  const std::string network = opt_str(row, ctx, "network");
  const std::string text = lower(network);  // same length: clause offsets hold in both
  static const std::regex count_re(
      R"((\d+|one|two|four|eight|sixteen)\s*(?:x\s*)?(?:\d+\s*g(?:bps|b/s)?\s+)?(?:[a-z()\-]+\s+){0,4}?(?:nics|hcas|links|ports)\s+per\s+(?:node|server))");
  static const std::regex bits_re(R"((\d+(?:\.\d+)?)\s*(?:gbps|gb/s|g)\b)");
  static const std::regex bytes_re(R"((\d+(?:\.\d+)?)\s*GB/s)");  // case-sensitive: bytes, not bits
  const std::vector<std::pair<std::string, int>> words = {
      {"one", 1}, {"two", 2}, {"four", 4}, {"eight", 8}, {"sixteen", 16}};
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(';', start), text.size());
    const std::string clause = text.substr(start, end - start);
    const std::string original = network.substr(start, end - start);  // "GB/s" vs "Gb/s": the case matters
    start = end + 1;
    const bool scale_out = !contains(clause, "nvlink") &&
                           (contains(clause, "nic") || contains(clause, "hca") || contains(clause, "infiniband") ||
                            contains(clause, "roce") || contains(clause, "omni-path") || contains(clause, "ethernet") ||
                            contains(clause, "interconnect"));
    if (!scale_out) continue;
    std::smatch m;
    if (n.per_node == 0 && std::regex_search(clause, m, count_re)) {
      const std::string c = m[1];
      n.per_node = std::isdigit(static_cast<unsigned char>(c[0])) ? std::stoi(c) : 0;
      for (const auto& [w, v] : words)
        if (c == w) n.per_node = v;
    }
    if (n.gbps == 0) {
      std::smatch b;
      if (std::regex_search(original, b, bytes_re)) n.gbps = 8 * std::stod(b[1]);
      else if (std::regex_search(clause, b, bits_re)) n.gbps = std::stod(b[1]);
      else if (contains(clause, "omni-path")) n.gbps = 100;
    }
  }
  if (n.per_node > 0 || n.gbps > 0) n.from = "network text";
  return n;
}

Hardware hardware_of(const json& row, const std::string& ctx, int gpus, Notes& notes) {
  const std::string gpu = json_util::get<std::string>(row, ctx, "gpu");
  if (json_util::get_or<bool>(row, ctx, "heterogeneous", false)) {
    std::string kinds;
    for (const auto& t : json_util::get_or<std::vector<std::string>>(row, ctx, "gpu_types", {}))
      kinds += (kinds.empty() ? "" : ", ") + t;
    throw ConfigError(ctx + ": heterogeneous cluster (" + (kinds.empty() ? gpu : kinds) +
                      "): dtsim simulates one GPU kind per job");
  }
  const std::string g = lower(gpu);
  std::string preset, gpu_name;
  int preset_gpus_per_node = 8;  // the DGX presets
  if (starts_with(g, "gh200")) {
    // SAILOR's "GH-96": the 96 GB HBM3 GH200 of CSCS Alps' Clariden nodes (4 per node).
    preset = "clariden", gpu_name = "gh200", preset_gpus_per_node = 4;
    notes.add("GH200 calibration copied from the H100's (nothing measured on a GH200 calibrates it)");
  } else if (starts_with(g, "gb200") || starts_with(g, "gb300")) {
    // Grace-Blackwell NVL72 racks: the rack is the NVLink domain (72 GPUs; a job may use fewer per rack).
    const bool ultra = starts_with(g, "gb300");
    preset = ultra ? "gb300-nvl72" : "gb200-nvl72", gpu_name = ultra ? "gb300" : "gb200", preset_gpus_per_node = 72;
  } else if (starts_with(g, "b300")) {
    preset = "dgx-b300", gpu_name = "b300";
  } else if (starts_with(g, "b200")) {
    preset = "dgx-b200", gpu_name = "b200-sxm-180gb";
  } else if (starts_with(g, "h200")) {
    preset = "dgx-h200", gpu_name = "h200-sxm-141gb";
  } else if (starts_with(g, "h100") && (contains(g, "500 w") || contains(g, "500w"))) {
    // torchtitan's Grand Teton H100: 96 GB HBM2e at 2.4 TB/s and a 500 W power limit (its own preset; the
    // device model scales the H100's measured calibration to 500 W).
    preset = "grand-teton-h100", gpu_name = "h100-96gb-500w";
  } else if (starts_with(g, "h100")) {
    preset = "dgx-h100", gpu_name = "h100-sxm5-80gb";
    if (contains(g, "96gb") || contains(g, "94") || contains(g, "hbm2e"))
      notes.add("'" + gpu +
                "' simulated as h100-sxm5-80gb (80 GiB HBM3, 3.35 TB/s, 700 W): capacity, bandwidth, clocks differ");
  } else if (starts_with(g, "h800")) {
    preset = "dgx-h800", gpu_name = "h800-sxm5-80gb";
    notes.add("H800 calibration copied from the H100's (same GH100 die; NVLink 400 GB/s in the dgx-h800 preset)");
  } else if (starts_with(g, "a100")) {
    preset = "dgx-a100", gpu_name = "a100-sxm4-80gb";
    if (!contains(g, "sxm")) notes.add("A100 form factor not stated: the SXM4 80GB part (dgx-a100) assumed");
  } else if (starts_with(g, "nvidia ampere") && contains(g, "a100-class")) {
    // MegaScale (arXiv 2402.15627): "NVIDIA Ampere GPUs", MFU over 312 TFLOP/s: the A100's BF16 peak.
    preset = "dgx-a100", gpu_name = "a100-sxm4-80gb";
    notes.add("GPU SKU not stated (Ampere, MFU over 312 TFLOP/s): A100 SXM4 80GB (dgx-a100) assumed");
  } else {
    const std::string kind = gpu.substr(0, gpu.find_first_of(" (-"));
    throw ConfigError(ctx + ": no GPU preset for " + kind + " (gpu '" + gpu +
                      "'; dtsim has A100, H100, H800, H200, B200, B300, GB200, GB300 and GH200 as dgx-a100, dgx-h100, "
                      "dgx-h800, dgx-h200, dgx-b200, dgx-b300, gb200-nvl72, gb300-nvl72 and clariden)");
  }
  std::string per_node;  // "@K": the job uses K GPUs of each node (rack)
  auto gpn = opt_int(row, ctx, "gpus_per_node");
  if (gpn && preset_gpus_per_node == 72 && *gpn == 4) {
    notes.add("gpus_per_node 4 read as an NVL72 compute tray: the 72-GPU rack is the NVLink domain");
    gpn.reset();
  }
  if (!gpn) {
    if (preset_gpus_per_node == 72 && gpus > 72 && gpus % 72 != 0 && gpus % 64 == 0)
      notes.add("GPUs per rack not stated: 64 of each NVL72 rack's 72 assumed (" + std::to_string(gpus / 64) +
                " racks), as NVIDIA's training recipes run them");
    else if (gpus > preset_gpus_per_node)
      notes.add("gpus_per_node not stated: " + std::to_string(preset_gpus_per_node) + " per node (" + preset +
                ") assumed");
  } else if (*gpn > preset_gpus_per_node) {
    throw ConfigError(ctx + ": " + std::to_string(*gpn) + " GPUs per node, but " + preset + " has " +
                      std::to_string(preset_gpus_per_node));
  } else if (*gpn < preset_gpus_per_node && gpus > *gpn) {
    per_node = "@" + std::to_string(*gpn);
  }
  Hardware hw{gpu_name, preset + ":" + std::to_string(gpus) + per_node};
  // Scale-out NICs other than the preset's (BLOOM's Jean Zay: 4 x 100 Gb/s Omni-Path per 8-GPU node, not DGX A100's
  // 8 x 200 Gb/s HDR): the cluster takes the row's (traces/cluster.hpp, NAME:GPUS:nics:N:GBPS).
  if (const StatedNics st = stated_nics(row, ctx); st.per_node > 0 || st.gbps > 0) {
    const ClusterSpec whole = load_cluster(preset);  // one whole node of the preset
    const int nics = st.per_node > 0 ? st.per_node : whole.inter.nics_per_node;
    const double gbps = st.gbps > 0 ? st.gbps : whole.inter.nic_bandwidth_Bps * 8 / 1e9;
    if (nics != whole.inter.nics_per_node || std::fabs(gbps * 1e9 / 8 - whole.inter.nic_bandwidth_Bps) > 1) {
      hw.cluster += ":nics:" + std::to_string(nics) + ":" + format_number("%g", gbps);
      notes.add("scale-out NICs from the row's " + st.from + ": " + std::to_string(nics) + " x " +
                format_number("%g", gbps) + " Gb/s per node (" + preset + " has " +
                std::to_string(whole.inter.nics_per_node) + " x " +
                format_number("%g", whole.inter.nic_bandwidth_Bps * 8 / 1e9) + ")");
    }
  }
  try {
    (void)load_cluster(hw.cluster);  // a GPU count the preset cannot lay out fails the row here, with its reason
  } catch (const ConfigError& e) {
    throw ConfigError(ctx + ": " + e.what());
  }
  return hw;
}

// ---- plan --------------------------------------------------------------------------------------------------

// `every_nth` > 0: torchtitan's layer AC, every n-th decoder layer fully recomputed.
Recompute recompute_of(const json& row, const std::string& ctx, Stack stack, Notes& notes, unsigned& modules,
                       int& every_nth) {
  if (!present(row, "recompute")) {
    notes.add("recompute not stated: none assumed");
    return Recompute::NONE;
  }
  const std::string r = lower(json_util::get<std::string>(row, ctx, "recompute"));
  if (starts_with(r, "none")) return Recompute::NONE;
  if (starts_with(r, "full")) return Recompute::FULL;
  if (starts_with(r, "selective layer")) {
    // torchtitan's layer AC (activation_checkpoint.selective_ac_option an integer n): every n-th block wrapped in a
    // full checkpoint (torchtitan/parallelisms/parallelize_llama.py checkpoint_wrapper at 157a12c56). A row that
    // does not give n ran the default, 2 (torchtitan/config_manager.py at the same commit).
    const std::string rest = r.substr(std::string("selective layer").size());
    every_nth = 2;
    if (rest.find_first_of("0123456789") != std::string::npos) {
      every_nth = std::atoi(rest.c_str() + rest.find_first_of("0123456789"));
      if (every_nth <= 0) throw ConfigError(ctx + ": recompute '" + r + "': the layer interval must be positive");
    } else {
      notes.add("layer AC interval not stated: torchtitan's default, every 2nd layer");
    }
    return Recompute::FULL;
  }
  if (starts_with(r, "selective")) {
    // torchtitan's op-level SAC ("selective op", "per-op SAC", "op-level"): its own policy (RECOMPUTE_OP_SAC).
    if (stack == Stack::TORCHTITAN && r.find("op") != std::string::npos) {
      modules = RECOMPUTE_OP_SAC;
      notes.add("op-level selective AC: torchtitan's policy (recompute module op_sac)");
    } else if (stack == Stack::TORCHTITAN) {
      notes.add("selective AC without its option predicted as Megatron selective recompute");
    }
    return Recompute::SELECTIVE;
  }
  // Modules named in words (DeepSeek-V3 section 3.2.3: "RMSNorm and MLA up-projections recomputed in backward"):
  // Megatron-Core's recompute modules of the same meaning.
  const std::pair<const char*, unsigned> words[] = {
      {"rmsnorm", RECOMPUTE_LAYERNORM},         {"layernorm", RECOMPUTE_LAYERNORM},
      {"up-projection", RECOMPUTE_MLA_UP_PROJ}, {"core attention", RECOMPUTE_CORE_ATTN},
      {"moe activation", RECOMPUTE_MOE_ACT},    {"shared expert", RECOMPUTE_SHARED_EXPERTS}};
  for (const auto& [word, bit] : words)
    if (r.find(word) != std::string::npos) modules |= bit;
  if (modules != 0) {
    notes.add("recompute by module: " + recompute_modules_to_string(modules));
    return Recompute::SELECTIVE;
  }
  throw ConfigError(ctx + ": recompute '" + r + "' is not known (known: none, selective, full)");
}

CpKind cp_kind_of(const json& row, const std::string& ctx, Stack stack, Notes& notes) {
  if (opt_int(row, ctx, "sp_ulysses").value_or(1) > 1) return CpKind::ALL_TO_ALL;
  if (present(row, "cp_comm_type")) {
    const std::string t = lower(json_util::get<std::string>(row, ctx, "cp_comm_type"));
    if (t == "a2a" || t == "alltoall" || t == "all_to_all") return CpKind::ALL_TO_ALL;
    if (t == "p2p" || t == "ring") return CpKind::RING;
    if (t == "allgather" || t == "all_gather") return CpKind::ALL_GATHER;
    throw ConfigError(ctx + ": cp_comm_type '" + t + "' is not expressible (known: a2a, p2p, allgather)");
  }
  if (present(row, "cp_rotate_method")) {
    const std::string t = lower(json_util::get<std::string>(row, ctx, "cp_rotate_method"));
    if (starts_with(t, "allgather")) return CpKind::ALL_GATHER;
    if (starts_with(t, "alltoall")) {
      notes.add("torchtitan's alltoall KV rotation predicted as ring attention");
      return CpKind::RING;
    }
    throw ConfigError(ctx + ": cp_rotate_method '" + t + "' is not known (known: allgather, alltoall)");
  }
  // The stacks' defaults: torchtitan rotates with all-gather, Megatron-Core passes KV blocks around a ring.
  return stack == Stack::TORCHTITAN ? CpKind::ALL_GATHER : CpKind::RING;
}

/// Capacity factor and padding from a free-text MoE capacity ("capacity factor 1 with --moe-pad-...").
void routing_of(const json& row, const std::string& ctx, ParallelPlan& p) {
  const std::string c = lower(opt_str(row, ctx, "moe_capacity"));
  if (c.empty() || contains(c, "dropless")) return;
  const auto pos = c.find("capacity factor");
  if (pos == std::string::npos) throw ConfigError(ctx + ": moe_capacity '" + c + "' names no capacity factor");
  double cf = 0;
  if (std::sscanf(c.c_str() + pos + 15, " %lf", &cf) != 1 || !(cf > 0))
    throw ConfigError(ctx + ": moe_capacity '" + c + "': no positive number after 'capacity factor'");
  p.routing.capacity_factor = cf;
  p.routing.pad_to_capacity = contains(c, "pad");
}

/// SAILOR's per-stage partition (per_stage_plan[].layer_indexes) as transformer layers per pipeline stage. Its layer
/// numbering has the embedding at index 0 and the LM head / final norm at the last index (layers + 1), which dtsim
/// places on the first and last stage too: stage i runs its index count, less the embedding on the first stage and
/// the head on the last. Stages are taken by their first and last index (contiguous ranges, checked); a list whose
/// entries are not exactly its range (a typo in the source) is noted. Empty for pp 1 (one stage runs everything).
std::vector<int> layers_per_stage_of(const json& row, const std::string& ctx, const TransformerSpec& model, int pp,
                                     Notes& notes) {
  const json& stages = row.at("per_stage_plan");
  const std::string sctx = ctx + ": per_stage_plan";
  if (!stages.is_array()) throw ConfigError(sctx + ": expected a list of stages");
  if (static_cast<int>(stages.size()) != pp)
    throw ConfigError(sctx + " has " + std::to_string(stages.size()) + " stages but pp is " + std::to_string(pp));
  const long long head = static_cast<long long>(model.num_layers) + 1;  // the last index: embedding 0, layers, head
  std::vector<int> out;
  long long next = 0;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const std::string ictx = sctx + "[" + std::to_string(i) + "]";
    if (!stages[i].is_object()) throw ConfigError(ictx + ": expected a JSON object");
    const auto idx = json_util::get<std::vector<long long>>(stages[i], ictx, "layer_indexes");
    if (idx.empty()) throw ConfigError(ictx + ": layer_indexes is empty");
    const long long first = idx.front(), last = idx.back(), count = last - first + 1;
    const auto n = static_cast<long long>(idx.size());
    if (first != next || count != n)
      throw ConfigError(ictx + ": layer_indexes " + std::to_string(first) + ".." + std::to_string(last) + " (" +
                        std::to_string(n) + " entries) do not continue the partition at index " + std::to_string(next));
    for (long long k = 0; k < n; ++k)
      if (idx[static_cast<std::size_t>(k)] != first + k) {
        notes.add("stage " + std::to_string(i) + " layer_indexes lists " +
                  std::to_string(idx[static_cast<std::size_t>(k)]) + " where " + std::to_string(first + k) +
                  " belongs (a typo in the source): its range " + std::to_string(first) + ".." + std::to_string(last) +
                  " used");
        break;
      }
    next = last + 1;
    const long long layers = count - (i == 0 ? 1 : 0) - (i + 1 == stages.size() ? 1 : 0);
    if (layers <= 0)
      throw ConfigError(ictx + ": layer_indexes " + std::to_string(first) + ".." + std::to_string(last) +
                        " hold no transformer layer (dtsim needs at least one per stage)");
    out.push_back(static_cast<int>(layers));
  }
  if (next != head + 1)
    throw ConfigError(sctx + " has " + std::to_string(next) + " layer indexes (0.." + std::to_string(next - 1) +
                      ") but '" + model.name + "' has " + std::to_string(head + 1) + " (" +
                      std::to_string(model.num_layers) +
                      " transformer layers + embedding + head): the partition is not this model's");
  if (pp == 1) return {};
  return out;
}

/// The stage a free-text sharding description names as "ZeRO-N" / "ZeRO N" (any case), if it names one.
std::optional<int> zero_stage_named(const std::string& text) {
  const std::string t = lower(text);
  for (std::size_t at = t.find("zero"); at != std::string::npos; at = t.find("zero", at + 1)) {
    std::size_t i = at + 4;
    if (i < t.size() && (t[i] == '-' || t[i] == ' ')) ++i;
    if (i < t.size() && t[i] >= '0' && t[i] <= '3' &&
        (i + 1 == t.size() || !std::isdigit(static_cast<unsigned char>(t[i + 1]))))
      return t[i] - '0';
  }
  return std::nullopt;
}

/// The plan of a row (not yet validated against the model and cluster: predict_rows does that).
ParallelPlan plan_of(const json& row, const std::string& ctx, Stack stack, const TransformerSpec& model, int gpus,
                     Notes& notes) {
  ParallelPlan p;
  p.tp = req_int(row, ctx, "tp");
  p.pp = req_int(row, ctx, "pp");
  p.dp = req_int(row, ctx, "dp");
  p.cp = opt_int(row, ctx, "cp").value_or(1);
  // DeepSpeed-Ulysses sequence parallelism (MegaScale-MoE's attention) splits the sequence and exchanges heads with
  // all-to-alls around attention: context parallelism of the all-to-all kind (cp_kind_of), as Megatron-Core's a2a CP.
  if (const auto ulysses = opt_int(row, ctx, "sp_ulysses"); ulysses && *ulysses > 1) {
    if (p.cp > 1) throw ConfigError(ctx + ": both cp and sp_ulysses");
    p.cp = *ulysses;
    notes.add("Ulysses sequence parallelism " + std::to_string(p.cp) + " predicted as all-to-all context parallelism");
  }
  p.ep = opt_int(row, ctx, "ep").value_or(1);
  p.etp = opt_int(row, ctx, "etp").value_or(0);
  if (!model.moe.enabled() && p.etp == p.tp) p.etp = 0;  // a dense row's "etp = tp" is the default
  if (model.moe.enabled() && p.etp == 0 && p.ep > 1 && p.tp > 1 && !present(row, "etp")) {
    // Expert TP not stated. A run with MoE Parallel Folding (arXiv 2504.14960: the MoE layers' own TP x EP x DP over
    // the attention's tp x cp x dp ranks), or one whose EP Megatron-Core's default (etp = tp) cannot fold into those
    // ranks, used its own: 1, as every folded configuration that paper states (its Tables 3-5).
    const bool folding = contains(lower(opt_str(row, ctx, "system")), "folding");
    const bool fits_default = (static_cast<long>(p.tp) * p.cp * p.dp) % (static_cast<long>(p.tp) * p.ep) == 0;
    if (folding || !fits_default) {
      p.etp = 1;
      notes.add(std::string("expert TP not stated: 1 assumed (") +
                (folding ? "MoE parallel folding" : "etp = tp cannot hold ep in tp x cp x dp") + ")");
    }
  }
  p.global_batch_size = req_int(row, ctx, "gbs");
  if (p.tp <= 0 || p.pp <= 0 || p.dp <= 0 || p.cp <= 0 || p.ep <= 0)
    throw ConfigError(ctx + ": tp, pp, dp, cp and ep must be positive");
  // In double: exact for any product that can equal an int GPU count, and no overflow for the others.
  const double world = static_cast<double>(p.tp) * p.pp * p.dp * p.cp;
  if (world != gpus)
    throw ConfigError(ctx + ": tp*pp*dp*cp = " + std::to_string(p.tp) + "*" + std::to_string(p.pp) + "*" +
                      std::to_string(p.dp) + "*" + std::to_string(p.cp) + " is not the row's " + std::to_string(gpus) +
                      " GPUs");
  std::optional<int> vp_stated = opt_int(row, ctx, "vp");
  if (!vp_stated) {
    const ModelZooConfig zoo = modelzoo_config(opt_str(row, ctx, "source"), opt_str(row, ctx, "model"));
    if (zoo.known && zoo.vpp > 1 && zoo.tp == p.tp && zoo.pp == p.pp) {
      vp_stated = zoo.vpp;
      notes.add("interleaving not stated: " + std::to_string(zoo.vpp) +
                " model chunks per rank, as the authors' Megatron-MoE-ModelZoo benchmark config runs TP " +
                std::to_string(zoo.tp) + " PP " + std::to_string(zoo.pp));
    }
  }
  int vp = vp_stated.value_or(1);
  if (const auto mbs = opt_int(row, ctx, "mbs")) {
    p.micro_batch_size = *mbs;
  } else if (p.pp > 1 && present(row, "local_batch_size")) {
    // torchtitan splits the local batch into pp_microbatches micro-batches, by default as many as PP stages.
    const int local = req_int(row, ctx, "local_batch_size");
    const auto stated = opt_int(row, ctx, "pp_microbatches");
    const int n = stated.value_or(p.pp);
    if (n <= 0 || local % n != 0)
      throw ConfigError(ctx + ": local batch " + std::to_string(local) + " does not split into " + std::to_string(n) +
                        " pipeline micro-batches");
    p.micro_batch_size = local / n;
    if (!stated)
      notes.add("pp micro-batches not stated: torchtitan's default (pp = " + std::to_string(p.pp) +
                ") gives micro-batch " + std::to_string(p.micro_batch_size));
  } else {
    // Not stated (the large-scale papers): one sequence per micro-batch, the smallest and most common choice at
    // scale; the memory it needs is not checked against the run (the papers' runs fit).
    p.micro_batch_size = 1;
    notes.add("micro-batch size not stated: 1 assumed");
  }
  int every_nth = 0;
  p.recompute = recompute_of(row, ctx, stack, notes, p.recompute_modules, every_nth);
  if (every_nth > 0) {
    // Every n-th layer recomputed: floor(L / n) of the L layers, as many as Megatron's block method with that N (the
    // same work and activation memory; other layers of the chunk). One chunk per rank needed to count them.
    if (p.pp > 1 || vp > 1)
      throw ConfigError(ctx + ": layer AC every " + std::to_string(every_nth) +
                        " layers with pipeline parallelism (torchtitan counts the layers across stages)");
    const int n = model.num_layers / every_nth;
    if (n == 0) p.recompute = Recompute::NONE;
    if (n > 0 && n < model.num_layers) p.recompute_num_layers = n;
    notes.add("layer AC every " + std::to_string(every_nth) + " layers: " + std::to_string(n) + " of " +
              std::to_string(model.num_layers) + " layers fully recomputed (Megatron's block method, " +
              "--recompute-num-layers " + std::to_string(n) + ")");
  }
  if (present(row, "recompute_modules")) {
    // Megatron-Core's --recompute-modules, as a list or a comma-separated string (checked by ParallelPlan).
    const json& rm = row.at("recompute_modules");
    std::string list;
    if (rm.is_array()) {
      for (const auto& n : json_util::get<std::vector<std::string>>(row, ctx, "recompute_modules")) {
        if (!list.empty()) list += ',';
        list += n;
      }
    } else {
      list = json_util::get<std::string>(row, ctx, "recompute_modules");
    }
    p.recompute_modules = recompute_modules_from_string(list, ctx + " recompute_modules");
  }
  // Megatron's --recompute-method / --recompute-num-layers: block recomputes the first N layers of every chunk;
  // uniform checkpoints groups of N layers, so every layer recomputes (full recompute as dtsim runs it).
  const std::string method = lower(opt_str(row, ctx, "recompute_method"));
  if (!method.empty() && method != "block" && method != "uniform")
    throw ConfigError(ctx + ": recompute_method '" + method + "' is not known (known: block, uniform)");
  if (!method.empty() || present(row, "recompute_num_layers")) {
    if (present(row, "recompute") && p.recompute != Recompute::FULL)
      throw ConfigError(ctx + ": recompute_method / recompute_num_layers need recompute full (the row has " +
                        to_string(p.recompute) + ")");
    p.recompute = Recompute::FULL;
    const int n = opt_int(row, ctx, "recompute_num_layers").value_or(0);
    if (n < 0) throw ConfigError(ctx + ": recompute_num_layers must be 0 or more");
    if (method == "uniform" && n > 0) notes.add("recompute method uniform: every layer recomputed");
    else if (n > 0) p.recompute_num_layers = n;  // checked against the chunks by ParallelPlan
  }
  const std::string sched = lower(opt_str(row, ctx, "pp_schedule"));
  // DeepSeek's DualPipe (bidirectional, two parameter copies) and DualPipeV (its cut-in-half V): their own schedules.
  const bool interleaved = contains(sched, "interleaved") && !contains(sched, "non-interleaved");
  if (contains(sched, "dualpipe")) {
    if (vp > 1) throw ConfigError(ctx + ": pp_schedule '" + sched + "' with vp " + std::to_string(vp));
    set_schedule(p, contains(sched, "dualpipev") ? "dualpipev" : "dualpipe", ctx);
  } else if (p.pp > 1 && (vp > 1 || interleaved)) {
    // An interleaved schedule whose depth the source does not give (Llama 3's Table 4: "V ... not stated"): the least
    // interleaving, two model chunks per rank.
    if (!vp_stated) {
      vp = 2;
      notes.add("interleaving depth not stated: 2 model chunks per rank assumed");
    }
    if (vp < 2) throw ConfigError(ctx + ": interleaved schedule with vp " + std::to_string(vp));
    set_schedule(p, "interleaved:" + std::to_string(vp), ctx);
  } else {
    if (vp > 1) throw ConfigError(ctx + ": vp " + std::to_string(vp) + " without pipeline parallelism");
    p.schedule = Schedule::ONE_F_ONE_B;
  }
  // ZeRO: FSDP shards everything; Megatron's distributed optimizer shards optimizer states.
  // A free-text sharding that does not start with its stage but names one (Llama 3: FSDP that shards optimizer states
  // and gradients but does not reshard the parameters after the forward, "ZeRO-2-like"): that stage, even under FSDP.
  const std::string zero_text =
      present(row, "zero_stage") && row.at("zero_stage").is_string() ? opt_str(row, ctx, "zero_stage") : "";
  const bool leading_stage = !zero_text.empty() && std::isdigit(static_cast<unsigned char>(zero_text[0]));
  if (const auto like = leading_stage ? std::nullopt : zero_stage_named(zero_text)) {
    p.zero_stage = *like;
    if (opt_bool(row, ctx, "fsdp").value_or(false))
      notes.add("FSDP described as ZeRO-" + std::to_string(*like) + "-like: ZeRO stage " + std::to_string(*like));
  } else if (opt_bool(row, ctx, "fsdp").value_or(false)) {
    p.zero_stage = 3;
    // torchtitan with PP: torch.distributed.pipelining runs every backward of a step but the last with FSDP's
    // reshard_after_backward and requires_gradient_sync off (PipelineStage.backward_maybe_with_nosync in
    // torch/distributed/pipelining/stage.py), and torchtitan builds such stages with reshard_after_forward=False: the
    // parameters stay gathered and the gradients accumulate unsharded through the step, reduce-scattered once after
    // the last backward; only the fp32 parameters and optimizer states stay sharded. That is ZeRO-1's memory and
    // communication (full bf16 weights and gradients, one reduce-scatter and one all-gather per step).
    if (stack == Stack::TORCHTITAN && p.pp > 1) {
      p.zero_stage = 1;
      notes.add("FSDP under torch pipelining: weights and gradients unsharded through the step (ZeRO-1)");
    }
  } else if (opt_bool(row, ctx, "distributed_optimizer").value_or(false)) p.zero_stage = 1;
  else if (present(row, "zero_stage") && row.at("zero_stage").is_string()) {
    // Free text that starts with the stage ("1 (DeepSpeed BF16_Optimizer ...)", large_scale_papers.json).
    const std::string& z = zero_text;
    if (z.empty() || z[0] < '0' || z[0] > '3' || (z.size() > 1 && std::isdigit(static_cast<unsigned char>(z[1]))))
      throw ConfigError(ctx + ": zero_stage '" + z + "' does not start with a stage 0-3");
    p.zero_stage = z[0] - '0';
  } else p.zero_stage = opt_int(row, ctx, "zero_stage").value_or(0);
  // Megatron-FSDP (Megatron-Core --use-megatron-fsdp) rather than the distributed optimizer or FSDP2: a row says so
  // with megatron_fsdp (and fsdp_double_buffer); the plan's validation refuses it below ZeRO 2.
  p.megatron_fsdp = opt_bool(row, ctx, "megatron_fsdp").value_or(false);
  p.fsdp_double_buffer = opt_bool(row, ctx, "fsdp_double_buffer").value_or(false);
  // Megatron-LM with bf16 accumulates and reduces gradients in fp32 main_grad buffers by default
  // (accumulate_allreduce_grads_in_fp32 is set for --bf16). torchtitan reduces in fp32 too: its FSDP2 mixed-precision
  // policy has reduce_dtype float32 (job config mixed_precision_reduce, default "float32"),
  // and under pipelining FSDP2 accumulates the unsharded gradients in that dtype
  // (FSDPParam.to_accumulated_grad_if_needed, torch/distributed/fsdp/_fully_shard/_fsdp_param.py). Memory: FSDP2 keeps
  // fp32 sharded parameters and gradients with no separate master copy, 16 bytes per parameter; the ZeRO accounting
  // with fp32 gradients counts 18 (2 + 4 + 12).
  p.fp32_grads = stack == Stack::MEGATRON_CORE || stack == Stack::TORCHTITAN;
  // torchtitan's TP always shards the norms' activations (SequenceParallel); elsewhere the row says.
  const auto sp = opt_bool(row, ctx, "sequence_parallel");
  p.sequence_parallel = p.tp > 1 && sp.value_or(stack == Stack::TORCHTITAN);
  // Megatron-Core refuses an MoE layer with TP but without sequence parallelism (megatron/core/transformer/moe): a run
  // that does not say ran with it.
  if (!sp && p.tp > 1 && model.moe.enabled() && !p.sequence_parallel) {
    p.sequence_parallel = true;
    notes.add("sequence parallelism not stated: on (Megatron-Core requires it for MoE with TP)");
  }
  p.cp_kind = cp_kind_of(row, ctx, stack, notes);
  if (present(row, "moe_dispatcher")) {
    const std::string d = lower(json_util::get<std::string>(row, ctx, "moe_dispatcher"));
    p.dispatcher = dispatcher_from_string(d, ctx + ": moe_dispatcher");
  }
  if (model.moe.enabled()) routing_of(row, ctx, p);
  // Node-limited routing (DeepSeek-V3 report section 3.2.2): a token goes by IB once to each of its at most M nodes,
  // to the GPU at its own position there, which forwards it over NVLink -- the flex dispatcher's two hops.
  if (model.moe.router_group_topk > 0 && model.moe.router_groups == 0 && !present(row, "moe_dispatcher")) {
    p.dispatcher = dispatcher_from_string("deepep", ctx);
    notes.add(
        "node-limited routing: tokens dispatched in two hops, IB once per node then NVLink (the flex "
        "dispatcher, deepep)");
  }
  if (present(row, "per_stage_plan")) p.layers_per_stage = layers_per_stage_of(row, ctx, model, p.pp, notes);
  if (present(row, "pipeline_layout")) {
    // Megatron-Core's --pipeline-model-parallel-layout, as the 2026 recipes give it (checked by ParallelPlan).
    p.pipeline_layout = json_util::get<std::string>(row, ctx, "pipeline_layout");
    p.layers_per_stage = parse_pipeline_layout(p.pipeline_layout, ctx).layers;
  }
  if (stack == Stack::MEGATRON_DEEPSPEED) {
    // DeepSpeed's pipeline engine (used at every pp, ZeRO 0) reduces the gradients after the pipeline flush
    // (ReduceGrads after the last micro-batch's backward): nothing overlaps the backward.
    p.dp_overlap = false;
    if (p.dp > 1) notes.add("DeepSpeed reduces gradients after the pipeline flush: no DP overlap");
    if (p.pp > 1) notes.add("DeepSpeed pipeline TrainSchedule predicted as 1F1B");
  }
  // A row that says its run overlapped nothing (SimuMax's B200 table: "no overlap-grad-reduce / overlap-param-gather
  // flags"): Megatron-Core then reduces the gradients after the last micro-batch's backward (--overlap-grad-reduce is
  // off by default in megatron/training/arguments.py).
  {
    const std::string overlap = lower(opt_str(row, ctx, "overlap"));
    if ((overlap.rfind("none", 0) == 0 || contains(overlap, "no overlap-grad-reduce")) && p.dp_overlap) {
      p.dp_overlap = false;
      if (p.dp > 1) notes.add("gradients reduced after the last backward: the row overlaps nothing");
    }
  }
  // Async TP (torchtitan) overlaps the sequence-parallel all-gathers and reduce-scatters with their GEMMs in
  // pieces, as Megatron-Core's --tp-comm-overlap does.
  if (opt_bool(row, ctx, "async_tp").value_or(false) || opt_bool(row, ctx, "tp_comm_overlap").value_or(false)) {
    if (p.tp > 1 && p.sequence_parallel) p.tp_comm_overlap = true;
    else notes.add("TP communication overlap without sequence-parallel TP: nothing to overlap");
  }
  if (opt_bool(row, ctx, "overlap_param_gather").value_or(false) && (p.zero_stage == 1 || p.zero_stage == 2))
    p.overlap_param_gather = true;
  if (opt_bool(row, ctx, "compile").value_or(false))
    notes.add("torch.compile: its fusion of the stack's eager RMSNorm modelled, the rest of its fusion not");
  if (p.recompute_num_layers > 0 && p.pp > 0 && p.virtual_stages > 0) {
    // Block recompute of at least every chunk's layers is full recompute of every layer (Megatron's loop stops there).
    const auto chunks = p.chunk_layers(model.num_layers);
    if (p.recompute_num_layers >= *std::max_element(chunks.begin(), chunks.end())) {
      notes.add("recompute_num_layers " + std::to_string(p.recompute_num_layers) +
                " covers every layer of every chunk: full recompute");
      p.recompute_num_layers = 0;
    }
  }
  return p;
}

/// The low-precision recipe of an "fp8" row: torchao Float8 (torchtitan) scales tensorwise unless the row says
/// rowwise; Megatron-Core with Transformer Engine uses delayed scaling unless the row names another recipe.
Precision precision_of(const json& row, const std::string& ctx, const std::string& precision, Stack stack,
                       Notes& notes) {
  if (precision == "mxfp8") return Precision::MXFP8;
  if (precision == "nvfp4") return Precision::NVFP4;
  if (precision != "fp8") return Precision::BF16;
  const std::string detail = lower(opt_str(row, ctx, "precision") + " " + opt_str(row, ctx, "quantization_detail") +
                                   " " + opt_str(row, ctx, "float8_recipe") + " " + opt_str(row, ctx, "fp8_recipe"));
  if (contains(detail, "mxfp8") || contains(detail, "fp8-mx")) return Precision::MXFP8;
  if (contains(detail, "rowwise")) return Precision::FP8_ROWWISE;
  if (contains(detail, "blockwise") || contains(detail, "block scaling") || contains(detail, "fp8-sb")) {
    // Transformer Engine's Float8BlockScaling (DeepSeek-V3's 1x128 / 128x128 scales) has no recipe of its own here:
    // like rowwise it computes fine-grained scales in every cast and scales in the GEMM epilogue.
    notes.add(
        "FP8 block scaling predicted as the rowwise recipe (fine-grained scales: an amax pass per cast, a "
        "scaling epilogue)");
    return Precision::FP8_ROWWISE;
  }
  if (contains(detail, "tensorwise") || contains(detail, "current") || contains(detail, "fp8-cs"))
    return Precision::FP8_CURRENT;
  if (contains(detail, "delayed") || contains(detail, "fp8-ds")) return Precision::FP8_DELAYED;
  if (stack == Stack::TORCHTITAN) {
    notes.add("float8 recipe not stated: torchao's default tensorwise scaling assumed");
    return Precision::FP8_CURRENT;
  }
  notes.add("fp8 recipe not stated: Transformer Engine's default delayed scaling assumed");
  return Precision::FP8_DELAYED;
}

DType dtype_of(const json& row, const std::string& ctx, Stack stack, std::string& precision, Notes& notes) {
  precision = lower(opt_str(row, ctx, "precision"));
  if (precision.ends_with(" [?]")) {  // the curators' weak inference (large_scale_papers.json conventions)
    precision.resize(precision.size() - 4);
    notes.add("precision " + precision + " inferred by the data's curators, not stated by the source");
  }
  if (precision.empty() && stack == Stack::MEGATRON_DEEPSPEED) {
    // SAILOR's framework trains in fp32 unless the launcher passes --fp16/--bf16 (its one Clariden launcher,
    // run_opt.slurm, passes neither), and SAILOR's validate.py simulates every validation plan with fp16=False.
    notes.add("precision not stated: fp32 assumed (SAILOR's launcher and simulator default)");
    return DType::FP32;
  }
  if (precision.empty()) {
    notes.add("precision not stated: bf16 assumed");
    return DType::BF16;
  }
  // Low-precision linears in a bf16 model (precision_of picks the recipe): "fp8", "fp8 (delayed scaling)", "fp8-cs",
  // "fp8-ds" / "fp8-mx" (recipe shorthands: current scaling, delayed, MXFP8), "mxfp8", "nvfp4" / "fp4".
  if (precision == "mxfp8" || precision == "nvfp4" || precision == "fp4") {
    if (precision == "fp4") precision = "nvfp4";
    return DType::BF16;
  }
  if (precision == "fp8" || starts_with(precision, "fp8 ") || starts_with(precision, "fp8-") ||
      starts_with(precision, "fp8_")) {
    precision = contains(precision, "mx") ? "mxfp8" : "fp8";
    return DType::BF16;
  }
  if (precision == "bf16") return DType::BF16;
  if (precision == "fp16") return DType::FP16;
  if (precision == "fp32") return DType::FP32;
  throw ConfigError(ctx + ": precision '" + precision +
                    "' is not known (known: bf16, fp16, fp32, fp8 and its recipes, mxfp8, nvfp4)");
}

// ---- groups and measurements -------------------------------------------------------------------------------

/// torchtitan: the table a row is from, shortened ("Table 4", "asyncTP benchmark (June 2025): Llama3.1-8B on 64
/// H100", "Trainy on WhiteFiber").
std::string table_group(const std::string& table) {
  std::string t = table.substr(0, table.find(" | "));
  if (starts_with(t, "Table ")) return t.substr(0, t.find(':'));
  return t.substr(0, t.find(", "));
}

/// Never throws: failed rows keep a group too.
std::string group_of(const json& row, Stack stack, const json& shapes) {
  auto int_or = [&](const char* name, int fallback) {
    const auto it = row.find(name);
    return it != row.end() && it->is_number_integer() ? it->get<int>() : fallback;
  };
  const auto model_it = row.find("model");
  std::string model = model_it != row.end() && model_it->is_string() ? model_it->get<std::string>() : "?";
  if (stack == Stack::TORCHTITAN) {
    const auto it = row.find("table");
    return it != row.end() && it->is_string() ? table_group(it->get<std::string>()) : model;
  }
  if (stack == Stack::MEGATRON_DEEPSPEED) return model;
  if (int_or("cp", 1) > 1) return "cp";
  bool moe = int_or("ep", 1) > 1;
  if (shapes.is_object() && shapes.contains(model) && shapes.at(model).is_object()) {
    const auto it = shapes.at(model).find("moe");
    moe = moe || (it != shapes.at(model).end() && it->is_object());
  }
  return moe ? "moe" : "dense";
}

/// The FLOP count a source used for its MFU and model TFLOP/s (flop_conventions.hpp): the row's "flop_convention",
/// else the convention its publication states (large_scale_papers.json "conventions": mfu_definitions); nullopt when
/// neither says.
std::optional<FlopConvention> flop_convention_of(const json& row, const std::string& ctx) {
  if (present(row, "flop_convention")) {
    const std::string name = json_util::get<std::string>(row, ctx, "flop_convention");
    if (const auto c = flop_convention_named(name)) return c;
    throw ConfigError(ctx + ": flop_convention '" + name + "' is not known (known: palm, megatron-2021, " +
                      "megatron-core-2025)");
  }
  const std::string source = opt_str(row, ctx, "source");
  if (source == "llama3") return FlopConvention::PALM;  // Table 4 "BF16 MFU", citing Chowdhery et al.
  if (source == "megascale") return FlopConvention::MEGATRON_2021;
  // "Model TFLOPS Utilization" of Megatron-Core (the count is Megatron-LM's num_floating_point_operations)
  if (source == "moe_parallel_folding") return FlopConvention::MEGATRON_CORE_2025;
  return std::nullopt;
}

/// A row that gives no iteration time but the source's model TFLOP/s per GPU: the time is the source's FLOP count
/// over that rate (the source divided the same count by the time). 0 when the row has an iteration time.
struct RateOnly {
  double tflops_per_gpu = 0;
  double mfu = 0;  ///< when no TFLOP/s is given: over the GPU preset's dense bf16 peak (the sources' peaks: 312, 989.5)
  std::optional<FlopConvention> convention;
};

void measured_of(const json& row, const std::string& ctx, Stack stack, PublishedRow& r, RateOnly& rate, Notes& notes) {
  const json& m = json_util::get<json>(row, ctx, "measured");
  const std::string mctx = ctx + ": measured";
  if (!m.is_object()) throw ConfigError(mctx + ": expected a JSON object");
  r.measured_s = opt_number(m, mctx, "iteration_s").value_or(0);
  r.measured_oom = opt_bool(m, mctx, "oom").value_or(false);
  if (const auto b = opt_number(m, mctx, "peak_memory_bytes")) {
    r.measured_peak_memory_bytes = *b;
  } else if (present(m, "peak_allocated_by_rank_mib") && m.at("peak_allocated_by_rank_mib").is_object()) {
    for (const auto& [rank, mib] : m.at("peak_allocated_by_rank_mib").items())
      if (mib.is_number())
        r.measured_peak_memory_bytes = std::max(r.measured_peak_memory_bytes, mib.get<double>() * units::kMiB);
  } else if (const auto gib = opt_number(m, mctx, "peak_memory_gib")) {
    r.measured_peak_memory_bytes = *gib * units::kGiB;
  }
  if (r.measured_peak_memory_bytes < 0) throw ConfigError(mctx + ": peak memory must not be negative");
  if (r.measured_peak_memory_bytes > 0) {
    r.memory_from_allocator = stack != Stack::MEGATRON_DEEPSPEED;
    if (stack == Stack::MEGATRON_CORE) notes.add("measured memory: torch max_memory_allocated");
    if (stack == Stack::MEGATRON_DEEPSPEED)
      notes.add("measured memory: nvidia-smi used memory (CUDA context and allocator reserve included)");
  }
  if (r.measured_oom) {
    notes.add("measured: out of memory (no time)");
    r.measured_s = 0;
  } else if (!(r.measured_s > 0)) {
    rate.convention = flop_convention_of(row, ctx);
    rate.tflops_per_gpu = opt_number(m, mctx, "tflops_per_gpu").value_or(0);
    rate.mfu = opt_number(m, mctx, "mfu").value_or(0);
    if (!(rate.tflops_per_gpu > 0 || (rate.mfu > 0 && rate.mfu <= 1)) || !rate.convention)
      throw ConfigError(mctx + ": no positive iteration_s, no out-of-memory outcome, and no tflops_per_gpu or mfu " +
                        "with a known FLOP count (flop_convention)");
  }
}

/// The keys a published-data row may have (the union over the sources in ../shared/measurements and
/// tests/data/published; README there documents each). Keys ending in _note, _source or _detail are the curators'
/// commentary and pass. Anything else is refused with the known ones listed, so that a typo ("precison") is not
/// predicted as if it were absent.
void check_row_keys(const json& row, const std::string& ctx) {
  static const std::set<std::string> known = {"async_tp",
                                              "batch_size_per_dp",
                                              "cluster",
                                              "compile",
                                              "cp",
                                              "cp_comm_type",
                                              "cp_rotate_method",
                                              "cross_entropy_fusion",
                                              "distributed_optimizer",
                                              "dp",
                                              "ep",
                                              "etp",
                                              "flags",
                                              "framework",
                                              "fsdp",
                                              "fsdp_float8_all_gather",
                                              "flop_convention",
                                              "float8_recipe",
                                              "fsdp_degree",
                                              "fsdp_double_buffer",
                                              "fp8_recipe",
                                              "ga",
                                              "gbs",
                                              "gpu",
                                              "gpu_memory_bytes_sailor_config",
                                              "gpu_types",
                                              "gpus",
                                              "gpus_per_node",
                                              "heterogeneous",
                                              "id",
                                              "inferred",
                                              "layers_run",
                                              "local_batch_size",
                                              "mbs",
                                              "measured",
                                              "measurement_method",
                                              "megatron_fsdp",
                                              "model",
                                              "moe_capacity",
                                              "moe_dispatcher",
                                              "network",
                                              "nic_gbps",
                                              "nics_per_node",
                                              "nodes",
                                              "outcome",
                                              "overlap",
                                              "overlap_param_gather",
                                              "per_stage_plan",
                                              "pipeline_layout",
                                              "pipeline_list_as_given",
                                              "plan_file",
                                              "pp",
                                              "pp_microbatches",
                                              "pp_schedule",
                                              "precision",
                                              "quote",
                                              "recompute",
                                              "recompute_method",
                                              "recompute_modules",
                                              "recompute_num_layers",
                                              "seq",
                                              "sequence_parallel",
                                              "source",
                                              "source_override",
                                              "stack",
                                              "sp_ulysses",
                                              "system",
                                              "table",
                                              "tokens_B_in_stage",
                                              "tokens_per_batch_printed",
                                              "tp",
                                              "tp_comm_overlap",
                                              "vp",
                                              "zero_stage",
                                              "zone"};
  for (const auto& [key, value] : row.items()) {
    (void)value;
    if (known.count(key) || key.ends_with("_note") || key.ends_with("_source") || key.ends_with("_detail")) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    throw ConfigError(ctx + ": unknown field '" + key + "' (known: " + list +
                      "; and commentary keys ending in _note, _source or _detail)");
  }
}

PublishedRow row_of(const json& row, int index, const std::string& path, std::optional<Stack> doc_stack,
                    const json& shapes) {
  PublishedRow r;
  r.index = index;
  r.gpu.clear();  // set once the hardware is known; failed rows have none
  if (row.is_object() && row.contains("id") && row.at("id").is_string()) r.id = row.at("id").get<std::string>();
  const std::string ctx = path + ": row " + std::to_string(index) + (r.id.empty() ? "" : " ('" + r.id + "')");
  Notes notes;
  const Stack stack = row_stack(row, doc_stack, notes);
  try {
    if (!row.is_object()) throw ConfigError(ctx + ": expected a JSON object");
    r.group = group_of(row, stack, shapes);
    r.series = opt_str(row, ctx, "source");
    // MegaScale's own rows and its cumulative ablation steps change the model (megascale_system); a row of another
    // system that changes the model is not expressible.
    const int megascale = megascale_step(row, ctx);
    for (const auto& f : json_util::get_or<std::vector<std::string>>(row, ctx, "flags", {})) {
      if (starts_with(f, "model_modified_by_system") && megascale < 2)
        throw ConfigError(ctx + ": the system changes the model (" + f + "): not expressible");
      notes.add(f);
    }
    RateOnly rate;
    measured_of(row, ctx, stack, r, rate, notes);
    check_row_keys(row, ctx);
    const int gpus = req_int(row, ctx, "gpus");
    if (gpus <= 0) throw ConfigError(ctx + ": gpus must be positive");
    const Hardware hw = hardware_of(row, ctx, gpus, notes);
    const std::string model_name = json_util::get<std::string>(row, ctx, "model");
    r.model = shape_model(shapes, model_name, ctx, stack, r.series, notes);
    if (const auto layers = opt_int(row, ctx, "layers_run")) r.model.num_layers = *layers;
    if (r.model.moe.enabled() && r.model.moe.dense_layers >= r.model.num_layers)
      throw ConfigError(ctx + ": " + std::to_string(r.model.num_layers) + " layers run, all of them dense");
    r.model.seq_len = req_int(row, ctx, "seq");
    r.model.dtype = dtype_of(row, ctx, stack, r.precision, notes);
    r.plan = plan_of(row, ctx, stack, r.model, gpus, notes);
    r.plan.precision = precision_of(row, ctx, r.precision, stack, notes);
    // torch.compile and FSDP2's float8 all-gather: as the row states them, else as the run's torchtitan config sets
    // them (torchtitan_config).
    const TorchtitanConfig tt = torchtitan_config(stack, model_name);
    const auto compiled = opt_bool(row, ctx, "compile");
    r.compiled = compiled.value_or(tt.compile);
    if (!compiled && tt.compile)
      notes.add("torch.compile not stated: torchtitan's " + tt.file + " sets compile = true");
    r.plan.torch_compile = r.compiled;
    r.recompute_unstated = !present(row, "recompute");
    r.zero_unstated = !present(row, "fsdp") && !present(row, "distributed_optimizer") && !present(row, "zero_stage");
    r.plan.stack = stack_name(row, ctx, stack);
    if (const auto f8ag = opt_bool(row, ctx, "fsdp_float8_all_gather")) {
      r.plan.fsdp_float8_all_gather = *f8ag;
    } else if (tt.fsdp_float8_all_gather && r.plan.zero_stage == 3 && r.plan.precision == Precision::FP8_CURRENT) {
      r.plan.fsdp_float8_all_gather = true;
      notes.add("FSDP float8 all-gather on: torchtitan's " + tt.file + " sets enable_fsdp_float8_all_gather");
    }
    node_limited_routing(row, ctx, r.model, r.plan, notes);
    framework_conventions(row, ctx, r.plan, r.model.moe.enabled(), notes);
    megascale_system(megascale, r.model, r.plan, notes);
    // Megatron-Core with the distributed optimizer, the overlap left unstated: the gradients' reduce-scatter overlaps
    // the backward (the plan's dp_overlap default) and the parameters' all-gather the next forward, the pair Megatron-
    // LM's own launch examples set together (examples/mixtral/train_mixtral_8x7b_distributed.sh and examples/llama/
    // train_llama3_8b_h100_fp8.sh: --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather) and NeMo's
    // configurations default to (distributed_fused_adam with overlap_grad_sync and overlap_param_sync, e.g.
    // NeMo-Framework-Launcher conf/training/nemotron/nemotron_15b.yaml).
    r.overlap_unstated = !present(row, "overlap") && !present(row, "overlap_param_gather");
    if (param_gather_overlap_assumed(r.plan, r.overlap_unstated)) {
      r.plan.overlap_param_gather = true;
      notes.add("overlap not stated: Megatron-Core's --overlap-param-gather assumed with the distributed optimizer");
    }
    r.sp_unstated = r.plan.tp > 1 && !r.plan.sequence_parallel && !present(row, "sequence_parallel");
    // Megatron pads the vocabulary to a multiple of 128 x tp (--make-vocab-size-divisible-by 128).
    if (stack == Stack::MEGATRON_CORE) {
      const std::int64_t mult = 128LL * r.plan.tp, padded = (r.model.vocab + mult - 1) / mult * mult;
      if (padded > INT32_MAX) throw ConfigError(ctx + ": vocabulary padded for tp is out of range");
      r.model.vocab = static_cast<int>(padded);
    }
    if (rate.tflops_per_gpu == 0 && rate.mfu > 0) {
      const double peak_tflops = gpu_preset(hw.gpu).peak_flops(DType::BF16) / units::kTera;
      rate.tflops_per_gpu = rate.mfu * peak_tflops;
      char buf[120];
      std::snprintf(buf, sizeof buf, "MFU %.3g of the %s preset's %.4g TFLOP/s bf16 peak", rate.mfu, hw.gpu.c_str(),
                    peak_tflops);
      notes.add(buf);
    }
    if (rate.tflops_per_gpu > 0) {
      const double flops = convention_flops_per_iteration(*rate.convention, r.model, r.plan.global_batch_size);
      r.measured_s = flops / (rate.tflops_per_gpu * units::kTera * gpus);
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    "iteration time %.4g s from the source's %.4g TFLOP/s per GPU and the %s FLOP count", r.measured_s,
                    rate.tflops_per_gpu, flop_convention_name(*rate.convention).c_str());
      notes.add(buf);
    }
    r.cluster = hw.cluster;
    r.gpu = hw.gpu;
  } catch (const Error& e) {
    r.failure = e.what();
    r.gpu.clear();
  }
  r.notes = notes.joined();
  return r;
}

}  // namespace

bool is_measurements_document(const nlohmann::json& doc) {
  return doc.is_object() && doc.contains("model_shapes") && doc.contains("rows");
}

std::vector<PublishedRow> load_measurements_document(const nlohmann::json& doc, const std::string& path) {
  const json& rows = doc.at("rows");
  const json& shapes = doc.at("model_shapes");
  if (!rows.is_array()) throw FormatError(path + ": 'rows' must be a list");
  if (!shapes.is_object()) throw FormatError(path + ": 'model_shapes' must be an object");
  const std::optional<Stack> stack = stack_of(doc, path);
  std::vector<PublishedRow> out;
  out.reserve(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i)
    out.push_back(row_of(rows[i], static_cast<int>(i), path, stack, shapes));
  return out;
}

}  // namespace dtsim::sim
