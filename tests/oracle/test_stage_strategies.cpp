// Heterogeneous plans (issue "Seeds"): ParallelPlan::stage_strategies gives each pipeline stage its own intra-layer
// strategy (TP layout, sequence parallelism, ZeRO stage, recompute). Oracles:
//  - stage strategies equal to the plan's own fields lower and simulate exactly as the uniform plan (same graph, same
//    times on every engine, folded and unfolded);
//  - a stage's compute time, static memory and peak memory equal those of the same stage in the uniform plan that
//    uses its strategy everywhere (recompute, ZeRO): a stage's work does not depend on its neighbours' strategies
//    (no free network, so only compute and memory, which the pipeline order fixes, are compared);
//  - neighbours whose TP layouts differ are re-sharded: one all-to-all over the receiving TP group per transfer,
//    forward and backward, and none between stages of the same layout;
//  - the estimator and the footprint follow the stages; JSON round trip and one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <string>

#include "sim/model/footprint.hpp"
#include "sim/report/report.hpp"
#include "sim/simulate.hpp"
#include "strategies/estimator.hpp"
#include "strategies/planner.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/stage_enumeration.hpp"

using dtsim::testing::error_of;
#include "traces/json_util.hpp"

namespace dtsim {
namespace {
using namespace dtsim::sim;

const TransformerSpec& model() {
  static const TransformerSpec m = [] {
    TransformerSpec x = model_preset("gpt3-1.3b");
    x.num_layers = 8;
    return x;
  }();
  return m;
}

ParallelPlan base_plan(int tp, int pp, int dp) {
  ParallelPlan p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.micro_batch_size = 1;
  p.global_batch_size = 8 * dp;
  p.sequence_parallel = tp > 1;
  return p;
}

/// tp 4 over two stages: stage 0 on a 2-D grid (q = 2), stage 1 in 1-D with sequence parallelism.
ParallelPlan grid_then_1d(int dp) {
  ParallelPlan p = base_plan(4, 2, dp);
  p.sequence_parallel = false;
  StageStrategy grid, oned;
  grid.tp_layout = TpLayout::D2;
  oned.sequence_parallel = true;
  p.stage_strategies = {grid, oned};
  return p;
}

Simulation run(const ParallelPlan& plan, NetworkMode network = NetworkMode::ANALYTIC, FoldMode fold = FoldMode::AUTO,
               FlowEngine engine = FlowEngine::MAXMIN) {
  const ClusterSpec cluster = load_cluster("dgx-a100:" + std::to_string(plan.world_size()));
  const Calibration cal = default_calibration("a100-sxm4-80gb");
  SimOptions opt;
  opt.network = network;
  opt.fold = fold;
  opt.engine = engine;
  Inputs in{&model(), &cluster, &plan, &cal, &opt};
  return simulate(in);
}

/// The simulated rank of stage `s` (tp 0, dp 0).
const RankReport& stage_rank(const Simulation& sim, int s) {
  for (const auto& r : sim.report.ranks)
    if (r.coord.pp == s && r.coord.tp == 0 && r.coord.dp == 0) return r;
  throw std::logic_error("no simulated rank of stage " + std::to_string(s));
}

/// Tasks of the collectives named `name` ("reshard-activation all-to-all": the lowering appends the kind).
int tasks_named(const Simulation& sim, const std::string& name) {
  int n = 0;
  const auto& g = sim.lowered.graph;
  for (const auto& t : g.tasks())
    if (g.names()[static_cast<std::size_t>(t.name)] == name + " all-to-all") ++n;
  return n;
}

TEST(StageStrategies, EqualToThePlansOwnIsTheUniformPlan) {
  for (NetworkMode network : {NetworkMode::ANALYTIC, NetworkMode::FLOW})
    for (FoldMode fold : {FoldMode::AUTO, FoldMode::NONE}) {
      ParallelPlan uniform = base_plan(2, 4, 2);
      uniform.recompute = Recompute::SELECTIVE;
      uniform.zero_stage = 1;
      ParallelPlan same = uniform;
      same.stage_strategies.assign(4, uniform.stage_strategy(0));
      const Simulation a = run(uniform, network, fold), b = run(same, network, fold);
      EXPECT_EQ(a.lowered.graph.size(), b.lowered.graph.size());
      EXPECT_EQ(a.lowered.ranks.size(), b.lowered.ranks.size());
      EXPECT_EQ(a.report.iteration_time_s, b.report.iteration_time_s);
      for (std::size_t i = 0; i < a.report.ranks.size(); ++i) {
        EXPECT_EQ(a.report.ranks[i].compute_s, b.report.ranks[i].compute_s);
        EXPECT_EQ(a.report.ranks[i].peak_bytes, b.report.ranks[i].peak_bytes);
      }
    }
}

TEST(StageStrategies, EachStageWorksAsInTheUniformPlanOfItsStrategy) {
  // Stage 0 and 1 recompute everything and shard optimizer states (ZeRO-1), stages 2 and 3 neither.
  ParallelPlan none = base_plan(2, 4, 2), full = none;
  full.recompute = Recompute::FULL;
  full.zero_stage = 1;
  ParallelPlan het = none;
  het.stage_strategies = {full.stage_strategy(0), full.stage_strategy(0), none.stage_strategy(0),
                          none.stage_strategy(0)};
  const Simulation a = run(none), b = run(full), h = run(het);
  for (int s = 0; s < 4; ++s) {
    SCOPED_TRACE("stage " + std::to_string(s));
    const Simulation& ref = s < 2 ? b : a;
    const RankReport &x = stage_rank(h, s), &y = stage_rank(ref, s);
    EXPECT_NEAR(x.compute_s, y.compute_s, 1e-12 * y.compute_s);
    EXPECT_NEAR(x.peak_bytes, y.peak_bytes, 1e-9 * y.peak_bytes);
    EXPECT_EQ(h.lowered.ranks[x.sim_index].static_mem.optimizer_bytes,
              ref.lowered.ranks[y.sim_index].static_mem.optimizer_bytes);
  }
  // Recompute on half the stages: slower than none, faster than everywhere (the bottleneck is a recomputing stage).
  EXPECT_GT(h.report.iteration_time_s, a.report.iteration_time_s);
  EXPECT_LT(h.report.iteration_time_s, b.report.iteration_time_s);
  // ZeRO-1 only where asked: stage 0 holds 1/dp of the optimizer states of the uniform plan without ZeRO.
  EXPECT_NEAR(h.lowered.ranks[stage_rank(h, 0).sim_index].static_mem.optimizer_bytes,
              a.lowered.ranks[stage_rank(a, 0).sim_index].static_mem.optimizer_bytes / 2, 1.0);
  // The summary says so.
  const ClusterSpec cluster = load_cluster("dgx-a100:16");
  const Calibration cal = default_calibration("a100-sxm4-80gb");
  SimOptions opt;
  const std::string text = human_summary({&model(), &cluster, &het, &cal, &opt}, h.lowered, h.engine, h.report);
  EXPECT_NE(text.find("stage strategies: 0: full zero 1 sp | 1: full zero 1 sp | 2: none zero 0 sp"), std::string::npos)
      << text;
}

TEST(StageStrategies, DifferentLayoutsAreReshardedAtTheBoundary) {
  ParallelPlan p = grid_then_1d(1);
  const StageStrategy oned = p.stage_strategies[1];
  const int m = p.num_microbatches();
  const Simulation h = run(p, NetworkMode::FLOW);
  // Folding is off (2-D layouts run over sub-groups), so each of the tp ranks re-shards: stage 1 forward, stage 0
  // backward, once per micro-batch (an all-to-all is several tasks per member).
  const int fwd = tasks_named(h, "reshard-activation"), bwd = tasks_named(h, "reshard-gradient");
  EXPECT_GE(fwd, m * p.tp);
  EXPECT_GE(bwd, m * p.tp);
  // Same layouts: no re-sharding.
  ParallelPlan same = p;
  same.stage_strategies = {oned, oned};
  const Simulation u = run(same, NetworkMode::FLOW);
  EXPECT_EQ(tasks_named(u, "reshard-activation") + tasks_named(u, "reshard-gradient"), 0);
  EXPECT_GT(h.lowered.graph.size(), u.lowered.graph.size());
}

TEST(StageStrategies, EstimatorAndFootprintFollowTheStages) {
  const ClusterSpec cluster = load_cluster("dgx-a100:16");
  const Calibration cal = default_calibration("a100-sxm4-80gb");
  ParallelPlan none = base_plan(2, 4, 2), full = none;
  full.recompute = Recompute::FULL;
  ParallelPlan het = none;
  het.stage_strategies = {full.stage_strategy(0), none.stage_strategy(0), none.stage_strategy(0),
                          none.stage_strategy(0)};
  const auto en = estimate::estimate(model(), cluster, cal, none), ef = estimate::estimate(model(), cluster, cal, full),
             eh = estimate::estimate(model(), cluster, cal, het);
  EXPECT_GT(eh.iteration_s, en.iteration_s);
  EXPECT_LT(eh.iteration_s, ef.iteration_s);
  EXPECT_DOUBLE_EQ(eh.stage_peak_bytes[0], ef.stage_peak_bytes[0]);
  EXPECT_DOUBLE_EQ(eh.stage_peak_bytes[3], en.stage_peak_bytes[3]);
  // The footprint counts the re-sharding collectives as the lowering emits them.
  ParallelPlan p = grid_then_1d(2);
  const ClusterSpec c16 = load_cluster("dgx-a100:16");
  SimOptions opt;
  p.validate(model(), c16);
  const Footprint f = estimate_footprint(model(), c16, p, cal, opt, {});
  const Lowered low = lower(model(), c16, p, cal, opt);
  EXPECT_NEAR(f.tasks, static_cast<double>(low.graph.size()), 0.02 * static_cast<double>(low.graph.size()));
}

TEST(StageStrategies, JsonRoundTripAndErrors) {
  const ClusterSpec cluster = load_cluster("dgx-a100:16");
  const auto plan_of = [](const std::string& text) {
    return plan_from_json(json_util::parse_text(text, "test"), "plan file 'p.json'");
  };
  // Unset fields are the plan's own.
  ParallelPlan p = plan_of(
      R"({"tp": 4, "pp": 2, "dp": 2, "micro_batch_size": 1, "global_batch_size": 16, "zero_stage": 1,
          "stage_strategies": [{"recompute": "full", "tp_layout": "2d"}, {"sequence_parallel": true}]})");
  ASSERT_EQ(p.stage_strategies.size(), 2u);
  EXPECT_EQ(p.stage_strategy(0).zero_stage, 1);
  EXPECT_EQ(p.stage_strategy(0).recompute, Recompute::FULL);
  EXPECT_EQ(p.stage_strategy(0).tp_layout, TpLayout::D2);
  EXPECT_TRUE(p.stage_strategy(1).sequence_parallel);
  EXPECT_EQ(p.stage_strategy(1).recompute, Recompute::NONE);
  EXPECT_TRUE(p.stage_layouts_differ(0, 1));
  p.validate(model(), cluster);
  const ParallelPlan back = plan_from_json(to_json(p, model().num_layers), "round trip");
  EXPECT_EQ(back.stage_strategies, p.stage_strategies);
  // One line naming the stage and the problem.
  EXPECT_EQ(error_of<Error>([&] {
              plan_of(R"({"tp": 2, "pp": 2, "micro_batch_size": 1, "global_batch_size": 8,
                          "stage_strategies": [{"zero": 1}, {}]})");
            }),
            "plan file 'p.json': stage_strategies[0]: unknown field 'zero' (known: recompute, sequence_parallel, tp, "
            "tp_depth, "
            "tp_layout, zero_stage)");
  ParallelPlan bad = base_plan(2, 4, 2);
  bad.stage_strategies.resize(3);
  EXPECT_EQ(error_of<Error>([&] { bad.validate(model(), cluster); }),
            "plan: stage_strategies has 3 entries but pp is 4");
  bad.stage_strategies.resize(4);
  bad.stage_strategies[2].tp_layout = TpLayout::D2;
  EXPECT_EQ(error_of<Error>([&] { bad.validate(model(), cluster); }),
            "plan: stage_strategies[2]: tensor-parallel layout 2d cannot arrange tp 2 (2d: tp = q^2; 2.5d: tp = q^2 * "
            "depth; 3d: tp = q^3)");
  bad.stage_strategies[2] = {};
  bad.stage_strategies[3].sequence_parallel = true;
  bad.tp = 1;
  bad.dp = 4;
  bad.sequence_parallel = false;
  EXPECT_EQ(error_of<Error>([&] { bad.validate(model(), cluster); }),
            "plan: stage_strategies[3]: sequence parallelism needs tp > 1");
}

// UniAP with a strategy per stage on a tiny case whose answer is known by enumeration: GPT-3 1.3B on 8 A100s, gbs 64,
// 16 GB per GPU. Its pick is heterogeneous, fits in simulation, and simulates within 1% of the best of all 4^p
// per-stage assignments (recompute none/full x ZeRO 0/1) of its placement, each simulated.
TEST(StageStrategies, UniapPickIsWithinOnePercentOfTheBestAssignment) {
  planning::PlannerInput in;
  in.model = model_preset("gpt3-1.3b");
  in.cluster = load_cluster("dgx-a100:8");
  in.calibration = default_calibration("a100-sxm4-80gb");
  in.global_batch_size = 64;
  in.memory_limit_bytes = 16e9;
  const auto r = planning::make_planner("uniap")->plan(in);
  ASSERT_FALSE(r.ranked.empty());
  const ParallelPlan pick = r.ranked.front().plan;
  ASSERT_TRUE(pick.has_stage_strategies()) << planning::describe(pick);
  const auto [pick_s, pick_peak] = testing::simulate_analytic(in, pick);
  EXPECT_LE(pick_peak, in.memory_limit_bytes);
  std::vector<std::pair<int, StageStrategy>> kinds;
  for (Recompute rc : {Recompute::NONE, Recompute::FULL})
    for (int zero : {0, 1}) kinds.emplace_back(0, StageStrategy{TpLayout::D1, 1, pick.sequence_parallel, zero, rc});
  const testing::Enumeration e = testing::enumerate_stage_kinds(in, pick, kinds);
  const int fit = e.fit, combos = e.combos;
  const double best = e.best_s;
  std::printf("[uniap] pick %s: %.4f s; best of %d fitting assignments of %d: %.4f s\n",
              planning::describe(pick).c_str(), pick_s, fit, combos, best);
  EXPECT_LT(fit, combos);  // the limit binds
  EXPECT_LE(pick_s, best * 1.01);
}

}  // namespace
}  // namespace dtsim
