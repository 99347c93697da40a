// The open-weight presets (Llama 3, Mixtral, DeepSeek-V3, Qwen3 MoE, gpt-oss): total and active parameter counts
// against the published figures (within 1%), the parameter formulas on small shapes, the new JSON keys (round trip,
// defaults, errors) and the validation of the MoE / MLA / head_dim fields.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/error_of.hpp"
#include "traces/error.hpp"
#include "traces/model.hpp"

namespace {
using dtsim::AttentionKind;
using dtsim::ConfigError;
using dtsim::TransformerSpec;
using dtsim::testing::contains;
using dtsim::testing::error_of;
using nlohmann::json;

// |actual / published - 1| <= 1%.
void expect_within_1pct(double actual, double published, const char* what) {
  EXPECT_LE(std::abs(actual / published - 1), 0.01)
      << what << ": " << actual / 1e9 << "B vs published " << published / 1e9 << "B (" << 100 * (actual / published - 1)
      << "%)";
}

struct Published {
  const char* preset;
  double total;                   // published total parameters
  double active;                  // published active parameters (0: dense, active == total)
  bool active_without_embedding;  // the publisher counts active parameters without the input embedding (a lookup)
};

// Published figures:
//  llama3-8b 8.03B, llama3-70b 70.6B: the parameter counts Hugging Face shows for meta-llama/Meta-Llama-3-8B and
//    Meta-Llama-3-70B; llama3-405b 405.9B: meta-llama/Llama-3.1-405B (shown as 406B; Dubey et al. 2024, "The Llama 3
//    Herd of Models": 405B).
//  mixtral-8x7b 46.7B total, 12.9B active: the Mistral AI announcement of Mixtral 8x7B ("46.7B total parameters but
//    only uses 12.9B parameters per token"; Jiang et al. 2024, "Mixtral of Experts": 47B and 13B).
//  deepseek-v3 671B total, 36.7B active: deepseek-ai/DeepSeek-V3 README_WEIGHTS.md (main model, without the 14B MTP
//    module: "Total parameters: 671B", "Activation parameters: 36.7B"; the report, arXiv 2412.19437: 671B and 37B).
//    The config gives 37.55B active with the 0.93B input embedding and 36.63B without: the published 36.7B and 37B
//    are reached only without the embedding lookup (README_WEIGHTS.md says they include it; 37.55B would round to
//    38B), so DeepSeek's active count is compared without it.
//  qwen3-30b-a3b 30.5B total, 3.3B active; qwen3-235b-a22b 235B total, 22B active: the Qwen/Qwen3-30B-A3B and
//    Qwen/Qwen3-235B-A22B model cards ("30.5B in total and 3.3B activated", "235B in total and 22B activated"). The
//    config's 3.353B active is written 3.3B (cut, not rounded): checked separately below.
//  glm-4.5 355B total: the zai-org/GLM-4.5 model card.
//  gpt-oss-120b 116.8B total, 5.1B active: OpenAI, "gpt-oss-120b & gpt-oss-20b Model Card" (arXiv 2508.10925),
//    section 2 (116.8B total, 5.1B active). The config gives 5.71B active with the 0.58B input embedding and 5.13B
//    without: OpenAI counts the unembedding but not the embedding. Its attention biases and sinks (8,064 per layer)
//    are not modelled.
const Published kPublished[] = {
    {"llama3-8b", 8.03e9, 0, false},
    {"llama3-70b", 70.6e9, 0, false},
    {"llama3-405b", 405.9e9, 0, false},
    {"mixtral-8x7b", 46.7e9, 12.9e9, false},
    {"deepseek-v3", 671e9, 36.7e9, true},
    {"qwen3-30b-a3b", 30.5e9, 0, false},  // active: see Qwen3_30bActiveAsTheCardWritesIt
    {"qwen3-235b-a22b", 235e9, 22e9, false},
    {"gpt-oss-120b", 116.8e9, 5.1e9, true},
    {"glm-4.5", 355e9, 0, false},  // active: see KimiK2AndGlm45AsPublished
};

TEST(ModelPresets, KimiK2AndGlm45AsPublished) {
  // Kimi K2: "32 billion activated parameters and 1 trillion total" (moonshotai/Kimi-K2 model card); 1.04T in the
  // report (arXiv 2507.20534). Its config gives 1.026T and 32.86B active with the 1.17B input embedding, 31.69B
  // without: the active count matches DeepSeek's convention (without the lookup) within 1%; the report's total is
  // 1.3% above the config's, about the 14B an MTP module of DeepSeek-V3's shape holds (the config declares none).
  const TransformerSpec k = dtsim::model_preset("kimi-k2");
  const double emb = static_cast<double>(k.vocab) * k.hidden;
  expect_within_1pct(static_cast<double>(k.active_params()) - emb, 32e9, "kimi-k2 active");
  EXPECT_NEAR(static_cast<double>(k.total_params()), 1.04e12, 1.04e12 * 0.015);  // 1.3% under, as explained
  // GLM-4.5: "355 billion total parameters and 32 billion active parameters" (zai-org/GLM-4.5 model card). The config
  // gives 352.8B (its MTP layer not counted) and 32.86B active without the embedding: the card's 32B is cut, not
  // rounded, as Qwen3-30B-A3B's 3.3B.
  const TransformerSpec g = dtsim::model_preset("glm-4.5");
  const double active = static_cast<double>(g.active_params()) - static_cast<double>(g.vocab) * g.hidden;
  EXPECT_GE(active, 32e9);
  EXPECT_LT(active, 33e9);
}

TEST(ModelPresets, TotalAndActiveParamsMatchPublishedWithin1Percent) {
  for (const auto& p : kPublished) {
    SCOPED_TRACE(p.preset);
    const TransformerSpec m = dtsim::model_preset(p.preset);
    EXPECT_NO_THROW(m.validate());
    expect_within_1pct(static_cast<double>(m.total_params()), p.total, "total");
    if (p.active == 0) {
      if (!m.moe.enabled()) {
        EXPECT_EQ(m.active_params(), m.total_params());
      }
      continue;
    }
    double active = static_cast<double>(m.active_params());
    if (p.active_without_embedding) active -= static_cast<double>(m.embedding_params());
    expect_within_1pct(active, p.active, "active");
  }
}

TEST(ModelPresets, DeepSeekV3ActiveRoundsToThe37BOfItsReport) {
  const TransformerSpec m = dtsim::model_preset("deepseek-v3");
  EXPECT_EQ(std::llround(static_cast<double>(m.active_params() - m.embedding_params()) / 1e9), 37);
}

TEST(ModelPresets, Qwen3_30bActiveAsTheCardWritesIt) {
  // 48 x (attention 18,874,368 + norms 8,192 + router 262,144 + 8 experts x 4,718,592) + 2 x 311,164,928 + 4,096
  //   = 2,730,885,120 + 622,329,856 + 4,096 = 3,353,219,072: the card's "3.3B activated" is this cut to one decimal (2%
  //   below it), as the card's "30.5B in total" is 30.53B; rounded it would read 3.4B. Without the embedding it would
  //   be 3.04B: not that either.
  const TransformerSpec m = dtsim::model_preset("qwen3-30b-a3b");
  EXPECT_EQ(m.active_params(), 3353219072LL);
  EXPECT_EQ(static_cast<long>(std::floor(static_cast<double>(m.active_params()) / 1e8)), 33);
  EXPECT_LE(std::abs(static_cast<double>(m.active_params()) / 3.3e9 - 1), 0.02);
}

TEST(ModelPresets, ExactCountsOfTheNewPresets) {
  // Llama 3 8B: layer = 4096*(4096+2*1024) + 4096*4096 (no biases) + 3*4096*14336 + 4*4096
  //   = 25,165,824 + 16,777,216 + 176,160,768 + 16,384 = 218,120,192; x32 = 6,979,846,144;
  //   + 2 x 128256*4096 (untied) = 1,050,673,152 + final norm 8,192 = 8,030,527,488
  //   (Hugging Face counts 8,030,261,248: RMSNorms have no shift, 2h per layer less, and a final norm of h).
  const auto l3 = dtsim::model_preset("llama3-8b");
  EXPECT_EQ(l3.layer_params(), 218120192LL);
  EXPECT_EQ(l3.total_params(), 8030527488LL);
  EXPECT_EQ(l3.active_params(), l3.total_params());
  // Mixtral: expert 3*4096*14336 = 176,160,768; MoE layer = attention 41,959,424 + router 32,768 + 8 experts
  //   = 1,451,278,336; x32 + 262,144,000 + 8,192 = 46,703,058,944 (Hugging Face: 46,702,792,704).
  const auto mx = dtsim::model_preset("mixtral-8x7b");
  EXPECT_EQ(mx.expert_params(), 176160768LL);
  EXPECT_EQ(mx.attention_params(), 41959424LL);
  EXPECT_EQ(mx.moe_layer_params(), 1451278336LL);
  EXPECT_EQ(mx.total_params(), 46703058944LL);
  EXPECT_EQ(mx.active_params(), 32LL * (41959424 + 32768 + 2 * 176160768) + 262144000 + 8192);
  // DeepSeek-V3 MLA attention: q 7168*1536 + 1536 + 1536*128*192 = 48,760,320; kv 7168*576 + 512 + 512*128*256 =
  //   20,906,496; out 128*128*7168 = 117,440,512; norms 28,672 -> 187,136,000.
  const auto ds = dtsim::model_preset("deepseek-v3");
  EXPECT_EQ(ds.attention_params(), 187136000LL);
  EXPECT_EQ(ds.num_moe_layers(), 58);
  EXPECT_FALSE(ds.is_moe_layer(2));
  EXPECT_TRUE(ds.is_moe_layer(3));
  // MoE layer: attention + router 7168*256 + 256 experts of 3*7168*2048 + one shared expert of 2048.
  EXPECT_EQ(ds.moe_layer_params(), 187136000LL + 7168LL * 256 + 257LL * 3 * 7168 * 2048);
  // gpt-oss: an expert with biases: 3*2880*2880 + 2*2880 + 2880 = 24,891,840.
  EXPECT_EQ(dtsim::model_preset("gpt-oss-120b").expert_params(), 24891840LL);
}

TEST(ModelPresets, ShapesFromTheConfigs) {
  const auto q = dtsim::model_preset("qwen3-30b-a3b");
  EXPECT_EQ(q.head_dim(), 128);
  EXPECT_EQ(q.q_dim(), 4096);  // 32 heads of 128 on a hidden of 2048
  EXPECT_EQ(q.kv_dim(), 512);
  EXPECT_FALSE(q.tied_embeddings);  // config.json: "tie_word_embeddings": false
  for (const char* n : {"llama3-8b", "llama3-70b", "llama3-405b", "mixtral-8x7b", "deepseek-v3", "qwen3-30b-a3b",
                        "qwen3-235b-a22b", "gpt-oss-120b"}) {
    SCOPED_TRACE(n);
    const auto m = dtsim::model_preset(n);
    EXPECT_EQ(m.dtype, dtsim::DType::BF16);
    EXPECT_EQ(m.mlp, dtsim::MlpKind::SWIGLU);
    EXPECT_EQ(m.attention, AttentionKind::FLASH);
    EXPECT_TRUE(m.causal);
    EXPECT_FALSE(m.tied_embeddings);
    EXPECT_FALSE(m.learned_pos_embedding);
  }
  const auto g = dtsim::model_preset("gpt-oss-120b");
  EXPECT_EQ(g.q_dim(), 4096);
  EXPECT_EQ(g.kv_dim(), 512);
  EXPECT_TRUE(g.moe.expert_bias);
  const auto ds = dtsim::model_preset("deepseek-v3");
  EXPECT_TRUE(ds.moe.sigmoid_router);
  EXPECT_TRUE(ds.mla.enabled());
  EXPECT_EQ(ds.moe.shared_ffn_hidden, 2048);
}

TEST(ModelPresets, ExistingPresetsKeepTheirCounts) {
  // GPT presets: unchanged (attention and FFN biases, LayerNorms).
  EXPECT_EQ(dtsim::model_preset("gpt3-175b").total_params(), 174615846912LL);
  for (const auto& n : dtsim::model_preset_names()) {
    SCOPED_TRACE(n);
    const auto m = dtsim::model_preset(n);
    if (!m.moe.enabled()) {
      EXPECT_EQ(m.active_params(), m.total_params());
      EXPECT_EQ(m.moe_layer_params(), m.layer_params());
      EXPECT_EQ(m.expert_params(), 0);
    }
  }
  // llama2-70b (SwiGLU): no attention biases any more, 10240 + 8192 less per layer than before.
  EXPECT_EQ(dtsim::model_preset("llama2-70b").layer_params(), 855689216LL - 18432);
}

TEST(ModelParams, SmallMoeByHand) {
  // h 8, 2 heads, 1 kv head, head_dim 4 (q_dim 8, kv_dim 4), ffn 16, 2 layers of which 1 dense, 4 experts of 6, top-2,
  // shared 10, SwiGLU, vocab 10, untied, no positions.
  TransformerSpec m = dtsim::model_preset("llama3-8b");
  m.num_layers = 2;
  m.hidden = 8;
  m.heads = 2;
  m.kv_heads = 1;
  m.ffn_hidden = 16;
  m.seq_len = 4;
  m.vocab = 10;
  m.moe = {4, 2, 6, 1, 10, 1, false, false};
  m.validate();
  const std::int64_t attn = 224;           // 8*(8 + 2*4) + 8*8 + norms 4*8 = 128 + 64 + 32
  const std::int64_t expert = 144;         // 3*8*6
  const std::int64_t router = 32;          // 8*4
  const std::int64_t shared = 240;         // 3*8*10
  const std::int64_t rest = 80 + 80 + 16;  // embedding, head, final norm
  EXPECT_EQ(m.attention_params(), attn);
  EXPECT_EQ(m.layer_params(), attn + 384);  // 3*8*16
  EXPECT_EQ(m.expert_params(), expert);
  EXPECT_EQ(m.moe_layer_params(), attn + router + 4 * expert + shared);
  EXPECT_EQ(m.total_params(), m.layer_params() + m.moe_layer_params() + rest);
  EXPECT_EQ(m.active_params(), m.layer_params() + attn + router + 2 * expert + shared + rest);
  // Expert biases (gate + up 2f, down h); head_dim explicit.
  m.moe.expert_bias = true;
  EXPECT_EQ(m.expert_params(), 3 * 8 * 6 + 2 * 6 + 8);
  m.head_dim_override = 8;  // q_dim 16, kv_dim 8
  EXPECT_EQ(m.attention_params(), 8 * (16 + 16) + 16 * 8 + 4 * 8);
  // MLA without a q down-projection: q 8*2*(3+2), kv 8*(4+2) + 4 + 4*2*(3+5), out 2*5*8.
  m.mla = {0, 4, 3, 2, 5};
  m.validate();
  EXPECT_EQ(m.attention_params(), 8 * 2 * 5 + 8 * 6 + 4 + 4 * 2 * 8 + 2 * 5 * 8 + 4 * 8);
  m.mla.q_lora_rank = 3;  // q: 8*3 + 3 + 3*2*5
  EXPECT_EQ(m.attention_params(), 8 * 3 + 3 + 3 * 2 * 5 + 8 * 6 + 4 + 4 * 2 * 8 + 2 * 5 * 8 + 4 * 8);
}

TEST(ModelJson, NewKeysRoundTripForEveryPreset) {
  for (const auto& n : dtsim::model_preset_names()) {
    SCOPED_TRACE(n);
    const auto m = dtsim::model_preset(n);
    const json j = dtsim::to_json(m);
    const TransformerSpec back = dtsim::model_from_json(json::parse(j.dump()), "test");
    EXPECT_EQ(back.head_dim_override, m.head_dim_override);
    EXPECT_EQ(back.attention, m.attention);
    EXPECT_EQ(back.causal, m.causal);
    EXPECT_EQ(back.moe, m.moe);
    EXPECT_EQ(back.mla, m.mla);
    EXPECT_EQ(back.total_params(), m.total_params());
    EXPECT_EQ(back.active_params(), m.active_params());
    EXPECT_EQ(j.contains("moe"), m.moe.enabled());
    EXPECT_EQ(j.contains("active_params"), m.moe.enabled());
    EXPECT_EQ(j.contains("mla"), m.mla.enabled());
    EXPECT_EQ(j.contains("head_dim"), m.head_dim_override > 0);
    if (m.moe.enabled()) {
      EXPECT_EQ(j.at("active_params").get<std::int64_t>(), m.active_params());
    }
  }
  // The older presets write exactly the keys they wrote before (summary.json and sweep ids hash this text).
  const json g = dtsim::to_json(dtsim::model_preset("gpt3-1.3b"));
  for (const char* k : {"attention", "causal", "head_dim", "moe", "mla", "active_params"})
    EXPECT_FALSE(g.contains(k)) << k;
  const json d = dtsim::to_json(dtsim::model_preset("deepseek-v3"));
  EXPECT_EQ(d.at("attention"), "flash");
  EXPECT_EQ(d.at("moe").at("router"), "sigmoid");
  EXPECT_EQ(d.at("mla").at("kv_lora_rank"), 512);
}

TEST(ModelJson, NewKeysReadWithDefaults) {
  const json base = {{"num_layers", 2}, {"hidden", 64}, {"heads", 4}, {"seq_len", 16}, {"vocab", 100}};
  TransformerSpec m = dtsim::model_from_json(base, "t");
  EXPECT_EQ(m.attention, AttentionKind::UNFUSED);
  EXPECT_TRUE(m.causal);
  EXPECT_EQ(m.head_dim_override, 0);
  EXPECT_FALSE(m.moe.enabled());
  EXPECT_FALSE(m.mla.enabled());
  json j = base;
  j["attention"] = "flash";
  j["causal"] = false;
  j["head_dim"] = 32;
  j["moe"] = {{"experts", 8}, {"top_k", 2}, {"expert_ffn_hidden", 96}};
  j["mla"] = {{"kv_lora_rank", 16}, {"qk_nope_head_dim", 8}, {"qk_rope_head_dim", 4}, {"v_head_dim", 8}};
  m = dtsim::model_from_json(j, "t");
  m.validate();
  EXPECT_EQ(m.attention, AttentionKind::FLASH);
  EXPECT_FALSE(m.causal);
  EXPECT_EQ(m.head_dim_override, 32);
  EXPECT_EQ(m.moe, (dtsim::MoeSpec{8, 2, 96, 0, 0, 0, false, false}));
  EXPECT_EQ(m.mla, (dtsim::MlaSpec{0, 16, 8, 4, 8}));
  const TransformerSpec back = dtsim::model_from_json(dtsim::to_json(m), "t");
  EXPECT_EQ(back.moe, m.moe);
  EXPECT_EQ(back.mla, m.mla);
  EXPECT_FALSE(back.causal);
  EXPECT_EQ(dtsim::to_json(back), dtsim::to_json(m));
}

TEST(ModelJson, NewKeysRejectBadValues) {
  const json base = {{"num_layers", 2}, {"hidden", 64}, {"heads", 4}, {"seq_len", 16}, {"vocab", 100}};
  auto err = [&](const json& patch) {
    json j = base;
    j.merge_patch(patch);
    return error_of<ConfigError>([&] { dtsim::model_from_json(j, "model file 'm.json'").validate(); });
  };
  std::string msg = err({{"attention", "sdpa"}});
  EXPECT_EQ(msg, "model file 'm.json': unknown attention 'sdpa' (known: unfused, flash)");
  msg = err({{"moe", {{"experts", 8}, {"top_k", 2}, {"expert_ffn_hidden", 96}, {"capacity", 1}}}});
  EXPECT_TRUE(contains(msg, "unknown field 'capacity'")) << msg;
  msg = err({{"moe", {{"experts", 8}, {"top_k", 2}, {"expert_ffn_hidden", 96}, {"router", "relu"}}}});
  EXPECT_TRUE(contains(msg, "unknown router 'relu' (known: softmax, sigmoid)")) << msg;
  msg = err({{"moe", {{"experts", 8}, {"expert_ffn_hidden", 96}}}});
  EXPECT_TRUE(contains(msg, "missing field 'top_k'")) << msg;
  msg = err({{"mla", {{"kv_lora_rank", 16}, {"qk_nope_head_dim", 8}, {"qk_rope_head_dim", 4}, {"v_dim", 8}}}});
  EXPECT_TRUE(contains(msg, "unknown field 'v_dim'")) << msg;
  msg = err({{"moe", 8}});
  EXPECT_TRUE(contains(msg, "field 'moe' has the wrong type")) << msg;
  msg = err({{"hiden", 8}});
  EXPECT_TRUE(contains(msg, "unknown field 'hiden'")) << msg;
  msg = err({{"causal", "yes"}});
  EXPECT_TRUE(contains(msg, "field 'causal' has the wrong type")) << msg;
}

TEST(ModelValidate, MoeMlaAndHeadDimFieldsNameTheField) {
  const TransformerSpec ok = dtsim::model_preset("mixtral-8x7b");
  auto msg_of = [](const TransformerSpec& m) { return error_of<ConfigError>([&] { m.validate(); }); };
  TransformerSpec m = ok;
  m.moe.top_k = 9;
  EXPECT_EQ(msg_of(m), "model 'mixtral-8x7b': field 'moe.top_k' must be from 1 to the 8 experts, got 9");
  m.moe.top_k = 0;
  EXPECT_TRUE(contains(msg_of(m), "field 'moe.top_k'"));
  m = ok;
  m.moe.expert_ffn_hidden = 0;
  EXPECT_EQ(msg_of(m), "model 'mixtral-8x7b': field 'moe.expert_ffn_hidden' must be positive, got 0");
  m = ok;
  m.moe.dense_layers = 32;
  EXPECT_EQ(msg_of(m), "model 'mixtral-8x7b': field 'moe.dense_layers' must be from 0 to num_layers - 1 = 31, got 32");
  m.moe.dense_layers = -1;
  EXPECT_TRUE(contains(msg_of(m), "field 'moe.dense_layers'"));
  m = ok;
  m.moe.shared_experts = 1;
  EXPECT_TRUE(contains(msg_of(m), "field 'moe.shared_ffn_hidden' must be positive")) << msg_of(m);
  m = ok;
  m.moe.experts = -2;
  EXPECT_EQ(msg_of(m), "model 'mixtral-8x7b': field 'moe.experts' must not be negative, got -2");
  m = ok;
  m.head_dim_override = -1;
  EXPECT_EQ(msg_of(m), "model 'mixtral-8x7b': field 'head_dim' must not be negative, got -1");
  // hidden % heads only without head_dim and MLA.
  m = ok;
  m.hidden = 4100;  // not a multiple of 32 heads
  EXPECT_TRUE(contains(msg_of(m), "hidden 4100 is not divisible by heads 32")) << msg_of(m);
  m.head_dim_override = 128;
  EXPECT_NO_THROW(m.validate());
  m.head_dim_override = 0;
  m.mla = {0, 512, 128, 64, 128};
  EXPECT_NO_THROW(m.validate());
  m.mla.v_head_dim = 0;
  EXPECT_EQ(msg_of(m), "model 'mixtral-8x7b': field 'mla.v_head_dim' must be positive, got 0");
  m.mla.v_head_dim = 128;
  m.mla.q_lora_rank = -1;
  EXPECT_EQ(msg_of(m), "model 'mixtral-8x7b': field 'mla.q_lora_rank' must not be negative, got -1");
  m = ok;
  m.mla.kv_lora_rank = -5;
  EXPECT_EQ(msg_of(m), "model 'mixtral-8x7b': field 'mla.kv_lora_rank' must not be negative, got -5");
  // heads x head_dim must fit an int; the 10^15 bound counts the experts.
  m = ok;
  m.head_dim_override = 1 << 30;
  EXPECT_TRUE(contains(msg_of(m), "x head_dim 1073741824 is beyond what dtsim models")) << msg_of(m);
  m = ok;
  m.moe.experts = 1 << 20;
  m.moe.expert_ffn_hidden = 1 << 20;
  EXPECT_TRUE(contains(msg_of(m), "1048576 experts of expert_ffn_hidden 1048576 make more than 10^15 parameters"))
      << msg_of(m);
  for (const auto& n : dtsim::model_preset_names()) EXPECT_NO_THROW(dtsim::model_preset(n).validate()) << n;
}

TEST(ModelStrings, AttentionKind) {
  EXPECT_EQ(dtsim::to_string(AttentionKind::UNFUSED), "unfused");
  EXPECT_EQ(dtsim::to_string(AttentionKind::FLASH), "flash");
  EXPECT_EQ(dtsim::attention_kind_from_string("flash", "--attention"), AttentionKind::FLASH);
  EXPECT_EQ(dtsim::attention_kind_from_string("unfused", "--attention"), AttentionKind::UNFUSED);
  EXPECT_EQ(error_of<ConfigError>([] { dtsim::attention_kind_from_string("x", "--attention"); }),
            "--attention: unknown attention 'x' (known: unfused, flash)");
}

}  // namespace
