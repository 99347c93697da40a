// Oracle: what a pipeline transfer between stages with tensor parallelism carries, by software stack
// (Calibration::pp_scatter_gather). Closed forms per micro-batch and direction for a stage of TP degree t and an
// activation of A bytes (micro-batch x seq x hidden x dtype):
//   Megatron-Core ("none"): sequence parallelism, t flows of A / t; without, t flows of A (each TP rank its own copy:
//     megatron/core/pipeline_parallel/schedules.py get_tensor_shapes); nothing gathered after the receive.
//   Megatron-LM ("without_sp", scatter_gather_tensors_in_pipeline, megatron/p2p_communication.py 2021-01..2023-01):
//     t flows of A / t, all-gathered over TP after the receive, except under sequence parallelism (no gather).
//   DeepSpeed ("always", pipe_partitioned): t flows of A / t and the all-gather, sequence parallelism or not.
// The footprint estimate counts the tasks the lowering makes; the estimator's transfer follows the bytes.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "sim/model/footprint.hpp"
#include "sim/simulate.hpp"
#include "strategies/estimator.hpp"
#include "traces/stack_profile.hpp"

namespace dtsim {
namespace {
using namespace dtsim::sim;

const TransformerSpec& model() {
  static const TransformerSpec m = [] {
    TransformerSpec x = model_preset("gpt3-1.3b");
    x.num_layers = 4;
    return x;
  }();
  return m;
}

/// The A100 calibration with the stack's pp_scatter_gather pinned to `mode` (a stack profile cannot override it).
Calibration cal(const std::string& mode) {
  Calibration c = with_stack(default_calibration("a100-sxm4-80gb"), "megatron-core");
  c.pp_scatter_gather = mode;
  c.pin("pp_scatter_gather");
  return c;
}

/// TP 4 x PP 2 on 8 A100s, 2 micro-batches of 2 sequences, 1F1B.
ParallelPlan plan(bool sp) {
  ParallelPlan p;
  p.tp = 4;
  p.pp = 2;
  p.micro_batch_size = 2;
  p.global_batch_size = 4;
  p.sequence_parallel = sp;
  return p;
}

struct Transfers {
  std::map<int, double> fwd_bytes, bwd_bytes;  ///< per micro-batch, summed over the TP ranks
  std::map<int, int> fwd_flows;
  double largest_flow = 0;
  int gathers = 0;
  std::size_t tasks = 0;
};

Transfers lower_plan(const ParallelPlan& p, const Calibration& c) {
  const ClusterSpec cluster = load_cluster("dgx-a100:8");
  SimOptions opt;
  opt.fold = FoldMode::NONE;
  p.validate(model(), cluster);
  const Lowered low = lower(model(), cluster, p, c, opt);
  const auto& g = low.graph;
  Transfers t;
  t.tasks = g.size();
  for (const auto& task : g.tasks()) {
    const std::string& name = g.names()[static_cast<std::size_t>(task.name)];
    if (name == "pp-gather all-gather") ++t.gathers;
    if (task.kind != TaskKind::FLOW || task.peer < 0) continue;
    if (name == "send-activation") {
      t.fwd_bytes[task.microbatch] += task.bytes;
      ++t.fwd_flows[task.microbatch];
      t.largest_flow = std::max(t.largest_flow, task.bytes);
    } else if (name == "send-gradient") {
      t.bwd_bytes[task.microbatch] += task.bytes;
    }
  }
  const Footprint f = estimate_footprint(model(), cluster, p, c, opt, {});
  EXPECT_NEAR(f.tasks, static_cast<double>(g.size()), 0.02 * static_cast<double>(g.size()));
  return t;
}

double activation() {
  return plan(false).micro_batch_size * static_cast<double>(model().seq_len) * model().hidden *
         dtype_bytes(model().dtype);
}

void expect_transfers(const Transfers& t, double per_mb, double flow, bool gathered, const std::string& what) {
  ASSERT_EQ(t.fwd_bytes.size(), 2u) << what;
  for (const auto& [mb, bytes] : t.fwd_bytes) {
    EXPECT_NEAR(bytes, per_mb, 1e-9 * per_mb) << what << ", micro-batch " << mb;
    EXPECT_NEAR(t.bwd_bytes.at(mb), per_mb, 1e-9 * per_mb) << what << ", micro-batch " << mb;
    EXPECT_EQ(t.fwd_flows.at(mb), 4) << what;
  }
  EXPECT_NEAR(t.largest_flow, flow, 1e-9 * flow) << what;
  if (gathered) EXPECT_GT(t.gathers, 0) << what;
  else EXPECT_EQ(t.gathers, 0) << what;
}

TEST(PpTransfers, MegatronCoreSendsEachTpRanksOwnCopy) {
  const double a = activation();
  expect_transfers(lower_plan(plan(true), cal("none")), a, a / 4, false, "megatron-core, sp");
  expect_transfers(lower_plan(plan(false), cal("none")), 4 * a, a, false, "megatron-core, no sp");
}

TEST(PpTransfers, MegatronLmScattersAndGathersWithoutSequenceParallelism) {
  const double a = activation();
  expect_transfers(lower_plan(plan(false), cal("without_sp")), a, a / 4, true, "megatron-lm, no sp");
  expect_transfers(lower_plan(plan(true), cal("without_sp")), a, a / 4, false, "megatron-lm, sp");
}

TEST(PpTransfers, DeepSpeedPartitionsWhateverThePlan) {
  const double a = activation();
  expect_transfers(lower_plan(plan(false), cal("always")), a, a / 4, true, "deepspeed, no sp");
  expect_transfers(lower_plan(plan(true), cal("always")), a, a / 4, true, "deepspeed, sp");
}

TEST(PpTransfers, ShippedStacksSayHowTheySend) {
  const Calibration hw = default_calibration("a100-sxm4-80gb");
  EXPECT_EQ(with_stack(hw, "megatron-core").pp_scatter_gather, "none");
  EXPECT_EQ(with_stack(hw, "megatron-lm").pp_scatter_gather, "without_sp");
  EXPECT_EQ(with_stack(hw, "megatron-deepspeed").pp_scatter_gather, "always");
  EXPECT_EQ(with_stack(hw, "torchtitan").pp_scatter_gather, "none");
  Calibration bad = hw;
  bad.pp_scatter_gather = "sometimes";
  EXPECT_THROW(bad.validate("test"), ConfigError);
}

TEST(PpTransfers, EstimatorChargesTheWholeCopy) {
  // Without sequence parallelism a Megatron-Core rank sends t times the bytes of a scattering stack's: the
  // estimator's pipeline (its bubble's transfers) grows; under sequence parallelism both send 1/t.
  const ClusterSpec cluster = load_cluster("dgx-a100:8");
  const auto whole = estimate::estimate(model(), cluster, cal("none"), plan(false));
  const auto scattered = estimate::estimate(model(), cluster, cal("without_sp"), plan(false));
  EXPECT_GT(whole.pipeline_s, scattered.pipeline_s);
  const auto sp_none = estimate::estimate(model(), cluster, cal("none"), plan(true));
  const auto sp_lm = estimate::estimate(model(), cluster, cal("without_sp"), plan(true));
  EXPECT_DOUBLE_EQ(sp_none.pipeline_s, sp_lm.pipeline_s);
}

}  // namespace
}  // namespace dtsim
