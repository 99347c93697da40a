// Oracle tests of FSDP2's float8 all-gather (ParallelPlan::fsdp_float8_all_gather; torchao Float8 training's
// enable_fsdp_float8_all_gather, torchtitan's [float8] option): under ZeRO-3 with per-tensor FP8 linears a decoder
// layer's linear weights are gathered in FP8, 1 byte per parameter, its norms in the model's dtype; the embedding and
// output head gather as before. Checked against the closed form of the bytes on the wire, with the plan's checks.
#include <gtest/gtest.h>

#include <string>

#include "strategies/transformer_costs.hpp"
#include "tests/support/sim_fixture.hpp"
#include "traces/error.hpp"

using namespace dtsim;
using namespace dtsim::testing;

namespace {
struct Case {
  TransformerSpec m = model_preset("llama3-8b");
  ClusterSpec c = load_cluster("dgx-h100:8");
  ParallelPlan plan;
  Calibration cal = default_calibration("h100-sxm5-80gb");
  SimOptions opt;
  Case() {
    m.num_layers = 4;
    plan.dp = 8;
    plan.zero_stage = 3;
    plan.precision = Precision::FP8_CURRENT;
    plan.micro_batch_size = 1;
    plan.global_batch_size = 16;
    opt.network = NetworkMode::ANALYTIC;
  }
};
// Flow bytes of the parameter all-gathers of decoder layers (layer >= 0) or of the embedding and head (layer < 0).
double gather_bytes(const Lowered& low, bool layers) {
  double s = 0;
  for (const auto& t : low.graph.tasks())
    if (t.kind == TaskKind::FLOW && t.name >= 0 &&
        low.graph.names()[static_cast<std::size_t>(t.name)] == "param-gather all-gather" && (t.layer >= 0) == layers)
      s += t.bytes;
  return s;
}
}  // namespace

// Per layer and rank: (L + N) x 2 bytes gathered in bf16, L x 1 + N x 2 with the float8 all-gather (L the linear
// weights, N = 4 h the two RMSNorm weights as layer_params_per_rank counts them); the ring's per-rank share is the
// same factor on both, so the ratio is exact.
TEST(FsdpFloat8, GathersTheLinearWeightsInOneByte) {
  Case on, off;
  on.plan.fsdp_float8_all_gather = true;
  on.plan.validate(on.m, on.c);
  off.plan.validate(off.m, off.c);
  const Lowered a = lower(on.m, on.c, on.plan, on.cal, on.opt), b = lower(off.m, off.c, off.plan, off.cal, off.opt);
  const double params = cost::layer_params_per_rank(on.m, 1, 1), norms = 4.0 * on.m.hidden;
  EXPECT_DOUBLE_EQ(cost::layer_replicated_params(on.m), norms);
  const double want = ((params - norms) * 1 + norms * 2) / (params * 2);
  ASSERT_GT(gather_bytes(b, true), 0);
  EXPECT_NEAR(gather_bytes(a, true) / gather_bytes(b, true), want, 1e-12);
  ASSERT_GT(gather_bytes(b, false), 0);
  EXPECT_DOUBLE_EQ(gather_bytes(a, false), gather_bytes(b, false));
  // Fewer bytes on the same ring: never slower.
  Inputs ia{&on.m, &on.c, &on.plan, &on.cal, &on.opt}, ib{&off.m, &off.c, &off.plan, &off.cal, &off.opt};
  EXPECT_LE(simulate(ia).report.iteration_time_s, simulate(ib).report.iteration_time_s);
}

TEST(FsdpFloat8, PlanChecksTheOption) {
  Case k;
  k.plan.fsdp_float8_all_gather = true;
  auto refused = [&](const TransformerSpec& model, const ParallelPlan& p, const std::string& what) {
    try {
      p.validate(model, k.c);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  ParallelPlan z1 = k.plan;
  z1.zero_stage = 1;
  refused(k.m, z1, "fsdp_float8_all_gather (--fsdp-float8-all-gather) has no effect unless zero stage is 3");
  ParallelPlan bf16 = k.plan;
  bf16.precision = Precision::BF16;
  refused(k.m, bf16, "without per-tensor FP8 linears");
  ParallelPlan rowwise = k.plan;
  rowwise.precision = Precision::FP8_ROWWISE;
  refused(k.m, rowwise, "without per-tensor FP8 linears");
  ParallelPlan moe = k.plan;
  moe.ep = 8;
  refused(model_preset("qwen3-30b-a3b"), moe, "modelled for dense attention + MLP layers only");
  const ParallelPlan back = plan_from_json(to_json(k.plan, 4), "t");
  EXPECT_TRUE(back.fsdp_float8_all_gather);
}
