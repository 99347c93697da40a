// Executor support that needs no GPU: a simulation's inputs read back from its summary.json lower the same graph;
// measurements.json round-trips; measured compute durations re-time the predicted graph (an oracle on a
// compute-only plan) and per-rank peaks are the measured ones; measurements of another plan are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "sim/model/run_config.hpp"
#include "sim/simulate.hpp"
#include "traces/error.hpp"
#include "traces/kineto_import.hpp"
#include "validate/compare/measured_timeline.hpp"
#include "validate/compare/measurements.hpp"

using namespace dtsim;
using namespace dtsim::sim;

namespace {

struct Scenario {
  TransformerSpec model = model_preset("gpt3-1.3b");
  ClusterSpec cluster;
  ParallelPlan plan;
  Calibration cal = default_calibration("h100-sxm5-80gb");
  SimOptions opt;
  Scenario(int tp, int pp, const std::string& cl) : cluster(load_cluster(cl)) {
    model.num_layers = 4;
    plan.tp = tp;
    plan.pp = pp;
    plan.dp = 1;
    plan.micro_batch_size = 1;
    plan.global_batch_size = 4;
    opt.network = NetworkMode::ANALYTIC;  // no SimGrid: several simulations in one test process
  }
  Inputs inputs() const { return {&model, &cluster, &plan, &cal, &opt}; }
  nlohmann::json summary() const {
    const auto s = simulate(inputs());
    return summary_json(inputs(), s.lowered, s.engine, s.report);
  }
};

/// Measurements that give every compute task of the graph `scale` times its predicted duration.
exec::Measurements scaled(const Lowered& low, double scale, double peak_bytes) {
  exec::Measurements m;
  m.device_name = "test";
  m.iterations = 2;
  for (std::size_t si = 0; si < low.ranks.size(); ++si)
    m.ranks.push_back(
        {static_cast<int>(si), low.ranks[si].global_rank, true, "", {0.1, 0.1}, 1e9, 2e9, 3e9, peak_bytes, 4e8});
  for (std::int32_t i = 0; i < static_cast<std::int32_t>(low.graph.size()); ++i)
    if (low.graph.tasks()[i].kind == TaskKind::COMPUTE) {
      const double d = scale * low.graph.tasks()[i].duration_s;
      m.tasks.push_back({i, {d, d}});
    }
  return m;
}

}  // namespace

TEST(RunConfig, SummaryRoundTripLowersTheSameGraph) {
  for (auto [tp, pp] : {std::pair{2, 2}, std::pair{1, 1}}) {
    Scenario r(tp, pp, "dgx-h100:" + std::to_string(tp * pp));
    const auto j = r.summary();
    const RunConfig rc = run_config_from_summary(j, "summary");
    const Inputs in{&rc.model, &rc.cluster, &rc.plan, &rc.calibration, &rc.options};
    const auto again = simulate(in);
    EXPECT_EQ(summary_json(in, again.lowered, again.engine, again.report).dump(), j.dump());
  }
}

TEST(RunConfig, MissingConfigIsAOneLineError) {
  try {
    run_config_from_summary(nlohmann::json{{"results", {}}}, "x/summary.json");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("x/summary.json: missing field 'config'"), std::string::npos) << e.what();
  }
}

TEST(Measurements, JsonRoundTripAndBadFiles) {
  Scenario r(2, 2, "dgx-h100:4");
  const auto low = lower(r.model, r.cluster, r.plan, r.cal, r.opt);
  const auto m = scaled(low, 1.5, 7e9);
  const auto j = exec::to_json(m);
  EXPECT_EQ(exec::to_json(exec::measurements_from_json(j, "m")).dump(), j.dump());
  auto bad = j;
  bad["schema"] = "something-else";
  EXPECT_THROW(exec::measurements_from_json(bad, "m"), FormatError);
  bad = j;
  bad["tasks"][0]["duration_s"][0] = -1.0;
  EXPECT_THROW(exec::measurements_from_json(bad, "m"), FormatError);
  bad = j;
  bad["ranks"][0].erase("peak_memory_bytes");
  EXPECT_THROW(exec::measurements_from_json(bad, "m"), Error);
  EXPECT_EQ(exec::median({3, 1, 2}), 2);
  EXPECT_EQ(exec::median({4, 1, 2, 3}), 2.5);
}

// One rank, compute only, no host issue cost: the iteration is the chain of compute tasks, so scaling every
// measured duration by 1.25 scales the re-timed iteration by exactly 1.25; the peaks are the measured ones.
TEST(MeasuredTimeline, ComputeOnlyPlanScalesExactly) {
  Scenario r(1, 1, "dgx-h100:1");
  r.cal.host_issue_s = 0;
  r.cal.pin("host_issue_s");
  const auto pred = r.summary();
  const auto low = lower(r.model, r.cluster, r.plan, r.cal, r.opt);
  const RunConfig rc = run_config_from_summary(pred, "pred");
  const auto same = exec::measured_timeline(rc, scaled(low, 1.0, 5e9));
  EXPECT_DOUBLE_EQ(same.summary["results"]["iteration_time_s"].get<double>(),
                   pred["results"]["iteration_time_s"].get<double>());
  EXPECT_EQ(same.measured_tasks, same.compute_tasks);
  const auto slow = exec::measured_timeline(rc, scaled(low, 1.25, 5e9));
  EXPECT_NEAR(slow.summary["results"]["iteration_time_s"].get<double>(),
              1.25 * pred["results"]["iteration_time_s"].get<double>(), 1e-12);
  for (const auto& rk : slow.summary["ranks"]) {
    EXPECT_EQ(rk["peak_memory_bytes"].get<double>(), 5e9);
    EXPECT_EQ(rk["predicted_peak_memory_bytes"], pred["ranks"][0]["peak_memory_bytes"]);
  }
  EXPECT_EQ(slow.summary["measured"]["device"], "test");
}

// With communication, slower compute can only lengthen the iteration, and every rank standing for a measured
// representative (TP folding) gets that representative's peak.
TEST(MeasuredTimeline, FoldedRanksTakeTheirRepresentativesPeak) {
  Scenario r(2, 2, "dgx-h100:4");
  const auto pred = r.summary();
  const auto low = lower(r.model, r.cluster, r.plan, r.cal, r.opt);
  ASSERT_EQ(low.ranks.size(), 2u);  // TP folded
  const auto t = exec::measured_timeline(run_config_from_summary(pred, "pred"), scaled(low, 1.3, 6e9));
  EXPECT_GT(t.summary["results"]["iteration_time_s"].get<double>(), pred["results"]["iteration_time_s"].get<double>());
  EXPECT_EQ(t.summary["ranks"].size(), 4u);
  for (const auto& rk : t.summary["ranks"]) EXPECT_EQ(rk["peak_memory_bytes"].get<double>(), 6e9);
}

TEST(MeasuredTimeline, MeasurementsOfAnotherPlanAreRefused) {
  Scenario r(2, 2, "dgx-h100:4");
  const auto pred = r.summary();
  const auto low = lower(r.model, r.cluster, r.plan, r.cal, r.opt);
  auto m = scaled(low, 1.0, 1e9);
  std::int32_t flow = -1;
  for (std::int32_t i = 0; i < static_cast<std::int32_t>(low.graph.size()) && flow < 0; ++i)
    if (low.graph.tasks()[i].kind == TaskKind::FLOW) flow = i;
  ASSERT_GE(flow, 0);
  m.tasks.push_back({flow, {1e-3}});
  EXPECT_THROW(exec::measured_timeline(run_config_from_summary(pred, "pred"), m), FormatError);
  m.tasks.back().task = static_cast<int>(low.graph.size()) + 5;
  EXPECT_THROW(exec::measured_timeline(run_config_from_summary(pred, "pred"), m), FormatError);
}

// Real executor runs on an H100 SXM5 (tests/data/h100/exec, PROVENANCE.md): the committed measurements still
// align with today's lowering of the same plans (every compute task measured), and the shipped H100 preset
// predicts them within the bounds below. Measured when committed: iteration +1.75% (1.3B, one rank) and +3.74%
// (6.7B, TP2 PP2 ex-situ); peak memory -2.9% and -3.0% / -3.5% (the 2 GB reserved estimate vs 0.62 GB of
// context and cuBLAS measured). Bounds: about twice the observed error. A change that moves the H100 preset, the
// kernel model or the memory model past them must be justified against these measurements.
TEST(ExecutorH100, CommittedRunsAlignAndArePredicted) {
  struct Case {
    const char* file;
    TransformerSpec model;
    int tp, pp, mbs, gbs;
    double iteration_bound, memory_bound;
  };
  TransformerSpec m67 = model_preset("gpt3-1.3b");
  m67.name = "gpt3-6.7b";
  m67.num_layers = 32;
  m67.hidden = 4096;
  m67.heads = m67.kv_heads = 32;
  m67.ffn_hidden = 4 * 4096;
  m67.dtype = DType::BF16;
  TransformerSpec m13 = model_preset("gpt3-1.3b");
  const Case cases[] = {{"1.3b_single", m13, 1, 1, 2, 8, 0.04, 0.06}, {"6.7b_tp2pp2", m67, 2, 2, 1, 8, 0.08, 0.07}};
  for (const auto& c : cases) {
    Scenario r(c.tp, c.pp, "dgx-h100:" + std::to_string(c.tp * c.pp));
    r.model = c.model;
    r.plan.micro_batch_size = c.mbs;
    r.plan.global_batch_size = c.gbs;
    // The committed runs (2026-11-23) executed graphs lowered with the software values the H100 calibration held
    // then (before stacks were split off), without gradient clipping.
    r.cal.host_issue_s = 7.743e-05;
    r.cal.host_sync_each_pass = false;
    r.cal.host_collective_issue_s = 0;
    r.cal.p2p_overhead_s = 4.228e-07;
    r.cal.grad_clip = false;
    r.cal.gpu_speed_cv = 0;              // and without the wait for the slowest GPU (a task the graphs did not have)
    r.cal.pp_scatter_gather = "always";  // every pipeline transfer was then all-gathered over TP after its receive
    for (const auto& f : kSoftwareFields) r.cal.pin(f);
    const auto pred = r.summary();
    const auto meas = exec::load_measurements(std::string(DTSIM_SOURCE_DIR) + "/tests/data/h100/exec/" + c.file +
                                              ".measurements.json");
    EXPECT_EQ(meas.device_name, "NVIDIA H100 80GB HBM3");
    const auto t = exec::measured_timeline(run_config_from_summary(pred, c.file), meas);
    EXPECT_EQ(t.measured_tasks, t.compute_tasks) << c.file;
    const double pi = pred["results"]["iteration_time_s"], mi = t.summary["results"]["iteration_time_s"];
    std::printf("%s: iteration predicted %.4f s, measured (re-timed) %.4f s, %+.2f%%\n", c.file, pi, mi,
                100 * (mi / pi - 1));
    EXPECT_LT(std::fabs(mi / pi - 1), c.iteration_bound) << c.file;
    for (const auto& rk : t.summary["ranks"]) {
      const double pm = rk["predicted_peak_memory_bytes"], mm = rk["peak_memory_bytes"];
      EXPECT_LT(std::fabs(mm / pm - 1), c.memory_bound) << c.file << " rank " << rk["rank"];
    }
  }
}

// The executor names every compute task with an NVTX range ("task <id> <name> ..."), so our own CUPTI profiler's
// trace of an executor run (tests/data/h100/exec/small.profile.json.gz, recorded on the H100 with
// CUDA_INJECTION64_PATH=libdtsim_cupti.so) carries the task timeline too: the GPU ranges' durations agree with the
// executor's CUDA-event durations of the same run: the GPU range (first kernel start to last kernel end) is
// shorter than the event pair by the first kernel's dispatch gap only (measured 2.4-8.5 us, median 3.1 us).
TEST(ExecutorH100, ProfilerTraceOfARunAgreesWithItsEvents) {
  const std::string dir = std::string(DTSIM_SOURCE_DIR) + "/tests/data/h100/exec/";
  const auto m = exec::load_measurements(dir + "small.profiled.measurements.json");
  const auto trace = import_kineto(dir + "small.profile.json.gz");
  std::map<int, std::vector<double>> ranges;
  for (const auto& e : trace.events)
    if (e.kind == TraceEventKind::GPU_ANNOTATION && e.name.rfind("task ", 0) == 0)
      ranges[std::stoi(e.name.substr(5))].push_back(static_cast<double>(e.dur_ns) * 1e-9);
  std::size_t compared = 0;
  for (const auto& t : m.tasks) {
    ASSERT_TRUE(ranges.count(t.task)) << "task " << t.task << " has no NVTX range in the profile";
    // The profile covers warm-up and timed iterations; the executor keeps the timed ones.
    EXPECT_EQ(ranges[t.task].size(), static_cast<std::size_t>(m.warmup + m.iterations)) << t.task;
    const double ev = exec::median(t.duration_s);
    const auto& r = ranges[t.task];
    const double prof = exec::median(std::vector<double>(r.end() - m.iterations, r.end()));
    EXPECT_GT(ev - prof, 0.0) << "task " << t.task;
    EXPECT_LT(ev - prof, 10e-6) << "task " << t.task;
    ++compared;
  }
  EXPECT_EQ(compared, m.tasks.size());
  EXPECT_EQ(compared, 94u);
}
