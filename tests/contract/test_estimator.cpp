// The analytic estimator (planners' and sweeps' pre-filter) against the simulator: iteration time within 10%
// and the same peak memory as the simulated timeline's first stage (within 2%) on representative plans.
#include <gtest/gtest.h>

#include "sim/simulate.hpp"
#include "strategies/estimator.hpp"

using namespace dtsim;

namespace {
struct Case {
  const char* name;
  const char* model;
  const char* cluster;
  int tp, pp, dp, mbs, gbs;
  const char* schedule;
  Recompute recompute;
  int zero;
  int ep = 1;  ///< MoE: expert-parallel degree (sequence parallelism on with tp > 1, as Megatron-Core requires)
};
}  // namespace

class EstimatorVsSimulator : public ::testing::TestWithParam<Case> {};

TEST_P(EstimatorVsSimulator, AgreesWithinTenPercent) {
  const Case k = GetParam();
  TransformerSpec m = model_preset(k.model);
  ClusterSpec c = load_cluster(k.cluster);
  ParallelPlan p;
  p.tp = k.tp;
  p.pp = k.pp;
  p.dp = k.dp;
  p.micro_batch_size = k.mbs;
  p.global_batch_size = k.gbs;
  set_schedule(p, k.schedule, "test");
  p.recompute = k.recompute;
  p.zero_stage = k.zero;
  p.ep = k.ep;
  p.sequence_parallel = m.moe.enabled() && p.tp > 1;
  Calibration cal = default_calibration(c.gpu.name);
  const auto est = estimate::estimate(m, c, cal, p);
  sim::SimOptions opt;
  sim::Inputs in{&m, &c, &p, &cal, &opt};
  const auto s = sim::simulate(in);
  EXPECT_NEAR(est.iteration_s / s.report.iteration_time_s, 1.0, 0.10);
  EXPECT_NEAR(est.stage_peak_bytes[0] / s.report.ranks[0].peak_bytes, 1.0, 0.02);
}

INSTANTIATE_TEST_SUITE_P(
    Plans, EstimatorVsSimulator,
    ::testing::Values(
        Case{"gpt13_tp2pp2dp4", "gpt3-1.3b", "dgx-a100:16", 2, 2, 4, 2, 64, "1f1b", Recompute::NONE, 0},
        Case{"gpt175_full", "gpt3-175b", "dgx-a100:1024", 8, 8, 16, 1, 1536, "1f1b", Recompute::FULL, 0},
        Case{"gpt175_interleaved", "gpt3-175b", "dgx-a100:1024", 8, 8, 16, 1, 1536, "interleaved:3", Recompute::FULL,
             0},
        Case{"m18b_selective_zero1", "megatron-18b", "dgx-a100:256", 8, 2, 16, 1, 512, "1f1b", Recompute::SELECTIVE, 1},
        Case{"llama7b_dp32", "llama2-7b", "dgx-h100:64", 2, 1, 32, 2, 256, "1f1b", Recompute::NONE, 1},
        Case{"m39b_zbh2", "megatron-39b", "dgx-a100:512", 8, 4, 16, 1, 1024, "zb-h2", Recompute::FULL, 0},
        // MoE: the EP group inside a node, and one spanning two nodes (etp = tp = 2: stride 2, 16 GPUs), where the
        // all-to-all's off-node pieces take the NIC and the on-node ones NVLink at the same time.
        Case{"mixtral_ep8_in_node", "mixtral-8x7b", "dgx-h100:64", 1, 4, 16, 1, 256, "1f1b", Recompute::NONE, 1, 8},
        Case{"mixtral_ep8_two_nodes", "mixtral-8x7b", "dgx-h100:64", 2, 2, 16, 1, 256, "1f1b", Recompute::NONE, 1, 8},
        // Fine-grained experts (128 of 768, top-8), ZeRO-1 over 32 data-parallel ranks with 4 per node: the
        // reduce-scatter and all-gather rings spread over every member's NIC (as the simulator's spread_ring).
        Case{"qwen3_30b_ep8_zero1", "qwen3-30b-a3b", "dgx-h100:64", 2, 1, 32, 1, 256, "1f1b", Recompute::NONE, 1, 8}),
    [](const ::testing::TestParamInfo<Case>& p) { return std::string(p.param.name); });
