// Host issue time per launch from a trace's CPU side (validate/calibrate/host_issue.hpp): the closed form on a
// synthetic trace (nested operators counted once, waits for the GPU taken out, the issuing thread chosen by its
// launches), the reasons a trace is not usable, and the development value kEagerHostIssueS measured again on the
// real traces under DTSIM_SHARED_DIR/traces (skipped when absent), and `calibrate compute` reporting it as a stack
// value without setting it in the hardware calibration.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "dtsim/validate.hpp"
#include "traces/error.hpp"
#include "traces/kineto_import.hpp"
#include "traces/stack_profile.hpp"
#include "validate/calibrate/host_issue.hpp"

#ifndef DTSIM_SOURCE_DIR
#define DTSIM_SOURCE_DIR "."
#endif
#ifndef DTSIM_SHARED_DIR
#define DTSIM_SHARED_DIR "../shared"
#endif

using namespace dtsim;
namespace fs = std::filesystem;

namespace {

TraceEvent event(TraceEventKind kind, const std::string& name, std::int64_t start_ns, std::int64_t dur_ns,
                 std::int64_t tid = 1, std::int64_t correlation = -1) {
  TraceEvent e;
  e.kind = kind;
  e.name = name;
  e.start_ns = start_ns;
  e.dur_ns = dur_ns;
  e.pid = 7;
  e.tid = tid;
  e.correlation = correlation;
  return e;
}

/// Thread 1 issues `n` kernel launches inside operators; thread 2 issues one. Thread 1's operators: [0, 100 us)
/// holding a nested operator [10, 30 us) (counted once), and [200, 260 us) holding a .item() copy whose GPU copy is
/// device-to-host, its call lasting 40 us, and a cudaStreamSynchronize of 5 us outside every operator (not busy).
ImportedTrace synthetic(std::size_t n) {
  ImportedTrace t;
  t.events.push_back(event(TraceEventKind::CPU_OP, "aten::linear", 0, 100'000));
  t.events.push_back(event(TraceEventKind::CPU_OP, "aten::addmm", 10'000, 20'000));
  t.events.push_back(event(TraceEventKind::CPU_OP, "aten::item", 200'000, 60'000));
  t.events.push_back(event(TraceEventKind::RUNTIME, "cudaMemcpyAsync", 210'000, 40'000, 1, 99));
  t.events.push_back(event(TraceEventKind::MEMCPY, "Memcpy DtoH (Device -> Pageable)", 245'000, 2'000, 1, 99));
  t.events.push_back(event(TraceEventKind::RUNTIME, "cudaStreamSynchronize", 300'000, 5'000));
  for (std::size_t i = 0; i + 1 < n; ++i)
    t.events.push_back(event(TraceEventKind::RUNTIME, "cudaLaunchKernel", 11'000, 3'000, 1, static_cast<int>(i)));
  t.events.push_back(event(TraceEventKind::RUNTIME, "cudaLaunchKernel", 0, 3'000, 2, 1000));
  t.events.push_back(event(TraceEventKind::KERNEL, "gemm", 20'000, 80'000));
  return t;
}

}  // namespace

TEST(HostIssue, BusyTimeOutsideTheWaitsPerLaunch) {
  const std::size_t launches = 2000;  // n - 1 kernel launches and the copy
  const auto m = sim::measure_host_issue(synthetic(launches), "synthetic");
  ASSERT_TRUE(m.usable) << m.why_not;
  EXPECT_EQ(m.tid, 1);
  EXPECT_EQ(m.launches, launches);
  EXPECT_NEAR(m.busy_s, 160e-6, 1e-12);    // [0, 100) and [200, 260) us
  EXPECT_NEAR(m.blocked_s, 40e-6, 1e-12);  // the device-to-host copy's call; the synchronize is outside ops
  EXPECT_NEAR(m.host_issue_s, 120e-6 / launches, 1e-15);
  // The GPU: one kernel of 80 us and a copy of 2 us over a span from 20 us to 247 us.
  EXPECT_NEAR(m.gpu_busy_fraction, 82.0 / 227.0, 1e-12);
  EXPECT_NE(sim::host_issue_text({m}).find("2000 launches on thread 7/1"), std::string::npos);
}

TEST(HostIssue, TooFewLaunchesOrNoneAreNotMeasured) {
  const auto few = sim::measure_host_issue(synthetic(10), "few");
  EXPECT_FALSE(few.usable);
  EXPECT_NE(few.why_not.find("10 launches"), std::string::npos);
  EXPECT_EQ(sim::median_host_issue_s({few}), 0.0);
  const auto none = sim::measure_host_issue(ImportedTrace{}, "empty");
  EXPECT_FALSE(none.usable);
  EXPECT_NE(sim::host_issue_text({none}).find("not measured (no launch call"), std::string::npos);
}

TEST(HostIssue, MedianOfTheUsableOnes) {
  std::vector<sim::HostIssueMeasurement> v(4);
  const double values[] = {30e-6, 90e-6, 60e-6, 1.0};
  for (int i = 0; i < 4; ++i) v[i].host_issue_s = values[i], v[i].usable = i < 3;
  EXPECT_DOUBLE_EQ(sim::median_host_issue_s(v), 60e-6);
  v[3].usable = true;
  EXPECT_DOUBLE_EQ(sim::median_host_issue_s(v), 75e-6);
}

// kEagerHostIssueS is what the development traces measure: every real single-rank training trace under
// ../shared/traces with at least kMinHostLaunches launches on its issuing thread.
TEST(HostIssue, TheEagerEstimateIsTheDevelopmentTracesMedian) {
  const std::string hta = std::string(DTSIM_SHARED_DIR) + "/traces/HolisticTraceAnalysis/tests/data/";
  const std::string param = std::string(DTSIM_SHARED_DIR) + "/traces/param/et_replay/tests/inputs/";
  const std::vector<std::string> paths = {hta + "negative_queue_length_values_check/rank0.json.gz",
                                          hta + "trace_diff/control/control.json.gz",
                                          hta + "trace_diff/test/test.json.gz",
                                          hta + "df_index_resolver/df_index_resolver.json.gz",
                                          hta + "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
                                          hta + "nccl_parser_config/nccl_data.json.gz",
                                          param + "resnet_kineto.json.gz",
                                          param + "linear_kineto.json.gz"};
  std::vector<sim::HostIssueMeasurement> ms;
  for (const auto& p : paths) {
    if (!fs::exists(p)) GTEST_SKIP() << "shared trace absent: " << p;
    ms.push_back(sim::measure_host_issue(import_kineto(p), p));
    EXPECT_TRUE(ms.back().usable) << p << ": " << ms.back().why_not;
    EXPECT_GT(ms.back().host_issue_s, 20e-6) << p;
    EXPECT_LT(ms.back().host_issue_s, 150e-6) << p;
  }
  EXPECT_NEAR(sim::median_host_issue_s(ms), sim::kEagerHostIssueS, 0.5e-6) << sim::host_issue_text(ms);
}

TEST(HostIssue, CalibrateComputeReportsItAndLeavesTheCalibrationsHostValue) {
  const std::string path =
      std::string(DTSIM_SHARED_DIR) + "/traces/HolisticTraceAnalysis/tests/data/trace_diff/control/control.json.gz";
  if (!fs::exists(path)) GTEST_SKIP() << "shared trace absent: " << path;
  CalibrateComputeRequest req;
  req.traces = {path};
  const auto r = calibrate_compute(req);
  const auto m = sim::measure_host_issue(import_kineto(path), "control.json.gz");
  ASSERT_TRUE(m.usable);
  EXPECT_DOUBLE_EQ(r.host_issue_s, m.host_issue_s);
  EXPECT_EQ(r.calibration.host_issue_s, default_calibration("a100-sxm4-80gb").host_issue_s);
  EXPECT_NE(r.text.find("host issue: control.json.gz: 6126 launches"), std::string::npos) << r.text;
  ASSERT_TRUE(r.calibration.provenance.contains("host_issue"));
  EXPECT_DOUBLE_EQ(r.calibration.provenance["host_issue"]["median_s"].get<double>(), m.host_issue_s);
  // stack.json: the default stack with the measured value, fitted on the trace; the rest of the profile as shipped.
  const auto file = std::find_if(r.files.begin(), r.files.end(), [](const auto& f) { return f.first == "stack.json"; });
  ASSERT_NE(file, r.files.end());
  const StackProfile written = stack_profile_from_json(nlohmann::json::parse(file->second), "stack.json");
  const StackProfile shipped = stack_profile(kDefaultStack);
  EXPECT_EQ(written.name, shipped.name);
  EXPECT_DOUBLE_EQ(written.host_issue_s, m.host_issue_s);
  EXPECT_EQ(written.fitted_on, std::vector<std::string>{"control.json.gz"});
  EXPECT_EQ(written.p2p_overhead_s, shipped.p2p_overhead_s);
  EXPECT_EQ(written.host_collective_issue_s, shipped.host_collective_issue_s);
  // Another stack when asked; none without a measurement (a GEMM sweep only), and --stack is then refused.
  req.stack = "torchtitan";
  const auto t = calibrate_compute(req);
  const auto tf = std::find_if(t.files.begin(), t.files.end(), [](const auto& f) { return f.first == "stack.json"; });
  ASSERT_NE(tf, t.files.end());
  EXPECT_EQ(stack_profile_from_json(nlohmann::json::parse(tf->second), "stack.json").name, "torchtitan");
}

TEST(HostIssue, NoStackFileWithoutATraceAndStackNeedsOne) {
  CalibrateComputeRequest req;
  req.gemm_csvs = {std::string(DTSIM_SOURCE_DIR) + "/tests/data/h100/gemm_small.csv"};
  req.gpu = "h100-sxm5-80gb";
  const auto r = calibrate_compute(req);
  EXPECT_EQ(r.host_issue_s, 0.0);
  for (const auto& f : r.files) EXPECT_NE(f.first, "stack.json");
  req.stack = "torchtitan";
  EXPECT_THROW(calibrate_compute(req), ConfigError);
}
