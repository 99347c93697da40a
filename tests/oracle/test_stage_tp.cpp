// Per-stage tensor-parallel degrees (issue "Seeds"): StageStrategy::tp gives a pipeline stage its own TP degree, and
// the plan moves to the stage layout (inside a pipeline copy, stage s takes stage_tp(s) x replicas(s) consecutive
// ranks). Oracles:
//  - the layout: rank_of and coord_of invert each other, groups have the stage's sizes;
//  - every stage at the same degree t (the plan's tp set to another value) simulates exactly as the uniform plan of
//    tp t in the same rank order, on both networks;
//  - each stage computes and holds what the same stage holds in the uniform plan of its (tp, replicas);
//  - the pipeline transfer between degrees moves exactly one copy of the activation (the pieces sum to it), to every
//    receiving rank, and the receivers all-gather their TP group's share;
//  - the estimator, the footprint and the memory model follow; JSON round trip and one-line errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <map>
#include <string>

#include "sim/model/footprint.hpp"
#include "sim/model/groups.hpp"
#include "sim/simulate.hpp"
#include "strategies/estimator.hpp"
#include "strategies/planner.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/stage_enumeration.hpp"
#include "traces/json_util.hpp"

namespace dtsim {
namespace {
using namespace dtsim::sim;
using dtsim::testing::error_of;

const TransformerSpec& model() {
  static const TransformerSpec m = [] {
    TransformerSpec x = model_preset("gpt3-1.3b");
    x.num_layers = 8;
    x.tied_embeddings = false;  // tied embeddings need the same tp on the first and last stages (tested below)
    return x;
  }();
  return m;
}

const Calibration& cal() {
  static const Calibration c = default_calibration("a100-sxm4-80gb");
  return c;
}

/// Stage 0 on tp 4, stage 1 on tp 2 with two replicas (each computing half of every micro-batch of 2): eight GPUs
/// per pipeline copy, dp copies.
ParallelPlan four_then_two_by_two(int dp) {
  ParallelPlan p;
  p.tp = 4;
  p.pp = 2;
  p.dp = dp;
  p.micro_batch_size = 2;
  p.global_batch_size = 16 * dp;
  p.sequence_parallel = true;
  p.stage_replicas = {1, 2};
  StageStrategy a, b;
  a.sequence_parallel = b.sequence_parallel = true;
  b.tp = 2;
  p.stage_strategies = {a, b};
  return p;
}

Simulation run(const ParallelPlan& plan, NetworkMode network = NetworkMode::ANALYTIC, FoldMode fold = FoldMode::AUTO) {
  const ClusterSpec cluster = load_cluster("dgx-a100:" + std::to_string(plan.world_size()));
  SimOptions opt;
  opt.network = network;
  opt.fold = fold;
  opt.engine = FlowEngine::MAXMIN;  // SimGrid runs once per process
  Inputs in{&model(), &cluster, &plan, &cal(), &opt};
  return simulate(in);
}

const RankReport& rank_at(const Simulation& sim, int stage, int rep = 0) {
  for (const auto& r : sim.report.ranks)
    if (r.coord.pp == stage && r.coord.rep == rep && r.coord.tp == 0 && r.coord.dp == 0) return r;
  throw std::logic_error("no simulated rank of stage " + std::to_string(stage));
}

TEST(StageTp, LayoutAndGroups) {
  const ParallelPlan p = four_then_two_by_two(2);
  EXPECT_TRUE(p.has_stage_tp());
  EXPECT_TRUE(p.uses_stage_layout());
  EXPECT_EQ(p.ranks_per_pipeline(), 8);
  EXPECT_EQ(p.world_size(), 16);
  EXPECT_EQ(p.pipeline_copy_gpus(), 8);
  for (int r = 0; r < p.world_size(); ++r) {
    const RankCoord c = p.coord_of(r);
    EXPECT_EQ(p.rank_of(c), r);
    EXPECT_LT(c.tp, p.stage_tp(c.pp));
    EXPECT_LT(c.rep, p.replicas(c.pp));
  }
  // Copy 1, stage 1, replica 1, TP rank 1: 8 + 4 + 2 + 1.
  const RankCoord c = p.coord_of(15);
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(c.pp, 1);
  EXPECT_EQ(c.rep, 1);
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(group_members(p, 15, GroupAxis::TP), (std::vector<int>{14, 15}));
  EXPECT_EQ(group_members(p, 15, GroupAxis::DP), (std::vector<int>{5, 7, 13, 15}));  // replicas x copies
  EXPECT_EQ(group_members(p, 1, GroupAxis::TP), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(group_members(p, 1, GroupAxis::DP), (std::vector<int>{1, 9}));
}

TEST(StageTp, OneDegreeEverywhereIsTheUniformPlan) {
  // Plan tp 4 with both stages at tp 2 is the uniform tp-2 plan laid out stage by stage (rank order tp, pp, dp).
  ParallelPlan uniform;
  uniform.tp = 2;
  uniform.pp = 2;
  uniform.dp = 2;
  uniform.micro_batch_size = 1;
  uniform.global_batch_size = 16;
  uniform.sequence_parallel = true;
  uniform.rank_order = {Axis::TP, Axis::PP, Axis::DP};
  ParallelPlan staged = uniform;
  staged.tp = 4;
  StageStrategy st;
  st.sequence_parallel = true;
  st.tp = 2;
  staged.stage_strategies = {st, st};
  const ClusterSpec c8 = load_cluster("dgx-a100:8");
  staged.validate(model(), c8);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(staged.rank_of(uniform.coord_of(r)), r);
  for (NetworkMode network : {NetworkMode::ANALYTIC, NetworkMode::FLOW}) {
    const Simulation a = run(uniform, network, FoldMode::NONE), b = run(staged, network, FoldMode::NONE);
    EXPECT_EQ(a.lowered.graph.size(), b.lowered.graph.size());
    EXPECT_DOUBLE_EQ(a.report.iteration_time_s, b.report.iteration_time_s);
    for (std::size_t i = 0; i < a.report.ranks.size(); ++i) {
      EXPECT_DOUBLE_EQ(a.report.ranks[i].compute_s, b.report.ranks[i].compute_s);
      EXPECT_DOUBLE_EQ(a.report.ranks[i].peak_bytes, b.report.ranks[i].peak_bytes);
    }
  }
}

TEST(StageTp, EachStageWorksAsInTheUniformPlanOfItsDegree) {
  const ParallelPlan h = four_then_two_by_two(1);
  ParallelPlan wide = h, narrow = h;  // tp 4 everywhere (no replicas); tp 2 with two replicas everywhere
  wide.stage_strategies.clear();
  wide.stage_replicas.clear();
  narrow.stage_strategies.clear();
  narrow.tp = 2;
  narrow.stage_replicas = {2, 2};
  const Simulation sh = run(h), sw = run(wide), sn = run(narrow);
  const RankReport &h0 = rank_at(sh, 0), &w0 = rank_at(sw, 0), &h1 = rank_at(sh, 1), &n1 = rank_at(sn, 1);
  EXPECT_NEAR(h0.compute_s, w0.compute_s, 1e-12 * w0.compute_s);
  EXPECT_NEAR(h1.compute_s, n1.compute_s, 1e-12 * n1.compute_s);
  EXPECT_EQ(sh.lowered.ranks[h0.sim_index].static_mem.params, sw.lowered.ranks[w0.sim_index].static_mem.params);
  EXPECT_EQ(sh.lowered.ranks[h1.sim_index].static_mem.params, sn.lowered.ranks[n1.sim_index].static_mem.params);
  // Stage 1 on half the TP ranks holds twice the layer weights per rank of stage 0's tp 4 (same layers each).
  EXPECT_GT(sh.lowered.ranks[h1.sim_index].static_mem.params, sh.lowered.ranks[h0.sim_index].static_mem.params);
  // The summary lists the degrees.
  const ClusterSpec cluster = load_cluster("dgx-a100:8");
  SimOptions opt;
  const std::string text = human_summary({&model(), &cluster, &h, &cal(), &opt}, sh.lowered, sh.engine, sh.report);
  EXPECT_NE(text.find("1: tp 2 none zero 0 sp"), std::string::npos) << text;
}

TEST(StageTp, TransfersBetweenDegreesMoveOneActivation) {
  const ParallelPlan p = four_then_two_by_two(1);
  const Simulation s = run(p, NetworkMode::FLOW);
  const auto& g = s.lowered.graph;
  const double activation =
      p.micro_batch_size * static_cast<double>(model().seq_len) * model().hidden * dtype_bytes(model().dtype);
  // Per micro-batch: bytes and receivers of the forward sends, and of the backward (gradient) sends.
  std::map<int, double> fwd_bytes, bwd_bytes;
  std::map<int, std::map<int, int>> fwd_to;  // micro-batch -> receiving rank -> pieces
  for (const auto& t : g.tasks()) {
    if (t.kind != TaskKind::FLOW || t.peer < 0) continue;
    const std::string& name = g.names()[static_cast<std::size_t>(t.name)];
    if (name == "send-activation") {
      fwd_bytes[t.microbatch] += t.bytes;
      ++fwd_to[t.microbatch][s.lowered.ranks[static_cast<std::size_t>(t.peer)].global_rank];
    } else if (name == "send-gradient") {
      bwd_bytes[t.microbatch] += t.bytes;
    }
  }
  ASSERT_EQ(static_cast<int>(fwd_bytes.size()), p.num_microbatches());
  for (const auto& [mb, bytes] : fwd_bytes) {
    EXPECT_NEAR(bytes, activation, 1e-9 * activation) << "micro-batch " << mb;
    EXPECT_NEAR(bwd_bytes[mb], activation, 1e-9 * activation) << "micro-batch " << mb;
    // Stage 1's four ranks (4..7) each receive from the two stage-0 TP ranks whose quarter lies in its half.
    ASSERT_EQ(fwd_to[mb].size(), 4u);
    for (const auto& [rank, pieces] : fwd_to[mb]) EXPECT_EQ(pieces, 2) << "rank " << rank;
  }
  // Sequence-parallel shards are sent as they are under Megatron-Core (the default stack): nothing gathered after a
  // receive (tests/oracle/test_pp_transfers.cpp has the stacks that scatter and gather).
  int gathers = 0;
  for (const auto& t : g.tasks())
    if (g.names()[static_cast<std::size_t>(t.name)] == "pp-gather all-gather") ++gathers;
  EXPECT_EQ(gathers, 0);
}

TEST(StageTp, EstimatorFootprintAndMemoryFollow) {
  const ParallelPlan h = four_then_two_by_two(2);
  ParallelPlan narrow = h;
  narrow.stage_strategies.clear();
  narrow.tp = 2;
  narrow.stage_replicas = {2, 2};
  ParallelPlan wide = h;
  wide.stage_strategies.clear();
  wide.stage_replicas.clear();
  const ClusterSpec c16 = load_cluster("dgx-a100:16");
  const auto eh = estimate::estimate(model(), c16, cal(), h), ew = estimate::estimate(model(), c16, cal(), wide),
             en = estimate::estimate(model(), c16, cal(), narrow);
  EXPECT_DOUBLE_EQ(eh.stage_peak_bytes[0], ew.stage_peak_bytes[0]);
  EXPECT_DOUBLE_EQ(eh.stage_peak_bytes[1], en.stage_peak_bytes[1]);
  SimOptions opt;
  for (const ParallelPlan& p : {h, narrow}) {
    p.validate(model(), c16);
    const Footprint f = estimate_footprint(model(), c16, p, cal(), opt, {});
    const Lowered low = lower(model(), c16, p, cal(), opt);
    EXPECT_NEAR(f.tasks, static_cast<double>(low.graph.size()), 0.02 * static_cast<double>(low.graph.size()));
    EXPECT_EQ(f.simulated_ranks, static_cast<int>(low.ranks.size()));
  }
}

TEST(StageTp, JsonRoundTripAndErrors) {
  const auto plan_of = [](const std::string& text) {
    return plan_from_json(json_util::parse_text(text, "test"), "plan file 'p.json'");
  };
  ParallelPlan p = plan_of(
      R"({"tp": 4, "pp": 2, "dp": 1, "micro_batch_size": 2, "global_batch_size": 16, "sequence_parallel": true,
          "stage_replicas": [1, 2], "stage_strategies": [{"tp": 4}, {"tp": 2}]})");
  EXPECT_EQ(p.stage_tp(0), 4);
  EXPECT_EQ(p.stage_tp(1), 2);
  EXPECT_EQ(p.stage_strategies[0].tp, 0);  // the plan's own degree is stored as unset
  const ClusterSpec c8 = load_cluster("dgx-a100:8");
  p.validate(model(), c8);
  const ParallelPlan back = plan_from_json(to_json(p, model().num_layers), "round trip");
  EXPECT_EQ(back.stage_strategies, p.stage_strategies);
  EXPECT_EQ(back.world_size(), 8);

  EXPECT_EQ(error_of<Error>([&] {
              plan_of(R"({"tp": 2, "pp": 2, "micro_batch_size": 1, "global_batch_size": 8,
                          "stage_strategies": [{"tp": 0}, {}]})");
            }),
            "plan file 'p.json': stage_strategies[0]: tp must be positive, got 0");
  ParallelPlan bad = p;
  bad.dp = 2;
  EXPECT_EQ(error_of<Error>([&] { bad.validate(model(), c8); }),
            "plan: dp*sum(stage tp*replicas) = 2*(4*1+2*2) = 16 does not match the 8 GPUs of cluster 'dgx-a100:8'");
  bad = p;
  bad.stage_strategies[1].tp = 3;
  bad.stage_replicas = {1, 1};
  bad.micro_batch_size = 1;
  bad.global_batch_size = 8;
  const ClusterSpec c7 = load_cluster("dgx-a100:7");
  EXPECT_EQ(error_of<Error>([&] { bad.validate(model(), c7); }),
            "plan: stage_strategies[1]: tp 3 does not divide the 16 attention heads of 'gpt3-1.3b'");
  TransformerSpec tied = model();
  tied.tied_embeddings = true;
  bad = p;
  EXPECT_EQ(error_of<Error>([&] { bad.validate(tied, c8); }),
            "plan: 'gpt3-1.3b' ties its input and output embeddings, so the first and last stages need the same tp "
            "(stage 0 has 4, stage 1 has 2)");
}

// UniAP with a TP degree per stage on a case found to pick one (llama2-7b on 16 H100s, gbs 16, 32 GB per GPU): stage 0
// needs TP 8 for memory, stage 1 runs two TP-4 replicas. The pick fits in simulation, its prediction is within 2% of
// the simulation, and it is within 1% of the best of every per-stage assignment of its placement (replicas 1 or 2
// x recompute none/full x ZeRO 0/1 per stage, each simulated).
TEST(StageTp, UniapPicksADegreePerStageWithinOnePercentOfTheBestAssignment) {
  planning::PlannerInput in;
  in.model = model_preset("llama2-7b");
  in.cluster = load_cluster("dgx-h100:16");
  in.calibration = default_calibration("h100-sxm5-80gb");
  in.global_batch_size = 16;
  in.memory_limit_bytes = 32e9;
  const auto r = planning::make_planner("uniap")->plan(in);
  ASSERT_FALSE(r.ranked.empty());
  const planning::Candidate& top = r.ranked.front();
  const ParallelPlan pick = top.plan;
  ASSERT_TRUE(pick.has_stage_tp()) << planning::describe(pick);
  const auto [pick_s, pick_peak] = testing::simulate_analytic(in, pick);
  EXPECT_LE(pick_peak, in.memory_limit_bytes);
  EXPECT_NEAR(top.estimate.iteration_s, pick_s, 0.02 * pick_s);
  const int g = pick.tp;  // the GPUs of a stage per pipeline copy
  std::vector<std::pair<int, StageStrategy>> kinds;
  for (int rep : {1, 2})
    for (Recompute rc : {Recompute::NONE, Recompute::FULL})
      for (int zero : {0, 1}) {
        if (zero == 1 && pick.dp * rep == 1) continue;
        StageStrategy st;
        st.tp = g / rep;
        st.sequence_parallel = g / rep > 1;
        st.zero_stage = zero;
        st.recompute = rc;
        kinds.emplace_back(rep, st);
      }
  const testing::Enumeration e = testing::enumerate_stage_kinds(in, pick, kinds);
  const int fit = e.fit, combos = e.combos;
  const double best = e.best_s;
  std::printf("[uniap] pick %s: %.4f s (predicted %.4f s); best of %d fitting assignments of %d: %.4f s\n",
              planning::describe(pick).c_str(), pick_s, top.estimate.iteration_s, fit, combos, best);
  EXPECT_LT(fit, combos);  // the limit binds
  EXPECT_LE(pick_s, best * 1.01);
}

}  // namespace
}  // namespace dtsim
