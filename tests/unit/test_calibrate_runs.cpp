// `dtsim calibrate runs` (validate/calibrate/runs_fit.hpp) against a known truth: runs "measured" by simulating them
// with a perturbed calibration are fitted from the shipped one. The fit must bring them back, name the values the
// runs cannot see (the NICs from single-node runs), and its intervals must reach `simulate`'s summary.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sim/simulate.hpp"
#include "traces/cluster.hpp"
#include "traces/model.hpp"
#include "traces/stack_profile.hpp"
#include "validate/calibrate/runs_fit.hpp"

using namespace dtsim;
using namespace dtsim::sim;

namespace {

PublishedRow run(int tp, int pp, int mbs, int gbs, int index) {
  PublishedRow r;
  r.index = index;
  r.id = "tp" + std::to_string(tp) + "-pp" + std::to_string(pp) + "-mbs" + std::to_string(mbs);
  r.model = model_preset("gpt3-1.3b");
  r.cluster = "dgx-h100:8";
  r.gpu = load_cluster(r.cluster).gpu.name;
  r.plan.tp = tp;
  r.plan.pp = pp;
  r.plan.dp = 8 / (tp * pp);
  r.plan.micro_batch_size = mbs;
  r.plan.global_batch_size = gbs;
  r.plan.stack = "megatron-core";
  r.group = "gpt3-1.3b";
  return r;
}

/// Single-node runs of one model, every plan's time "measured" with `truth`; the tenth is held out of fits.
std::vector<PublishedRow> runs_measured_with(const Calibration& truth) {
  std::vector<PublishedRow> rows = {run(1, 1, 1, 64, 0), run(1, 1, 4, 64, 1), run(2, 1, 1, 64, 2), run(2, 1, 4, 64, 3),
                                    run(4, 1, 2, 64, 4), run(8, 1, 1, 32, 5), run(8, 1, 8, 64, 6), run(2, 2, 2, 64, 7),
                                    run(4, 2, 1, 32, 8), run(1, 1, 2, 128, 9)};
  const auto res = predict_rows(rows, truth, NetworkMode::ANALYTIC);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_TRUE(res[i].failure.empty()) << res[i].failure;
    rows[i].measured_s = res[i].predicted_s;
  }
  return rows;
}

Calibration truth_of(const Calibration& hw, const StackProfile& stack) {
  Calibration t = with_stack(hw, stack);
  for (const auto& f : kSoftwareFields) t.pin(f);
  t.gemm_efficiency_max *= 0.82;
  t.intra_bandwidth_efficiency *= 0.75;
  t.host_issue_s *= 1.5;
  return t;
}

const FittedValue& value(const RunsFit& f, const std::string& field) {
  for (const auto& v : f.values)
    if (v.field == field) return v;
  ADD_FAILURE() << "no value " << field;
  return f.values.front();
}

}  // namespace

TEST(CalibrateRuns, RecoversTheTruthFromSingleNodeRunsAndNamesWhatTheyCannotSee) {
  const Calibration hw = default_calibration("h100-sxm5-80gb");
  const StackProfile stack = stack_profile("megatron-core");
  auto rows = runs_measured_with(truth_of(hw, stack));
  const PublishedRow held = rows.back();
  rows.pop_back();
  RunsFitOptions opt;
  opt.max_evaluations = 400;
  const RunsFit fit = fit_runs(rows, hw, stack, opt);
  ASSERT_EQ(fit.runs.size(), 9u);
  EXPECT_GT(fit.rms_before, 0.05) << "the truth must differ from the shipped values";
  EXPECT_LT(fit.rms_after, 0.01) << runs_fit_text(fit);
  // At most (9 - 1) / 2 values.
  int fitted = 0;
  for (const auto& v : fit.values) fitted += v.fitted;
  EXPECT_GE(fitted, 1);
  EXPECT_LE(fitted, 4);
  // The NICs, FP8/FP4 and the pipeline's sends beyond what two PP runs show: single-node BF16 runs cannot see them.
  const auto& inter = value(fit, "network.inter_bandwidth_efficiency");
  EXPECT_FALSE(inter.fitted);
  EXPECT_NE(inter.reason.find("not identified"), std::string::npos) << inter.reason;
  EXPECT_NE(inter.reason.find("across nodes"), std::string::npos) << inter.reason;
  EXPECT_DOUBLE_EQ(fit.calibration.inter_bandwidth_efficiency, hw.inter_bandwidth_efficiency);
  EXPECT_FALSE(value(fit, "compute.fp4_gemm_efficiency_scale").fitted);
  // The held-out run is predicted with the fit as it was measured.
  const auto r = predict_rows({held}, fit.calibration, NetworkMode::ANALYTIC);
  ASSERT_TRUE(r[0].failure.empty());
  EXPECT_NEAR(r[0].predicted_s / held.measured_s, 1.0, 0.02);
  // One node only: a 1-node interval, none for several nodes (those keep the shipped bands).
  ASSERT_EQ(fit.bands.size(), 1u);
  EXPECT_EQ(fit.bands[0].key, "1-node");
  EXPECT_LE(fit.bands[0].q05, fit.bands[0].q95);
  // Every fitted value's 90% range holds it.
  for (const auto& v : fit.values)
    if (v.fitted) {
      EXPECT_LE(v.low, v.after) << v.field;
      EXPECT_GE(v.high, v.after) << v.field;
    }
}

TEST(CalibrateRuns, NoiseWidensTheIntervalAndTheFilesSplitHardwareFromStack) {
  const Calibration hw = default_calibration("h100-sxm5-80gb");
  const StackProfile stack = stack_profile("megatron-core");
  auto rows = runs_measured_with(truth_of(hw, stack));
  // +-4% alternating "measurement noise": the residuals cannot vanish, the interval must cover it.
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i].measured_s *= i % 2 ? 1.04 : 0.96;
  RunsFitOptions opt;
  opt.max_evaluations = 300;
  opt.sources = {"my_runs.json"};
  const RunsFit fit = fit_runs(rows, hw, stack, opt);
  ASSERT_EQ(fit.bands.size(), 1u);
  EXPECT_GT(fit.residual_sigma, 0.02);
  EXPECT_LT(fit.bands[0].q05, -0.03);
  EXPECT_GT(fit.bands[0].q95, 0.03);
  // calibration.json: no software values (the stack profile fills them in), the interval and the fit's provenance.
  const auto cj = runs_fit_calibration_json(fit, opt.sources);
  EXPECT_FALSE(cj["compute"].contains("host_issue_s"));
  EXPECT_FALSE(cj["network"].contains("p2p_overhead_s"));
  EXPECT_EQ(cj["provenance"]["fitted_on"][0], "my_runs.json");
  const Calibration back = calibration_from_json(cj, "fitted");
  EXPECT_TRUE(back.pinned_software.empty());
  ASSERT_EQ(back.accuracy_bands.size(), 1u);
  EXPECT_DOUBLE_EQ(back.accuracy_bands[0].q95, fit.bands[0].q95);
  // stack.json carries the software values the fit ran with; both files together (`simulate --calibration FILE
  // --stack FILE`) give the fit's predictions.
  const StackProfile s = stack_profile_from_json(runs_fit_stack_json(fit), "fitted stack");
  EXPECT_DOUBLE_EQ(s.host_issue_s, fit.calibration.host_issue_s);
  EXPECT_EQ(s.fitted_on, opt.sources);
  const auto stack_file =
      std::filesystem::temp_directory_path() / ("dtsim_runs_stack_" + std::to_string(::getpid()) + ".json");
  std::ofstream(stack_file) << runs_fit_stack_json(fit).dump(2);
  PublishedRow user = rows[2];
  user.plan.stack = stack_file.string();
  const Calibration both = with_stack(back, s);
  const auto a = predict_rows({user}, back, NetworkMode::ANALYTIC);
  const auto b = predict_rows({rows[2]}, fit.calibration, NetworkMode::ANALYTIC);
  EXPECT_NEAR(a[0].predicted_s, b[0].predicted_s, 1e-9 * b[0].predicted_s);
  // simulate's summary takes a 1-node run's interval from the calibration, a 2-node run's from the shipped bands.
  auto interval_source = [&](const std::string& cluster_name, int dp) {
    const ClusterSpec cluster = load_cluster(cluster_name);
    PublishedRow r = rows[0];
    r.plan.dp = dp;
    r.plan.global_batch_size = 8 * dp;
    SimOptions so;
    so.network = NetworkMode::ANALYTIC;
    const Inputs in{&r.model, &cluster, &r.plan, &both, &so};
    const auto sim = simulate(in);
    const auto j = summary_json(in, sim.lowered, sim.engine, sim.report)["results"]["iteration_time_interval_s"];
    return j.is_null() ? std::string() : j["source"].get<std::string>();
  };
  EXPECT_NE(interval_source("dgx-h100:8", 8).find("fit to measured runs"), std::string::npos);
  EXPECT_EQ(interval_source("dgx-h100:16", 16).find("fit to measured runs"), std::string::npos);
  std::filesystem::remove(stack_file);
}

TEST(CalibrateRuns, RefusesTooFewRunsAndMixedGpus) {
  const Calibration hw = default_calibration("h100-sxm5-80gb");
  const StackProfile stack = stack_profile("megatron-core");
  std::vector<PublishedRow> rows = {run(1, 1, 1, 64, 0), run(2, 1, 1, 64, 1)};
  for (auto& r : rows) r.measured_s = 1.0;
  EXPECT_THROW(fit_runs(rows, hw, stack, {}), ConfigError);
  rows.push_back(run(4, 1, 1, 64, 2));
  rows.back().measured_s = 1.0;
  rows.back().cluster = "dgx-a100:8";
  rows.back().gpu = "a100-sxm4-80gb";
  EXPECT_THROW(fit_runs(rows, hw, stack, {}), ConfigError);
}

TEST(CalibrateRuns, HardwareOnlyFitLeavesEachRunsStackItsOwn) {
  // The scale-extrapolation fallback of `validate published --fit-max-gpus` (rows of several stacks): hardware values
  // only, every run's software values from its own stack.
  const Calibration hw = default_calibration("h100-sxm5-80gb");
  Calibration truth = hw;
  truth.gemm_efficiency_max *= 0.85;
  auto rows = runs_measured_with(truth);
  RunsFitOptions opt;
  opt.hardware_only = true;
  const RunsFit fit = fit_runs(rows, hw, stack_profile("torchtitan"), opt);
  for (const auto& v : fit.values) EXPECT_EQ(v.file, "calibration.json") << v.field;
  EXPECT_LT(fit.rms_after, 0.01) << runs_fit_text(fit);
  const Calibration c = with_fitted_hardware(hw, fit);
  EXPECT_TRUE(c.pinned_software.empty());
  // (Which values absorb the change is the fit's choice among confounded ones; the times must come back.)
  const auto r = predict_rows(rows, c, NetworkMode::ANALYTIC);
  for (std::size_t i = 0; i < rows.size(); ++i) EXPECT_NEAR(r[i].predicted_s / rows[i].measured_s, 1.0, 0.02) << i;
}

// A value the runs' times do not depend on is "not identified", and the reason says what the runs show: that no run
// has the feature it needs, or that some do but their times do not move with it (never "no run has pipeline
// parallelism" of runs that have it).
TEST(CalibrateRuns, ReasonsSayWhatTheRunsHave) {
  const Calibration hw = default_calibration("h100-sxm5-80gb");
  const StackProfile stack = stack_profile("megatron-core");
  const auto rows = runs_measured_with(truth_of(hw, stack));
  std::vector<PublishedRow> flat;
  for (const auto& r : rows)
    if (r.plan.pp == 1) flat.push_back(r);
  RunsFitOptions opt;
  opt.max_evaluations = 100;
  const RunsFit flat_fit = fit_runs(flat, hw, stack, opt);
  const auto& p2p_flat = value(flat_fit, "stack.p2p_overhead_s");
  EXPECT_FALSE(p2p_flat.fitted);
  EXPECT_NE(p2p_flat.reason.find("no run has pipeline parallelism"), std::string::npos) << p2p_flat.reason;
  // Two of the ten runs are pipelined; their 1F1B sends are far below their layers' time.
  const RunsFit all = fit_runs(rows, hw, stack, opt);
  const auto& p2p = value(all, "stack.p2p_overhead_s");
  EXPECT_FALSE(p2p.fitted);
  EXPECT_NE(p2p.reason.find("2 of the 10 runs have pipeline parallelism, but their times do not depend on it"),
            std::string::npos)
      << p2p.reason;
  const auto& coll = value(all, "stack.host_collective_issue_s");
  EXPECT_EQ(coll.reason.find("no run issues collectives"), std::string::npos) << coll.reason;
}
