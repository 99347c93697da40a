// Oracle tests of the per-GPU speed variability model (strategies/straggler_model.hpp): the expected maximum of n
// standard normal variables against its closed forms and published tables, and the simulator and estimator
// charging cv x (e(N) - e(N_ref)) x a rank's compute, which a fixed-cost pipeline gives in closed form.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/engine/analytic_runtime.hpp"
#include "strategies/estimator.hpp"
#include "strategies/straggler_model.hpp"
#include "strategies/transformer_costs.hpp"
#include "tests/support/sim_fixture.hpp"
#include "traces/error.hpp"

using namespace dtsim;
using namespace dtsim::testing;

TEST(StragglerModel, ExpectedMaxOfNormalsMatchesClosedFormsAndTables) {
  using straggler::expected_max_standard_normal;
  EXPECT_EQ(expected_max_standard_normal(1), 0.0);
  // Closed forms: n = 2: 1 / sqrt(pi); n = 3: 3 / (2 sqrt(pi)); n = 4: (6 / pi^(3/2)) atan(sqrt 2); n = 5:
  // 5 / (4 sqrt(pi)) + (15 / (2 pi^(3/2))) asin(1/3) (order statistics of the normal, e.g. David & Nagaraja, Order
  // Statistics, 3rd ed., section 3.2).
  const double pi = M_PI;
  EXPECT_NEAR(expected_max_standard_normal(2), 1 / std::sqrt(pi), 1e-9);
  EXPECT_NEAR(expected_max_standard_normal(3), 1.5 / std::sqrt(pi), 1e-9);
  EXPECT_NEAR(expected_max_standard_normal(4), 6 / std::pow(pi, 1.5) * std::atan(std::sqrt(2.0)), 1e-9);
  EXPECT_NEAR(expected_max_standard_normal(5),
              5 / (4 * std::sqrt(pi)) + 15 / (2 * std::pow(pi, 1.5)) * std::asin(1.0 / 3), 1e-9);
  // Tabled values (Harter 1961, "Expected values of normal order statistics", Biometrika 48): n = 10, 100, 400.
  EXPECT_NEAR(expected_max_standard_normal(10), 1.53875, 1e-5);
  EXPECT_NEAR(expected_max_standard_normal(100), 2.50759, 1e-5);
  EXPECT_NEAR(expected_max_standard_normal(400), 2.96818, 1e-5);
  // Large n follows sqrt(2 ln n) - (ln ln n + ln 4 pi) / (2 sqrt(2 ln n)) + 0.5772 / sqrt(2 ln n) (Gumbel limit)
  // to within a few hundredths, and grows with n.
  for (std::int64_t n : {16384LL, 1LL << 20, 1LL << 31}) {
    const double a = std::sqrt(2 * std::log(static_cast<double>(n)));
    const double gumbel = a - (std::log(std::log(static_cast<double>(n))) + std::log(4 * pi)) / (2 * a) + 0.5772 / a;
    EXPECT_NEAR(expected_max_standard_normal(n), gumbel, 0.03) << n;
  }
  EXPECT_LT(expected_max_standard_normal(8192), expected_max_standard_normal(16384));
}

TEST(StragglerModel, PaceFractionSubtractsTheCalibrationsReference) {
  Calibration cal = ideal_calibration();
  cal.gpu_speed_cv = 0.02;
  cal.gpu_speed_reference_gpus = 1;
  const double e64 = straggler::expected_max_standard_normal(64), e8 = straggler::expected_max_standard_normal(8);
  EXPECT_NEAR(straggler::pace_fraction(cal, 64), 0.02 * e64, 1e-12);
  cal.gpu_speed_reference_gpus = 8;  // a calibration fitted on one node of 8 already holds its slowest GPU
  EXPECT_NEAR(straggler::pace_fraction(cal, 64), 0.02 * (e64 - e8), 1e-12);
  EXPECT_EQ(straggler::pace_fraction(cal, 4), 0.0);  // fewer GPUs than the reference: nothing is charged
  cal.gpu_speed_cv = 0;
  EXPECT_EQ(straggler::pace_fraction(cal, 16384), 0.0);
  cal.gpu_speed_cv = 0.5;
  EXPECT_THROW(cal.validate("test"), ConfigError);
  cal.gpu_speed_cv = 0.01;
  cal.gpu_speed_reference_gpus = 2.5;
  EXPECT_THROW(cal.validate("test"), ConfigError);
}

// A 1F1B pipeline of p = 4 stages, m = 8 micro-batches and 2 layers per stage with fixed pass times and free
// communication ends at (m + p - 1) x 2 (tf + tb); each rank computes m x 2 (tf + tb), and stage 0, which finishes
// last, waits cv x e(4) x that before its step: the iteration grows by exactly that.
TEST(StragglerModel, SimulatorChargesTheSlowestGpusShareOfEachRanksCompute) {
  const int p = 4, m = 8, layers = 8;
  const double tf = 1e-3, tb = 2e-3, cv = 0.03;
  auto run = [&](double speed_cv) {
    TransformerSpec model = tiny_model(layers);
    ClusterSpec cluster = uniform_cluster(1, p, 1e20, 0.0);
    ParallelPlan plan = pipeline_plan(Schedule::ONE_F_ONE_B, p, m);
    Calibration cal = ideal_calibration();
    cal.gpu_speed_cv = speed_cv;
    SimOptions opt;
    const PassCosts pc = fixed_costs(tf, tb, 0, cluster.gpu.peak_flops(model.dtype), 0);
    const Lowered low = lower(model, cluster, plan, cal, opt, pc);
    std::vector<int> gpus;
    for (const auto& r : low.ranks) gpus.push_back(r.global_rank);
    const EngineResult res = run_analytic(low.graph, cluster, cal, gpus);
    Inputs in{&model, &cluster, &plan, &cal, &opt};
    return analyze(in, low, res);
  };
  const Report off = run(0), on = run(cv);
  const double per_rank = m * 2 * (tf + tb);
  EXPECT_NEAR(off.iteration_time_s, (m + p - 1) * 2 * (tf + tb), 1e-9);
  const double wait = cv * straggler::expected_max_standard_normal(p) * per_rank;
  EXPECT_NEAR(on.iteration_time_s - off.iteration_time_s, wait, 1e-12);
  for (const auto& rr : on.ranks) {
    EXPECT_NEAR(rr.variability_wait_s, wait, 1e-12);
    EXPECT_NEAR(rr.compute_s, per_rank, 1e-12);  // the wait is not compute
    EXPECT_NEAR(rr.compute_s + rr.variability_wait_s + rr.exposed_comm_s + rr.bubble_s, on.iteration_time_s, 1e-12);
  }
  for (const auto& rr : off.ranks) EXPECT_EQ(rr.variability_wait_s, 0.0);
}

TEST(StragglerModel, EstimatorAddsTheSameShareOfTheBottleneckStagesCompute) {
  const TransformerSpec model = model_preset("gpt3-1.3b");
  ParallelPlan plan;
  plan.tp = 2;
  plan.dp = 8;  // one stage: its passes are the bottleneck, with no pipeline exchange in them
  plan.micro_batch_size = 1;
  plan.global_batch_size = 64;
  // Free communication and no host costs: the bottleneck stage's passes are its compute.
  {
    const ClusterSpec free_net = uniform_cluster(2, 8, 1e20, 0.0);
    Calibration cal = ideal_calibration();
    const auto off = estimate::estimate(model, free_net, cal, plan);
    cal.gpu_speed_cv = 0.015;
    const auto on = estimate::estimate(model, free_net, cal, plan);
    EXPECT_EQ(off.variability_wait_s, 0.0);
    const double expected =
        0.015 * straggler::expected_max_standard_normal(16) * plan.num_microbatches() * off.bottleneck_stage_s;
    EXPECT_NEAR(on.variability_wait_s, expected, 1e-9 * expected);  // the free links' 1e-20 s per byte
    EXPECT_NEAR(on.iteration_s - off.iteration_s, expected, 1e-9 * expected);
  }
  // On a real cluster the share is of the compute alone: less than of the passes with their TP collectives and host
  // issue (this small model's passes are host-bound under the Megatron-Core stack).
  const ClusterSpec cluster = load_cluster("dgx-h100:16");
  Calibration cal = default_calibration("h100-sxm5-80gb");
  cal.gpu_speed_cv = 0.015;
  const auto e = estimate::estimate(model, cluster, cal, plan);
  const double of_passes =
      0.015 * straggler::expected_max_standard_normal(16) * plan.num_microbatches() * e.bottleneck_stage_s;
  EXPECT_GT(e.variability_wait_s, 0.2 * of_passes);
  EXPECT_LT(e.variability_wait_s, of_passes);
}

// MoE routing under random balanced dropless routing: the most loaded EP rank's expected slots are the mean +
// sqrt(slots (E - k) / (E - 1)) x E[max of ep normals] (strategies/transformer_costs.hpp, sampling_load_factor);
// its expert GEMMs and the all-to-all take that share; exact routing, one EP rank and capacity-capped routing none.
TEST(StragglerModel, RandomRoutingSizesTheExpertsByTheMostLoadedEpRank) {
  TransformerSpec m = model_preset("mixtral-8x7b");
  ASSERT_TRUE(m.moe.enabled());
  ParallelPlan plan;
  plan.ep = 8;
  plan.dp = 8;
  plan.micro_batch_size = 1;
  plan.global_batch_size = 64;
  auto expert_flops = [&](const ParallelPlan& p, double* a2a_bytes) {
    const cost::Shape sh = cost::shape_of(p, 1);
    double f = 0;
    *a2a_bytes = 0;
    for (const auto& st : cost::layer_passes(m, sh, true).forward) {
      for (const auto& op : st.ops)
        if (op.name.rfind("expert-fc", 0) == 0) f += op.flops;
      if (st.kind == cost::Step::Kind::TP_COLLECTIVE && st.collective == cost::CollectiveKind::ALL_TO_ALL &&
          *a2a_bytes == 0)
        *a2a_bytes = st.collective_bytes;
    }
    return f;
  };
  plan.routing = routing_from_string("exact", "test");
  double a2a_exact = 0, a2a_random = 0;
  const double exact = expert_flops(plan, &a2a_exact);
  plan.routing = routing_from_string("balanced", "test");
  const double random = expert_flops(plan, &a2a_random);
  const double E = m.moe.experts, k = m.moe.top_k, slots = m.seq_len * k;  // tp 1: every token of the micro-batch
  const double factor = 1 + straggler::expected_max_standard_normal(8) * std::sqrt((E - k) / ((E - 1) * slots));
  EXPECT_GT(exact, 0);
  EXPECT_NEAR(random / exact, factor, 1e-9);
  EXPECT_GT(a2a_exact, 0);
  EXPECT_NEAR(a2a_random / a2a_exact, factor, 1e-9);
  EXPECT_EQ(to_string(routing_from_string("exact", "test")), "exact");
  // One EP rank, or a capacity factor (the counts are capped): no sampling imbalance.
  plan.ep = 1;
  EXPECT_EQ(cost::sampling_load_factor(m.moe, cost::shape_of(plan, 1), slots), 1.0);
  plan.ep = 8;
  plan.routing = routing_from_string("balanced,cf:1", "test");
  EXPECT_EQ(cost::sampling_load_factor(m.moe, cost::shape_of(plan, 1), slots), 1.0);
}
