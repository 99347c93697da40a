// Lowering unit tests: folding decisions, task-graph invariants and FLOP/memory conservation (no SimGrid run).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "sim/model/lowering.hpp"
#include "sim/model/sort_runs.hpp"
#include "strategies/schedule.hpp"

using namespace dtsim;
using namespace dtsim::sim;

namespace {
struct Scenario {
  TransformerSpec model;
  ClusterSpec cluster;
  ParallelPlan plan;
  Calibration cal;
  SimOptions opt;
  Lowered lower() const { return sim::lower(model, cluster, plan, cal, opt); }
};

Scenario gpt3_1024() {
  Scenario s{model_preset("gpt3-175b"), load_cluster("dgx-a100:1024"), {}, default_calibration("a100-sxm4-80gb"), {}};
  s.plan.tp = 8;
  s.plan.pp = 8;
  s.plan.dp = 16;
  s.plan.micro_batch_size = 1;
  s.plan.global_batch_size = 1536;
  return s;
}

Scenario small(int tp, int pp, int dp, const std::string& cluster) {
  Scenario s{model_preset("gpt3-1.3b"), load_cluster(cluster), {}, default_calibration("a100-sxm4-80gb"), {}};
  s.plan.tp = tp;
  s.plan.pp = pp;
  s.plan.dp = dp;
  s.plan.micro_batch_size = 2;
  s.plan.global_batch_size = 16 * dp;
  return s;
}
}  // namespace

TEST(Folding, Gpt3On1024FoldsTpAndDpToOneRankPerStage) {
  Lowered low = gpt3_1024().lower();
  EXPECT_TRUE(low.fold_tp);
  EXPECT_TRUE(low.fold_dp);
  ASSERT_EQ(low.ranks.size(), 8u);
  for (std::size_t s = 0; s < 8; ++s) {
    EXPECT_EQ(low.ranks[s].coord.pp, static_cast<int>(s));
    EXPECT_EQ(low.ranks[s].class_size, 128);
  }
  // Every global rank maps to the simulated rank of its stage.
  for (int r = 0; r < 1024; ++r) EXPECT_EQ(low.ranks[low.sim_index_of[r]].coord.pp, r / 128);
}

TEST(Folding, TpSpanningNodesIsNotFolded) {
  Scenario s = gpt3_1024();
  s.plan.tp = 16;  // TP ring mixes NVSwitch and NIC hops
  s.plan.dp = 8;
  s.plan.global_batch_size = 768;
  Lowered low = s.lower();
  EXPECT_FALSE(low.fold_tp);
  EXPECT_TRUE(low.fold_dp);
  EXPECT_EQ(low.ranks.size(), 16u * 8u);
}

TEST(Folding, SharedNicsFoldWithMultiplicity) {
  Scenario s = small(2, 2, 4, "dgx-a100:16");
  s.cluster.inter.nics_per_node = 4;  // two GPUs per NIC: each simulated flow stands for the NIC's two
  Lowered low = s.lower();
  EXPECT_TRUE(low.fold_tp);
  EXPECT_TRUE(low.fold_dp);
  ASSERT_EQ(low.ranks.size(), 2u);
  for (const auto& r : low.ranks) EXPECT_EQ(r.nic_multiplicity, 2);
  EXPECT_NE(low.fold_reason.find("shared NICs: k = 2"), std::string::npos) << low.fold_reason;
}

TEST(Folding, NoneSimulatesEveryRank) {
  Scenario s = small(2, 2, 4, "dgx-a100:16");
  s.opt.fold = FoldMode::NONE;
  Lowered low = s.lower();
  EXPECT_EQ(low.ranks.size(), 16u);
  for (int r = 0; r < 16; ++r) EXPECT_EQ(low.ranks[low.sim_index_of[r]].global_rank, r);
}

TEST(TaskGraph, ActivationMemoryIsReleasedOnEveryRank) {
  for (Recompute rc : {Recompute::NONE, Recompute::SELECTIVE, Recompute::FULL}) {
    Scenario s = small(2, 4, 2, "dgx-a100:16");
    s.plan.recompute = rc;
    s.opt.fold = FoldMode::NONE;
    Lowered low = s.lower();
    std::map<int, double> net;
    for (const auto& ev : low.graph.memory_events()) net[low.graph.tasks()[ev.task].rank] += ev.bytes;
    for (const auto& [rank, bytes] : net) EXPECT_NEAR(bytes, 0.0, 1.0) << "rank " << rank << " " << to_string(rc);
  }
}

TEST(TaskGraph, ComputeTasksPerRankMatchScheduleAndLayers) {
  Scenario s = small(1, 4, 1, "dgx-a100:4");
  s.plan.global_batch_size = 12;  // m = 6
  Lowered low = s.lower();
  const int m = s.plan.num_microbatches();
  auto passes = default_pass_costs(s.model, s.plan);
  auto count_compute = [](const std::vector<cost::Step>& v) {
    int n = 0;
    for (const auto& st : v) n += st.kind == cost::Step::Kind::COMPUTE;
    return n;
  };
  const int per_layer = count_compute(passes.layer.forward) + count_compute(passes.layer.backward);
  std::map<int, int> forward_tasks, total;
  for (const auto& t : low.graph.tasks())
    if (t.kind == TaskKind::COMPUTE) {
      total[t.rank]++;
      if (t.phase == Phase::FORWARD && t.layer >= 0) forward_tasks[t.rank]++;
    }
  const auto layers = s.plan.stage_layers(s.model.num_layers);
  for (int si = 0; si < 4; ++si) {
    int expected = m * layers[si] * per_layer + 2;  // + gradient-norm pass (the stack clips) and optimizer step
    if (si == 0) expected += m * (count_compute(passes.embedding.forward) + count_compute(passes.embedding.backward));
    if (si == 3) expected += m * (count_compute(passes.head.forward) + count_compute(passes.head.backward));
    EXPECT_EQ(total[si], expected) << "stage " << si;
    EXPECT_EQ(forward_tasks[si], m * layers[si] * count_compute(passes.layer.forward));
  }
}

TEST(TaskGraph, HardwareFlopsEqualModelFlopsWithoutRecompute) {
  Scenario s = small(2, 2, 2, "dgx-a100:8");
  Lowered low = s.lower();
  EXPECT_NEAR(low.hardware_flops_per_iteration, low.model_flops_per_iteration, low.model_flops_per_iteration * 1e-9);
}

TEST(TaskGraph, FullRecomputeAddsOneForwardOfTheLayers) {
  Scenario s = small(2, 2, 2, "dgx-a100:8");
  s.plan.recompute = Recompute::FULL;
  Lowered low = s.lower();
  const double layer_fwd = [&] {
    double f = 0;
    for (const auto& st : cost::layer_passes(s.model, {1, 1, false, Recompute::NONE}).forward) f += st.flops();
    return f;
  }();
  const double extra = layer_fwd * s.model.num_layers * s.plan.global_batch_size;
  EXPECT_NEAR(low.hardware_flops_per_iteration, low.model_flops_per_iteration + extra,
              low.model_flops_per_iteration * 1e-9);
}

TEST(TaskGraph, TensorParallelCollectivesPerLayer) {
  Scenario s = small(2, 1, 1, "dgx-a100:2");
  s.plan.global_batch_size = 2;  // one micro-batch
  s.opt.fold = FoldMode::NONE;
  s.opt.collective_mode = CollectiveMode::FLOW;
  Lowered low = s.lower();
  // Per rank: 2 all-reduces forward + 2 backward per layer, 1 for the embedding, 2 in the head
  // (loss statistics forward, input gradient backward); each is one flow per member in FLOW mode.
  int flows = 0;
  for (const auto& t : low.graph.tasks())
    if (t.kind == TaskKind::FLOW && t.rank == 0 && t.stream == Stream::TP) ++flows;
  EXPECT_EQ(flows, 4 * s.model.num_layers + 1 + 2);
}

// ---- Stage replication (RaNNC, DAPPLE): stage s runs on stage_replicas[s] devices splitting each micro-batch.

TEST(StageReplicas, RankLayoutIsTpThenReplicasThenStagesThenCopies) {
  ParallelPlan p;
  p.tp = 2;
  p.pp = 3;
  p.dp = 2;
  p.stage_replicas = {3, 1, 2};
  ASSERT_EQ(p.world_size(), 2 * 2 * 6);
  for (int r = 0; r < p.world_size(); ++r) EXPECT_EQ(p.rank_of(p.coord_of(r)), r);
  RankCoord c = p.coord_of(2 * (6 + 4) + 1);  // copy 1, device 4 of the copy = stage 2 replica 0, tp 1
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(c.pp, 2);
  EXPECT_EQ(c.rep, 0);
  EXPECT_EQ(c.tp, 1);
}

TEST(StageReplicas, ComputeIsSplitAcrossReplicas) {
  // Every sample is computed once: executed FLOPs equal the model FLOPs whatever the stage widths.
  Scenario s = small(1, 4, 1, "dgx-a100:8");
  s.plan.stage_replicas = {3, 2, 2, 1};
  s.plan.layers_per_stage = {9, 6, 6, 3};
  s.plan.micro_batch_size = 6;
  s.plan.global_batch_size = 24;
  s.plan.validate(s.model, s.cluster);
  Lowered low = s.lower();
  EXPECT_EQ(low.ranks.size(), 8u);
  EXPECT_NEAR(low.hardware_flops_per_iteration, low.model_flops_per_iteration, low.model_flops_per_iteration * 1e-9);
}

TEST(StageReplicas, SplitConcatTransfersCarryEachSampleOnce) {
  Scenario s = small(1, 2, 1, "dgx-a100:5");
  s.plan.stage_replicas = {3, 2};
  s.plan.micro_batch_size = 6;
  s.plan.global_batch_size = 6;  // one micro-batch
  s.plan.validate(s.model, s.cluster);
  Lowered low = s.lower();
  const double sample = static_cast<double>(s.model.seq_len) * s.model.hidden * 2;
  double fwd = 0, bwd = 0;
  std::map<std::pair<int, int>, double> pieces;  // (sender replica, receiver replica) -> bytes, forward
  for (const auto& t : low.graph.tasks()) {
    if (t.kind != TaskKind::FLOW || t.stream != Stream::PP) continue;
    (t.phase == Phase::FORWARD ? fwd : bwd) += t.bytes;
    if (t.phase == Phase::FORWARD) pieces[{low.ranks[t.rank].coord.rep, low.ranks[t.peer].coord.rep}] += t.bytes;
  }
  EXPECT_DOUBLE_EQ(fwd, 6 * sample);
  EXPECT_DOUBLE_EQ(bwd, 6 * sample);
  // Samples 0-1 | 2-3 | 4-5 on stage 0, 0-2 | 3-5 on stage 1.
  EXPECT_DOUBLE_EQ((pieces[{0, 0}]), 2 * sample);
  EXPECT_DOUBLE_EQ((pieces[{1, 0}]), 1 * sample);
  EXPECT_DOUBLE_EQ((pieces[{1, 1}]), 1 * sample);
  EXPECT_DOUBLE_EQ((pieces[{2, 1}]), 2 * sample);
  EXPECT_EQ(pieces.size(), 4u);
}

TEST(StageReplicas, GradientsAreSummedOverEachStagesReplicas) {
  Scenario s = small(1, 2, 1, "dgx-a100:4");
  s.plan.stage_replicas = {3, 1};
  s.plan.micro_batch_size = 3;
  s.plan.global_batch_size = 6;
  s.opt.collective_mode = CollectiveMode::FLOW;
  s.plan.validate(s.model, s.cluster);
  Lowered low = s.lower();
  std::map<int, int> grad_flows;  // stage -> gradient-bucket flows
  for (const auto& t : low.graph.tasks())
    if (t.kind == TaskKind::FLOW && t.phase == Phase::GRAD_SYNC && low.graph.names()[t.name].find("grad-bucket") == 0)
      grad_flows[low.ranks[t.rank].coord.pp]++;
  EXPECT_GT(grad_flows[0], 0);  // three replicas: a 3-member ring per bucket
  EXPECT_EQ(grad_flows[0] % 3, 0);
  EXPECT_EQ(grad_flows.count(1), 0u);  // one replica, one copy: nothing to sum
}

// ---- Explicit network graphs (routing with Boost.Graph).

#include "traces/routing.hpp"

TEST(GraphRouting, Dgx1UsesNvlinkWhereItExistsAndNeverTransitsAGpu) {
  ClusterSpec c = dgx1_v100(1);
  GraphRouting r(c.graph);
  auto name = [&](int directed) {
    const auto& l = c.graph.links[directed / 2];
    const auto& a = c.graph.vertices[directed % 2 == 0 ? l.a : l.b].name;
    const auto& b = c.graph.vertices[directed % 2 == 0 ? l.b : l.a].name;
    return l.kind + ":" + a + "->" + b;
  };
  ASSERT_EQ(r.route(0, 3).size(), 1u);  // doubled NVLink 0-3
  EXPECT_EQ(name(r.route(0, 3)[0]), "nvlink:n0.gpu0->n0.gpu3");
  EXPECT_EQ(c.graph.links[r.route(0, 3)[0] / 2].bandwidth_Bps, 50e9);
  // 0 and 5 share no NVLink; a two-hop NVLink path through GPU 1 or 4 is not allowed: PCIe and the CPUs.
  const auto& via = r.route(0, 5);
  ASSERT_GT(via.size(), 2u);
  for (int d : via) EXPECT_NE(c.graph.links[d / 2].kind, "nvlink") << name(d);
  for (std::size_t i = 0; i + 1 < via.size(); ++i) {
    const auto& l = c.graph.links[via[i] / 2];
    const int head = via[i] % 2 == 0 ? l.b : l.a;
    EXPECT_LT(c.graph.vertices[head].gpu, 0) << "route passes through GPU vertex " << c.graph.vertices[head].name;
  }
  EXPECT_NEAR(r.latency_s(0, 3), 1e-6, 1e-15);
}

TEST(GraphRouting, DisconnectedGraphIsAnError) {
  TopologyGraph g;
  g.vertices = {{"a", 0}, {"b", 1}, {"sw", -1}};
  g.links = {{0, 2, 1e9, 1e-6, "pcie"}};  // GPU 1 is attached to nothing
  GraphRouting r(g);
  EXPECT_THROW(r.route(0, 1), ConfigError);
}

TEST(GraphRouting, ClusterJsonRoundTripKeepsTheGraph) {
  ClusterSpec c = dgx1_v100(2);
  ClusterSpec back = cluster_from_json(to_json(c), "t");
  ASSERT_EQ(back.graph.vertices.size(), c.graph.vertices.size());
  ASSERT_EQ(back.graph.links.size(), c.graph.links.size());
  for (std::size_t i = 0; i < c.graph.links.size(); ++i) {
    EXPECT_EQ(back.graph.links[i].a, c.graph.links[i].a);
    EXPECT_EQ(back.graph.links[i].bandwidth_Bps, c.graph.links[i].bandwidth_Bps);
  }
  EXPECT_NO_THROW(back.validate());
}

// The executor runs the kernels the cost model sized: with record_kernels every COMPUTE task carries them, their
// FLOPs add up to the task's, each GEMM's shape gives its FLOPs, and the task's duration is their modelled time.
TEST(TaskGraph, RecordedKernelsAreTheCostModelsKernels) {
  for (const auto recompute : {Recompute::NONE, Recompute::FULL}) {
    Scenario s = small(2, 2, 1, "dgx-a100:4");
    s.plan.recompute = recompute;
    s.opt.record_kernels = true;
    s.cal.host_issue_s = 0;
    s.cal.pin("host_issue_s");
    const Lowered low = s.lower();
    const auto& g = low.graph;
    std::size_t compute = 0, gemms = 0;
    for (std::int32_t i = 0; i < static_cast<std::int32_t>(g.size()); ++i) {
      const Task& t = g.tasks()[i];
      if (t.kind != TaskKind::COMPUTE) {
        EXPECT_TRUE(g.kernels(i).empty());
        continue;
      }
      ++compute;
      const auto& ks = g.kernels(i);
      ASSERT_FALSE(ks.empty()) << g.names()[t.name];
      double flops = 0, time = 0;
      for (const auto& k : ks) {
        flops += k.flops;
        if (k.gemm) {
          ++gemms;
          EXPECT_NEAR(k.flops, 2 * k.batch * k.m * k.k * k.n, 1e-9 * k.flops) << k.name;
          EXPECT_GT(k.m * k.k * k.n, 0) << k.name;
        } else {
          EXPECT_GT(k.bytes, 0) << k.name;
        }
        cost::Op op{k.name, k.gemm, k.flops, k.bytes};
        time += cost::op_time_s(op, s.cluster.gpu, s.model.dtype, s.cal);
      }
      EXPECT_NEAR(flops, t.flops, 1e-9 * std::max(1.0, t.flops)) << g.names()[t.name];
      EXPECT_NEAR(time, t.duration_s, 1e-9 * t.duration_s) << g.names()[t.name];
    }
    EXPECT_GT(compute, 100u);
    EXPECT_GT(gemms, 100u);
    // Without the option nothing is kept.
    s.opt.record_kernels = false;
    const Lowered plain = s.lower();
    for (std::int32_t i = 0; i < static_cast<std::int32_t>(plain.graph.size()); ++i)
      EXPECT_TRUE(plain.graph.kernels(i).empty());
  }
}

// sort_runs (the analytic engine's per-link sweep, the report's intervals) sorts exactly as std::sort: lists made of
// ascending runs with ties across runs, a descending list (every element a run), and the trivial cases.
TEST(SortRuns, SortsAsStdSort) {
  std::mt19937 rng(7);
  std::vector<std::size_t> scratch;
  for (int runs = 1; runs <= 70; runs += 3) {
    std::vector<std::pair<double, double>> v;
    for (int r = 0; r < runs; ++r) {
      const auto from = static_cast<std::ptrdiff_t>(v.size());
      const int n = static_cast<int>(rng() % 40);
      for (int i = 0; i < n; ++i)  // few distinct values: ties inside runs and across them
        v.emplace_back(static_cast<double>(rng() % 50), static_cast<double>(rng() % 4) - 2.0);
      std::sort(v.begin() + from, v.end());  // an ascending run
    }
    auto want = v;
    std::sort(want.begin(), want.end());
    dtsim::sim::sort_runs(v, scratch);
    EXPECT_EQ(v, want) << runs << " runs";
  }
  std::vector<double> down{5, 4, 3, 3, 2, 1, 0}, empty, one{1.5};
  dtsim::sim::sort_runs(down);
  EXPECT_EQ(down, (std::vector<double>{0, 1, 2, 3, 3, 4, 5}));
  dtsim::sim::sort_runs(empty);
  EXPECT_TRUE(empty.empty());
  dtsim::sim::sort_runs(one);
  EXPECT_EQ(one, std::vector<double>{1.5});
}
