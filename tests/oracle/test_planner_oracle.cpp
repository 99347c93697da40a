// Planner oracles: a 2-layer model on 2 GPUs, where every plan DAPPLE can produce is listed by hand and scored
// with its analytical latency (seed-algorithms §4, released planner); the planner must return the minimum.
#include <gtest/gtest.h>

#include <algorithm>

#include "strategies/planner.hpp"
#include "strategies/planners/layer_chain.hpp"

using namespace dtsim;

TEST(PlannerOracle, DappleTwoLayersTwoGpusPicksTheHandOptimum) {
  planning::PlannerInput in;
  in.model = model_preset("gpt3-1.3b");
  in.model.num_layers = 2;
  in.cluster = load_cluster("dgx-a100:2");
  in.calibration = default_calibration(in.cluster.gpu.name);
  in.global_batch_size = 2;
  const auto ch = planning::build_chain(in, 1);
  const double T0 = ch.compute_s[0], T1 = ch.compute_s[1], T = T0 + T1;
  const double grads = (ch.params[0] + ch.params[1]) * dtype_bytes(in.model.dtype);
  const double ar2 = 2.0 * ch.intra.alpha_s + grads / ch.intra.bw_Bps;  // ring all-reduce, n = 2: 2(n-1)/n = 1
  auto x = [&](int samples) { return 2.0 * (ch.intra.alpha_s + samples * ch.boundary_bytes / ch.intra.bw_Bps); };
  // Every plan (width w, micro-batch b) DAPPLE enumerates for gbs 2 on 2 GPUs, with L = block (M-1) + fill +
  // transfers + max(0, max_s AR_s - s block):
  const double pure_dp = T + ar2;                                    // w 1, rp 2, b 1, M 1: one stage
  const double two_stages_b1 = std::max({T0, T1, x(1)}) + T + x(1);  // w 2, b 1, M 2: stages of 1 layer
  const double one_stage_two_replicas = T + ar2;                     // w 2, b 2, M 1: one stage, 2 replicas
  const double two_stages_b2 = 2 * T + x(2);                         // w 2, b 2, M 1: stages of 1 layer
  const double hand = std::min({pure_dp, two_stages_b1, one_stage_two_replicas, two_stages_b2});
  const auto r = planning::make_planner("dapple")->plan(in);
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_NEAR(r.ranked.front().estimate.iteration_s, hand, 1e-12 * hand);
  // And it considered exactly those (w, b) pairs: (1, 1), (2, 1), (2, 2).
  EXPECT_EQ(r.considered, 3u);
  // Here the 2.6 GB gradient all-reduce over NVSwitch costs less than the pipeline's fill and transfers, so the
  // optimum is one stage (pure DP; the tie with one stage of two replicas keeps the first generated); the
  // pipelined plans are strictly worse, so the comparison is not vacuous.
  EXPECT_LT(pure_dp, std::min(two_stages_b1, two_stages_b2));
  EXPECT_EQ(r.ranked.front().plan.pp, 1);
  EXPECT_EQ(r.ranked.front().plan.dp, 2);
}

// ---- Planner after Luo et al. -------------------------------------------------------------------------------

#include "strategies/planners/luo.hpp"
#include "strategies/schedule.hpp"
#include "tests/support/sim_fixture.hpp"

TEST(LuoScheduler, WarmupOrdersAreOneFOneBAndGpipeAtTheEnds) {
  for (int p : {1, 2, 4, 5})
    for (int M : {1, 3, 8})
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(planning::luo::warmup_order(M, p - s), sched::stage_order(Schedule::ONE_F_ONE_B, p, M, s, true))
            << "p " << p << " M " << M << " s " << s;
        EXPECT_EQ(planning::luo::warmup_order(M, M), sched::stage_order(Schedule::GPIPE, p, M, s));
      }
}

namespace {
planning::luo::StageTimes uniform_times(int p, double f, double b, double send, double ar0) {
  planning::luo::StageTimes t;
  t.forward_s.assign(p, f);
  t.backward_s.assign(p, b);
  t.send_s.assign(p - 1, send);
  t.all_reduce_s.assign(p, 0.0);
  t.all_reduce_s[0] = ar0;
  return t;
}
std::vector<std::vector<PipeOp>> orders_with(int p, int M, const std::vector<int>& K) {
  std::vector<std::vector<PipeOp>> o;
  o.reserve(p);
  for (int s = 0; s < p; ++s) o.push_back(planning::luo::warmup_order(M, K[s]));
  return o;
}
}  // namespace

// Balanced stages, free links: 1F1B and GPipe both take (M + p - 1)(F + B) (bubble (p - 1)/M of the ideal);
// stage 0 finishes last, so its gradient all-reduce adds fully to the barrier.
TEST(LuoScheduler, ListScheduleMatchesThePipelineClosedForm) {
  const int p = 4, M = 8;
  const double f = 1.0, b = 2.0;
  std::vector<int> k1f1b, gpipe;
  for (int s = 0; s < p; ++s) k1f1b.push_back(p - s), gpipe.push_back(M);
  EXPECT_DOUBLE_EQ(planning::luo::evaluate_orders(orders_with(p, M, k1f1b), uniform_times(p, f, b, 0, 0), M),
                   (M + p - 1) * (f + b));
  EXPECT_DOUBLE_EQ(planning::luo::evaluate_orders(orders_with(p, M, gpipe), uniform_times(p, f, b, 0, 0), M),
                   (M + p - 1) * (f + b));
  EXPECT_DOUBLE_EQ(planning::luo::evaluate_orders(orders_with(p, M, k1f1b), uniform_times(p, f, b, 0, 5.0), M),
                   (M + p - 1) * (f + b) + 5.0);
  // A backward before its forward deadlocks.
  auto bad = orders_with(p, M, k1f1b);
  std::swap(bad[1][0], bad[1][1]);
  bad[1][0] = {PipeOp::Kind::B, 0, 0};
  bad[1][1] = {PipeOp::Kind::F, 0, 0};
  EXPECT_TRUE(std::isinf(planning::luo::evaluate_orders(bad, uniform_times(p, f, b, 0, 0), M)));
}

// With slow links between stages, 1F1B's warm-up (p - s) leaves stages idle waiting for gradients; one more
// warm-up forward per stage hides the round trip -- the premise of the scheduler's search over K_s.
TEST(LuoScheduler, DeeperWarmupHidesSlowLinks) {
  const int p = 4, M = 16;
  std::vector<int> k1f1b, deeper;
  for (int s = 0; s < p; ++s) k1f1b.push_back(p - s), deeper.push_back(p - s + 1);
  const auto t = uniform_times(p, 1.0, 2.0, 1.5, 0);
  const double base = planning::luo::evaluate_orders(orders_with(p, M, k1f1b), t, M);
  const double deep = planning::luo::evaluate_orders(orders_with(p, M, deeper), t, M);
  EXPECT_LT(deep, base * 0.97) << base << " vs " << deep;
}

namespace {
// Eight GPUs on one slow switch (4 GB/s), with NVLink (150 GB/s) only between GPUs 2i and 2i+1... and
// between 2i+1 and 2i+2 (a chain), so that rank order matters and Megatron's layout is not the best.
ClusterSpec chain_cluster() {
  ClusterSpec c = load_cluster("dgx-a100:8");
  c.name = "nvlink-chain";
  auto& g = c.graph;
  for (int i = 0; i < 8; ++i) g.vertices.push_back({"gpu" + std::to_string(i), i});
  g.vertices.push_back({"pcie", -1});
  for (int i = 0; i < 8; ++i) g.links.push_back({i, 8, 4e9, 2e-6, "pcie"});
  for (int i = 0; i + 1 < 8; ++i) g.links.push_back({i, i + 1, 150e9, 1e-6, "nvlink"});
  return c;
}
}  // namespace

// On a cluster whose fast links form a chain, the planner's device mapping must pay off in the simulator: its
// best plan simulated with its mapping beats the same plan with ranks on GPUs in Megatron's order.
TEST(LuoPlanner, DeviceMappingPaysOffInSimulationOnAnArbitraryGraph) {
  planning::PlannerInput in;
  in.model = model_preset("gpt3-1.3b");
  in.cluster = chain_cluster();
  in.calibration = default_calibration("a100-sxm4-80gb");
  in.global_batch_size = 32;
  auto r = planning::make_planner("luo")->plan(in);
  ASSERT_FALSE(r.ranked.empty());
  // The best candidate with a device map (Megatron's layout may also be what the planner prefers for some plans).
  const planning::Candidate* mapped = nullptr;
  for (const auto& c : r.ranked)
    if (c.plan.has_device_map()) {
      mapped = &c;
      break;
    }
  ASSERT_NE(mapped, nullptr) << "no candidate uses a device mapping on the chain cluster";
  auto simulate_plan = [&](bool keep_map) {
    return dtsim::testing::in_child([&] {
      ParallelPlan plan = mapped->plan;
      if (!keep_map) plan.device_map.clear();
      sim::SimOptions opt;
      // The planner's cost model has no interference; with it the mapped plan's faster pipeline transfers overlap
      // more compute, which the mapping does not account for (the property under test is the transfer routing).
      opt.interference = false;
      sim::Inputs sin{&in.model, &in.cluster, &plan, &in.calibration, &opt};
      return sim::simulate(sin).report.iteration_time_s;
    });
  };
  const double with_map = simulate_plan(true), without = simulate_plan(false);
  ASSERT_GT(with_map, 0);
  EXPECT_LT(with_map, without * 0.99) << planning::describe(mapped->plan) << ": " << with_map << " s mapped vs "
                                      << without << " s";
}
