// nccl-tests import and the fit of message-size network segments (no SimGrid: the analytic engine checks that
// the fitted calibration reproduces the measurements).
#include <gtest/gtest.h>

#include <cmath>

#include "studies/collective_bench.hpp"
#include "traces/error.hpp"
#include "traces/nccl_tests.hpp"
#include "validate/calibrate/nccl_fit.hpp"

using namespace dtsim;

namespace {
const std::string kLog = std::string(DTSIM_SOURCE_DIR) + "/tests/data/nccl-tests/all_reduce_perf_synthetic.txt";
}

TEST(NcclTests, ParsesTheLogLayout) {
  auto run = load_nccl_tests(kLog);
  EXPECT_EQ(run.op, "all-reduce");
  EXPECT_EQ(run.ranks, 8);
  ASSERT_EQ(run.rows.size(), 28u);  // 8 B ... 1 GiB
  EXPECT_EQ(run.rows.front().bytes, 8);
  EXPECT_EQ(run.rows.back().bytes, 1073741824.0);
  EXPECT_DOUBLE_EQ(run.rows.back().time_us, 8283.44);
  EXPECT_DOUBLE_EQ(run.rows.back().busbw_GBps, 226.84);
}

TEST(NcclTests, MalformedInputIsRejectedWithTheLine) {
  try {
    parse_nccl_tests("# header\n        1024   256  float sum -1  12.x  0.1  0.1 0\n", "log");
    FAIL() << "no error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'12.x'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_nccl_tests("# only comments\n", "log"), FormatError);
  EXPECT_THROW(parse_nccl_tests("1024 256 float\n", "log"), FormatError);  // truncated row
}

namespace {
// The calibration the synthetic log was computed with (tests/data/nccl-tests/README.md): the A100 defaults of
// the time, 80% NVLink efficiency and 2 us per ring step.
Calibration log_calibration() {
  Calibration c = default_calibration("a100-sxm4-80gb");
  c.intra_bandwidth_efficiency = 0.8;
  c.collective_step_overhead_s = 2e-6;
  return c;
}
}  // namespace

TEST(NcclTestsFit, RecoversTheFactorsTheLogWasMadeWith) {
  ClusterSpec c = load_cluster("dgx-a100:8");
  Calibration base = log_calibration();
  auto fit = sim::fit_nccl_tests(load_nccl_tests(kLog), c, base, "", 0, "log");
  EXPECT_EQ(fit.link, "intra");
  // Segments of the collective size, stored per ring-step message (S / 8).
  const double expect[][3] = {
      {65536 / 8.0, 2.0, 0.2}, {1048576 / 8.0, 1.2, 0.5}, {16777216 / 8.0, 1.0, 0.8}, {1e300, 1.0, 0.95}};
  ASSERT_EQ(fit.calibration.network_segments.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const auto& g = fit.calibration.network_segments[i];
    EXPECT_EQ(g.max_bytes, expect[i][0]);
    EXPECT_NEAR(g.latency_factor, expect[i][1], 0.02) << "segment " << i;  // times are printed to 0.01 us
    EXPECT_NEAR(g.bandwidth_factor, expect[i][2], 0.01 * expect[i][2]) << "segment " << i;
  }
  EXPECT_LT(fit.max_rel_error, 1e-3);
}

TEST(NcclTestsFit, FittedCalibrationReproducesTheMeasurementsInSimulation) {
  ClusterSpec c = load_cluster("dgx-a100:8");
  auto run = load_nccl_tests(kLog);
  auto fit = sim::fit_nccl_tests(run, c, log_calibration(), "", 0, "log");
  sim::SimOptions opt;
  opt.network = sim::NetworkMode::ANALYTIC;
  opt.collective_algorithm = sim::CollectiveAlgorithm::RING;
  for (const auto& row : run.rows) {
    auto pt = sim::run_collective(c, fit.calibration, opt, 8, cost::CollectiveKind::ALL_REDUCE, row.bytes);
    EXPECT_NEAR(pt.time_s * 1e6, row.time_us, 1e-3 * row.time_us + 0.02) << row.bytes << " bytes";
  }
}

TEST(NcclTestsFit, NeedsTheCollectiveAndEnoughSizes) {
  ClusterSpec c = load_cluster("dgx-a100:8");
  Calibration base = default_calibration(c.gpu.name);
  NcclTestsRun run;
  run.rows = {{1024, 10, 0, 0}, {2048, 11, 0, 0}};
  EXPECT_THROW(sim::fit_nccl_tests(run, c, base, "", 8, "log"), ConfigError);            // which collective?
  EXPECT_THROW(sim::fit_nccl_tests(run, c, base, "all-reduce", 0, "log"), ConfigError);  // how many ranks?
  EXPECT_THROW(sim::fit_nccl_tests(run, c, base, "broadcast", 8, "log"), ConfigError);
  run.rows.pop_back();
  EXPECT_THROW(sim::fit_nccl_tests(run, c, base, "all-reduce", 8, "log"), ConfigError);  // one size
}

TEST(NcclTests, JsonOutputGivesTheSameRunAsText) {
  auto text = load_nccl_tests(kLog);
  auto json = load_nccl_tests(std::string(DTSIM_SOURCE_DIR) + "/tests/data/nccl-tests/all_reduce_perf_synthetic.json");
  EXPECT_EQ(json.op, "all-reduce");
  EXPECT_EQ(json.ranks, 8);
  ASSERT_EQ(json.rows.size(), text.rows.size());
  for (std::size_t i = 0; i < json.rows.size(); ++i) {
    EXPECT_EQ(json.rows[i].bytes, text.rows[i].bytes);
    EXPECT_DOUBLE_EQ(json.rows[i].time_us, text.rows[i].time_us);
  }
  EXPECT_THROW(parse_nccl_tests_json("{\"results\": [{\"size\": 8}]}", "j"), FormatError);
  EXPECT_THROW(parse_nccl_tests_json("{\"results\": [", "j"), FormatError);
}
