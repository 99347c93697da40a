// Unit tests of dtsim::traces: model/cluster/plan/calibration specs and their JSON, json_util, the Chrome-trace
// writer, the atomic output writer and unit conversions. Expected values are derived by hand in the comments.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/error_of.hpp"
#include "traces/accuracy_bands.hpp"
#include "traces/calibration.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/cluster.hpp"
#include "traces/error.hpp"
#include "traces/json_util.hpp"
#include "traces/model.hpp"
#include "traces/output.hpp"
#include "traces/plan.hpp"
#include "traces/stack_profile.hpp"
#include "traces/units.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using dtsim::testing::contains;
using dtsim::testing::error_of;

// A fresh directory path under the system temp dir, unique per process and per tag; removed on destruction.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() / ("dtsim-test-" + tag + "-" + std::to_string(::getpid()));
    fs::remove_all(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> dir_entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void expect_models_equal(const dtsim::TransformerSpec& a, const dtsim::TransformerSpec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.hidden, b.hidden);
  EXPECT_EQ(a.heads, b.heads);
  EXPECT_EQ(a.kv_heads, b.kv_heads);
  EXPECT_EQ(a.ffn_hidden, b.ffn_hidden);
  EXPECT_EQ(a.seq_len, b.seq_len);
  EXPECT_EQ(a.vocab, b.vocab);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.tied_embeddings, b.tied_embeddings);
  EXPECT_EQ(a.learned_pos_embedding, b.learned_pos_embedding);
  EXPECT_EQ(a.mlp, b.mlp);
}

// A cluster of exactly `gpus` GPUs on one node (for plan validation).
dtsim::ClusterSpec one_node(int gpus) { return dtsim::load_cluster("dgx-a100:" + std::to_string(gpus)); }

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Model presets
// ---------------------------------------------------------------------------------------------------------------

TEST(ModelPreset, EveryListedNameLoadsAndValidates) {
  const auto names = dtsim::model_preset_names();
  ASSERT_EQ(names.size(), 29u);
  std::set<std::string> unique(names.begin(), names.end());
  EXPECT_EQ(unique.size(), names.size()) << "preset names must be unique";
  for (const auto& n : names) {
    SCOPED_TRACE(n);
    dtsim::TransformerSpec m;
    ASSERT_NO_THROW(m = dtsim::load_model(n));
    EXPECT_EQ(m.name, n);
    EXPECT_NO_THROW(m.validate());
    EXPECT_GT(m.total_params(), 0);
  }
}

TEST(ModelPreset, Gpt3_175bTotalParamsExact) {
  // h = 12288, kv = h, f = 4h, V = 51200, s = 2048, L = 96, tied, learned positions.
  // layer = h(h+2kv) + (h+2kv) + h*h + h + 2hf + f + h + 4h = 12h^2 + 13h = 1,812,099,072
  // embedding = V*h + s*h = 629,145,600 + 25,165,824 = 654,311,424; final norm = 2h = 24,576; head = 0 (tied)
  // total = 96 * 1,812,099,072 + 654,311,424 + 24,576 = 174,615,846,912 (~174.6e9)
  const auto m = dtsim::model_preset("gpt3-175b");
  EXPECT_EQ(m.layer_params(), 1812099072LL);
  EXPECT_EQ(m.embedding_params(), 654311424LL);
  EXPECT_EQ(m.head_params(), 0LL);
  EXPECT_EQ(m.final_norm_params(), 24576LL);
  EXPECT_EQ(m.total_params(), 174615846912LL);
}

TEST(ModelPreset, Llama2_70bUsesGqaAndSwiglu) {
  const auto m = dtsim::model_preset("llama2-70b");
  EXPECT_EQ(m.num_layers, 80);
  EXPECT_EQ(m.hidden, 8192);
  EXPECT_EQ(m.heads, 64);
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_EQ(m.ffn_hidden, 28672);
  EXPECT_EQ(m.mlp, dtsim::MlpKind::SWIGLU);
  EXPECT_EQ(m.dtype, dtsim::DType::BF16);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_FALSE(m.learned_pos_embedding);
  // head_dim = 8192/64 = 128; kv_dim = 8*128 = 1024.
  EXPECT_EQ(m.head_dim(), 128);
  EXPECT_EQ(m.kv_dim(), 1024);
  // layer = h(h+2kv) + h^2 + 3hf + 4h (LLaMA has no biases)
  //       = 83,886,080 + 67,108,864 + 704,643,072 + 32,768 = 855,670,784
  EXPECT_EQ(m.layer_params(), 855670784LL);
  // total = 80*layer + V*h (embedding, no positions) + V*h (untied head) + 2h
  //       = 68,453,662,720 + 262,144,000 + 262,144,000 + 16,384 = 68,977,967,104
  EXPECT_EQ(m.total_params(), 68977967104LL);
}

TEST(ModelPreset, UnknownNameThrowsConfigErrorListingKnown) {
  std::string msg = error_of<dtsim::ConfigError>([] { dtsim::model_preset("gpt5-9000b"); });
  EXPECT_TRUE(contains(msg, "gpt5-9000b")) << msg;
  EXPECT_TRUE(contains(msg, "known:")) << msg;
  EXPECT_TRUE(contains(msg, "gpt3-175b")) << msg;
  // load_model goes through the same path for a bare name.
  msg = error_of<dtsim::ConfigError>([] { dtsim::load_model("nosuchmodel"); });
  EXPECT_TRUE(contains(msg, "nosuchmodel")) << msg;
}

// ---------------------------------------------------------------------------------------------------------------
// Model JSON
// ---------------------------------------------------------------------------------------------------------------

TEST(ModelJson, RoundTripPreservesEveryFieldForEveryPreset) {
  for (const auto& n : dtsim::model_preset_names()) {
    SCOPED_TRACE(n);
    const auto m = dtsim::model_preset(n);
    const json j = dtsim::to_json(m);
    EXPECT_EQ(j.at("schema_version").get<int>(), 1);
    EXPECT_EQ(j.at("params").get<std::int64_t>(), m.total_params());
    expect_models_equal(dtsim::model_from_json(j, "test"), m);
  }
}

TEST(ModelJson, RoundTripOfNonDefaultCustomModel) {
  dtsim::TransformerSpec m;
  m.name = "custom-x";
  m.num_layers = 7;
  m.hidden = 96;
  m.heads = 6;
  m.kv_heads = 2;
  m.ffn_hidden = 200;
  m.seq_len = 33;
  m.vocab = 1001;
  m.dtype = dtsim::DType::FP32;
  m.tied_embeddings = false;
  m.learned_pos_embedding = false;
  m.mlp = dtsim::MlpKind::SWIGLU;
  // Through text as well, as a file would be.
  const json j = json::parse(dtsim::to_json(m).dump());
  expect_models_equal(dtsim::model_from_json(j, "test"), m);
}

TEST(ModelJson, MissingHiddenIsConfigErrorNamingField) {
  json j = dtsim::to_json(dtsim::model_preset("gpt3-1.3b"));
  j.erase("hidden");
  const std::string msg = error_of<dtsim::ConfigError>([&] { dtsim::model_from_json(j, "model file 'x.json'"); });
  EXPECT_TRUE(contains(msg, "missing field 'hidden'")) << msg;
  EXPECT_TRUE(contains(msg, "model file 'x.json'")) << msg;
}

TEST(ModelJson, UnknownFieldIsConfigErrorNamingIt) {
  json j = dtsim::to_json(dtsim::model_preset("gpt3-1.3b"));
  j["hiden"] = 2048;
  const std::string msg = error_of<dtsim::ConfigError>([&] { dtsim::model_from_json(j, "ctx"); });
  EXPECT_TRUE(contains(msg, "unknown field 'hiden'")) << msg;
}

TEST(ModelJson, WrongTypeIsConfigErrorNamingFieldAndType) {
  json j = dtsim::to_json(dtsim::model_preset("gpt3-1.3b"));
  j["num_layers"] = "twenty-four";
  const std::string msg = error_of<dtsim::ConfigError>([&] { dtsim::model_from_json(j, "ctx"); });
  EXPECT_TRUE(contains(msg, "'num_layers'")) << msg;
  EXPECT_TRUE(contains(msg, "wrong type")) << msg;
  EXPECT_TRUE(contains(msg, "string")) << msg;
}

TEST(ModelJson, SchemaVersion2Rejected) {
  json j = dtsim::to_json(dtsim::model_preset("gpt3-1.3b"));
  j["schema_version"] = 2;
  const std::string msg = error_of<dtsim::ConfigError>([&] { dtsim::model_from_json(j, "ctx"); });
  EXPECT_TRUE(contains(msg, "schema_version 2")) << msg;
}

TEST(ModelJson, OptionalFieldsTakeDocumentedDefaults) {
  // Only the required fields: kv_heads defaults to heads, ffn_hidden to 4*hidden, dtype fp16, tied, learned
  // positions, gelu, name "custom".
  json j = {{"num_layers", 2}, {"hidden", 64}, {"heads", 4}, {"seq_len", 16}, {"vocab", 100}};
  const auto m = dtsim::model_from_json(j, "ctx");
  EXPECT_EQ(m.name, "custom");
  EXPECT_EQ(m.kv_heads, 4);
  EXPECT_EQ(m.ffn_hidden, 256);
  EXPECT_EQ(m.dtype, dtsim::DType::FP16);
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_TRUE(m.learned_pos_embedding);
  EXPECT_EQ(m.mlp, dtsim::MlpKind::GELU);
}

TEST(ModelJson, UnknownDtypeAndMlpRejected) {
  json j = dtsim::to_json(dtsim::model_preset("gpt3-1.3b"));
  j["dtype"] = "fp8";
  std::string msg = error_of<dtsim::ConfigError>([&] { dtsim::model_from_json(j, "ctx"); });
  EXPECT_TRUE(contains(msg, "fp8")) << msg;
  j = dtsim::to_json(dtsim::model_preset("gpt3-1.3b"));
  j["mlp"] = "relu";
  msg = error_of<dtsim::ConfigError>([&] { dtsim::model_from_json(j, "ctx"); });
  EXPECT_TRUE(contains(msg, "relu")) << msg;
}

TEST(ModelValidate, HiddenNotDivisibleByHeads) {
  auto m = dtsim::model_preset("gpt3-1.3b");  // 2048 / 16
  m.heads = 3;
  m.kv_heads = 3;
  const std::string msg = error_of<dtsim::ConfigError>([&] { m.validate(); });
  EXPECT_TRUE(contains(msg, "hidden 2048 is not divisible by heads 3")) << msg;
}

TEST(ModelValidate, HeadsNotDivisibleByKvHeadsAndNonPositiveFields) {
  auto m = dtsim::model_preset("gpt3-1.3b");
  m.kv_heads = 3;  // 16 % 3 != 0
  std::string msg = error_of<dtsim::ConfigError>([&] { m.validate(); });
  EXPECT_TRUE(contains(msg, "kv_heads 3")) << msg;
  m = dtsim::model_preset("gpt3-1.3b");
  m.vocab = 0;
  msg = error_of<dtsim::ConfigError>([&] { m.validate(); });
  EXPECT_TRUE(contains(msg, "'vocab' must be positive")) << msg;
}

TEST(ModelLoad, FromJsonFileValidates) {
  TempDir d("model");
  fs::create_directories(d.path);
  json j = dtsim::to_json(dtsim::model_preset("gpt3-1.3b"));
  { std::ofstream(d.path / "m.json") << j.dump(); }
  expect_models_equal(dtsim::load_model((d.path / "m.json").string()), dtsim::model_preset("gpt3-1.3b"));
  j["heads"] = 3;
  j["kv_heads"] = 3;
  { std::ofstream(d.path / "bad.json") << j.dump(); }
  const std::string msg = error_of<dtsim::ConfigError>([&] { dtsim::load_model((d.path / "bad.json").string()); });
  EXPECT_TRUE(contains(msg, "not divisible by heads")) << msg;
}

// ---------------------------------------------------------------------------------------------------------------
// Cluster
// ---------------------------------------------------------------------------------------------------------------

TEST(Cluster, DgxA100_1024Shape) {
  const auto c = dtsim::load_cluster("dgx-a100:1024");
  EXPECT_EQ(c.name, "dgx-a100:1024");
  EXPECT_EQ(c.num_nodes, 128);
  EXPECT_EQ(c.gpus_per_node, 8);
  EXPECT_EQ(c.total_gpus(), 1024);
  EXPECT_EQ(c.gpu.name, "a100-sxm4-80gb");
  EXPECT_EQ(c.gpu.peak_fp16_flops, 312e12);
  EXPECT_EQ(c.gpu.peak_flops(dtsim::DType::BF16), 312e12);
  EXPECT_EQ(c.gpu.peak_flops(dtsim::DType::FP32), 19.5e12);
  EXPECT_EQ(c.intra.kind, "nvswitch");
  EXPECT_EQ(c.intra.bandwidth_Bps, 300e9);
  EXPECT_EQ(c.inter.nics_per_node, 8);
  EXPECT_EQ(c.inter.nic_bandwidth_Bps, 25e9);  // HDR 200 Gb/s = 200e9/8 B/s
}

TEST(Cluster, DgxA100_4IsOneNodeOfFourGpus) {
  const auto c = dtsim::load_cluster("dgx-a100:4");
  EXPECT_EQ(c.num_nodes, 1);
  EXPECT_EQ(c.gpus_per_node, 4);
  EXPECT_EQ(c.total_gpus(), 4);
  EXPECT_EQ(c.inter.nics_per_node, 4);                // 8 NICs * 4/8 GPUs
  const auto bare = dtsim::load_cluster("dgx-h100");  // bare preset: one full node
  EXPECT_EQ(bare.num_nodes, 1);
  EXPECT_EQ(bare.gpus_per_node, 8);
  EXPECT_EQ(bare.intra.bandwidth_Bps, 450e9);
  EXPECT_EQ(bare.inter.nic_bandwidth_Bps, 50e9);  // NDR 400 Gb/s
}

TEST(Cluster, PartialNodeCountRejected) {
  const std::string msg = error_of<dtsim::ConfigError>([] { dtsim::load_cluster("dgx-a100:12"); });
  EXPECT_TRUE(contains(msg, "not a whole number")) << msg;
  EXPECT_TRUE(contains(msg, "12")) << msg;
}

TEST(Cluster, BadGpuCountRejected) {
  for (const char* spec : {"dgx-a100:x", "dgx-a100:0", "dgx-a100:", "dgx-a100:-8", "dgx-a100:8x"}) {
    SCOPED_TRACE(spec);
    const std::string msg = error_of<dtsim::ConfigError>([&] { dtsim::load_cluster(spec); });
    EXPECT_TRUE(contains(msg, "is not an integer from 1 to")) << msg;
  }
}

TEST(Cluster, HugeGpuCountDoesNotWrapToSmallCluster) {
  // 8 * (2^32 + 1) = 34,359,738,376 GPUs: num_nodes = 2^32 + 1 does not fit an int.
  EXPECT_THROW(dtsim::load_cluster("dgx-a100:34359738376"), dtsim::ConfigError);
}

TEST(Cluster, UnknownPresetRejected) {
  const std::string msg = error_of<dtsim::ConfigError>([] { dtsim::load_cluster("nope:8"); });
  EXPECT_TRUE(contains(msg, "unknown cluster preset 'nope'")) << msg;
  EXPECT_TRUE(contains(msg, "dgx-a100")) << msg;
}

TEST(Cluster, JsonRoundTrip) {
  for (const char* spec : {"dgx-a100:1024", "dgx-h100:4"}) {
    SCOPED_TRACE(spec);
    const auto c = dtsim::load_cluster(spec);
    const auto r = dtsim::cluster_from_json(json::parse(dtsim::to_json(c).dump()), "test");
    EXPECT_EQ(r.name, c.name);
    EXPECT_EQ(r.gpu.name, c.gpu.name);
    EXPECT_EQ(r.gpu.peak_fp16_flops, c.gpu.peak_fp16_flops);
    EXPECT_EQ(r.gpu.peak_bf16_flops, c.gpu.peak_bf16_flops);
    EXPECT_EQ(r.gpu.peak_fp32_flops, c.gpu.peak_fp32_flops);
    EXPECT_EQ(r.gpu.hbm_Bps, c.gpu.hbm_Bps);
    EXPECT_EQ(r.gpu.memory_bytes, c.gpu.memory_bytes);
    EXPECT_EQ(r.num_nodes, c.num_nodes);
    EXPECT_EQ(r.gpus_per_node, c.gpus_per_node);
    EXPECT_EQ(r.intra.kind, c.intra.kind);
    EXPECT_EQ(r.intra.bandwidth_Bps, c.intra.bandwidth_Bps);
    EXPECT_EQ(r.intra.latency_s, c.intra.latency_s);
    EXPECT_EQ(r.inter.nics_per_node, c.inter.nics_per_node);
    EXPECT_EQ(r.inter.nic_bandwidth_Bps, c.inter.nic_bandwidth_Bps);
    EXPECT_EQ(r.inter.latency_s, c.inter.latency_s);
    EXPECT_NO_THROW(r.validate());
  }
}

TEST(Cluster, JsonGpuPresetByNameAndUnknownField) {
  json j = dtsim::to_json(dtsim::load_cluster("dgx-a100:16"));
  j["gpu"] = "h100-sxm5-80gb";
  const auto c = dtsim::cluster_from_json(j, "ctx");
  EXPECT_EQ(c.gpu.peak_fp16_flops, 989e12);
  EXPECT_EQ(c.gpu.hbm_Bps, 3350e9);
  j["nodes"] = 2;
  const std::string msg = error_of<dtsim::ConfigError>([&] { dtsim::cluster_from_json(j, "ctx"); });
  EXPECT_TRUE(contains(msg, "unknown field 'nodes'")) << msg;
}

TEST(Cluster, NodeOfAndNicOf) {
  const auto c = dtsim::load_cluster("dgx-a100:32");  // 4 nodes x 8 GPUs, 8 NICs: GPU i uses NIC i % 8
  EXPECT_EQ(c.num_nodes, 4);
  for (int g = 0; g < 32; ++g) {
    EXPECT_EQ(c.node_of(g), g / 8) << g;
    EXPECT_EQ(c.nic_of(g), g % 8) << g;
  }
  // With 2 NICs per 8-GPU node: GPU local index i uses NIC i*2/8, i.e. 0-3 -> 0 and 4-7 -> 1.
  auto c2 = c;
  c2.inter.nics_per_node = 2;
  EXPECT_NO_THROW(c2.validate());
  const int expected[8] = {0, 0, 0, 0, 1, 1, 1, 1};
  for (int g = 0; g < 32; ++g) EXPECT_EQ(c2.nic_of(g), expected[g % 8]) << g;
}

TEST(Cluster, ValidateRejectsNicsNotDividingGpus) {
  auto c = dtsim::load_cluster("dgx-a100:16");
  c.inter.nics_per_node = 3;
  const std::string msg = error_of<dtsim::ConfigError>([&] { c.validate(); });
  EXPECT_TRUE(contains(msg, "multiple of inter_node.nics_per_node 3")) << msg;
}

// ---------------------------------------------------------------------------------------------------------------
// Plan
// ---------------------------------------------------------------------------------------------------------------

TEST(Plan, CoordAndRankInverseDefaultOrder) {
  dtsim::ParallelPlan p;
  p.tp = 2;
  p.dp = 3;
  p.pp = 4;
  ASSERT_EQ(p.world_size(), 24);
  std::set<int> seen;
  for (int r = 0; r < 24; ++r) {
    const auto c = p.coord_of(r);
    // TP innermost, then DP, then PP: rank = tp + 2*(dp + 3*pp).
    EXPECT_EQ(c.tp, r % 2) << r;
    EXPECT_EQ(c.dp, (r / 2) % 3) << r;
    EXPECT_EQ(c.pp, r / 6) << r;
    EXPECT_EQ(c.tp + 2 * (c.dp + 3 * c.pp), r);
    EXPECT_EQ(p.rank_of(c), r);
    seen.insert(p.rank_of(c));
  }
  EXPECT_EQ(seen.size(), 24u);
  for (int pp = 0; pp < 4; ++pp)
    for (int dp = 0; dp < 3; ++dp)
      for (int tp = 0; tp < 2; ++tp) EXPECT_EQ(p.rank_of({tp, dp, pp}), tp + 2 * (dp + 3 * pp));
}

TEST(Plan, CoordAndRankInverseOrderPpTpDp) {
  dtsim::ParallelPlan p;
  p.tp = 2;
  p.dp = 3;
  p.pp = 4;
  p.rank_order = dtsim::rank_order_from_string("pp,tp,dp", "test");
  // PP innermost (stride 1), then TP (stride 4), then DP (stride 8): rank = pp + 4*(tp + 2*dp).
  for (int pp = 0; pp < 4; ++pp)
    for (int dp = 0; dp < 3; ++dp)
      for (int tp = 0; tp < 2; ++tp) {
        const int r = pp + 4 * (tp + 2 * dp);
        EXPECT_EQ(p.rank_of({tp, dp, pp}), r);
        const auto c = p.coord_of(r);
        EXPECT_EQ(c.tp, tp);
        EXPECT_EQ(c.dp, dp);
        EXPECT_EQ(c.pp, pp);
      }
}

TEST(Plan, NumMicrobatches) {
  dtsim::ParallelPlan p;
  p.dp = 4;
  p.micro_batch_size = 2;
  p.global_batch_size = 64;
  EXPECT_EQ(p.num_microbatches(), 8);  // 64 / (2*4)
  p.global_batch_size = 1536;
  p.micro_batch_size = 1;
  p.dp = 8;
  EXPECT_EQ(p.num_microbatches(), 192);
}

TEST(Plan, StageLayersUniformWithRemainderFirst) {
  dtsim::ParallelPlan p;
  p.pp = 4;
  EXPECT_EQ(p.stage_layers(10), (std::vector<int>{3, 3, 2, 2}));  // 10 = 4*2 + 2: first two stages get one more
  EXPECT_EQ(p.stage_layers(96), (std::vector<int>{24, 24, 24, 24}));
  EXPECT_EQ(p.stage_layers(7), (std::vector<int>{2, 2, 2, 1}));
  p.layers_per_stage = {1, 4, 4, 1};
  EXPECT_EQ(p.stage_layers(10), (std::vector<int>{1, 4, 4, 1}));
}

namespace {
// A valid baseline: gpt3-1.3b (24 layers, 16 heads) on one node of 8 GPUs as tp2 pp2 dp2, gbs 16, mbs 1.
struct PlanFixture {
  dtsim::TransformerSpec model = dtsim::model_preset("gpt3-1.3b");
  dtsim::ClusterSpec cluster = dtsim::load_cluster("dgx-a100:8");
  dtsim::ParallelPlan plan;
  PlanFixture() {
    plan.tp = 2;
    plan.pp = 2;
    plan.dp = 2;
    plan.micro_batch_size = 1;
    plan.global_batch_size = 16;
  }
  std::string error() {
    return error_of<dtsim::ConfigError>([&] { plan.validate(model, cluster); });
  }
};
}  // namespace

TEST(PlanValidate, BaselineIsValid) {
  PlanFixture f;
  EXPECT_NO_THROW(f.plan.validate(f.model, f.cluster));
}

TEST(PlanValidate, EachInconsistencyHasDistinctMessage) {
  std::vector<std::string> messages;
  {
    PlanFixture f;
    f.plan.dp = 4;  // 16 != 8 GPUs
    messages.push_back(f.error());
    EXPECT_TRUE(contains(messages.back(), "tp*pp*dp = 2*2*4 = 16 does not match the 8 GPUs")) << messages.back();
  }
  {
    PlanFixture f;
    f.plan.global_batch_size = 15;  // not divisible by mbs*dp = 2
    messages.push_back(f.error());
    EXPECT_TRUE(contains(messages.back(), "global batch 15 is not divisible by micro batch * dp = 2"))
        << messages.back();
  }
  {
    PlanFixture f;
    f.model.heads = 15;  // tp 2 does not divide 15 heads (model itself need not be valid for this check)
    messages.push_back(f.error());
    EXPECT_TRUE(contains(messages.back(), "tp 2 does not divide the 15 attention heads")) << messages.back();
  }
  {
    PlanFixture f;
    f.plan.layers_per_stage = {8, 8, 8};  // 3 entries, pp 2
    messages.push_back(f.error());
    EXPECT_TRUE(contains(messages.back(), "layers_per_stage has 3 entries but pp is 2")) << messages.back();
  }
  {
    PlanFixture f;
    f.plan.layers_per_stage = {12, 11};  // sums to 23, model has 24
    messages.push_back(f.error());
    EXPECT_TRUE(contains(messages.back(), "layers_per_stage sums to 23 but the model has 24 layers"))
        << messages.back();
  }
  {
    PlanFixture f;
    f.plan.zero_stage = 4;
    messages.push_back(f.error());
    EXPECT_TRUE(contains(messages.back(), "zero stage 4 is not supported")) << messages.back();
  }
  {
    PlanFixture f;
    f.cluster = one_node(4);
    f.plan.tp = 1;
    f.plan.sequence_parallel = true;
    messages.push_back(f.error());
    EXPECT_TRUE(contains(messages.back(), "sequence parallelism needs tp > 1")) << messages.back();
  }
  {
    PlanFixture f;
    f.model.num_layers = 1;  // pp 2 > 1 layer
    messages.push_back(f.error());
    EXPECT_TRUE(contains(messages.back(), "pp 2 exceeds the 1 layers")) << messages.back();
  }
  std::set<std::string> unique(messages.begin(), messages.end());
  EXPECT_EQ(unique.size(), messages.size()) << "every inconsistency must have its own message";
}

TEST(PlanValidate, LayersPerStageNegativeOrInnerZeroEntryRejected) {
  PlanFixture f;
  f.plan.layers_per_stage = {25, -1};
  EXPECT_TRUE(contains(f.error(), "layers_per_stage entries must not be negative"));
  // A last chunk of the head alone is a Megatron-Core layout ("...|L"); an empty inner chunk is not.
  f.plan.layers_per_stage = {24, 0};
  EXPECT_NO_THROW(f.plan.validate(f.model, f.cluster));
}

TEST(PlanValidate, ExplicitLayersPerStageAccepted) {
  PlanFixture f;
  f.plan.layers_per_stage = {10, 14};
  EXPECT_NO_THROW(f.plan.validate(f.model, f.cluster));
}

TEST(RankOrder, ParsesAndPrints) {
  const auto o = dtsim::rank_order_from_string("pp,tp,dp", "ctx");
  EXPECT_EQ(o[0], dtsim::Axis::PP);
  EXPECT_EQ(o[1], dtsim::Axis::TP);
  EXPECT_EQ(o[2], dtsim::Axis::DP);
  EXPECT_EQ(dtsim::rank_order_string(o), "pp,tp,dp");
}

TEST(RankOrder, RejectsRepeatedMissingAndUnknownAxes) {
  std::string msg = error_of<dtsim::ConfigError>([] { dtsim::rank_order_from_string("tp,tp,pp", "ctx"); });
  EXPECT_TRUE(contains(msg, "names 'tp' twice")) << msg;
  msg = error_of<dtsim::ConfigError>([] { dtsim::rank_order_from_string("tp,dp", "ctx"); });
  EXPECT_TRUE(contains(msg, "must name tp, dp and pp once each")) << msg;
  msg = error_of<dtsim::ConfigError>([] { dtsim::rank_order_from_string("tp,dp,pp,tp", "ctx"); });
  EXPECT_TRUE(contains(msg, "must name tp, dp and pp once each")) << msg;
  msg = error_of<dtsim::ConfigError>([] { dtsim::rank_order_from_string("tp,ep,pp", "ctx"); });
  EXPECT_TRUE(contains(msg, "unknown axis 'ep'")) << msg;
}

TEST(PlanJson, RoundTripAllFields) {
  dtsim::ParallelPlan p;
  p.tp = 8;
  p.pp = 4;
  p.dp = 2;
  p.micro_batch_size = 2;
  p.global_batch_size = 64;
  p.layers_per_stage = {5, 6, 6, 7};
  p.schedule = dtsim::Schedule::GPIPE;
  p.zero_stage = 1;
  p.recompute = dtsim::Recompute::SELECTIVE;
  p.sequence_parallel = true;
  p.rank_order = {dtsim::Axis::DP, dtsim::Axis::PP, dtsim::Axis::TP};
  p.dp_overlap = false;
  p.dp_bucket_bytes = 12345.5;
  p.pp_comm_overlap = true;
  p.moe_grouped_gemm = false;
  const json j = json::parse(dtsim::to_json(p, 24).dump());
  EXPECT_EQ(j.at("num_microbatches").get<int>(), 16);  // 64 / (2*2)
  const auto r = dtsim::plan_from_json(j, "test");
  EXPECT_EQ(r.tp, p.tp);
  EXPECT_EQ(r.pp, p.pp);
  EXPECT_EQ(r.dp, p.dp);
  EXPECT_EQ(r.micro_batch_size, p.micro_batch_size);
  EXPECT_EQ(r.global_batch_size, p.global_batch_size);
  EXPECT_EQ(r.layers_per_stage, p.layers_per_stage);
  EXPECT_EQ(r.schedule, p.schedule);
  EXPECT_EQ(r.zero_stage, p.zero_stage);
  EXPECT_EQ(r.recompute, p.recompute);
  EXPECT_EQ(r.sequence_parallel, p.sequence_parallel);
  EXPECT_EQ(r.rank_order, p.rank_order);
  EXPECT_EQ(r.dp_overlap, p.dp_overlap);
  EXPECT_EQ(r.dp_bucket_bytes, p.dp_bucket_bytes);
  EXPECT_EQ(r.pp_comm_overlap, p.pp_comm_overlap);
  EXPECT_EQ(r.moe_grouped_gemm, p.moe_grouped_gemm);
}

TEST(PlanJson, DefaultPlanWritesUniformSplitExplicitly) {
  dtsim::ParallelPlan p;
  p.pp = 4;
  const json j = dtsim::to_json(p, 10);
  EXPECT_EQ(j.at("layers_per_stage").get<std::vector<int>>(), (std::vector<int>{3, 3, 2, 2}));
  EXPECT_EQ(j.at("rank_order").get<std::string>(), "tp,dp,pp");
  EXPECT_EQ(j.at("schedule").get<std::string>(), "1f1b");
  EXPECT_EQ(j.at("recompute").get<std::string>(), "none");
}

TEST(PlanJson, InconsistentNumMicrobatchesRejected) {
  json j = {{"dp", 2}, {"micro_batch_size", 2}, {"global_batch_size", 64}, {"num_microbatches", 8}};
  const std::string msg = error_of<dtsim::ConfigError>([&] { dtsim::plan_from_json(j, "ctx"); });
  EXPECT_TRUE(contains(msg, "num_microbatches 8 disagrees")) << msg;
  EXPECT_TRUE(contains(msg, "= 16")) << msg;
  j["num_microbatches"] = 16;
  EXPECT_EQ(dtsim::plan_from_json(j, "ctx").num_microbatches(), 16);
}

TEST(PlanJson, UnknownScheduleRecomputeAndFieldRejected) {
  json base = {{"micro_batch_size", 1}, {"global_batch_size", 8}};
  json j = base;
  j["schedule"] = "zigzag";
  EXPECT_TRUE(contains(error_of<dtsim::ConfigError>([&] { dtsim::plan_from_json(j, "c"); }), "'zigzag'"));
  j = base;
  j["recompute"] = "some";
  EXPECT_TRUE(contains(error_of<dtsim::ConfigError>([&] { dtsim::plan_from_json(j, "c"); }), "'some'"));
  j = base;
  j["zero"] = 1;
  EXPECT_TRUE(contains(error_of<dtsim::ConfigError>([&] { dtsim::plan_from_json(j, "c"); }), "unknown field 'zero'"));
}

// ---------------------------------------------------------------------------------------------------------------
// Calibration
// ---------------------------------------------------------------------------------------------------------------

TEST(Calibration, DefaultsForShippedGpusLoadAndValidate) {
  for (const auto& gpu : dtsim::gpu_preset_names()) {
    SCOPED_TRACE(gpu);
    dtsim::Calibration c;
    ASSERT_NO_THROW(c = dtsim::default_calibration(gpu));
    EXPECT_EQ(c.gpu, gpu);
    EXPECT_NO_THROW(c.validate("test"));
    EXPECT_TRUE(c.provenance.is_object());
    EXPECT_FALSE(c.provenance.empty());
  }
  // The A100 file's values (traces/calibration/a100-sxm4-80gb.json).
  const auto a = dtsim::default_calibration("a100-sxm4-80gb");
  EXPECT_EQ(a.gemm_efficiency_max, 0.8371);  // fitted on published single-node runs (Accuracy)
  EXPECT_EQ(a.gemm_half_efficiency_flops, 8.295e9);
  EXPECT_EQ(a.gemm_efficiency_exponent, 1.056);
  EXPECT_EQ(a.gemm_misaligned_efficiency, 0.6518);
  // Hardware only: the software values come from the run's stack profile (traces/stacks/).
  EXPECT_TRUE(a.pinned_software.empty());
  const auto md = dtsim::with_stack(a, "megatron-deepspeed");
  EXPECT_EQ(md.host_issue_s, 7.28e-5);
  EXPECT_EQ(md.host_collective_issue_s, 1.587e-5);
  EXPECT_EQ(md.p2p_overhead_s, 9.958e-4);
  EXPECT_TRUE(md.host_sync_each_pass);
  // Pipeline exchanges: DeepSpeed's and 2020-23 Megatron-LM's block in every schedule, Megatron-Core's outside the
  // interleaved one, torchtitan's never.
  EXPECT_EQ(md.p2p_sync, "all");
  EXPECT_EQ(dtsim::with_stack(a, "megatron-lm").p2p_sync, "all");
  const auto mc = dtsim::with_stack(a, "megatron-core");
  EXPECT_EQ(mc.p2p_sync, "non_interleaved");
  EXPECT_TRUE(dtsim::p2p_blocking(mc, false));
  EXPECT_FALSE(dtsim::p2p_blocking(mc, true));
  EXPECT_FALSE(dtsim::p2p_blocking(dtsim::with_stack(a, "torchtitan"), false));
  // Dropless MoE dispatch: Megatron's and torchtitan's dispatchers read the token counts on the host, DeepSpeed-MoE
  // drops to a static capacity.
  EXPECT_TRUE(mc.moe_dispatch_sync);
  EXPECT_TRUE(dtsim::with_stack(a, "torchtitan").moe_dispatch_sync);
  EXPECT_FALSE(md.moe_dispatch_sync);
  EXPECT_EQ(md.gemm_efficiency_max, a.gemm_efficiency_max);
  EXPECT_EQ(a.optimizer_bytes_per_param, 28.0);
  EXPECT_EQ(a.reserved_memory_bytes, 2.0e9);
  EXPECT_NO_THROW(dtsim::default_calibration("h100-sxm5-80gb"));
}

TEST(Calibration, UnknownGpuRejected) {
  const std::string msg = error_of<dtsim::ConfigError>([] { dtsim::default_calibration("v100"); });
  EXPECT_TRUE(contains(msg, "'v100'")) << msg;
}

TEST(Calibration, JsonRoundTrip) {
  auto c = dtsim::default_calibration("h100-sxm5-80gb");
  // Make every number distinct so a swapped field would show.
  c.gemm_efficiency_max = 0.61;
  c.gemm_half_efficiency_flops = 2.5e9;
  c.gemm_misaligned_efficiency = 0.45;
  c.gemm_efficiency_exponent = 1.75;
  c.memory_bandwidth_efficiency = 0.62;
  c.kernel_launch_s = 3.5e-6;
  c.host_issue_s = 6.5e-5;
  c.host_sync_each_pass = true;
  c.moe_dispatch_sync = true;
  c.host_collective_issue_s = 2.25e-5;
  c.optimizer_bytes_per_param = 27;
  c.intra_bandwidth_efficiency = 0.63;
  c.inter_bandwidth_efficiency = 0.64;
  c.collective_step_overhead_s = 1.5e-6;
  c.p2p_overhead_s = 6.5e-6;
  c.p2p_sync = "non_interleaved";
  c.reserved_memory_bytes = 1.25e9;
  const auto r = dtsim::calibration_from_json(json::parse(dtsim::to_json(c).dump()), "test");
  EXPECT_EQ(r.p2p_sync, c.p2p_sync);
  EXPECT_TRUE(r.pinned("p2p_sync"));
  EXPECT_EQ(r.name, c.name);
  EXPECT_EQ(r.gpu, c.gpu);
  EXPECT_EQ(r.provenance, c.provenance);
  EXPECT_EQ(r.gemm_efficiency_max, c.gemm_efficiency_max);
  EXPECT_EQ(r.gemm_half_efficiency_flops, c.gemm_half_efficiency_flops);
  EXPECT_EQ(r.gemm_misaligned_efficiency, c.gemm_misaligned_efficiency);
  EXPECT_EQ(r.gemm_efficiency_exponent, c.gemm_efficiency_exponent);
  EXPECT_EQ(r.memory_bandwidth_efficiency, c.memory_bandwidth_efficiency);
  EXPECT_EQ(r.kernel_launch_s, c.kernel_launch_s);
  EXPECT_EQ(r.host_issue_s, c.host_issue_s);
  EXPECT_EQ(r.host_sync_each_pass, c.host_sync_each_pass);
  EXPECT_EQ(r.moe_dispatch_sync, c.moe_dispatch_sync);
  EXPECT_TRUE(r.pinned("moe_dispatch_sync"));
  EXPECT_EQ(r.host_collective_issue_s, c.host_collective_issue_s);
  EXPECT_EQ(r.optimizer_bytes_per_param, c.optimizer_bytes_per_param);
  EXPECT_EQ(r.intra_bandwidth_efficiency, c.intra_bandwidth_efficiency);
  EXPECT_EQ(r.inter_bandwidth_efficiency, c.inter_bandwidth_efficiency);
  EXPECT_EQ(r.collective_step_overhead_s, c.collective_step_overhead_s);
  EXPECT_EQ(r.p2p_overhead_s, c.p2p_overhead_s);
  EXPECT_EQ(r.reserved_memory_bytes, c.reserved_memory_bytes);
}

TEST(Calibration, OutOfRangeEfficiencyRejectedNamingField) {
  json j = dtsim::to_json(dtsim::default_calibration("a100-sxm4-80gb"));
  j["compute"]["gemm_efficiency_max"] = 1.5;
  std::string msg = error_of<dtsim::ConfigError>([&] { dtsim::calibration_from_json(j, "cal"); });
  EXPECT_TRUE(contains(msg, "compute.gemm_efficiency_max must be in (0, 1]")) << msg;
  j = dtsim::to_json(dtsim::default_calibration("a100-sxm4-80gb"));
  j["network"]["inter_bandwidth_efficiency"] = 0.0;
  msg = error_of<dtsim::ConfigError>([&] { dtsim::calibration_from_json(j, "cal"); });
  EXPECT_TRUE(contains(msg, "network.inter_bandwidth_efficiency")) << msg;
  j = dtsim::to_json(dtsim::default_calibration("a100-sxm4-80gb"));
  j["network"]["p2p_overhead_s"] = -1e-6;
  msg = error_of<dtsim::ConfigError>([&] { dtsim::calibration_from_json(j, "cal"); });
  EXPECT_TRUE(contains(msg, "network.p2p_overhead_s = -1e-06 is outside its range [0, 1] s")) << msg;
  j = dtsim::to_json(dtsim::default_calibration("a100-sxm4-80gb"));
  j["compute"]["gemm_efficiency_exponent"] = 0.0;
  msg = error_of<dtsim::ConfigError>([&] { dtsim::calibration_from_json(j, "cal"); });
  EXPECT_TRUE(contains(msg, "compute.gemm_efficiency_exponent must be in [0.25, 8]")) << msg;
  // Exactly 1 is allowed: the interval is (0, 1].
  j = dtsim::to_json(dtsim::default_calibration("a100-sxm4-80gb"));
  j["compute"]["gemm_efficiency_max"] = 1.0;
  EXPECT_NO_THROW(dtsim::calibration_from_json(j, "cal"));
}

TEST(Calibration, MissingSectionFieldRejected) {
  json j = dtsim::to_json(dtsim::default_calibration("a100-sxm4-80gb"));
  j["compute"].erase("kernel_launch_s");
  const std::string msg = error_of<dtsim::ConfigError>([&] { dtsim::calibration_from_json(j, "cal"); });
  EXPECT_TRUE(contains(msg, "cal.compute: missing field 'kernel_launch_s'")) << msg;
}

// ---------------------------------------------------------------------------------------------------------------
// json_util
// ---------------------------------------------------------------------------------------------------------------

TEST(JsonUtil, ReadFileMissingIsConfigErrorWithPath) {
  const std::string path = "/nonexistent-dtsim-dir/does-not-exist.json";
  const std::string msg = error_of<dtsim::ConfigError>([&] { dtsim::json_util::read_file(path); });
  EXPECT_TRUE(contains(msg, path)) << msg;
}

TEST(JsonUtil, ReadFileMalformedIsFormatError) {
  TempDir d("json");
  fs::create_directories(d.path);
  const std::string path = (d.path / "bad.json").string();
  { std::ofstream(path) << "{\"a\": "; }
  const std::string msg = error_of<dtsim::FormatError>([&] { dtsim::json_util::read_file(path); });
  EXPECT_TRUE(contains(msg, "not valid JSON")) << msg;
  EXPECT_TRUE(contains(msg, path)) << msg;
  EXPECT_TRUE(contains(msg, "parse error")) << msg;
  // A FormatError is a dtsim::Error, not a ConfigError.
  EXPECT_THROW(dtsim::json_util::read_file(path), dtsim::Error);
}

TEST(JsonUtil, ReadFileValid) {
  TempDir d("jsonok");
  fs::create_directories(d.path);
  const std::string path = (d.path / "ok.json").string();
  { std::ofstream(path) << R"({"a": [1, 2.5, "x"]})"; }
  const json j = dtsim::json_util::read_file(path);
  EXPECT_EQ(j.at("a").size(), 3u);
  EXPECT_EQ(j.at("a")[1].get<double>(), 2.5);
}

TEST(JsonUtil, GetGetOrAndNonObject) {
  json j = {{"x", 3}, {"n", nullptr}};
  EXPECT_EQ(dtsim::json_util::get<int>(j, "c", "x"), 3);
  EXPECT_EQ(dtsim::json_util::get_or<int>(j, "c", "y", 7), 7);
  EXPECT_EQ(dtsim::json_util::get_or<int>(j, "c", "n", 9), 9);  // null means absent
  const std::string msg =
      error_of<dtsim::ConfigError>([] { dtsim::json_util::get<int>(json::array({1}), "ctx", "x"); });
  EXPECT_TRUE(contains(msg, "ctx: expected a JSON object")) << msg;
}

// ---------------------------------------------------------------------------------------------------------------
// Chrome trace
// ---------------------------------------------------------------------------------------------------------------

TEST(ChromeTrace, OutputParsesWithEventsInMicroseconds) {
  dtsim::ChromeTraceWriter w;
  w.set_metadata_json(R"({"tool":"dtsim","n":3})");
  w.process_name(1, "rank 0", 5);
  w.thread_name(1, 2, "compute");
  w.complete(1, 2, "fc1", "gemm", 1500, 2000001,
             {dtsim::TraceArg::integer("flops", 123456789012LL), dtsim::TraceArg::real("eff", 0.25),
              dtsim::TraceArg::text("note", "a\"b")});
  w.counter(1, "memory", 7, "bytes", 1.5e9);
  EXPECT_EQ(w.event_count(), 5u);  // process_name + sort_index + thread_name + X + C
  const std::string text = w.finish();
  json j;
  ASSERT_NO_THROW(j = json::parse(text)) << text;
  EXPECT_EQ(j.at("displayTimeUnit"), "ns");
  EXPECT_EQ(j.at("otherData").at("tool"), "dtsim");
  EXPECT_EQ(j.at("otherData").at("n"), 3);
  const auto& ev = j.at("traceEvents");
  ASSERT_EQ(ev.size(), 5u);

  EXPECT_EQ(ev[0].at("ph"), "M");
  EXPECT_EQ(ev[0].at("name"), "process_name");
  EXPECT_EQ(ev[0].at("args").at("name"), "rank 0");
  EXPECT_EQ(ev[1].at("name"), "process_sort_index");
  EXPECT_EQ(ev[1].at("args").at("sort_index"), 5);
  EXPECT_EQ(ev[2].at("name"), "thread_name");
  EXPECT_EQ(ev[2].at("tid"), 2);
  EXPECT_EQ(ev[2].at("args").at("name"), "compute");

  const auto& x = ev[3];
  EXPECT_EQ(x.at("ph"), "X");
  EXPECT_EQ(x.at("pid"), 1);
  EXPECT_EQ(x.at("tid"), 2);
  EXPECT_EQ(x.at("ts").get<double>(), 1.5);        // 1500 ns
  EXPECT_EQ(x.at("dur").get<double>(), 2000.001);  // 2,000,001 ns
  EXPECT_EQ(x.at("name"), "fc1");
  EXPECT_EQ(x.at("cat"), "gemm");
  EXPECT_EQ(x.at("args").at("flops").get<std::int64_t>(), 123456789012LL);
  EXPECT_EQ(x.at("args").at("eff").get<double>(), 0.25);
  EXPECT_EQ(x.at("args").at("note"), "a\"b");

  const auto& c = ev[4];
  EXPECT_EQ(c.at("ph"), "C");
  EXPECT_EQ(c.at("ts").get<double>(), 0.007);
  EXPECT_EQ(c.at("name"), "memory");
  EXPECT_EQ(c.at("args").at("bytes").get<double>(), 1.5e9);
}

TEST(ChromeTrace, TimestampsWrittenWithExactThreeDecimals) {
  dtsim::ChromeTraceWriter w;
  w.complete(0, 0, "a", "c", 1500, 1000, {});
  w.complete(0, 0, "b", "c", 1, 999, {});
  const std::string text = w.finish();
  // Integer-ns formatting: 1500 -> "1.500", 1000 -> "1" (no fraction), 1 -> "0.001", 999 -> "0.999".
  EXPECT_TRUE(contains(text, "\"ts\":1.500,\"dur\":1,")) << text;
  EXPECT_TRUE(contains(text, "\"ts\":0.001,\"dur\":0.999,")) << text;
  // No args object when there are no args.
  EXPECT_FALSE(contains(text, "\"args\"")) << text;
}

TEST(ChromeTrace, EmptyTraceIsValidJson) {
  dtsim::ChromeTraceWriter w;
  const json j = json::parse(w.finish());
  EXPECT_TRUE(j.at("traceEvents").is_array());
  EXPECT_TRUE(j.at("traceEvents").empty());
  EXPECT_TRUE(j.at("otherData").is_object());
}

TEST(ChromeTrace, AppendJsonStringEscapes) {
  std::string out;
  dtsim::append_json_string(out, std::string("q\"b\\n\nt\tr\r") + '\x01' + '\x1f' + "z");
  EXPECT_EQ(out, "\"q\\\"b\\\\n\\nt\\tr\\r\\u0001\\u001fz\"");
  // And nlohmann reads it back to the original bytes.
  EXPECT_EQ(json::parse(out).get<std::string>(), std::string("q\"b\\n\nt\tr\r") + '\x01' + '\x1f' + "z");
  std::string utf8;
  dtsim::append_json_string(utf8, "\xc3\xa9");  // e-acute passes through unchanged
  EXPECT_EQ(utf8, "\"\xc3\xa9\"");
}

TEST(ChromeTrace, AppendJsonNumberRoundTripsAndNonFiniteIsNull) {
  std::string out;
  dtsim::append_json_number(out, 0.1);
  EXPECT_EQ(out, "0.1");
  out.clear();
  dtsim::append_json_number(out, 1.0 / 3.0);
  EXPECT_EQ(std::stod(out), 1.0 / 3.0);
  out.clear();
  dtsim::append_json_number(out, std::numeric_limits<double>::infinity());
  EXPECT_EQ(out, "null");
}

// ---------------------------------------------------------------------------------------------------------------
// write_outputs
// ---------------------------------------------------------------------------------------------------------------

TEST(WriteOutputs, WritesFilesIntoNewDirectoryWithoutTempFiles) {
  TempDir d("out");
  const fs::path dir = d.path / "nested" / "run";
  ASSERT_FALSE(fs::exists(dir));
  dtsim::write_outputs(dir.string(), {{"summary.json", "{\"a\":1}\n"}, {"trace.json", std::string("x\0y", 3)}});
  EXPECT_EQ(dir_entries(dir), (std::vector<std::string>{"summary.json", "trace.json"}));
  EXPECT_EQ(read_text(dir / "summary.json"), "{\"a\":1}\n");
  EXPECT_EQ(read_text(dir / "trace.json"), std::string("x\0y", 3));
  for (const auto& name : dir_entries(dir)) EXPECT_FALSE(contains(name, ".tmp-")) << name;
}

TEST(WriteOutputs, OverwritesExistingFiles) {
  TempDir d("overwrite");
  fs::create_directories(d.path);
  { std::ofstream(d.path / "a.txt") << "old contents, longer than the new"; }
  dtsim::write_outputs(d.path.string(), {{"a.txt", "new"}});
  EXPECT_EQ(read_text(d.path / "a.txt"), "new");
  EXPECT_EQ(dir_entries(d.path), (std::vector<std::string>{"a.txt"}));
}

TEST(WriteOutputs, DirectoryPathIsRegularFile) {
  TempDir d("isfile");
  fs::create_directories(d.path);
  const fs::path file = d.path / "plain";
  { std::ofstream(file) << "i am a file"; }
  const std::string msg = error_of<dtsim::ConfigError>([&] {
    dtsim::write_outputs(file.string(), {{"summary.json", "{}"}});
  });
  EXPECT_TRUE(contains(msg, file.string())) << msg;
  EXPECT_TRUE(fs::is_regular_file(file));
  EXPECT_EQ(read_text(file), "i am a file");
  EXPECT_EQ(dir_entries(d.path), (std::vector<std::string>{"plain"}));  // nothing created beside it
}

TEST(WriteOutputs, WriteFailureRemovesTemporaries) {
  TempDir d("writefail");
  fs::create_directories(d.path);
  // The second file lives in a subdirectory that does not exist: it cannot be opened, so the first temporary
  // must be removed and nothing renamed into place.
  const std::string msg = error_of<dtsim::ConfigError>([&] {
    dtsim::write_outputs(d.path.string(), {{"a.txt", "A"}, {"missing/b.txt", "B"}});
  });
  EXPECT_TRUE(contains(msg, "cannot write")) << msg;
  EXPECT_TRUE(dir_entries(d.path).empty());
}

TEST(WriteOutputs, RenameFailureRemovesTemporaries) {
  TempDir d("renamefail");
  fs::create_directories(d.path / "b.txt" / "inside");  // a non-empty directory where a file must go
  const std::string msg = error_of<dtsim::ConfigError>([&] {
    dtsim::write_outputs(d.path.string(), {{"b.txt", "B"}});
  });
  EXPECT_TRUE(contains(msg, "cannot rename output into")) << msg;
  EXPECT_EQ(dir_entries(d.path), (std::vector<std::string>{"b.txt"}));  // no "b.txt.tmp-<pid>" left behind
  EXPECT_TRUE(fs::is_directory(d.path / "b.txt" / "inside"));
}

TEST(WriteOutputs, RenameFailureMessageGivesTheReason) {
  TempDir d("renamereason");
  fs::create_directories(d.path / "b.txt" / "inside");
  const std::string msg = error_of<dtsim::ConfigError>([&] {
    dtsim::write_outputs(d.path.string(), {{"b.txt", "B"}});
  });
  EXPECT_TRUE(contains(msg, "cannot rename output into")) << msg;
  EXPECT_FALSE(contains(msg, "Success")) << msg;
}

TEST(WriteOutputs, RenameFailureLeavesEarlierFilesUntouched) {
  TempDir d("partial");
  fs::create_directories(d.path / "b.txt" / "inside");
  { std::ofstream(d.path / "a.txt") << "previous"; }
  EXPECT_THROW(dtsim::write_outputs(d.path.string(), {{"a.txt", "new"}, {"b.txt", "B"}}), dtsim::ConfigError);
  EXPECT_EQ(read_text(d.path / "a.txt"), "previous");
}

// ---------------------------------------------------------------------------------------------------------------
// Units
// ---------------------------------------------------------------------------------------------------------------

TEST(Units, SecondsToNanosecondsRoundsToNearest) {
  EXPECT_EQ(dtsim::units::s_to_ns(0.0), 0);
  EXPECT_EQ(dtsim::units::s_to_ns(1.0), 1000000000);
  EXPECT_EQ(dtsim::units::s_to_ns(1.5e-9), 2);  // 1.5 ns -> 2 (half away from zero)
  EXPECT_EQ(dtsim::units::s_to_ns(2.5e-9), 3);  // 2.5 ns -> 3, not banker's 2
  EXPECT_EQ(dtsim::units::s_to_ns(1.4e-9), 1);
  EXPECT_EQ(dtsim::units::s_to_ns(0.4e-9), 0);
  EXPECT_EQ(dtsim::units::s_to_ns(-1.5e-9), -2);
  EXPECT_EQ(dtsim::units::s_to_ns(1e-7), 100);  // 1e-7 * 1e9 = 99.99999... or 100.000...01 -> 100
  EXPECT_EQ(dtsim::units::s_to_ns(3600.0), 3600000000000LL);
}

TEST(Units, NanosecondsToMicroseconds) {
  EXPECT_EQ(dtsim::units::ns_to_us(1500), 1.5);
  EXPECT_EQ(dtsim::units::ns_to_us(1), 0.001);
  EXPECT_EQ(dtsim::units::ns_to_us(-2500), -2.5);
  EXPECT_EQ(dtsim::units::ns_to_us(3600000000000LL), 3.6e9);
}

TEST(Units, Constants) {
  EXPECT_EQ(dtsim::units::kGiB, 1024.0 * 1024.0 * 1024.0);
  EXPECT_EQ(dtsim::units::kMiB, 1024.0 * 1024.0);
  EXPECT_EQ(dtsim::units::kGbit_Bps * 200, 25e9);
}

// ---- Software-stack profiles (traces/stack_profile.hpp) ----

TEST(StackProfile, ShippedProfilesLoadWithProvenance) {
  const auto names = dtsim::stack_names();
  EXPECT_EQ(names, (std::vector<std::string>{"megatron-core", "megatron-deepspeed", "megatron-lm", "torchtitan",
                                             "torchtitan-cudnn"}));
  for (const auto& n : names) {
    SCOPED_TRACE(n);
    const auto s = dtsim::stack_profile(n);
    EXPECT_EQ(s.name, n);
    EXPECT_FALSE(s.framework.empty());
    ASSERT_TRUE(s.provenance.is_object());
    EXPECT_TRUE(s.provenance.contains("status"));
    // Round trip.
    const auto r = dtsim::stack_profile_from_json(dtsim::to_json(s), "rt");
    EXPECT_EQ(dtsim::to_json(r), dtsim::to_json(s));
  }
  EXPECT_EQ(dtsim::stack_profile("").name, dtsim::kDefaultStack);
  // The DeepSpeed pipeline engine's blocking p2p is two orders of magnitude above Megatron's batched isend/irecv.
  EXPECT_GT(dtsim::stack_profile("megatron-deepspeed").p2p_overhead_s,
            50 * dtsim::stack_profile("megatron-lm").p2p_overhead_s);
  EXPECT_TRUE(dtsim::stack_profile("torchtitan").fa2_attention);
  // torchtitan-cudnn is torchtitan with SDPA's cuDNN attention first (its attention.py from 2025-05 on B200, from
  // 2025-10 everywhere): only which attention kernel runs differs.
  auto tt = dtsim::to_json(dtsim::stack_profile("torchtitan"));
  auto cu = dtsim::to_json(dtsim::stack_profile("torchtitan-cudnn"));
  EXPECT_FALSE(cu.at("fa2_attention").get<bool>());
  for (auto* j : {&tt, &cu})
    for (const char* k : {"name", "framework", "provenance", "fa2_attention"}) j->erase(k);
  EXPECT_EQ(tt, cu);
}

TEST(StackProfile, BaseProfileTakesTheBasesValuesAndReplacesOnlyWhatItWrites) {
  // A user's stack written as its differences from a shipped one.
  const auto mc = dtsim::stack_profile("megatron-core");
  const json user = {{"schema_version", 1},
                     {"name", "ours"},
                     {"base", "megatron-core"},
                     {"host_issue_s", 2e-5},
                     {"provenance", {{"host_issue_s", "measured on our cluster"}}}};
  const auto s = dtsim::stack_profile_from_json(user, "ours");
  EXPECT_EQ(s.name, "ours");
  EXPECT_EQ(s.host_issue_s, 2e-5);
  EXPECT_NE(mc.host_issue_s, 2e-5);
  EXPECT_EQ(s.framework, mc.framework);
  EXPECT_EQ(s.fitted_on, mc.fitted_on);
  EXPECT_EQ(s.provenance.at("base"), "megatron-core");
  EXPECT_EQ(s.provenance.at("host_issue_s"), "measured on our cluster");
  EXPECT_EQ(s.provenance.at("status"), mc.provenance.at("status"));  // entries not written are the base's
  auto a = dtsim::to_json(s), b = dtsim::to_json(mc);
  for (auto* j : {&a, &b})
    for (const char* k : {"name", "provenance", "host_issue_s"}) j->erase(k);
  EXPECT_EQ(a, b);
  // A file base, itself on a shipped base; and a chain that never ends.
  TempDir d("stack-base");
  fs::create_directories(d.path);
  const std::string mid = (d.path / "mid.json").string(), loop = (d.path / "loop.json").string();
  {
    std::ofstream(mid) << json{
        {"schema_version", 1}, {"name", "mid"}, {"base", "torchtitan"}, {"per_iteration_s", 0.01}};
  }
  const auto top = dtsim::stack_profile_from_json(
      json{{"schema_version", 1}, {"name", "top"}, {"base", mid}, {"grad_clip", false}}, "top");
  EXPECT_EQ(top.per_iteration_s, 0.01);
  EXPECT_FALSE(top.grad_clip);
  EXPECT_TRUE(top.fa2_attention);  // torchtitan's, through mid
  EXPECT_EQ(top.provenance.at("base"), mid);
  { std::ofstream(loop) << json{{"schema_version", 1}, {"name", "loop"}, {"base", loop}}; }
  EXPECT_TRUE(
      contains(error_of<dtsim::ConfigError>([&] { dtsim::stack_profile(loop); }), "'base' chain longer than 8"));
  EXPECT_TRUE(
      contains(error_of<dtsim::ConfigError>([&] {
                 dtsim::stack_profile_from_json(json{{"schema_version", 1}, {"name", "x"}, {"base", "nemo"}}, "x");
               }),
               "x: 'base' names an unknown software stack 'nemo'"));
  EXPECT_THROW(dtsim::stack_profile_from_json(json{{"schema_version", 1}, {"name", "x"}, {"base", 3}}, "x"),
               dtsim::ConfigError);
  // The base's fields are checked like the profile's own.
  EXPECT_THROW(dtsim::stack_profile_from_json(
                   json{{"schema_version", 1}, {"name", "x"}, {"base", "torchtitan"}, {"p2p_overhead_s", -1.0}}, "x"),
               dtsim::ConfigError);
}

TEST(StackProfile, UnknownNamesAndBadFilesAreOneLineErrors) {
  const std::string msg = error_of<dtsim::ConfigError>([] { dtsim::stack_profile("deepspeed-zero"); });
  EXPECT_TRUE(contains(msg, "unknown software stack 'deepspeed-zero'")) << msg;
  EXPECT_TRUE(contains(msg, "megatron-core, megatron-deepspeed, megatron-lm, torchtitan, torchtitan-cudnn")) << msg;
  auto j = dtsim::to_json(dtsim::stack_profile("torchtitan"));
  j["p2p_overhead_s"] = -1.0;
  EXPECT_TRUE(contains(error_of<dtsim::ConfigError>([&] { dtsim::stack_profile_from_json(j, "s"); }),
                       "p2p_overhead_s = -1 is outside its range [0, 1] s"));
  j = dtsim::to_json(dtsim::stack_profile("torchtitan"));
  j["host_issue"] = 1.0;
  EXPECT_THROW(dtsim::stack_profile_from_json(j, "s"), dtsim::ConfigError);
  j.erase("host_issue");
  j.erase("host_issue_s");
  EXPECT_THROW(dtsim::stack_profile_from_json(j, "s"), dtsim::ConfigError);
  dtsim::ParallelPlan p;
  p.stack = "nemo";
  const auto model = dtsim::model_preset("gpt3-1.3b");
  const auto cluster = dtsim::load_cluster("dgx-h100:8");
  EXPECT_TRUE(contains(error_of<dtsim::ConfigError>([&] { p.validate_precision_overlap(model, cluster); }),
                       "unknown software stack 'nemo'"));
}

TEST(StackProfile, FillsOnlyWhatTheCalibrationDoesNotPin) {
  auto hw = dtsim::default_calibration("h100-sxm5-80gb");
  const auto tt = dtsim::stack_profile("torchtitan");
  auto c = dtsim::with_stack(hw, tt);
  EXPECT_EQ(c.stack, "torchtitan");
  EXPECT_EQ(c.host_issue_s, tt.host_issue_s);
  EXPECT_EQ(c.p2p_overhead_s, tt.p2p_overhead_s);
  EXPECT_TRUE(c.fa2_attention);
  EXPECT_TRUE(c.grouped_gemm_single_kernel);                 // torch._grouped_mm
  EXPECT_FALSE(c.moe_permute_fusion);                        // eager scatter_add
  EXPECT_FALSE(c.fused_projections);                         // wq, wk, wv; w1, w3
  EXPECT_EQ(c.gemm_efficiency_max, hw.gemm_efficiency_max);  // hardware untouched
  // A calibration file that sets a software value pins it: the stack leaves it.
  auto j = dtsim::to_json(hw);
  j["compute"].erase("host_sync_each_pass");
  j["compute"].erase("host_collective_issue_s");
  j["compute"].erase("fa2_attention");
  j["compute"].erase("eager_rmsnorm");
  j["compute"].erase("fused_projections");
  j["compute"].erase("per_iteration_s");
  j["compute"].erase("grad_clip");
  j["compute"].erase("tf32_matmul");
  j["compute"].erase("grouped_gemm_single_kernel");
  j["compute"].erase("moe_permute_fusion");
  j["compute"].erase("moe_dispatch_sync");
  j["compute"].erase("bf16_optimizer");
  j["compute"].erase("dp_bucket_min_params");
  j["compute"].erase("dp_bucket_params_per_dp");
  j["compute"].erase("dp_buckets_first_chunk_only");
  j["network"].erase("p2p_overhead_s");
  j["network"].erase("p2p_sync");
  j["network"].erase("pp_scatter_gather");
  j["compute"]["host_issue_s"] = 1e-5;
  const auto pinned = dtsim::calibration_from_json(j, "file");
  EXPECT_EQ(pinned.pinned_software, std::vector<std::string>{"host_issue_s"});
  c = dtsim::with_stack(pinned, "megatron-deepspeed");
  EXPECT_EQ(c.host_issue_s, 1e-5);
  EXPECT_EQ(c.p2p_overhead_s, dtsim::stack_profile("megatron-deepspeed").p2p_overhead_s);
  EXPECT_EQ(c.p2p_sync, "all");
  EXPECT_TRUE(c.bf16_optimizer);                // DeepSpeed's BF16_Optimizer
  EXPECT_FALSE(c.dp_buckets_first_chunk_only);  // DeepSpeed's buckets: not Megatron's
  c = dtsim::with_stack(pinned, "megatron-core");
  EXPECT_EQ(c.dp_bucket_min_params, 40e6);  // Megatron-Core's max(40 M, 1 M x DP)
  // Applying a second stack replaces the first's values (assignment, not accumulation).
  EXPECT_EQ(dtsim::to_json(dtsim::with_stack(dtsim::with_stack(hw, "torchtitan"), "megatron-lm")).dump(),
            dtsim::to_json(dtsim::with_stack(hw, "megatron-lm")).dump());
}

TEST(AccuracyBands, ShippedBandsAreOrderedAndFallBackToBroaderClasses) {
  const auto& bands = dtsim::shipped_bands();
  for (const auto& b : bands) {
    SCOPED_TRACE(b.key);
    EXPECT_GE(b.rows, 10);
    EXPECT_GE(b.sources, 1);
    EXPECT_LE(b.q05, b.q95);
  }
  // A GPU no development source ran on falls back to its stack's or the pooled band.
  const auto b = dtsim::accuracy_band("v100-sxm2-32gb", "megatron-core", false);
  if (!bands.empty()) {
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(b->key.find("v100"), std::string::npos);
  }
}
