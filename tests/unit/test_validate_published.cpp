// Accuracy harness: reading published measurements, scoring, rank correlation, and the fitted A100 preset on the
// vTrain single-node set.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "validate/published/published.hpp"

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
// figures recorded in README (MAPE 4.86%, max 19.6%, Spearman >= 0.989) with a small margin: a change of
// the model that makes the held-out predictions worse fails here.
TEST(PublishedData, FittedA100PresetOnHeldOutVtrainRows) {
  if (!std::filesystem::exists(kVtrain)) GTEST_SKIP() << kVtrain << " not present";
  const auto rows = select_split(load_published(kVtrain), "test");
  const auto results = predict_rows(rows, default_calibration("a100-sxm4-80gb"), NetworkMode::ANALYTIC);
  const auto s = score(results);
  EXPECT_EQ(s.failed, 0);
  EXPECT_LT(s.mape, 0.049);
  EXPECT_LT(s.max_abs_error, 0.198);
  EXPECT_GT(s.spearman_min, 0.985);
  EXPECT_LT(std::abs(s.mean_error), 0.02);
}

// The Accuracy issue's targets on the whole vTrain single-node set (1,440 rows, train and held-out together):
// MAPE <= 5%, max |error| <= 20%, Spearman >= 0.95 in every model group (README: 4.91%, 19.6%, 0.992).
TEST(PublishedData, FittedA100PresetMeetsTheTargetsOnAllVtrainRows) {
  if (!std::filesystem::exists(kVtrain)) GTEST_SKIP() << kVtrain << " not present";
  const auto rows = load_published(kVtrain);
  ASSERT_EQ(rows.size(), 1440u);
  const auto s = score(predict_rows(rows, default_calibration("a100-sxm4-80gb"), NetworkMode::ANALYTIC));
  EXPECT_EQ(s.failed, 0);
  EXPECT_LE(s.mape, 0.05);
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
  const Calibration truth = default_calibration("a100-sxm4-80gb");
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
