// The public library API (dtsim/dtsim.hpp): inputs resolved as the CLI resolves them, results equal to the
// simulator's own, errors as ConfigError with the CLI's one-line message, files as the CLI writes them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "dtsim/dtsim.hpp"
#include "sim/simulate.hpp"

namespace {

using namespace dtsim;

/// GPT-3 1.3B, TP 2 PP 2 DP 2 on one DGX A100, 4 micro-batches of 2.
Inputs small_inputs() {
  Inputs in = load_inputs({"gpt3-1.3b", "dgx-a100:8", "", ""});
  in.plan.tp = 2;
  in.plan.pp = 2;
  in.plan.dp = 2;
  in.plan.micro_batch_size = 2;
  in.plan.global_batch_size = 16;
  return in;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

const std::string* file_named(const Files& files, const std::string& name) {
  for (const auto& [n, content] : files)
    if (n == name) return &content;
  return nullptr;
}

TEST(Api, LoadInputsResolvesPresetsAndTheGpusCalibration) {
  const Inputs in = load_inputs({"gpt3-1.3b", "dgx-a100:16", "", ""});
  EXPECT_EQ(in.model.name, "gpt3-1.3b");
  EXPECT_EQ(in.cluster.total_gpus(), 16);
  EXPECT_EQ(in.calibration.name, default_calibration(in.cluster.gpu.name).name);
  EXPECT_EQ(resolve_calibration("", in.cluster).gemm_efficiency_max,
            default_calibration(in.cluster.gpu.name).gemm_efficiency_max);
}

TEST(Api, LoadInputsNamesTheBadInput) {
  EXPECT_NE(error_of([] {
              load_inputs({"no-such-model", "dgx-a100:8", "", ""});
            }).find("no-such-model"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              load_inputs({"gpt3-1.3b", "dgx-a100:8", "/nonexistent/plan.json", ""});
            }).find("/nonexistent/plan.json"),
            std::string::npos);
}

TEST(Api, ValidateInputsRejectsAPlanThatDoesNotFillTheCluster) {
  Inputs in = small_inputs();
  in.plan.dp = 4;  // 2 x 2 x 4 = 16 GPUs on an 8-GPU cluster
  EXPECT_NE(error_of([&] { validate_inputs(in); }).find("tp*pp*dp"), std::string::npos);
  EXPECT_NE(error_of([&] { simulate(in, {}); }).find("tp*pp*dp"), std::string::npos);
}

TEST(Api, UnknownOptionValuesGiveTheCliMessage) {
  const Inputs in = small_inputs();
  SimulateOptions o;
  o.network = "packet";
  EXPECT_EQ(error_of([&] { simulate(in, o); }), "simulate: --network 'packet' is not known (known: flow, analytic)");
  o = {};
  o.channels = 0;
  EXPECT_EQ(error_of([&] { simulate(in, o); }), "simulate: --channels must be between 1 and 64");
  CollectiveRequest req;
  req.cluster = "dgx-a100:8";
  req.sizes_bytes = {1 << 20};
  req.options.collective_algorithm = "butterfly";
  EXPECT_EQ(error_of([&] { collective(req); }),
            "collective: --algo 'butterfly' is not known (known: auto, ring, hierarchical, tree, nvls)");
}

// The API's result is the simulator's: same iteration time, same summary.json as sim::summary_json renders.
TEST(Api, SimulateEqualsTheSimulatorAndRendersItsFiles) {
  const Inputs in = small_inputs();
  SimulateOptions o;
  o.network = "analytic";
  o.trace = false;
  const SimulateResult r = simulate(in, o);

  sim::SimOptions so;
  so.network = sim::NetworkMode::ANALYTIC;
  const sim::Inputs si{&in.model, &in.cluster, &in.plan, &in.calibration, &so};
  const sim::Simulation s = sim::simulate(si);
  EXPECT_EQ(r.iteration_time_s, s.report.iteration_time_s);
  EXPECT_EQ(r.mfu, s.report.mfu);
  EXPECT_EQ(r.engine, "analytic");
  ASSERT_EQ(r.ranks.size(), s.report.ranks.size());
  double peak = 0;
  for (std::size_t k = 0; k < r.ranks.size(); ++k) {
    EXPECT_EQ(r.ranks[k].global_rank, s.report.ranks[k].global_rank);
    EXPECT_EQ(r.ranks[k].compute_s, s.report.ranks[k].compute_s);
    EXPECT_EQ(r.ranks[k].peak_bytes, s.report.ranks[k].peak_bytes);
    ASSERT_FALSE(r.ranks[k].memory_timeline.empty());
    // The timeline's highest total is the rank's peak.
    double top = 0;
    for (const auto& [t, bytes] : r.ranks[k].memory_timeline) top = std::max(top, bytes);
    EXPECT_DOUBLE_EQ(top, r.ranks[k].peak_bytes);
    peak = std::max(peak, r.ranks[k].peak_bytes);
  }
  EXPECT_EQ(r.peak_bytes, peak);
  EXPECT_FALSE(r.oom);
  ASSERT_EQ(r.files.size(), 1U);  // no trace asked for
  const std::string* summary = file_named(r.files, "summary.json");
  ASSERT_NE(summary, nullptr);
  EXPECT_EQ(*summary, sim::summary_json(si, s.lowered, s.engine, s.report).dump(2) + "\n");
  EXPECT_EQ(nlohmann::json::parse(*summary)["results"]["iteration_time_s"].get<double>(), r.iteration_time_s);
  EXPECT_NE(r.text.find("iteration"), std::string::npos);
}

TEST(Api, SimulateWithTraceAddsTraceJson) {
  SimulateOptions o;
  o.network = "analytic";
  const SimulateResult r = simulate(small_inputs(), o);
  ASSERT_EQ(r.files.size(), 2U);
  const std::string* trace = file_named(r.files, "trace.json");
  ASSERT_NE(trace, nullptr);
  EXPECT_TRUE(nlohmann::json::parse(*trace).contains("traceEvents"));
}

// Ring all-reduce over 8 GPUs of one node: busbw = algbw x 2(n-1)/n, as nccl-tests defines it.
TEST(Api, CollectiveReportsNcclTestsBandwidths) {
  CollectiveRequest req;
  req.cluster = "dgx-a100:8";
  req.sizes_bytes = {1 << 20, 1 << 30};
  req.options.network = "analytic";
  req.options.collective_algorithm = "ring";
  const CollectiveResult r = collective(req);
  ASSERT_EQ(r.points.size(), 2U);
  for (const auto& p : r.points) {
    EXPECT_DOUBLE_EQ(p.algbw_Bps, p.bytes / p.time_s);
    EXPECT_NEAR(p.busbw_Bps, p.algbw_Bps * 2 * 7 / 8, 1e-9 * p.busbw_Bps);
  }
  EXPECT_GT(r.points[1].busbw_Bps, r.points[0].busbw_Bps);  // latency matters less for large messages
  EXPECT_NE(file_named(r.files, "collective.tsv"), nullptr);
  EXPECT_NE(file_named(r.files, "collective.json"), nullptr);
  req.ranks = 9;
  EXPECT_EQ(error_of([&] { collective(req); }),
            "collective: --ranks 9 does not fit the 8 GPUs of cluster 'dgx-a100:8'");
}

TEST(Api, PlanChoosesAFittingCandidateAndWritesItsFiles) {
  PlanRequest req;
  req.model = "gpt3-1.3b";
  req.cluster = "dgx-a100:8";
  req.global_batch_size = 16;
  req.top = 2;
  req.network = "analytic";
  const PlanResult r = plan(req);
  EXPECT_EQ(r.planner, "grid");
  ASSERT_GE(r.chosen, 0);
  ASSERT_LE(r.candidates.size(), 2U);
  const PlanCandidate& best = r.candidates[r.chosen];
  EXPECT_TRUE(best.fits);
  EXPECT_EQ(best.plan.world_size(), 8);
  for (const auto& c : r.candidates) {
    if (c.fits) {
      EXPECT_LE(best.simulated_s, c.simulated_s);
    }
  }
  EXPECT_NE(file_named(r.files, "candidates.json"), nullptr);
  EXPECT_EQ(file_named(r.files, "plan.json"), nullptr);  // only with simulate_chosen
  req.global_batch_size = 0;
  EXPECT_EQ(error_of([&] { plan(req); }), "plan: --gbs must be from 1 to 16777216, got 0");
}

TEST(Api, PresetsListWhatTheLoadersAccept) {
  const Presets p = presets();
  ASSERT_FALSE(p.models.empty());
  ASSERT_FALSE(p.clusters.empty());
  for (const auto& m : p.models) EXPECT_EQ(load_model(m).name, m);
  for (const auto& c : p.clusters) EXPECT_GT(load_cluster(c + ":8").total_gpus(), 0);
  EXPECT_NE(p.text.find(p.models.front()), std::string::npos);
}

}  // namespace

// Scale extrapolation (validate published --fit-max-gpus, issue Calibrate) on runs whose "measured" times are dtsim's
// own predictions under a known calibration (A100 GEMMs and memory-bound kernels at 0.75 and 0.8 of the shipped
// efficiency): refit on the 24 rows of at most 8 GPUs, the 4 rows on 16 GPUs come out closer than with the shipped
// calibration; the report counts what it fitted and scored, and a bound above every row leaves nothing to score.
TEST(Api, FitMaxGpusRefitsOnSmallRowsAndScoresTheLarger) {
  const auto dir = std::filesystem::temp_directory_path() / ("dtsim_api_xtr_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  Calibration truth = default_calibration("a100-sxm4-80gb");
  truth.gemm_efficiency_max *= 0.75;
  truth.memory_bandwidth_efficiency *= 0.8;
  const std::string cal_path = (dir / "truth.json").string();
  std::ofstream(cal_path) << to_json(truth).dump();
  nlohmann::json rows = nlohmann::json::array();
  for (int hidden : {4096, 6144})
    for (int layers : {2, 4})
      for (auto [tp, pp, dp] : {std::array{1, 1, 1}, std::array{2, 1, 1}, std::array{1, 2, 1}, std::array{1, 1, 4},
                                std::array{2, 2, 2}, std::array{4, 1, 2}})
        rows.push_back({{"hidden", hidden},
                        {"heads", 32},
                        {"num_layers", layers},
                        {"seq_len", 2048},
                        {"tp", tp},
                        {"pp", pp},
                        {"dp", dp},
                        {"micro_batch", 2},
                        {"global_batch", 16 * dp},
                        {"cluster", "dgx-a100:" + std::to_string(tp * pp * dp)},
                        {"measured_s", 1.0}});
  for (int hidden : {4096, 6144})
    for (int layers : {2, 4})
      rows.push_back({{"hidden", hidden},
                      {"heads", 32},
                      {"num_layers", layers},
                      {"seq_len", 2048},
                      {"tp", 2},
                      {"pp", 1},
                      {"dp", 8},
                      {"micro_batch", 2},
                      {"global_batch", 128},
                      {"cluster", "dgx-a100:16"},
                      {"measured_s", 1.0}});
  const std::string data = (dir / "rows.json").string();
  std::ofstream(data) << rows.dump();
  PublishedRequest req;
  req.data = {data};
  req.calibration = cal_path;
  const auto truth_run = validate_published(req);
  ASSERT_EQ(truth_run.results.size(), 28u);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i]["measured_s"] = truth_run.results[i].predicted_s;
  std::ofstream(data) << rows.dump();

  req.calibration.clear();
  req.fit_max_gpus = 8;
  req.fit_max_evaluations = 150;
  const auto r = validate_published(req);
  ASSERT_TRUE(r.extrapolation.has_value());
  const auto& x = *r.extrapolation;
  EXPECT_EQ(x.fit_rows, 24);
  EXPECT_EQ(x.scored_rows, 4);
  ASSERT_EQ(x.calibrations.size(), 1u);
  EXPECT_NE(x.calibrations[0].second.find("refit on 24 rows"), std::string::npos) << x.calibrations[0].second;
  double shipped = 0;
  for (const auto& row : r.results)
    if (row.plan.world_size() > 8) shipped += std::abs(row.error) / 4;
  std::printf("16-GPU rows: shipped calibration MAPE %.2f%%, refit on <= 8 GPUs %.2f%% (bias %+.2f%%)\n", 100 * shipped,
              100 * x.mape, 100 * x.mean_error);
  EXPECT_GT(shipped, 0.1);  // the shipped calibration is off by the perturbation
  EXPECT_LT(x.mape, 0.5 * shipped) << "extrapolated " << x.mape << " vs shipped " << shipped;
  const std::string* json = file_named(r.files, "validation.json");
  ASSERT_NE(json, nullptr);
  const auto j = nlohmann::json::parse(*json);
  EXPECT_EQ(j.at("extrapolation").at("scored_rows"), 4);
  EXPECT_NE(r.text.find("extrapolation: fit on 24 rows with at most 8 GPUs, scored 4 rows with more"),
            std::string::npos)
      << r.text;

  req.fit_max_gpus = 16;
  EXPECT_NE(error_of([&] { validate_published(req); }).find("nothing is left to score"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// validation.json holds each simulated row's model, plan and cluster: `dtsim simulate` on them (the GPU's built-in
// calibration, analytic network) gives the row's prediction exactly, so a row can be examined on its own.
TEST(Api, ValidationRowsCarryTheInputsThatReproduceThem) {
  const auto dir = std::filesystem::temp_directory_path() / ("dtsim_api_rows_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  nlohmann::json rows = nlohmann::json::array();
  for (auto [tp, pp, dp] : {std::array{2, 1, 1}, std::array{2, 2, 4}})
    rows.push_back({{"hidden", 2048},
                    {"heads", 16},
                    {"num_layers", 4},
                    {"seq_len", 1024},
                    {"tp", tp},
                    {"pp", pp},
                    {"dp", dp},
                    {"micro_batch", 1},
                    {"global_batch", 8 * dp},
                    {"cluster", "dgx-a100:" + std::to_string(tp * pp * dp)},
                    {"measured_s", 1.0}});
  const std::string data = (dir / "rows.json").string();
  std::ofstream(data) << rows.dump();
  PublishedRequest req;
  req.data = {data};
  const auto r = validate_published(req);
  const std::string* json = file_named(r.files, "validation.json");
  ASSERT_NE(json, nullptr);
  const auto results = nlohmann::json::parse(*json).at("results");
  ASSERT_EQ(results.size(), 2u);
  for (const auto& row : results) {
    const std::string model = (dir / "model.json").string(), plan = (dir / "plan.json").string();
    std::ofstream(model) << row.at("model").dump();
    std::ofstream(plan) << row.at("plan").dump();
    const Inputs in = load_inputs({model, row.at("cluster").get<std::string>(), plan, ""});
    SimulateOptions o;
    o.network = "analytic";
    o.trace = false;
    EXPECT_DOUBLE_EQ(simulate(in, o).iteration_time_s, row.at("predicted_s").get<double>()) << row.dump();
  }
  std::filesystem::remove_all(dir);
}
