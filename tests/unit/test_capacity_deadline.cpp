// Capacity against a deadline (studies/plan/capacity_deadline.hpp): the hardware bound by hand, and the answer is the
// first GPU count whose simulated best strategy meets the deadline, with the cost computed by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "studies/plan/capacity_deadline.hpp"
#include "traces/error.hpp"

using namespace dtsim;
using namespace dtsim::sim;

namespace {
DeadlineInput small_input() {
  DeadlineInput in;
  in.model = model_preset("gpt3-1.3b");
  in.cluster_preset = "dgx-h100";
  in.calibration = default_calibration("h100-sxm5-80gb");
  in.global_batch_size = 16;
  in.top = 1;
  in.options.network = NetworkMode::ANALYTIC;
  return in;
}
}  // namespace

TEST(CapacityDeadline, BoundAndAnswerByHand) {
  DeadlineInput in = small_input();
  // 1e9 tokens in 1 day: 11,574 tokens/s. Bound by hand: per GPU at most peak x eff / (6 params) tokens/s.
  in.tokens = 1e9;
  in.days = 1e-6;  // unreachable: every count up to max_gpus is tried
  in.max_gpus = 4;
  const double params = static_cast<double>(in.model.total_params());
  const double per_gpu = 989e12 * in.calibration.gemm_efficiency_max / (6 * params);
  const DeadlineResult all = plan_for_deadline(in);
  EXPECT_NEAR(all.required_tokens_per_s, 1e9 / 0.0864, 1e-6 * all.required_tokens_per_s);
  EXPECT_NEAR(all.bound_gpus, all.required_tokens_per_s / per_gpu, 1e-9 * all.bound_gpus);
  ASSERT_EQ(all.answer, -1);
  // The scan starts at the largest power of two below the bound (here a huge bound: capped by max_gpus, so 4).
  ASSERT_EQ(all.steps.size(), 1u);
  EXPECT_EQ(all.steps[0].gpus, 4);

  // A reachable bound: 1e9 tokens in 100 days needs ~116 tokens/s, far below one GPU: the scan starts at 1 GPU.
  in.days = 100;
  in.max_gpus = 4;
  const DeadlineResult easy = plan_for_deadline(in);
  ASSERT_GE(easy.answer, 0);
  EXPECT_EQ(easy.steps.front().gpus, 1);
  EXPECT_EQ(easy.steps[easy.answer].gpus, 1);
  const DeadlineStep one = easy.steps[easy.answer];
  EXPECT_NEAR(one.days, 1e9 / one.tokens_per_s / 86400, 1e-9 * one.days);
  EXPECT_NEAR(one.tokens_per_s, 16.0 * 2048 / one.iteration_s, 1e-9 * one.tokens_per_s);

  // A deadline just under one GPU's time: one GPU fails, the next count (2) must be the answer if it is faster.
  in.days = one.days * 0.99;
  in.price_per_gpu_hour = 2.5;
  const DeadlineResult two = plan_for_deadline(in);
  ASSERT_GE(two.answer, 1);
  EXPECT_FALSE(two.steps[0].meets);
  const DeadlineStep& a = two.steps[two.answer];
  EXPECT_TRUE(a.meets);
  EXPECT_LE(a.days, in.days);
  for (int i = 0; i < two.answer; ++i) EXPECT_FALSE(two.steps[i].meets);
  EXPECT_NEAR(a.cost, 2.5 * a.gpus * a.days * 24, 1e-9 * a.cost);
  EXPECT_EQ(a.gpus, 1 << two.answer);
}

// GB200 NVL72: one node is a 72-GPU rack, and clusters past one rack come in whole racks. The counts tried are powers
// of two up to the rack, then whole racks, doubling (128 GPUs, not a whole number of racks, used to fail the scan).
// A bound between 64 and 72 GPUs: the scan starts at 64, which cannot meet the deadline (the bound is an upper limit
// on what a GPU does), then tries 72, 144, ... until one meets it. gpt3-1.3b at gbs 576 (= 64 x 9) has plans on
// 64 GPUs and on every whole number of racks.
TEST(CapacityDeadline, NvlRacksAreSteppedInWholeRacks) {
  DeadlineInput in = small_input();
  in.cluster_preset = "gb200-nvl72";
  in.calibration = default_calibration("gb200");
  in.global_batch_size = 576;
  in.max_gpus = 1152;
  const double params = static_cast<double>(in.model.total_params());
  const double peak = load_cluster("gb200-nvl72").gpu.peak_flops(in.model.dtype);
  const double per_gpu = peak * in.calibration.gemm_efficiency_max / (6 * params);
  in.days = 1;
  in.tokens = 66 * per_gpu * 86400;
  const DeadlineResult r = plan_for_deadline(in);
  EXPECT_NEAR(r.bound_gpus, 66, 1e-6);
  ASSERT_GE(r.steps.size(), 2u);
  EXPECT_EQ(r.steps[0].gpus, 64);
  EXPECT_FALSE(r.steps[0].meets);
  for (std::size_t i = 1; i < r.steps.size(); ++i) EXPECT_EQ(r.steps[i].gpus, 72 << (i - 1)) << i;
  ASSERT_GE(r.answer, 1);
  EXPECT_EQ(r.answer, static_cast<int>(r.steps.size()) - 1);
  const DeadlineStep& a = r.steps[r.answer];
  EXPECT_TRUE(a.found);
  EXPECT_TRUE(a.meets);
  EXPECT_EQ(a.plan.world_size(), a.gpus);
  EXPECT_EQ(a.gpus % 72, 0);

  // A bound above 288: the scan starts at the largest such count below it (288 = 4 racks), capped by max_gpus.
  in.tokens = 300 * per_gpu * 86400;
  in.days = 1;
  in.max_gpus = 288;
  const DeadlineResult big = plan_for_deadline(in);
  ASSERT_EQ(big.steps.size(), 1u);
  EXPECT_EQ(big.steps[0].gpus, 288);
}

TEST(CapacityDeadline, BadInputIsAConfigError) {
  DeadlineInput in = small_input();
  in.tokens = 0;
  in.days = 1;
  EXPECT_THROW(plan_for_deadline(in), ConfigError);
  in.tokens = 1e9;
  in.days = -1;
  EXPECT_THROW(plan_for_deadline(in), ConfigError);
  in.days = 1;
  in.cluster_preset = "no-such-cluster";
  EXPECT_THROW(plan_for_deadline(in), ConfigError);
}
