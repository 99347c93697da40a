// The host's kernel issue as release times (issue "Scale"). When the host never waits for the device, each rank's
// issue work is a chain from t = 0 that nothing else delays, so the lowering knows when each piece ends and gives
// the gated task that time as its release instead of a DELAY task and two edges. The schedule must be the same: every
// case here is lowered both ways (SimOptions::host_issue_tasks) and every task of the graph without host tasks must
// start and end when its twin does in the graph with them, on the max-min and analytic engines (and the iteration
// time on SimGrid); every host span must match its DELAY task.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sim/simulate.hpp"
#include "studies/multi_job.hpp"
#include "tests/support/sim_fixture.hpp"

namespace dtsim {
namespace {
using namespace dtsim::sim;

struct Case {
  const char* name;
  int tp = 2, pp = 2, dp = 2;
  double host_issue_s = -1;  // -1: the preset's
  bool cuda_graphs = false, interference = true;
};

Simulation run(const Case& k, bool host_tasks, FlowEngine engine, NetworkMode network, Lowered* graph = nullptr) {
  static const TransformerSpec model = [] {
    TransformerSpec m = model_preset("gpt3-1.3b");
    m.num_layers = 4;
    return m;
  }();
  const ClusterSpec cluster = load_cluster("dgx-a100:" + std::to_string(k.tp * k.pp * k.dp));
  ParallelPlan plan;
  plan.tp = k.tp;
  plan.pp = k.pp;
  plan.dp = k.dp;
  plan.micro_batch_size = 1;
  plan.global_batch_size = 4 * k.dp;
  plan.cuda_graphs = k.cuda_graphs;
  Calibration cal = default_calibration("a100-sxm4-80gb");
  if (k.host_issue_s >= 0) {
    cal.host_issue_s = k.host_issue_s;
    cal.pin("host_issue_s");
  }
  SimOptions opt;
  opt.fold = FoldMode::NONE;
  opt.engine = engine;
  opt.network = network;
  opt.interference = k.interference;
  opt.host_issue_tasks = host_tasks;
  Inputs in{&model, &cluster, &plan, &cal, &opt};
  if (graph) *graph = lower(model, cluster, plan, cal, opt);  // with its release times (simulate frees them)
  return simulate(in);
}

const Case kCases[] = {
    {"default calibration, two nodes", 2, 2, 4},
    {"host-bound (200 us per kernel)", 2, 2, 2, 200e-6},
    {"no interference, two nodes", 1, 2, 8, -1, false, false},
    {"CUDA graphs", 2, 1, 4, -1, true},
};

void expect_same_schedule(const Case& k, FlowEngine engine, NetworkMode network) {
  SCOPED_TRACE(k.name);
  const Simulation spans = run(k, false, engine, network), tasks = run(k, true, engine, network);
  const auto& a = spans.lowered.graph.tasks();
  const auto& b = tasks.lowered.graph.tasks();
  ASSERT_GT(spans.lowered.graph.host_spans().size(), 0u);
  EXPECT_TRUE(tasks.lowered.graph.host_spans().empty());
  EXPECT_FALSE(tasks.lowered.graph.has_releases());
  const double T = tasks.report.iteration_time_s, tol = 1e-12 * T;
  EXPECT_NEAR(spans.report.iteration_time_s, T, tol);
  // Tasks in creation order, host tasks aside: the same tasks, at the same times.
  std::size_t j = 0, host = 0;
  std::vector<double> clock(spans.lowered.ranks.size(), 0.0);
  const auto& hs = spans.lowered.graph.host_spans();
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (b[i].stream == Stream::HOST) {
      ASSERT_LT(host, hs.size());
      const HostSpan& h = hs[host++];
      EXPECT_EQ(h.rank, b[i].rank);
      EXPECT_EQ(spans.lowered.graph.names()[h.name], tasks.lowered.graph.names()[b[i].name]);
      EXPECT_NEAR(clock[h.rank], tasks.engine.start_s[i], tol) << "host span " << host - 1;
      EXPECT_NEAR(h.end_s, tasks.engine.end_s[i], tol) << "host span " << host - 1;
      clock[h.rank] = h.end_s;
      continue;
    }
    ASSERT_LT(j, a.size());
    EXPECT_EQ(a[j].kind, b[i].kind);
    EXPECT_EQ(a[j].name, b[i].name);
    EXPECT_NEAR(spans.engine.start_s[j], tasks.engine.start_s[i], tol) << "task " << j;
    EXPECT_NEAR(spans.engine.end_s[j], tasks.engine.end_s[i], tol) << "task " << j;
    ++j;
  }
  EXPECT_EQ(j, a.size());
  EXPECT_EQ(host, hs.size());
  EXPECT_EQ(spans.report.ranks.size(), tasks.report.ranks.size());
  for (std::size_t r = 0; r < spans.report.ranks.size(); ++r) {
    EXPECT_NEAR(spans.report.ranks[r].peak_bytes, tasks.report.ranks[r].peak_bytes, 1.0);
    EXPECT_NEAR(spans.report.ranks[r].peak_time_s, tasks.report.ranks[r].peak_time_s, tol);
  }
}

TEST(HostRelease, MaxMinSchedulesAreTheSame) {
  for (const Case& k : kCases) expect_same_schedule(k, FlowEngine::MAXMIN, NetworkMode::FLOW);
}

TEST(HostRelease, AnalyticSchedulesAreTheSame) {
  for (const Case& k : kCases) expect_same_schedule(k, FlowEngine::AUTO, NetworkMode::ANALYTIC);
}

TEST(HostRelease, SimgridIterationTimesAreTheSame) {
  for (const Case& k : kCases) {
    const double spans = testing::in_child(
        [&] { return run(k, false, FlowEngine::SIMGRID, NetworkMode::FLOW).report.iteration_time_s; });
    const double tasks =
        testing::in_child([&] { return run(k, true, FlowEngine::SIMGRID, NetworkMode::FLOW).report.iteration_time_s; });
    const double maxmin = run(k, false, FlowEngine::MAXMIN, NetworkMode::FLOW).report.iteration_time_s;
    EXPECT_NEAR(spans, tasks, 1e-9 * tasks) << k.name;
    EXPECT_NEAR(spans, maxmin, 1e-6 * maxmin) << k.name;  // the two flow engines agree (as elsewhere)
  }
}

// The release times matter: a host slower than the GPU sets the pace. With 200 us per kernel the iteration is
// longer than without host issue, and at least the host's own issue time of the busiest rank.
TEST(HostRelease, AHostBoundRunIsPacedByTheHost) {
  Case bound = kCases[1], free = kCases[1];
  free.host_issue_s = 0;
  Lowered low;
  const Simulation b = run(bound, false, FlowEngine::MAXMIN, NetworkMode::FLOW, &low);
  const Simulation f = run(free, false, FlowEngine::MAXMIN, NetworkMode::FLOW);
  std::vector<double> host_end(b.lowered.ranks.size(), 0.0);
  for (const auto& h : b.lowered.graph.host_spans()) host_end[h.rank] = h.end_s;
  double busiest = 0;
  for (double e : host_end) busiest = std::max(busiest, e);
  EXPECT_GT(b.report.iteration_time_s, 1.2 * f.report.iteration_time_s);
  EXPECT_GE(b.report.iteration_time_s, busiest);
  // Every gated task starts at or after its release.
  const auto& g = low.graph;
  ASSERT_EQ(g.size(), b.lowered.graph.size());
  std::size_t released = 0;
  for (std::int32_t i = 0; i < static_cast<std::int32_t>(g.size()); ++i)
    if (g.release_s(i) > 0) {
      ++released;
      EXPECT_GE(b.engine.start_s[i], g.release_s(i)) << "task " << i;
    }
  EXPECT_GT(released, 0u);
}

// Several jobs on one cluster: each job's releases and host spans carry over to the combined graph (host-bound, so
// that a combined run without them would be faster than each job alone).
TEST(HostRelease, MultiJobKeepsEachJobsReleases) {
  const ClusterSpec cluster = load_cluster("dgx-a100:16");
  Calibration cal = default_calibration("a100-sxm4-80gb");
  cal.host_issue_s = 200e-6;
  cal.pin("host_issue_s");
  std::vector<sim::Job> jobs(2);
  for (int k = 0; k < 2; ++k) {
    jobs[k].name = "job" + std::to_string(k);
    jobs[k].model = model_preset("gpt3-1.3b");
    jobs[k].model.num_layers = 4;
    jobs[k].plan.tp = 2;
    jobs[k].plan.dp = 4;
    jobs[k].plan.micro_batch_size = 1;
    jobs[k].plan.global_batch_size = 16;
    jobs[k].first_gpu = 8 * k;
  }
  SimOptions opt;
  opt.network = NetworkMode::ANALYTIC;
  const auto out = sim::simulate_jobs(jobs, cluster, cal, opt, true);
  ASSERT_EQ(out.jobs.size(), 2u);
  for (const auto& jr : out.jobs) {
    // Alone on the cluster's analytic network, each job's combined-run iteration equals its own run's.
    EXPECT_NEAR(jr.report.iteration_time_s, jr.alone_iteration_s, 1e-12 * jr.alone_iteration_s);
    EXPECT_GT(jr.lowered.graph.host_spans().size(), 0u);
  }
}

}  // namespace
}  // namespace dtsim
