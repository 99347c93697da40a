// Folding with multiplicity (issue "Scale"): folded-away ranks share links with their representative (a leaf's or
// pod's uplink, a NIC of several GPUs). Each simulated flow then stands for k identical real flows and the link runs
// at capacity / k, which max-min sharing makes exact. Every case here is run folded and unfolded and must agree on
// the iteration time and on every link both runs have (bytes, busy time, peak utilisation), on dtsim's max-min engine,
// on SimGrid and on the analytic engine.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "sim/simulate.hpp"
#include "studies/multi_job.hpp"
#include "tests/support/sim_fixture.hpp"

namespace dtsim {
namespace {
using namespace dtsim::sim;

struct Case {
  std::string cluster;
  int nics_per_node = 0;  // 0: the preset's
  int tp = 1, pp = 1, dp = 1;
};

ClusterSpec cluster_of(const Case& k) {
  ClusterSpec c = load_cluster(k.cluster);
  if (k.nics_per_node > 0) c.inter.nics_per_node = k.nics_per_node;
  c.validate();
  return c;
}

Simulation run(const Case& k, FoldMode fold, FlowEngine engine, NetworkMode network = NetworkMode::FLOW) {
  static const TransformerSpec model = model_preset("gpt3-1.3b");
  const ClusterSpec cluster = cluster_of(k);
  ParallelPlan plan;
  plan.tp = k.tp;
  plan.pp = k.pp;
  plan.dp = k.dp;
  plan.micro_batch_size = 1;
  plan.global_batch_size = 4 * k.dp;
  const Calibration cal = default_calibration("a100-sxm4-80gb");
  SimOptions opt;
  opt.fold = fold;
  opt.engine = engine;
  opt.network = network;
  Inputs in{&model, &cluster, &plan, &cal, &opt};
  return simulate(in);
}

// Folded and unfolded runs agree; returns the largest link multiplicity of the folded run.
int expect_agreement(const Case& k, FlowEngine engine, NetworkMode network = NetworkMode::FLOW) {
  const Simulation folded = run(k, FoldMode::AUTO, engine, network);
  const Simulation unfolded = run(k, FoldMode::NONE, engine, network);
  EXPECT_LT(folded.lowered.ranks.size(), unfolded.lowered.ranks.size()) << folded.lowered.fold_reason;
  const double t = unfolded.report.iteration_time_s;
  EXPECT_NEAR(folded.report.iteration_time_s, t, t * 1e-9) << k.cluster;
  std::map<std::string, const LinkStats*> real;
  for (const auto& l : unfolded.engine.link_stats) real[l.name] = &l;
  int widest = 1;
  for (const auto& l : folded.engine.link_stats) {
    widest = std::max(widest, l.multiplicity);
    const auto it = real.find(l.name);
    if (it == real.end()) {
      ADD_FAILURE() << l.name << " exists only folded";
      continue;
    }
    const LinkStats& u = *it->second;
    EXPECT_DOUBLE_EQ(l.bandwidth_Bps, u.bandwidth_Bps) << l.name;
    EXPECT_NEAR(l.bytes, u.bytes, 1e-9 * std::max(1.0, u.bytes)) << l.name;
    EXPECT_NEAR(l.busy_s, u.busy_s, 1e-9 * t) << l.name;
    EXPECT_NEAR(l.peak_utilization, u.peak_utilization, 1e-9) << l.name;
  }
  return widest;
}

// 8 nodes of 8 GPUs, 2 per leaf, 4:1: each stage's 4 DP copies span two leaves, so DP does not fold; TP folds with
// k = 8 on the uplinks.
const Case kFatTree{"dgx-a100:64:fat-tree:2:4", 0, 8, 2, 4};

TEST(FoldMultiplicity, OversubscribedLeafUplinks) {
  const Simulation s = run(kFatTree, FoldMode::AUTO, FlowEngine::MAXMIN);
  EXPECT_TRUE(s.lowered.fold_tp);
  EXPECT_FALSE(s.lowered.fold_dp);
  EXPECT_NE(s.lowered.fold_reason.find("k = 8"), std::string::npos) << s.lowered.fold_reason;
  for (const auto& r : s.lowered.ranks) EXPECT_EQ(r.fabric_multiplicity, 8);
  EXPECT_EQ(expect_agreement(kFatTree, FlowEngine::MAXMIN), 8);
}

TEST(FoldMultiplicity, UplinksAreContendedInTheReport) {
  // At 4:1 the uplinks limit the pipeline transfers: the folded run must show them saturated, as the unfolded does.
  const Simulation s = run(kFatTree, FoldMode::AUTO, FlowEngine::MAXMIN);
  double peak = 0;
  for (const auto& l : s.engine.link_stats)
    if (l.name.rfind("leaf-up", 0) == 0) peak = std::max(peak, l.peak_utilization);
  EXPECT_NEAR(peak, 1.0, 1e-9);
}

TEST(FoldMultiplicity, ThreeLevelFatTreePodUplinks) {
  // 8 nodes, 2 per leaf, 2 leaves per pod: stages in different pods cross leaf and pod uplinks. Each stage's two
  // DP copies share a leaf: tp and dp fold, k = 16.
  EXPECT_EQ(expect_agreement({"dgx-a100:64:fat-tree:2:4:2:2", 0, 8, 4, 2}, FlowEngine::MAXMIN), 16);
}

TEST(FoldMultiplicity, DataParallelCopiesUnderOneLeafFoldToo) {
  // 4 nodes per leaf: each stage's 4 DP copies (4 nodes) sit under one leaf, so tp and dp fold together and each
  // simulated flow stands for 32 on the uplinks.
  const Case k{"dgx-a100:64:fat-tree:4:4", 0, 8, 2, 4};
  const Simulation s = run(k, FoldMode::AUTO, FlowEngine::MAXMIN);
  EXPECT_TRUE(s.lowered.fold_tp && s.lowered.fold_dp) << s.lowered.fold_reason;
  EXPECT_EQ(expect_agreement(k, FlowEngine::MAXMIN), 32);
}

TEST(FoldMultiplicity, SharedNics) {
  // Two GPUs per NIC: each stage (one node) folds to one rank, whose NIC carries its TP pair's flows (k = 2).
  EXPECT_EQ(expect_agreement({"dgx-a100:16", 4, 2, 2, 4}, FlowEngine::MAXMIN), 2);
  // One node per leaf, 3:1: each stage (one node) folds to one rank: k = 2 on its NIC, 8 on its uplinks.
  const Case k{"dgx-a100:16:fat-tree:1:3", 4, 2, 2, 4};
  EXPECT_EQ(expect_agreement(k, FlowEngine::MAXMIN), 8);
  for (const auto& r : run(k, FoldMode::AUTO, FlowEngine::MAXMIN).lowered.ranks) {
    EXPECT_EQ(r.nic_multiplicity, 2);
    EXPECT_EQ(r.fabric_multiplicity, 8);
  }
}

TEST(FoldMultiplicity, DataParallelRingsAcrossNodesFold) {
  // tp 2, dp 8 per stage: each DP ring holds 4 GPUs on each of 2 nodes. Spread as NCCL's channels run it
  // (Lowerer::spread_ring), every member sends to its node-local successor and to its counterpart on the other node,
  // so all members see the same paths and dp folds (before, the ring crossed the nodes at one member: not folded).
  for (int nics : {0, 4}) {  // one NIC per GPU; two GPUs per NIC
    const Case k{"dgx-a100:32", nics, 2, 2, 8};
    const Simulation s = run(k, FoldMode::AUTO, FlowEngine::MAXMIN);
    EXPECT_TRUE(s.lowered.fold_tp && s.lowered.fold_dp) << s.lowered.fold_reason;
    expect_agreement(k, FlowEngine::MAXMIN);
    expect_agreement(k, FlowEngine::AUTO, NetworkMode::ANALYTIC);
  }
}

TEST(FoldMultiplicity, AnalyticEngineSeesRealCapacities) {
  // Contention-free: a flow's copies do not slow it down, and the peak loads count every copy.
  EXPECT_EQ(expect_agreement(kFatTree, FlowEngine::AUTO, NetworkMode::ANALYTIC), 8);
  EXPECT_EQ(expect_agreement({"dgx-a100:16", 4, 2, 2, 4}, FlowEngine::AUTO, NetworkMode::ANALYTIC), 2);
}

TEST(FoldMultiplicity, SimGridAgrees) {
  // SimGrid runs once per process: each run in a child.
  auto time_of = [](FoldMode fold) {
    return testing::in_child([fold] { return run(kFatTree, fold, FlowEngine::SIMGRID).report.iteration_time_s; });
  };
  const double folded = time_of(FoldMode::AUTO), unfolded = time_of(FoldMode::NONE);
  ASSERT_GT(unfolded, 0);
  EXPECT_NEAR(folded, unfolded, unfolded * 1e-9);
  EXPECT_NEAR(folded, run(kFatTree, FoldMode::AUTO, FlowEngine::MAXMIN).report.iteration_time_s, folded * 1e-9);
}

TEST(FoldMultiplicity, ClassesAcrossLeavesDoNotFold) {
  // One node per leaf: every DP copy is under its own leaf, and so is every stage; TP still folds (k = 8).
  const Case k{"dgx-a100:32:fat-tree:1:2", 0, 8, 2, 2};
  const Simulation s = run(k, FoldMode::AUTO, FlowEngine::MAXMIN);
  EXPECT_TRUE(s.lowered.fold_tp);
  EXPECT_FALSE(s.lowered.fold_dp);
  EXPECT_EQ(s.lowered.ranks.size(), 4u);
  EXPECT_EQ(expect_agreement(k, FlowEngine::MAXMIN), 8);
}

TEST(FoldMultiplicity, AFailedCheckLeavesNoMultiplicities) {
  // One GPU per node, two nodes per leaf; pp innermost: each DP pair's ring crosses the spine both ways, so every
  // rank's ring looks alike, but each DP class spans two leaves: no folding, and no multiplicity left behind by the
  // check (it once divided every link by 0).
  ClusterSpec c = testing::uniform_cluster(4, 1, 25e9, 2e-6);
  c.inter.topology = "fat-tree";
  c.inter.nodes_per_leaf = 2;
  c.inter.oversubscription = 2;
  c.validate();
  ParallelPlan plan;
  plan.pp = 2;
  plan.dp = 2;
  plan.global_batch_size = 4;
  plan.rank_order = {Axis::PP, Axis::DP, Axis::TP};
  const TransformerSpec model = testing::tiny_model(2);
  const Lowered low = lower(model, c, plan, default_calibration("a100-sxm4-80gb"), SimOptions{});
  EXPECT_FALSE(low.fold_tp || low.fold_dp) << low.fold_reason;
  for (const auto& r : low.ranks) {
    EXPECT_EQ(r.nic_multiplicity, 1);
    EXPECT_EQ(r.fabric_multiplicity, 1);
  }
}

TEST(FoldMultiplicity, OffWhenAsked) {
  // SimOptions::fold_shared_links = false: the old rule, nothing that shares an uplink folds.
  const TransformerSpec model = model_preset("gpt3-1.3b");
  const ClusterSpec cluster = cluster_of(kFatTree);
  ParallelPlan plan;
  plan.tp = kFatTree.tp;
  plan.pp = kFatTree.pp;
  plan.dp = kFatTree.dp;
  plan.global_batch_size = 16;
  SimOptions opt;
  opt.fold_shared_links = false;
  const Lowered low = lower(model, cluster, plan, default_calibration("a100-sxm4-80gb"), opt);
  EXPECT_FALSE(low.fold_tp || low.fold_dp);
  EXPECT_EQ(low.ranks.size(), 64u);
}

TEST(FoldMultiplicity, SeveralJobsDoNotFoldSharedLinks) {
  // Other jobs' traffic on the uplinks is unseen by each job's lowering: each job simulates every rank, and the
  // combined run equals the one with folding off.
  const ClusterSpec cluster = load_cluster("dgx-a100:64:fat-tree:2:4");
  std::vector<Job> jobs(2);
  jobs[0].name = "a";
  jobs[1].name = "b";
  for (int k = 0; k < 2; ++k) {
    jobs[k].model = model_preset("gpt3-1.3b");
    jobs[k].plan.tp = 8;
    jobs[k].plan.dp = 4;
    jobs[k].plan.global_batch_size = 16;
    jobs[k].first_gpu = 32 * k;
  }
  auto run_jobs = [&](FoldMode fold) {
    SimOptions opt;
    opt.fold = fold;
    opt.engine = FlowEngine::MAXMIN;
    opt.network = NetworkMode::ANALYTIC;  // the combined run: contention-free, so it runs in this process
    return simulate_jobs(jobs, cluster, default_calibration("a100-sxm4-80gb"), opt, false);
  };
  const MultiJobResult folded = run_jobs(FoldMode::AUTO), unfolded = run_jobs(FoldMode::NONE);
  for (std::size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(folded.jobs[k].lowered.ranks.size(), 32u) << folded.jobs[k].lowered.fold_reason;
    const double t = unfolded.jobs[k].report.iteration_time_s;
    EXPECT_NEAR(folded.jobs[k].report.iteration_time_s, t, 1e-9 * t);
  }
}

}  // namespace
}  // namespace dtsim
