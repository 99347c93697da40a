// Accuracy harness: reading published measurements, scoring, rank correlation, and the fitted A100 preset on the
// vTrain single-node set.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include "tests/support/error_of.hpp"
#include "traces/parallel.hpp"
#include "traces/stack_profile.hpp"
#include "validate/published/cross_validate.hpp"
#include "validate/published/flop_conventions.hpp"
#include "validate/published/published.hpp"
#include "validate/published/published_json.hpp"

using namespace dtsim;
using namespace dtsim::sim;

namespace {
const std::string kVtrain = DTSIM_SHARED_DIR "/measurements/vtrain_ground_truth_single.csv";

std::string write_temp(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / ("dtsim_val_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p) << text;
  return p.string();
}
}  // namespace

TEST(Spearman, MatchesHandComputedRanks) {
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {40, 30, 20, 10}), -1.0);
  // Ranks (1, 2, 3) vs (2, 1, 3): 1 - 6 * 2 / (3 * 8) = 0.5.
  EXPECT_NEAR(spearman({1, 2, 3}, {2, 1, 3}), 0.5, 1e-12);
  // Ties take average ranks: (1.5, 1.5, 3) vs (1, 2, 3) -> Pearson of ranks = sqrt(3)/2.
  EXPECT_NEAR(spearman({5, 5, 7}, {1, 2, 3}), std::sqrt(3.0) / 2, 1e-12);
}

TEST(PublishedData, VtrainCsvMapsToMegatronDeepSpeedRuns) {
  if (!std::filesystem::exists(kVtrain)) GTEST_SKIP() << kVtrain << " not present";
  const auto rows = load_published(kVtrain);
  ASSERT_EQ(rows.size(), 1440u);
  // First data row: 2,16,8,1024,16,24,1024,1,1,2,372.160408
  const auto& r = rows.front();
  EXPECT_EQ(r.plan.world_size(), 2);
  EXPECT_EQ(r.plan.pp, 2);
  EXPECT_EQ(r.plan.micro_batch_size, 8);
  EXPECT_EQ(r.plan.global_batch_size, 16);
  EXPECT_EQ(r.plan.recompute, Recompute::FULL);
  EXPECT_EQ(r.plan.schedule, Schedule::ONE_F_ONE_B);
  EXPECT_EQ(r.model.hidden, 1024);
  EXPECT_EQ(r.model.num_layers, 24);
  // vTrain's runs shard 50,257 as vocab // TP rows per rank, unpadded (TP 1 here: odd, a misaligned LM head).
  EXPECT_EQ(r.model.vocab, 50257);
  for (const auto& row : rows) ASSERT_EQ(row.model.vocab, 50257 / row.plan.tp * row.plan.tp) << row.index;
  EXPECT_NEAR(r.measured_s, 0.372160408, 1e-12);
  EXPECT_EQ(select_split(rows, "train").size() + select_split(rows, "test").size(), rows.size());
  EXPECT_EQ(select_split(rows, "test").front().index, 1);
}

// The shipped A100 preset was fitted on the even rows; the odd rows are held out. These bounds are the
// figures recorded in docs/accuracy.md (MAPE 5.55%, max 18.8%, Spearman >= 0.988, since the 2026-12-05 refit with the
// GEMM curve held monotone; 4.86% before, on a curve that made small GEMMs slower than larger ones) with a small
// margin: a change of the model that makes the held-out predictions worse fails here.
TEST(PublishedData, FittedA100PresetOnHeldOutVtrainRows) {
  if (!std::filesystem::exists(kVtrain)) GTEST_SKIP() << kVtrain << " not present";
  const auto rows = select_split(load_published(kVtrain), "test");
  const auto results = predict_rows(rows, default_calibration("a100-sxm4-80gb"), NetworkMode::ANALYTIC);
  const auto s = score(results);
  EXPECT_EQ(s.failed, 0);
  EXPECT_LT(s.mape, 0.0565);
  EXPECT_LT(s.max_abs_error, 0.19);
  EXPECT_GT(s.spearman_min, 0.985);
  EXPECT_LT(std::abs(s.mean_error), 0.02);
}

// Rows predicted on several threads give what one thread gives, bit for bit and in row order, failed rows included
// (predict_rows writes each result to its row's slot); DTSIM_THREADS must be a whole number.
TEST(PublishedData, PredictionsAreTheSameOnAnyNumberOfThreads) {
  if (!std::filesystem::exists(kVtrain)) GTEST_SKIP() << kVtrain << " not present";
  auto rows = load_published(kVtrain);
  rows.resize(60);
  rows[7].failure = "not expressible (test)";
  rows[31].plan.tp = 3;  // not a divisor of the heads: the simulation refuses it, the row fails
  auto predict_on = [&](const char* threads) {
    ::setenv("DTSIM_THREADS", threads, 1);
    auto r = predict_rows(rows, default_calibration("a100-sxm4-80gb"), NetworkMode::ANALYTIC);
    ::unsetenv("DTSIM_THREADS");
    return r;
  };
  const auto one = predict_on("1"), three = predict_on("3");
  ASSERT_EQ(one.size(), rows.size());
  ASSERT_EQ(three.size(), rows.size());
  int failed = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(one[i].row.index, rows[i].index);
    EXPECT_EQ(three[i].row.index, rows[i].index);
    EXPECT_EQ(one[i].failure, three[i].failure);
    EXPECT_EQ(one[i].predicted_s, three[i].predicted_s);  // exact: the same simulation
    EXPECT_EQ(one[i].compute_s, three[i].compute_s);
    EXPECT_EQ(one[i].exposed_comm_s, three[i].exposed_comm_s);
    failed += one[i].failure.empty() ? 0 : 1;
  }
  EXPECT_EQ(failed, 2);
  EXPECT_EQ(one[7].failure, "not expressible (test)");
  EXPECT_FALSE(one[31].failure.empty());
  ::setenv("DTSIM_THREADS", "two", 1);
  EXPECT_TRUE(dtsim::testing::contains(dtsim::testing::error_of<ConfigError>([] { worker_threads(); }),
                                       "DTSIM_THREADS='two' is not a whole number of threads in [1, 1024]"));
  ::unsetenv("DTSIM_THREADS");
  EXPECT_GE(worker_threads(), 1);
}

// The Accuracy issue's targets on the whole vTrain single-node set (1,440 rows, train and held-out together):
// MAPE <= 5%, max |error| <= 20%, Spearman >= 0.95 in every model group (docs/accuracy.md: 4.91%, 19.6%, 0.992 until
// 2026-12-05). The MAPE target is no longer met: 5.65% since the A100 was refitted with its GEMM curve held monotone
// (the 4.88% fit had put small GEMMs at 60-316 us, slower than larger ones); the bound is the measured figure with a
// small margin, so that a further loss fails here, and README says the target is unmet.
TEST(PublishedData, FittedA100PresetMeetsTheTargetsOnAllVtrainRows) {
  if (!std::filesystem::exists(kVtrain)) GTEST_SKIP() << kVtrain << " not present";
  const auto rows = load_published(kVtrain);
  ASSERT_EQ(rows.size(), 1440u);
  const auto s = score(predict_rows(rows, default_calibration("a100-sxm4-80gb"), NetworkMode::ANALYTIC));
  EXPECT_EQ(s.failed, 0);
  EXPECT_LE(s.mape, 0.0575);
  EXPECT_LE(s.max_abs_error, 0.20);
  EXPECT_GE(s.spearman_min, 0.95);
  ASSERT_EQ(s.groups.size(), 8u);
  for (const auto& g : s.groups) EXPECT_GE(g.spearman, 0.95) << g.group;
}

// Generality checks on the other development sets, rows held out of the fit: the Megatron-LM README runs (2B, 8B;
// 2020 software, predicted 14.8% fast) and Korthikanti et al.'s 22B per-layer times (2.3%).
TEST(PublishedData, FittedA100PresetOnHeldOutMegatronReadmeRows) {
  const auto rows =
      select_split(load_published(DTSIM_SOURCE_DIR "/tests/data/published/megatron_readme_a100.json"), "test");
  ASSERT_EQ(rows.size(), 2u);
  const auto s = score(predict_rows(rows, default_calibration("a100-sxm4-80gb"), NetworkMode::ANALYTIC));
  EXPECT_LT(s.max_abs_error, 0.20);
}

TEST(PublishedData, FittedA100PresetOnHeldOutKorthikantiLayers) {
  const auto rows =
      select_split(load_published(DTSIM_SOURCE_DIR "/tests/data/published/korthikanti_table4_layer.json"), "test");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].measure, "layer");
  const auto s = score(predict_rows(rows, default_calibration("a100-sxm4-80gb"), NetworkMode::ANALYTIC));
  EXPECT_EQ(s.failed, 0);
  EXPECT_LT(s.max_abs_error, 0.05);
}

TEST(PublishedData, GenericCsvAndJsonRows) {
  const std::string csv = write_temp("rows.csv",
                                     "hidden,heads,num_layers,seq_len,tp,pp,dp,micro_batch,global_batch,measured_ms\n"
                                     "1024,16,4,1024,2,1,1,4,8,120\n"
                                     "1024,16,4,1024,1,2,1,4,8,130\n");
  const auto rows = load_published(csv);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].plan.tp, 2);
  EXPECT_EQ(rows[1].plan.pp, 2);
  EXPECT_DOUBLE_EQ(rows[1].measured_s, 0.13);
  const std::string json = write_temp("rows.json", R"([{"hidden": 1024, "heads": 16, "num_layers": 4, "tp": 2,
      "micro_batch": 4, "global_batch": 8, "measured_s": 0.12, "recompute": "none", "schedule": "gpipe"}])");
  const auto jr = load_published(json);
  ASSERT_EQ(jr.size(), 1u);
  EXPECT_EQ(jr[0].plan.recompute, Recompute::NONE);
  EXPECT_EQ(jr[0].plan.schedule, Schedule::GPIPE);
  const auto res = predict_rows(jr, default_calibration("a100-sxm4-80gb"), NetworkMode::ANALYTIC);
  ASSERT_EQ(res.size(), 1u);
  EXPECT_TRUE(res[0].failure.empty()) << res[0].failure;
  EXPECT_GT(res[0].predicted_s, 0);
  std::filesystem::remove(csv);
  std::filesystem::remove(json);
}

// The fit recovers a known calibration: rows "measured" with the shipped preset, the fit started from a perturbed
// copy (host issue time, GEMM efficiency and p2p cost off) must bring the MAPE to a fifth or less.
TEST(PublishedFit, RecoversTheCalibrationThatMadeTheRows) {
  const std::string csv =
      write_temp("fit.csv",
                 "hidden,heads,num_layers,seq_len,vocab,tp,pp,dp,micro_batch,global_batch,measured_ms\n"
                 "1024,16,4,1024,50257,1,1,2,1,8,1\n"
                 "1024,16,4,1024,50257,2,1,1,4,8,1\n"
                 "2048,16,4,1024,50257,4,1,1,8,8,1\n"
                 "1024,16,4,1024,50257,1,2,1,2,16,1\n"
                 "2048,16,8,1024,50257,2,2,2,1,16,1\n"
                 "1024,16,8,1024,50257,1,4,2,1,32,1\n");
  auto rows = load_published(csv);
  std::filesystem::remove(csv);
  ASSERT_EQ(rows.size(), 6u);
  // The truth pins the software values the fit moves (else the rows' stack profile would supply them).
  Calibration truth = with_stack(default_calibration("a100-sxm4-80gb"), "megatron-deepspeed");
  for (const char* f : {"host_issue_s", "p2p_overhead_s", "host_collective_issue_s"}) truth.pin(f);
  const auto made = predict_rows(rows, truth, NetworkMode::ANALYTIC);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    ASSERT_TRUE(made[i].failure.empty()) << made[i].failure;
    rows[i].measured_s = made[i].predicted_s;
  }
  Calibration start = truth;
  start.host_issue_s *= 1.6;
  start.gemm_efficiency_max *= 0.8;
  start.p2p_overhead_s *= 0.2;
  // The objective is the mean over groups of MAPE + weight x max |error|: check its starting value by hand.
  const auto s0 = score(predict_rows(rows, start, NetworkMode::ANALYTIC));
  double plain = 0, tail = 0;
  for (const auto& g : s0.groups) plain += g.mape, tail += g.mape + 0.5 * g.max_abs_error;
  EXPECT_NEAR(fit_published(rows, start, 10, 0.5).objective_before, tail / static_cast<double>(s0.groups.size()),
              1e-12);
  const FitResult fr = fit_published(rows, start, 200);
  EXPECT_NEAR(fr.objective_before, plain / static_cast<double>(s0.groups.size()), 1e-12);
  EXPECT_GT(fr.objective_before, 0.10);
  EXPECT_LT(fr.objective_after, 0.2 * fr.objective_before);
  EXPECT_LE(fr.evaluations, 200 + 10);
  EXPECT_LE(fr.calibration.gemm_misaligned_efficiency, 1.0);
  EXPECT_LE(fr.calibration.gemm_efficiency_max, 1.0);
  EXPECT_NO_THROW(fr.calibration.validate("fit"));
  // Every field the fit names exists in the calibration's JSON.
  const auto j = to_json(fr.calibration);
  ASSERT_EQ(fitted_fields().size(), 11u);
  for (const auto& f : fitted_fields()) {
    const auto dot = f.find('.');
    ASSERT_NE(dot, std::string::npos) << f;
    EXPECT_TRUE(j.at(f.substr(0, dot)).contains(f.substr(dot + 1))) << f;
  }
}

TEST(PublishedData, BadFilesNameTheProblem) {
  const std::string bad_cols = write_temp("bad.csv",
                                          "\xEF\xBB\xBF# GPUs,global batch,micro batch,hidden size,attention heads,"
                                          "# layers,sequence length,tensor parallelism,data parallelism,"
                                          "pipeline parallelism,iteration time (ms)\n2,16,8,1024\n");
  EXPECT_THROW(load_published(bad_cols), FormatError);
  const std::string bad_degrees =
      write_temp("deg.csv",
                 "\xEF\xBB\xBF# GPUs,global batch,micro batch,hidden size,attention heads,"
                 "# layers,sequence length,tensor parallelism,data parallelism,"
                 "pipeline parallelism,iteration time (ms)\n4,16,8,1024,16,24,1024,1,1,2,300\n");
  try {
    load_published(bad_degrees);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("TP*DP*PP"), std::string::npos) << e.what();
  }
  const std::string unknown = write_temp("unk.csv", "a,b,c\n1,2,3\n");
  EXPECT_THROW(load_published(unknown), FormatError);
  EXPECT_THROW(load_published("/nonexistent/file.csv"), ConfigError);
  for (const auto& f : {bad_cols, bad_degrees, unknown}) std::filesystem::remove(f);
}

// ---- shared measurements documents (../shared/measurements/*.json) -------------------------------------------

namespace {
const std::string kMeasurements = DTSIM_SHARED_DIR "/measurements/";

const PublishedRow& row_by_id(const std::vector<PublishedRow>& rows, const std::string& id) {
  for (const auto& r : rows)
    if (r.id == id) return r;
  throw std::runtime_error("no row '" + id + "'");
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A small document in the shared shape: a dense Megatron-Core row, a MoE + MLA row with EP, a CP row, a row
// without tp, a GH200 row and a torchtitan-style PP row whose micro batch comes from the local batch.
const char* kDocument = R"json({
  "source": "MooreThreads/SimuMax@0000:docs/b200/summary.json", "licence": "test", "about": "test",
  "conventions": "test",
  "model_shapes": {
    "Dense (4 layers)": {"layers": 4, "hidden": 1024, "ffn_hidden": 2816, "heads": 16, "kv_heads": 4,
      "head_dim": 64, "vocab": 32000, "attention": "gqa", "mlp": "swiglu", "tied_embeddings": false, "moe": null},
    "Moe (4 layers)": {"layers": 4, "hidden": 1024, "ffn_hidden": 2816, "heads": 16, "kv_heads": 16,
      "head_dim": null, "vocab": 32000, "attention": "mla", "mlp": "swiglu", "tied_embeddings": false,
      "mla": {"q_lora_rank": 384, "kv_lora_rank": 128, "qk_head_dim": 64, "qk_rope_head_dim": 32, "v_head_dim": 64},
      "moe": {"experts": 16, "top_k": 2, "expert_ffn_hidden": 512, "shared_experts": 2,
              "shared_expert_ffn_hidden": 1024, "dense_layers": 1, "moe_layers": 3, "router": "softmax"}}
  },
  "rows": [
    {"id": "dense", "gpu": "H100", "gpus": 4, "gpus_per_node": 8, "model": "Dense (4 layers)", "layers_run": 4,
     "seq": 1024, "precision": "bf16", "tp": 2, "pp": 2, "dp": 1, "cp": 1, "ep": null, "etp": null, "vp": 1,
     "distributed_optimizer": true, "sequence_parallel": true, "mbs": 1, "gbs": 4, "recompute": "none (launcher)",
     "pp_schedule": "1F1B", "flags": ["truncated_layer_count"],
     "measured": {"iteration_s": 0.1, "peak_memory_gib": 10.0}},
    {"id": "moe", "gpu": "B200", "gpus": 8, "gpus_per_node": 8, "model": "Moe (4 layers)", "layers_run": 4,
     "seq": 4096, "precision": "fp8", "tp": 1, "pp": 2, "dp": 4, "cp": 1, "ep": 4, "etp": 1, "vp": 1,
     "distributed_optimizer": true, "sequence_parallel": false, "mbs": 1, "gbs": 16, "recompute": "full",
     "pp_schedule": "1F1B", "moe_dispatcher": "alltoall",
     "moe_capacity": "capacity factor 1 with --moe-pad-expert-input-to-capacity",
     "measured": {"iteration_s": 0.2, "peak_memory_gib": 40.0,
                  "peak_allocated_by_rank_mib": {"0": 1000.0, "1": 2048.0}}},
    {"id": "cp", "gpu": "B200", "gpus": 8, "gpus_per_node": 8, "model": "Dense (4 layers)", "seq": 32768,
     "precision": "bf16", "tp": 2, "pp": 1, "dp": 1, "cp": 4, "cp_comm_type": "a2a", "ep": null, "vp": 1,
     "distributed_optimizer": true, "sequence_parallel": true, "mbs": 1, "gbs": 4, "recompute": "selective",
     "measured": {"iteration_s": 1.5}},
    {"id": "no-tp", "gpu": "B200", "gpus": 8, "model": "Dense (4 layers)", "seq": 4096, "pp": 1, "dp": 8,
     "mbs": 1, "gbs": 8, "recompute": "none", "measured": {"iteration_s": 0.3}},
    {"id": "gh200", "gpu": "GH200 (SAILOR type \"GH-96\")", "gpus": 4, "gpus_per_node": 4,
     "model": "Dense (4 layers)", "seq": 2048, "tp": 4, "pp": 1, "dp": 1, "mbs": 1, "gbs": 1,
     "measured": {"iteration_s": 0.07, "peak_memory_bytes": 9551478784}},
    {"id": "pp-local-batch", "gpu": "H100-SXM-96GB-HBM2e (500 W)", "gpus": 8, "gpus_per_node": 8,
     "model": "Dense (4 layers)", "seq": 1024, "precision": "bf16", "tp": 1, "pp": 4, "dp": 2, "cp": 1, "vp": 2,
     "fsdp": true, "mbs": null, "local_batch_size": 8, "pp_microbatches": null, "gbs": 16, "recompute": "full",
     "pp_schedule": "Interleaved 1F1B", "measured": {"iteration_s": 2.0, "oom": false}}
  ]
})json";
}  // namespace

// Every shared JSON file loads (no abort) with its documented row count; the rows that cannot be expressed are
// kept as failed rows with their reason.
TEST(SharedMeasurements, EachFileLoadsWithItsRowCount) {
  const std::vector<std::pair<std::string, std::size_t>> files = {{"simumax_b200.json", 43},
                                                                  {"torchtitan_h100.json", 33},
                                                                  {"torchtitan_a100.json", 10},
                                                                  {"torchtitan_h200.json", 2},
                                                                  {"sailor_gh200.json", 36}};
  for (const auto& [name, count] : files) {
    const std::string path = kMeasurements + name;
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
    SCOPED_TRACE(name);
    std::vector<PublishedRow> rows;
    ASSERT_NO_THROW(rows = load_published(path));
    ASSERT_EQ(rows.size(), count);
    std::map<std::string, int> failures;
    for (const auto& r : rows) {
      EXPECT_FALSE(r.id.empty()) << r.index;
      EXPECT_FALSE(r.group.empty()) << r.id;
      EXPECT_TRUE(r.measured_s > 0 || r.measured_oom) << r.id;
      if (r.failure.empty()) {
        EXPECT_FALSE(r.gpu.empty()) << r.id;
        EXPECT_NO_THROW(load_cluster(r.cluster)) << r.id;
        // SAILOR's 2023 Megatron-DeepSpeed fork runs the unfused attention kernels, the other stacks flash.
        EXPECT_EQ(r.model.attention, name == "sailor_gh200.json" ? AttentionKind::UNFUSED : AttentionKind::FLASH)
            << r.id;
        if (r.precision == "fp8") {
          EXPECT_NE(r.plan.precision, Precision::BF16) << r.id;
        }
      } else {
        EXPECT_TRUE(has(r.failure, path + ": row " + std::to_string(r.index))) << r.failure;
        EXPECT_TRUE(r.gpu.empty()) << r.id;
      }
      if (!r.failure.empty()) ++failures[name];
    }
    if (name == "simumax_b200.json" || name == "torchtitan_h100.json") {
      EXPECT_EQ(failures[name], 0);
    }
    if (name == "torchtitan_a100.json") {
      // "selective layer" AC (torchtitan's default, every 2nd layer fully recomputed): full recompute of half the
      // layers (Megatron's block method with N = L / 2).
      EXPECT_EQ(failures[name], 0);
      const auto& layer_ac = row_by_id(rows, "tt-a100-5");  // Llama 2 13B: 40 layers, 20 recomputed
      EXPECT_EQ(layer_ac.plan.recompute, Recompute::FULL);
      EXPECT_EQ(layer_ac.plan.recompute_num_layers, 20);
      EXPECT_TRUE(has(layer_ac.notes, "layer AC every 2 layers: 20 of 40 layers fully recomputed")) << layer_ac.notes;
      EXPECT_EQ(row_by_id(rows, "tt-a100-oom-2").measured_oom, true);
      EXPECT_EQ(row_by_id(rows, "tt-a100-3").cluster, "dgx-a100:64");
    }
    if (name == "torchtitan_h200.json") {
      for (const auto& r : rows) {
        EXPECT_TRUE(r.failure.empty()) << r.failure;
        EXPECT_FALSE(r.model.attention_dropout || r.model.hidden_dropout) << r.id;  // torchtitan's Llama has none
        EXPECT_EQ(r.cluster.rfind("dgx-h200:", 0), 0u) << r.cluster;
        EXPECT_EQ(r.plan.precision, Precision::FP8_CURRENT) << r.id;  // torchao's default recipe
      }
    }
    if (name == "sailor_gh200.json") {
      // The 27 Clariden rows map to gh200 on clariden nodes, except GPT-Neo N4_D4, whose 26-index partition is
      // OPT-350M's (flagged in the file): it fails naming the mismatch. The 9 heterogeneous MIT rows fail as before.
      int clariden = 0, mixed = 0, partition = 0;
      for (const auto& r : rows) {
        mixed += has(r.failure, "heterogeneous cluster");
        partition += has(r.failure, "the partition is not this model's");
        if (!r.failure.empty()) continue;
        ++clariden;
        EXPECT_EQ(r.gpu, "gh200") << r.id;
        EXPECT_EQ(r.cluster, "clariden:" + std::to_string(r.plan.tp * r.plan.pp * r.plan.dp)) << r.id;
        EXPECT_EQ(r.model.dtype, DType::FP32) << r.id;  // stated (OPT) or SAILOR's default (GPT-Neo, noted)
        EXPECT_FALSE(r.plan.dp_overlap) << r.id;        // DeepSpeed reduces after the pipeline flush
        EXPECT_FALSE(r.memory_from_allocator) << r.id;  // nvidia-smi used memory
        EXPECT_EQ(r.plan.schedule, Schedule::ONE_F_ONE_B) << r.id;
        EXPECT_EQ(r.plan.layers_per_stage.size(), r.plan.pp > 1 ? static_cast<std::size_t>(r.plan.pp) : 0u) << r.id;
        // SAILOR's fork: its OPT applies no dropout, its GPT-Neo the hidden ones only (opt_model.py, gpt_neo_model.py).
        const bool opt = has(r.model.name, "OPT");
        EXPECT_FALSE(r.model.attention_dropout) << r.id;
        EXPECT_EQ(r.model.hidden_dropout, !opt) << r.id;
      }
      EXPECT_EQ(clariden, 26);
      EXPECT_EQ(partition, 1);
      EXPECT_EQ(mixed, 9);
      const auto& neo44 = row_by_id(rows, "sailor-clariden-GPT-NEO-N4_D4");
      EXPECT_TRUE(has(neo44.failure, "26 layer indexes (0..25)")) << neo44.failure;
      EXPECT_TRUE(has(neo44.notes, "layer_partition_has_26_indexes")) << neo44.notes;  // its flag note is kept
      // OPT-350M 4 stages: indexes 0-4, 5-11, 12-18, 19-25 = embedding + 4, 7, 7, 6 + head.
      EXPECT_EQ(row_by_id(rows, "sailor-clariden-OPT-350-N16_D4").plan.layers_per_stage,
                (std::vector<int>{4, 7, 7, 6}));
      // GPT-Neo 8 stages: 0-2, 3-7, 8-12, 13-17, 18-21, 22-25, 26-29, 30-33.
      EXPECT_EQ(row_by_id(rows, "sailor-clariden-GPT-NEO-N64_D8").plan.layers_per_stage,
                (std::vector<int>{2, 5, 5, 5, 4, 4, 4, 3}));
      // GPT-Neo 4 stages list index 29 where 19 belongs (a typo in SAILOR's plan): the range is used, and noted.
      const auto& neo164 = row_by_id(rows, "sailor-clariden-GPT-NEO-N16_D4");
      EXPECT_EQ(neo164.plan.layers_per_stage, (std::vector<int>{6, 9, 9, 8}));
      EXPECT_TRUE(has(neo164.notes, "lists 29 where 19 belongs")) << neo164.notes;
      EXPECT_TRUE(has(neo164.notes, "precision not stated: fp32 assumed")) << neo164.notes;
      EXPECT_TRUE(has(neo164.notes, "GH200 calibration copied from the H100's")) << neo164.notes;
      // Every Clariden row that maps simulates (analytic network, the shipped GH200 calibration).
      std::vector<PublishedRow> ok;
      for (const auto& r : rows)
        if (r.failure.empty()) ok.push_back(r);
      const auto res = predict_rows(ok, default_calibration("gh200"), NetworkMode::ANALYTIC);
      ASSERT_EQ(res.size(), 26u);
      for (const auto& rr : res) {
        EXPECT_TRUE(rr.failure.empty()) << rr.row.id << ": " << rr.failure;
        EXPECT_GT(rr.predicted_s, 0) << rr.row.id;
        EXPECT_GT(rr.predicted_peak_memory_bytes, 0) << rr.row.id;
      }
      EXPECT_EQ(score(res).failed, 0);
      EXPECT_EQ(score(res).rows, 26);
    }
    if (name == "torchtitan_h100.json") {
      const auto& t5 = row_by_id(rows, "tt-h100-t5-2");  // 405B, PP 8 interleaved, local batch 32
      EXPECT_EQ(t5.plan.schedule, Schedule::INTERLEAVED);
      EXPECT_EQ(t5.plan.virtual_stages, 2);
      EXPECT_EQ(t5.plan.micro_batch_size, 4);
      EXPECT_EQ(t5.plan.num_microbatches(), 8);
      // FSDP under torch pipelining keeps weights and gradients unsharded through the step (stage.py's
      // backward_maybe_with_nosync): ZeRO-1; without PP it is ZeRO-3.
      EXPECT_EQ(t5.plan.zero_stage, 1);
      EXPECT_TRUE(has(t5.notes, "FSDP under torch pipelining")) << t5.notes;
      for (const auto& r : rows)
        if (r.failure.empty() && r.plan.pp == 1) {
          EXPECT_EQ(r.plan.zero_stage, 3) << r.id;
        }
      EXPECT_TRUE(t5.plan.sequence_parallel);
      EXPECT_EQ(t5.group, "Table 5");
      // The 500 W, 96 GB HBM2e H100 of the torchtitan tables is its own preset (the device model at 500 W).
      EXPECT_EQ(t5.cluster, "grand-teton-h100:512");
      EXPECT_EQ(t5.gpu, "h100-96gb-500w");
      EXPECT_FALSE(has(t5.notes, "simulated as h100-sxm5-80gb")) << t5.notes;
      const auto& t2 = row_by_id(rows, "tt-h100-t2-3");
      EXPECT_EQ(t2.plan.cp, 4);
      EXPECT_EQ(t2.plan.cp_kind, CpKind::ALL_GATHER);
      EXPECT_EQ(t2.model.seq_len, 131072);
      EXPECT_NEAR(t2.measured_peak_memory_bytes, 84.0 * 1073741824.0, 1);
      EXPECT_EQ(row_by_id(rows, "tt-h100-t1-1").plan.recompute, Recompute::SELECTIVE);
      EXPECT_EQ(row_by_id(rows, "tt-h100-asynctp-8b-bf16-async_tp").measured_peak_memory_bytes, 0);
    }
  }
}

// SimuMax's B200 rows: an MoE row maps to ep / etp / MoE / MLA fields, a CP row to cp and its all-to-all kind,
// and the groups are dense / moe / cp.
// large_scale_papers.json (issue Fidelity): the rows with a measured iteration time are scored — MegaScale's
// Megatron-LM baseline on A100 (SKU not stated), MegaScale-MoE's Megatron-LM baseline on H800 (its own NVLink preset,
// sequence parallelism as Megatron-Core requires for MoE with TP), BLOOM, Nemotron-4 — and the others fail naming why:
// MFU-only rows (no iteration time), systems that change the model (MegaScale's own rows).
TEST(SharedMeasurements, LargeScalePapersScoreTheirTimedRows) {
  const std::string path = kMeasurements + "large_scale_papers.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  std::vector<PublishedRow> rows;
  ASSERT_NO_THROW(rows = load_published(path));
  ASSERT_EQ(rows.size(), 145u);
  int scored = 0, from_rate = 0, changed = 0, unrated = 0;
  for (const auto& r : rows) {
    if (r.failure.empty()) {
      ++scored;
      EXPECT_GT(r.measured_s, 0) << r.id;
      EXPECT_NO_THROW(load_cluster(r.cluster)) << r.id;
      from_rate += has(r.notes, "FLOP count");
    }
    unrated += has(r.failure, "no positive iteration_s");
    changed += has(r.failure, "the system changes the model") + has(r.failure, "cumulative ablation step");
  }
  EXPECT_GE(scored, 120);
  EXPECT_GE(from_rate, 90);  // MFU / TFLOP/s rows timed with the source's FLOP count (flop_conventions.hpp)
  EXPECT_EQ(changed, 0);     // MegaScale's own system and Table 3's steps map (megascale_system)
  EXPECT_LE(unrated, 2);     // rows without a time or a rate
  // MegaScale (NSDI'24): its own rows have the parallel block and every overlap of section 3.2; Table 3's steps add
  // them one at a time (2 parallel block, 4 TP overlap, 5 PP overlap, 6 DP overlap); the baseline has none.
  const auto& ms = row_by_id(rows, "megascale-t2-ms-12288");
  ASSERT_TRUE(ms.failure.empty()) << ms.failure;
  EXPECT_TRUE(ms.model.parallel_block);
  EXPECT_TRUE(ms.plan.sequence_parallel && ms.plan.tp_comm_overlap && ms.plan.pp_comm_overlap && ms.plan.dp_overlap);
  EXPECT_EQ(ms.plan.zero_stage, 2);
  EXPECT_TRUE(ms.plan.overlap_param_gather);
  struct Step {
    const char* id;
    bool block, tp_overlap, pp_overlap, dp_overlap;
  };
  for (const Step& st :
       {Step{"megascale-t3-1", false, false, false, false}, Step{"megascale-t3-3", true, false, false, false},
        Step{"megascale-t3-4", true, true, false, false}, Step{"megascale-t3-5", true, true, true, false},
        Step{"megascale-t3-6", true, true, true, true}, Step{"megascale-t3-9", true, true, true, true}}) {
    const auto& r = row_by_id(rows, st.id);
    ASSERT_TRUE(r.failure.empty()) << st.id << ": " << r.failure;
    EXPECT_EQ(r.model.parallel_block, st.block) << st.id;
    EXPECT_EQ(r.plan.tp_comm_overlap, st.tp_overlap) << st.id;
    EXPECT_EQ(r.plan.pp_comm_overlap, st.pp_overlap) << st.id;
    EXPECT_EQ(r.plan.dp_overlap, st.dp_overlap) << st.id;
  }
  // MoE Parallel Folding, Qwen2-57B-A14B MCore on 1,024 H100: 39.7% MFU = 392.8 TFLOP/s; the vocabulary (not stated)
  // is the released tokenizer's, padded by Megatron for tp.
  const auto& qwen = row_by_id(rows, "pfold-t4-qw57-mcore-1024");
  ASSERT_TRUE(qwen.failure.empty()) << qwen.failure;
  EXPECT_EQ(qwen.model.vocab % (128 * qwen.plan.tp), 0);
  EXPECT_GE(qwen.model.vocab, 151936);
  const double flops =
      convention_flops_per_iteration(FlopConvention::MEGATRON_CORE_2025, qwen.model, qwen.plan.global_batch_size);
  EXPECT_NEAR(qwen.measured_s, flops / (294.9e12 * 1024), 1e-9 * qwen.measured_s);  // the row's 29.8% x 989.5
  const auto& mlm = row_by_id(rows, "megascale-t2-mlm-12288");
  EXPECT_TRUE(mlm.failure.empty()) << mlm.failure;
  EXPECT_EQ(mlm.cluster, "dgx-a100:12288");
  EXPECT_EQ(mlm.gpu, "a100-sxm4-80gb");
  EXPECT_EQ(mlm.model.ffn_hidden, 4 * mlm.model.hidden);  // not stated: 4h
  EXPECT_EQ(mlm.plan.micro_batch_size, 1);                // not stated: 1
  EXPECT_EQ(mlm.plan.schedule, Schedule::INTERLEAVED);
  // Megatron-LM @ 285068c8 (2023-01-11): blocking pipeline exchanges (the megatron-lm stack) and the gradients
  // all-reduced after the flush (--overlap-grad-reduce came 2023-08-16).
  EXPECT_EQ(mlm.plan.stack, "megatron-lm");
  EXPECT_FALSE(mlm.plan.dp_overlap);
  EXPECT_FALSE(mlm.plan.pp_comm_overlap);
  const auto& moe = row_by_id(rows, "megascalemoe-t3-mlm-1440");
  EXPECT_TRUE(moe.failure.empty()) << moe.failure;
  EXPECT_EQ(moe.cluster, "dgx-h800:1440");
  EXPECT_TRUE(moe.model.moe.enabled());
  EXPECT_EQ(moe.model.mlp, MlpKind::SWIGLU);  // not stated: SwiGLU experts
  // Megatron-LM @ f1f03922 (2024-10-28) "with MegaScale DP/PP communication overlap": current conventions, the
  // pipeline exchanges overlapped as the row says.
  EXPECT_EQ(moe.plan.stack, "megatron-core");
  EXPECT_TRUE(moe.plan.dp_overlap);
  EXPECT_TRUE(moe.plan.pp_comm_overlap);
  // Megatron-LM itself, no grouped GEMM named: SequentialMLP experts (--moe-grouped-gemm is off by default).
  EXPECT_FALSE(moe.plan.moe_grouped_gemm);
  EXPECT_TRUE(row_by_id(rows, "megascalemoe-t3-msm-1440").plan.moe_grouped_gemm);  // MegaScale-MoE's own system
  if (moe.plan.tp > 1) {
    EXPECT_TRUE(moe.plan.sequence_parallel);
  }
  EXPECT_EQ(row_by_id(rows, "bloom-readme-epoch1").plan.zero_stage, 1);  // "1 (DeepSpeed BF16_Optimizer ...)"
  // DeepSeek-V3's pre-training average: bidirectional DualPipe; MLA's dimensions read from the shape's words, MTP
  // depth 1; node-limited routing to 4 of the EP group's 8 nodes dispatched in two hops (report sections 2.1.2, 3.2.2).
  const auto& dsv3 = row_by_id(rows, "deepseekv3-pretrain");
  ASSERT_TRUE(dsv3.failure.empty()) << dsv3.failure;
  EXPECT_EQ(dsv3.plan.schedule, Schedule::DUALPIPE);
  EXPECT_EQ(dsv3.model.mla, model_preset("deepseek-v3").mla);  // 1536, 512, 128 (+ 64 rope), 128
  EXPECT_EQ(dsv3.model.mtp_layers, 1);
  EXPECT_EQ(dsv3.model.moe.router_groups, 8);
  EXPECT_EQ(dsv3.model.moe.router_group_topk, 4);
  EXPECT_EQ(dsv3.plan.dispatcher, Dispatcher::DEEPEP);
  // MoE Parallel Folding's Llama3-8x70B (top_k not stated): Mixtral's top-2 of 8 experts, said in the notes.
  const auto& l8x70 = row_by_id(rows, "pfold-t3-l3x70-mcore");
  ASSERT_TRUE(l8x70.failure.empty()) << l8x70.failure;
  EXPECT_EQ(l8x70.model.moe.top_k, 2);
  EXPECT_TRUE(has(l8x70.notes, "top_k not stated by the source: 2 of 8 experts assumed")) << l8x70.notes;
  // Its folded runs (TP 8, EP 8, expert TP blank): expert TP 1, as every folded configuration the paper states;
  // the unfolded run's blank is Megatron-Core's default, etp = tp.
  for (const char* id : {"pfold-t3-l3x70-fold", "pfold-t4-l3x70-fold-128", "pfold-t4-l3x70-fold-1024"}) {
    const auto& folded = row_by_id(rows, id);
    ASSERT_TRUE(folded.failure.empty()) << folded.failure;
    EXPECT_EQ(folded.plan.expert_tp(), 1) << id;
  }
  EXPECT_EQ(l8x70.plan.expert_tp(), 8);
}

TEST(SharedMeasurements, AnUnstatedMemoryLeverIsTakenWhenTheMappedPlanDoesNotFit) {
  // MoE Parallel Folding's Qwen2-57B-A14B with folding on 64 H100s states neither recompute nor the distributed
  // optimizer. Mapped without them it does not fit in 80 GB; the run was measured, so the harness takes the first of
  // Megatron's standard levers that fits (here the distributed optimizer) and says so.
  const std::string path = kMeasurements + "large_scale_papers.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  const auto rows = load_published(path);
  const auto& row = row_by_id(rows, "pfold-t3-qw57-fold");
  ASSERT_TRUE(row.failure.empty()) << row.failure;
  ASSERT_TRUE(row.recompute_unstated && row.zero_unstated);
  ASSERT_EQ(row.plan.zero_stage, 0);
  const auto cal = default_calibration(row.gpu);
  const auto results = predict_rows({row}, cal, NetworkMode::ANALYTIC);
  ASSERT_EQ(results.size(), 1u);
  const auto& r = results[0];
  ASSERT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_FALSE(r.oom);
  EXPECT_EQ(r.row.plan.zero_stage, 1);
  EXPECT_EQ(r.row.plan.recompute, Recompute::NONE);
  EXPECT_TRUE(r.row.plan.overlap_param_gather);  // Megatron-Core, overlap unstated: the all-gather overlapped too
  EXPECT_TRUE(has(r.row.notes,
                  "does not fit as mapped: distributed optimizer (ZeRO-1, parameter all-gather overlapped) assumed"))
      << r.row.notes;
}

TEST(SharedMeasurements, LlamaThreeRowsMapTheirShardingAndInterleaving) {
  // Llama 3 405B on 8,192-16,384 H100s (Table 4): FSDP that "does not reshard after forward" (the file: ZeRO-2-like),
  // Meta's interleaved schedule with V not stated, sequence parallelism not stated.
  const std::string path = kMeasurements + "large_scale_papers.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  const auto rows = load_published(path);
  const auto& row = row_by_id(rows, "llama3-t4-2");
  ASSERT_TRUE(row.failure.empty()) << row.failure;
  EXPECT_EQ(row.plan.zero_stage, 2);
  EXPECT_TRUE(has(row.notes, "FSDP described as ZeRO-2-like: ZeRO stage 2")) << row.notes;
  EXPECT_EQ(row.plan.schedule, Schedule::INTERLEAVED);
  EXPECT_EQ(row.plan.virtual_stages, 2);
  EXPECT_TRUE(has(row.notes, "interleaving depth not stated: 2 model chunks per rank assumed")) << row.notes;
  EXPECT_FALSE(row.plan.sequence_parallel);
  EXPECT_TRUE(row.sp_unstated);
  EXPECT_FALSE(row.zero_unstated);
  // 16,384 GPUs, 16 micro-batches per pipeline: without sequence parallelism the activations do not fit in 80 GB,
  // with it they do; the run fitted, so the harness takes that lever and says so.
  const auto results = predict_rows({row}, default_calibration(row.gpu), NetworkMode::ANALYTIC);
  ASSERT_EQ(results.size(), 1u);
  const auto& r = results[0];
  ASSERT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_FALSE(r.oom);
  EXPECT_TRUE(r.row.plan.sequence_parallel);
  EXPECT_EQ(r.row.plan.recompute, Recompute::NONE);
  EXPECT_TRUE(has(r.row.notes, "does not fit as mapped: sequence parallelism assumed")) << r.row.notes;
}

// A 2026-style table in the measurements-document shape (issue Calibrate): Grace-Blackwell NVL72 racks used whole
// or 64 of 72, B300, MXFP8 / NVFP4 / FP8 recipe shorthands, an MoE shape with no dense FFN. Synthetic rows: the
// measured times only make the rows scoreable; the test checks what each row maps to.
TEST(PublishedData, BlackwellRowsMapToPresetsPrecisionsAndRackSubsets) {
  const nlohmann::json doc = nlohmann::json::parse(R"({
    "model_shapes": {
      "moe-a": {"layers": 8, "hidden": 2048, "heads": 16, "kv_heads": 4, "vocab": 32000, "mlp": "swiglu",
                "moe": {"experts": 64, "top_k": 8, "expert_ffn_hidden": 768}},
      "dense-a": {"layers": 8, "hidden": 4096, "ffn_hidden": 14336, "heads": 32, "kv_heads": 8, "vocab": 128256,
                  "mlp": "swiglu"}},
    "rows": [
      {"id": "gb200-64-mxfp8", "gpu": "GB200", "gpus": 64, "model": "moe-a", "seq": 4096, "precision": "mxfp8",
       "tp": 1, "pp": 1, "dp": 64, "ep": 8, "mbs": 1, "gbs": 256, "measured": {"iteration_s": 1.0}},
      {"id": "gb200-256", "gpu": "GB200 NVL72", "gpus": 256, "model": "dense-a", "seq": 4096, "precision": "fp8-cs",
       "tp": 2, "pp": 1, "dp": 128, "mbs": 1, "gbs": 256, "measured": {"iteration_s": 1.0}},
      {"id": "gb300-576-64", "gpu": "GB300", "gpus": 576, "gpus_per_node": 64, "model": "dense-a", "seq": 4096,
       "precision": "nvfp4", "tp": 1, "pp": 1, "dp": 576, "mbs": 1, "gbs": 576, "measured": {"iteration_s": 1.0}},
      {"id": "gb200-tray", "gpu": "GB200", "gpus": 144, "gpus_per_node": 4, "model": "dense-a", "seq": 4096,
       "precision": "bf16", "tp": 1, "pp": 1, "dp": 144, "mbs": 1, "gbs": 144, "measured": {"iteration_s": 1.0}},
      {"id": "b300-8", "gpu": "B300", "gpus": 8, "model": "dense-a", "seq": 4096, "precision": "fp8-mx",
       "tp": 1, "pp": 1, "dp": 8, "mbs": 1, "gbs": 8, "measured": {"iteration_s": 1.0}},
      {"id": "h100-ds", "gpu": "H100", "gpus": 8, "model": "dense-a", "seq": 4096, "precision": "fp8-ds",
       "tp": 1, "pp": 1, "dp": 8, "mbs": 1, "gbs": 8, "measured": {"iteration_s": 1.0}},
      {"id": "gb200-70", "gpu": "GB200", "gpus": 140, "model": "dense-a", "seq": 4096, "precision": "bf16",
       "tp": 1, "pp": 1, "dp": 140, "mbs": 1, "gbs": 140, "measured": {"iteration_s": 1.0}}]})");
  const auto rows = load_measurements_document(doc, "table.json");
  ASSERT_EQ(rows.size(), 7u);
  const auto& a = row_by_id(rows, "gb200-64-mxfp8");
  EXPECT_TRUE(a.failure.empty()) << a.failure;
  EXPECT_EQ(a.cluster, "gb200-nvl72:64");
  EXPECT_EQ(a.gpu, "gb200");
  EXPECT_EQ(a.plan.precision, Precision::MXFP8);
  EXPECT_TRUE(a.model.moe.enabled());
  const auto& b = row_by_id(rows, "gb200-256");
  EXPECT_TRUE(b.failure.empty()) << b.failure;
  EXPECT_EQ(b.cluster, "gb200-nvl72:256");  // 4 racks of 64 (load_cluster's NVL72 rule), said in a note
  EXPECT_EQ(load_cluster(b.cluster).gpus_per_node, 64);
  EXPECT_TRUE(has(b.notes, "64 of each NVL72 rack's 72 assumed")) << b.notes;
  EXPECT_EQ(b.plan.precision, Precision::FP8_CURRENT);
  const auto& c = row_by_id(rows, "gb300-576-64");
  EXPECT_TRUE(c.failure.empty()) << c.failure;
  EXPECT_EQ(c.cluster, "gb300-nvl72:576@64");
  EXPECT_EQ(load_cluster(c.cluster).num_nodes, 9);
  EXPECT_EQ(c.plan.precision, Precision::NVFP4);
  const auto& d = row_by_id(rows, "gb200-tray");
  EXPECT_TRUE(d.failure.empty()) << d.failure;
  EXPECT_EQ(d.cluster, "gb200-nvl72:144");
  EXPECT_TRUE(has(d.notes, "compute tray")) << d.notes;
  const auto& e = row_by_id(rows, "b300-8");
  EXPECT_TRUE(e.failure.empty()) << e.failure;
  EXPECT_EQ(e.cluster, "dgx-b300:8");
  EXPECT_EQ(e.plan.precision, Precision::MXFP8);
  EXPECT_EQ(row_by_id(rows, "h100-ds").plan.precision, Precision::FP8_DELAYED);
  // 140 GPUs: neither whole racks nor racks of 64: refused with the way out named.
  EXPECT_TRUE(has(row_by_id(rows, "gb200-70").failure, "GPUS@PER_NODE")) << row_by_id(rows, "gb200-70").failure;
}

TEST(PublishedData, HybridModelsMapFromShapesOrPresets) {
  // A 2026 table's hybrid rows: a Nemotron-H shape written as Megatron-Core's hybrid_override_pattern, a dtsim preset
  // by name (Qwen3-Next).
  const nlohmann::json doc = nlohmann::json::parse(R"({
    "model_shapes": {
      "nemotron-h-8b": {"layers": 52, "hidden": 4096, "ffn_hidden": 21504, "heads": 32, "kv_heads": 8,
                        "vocab": 131072, "mlp": "squared_relu",
                        "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
                        "mamba": {"heads": 128, "head_dim": 64, "groups": 8, "state": 128}},
      "qwen3-next": {"preset": "qwen3-next-80b-a3b"},
      "dsv3": {"preset": "deepseek-v3-mtp"}},
    "rows": [
      {"id": "nemh-h100", "gpu": "H100", "gpus": 16, "model": "nemotron-h-8b", "seq": 8192, "precision": "fp8-cs",
       "tp": 2, "pp": 1, "dp": 8, "mbs": 1, "gbs": 64, "framework": "megatron-core", "measured": {"iteration_s": 1.0}},
      {"id": "qnext-b200", "gpu": "B200", "gpus": 64, "model": "qwen3-next", "seq": 4096, "precision": "bf16",
       "tp": 1, "pp": 1, "dp": 64, "ep": 32, "mbs": 1, "gbs": 128, "framework": "megatron-core",
       "measured": {"iteration_s": 1.0}},
      {"id": "dsv3-layout", "gpu": "H100", "gpus": 1024, "model": "dsv3", "seq": 4096, "precision": "fp8-cs",
       "tp": 1, "pp": 16, "dp": 64, "ep": 64, "mbs": 1, "gbs": 1024, "framework": "megatron-core",
       "pipeline_layout": "Et*4|(t*4|)*14tmL", "measured": {"iteration_s": 1.0}}]})");
  const auto rows = load_measurements_document(doc, "hybrid.json");
  ASSERT_EQ(rows.size(), 3u);
  const auto& c = row_by_id(rows, "dsv3-layout");
  EXPECT_TRUE(c.failure.empty()) << c.failure;
  EXPECT_EQ(c.plan.layers_per_stage.back(), 1);
  EXPECT_EQ(c.model.mtp_layers, 1);
  const auto& a = row_by_id(rows, "nemh-h100");
  EXPECT_TRUE(a.failure.empty()) << a.failure;
  EXPECT_EQ(a.model.mlp, MlpKind::RELU2);
  EXPECT_EQ(a.model.layer_kind(0), (LayerKind{MixerKind::MAMBA2, FfnKind::NONE}));
  EXPECT_NEAR(static_cast<double>(a.model.total_params()), 8100852736.0, 8100852736.0 * 2e-3);  // vocab padded
  const auto& b = row_by_id(rows, "qnext-b200");
  EXPECT_TRUE(b.failure.empty()) << b.failure;
  EXPECT_TRUE(b.model.hybrid());
  EXPECT_EQ(b.model.linear.value_heads, 32);
}

TEST(PublishedData, RecomputeModulesFromWordsOrListAndDualPipe) {
  // DeepSeek-V3's words (section 3.2.3) and a 2026 recipe's Megatron-Core list map to recompute modules.
  const nlohmann::json doc = nlohmann::json::parse(R"({
    "model_shapes": {"dsv3": {"preset": "deepseek-v3"}},
    "rows": [
      {"id": "words", "gpu": "H100", "gpus": 1024, "model": "dsv3", "seq": 4096, "precision": "bf16", "tp": 1,
       "pp": 16, "dp": 64, "ep": 64, "mbs": 1, "gbs": 1024, "framework": "megatron-core",
       "recompute": "RMSNorm and MLA up-projections recomputed in backward", "measured": {"iteration_s": 1.0}},
      {"id": "list", "gpu": "H100", "gpus": 1024, "model": "dsv3", "seq": 4096, "precision": "bf16", "tp": 1,
       "pp": 16, "dp": 64, "ep": 64, "mbs": 1, "gbs": 1024, "framework": "megatron-core", "recompute": "selective",
       "recompute_modules": ["mla_up_proj", "moe_act", "layernorm"], "measured": {"iteration_s": 1.0}},
      {"id": "bad", "gpu": "H100", "gpus": 1024, "model": "dsv3", "seq": 4096, "precision": "bf16", "tp": 1,
       "pp": 16, "dp": 64, "ep": 64, "mbs": 1, "gbs": 1024, "framework": "megatron-core", "recompute": "selective",
       "recompute_modules": "core_attn,attention", "measured": {"iteration_s": 1.0}},
      {"id": "dualpipe", "gpu": "H100", "gpus": 1024, "model": "dsv3", "seq": 4096, "precision": "bf16", "tp": 1,
       "pp": 16, "dp": 64, "ep": 64, "mbs": 1, "gbs": 4096, "framework": "megatron-core", "recompute": "none",
       "pp_schedule": "DualPipe, bidirectional", "measured": {"iteration_s": 1.0}}]})");
  const auto rows = load_measurements_document(doc, "modules.json");
  ASSERT_EQ(rows.size(), 4u);
  const auto& dp = row_by_id(rows, "dualpipe");
  EXPECT_TRUE(dp.failure.empty()) << dp.failure;
  EXPECT_EQ(dp.plan.schedule, Schedule::DUALPIPE);
  const auto& w = row_by_id(rows, "words");
  EXPECT_TRUE(w.failure.empty()) << w.failure;
  EXPECT_EQ(w.plan.recompute, Recompute::SELECTIVE);
  EXPECT_EQ(w.plan.recompute_modules, RECOMPUTE_LAYERNORM | RECOMPUTE_MLA_UP_PROJ);
  const auto& l = row_by_id(rows, "list");
  EXPECT_TRUE(l.failure.empty()) << l.failure;
  EXPECT_EQ(l.plan.recompute_modules, RECOMPUTE_MLA_UP_PROJ | RECOMPUTE_MOE_ACT | RECOMPUTE_LAYERNORM);
  EXPECT_NE(row_by_id(rows, "bad").failure.find("unknown recompute module 'attention'"), std::string::npos)
      << row_by_id(rows, "bad").failure;
}

TEST(PublishedData, RecomputeMethodAndNumLayers) {
  // Megatron's --recompute-method / --recompute-num-layers as a table gives them: block with N (the first N layers of
  // every chunk), uniform (every layer), N covering every chunk (full recompute), and the refusals.
  const nlohmann::json doc = nlohmann::json::parse(R"({
    "model_shapes": {"l70": {"preset": "llama3-70b"}},
    "rows": [
      {"id": "block", "gpu": "H100", "gpus": 64, "model": "l70", "seq": 8192, "precision": "bf16", "tp": 8, "pp": 4,
       "dp": 2, "mbs": 1, "gbs": 64, "framework": "megatron-core", "recompute": "full", "recompute_method": "block",
       "recompute_num_layers": 5, "measured": {"iteration_s": 1.0}},
      {"id": "uniform", "gpu": "H100", "gpus": 64, "model": "l70", "seq": 8192, "precision": "bf16", "tp": 8, "pp": 4,
       "dp": 2, "mbs": 1, "gbs": 64, "framework": "megatron-core", "recompute_method": "uniform",
       "recompute_num_layers": 1, "measured": {"iteration_s": 1.0}},
      {"id": "all", "gpu": "H100", "gpus": 64, "model": "l70", "seq": 8192, "precision": "bf16", "tp": 8, "pp": 4,
       "dp": 2, "mbs": 1, "gbs": 64, "framework": "megatron-core", "recompute_num_layers": 20,
       "measured": {"iteration_s": 1.0}},
      {"id": "selective", "gpu": "H100", "gpus": 64, "model": "l70", "seq": 8192, "precision": "bf16", "tp": 8,
       "pp": 4, "dp": 2, "mbs": 1, "gbs": 64, "framework": "megatron-core", "recompute": "selective",
       "recompute_num_layers": 2, "measured": {"iteration_s": 1.0}},
      {"id": "method", "gpu": "H100", "gpus": 64, "model": "l70", "seq": 8192, "precision": "bf16", "tp": 8, "pp": 4,
       "dp": 2, "mbs": 1, "gbs": 64, "framework": "megatron-core", "recompute_method": "every",
       "measured": {"iteration_s": 1.0}}]})");
  const auto rows = load_measurements_document(doc, "rc.json");
  ASSERT_EQ(rows.size(), 5u);
  const auto& block = row_by_id(rows, "block");
  ASSERT_TRUE(block.failure.empty()) << block.failure;
  EXPECT_EQ(block.plan.recompute, Recompute::FULL);
  EXPECT_EQ(block.plan.recompute_num_layers, 5);
  for (const char* id : {"uniform", "all"}) {
    const auto& r = row_by_id(rows, id);
    ASSERT_TRUE(r.failure.empty()) << r.failure;
    EXPECT_EQ(r.plan.recompute, Recompute::FULL) << id;
    EXPECT_EQ(r.plan.recompute_num_layers, 0) << id;
  }
  EXPECT_TRUE(has(row_by_id(rows, "all").notes, "covers every layer of every chunk: full recompute"));
  EXPECT_TRUE(has(row_by_id(rows, "selective").failure, "need recompute full (the row has selective)"))
      << row_by_id(rows, "selective").failure;
  EXPECT_TRUE(has(row_by_id(rows, "method").failure, "recompute_method 'every' is not known"))
      << row_by_id(rows, "method").failure;
}

TEST(PublishedData, MegatronFsdpRowsAndItsRefusalBelowZero2) {
  const nlohmann::json doc = nlohmann::json::parse(R"({
    "model_shapes": {"l8": {"preset": "llama3-8b"}},
    "rows": [
      {"id": "mfsdp", "gpu": "H100", "gpus": 16, "model": "l8", "seq": 8192, "precision": "bf16", "tp": 1, "pp": 1,
       "dp": 16, "mbs": 1, "gbs": 64, "framework": "megatron-core", "zero_stage": 3, "megatron_fsdp": true,
       "fsdp_double_buffer": true, "measured": {"iteration_s": 1.0}},
      {"id": "zero1", "gpu": "H100", "gpus": 16, "model": "l8", "seq": 8192, "precision": "bf16", "tp": 1, "pp": 1,
       "dp": 16, "mbs": 1, "gbs": 64, "framework": "megatron-core", "zero_stage": 1, "megatron_fsdp": true,
       "measured": {"iteration_s": 1.0}}]})");
  const auto rows = load_measurements_document(doc, "mfsdp.json");
  ASSERT_EQ(rows.size(), 2u);
  const auto& r = row_by_id(rows, "mfsdp");
  ASSERT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_EQ(r.plan.zero_stage, 3);
  EXPECT_TRUE(r.plan.megatron_fsdp);
  EXPECT_TRUE(r.plan.fsdp_double_buffer);
  // Below ZeRO 2 the plan's validation (when the row is predicted) refuses it.
  const auto& z1 = row_by_id(rows, "zero1");
  ASSERT_TRUE(z1.failure.empty()) << z1.failure;
  EXPECT_TRUE(z1.plan.megatron_fsdp);
  try {
    z1.plan.validate(z1.model, load_cluster(z1.cluster));
    ADD_FAILURE() << "megatron_fsdp at ZeRO 1 validated";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("megatron-fsdp needs zero stage 2"), std::string::npos) << e.what();
  }
}

// The overlap switches the rows may state (published_json.hpp): Megatron-Core's --tp-comm-overlap and
// --overlap-param-gather map onto the plan; before they were read but refused as unknown fields. A Megatron-Core row
// with the distributed optimizer that states no overlap takes the parameter all-gather as overlapped (with its
// gradient reduction, the plan's default), as Megatron-LM's launch examples and NeMo's configurations set them; one
// that describes its overlap keeps what it says.
TEST(PublishedData, OverlapSwitchesMapOntoThePlan) {
  const nlohmann::json doc = nlohmann::json::parse(R"({
    "model_shapes": {"l8": {"preset": "llama3-8b"}},
    "rows": [
      {"id": "both", "gpu": "H100", "gpus": 16, "model": "l8", "seq": 8192, "precision": "bf16", "tp": 2, "pp": 1,
       "dp": 8, "mbs": 1, "gbs": 64, "framework": "megatron-core", "sequence_parallel": true,
       "distributed_optimizer": true, "tp_comm_overlap": true, "overlap_param_gather": true,
       "measured": {"iteration_s": 1.0}},
      {"id": "unstated", "gpu": "H100", "gpus": 16, "model": "l8", "seq": 8192, "precision": "bf16", "tp": 2,
       "pp": 1, "dp": 8, "mbs": 1, "gbs": 64, "framework": "megatron-core", "sequence_parallel": true,
       "distributed_optimizer": true, "measured": {"iteration_s": 1.0}},
      {"id": "grads-only", "gpu": "H100", "gpus": 16, "model": "l8", "seq": 8192, "precision": "bf16", "tp": 2,
       "pp": 1, "dp": 8, "mbs": 1, "gbs": 64, "framework": "megatron-core", "sequence_parallel": true,
       "distributed_optimizer": true, "overlap": "overlap-grad-reduce only", "measured": {"iteration_s": 1.0}},
      {"id": "torchtitan", "gpu": "H100", "gpus": 16, "model": "l8", "seq": 8192, "precision": "bf16", "tp": 2,
       "pp": 1, "dp": 8, "mbs": 1, "gbs": 64, "stack": "torchtitan", "sequence_parallel": true,
       "zero_stage": 1, "measured": {"iteration_s": 1.0}}]})");
  const auto rows = load_measurements_document(doc, "overlap.json");
  ASSERT_EQ(rows.size(), 4u);
  const auto& both = row_by_id(rows, "both");
  ASSERT_TRUE(both.failure.empty()) << both.failure;
  EXPECT_TRUE(both.plan.tp_comm_overlap);
  EXPECT_TRUE(both.plan.overlap_param_gather);
  const auto& unstated = row_by_id(rows, "unstated");
  ASSERT_TRUE(unstated.failure.empty()) << unstated.failure;
  EXPECT_FALSE(unstated.plan.tp_comm_overlap);
  EXPECT_TRUE(unstated.plan.dp_overlap);
  EXPECT_TRUE(unstated.plan.overlap_param_gather);
  EXPECT_TRUE(has(unstated.notes, "--overlap-param-gather assumed")) << unstated.notes;
  for (const char* id : {"grads-only", "torchtitan"}) {
    const auto& r = row_by_id(rows, id);
    ASSERT_TRUE(r.failure.empty()) << id << ": " << r.failure;
    EXPECT_FALSE(r.plan.overlap_param_gather) << id;
  }
}

// A row's own software stack and FP8 recipe fields (stack_name, precision_of): read by the mapper, and so known keys.
TEST(PublishedData, RowStackAndFp8RecipeFieldsAreRead) {
  const nlohmann::json doc = nlohmann::json::parse(R"({
    "model_shapes": {"l8": {"preset": "llama3-8b"}},
    "rows": [
      {"id": "stack", "gpu": "H100", "gpus": 8, "model": "l8", "seq": 8192, "precision": "bf16", "tp": 1, "pp": 1,
       "dp": 8, "mbs": 1, "gbs": 8, "framework": "megatron-core", "stack": "torchtitan",
       "measured": {"iteration_s": 1.0}},
      {"id": "fp8", "gpu": "H100", "gpus": 8, "model": "l8", "seq": 8192, "precision": "fp8", "tp": 1, "pp": 1,
       "dp": 8, "mbs": 1, "gbs": 8, "framework": "megatron-core", "fp8_recipe": "rowwise",
       "measured": {"iteration_s": 1.0}},
      {"id": "float8", "gpu": "H100", "gpus": 8, "model": "l8", "seq": 8192, "precision": "fp8", "tp": 1, "pp": 1,
       "dp": 8, "mbs": 1, "gbs": 8, "framework": "megatron-core", "float8_recipe": "tensorwise",
       "measured": {"iteration_s": 1.0}}]})");
  const auto rows = load_measurements_document(doc, "stack.json");
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& r : rows) ASSERT_TRUE(r.failure.empty()) << r.id << ": " << r.failure;
  EXPECT_EQ(row_by_id(rows, "stack").plan.stack, "torchtitan");
  EXPECT_EQ(row_by_id(rows, "fp8").plan.precision, Precision::FP8_ROWWISE);
  EXPECT_EQ(row_by_id(rows, "float8").plan.precision, Precision::FP8_CURRENT);
}

TEST(SharedMeasurements, SimumaxRowsMapToMoeEpAndCp) {
  const std::string path = kMeasurements + "simumax_b200.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  const auto rows = load_published(path);
  const auto& moe = row_by_id(rows, "deepseekv2_tp1_ep4_pp2_dp4_l4_mbc4_cef");
  ASSERT_TRUE(moe.failure.empty()) << moe.failure;
  EXPECT_EQ(moe.group, "moe");
  EXPECT_EQ(moe.gpu, "b200-sxm-180gb");
  EXPECT_EQ(moe.cluster, "dgx-b200:8");
  EXPECT_EQ(moe.plan.tp, 1);
  EXPECT_EQ(moe.plan.pp, 2);
  EXPECT_EQ(moe.plan.dp, 4);
  EXPECT_EQ(moe.plan.cp, 1);
  EXPECT_EQ(moe.plan.ep, 4);
  EXPECT_EQ(moe.plan.etp, 1);
  EXPECT_EQ(moe.plan.expert_dp(), 1);
  EXPECT_EQ(moe.plan.dispatcher, Dispatcher::ALL_TO_ALL);
  EXPECT_EQ(moe.plan.routing.capacity_factor, 1.0);
  EXPECT_TRUE(moe.plan.routing.pad_to_capacity);
  EXPECT_EQ(moe.plan.zero_stage, 1);
  EXPECT_EQ(moe.plan.recompute, Recompute::NONE);
  EXPECT_EQ(moe.plan.schedule, Schedule::ONE_F_ONE_B);
  // "overlap": "none: ... no overlap-grad-reduce / overlap-param-gather flags": gradients reduced after the flush.
  EXPECT_FALSE(moe.plan.dp_overlap);
  EXPECT_FALSE(moe.plan.overlap_param_gather);
  EXPECT_TRUE(has(moe.notes, "gradients reduced after the last backward")) << moe.notes;
  EXPECT_EQ(moe.plan.micro_batch_size, 1);
  EXPECT_EQ(moe.plan.global_batch_size, 16);
  EXPECT_EQ(moe.plan.num_microbatches(), 4);
  EXPECT_EQ(moe.model.num_layers, 4);
  EXPECT_EQ(moe.model.seq_len, 4096);
  EXPECT_EQ(moe.model.hidden, 5120);
  EXPECT_EQ(moe.model.vocab, 102400);
  EXPECT_EQ(moe.model.dtype, DType::BF16);
  EXPECT_EQ(moe.model.moe.experts, 160);
  EXPECT_EQ(moe.model.moe.top_k, 6);
  EXPECT_EQ(moe.model.moe.expert_ffn_hidden, 1536);
  EXPECT_EQ(moe.model.moe.shared_experts, 2);
  EXPECT_EQ(moe.model.moe.shared_ffn_hidden, 3072);
  EXPECT_EQ(moe.model.moe.dense_layers, 1);
  EXPECT_EQ(moe.model.num_moe_layers(), 3);
  EXPECT_EQ(moe.model.mla.q_lora_rank, 1536);
  EXPECT_EQ(moe.model.mla.kv_lora_rank, 512);
  EXPECT_EQ(moe.model.mla.qk_nope_head_dim, 128);
  EXPECT_EQ(moe.model.mla.qk_rope_head_dim, 64);
  EXPECT_EQ(moe.model.mla.v_head_dim, 128);
  // The largest per-rank max_memory_allocated (MiB), 44.7 GiB rounded in the file.
  EXPECT_NEAR(moe.measured_peak_memory_bytes / 1073741824.0, 44.7, 0.01);
  const auto& cp = row_by_id(rows, "llama3_70b_l12_tp2_cp4_pp1_dp1_seq32768_mbc4_cef");
  ASSERT_TRUE(cp.failure.empty()) << cp.failure;
  EXPECT_EQ(cp.group, "cp");
  EXPECT_EQ(cp.plan.cp, 4);
  EXPECT_EQ(cp.plan.cp_kind, CpKind::ALL_TO_ALL);
  EXPECT_EQ(cp.plan.tp, 2);
  EXPECT_TRUE(cp.plan.sequence_parallel);
  EXPECT_EQ(cp.plan.world_size(), 8);
  EXPECT_EQ(cp.model.seq_len, 32768);
  EXPECT_EQ(cp.model.num_layers, 12);
  EXPECT_EQ(cp.model.vocab, 128256);  // already a multiple of 128 x tp = 256
  const auto& dense = row_by_id(rows, "llama3_405b_l4_tp8_pp1_dp1_mbc4_cef");
  EXPECT_EQ(dense.group, "dense");
  EXPECT_EQ(dense.model.kv_heads, 16);
  EXPECT_EQ(dense.model.vocab, 129024);  // 128,256 padded to a multiple of 128 x tp = 1,024
  EXPECT_TRUE(has(dense.notes, "kv_heads_16_not_8")) << dense.notes;
  int groups[3] = {0, 0, 0};
  for (const auto& r : rows) groups[r.group == "dense" ? 0 : r.group == "moe" ? 1 : 2]++;
  EXPECT_EQ(groups[0] + groups[1] + groups[2], 43);
  EXPECT_EQ(groups[1], 12);
  EXPECT_EQ(groups[2], 7);
}

// The same mapping on a small document in the shared shape (no ../shared needed), and the rows that fail.
TEST(SharedMeasurements, DocumentRowsMapAndBadRowsFailNamingFileAndRow) {
  const std::string path = write_temp("doc.json", kDocument);
  const auto rows = load_published(path);
  std::filesystem::remove(path);
  ASSERT_EQ(rows.size(), 6u);
  const auto& dense = rows[0];
  ASSERT_TRUE(dense.failure.empty()) << dense.failure;
  EXPECT_EQ(dense.group, "dense");
  EXPECT_EQ(dense.cluster, "dgx-h100:4");
  EXPECT_EQ(dense.model.kv_heads, 4);
  EXPECT_EQ(dense.model.head_dim_override, 0);  // 64 = hidden / heads
  EXPECT_EQ(dense.model.mlp, MlpKind::SWIGLU);
  EXPECT_FALSE(dense.model.tied_embeddings);
  EXPECT_FALSE(dense.model.learned_pos_embedding);
  EXPECT_EQ(dense.model.vocab, 32000);  // a multiple of 128 x 2 already
  EXPECT_TRUE(dense.plan.sequence_parallel);
  EXPECT_EQ(dense.plan.zero_stage, 1);
  EXPECT_DOUBLE_EQ(dense.measured_peak_memory_bytes, 10.0 * 1073741824.0);
  EXPECT_EQ(dense.notes, "truncated_layer_count; measured memory: torch max_memory_allocated");

  const auto& moe = rows[1];
  ASSERT_TRUE(moe.failure.empty()) << moe.failure;
  EXPECT_EQ(moe.group, "moe");
  EXPECT_EQ(moe.plan.ep, 4);
  EXPECT_EQ(moe.plan.etp, 1);
  EXPECT_EQ(moe.plan.recompute, Recompute::FULL);
  EXPECT_EQ(moe.model.moe.dense_layers, 1);
  EXPECT_EQ(moe.model.mla.kv_lora_rank, 128);
  EXPECT_EQ(moe.model.dtype, DType::BF16);
  EXPECT_EQ(moe.precision, "fp8");
  EXPECT_EQ(moe.plan.precision, Precision::FP8_DELAYED) << moe.notes;    // Megatron-Core + TE's default recipe
  EXPECT_DOUBLE_EQ(moe.measured_peak_memory_bytes, 2048.0 * 1048576.0);  // per-rank peaks beat the rounded GiB

  const auto& cp = rows[2];
  ASSERT_TRUE(cp.failure.empty()) << cp.failure;
  EXPECT_EQ(cp.group, "cp");
  EXPECT_EQ(cp.plan.cp_kind, CpKind::ALL_TO_ALL);
  EXPECT_EQ(cp.plan.recompute, Recompute::SELECTIVE);
  EXPECT_EQ(cp.measured_peak_memory_bytes, 0);

  const auto& no_tp = rows[3];
  EXPECT_EQ(no_tp.failure, path + ": row 3 ('no-tp'): missing field 'tp'");
  EXPECT_DOUBLE_EQ(no_tp.measured_s, 0.3);  // what was read before the failure is kept for the report

  const auto& gh = rows[4];
  ASSERT_TRUE(gh.failure.empty()) << gh.failure;
  EXPECT_EQ(gh.gpu, "gh200");
  EXPECT_EQ(gh.cluster, "clariden:4");

  const auto& pp = rows[5];
  ASSERT_TRUE(pp.failure.empty()) << pp.failure;
  EXPECT_EQ(pp.cluster, "grand-teton-h100:8");  // torchtitan's 500 W H100
  EXPECT_EQ(pp.plan.micro_batch_size, 2);       // local batch 8 over pp = 4 micro-batches
  EXPECT_EQ(pp.plan.schedule, Schedule::INTERLEAVED);
  EXPECT_EQ(pp.plan.virtual_stages, 2);
  EXPECT_EQ(pp.plan.zero_stage, 3);
  EXPECT_TRUE(has(pp.notes, "pp micro-batches not stated")) << pp.notes;

  // Failed rows are not simulated (their calibration is never asked for) and count as failed.
  PublishedRow failed = gh;
  failed.failure = "a failed row";
  const auto res = predict_rows(
      {no_tp, failed},
      [](const PublishedRow& r) -> const Calibration& {
        throw std::runtime_error("calibration asked for failed row " + r.id);
      },
      NetworkMode::ANALYTIC);
  ASSERT_EQ(res.size(), 2u);
  EXPECT_EQ(res[0].failure, no_tp.failure);
  EXPECT_EQ(score(res).failed, 2);
  EXPECT_EQ(score(res).rows, 0);

  // A document whose rows are not a list is a malformed file, not a failed row.
  const std::string bad = write_temp("bad_doc.json", R"({"model_shapes": {}, "rows": {}})");
  EXPECT_THROW(load_published(bad), FormatError);
  std::filesystem::remove(bad);
}

// SAILOR's per-stage partition (per_stage_plan[].layer_indexes: embedding at index 0, the LM head at the last index)
// becomes transformer layers per stage with the embedding on the first stage and the head on the last; a partition
// that does not tile the model's indexes fails its row with the reason.
TEST(SharedMeasurements, SailorPerStagePartitionMapsToTransformerLayers) {
  auto stage = [](int first, int last) {
    std::string idx;
    for (int i = first; i <= last; ++i) idx += (idx.empty() ? "" : ", ") + std::to_string(i);
    return R"({"layer_indexes": [)" + idx + "]}";
  };
  auto row = [](const std::string& id, int pp, const std::string& stages, const std::string& model) {
    return R"({"id": ")" + id + R"(", "gpu": "GH200 GH-96", "gpus": )" + std::to_string(pp) +
           R"(, "gpus_per_node": 4, "model": ")" + model + R"(", "seq": 512, "precision": "fp32", "tp": 1, "pp": )" +
           std::to_string(pp) + R"(, "dp": 1, "mbs": 1, "gbs": 4, "recompute": "none", "per_stage_plan": [)" + stages +
           R"(], "measured": {"iteration_s": 1.0, "peak_memory_bytes": 4e9}})";
  };
  const std::string opt = "Tiny OPT (24 layers)", neo = "Tiny Neo (32 layers)";
  const std::string doc =
      R"json({"source": "eth-easl/sailor@0000:plans", "licence": "test", "about": "test", "conventions": "test",
  "model_shapes": {
    "Tiny OPT (24 layers)": {"layers": 24, "hidden": 256, "ffn_hidden": 1024, "heads": 4, "vocab": 1024,
      "position_embedding": "learned absolute, 512", "mlp": "relu (fc1/fc2)", "tied_embeddings": false},
    "Tiny Neo (32 layers)": {"layers": 32, "hidden": 256, "ffn_hidden": 1024, "heads": 4, "vocab": 1024,
      "position_embedding": "learned absolute, 512", "mlp": "gelu", "tied_embeddings": true}
  },
  "rows": [)json" +
      row("opt-3", 3, stage(0, 6) + ", " + stage(7, 15) + ", " + stage(16, 25), opt) + ",\n" +
      row("gap", 3, stage(0, 6) + ", " + stage(8, 15) + ", " + stage(16, 25), opt) + ",\n" +
      row("opt-partition-on-neo", 1, stage(0, 25), neo) + ",\n" +
      row("stage-count", 2, stage(0, 6) + ", " + stage(7, 15) + ", " + stage(16, 25), opt) + ",\n" +
      row("head-only-stage", 2, stage(0, 24) + ", " + stage(25, 25), opt) + ",\n" +
      row("one-stage", 1, stage(0, 25), opt) + "]}";
  const std::string path = write_temp("sailor_stages.json", doc);
  const auto rows = load_published(path);
  std::filesystem::remove(path);
  ASSERT_EQ(rows.size(), 6u);
  const auto& ok = rows[0];
  ASSERT_TRUE(ok.failure.empty()) << ok.failure;
  // 26 indexes: [0..6] = embedding + 6 layers, [7..15] = 9 layers, [16..25] = 9 layers + head.
  EXPECT_EQ(ok.plan.layers_per_stage, (std::vector<int>{6, 9, 9}));
  EXPECT_EQ(ok.plan.stage_layers(ok.model.num_layers), (std::vector<int>{6, 9, 9}));
  EXPECT_FALSE(ok.plan.dp_overlap);
  EXPECT_EQ(ok.model.dtype, DType::FP32);
  EXPECT_EQ(ok.model.attention, AttentionKind::UNFUSED);
  EXPECT_EQ(ok.cluster, "clariden:3");
  EXPECT_TRUE(has(rows[1].failure,
                  "per_stage_plan[1]: layer_indexes 8..15 (8 entries) do not continue the "
                  "partition at index 7"))
      << rows[1].failure;
  EXPECT_TRUE(has(rows[2].failure,
                  "per_stage_plan has 26 layer indexes (0..25) but 'Tiny Neo (32 layers)' has 34 "
                  "(32 transformer layers + embedding + head): the partition is not this model's"))
      << rows[2].failure;
  EXPECT_TRUE(has(rows[3].failure, "per_stage_plan has 3 stages but pp is 2")) << rows[3].failure;
  EXPECT_TRUE(has(rows[4].failure, "per_stage_plan[1]: layer_indexes 25..25 hold no transformer layer"))
      << rows[4].failure;
  const auto& one = rows[5];
  ASSERT_TRUE(one.failure.empty()) << one.failure;
  EXPECT_TRUE(one.plan.layers_per_stage.empty());  // pp 1: one stage runs everything
  // The uneven stages simulate: stage 0 (embedding + 6 layers) and stage 2 (9 layers + head) differ in memory.
  const auto res = predict_rows({ok, one}, default_calibration("gh200"), NetworkMode::ANALYTIC);
  ASSERT_EQ(res.size(), 2u);
  for (const auto& r : res) {
    EXPECT_TRUE(r.failure.empty()) << r.row.id << ": " << r.failure;
    EXPECT_GT(r.predicted_s, 0) << r.row.id;
  }
}

// A simulated row carries the predicted peak memory and its error against the measured one.
TEST(SharedMeasurements, PredictedPeakMemoryAndItsError) {
  const std::string path = write_temp("doc_mem.json", kDocument);
  auto rows = load_published(path);
  std::filesystem::remove(path);
  const auto res = predict_rows({rows[0]}, default_calibration("h100-sxm5-80gb"), NetworkMode::ANALYTIC);
  ASSERT_EQ(res.size(), 1u);
  ASSERT_TRUE(res[0].failure.empty()) << res[0].failure;
  EXPECT_GT(res[0].predicted_peak_memory_bytes, 0);
  EXPECT_TRUE(res[0].has_memory());
  EXPECT_DOUBLE_EQ(res[0].memory_error, (res[0].predicted_peak_memory_bytes - rows[0].measured_peak_memory_bytes) /
                                            rows[0].measured_peak_memory_bytes);
  const auto s = score(res);
  EXPECT_EQ(s.memory_rows, 1);
  EXPECT_DOUBLE_EQ(s.memory_mape, std::abs(res[0].memory_error));
}

// Memory scores by hand: two rows with a measured peak (+20%, -25%), one without, one failed, one measured OOM.
TEST(SharedMeasurements, MemoryErrorArithmetic) {
  EXPECT_DOUBLE_EQ(relative_error(12, 10), 0.2);
  EXPECT_DOUBLE_EQ(relative_error(15, 20), -0.25);
  EXPECT_DOUBLE_EQ(relative_error(5, 0), 0.0);
  auto result = [](const std::string& group, double measured_s, double predicted_s, double measured_mem,
                   double predicted_mem) {
    RowResult r;
    r.row.group = group;
    r.row.measured_s = measured_s;
    r.row.measured_peak_memory_bytes = measured_mem;
    r.predicted_s = predicted_s;
    r.error = relative_error(predicted_s, measured_s);
    r.predicted_peak_memory_bytes = predicted_mem;
    r.memory_error = relative_error(predicted_mem, measured_mem);
    return r;
  };
  std::vector<RowResult> rs = {result("a", 1.0, 1.1, 10e9, 12e9), result("a", 2.0, 1.8, 20e9, 15e9),
                               result("b", 1.0, 1.0, 0, 7e9), result("b", 1.0, 3.0, 10e9, 30e9),
                               result("b", 0, 4.0, 0, 90e9)};
  rs[3].failure = "not simulated";
  rs[4].row.measured_oom = true;
  rs[4].oom = true;
  EXPECT_TRUE(rs[0].has_memory());
  EXPECT_FALSE(rs[2].has_memory());
  EXPECT_FALSE(rs[3].has_memory());
  const auto s = score(rs);
  EXPECT_EQ(s.rows, 3);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.measured_oom_rows, 1);
  EXPECT_EQ(s.measured_oom_predicted, 1);
  EXPECT_NEAR(s.mape, (0.1 + 0.1 + 0.0) / 3, 1e-12);
  EXPECT_EQ(s.memory_rows, 2);
  EXPECT_NEAR(s.memory_mape, (0.2 + 0.25) / 2, 1e-12);
  EXPECT_NEAR(s.memory_max_abs_error, 0.25, 1e-12);
  EXPECT_NEAR(s.memory_mean_error, (0.2 - 0.25) / 2, 1e-12);
  ASSERT_EQ(s.groups.size(), 2u);
  EXPECT_EQ(s.groups[0].group, "a");
  EXPECT_EQ(s.groups[0].memory_rows, 2);
  EXPECT_NEAR(s.groups[0].memory_mape, 0.225, 1e-12);
  EXPECT_EQ(s.groups[1].memory_rows, 0);
}

// The SimuMax B200 rows (Megatron-Core, dense / MoE with EP / CP at 32K-128K): peak memory within 3% MAPE of
// max_memory_allocated (the issue's bar; docs/accuracy.md has the table), and every group's time ranking kept
// (Spearman > 0.9) even though the uncalibrated B200 is ~2x optimistic in absolute time.
TEST(SharedMeasurements, SimumaxMemoryWithinThreePercent) {
  const std::string path = kMeasurements + "simumax_b200.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  const auto rows = load_published(path);
  const auto res = predict_rows(rows, default_calibration("b200-sxm-180gb"), NetworkMode::ANALYTIC);
  const auto s = score(res);
  EXPECT_EQ(s.failed, 0);
  EXPECT_EQ(s.memory_rows, 43);
  EXPECT_LT(s.memory_mape, 0.03);
  ASSERT_EQ(s.groups.size(), 3u);
  for (const auto& g : s.groups) EXPECT_GT(g.spearman, 0.9) << g.group;
}

// ---- Leave-one-source-out cross-validation (validate/published/cross_validate.hpp) ----

TEST(CrossValidate, BandsArePercentilesOfTheLogRatio) {
  // 21 rows of one class with ln(measured / predicted) = -0.10, -0.09, ..., +0.10: the 5th percentile is -0.09 and
  // the 95th +0.09 (linear interpolation between order statistics).
  // One unit: no spread between sources is known, the band is its rows' percentiles.
  std::vector<PublishedRow> rows(21);
  std::vector<BandSample> samples;
  for (int i = 0; i < 21; ++i) {
    rows[i].gpu = "h100-sxm5-80gb";
    rows[i].plan.stack = "torchtitan";
    samples.push_back({&rows[i], -0.10 + 0.01 * i, "one-source.json"});
  }
  const auto bands = error_bands(samples, 10);
  ASSERT_FALSE(bands.empty());
  for (const auto& b : bands) {
    EXPECT_EQ(b.rows, 21);
    EXPECT_NEAR(b.q05, -0.09, 1e-12) << b.key;
    EXPECT_NEAR(b.q95, +0.09, 1e-12) << b.key;
  }
  // Every class of the run, most specific first; none below the minimum row count.
  EXPECT_EQ(band_keys("h100-sxm5-80gb", "torchtitan", "1-node").front(), "h100-sxm5-80gb|torchtitan|1-node");
  EXPECT_EQ(band_keys("h100-sxm5-80gb", "", "1-node")[2], "h100-sxm5-80gb");
  EXPECT_EQ(band_keys("h100-sxm5-80gb", "", "1-node")[4], kDefaultStack);
  EXPECT_EQ(bands.size(), 6u);
  EXPECT_TRUE(error_bands(samples, 22).empty());
}

TEST(CrossValidate, BandsAreRandomEffectsIntervalsOverSources) {
  // Closed form: three sources of one class whose rows all sit on their source's bias (-0.1, 0, +0.2; no residual
  // scatter). mu = 1/30, the biases' variance s^2 = ((-0.1-mu)^2 + (0-mu)^2 + (0.2-mu)^2) / 2 = 7/300, which is also
  // the variance over every unit, so the pooled tau^2 = s^2; the band is mu -/+ z_0.95 tau (z = 1.6448536).
  std::vector<PublishedRow> rows(30);
  std::vector<BandSample> samples;
  const double bias[3] = {-0.1, 0.0, 0.2};
  const int count[3] = {20, 5, 5};  // a large source weighs what a small one does
  int n = 0;
  for (int u = 0; u < 3; ++u)
    for (int i = 0; i < count[u]; ++i, ++n) {
      rows[n].gpu = "h100-sxm5-80gb";
      rows[n].plan.stack = "torchtitan";
      samples.push_back({&rows[n], bias[u], "source" + std::to_string(u)});
    }
  const double mu = 0.1 / 3, tau = std::sqrt(7.0 / 300), z = 1.6448536269514722;
  const auto bands = error_bands(samples, 10);
  ASSERT_EQ(bands.size(), 6u);
  for (const auto& b : bands) {
    EXPECT_EQ(b.rows, 30);
    EXPECT_NEAR(b.q05, mu - z * tau, 1e-9) << b.key;
    EXPECT_NEAR(b.q95, mu + z * tau, 1e-9) << b.key;
  }
  // A class of one source (the A100 rows below) borrows the spread between the others: its band is centred on its
  // own bias, as wide as the pooled variance says (here all of it: one unit has no variance of its own).
  std::vector<PublishedRow> more(12);
  for (int i = 0; i < 12; ++i) {
    more[i].gpu = "a100-sxm4-80gb";
    more[i].plan.stack = "torchtitan";
    samples.push_back({&more[i], 0.3 + (i % 2 == 0 ? 0.05 : -0.05), "a100-source"});
  }
  const double m4 = (-0.1 + 0.0 + 0.2 + 0.3) / 4;
  const double var4 = ((-0.1 - m4) * (-0.1 - m4) + m4 * m4 + (0.2 - m4) * (0.2 - m4) + (0.3 - m4) * (0.3 - m4)) / 3;
  const auto bands4 = error_bands(samples, 10);
  const auto a100 =
      std::find_if(bands4.begin(), bands4.end(), [](const ErrorBand& b) { return b.key == "a100-sxm4-80gb"; });
  ASSERT_NE(a100, bands4.end());
  // Residuals +-0.05 with equal weight: F(q) = (Phi((q - 0.35)/tau) + Phi((q - 0.25)/tau)) / 2, symmetric about 0.3.
  const double t4 = std::sqrt(var4);
  const auto F = [&](double q) {
    return 0.25 * (std::erfc(-(q - 0.35) / (t4 * std::sqrt(2.0))) + std::erfc(-(q - 0.25) / (t4 * std::sqrt(2.0))));
  };
  EXPECT_NEAR(F(a100->q05), 0.05, 1e-9);
  EXPECT_NEAR(F(a100->q95), 0.95, 1e-9);
  EXPECT_NEAR(a100->q05 + a100->q95, 0.6, 1e-9);
  // Two sources with the same bias (here: both predicted exactly) know no spread between sources: the band is their
  // residuals' weighted percentiles, not an error.
  std::vector<PublishedRow> exact(20);
  std::vector<BandSample> same;
  for (int i = 0; i < 20; ++i) {
    exact[i].gpu = "h100-sxm5-80gb";
    same.push_back({&exact[i], 0.0, i < 10 ? "a" : "b"});
  }
  const auto flat = error_bands(same, 10);
  ASSERT_FALSE(flat.empty());
  for (const auto& b : flat) {
    EXPECT_EQ(b.q05, 0.0) << b.key;
    EXPECT_EQ(b.q95, 0.0) << b.key;
    EXPECT_EQ(b.sources, 2) << b.key;
  }
}

TEST(CrossValidate, RefitsWhatSawTheHeldOutSourceAndScoresEverySource) {
  // Both Megatron-LM files are in the shipped A100 fit. Held out, the README's 4 rows are predicted by a refit on
  // the other source, here a stand-in of that name with 48 rows made by the shipped values (24 even rows: enough
  // for the fit's 11 parameters); the stand-in held out leaves the README's 2 even rows, too few to fit: it is
  // predicted with the unfitted estimates.
  const std::string dir = std::string(DTSIM_SOURCE_DIR) + "/tests/data/published/";
  std::string rows_json = "[";
  for (int i = 0; i < 48; ++i) {
    const int hidden = 512 + 128 * (i % 6), layers = 2 + i % 4, mbs = 1 + i % 2, tp = 1 << (i % 3);
    rows_json +=
        std::string(i ? "," : "") + "{\"hidden\": " + std::to_string(hidden) + ", \"heads\": 8, " +
        "\"num_layers\": " + std::to_string(layers) + ", \"seq_len\": 512, \"micro_batch\": " + std::to_string(mbs) +
        ", \"global_batch\": " + std::to_string(4 * mbs) + ", \"tp\": " + std::to_string(tp) + ", \"measured_s\": 1.0}";
  }
  rows_json += "]";
  const std::string standin = write_temp("korthikanti_table4_layer.json", rows_json);
  auto made = load_published(standin);
  std::filesystem::remove(standin);
  const auto truth = predict_rows(made, default_calibration("a100-sxm4-80gb"), NetworkMode::ANALYTIC);
  for (std::size_t i = 0; i < made.size(); ++i) {
    ASSERT_TRUE(truth[i].failure.empty()) << truth[i].failure;
    made[i].measured_s = truth[i].predicted_s;
  }
  std::vector<CvSource> sources{{"megatron_readme_a100.json", load_published(dir + "megatron_readme_a100.json")},
                                {"korthikanti_table4_layer.json", made}};
  const CvReport rep = cross_validate(sources, 12, 1.0);
  ASSERT_EQ(rep.sources.size(), 2u);
  const auto& readme = rep.sources[0];
  EXPECT_NE(readme.values_from.find("refit without it on korthikanti_table4_layer.json (24 rows"), std::string::npos)
      << readme.values_from;
  EXPECT_GE(readme.fit_objective, 0);
  const auto& other = rep.sources[1];
  EXPECT_NE(other.values_from.find("unfitted estimates"), std::string::npos) << other.values_from;
  EXPECT_EQ(other.fit_objective, -1);
  EXPECT_EQ(readme.score.rows + other.score.rows, rep.rows);
  EXPECT_EQ(rep.rows, 52);
  // The README's rows are scored against bands of the stand-in's 48 rows; the stand-in has no band (4 rows).
  EXPECT_EQ(readme.banded, 4);
  EXPECT_EQ(other.banded, 0);
  EXPECT_GT(rep.pooled_mape, 0);
  EXPECT_GT(rep.mean_source_mape, 0);
  // Every timed row is listed with the band it was scored against; the mean coverage is over sources with a band.
  ASSERT_EQ(readme.rows.size(), 4u);
  int covered = 0;
  for (const auto& r : readme.rows) {
    EXPECT_FALSE(r.band_key.empty());
    EXPECT_EQ(r.covered, r.log_ratio >= r.q05 && r.log_ratio <= r.q95);
    EXPECT_NEAR(r.log_ratio, std::log(r.measured_s / r.predicted_s), 1e-12);
    covered += r.covered ? 1 : 0;
  }
  EXPECT_EQ(covered, readme.covered);
  EXPECT_DOUBLE_EQ(rep.mean_source_coverage, readme.covered / 4.0);
  const auto j = cv_json(rep);
  EXPECT_EQ(j.at("sources").size(), 2u);
  EXPECT_EQ(j.at("sources")[0].at("row_results").size(), 4u);
  EXPECT_NE(cv_text(rep).find("leave one source out"), std::string::npos);
}

// ---- the publications' FLOP counts (flop_conventions.hpp): oracles against the figures they published --------------

namespace {
TransformerSpec gpt_like(int layers, int hidden, int heads, int ffn, int seq, int vocab) {
  TransformerSpec m;
  m.name = "oracle";
  m.num_layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.ffn_hidden = ffn;
  m.seq_len = seq;
  m.vocab = vocab;
  return m;
}
}  // namespace

TEST(FlopConventions, PalmReproducesPalmsOwnMfu) {
  // PaLM 540B (Chowdhery et al. 2022, Table 1 and Section 4.1): 118 layers, d_model 18432, 48 heads of 256, d_ff
  // 73728 SwiGLU, multi-query attention, 256k tied vocabulary, seq 2048; 238.3K tokens/s on 6,144 TPU v4 (275
  // TFLOP/s bf16 each) is 46.2% MFU.
  TransformerSpec m = gpt_like(118, 18432, 48, 73728, 2048, 256000);
  m.kv_heads = 1;
  m.head_dim_override = 256;
  m.mlp = MlpKind::SWIGLU;
  m.learned_pos_embedding = false;
  m.tied_embeddings = true;
  EXPECT_NEAR(m.total_params() / 1e9, 540.35, 540.35 * 0.005);  // the paper's count, within 0.5%
  const double per_token = convention_flops_per_iteration(FlopConvention::PALM, m, 1) / 2048;
  EXPECT_NEAR(per_token * 238.3e3 / (6144 * 275e12), 0.462, 0.003);
}

TEST(FlopConventions, Megatron2021ReproducesMegaScalesMegatronMfu) {
  // MegaScale Table 2, Megatron-LM on 256 GPUs: 175B (96 x 12288, vocab 64,000, seq 2048), batch 768, 40.0 s per
  // iteration, 53.0% MFU of 312 TFLOP/s.
  const TransformerSpec m = gpt_like(96, 12288, 96, 4 * 12288, 2048, 64000);
  const double flops = convention_flops_per_iteration(FlopConvention::MEGATRON_2021, m, 768);
  EXPECT_NEAR(flops / (40.0 * 256 * 312e12), 0.530, 0.001);
}

TEST(FlopConventions, MegatronCore2025IsMegatron2021WithCausalHalving) {
  // For a GPT (FFN 4h, multi-head attention, GELU) Megatron-LM's 2025 count is the 2021 count with the score and
  // context GEMMs halved: 72 l h^2 (1 + s/(12h) + V/(12 l h)) per token, i.e. 6 l h s less.
  const TransformerSpec m = gpt_like(24, 2048, 16, 8192, 4096, 51200);
  const double old_count = convention_flops_per_iteration(FlopConvention::MEGATRON_2021, m, 3);
  const double new_count = convention_flops_per_iteration(FlopConvention::MEGATRON_CORE_2025, m, 3);
  EXPECT_NEAR(old_count - new_count, 3.0 * 4096 * 6.0 * 24 * 2048 * 4096, old_count * 1e-12);
  // MoE: top_k experts of the expert width, SwiGLU 3/2, plus the shared experts; GQA's k/v projections shrink.
  TransformerSpec moe = gpt_like(28, 3584, 28, 18944, 4096, 151936);  // Qwen2-57B-A14B
  moe.kv_heads = 4;
  moe.mlp = MlpKind::SWIGLU;
  moe.moe.experts = 64;
  moe.moe.top_k = 8;
  moe.moe.expert_ffn_hidden = 2560;
  moe.moe.shared_experts = 1;
  moe.moe.shared_ffn_hidden = 20480;
  const double h = 3584, s = 4096;
  const double per_token =
      12 * 28 * h * (2560 * 8 * 1.5 + 20480 * 1.5) + 12 * 28 * h * h * (1 + 4.0 / 28 + s / h / 2) + 6 * h * 151936;
  EXPECT_NEAR(convention_flops_per_iteration(FlopConvention::MEGATRON_CORE_2025, moe, 2), 2 * s * per_token,
              per_token * 1e-9);
  EXPECT_EQ(flop_convention_named("megatron-core-2025"), FlopConvention::MEGATRON_CORE_2025);
  EXPECT_FALSE(flop_convention_named("chinchilla").has_value());
}

TEST(PublishedData, FailedRowsAreCountedByReason) {
  EXPECT_EQ(failure_reason("f.json: row 27 ('sailor-mit-N2-N2_D1'): heterogeneous cluster (RTX-3090, Titan-RTX): dtsim "
                           "simulates one GPU kind per run"),
            "heterogeneous cluster");
  EXPECT_EQ(failure_reason("f.json: row 0 ('llama3-t4-1'): interleaved schedule with vp 1"),
            "interleaved schedule with vp 1");
  EXPECT_EQ(failure_reason("out of memory"), "out of memory");
  std::vector<RowResult> results(4);
  results[0].failure = "a.json: row 1 ('x'): heterogeneous cluster (A, B): no";
  results[1].failure = "a.json: row 2 ('y'): heterogeneous cluster (C): no";
  results[2].failure = "a.json: row 3 ('z'): recompute 'selective layer' (torchtitan): no";
  results[3].row.measured_s = 1, results[3].predicted_s = 1;
  const auto s = score(results);
  ASSERT_EQ(s.failed_by_reason.size(), 2u);
  EXPECT_EQ(s.failed_by_reason[0], (std::pair<std::string, int>{"heterogeneous cluster", 2}));
  EXPECT_EQ(s.failed_by_reason[1], (std::pair<std::string, int>{"recompute 'selective layer'", 1}));
}

// Scale trends by hand (issue Fidelity's "no source's error trends with GPU count"): a series whose error falls with
// GPU count has rho -1, one that spans less than 8x has none, the file's own trend mixes both series.
TEST(SharedMeasurements, ScaleTrendIsTheRankCorrelationOfErrorWithGpus) {
  auto result = [](const std::string& series, int gpus, double error) {
    RowResult r;
    r.row.series = series;
    r.row.plan.dp = gpus;
    r.row.measured_s = 1.0;
    r.predicted_s = 1.0 + error;
    r.error = error;
    return r;
  };
  std::vector<RowResult> rs = {result("paper-a", 64, -0.05),   result("paper-a", 256, -0.10),
                               result("paper-a", 1024, -0.20), result("paper-b", 128, 0.30),
                               result("paper-b", 256, 0.10),   result("paper-b", 512, 0.20)};
  rs.push_back(result("paper-a", 4096, -0.40));
  rs.back().failure = "not simulated";  // a failed row is not scored
  const auto s = score(rs);
  ASSERT_EQ(s.scale_trends.size(), 2u);  // "all" and paper-a; paper-b spans 4x only
  EXPECT_EQ(s.scale_trends[0].series, "all");
  EXPECT_EQ(s.scale_trends[0].rows, 6);
  EXPECT_EQ(s.scale_trends[0].min_gpus, 64);
  EXPECT_EQ(s.scale_trends[0].max_gpus, 1024);
  // errors by GPU rank: 64:-0.05 128:0.30 256:{-0.10,0.10} 512:0.20 1024:-0.20 -> Spearman with average ranks
  EXPECT_NEAR(s.scale_trends[0].spearman,
              spearman({64, 256, 1024, 128, 256, 512}, {-0.05, -0.10, -0.20, 0.30, 0.10, 0.20}), 1e-12);
  EXPECT_EQ(s.scale_trends[1].series, "paper-a");
  EXPECT_EQ(s.scale_trends[1].rows, 3);
  EXPECT_NEAR(s.scale_trends[1].spearman, -1.0, 1e-12);
  EXPECT_NEAR(s.scale_trends[1].mean_error_small, -0.05, 1e-12);
  EXPECT_NEAR(s.scale_trends[1].mean_error_large, -0.20, 1e-12);
  const auto j = scale_trends_json(s.scale_trends);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[1].at("series"), "paper-a");
  EXPECT_DOUBLE_EQ(j[1].at("spearman").get<double>(), -1.0);
}

// A row's scale-out NICs, from its network text or its fields, replace the preset's where they differ (BLOOM's Jean
// Zay nodes: 4 Omni-Path links, 100 Gb/s each, against DGX A100's 8 x 200 Gb/s); texts that state the preset's own
// NICs, or NVLink only, leave the cluster as it is.
TEST(PublishedData, StatedNicsReplaceThePresets) {
  const nlohmann::json doc = nlohmann::json::parse(R"json({
    "model_shapes": {"m": {"layers": 4, "hidden": 1024, "ffn_hidden": 4096, "heads": 16, "vocab": 50304}},
    "rows": [
      {"id": "opa", "gpu": "A100-80GB", "gpus": 32, "model": "m", "seq": 1024, "tp": 1, "pp": 1, "dp": 32, "mbs": 1,
       "gbs": 32, "network": "8 GPUs per node over NVLink; 4 Omni-Path (OPA) links per node; NCCL on its own subnet",
       "measured": {"iteration_s": 1.0}},
      {"id": "same", "gpu": "A100-SXM4-80GB", "gpus": 32, "model": "m", "seq": 1024, "tp": 1, "pp": 1, "dp": 32,
       "mbs": 1, "gbs": 32, "network": "eight 200G NICs per server, multi-rail", "measured": {"iteration_s": 1.0}},
      {"id": "hca", "gpu": "H100-SXM5-80GB", "gpus": 32, "model": "m", "seq": 1024, "tp": 1, "pp": 1, "dp": 32,
       "mbs": 1, "gbs": 32, "network": "NVLink + NVSwitch, 900 GB/s GPU-to-GPU; 4 x 200 Gbps InfiniBand HCAs per node",
       "measured": {"iteration_s": 1.0}},
      {"id": "bytes", "gpu": "H100-SXM5-80GB", "gpus": 32, "model": "m", "seq": 1024, "tp": 1, "pp": 1, "dp": 32,
       "mbs": 1, "gbs": 32, "network": "NVLink within node (160 GB/s); InfiniBand across nodes (25 GB/s)",
       "measured": {"iteration_s": 1.0}},
      {"id": "fields", "gpu": "H100-SXM5-80GB", "gpus": 32, "model": "m", "seq": 1024, "tp": 1, "pp": 1, "dp": 32,
       "mbs": 1, "gbs": 32, "nics_per_node": 2, "nic_gbps": 800, "measured": {"iteration_s": 1.0}},
      {"id": "nvlink", "gpu": "H100-SXM5-80GB", "gpus": 32, "model": "m", "seq": 1024, "tp": 1, "pp": 1, "dp": 32,
       "mbs": 1, "gbs": 32, "network": "NVLink 400 GB/s per GPU; inter-node network not specified",
       "measured": {"iteration_s": 1.0}},
      {"id": "odd", "gpu": "H100-SXM5-80GB", "gpus": 32, "model": "m", "seq": 1024, "tp": 1, "pp": 1, "dp": 32,
       "mbs": 1, "gbs": 32, "nics_per_node": 3, "nic_gbps": 400, "measured": {"iteration_s": 1.0}},
      {"id": "zero", "gpu": "H100-SXM5-80GB", "gpus": 32, "model": "m", "seq": 1024, "tp": 1, "pp": 1, "dp": 32,
       "mbs": 1, "gbs": 32, "nics_per_node": 0, "measured": {"iteration_s": 1.0}}]})json");
  const auto rows = load_measurements_document(doc, "nics.json");
  ASSERT_EQ(rows.size(), 8u);
  EXPECT_TRUE(has(row_by_id(rows, "zero").failure, "nics_per_node must be at least 1"))
      << row_by_id(rows, "zero").failure;
  for (const char* id : {"opa", "same", "hca", "bytes", "fields", "nvlink"})
    EXPECT_TRUE(row_by_id(rows, id).failure.empty()) << id << ": " << row_by_id(rows, id).failure;
  EXPECT_EQ(row_by_id(rows, "opa").cluster, "dgx-a100:32:nics:4:100");
  EXPECT_TRUE(has(row_by_id(rows, "opa").notes, "4 x 100 Gb/s per node")) << row_by_id(rows, "opa").notes;
  EXPECT_EQ(row_by_id(rows, "same").cluster, "dgx-a100:32");
  EXPECT_EQ(row_by_id(rows, "hca").cluster, "dgx-h100:32:nics:4:200");
  EXPECT_EQ(row_by_id(rows, "bytes").cluster, "dgx-h100:32:nics:8:200");  // 25 GB/s = 200 Gb/s per NIC
  EXPECT_EQ(row_by_id(rows, "fields").cluster, "dgx-h100:32:nics:2:800");
  EXPECT_EQ(row_by_id(rows, "nvlink").cluster, "dgx-h100:32");
  EXPECT_TRUE(has(row_by_id(rows, "odd").failure, "3 NICs per node do not divide")) << row_by_id(rows, "odd").failure;
  const ClusterSpec c = load_cluster("dgx-a100:32:nics:4:100");
  EXPECT_EQ(c.inter.nics_per_node, 4);
  EXPECT_DOUBLE_EQ(c.inter.nic_bandwidth_Bps, 100e9 / 8);
  EXPECT_EQ(c.num_nodes, 4);
  const ClusterSpec f = load_cluster("dgx-h100:64:nics:2:800:fat-tree:4:2");
  EXPECT_EQ(f.inter.topology, "fat-tree");
  EXPECT_EQ(f.inter.nics_per_node, 2);
  EXPECT_EQ(load_cluster("dgx-h100:4:nics:2:800").inter.nics_per_node, 1);  // half a node: half its NICs
}

// MoE Parallel Folding's rows leave the interleaving and the dropout unstated: its authors' benchmark harness of the
// same month (yanring/Megatron-MoE-ModelZoo @ 78fd4d6) runs Qwen2-57B-A14B at TP 2 PP 4 with 7 model chunks per rank
// and both models without dropout. Only that source, only those models, the interleaving only at the config's TP and
// PP, and a row or shape that states either keeps it.
TEST(PublishedData, ParallelFoldingRowsTakeTheAuthorsBenchmarkConfig) {
  const nlohmann::json doc = nlohmann::json::parse(R"json({
    "model_shapes": {
      "Qwen2-57B-A14B": {"layers": 28, "hidden": 3584, "ffn_hidden": 2560, "heads": 28, "kv_heads": 4, "vocab": 151936,
                         "mlp": "swiglu", "moe": {"experts": 64, "top_k": 8, "expert_ffn_hidden": 2560}},
      "Mixtral-8x22B": {"layers": 28, "hidden": 3584, "ffn_hidden": 2560, "heads": 28, "kv_heads": 4, "vocab": 151936,
                 "mlp": "swiglu", "hidden_dropout": true}},
    "rows": [
      {"id": "zoo", "source": "moe_parallel_folding", "gpu": "H100-SXM5-80GB", "gpus": 64, "model": "Qwen2-57B-A14B",
       "seq": 4096, "tp": 2, "pp": 4, "dp": 8, "ep": 4, "gbs": 256, "measured": {"iteration_s": 1.0}},
      {"id": "other-pp", "source": "moe_parallel_folding", "gpu": "H100-SXM5-80GB", "gpus": 64,
       "model": "Qwen2-57B-A14B", "seq": 4096, "tp": 2, "pp": 2, "dp": 16, "ep": 4, "gbs": 256,
       "measured": {"iteration_s": 1.0}},
      {"id": "stated-vp", "source": "moe_parallel_folding", "gpu": "H100-SXM5-80GB", "gpus": 64,
       "model": "Qwen2-57B-A14B", "seq": 4096, "tp": 2, "pp": 4, "dp": 8, "ep": 4, "vp": 1, "gbs": 256,
       "measured": {"iteration_s": 1.0}},
      {"id": "other-source", "source": "elsewhere", "gpu": "H100-SXM5-80GB", "gpus": 64, "model": "Qwen2-57B-A14B",
       "seq": 4096, "tp": 2, "pp": 4, "dp": 8, "ep": 4, "gbs": 256, "measured": {"iteration_s": 1.0}},
      {"id": "stated-dropout", "source": "moe_parallel_folding", "gpu": "H100-SXM5-80GB", "gpus": 64,
       "model": "Mixtral-8x22B", "seq": 4096, "tp": 2, "pp": 4, "dp": 8, "gbs": 256, "measured": {"iteration_s": 1.0}}]})json");
  const auto rows = load_measurements_document(doc, "pfold.json");
  ASSERT_EQ(rows.size(), 5u);
  for (const auto& r : rows) ASSERT_TRUE(r.failure.empty()) << r.id << ": " << r.failure;
  const auto& zoo = row_by_id(rows, "zoo");
  EXPECT_EQ(zoo.plan.virtual_stages, 7);
  EXPECT_EQ(zoo.plan.schedule, Schedule::INTERLEAVED);
  EXPECT_FALSE(zoo.model.attention_dropout || zoo.model.hidden_dropout);
  EXPECT_TRUE(has(zoo.notes, "Megatron-MoE-ModelZoo")) << zoo.notes;
  EXPECT_EQ(row_by_id(rows, "other-pp").plan.virtual_stages, 1);   // not the config's pipeline
  EXPECT_FALSE(row_by_id(rows, "other-pp").model.hidden_dropout);  // still the config's model
  EXPECT_EQ(row_by_id(rows, "stated-vp").plan.virtual_stages, 1);
  EXPECT_EQ(row_by_id(rows, "stated-vp").plan.schedule, Schedule::ONE_F_ONE_B);
  EXPECT_EQ(row_by_id(rows, "other-source").plan.virtual_stages, 1);
  EXPECT_TRUE(row_by_id(rows, "other-source").model.attention_dropout);  // Megatron's default dropout
  EXPECT_TRUE(row_by_id(rows, "stated-dropout").model.hidden_dropout);
  EXPECT_TRUE(row_by_id(rows, "stated-dropout").model.attention_dropout);  // the shape states dropout: the rest too
}

// The curated torchao tables (tests/data/published/torchao_*.json): every row maps (no failed row), to the GPU
// preset, recipe and FSDP all-gather its table names, and is timed with the shipped calibration of its GPU.
TEST(CuratedPublished, TorchaoTablesMapEveryRowToItsRecipe) {
  const std::string dir = std::string(DTSIM_SOURCE_DIR) + "/tests/data/published/";
  struct Expect {
    std::string id;
    Precision precision;
    bool f8_all_gather;
  };
  const std::vector<std::pair<std::string, std::vector<Expect>>> files = {
      {"torchao_float8_h100.json",
       {{"torchao-h100-8b-bf16", Precision::BF16, false},
        {"torchao-h100-8b-tensorwise", Precision::FP8_CURRENT, true},
        {"torchao-h100-8b-rowwise", Precision::FP8_ROWWISE, false}}},
      {"torchao_mx_b200.json",
       {{"torchao-b200-8b-bf16", Precision::BF16, false},
        {"torchao-b200-8b-tensorwise", Precision::FP8_CURRENT, true},
        {"torchao-b200-8b-mxfp8-cublas", Precision::MXFP8, false},
        {"torchao-b200-8b-mxfp8-cublas-rceil", Precision::MXFP8, false},
        {"torchao-b200-8b-rowwise", Precision::FP8_ROWWISE, false}}}};
  for (const auto& [file, expect] : files) {
    const auto rows = load_published(dir + file);
    ASSERT_EQ(rows.size(), expect.size()) << file;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      EXPECT_TRUE(r.failure.empty()) << r.id << ": " << r.failure;
      EXPECT_EQ(r.id, expect[i].id);
      EXPECT_EQ(r.plan.precision, expect[i].precision) << r.id;
      EXPECT_EQ(r.plan.fsdp_float8_all_gather, expect[i].f8_all_gather) << r.id;
      EXPECT_EQ(r.plan.zero_stage, 3) << r.id;  // FSDP2 over the 8 GPUs
      // torchtitan's SDPA priority: FlashAttention-2 on the H100 table's Hopper, cuDNN first on the B200 table's
      // compute capability 10.0 (traces/stacks/torchtitan-cudnn.json).
      EXPECT_EQ(r.plan.stack, file == "torchao_mx_b200.json" ? "torchtitan-cudnn" : "torchtitan") << r.id;
      EXPECT_TRUE(r.compiled) << r.id;
      // iteration_s = 8 sequences x 8192 tokens / (tokens/s per GPU x 8 GPUs)
      EXPECT_GT(r.measured_s, 0.5) << r.id;
      EXPECT_LT(r.measured_s, 1.5) << r.id;
    }
    EXPECT_EQ(rows.front().gpu, file == "torchao_mx_b200.json" ? "b200-sxm-180gb" : "h100-sxm5-80gb");
    std::map<std::string, Calibration> cals;
    const auto res = predict_rows(
        rows,
        [&](const PublishedRow& r) -> const Calibration& {
          return cals.try_emplace(r.gpu, default_calibration(r.gpu)).first->second;
        },
        NetworkMode::ANALYTIC);
    for (const auto& x : res) {
      EXPECT_TRUE(x.failure.empty()) << x.row.id << ": " << x.failure;
      EXPECT_GT(x.predicted_s, 0) << x.row.id;
    }
  }
}
