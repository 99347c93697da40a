// Oracle tests of DeepSpeed's BF16_Optimizer (the megatron-deepspeed stack's bf16_optimizer; deepspeed/runtime/
// bf16_optimizer.py and pipe/engine.py, microsoft/DeepSpeed#1801): after every micro-batch's backward a memory-bound
// pass adds the bf16 gradients into fp32 copies (18 bytes per parameter), and under ZeRO-1 the gradients are
// all-reduced in full (twice a reduce-scatter's bytes) before the step's all-gather. Checked against the closed
// forms, with the footprint estimate and the planners' estimator following the lowering.
#include <gtest/gtest.h>

#include <string>

#include "sim/model/footprint.hpp"
#include "strategies/estimator.hpp"
#include "strategies/memory_model.hpp"
#include "tests/support/sim_fixture.hpp"
#include "traces/stack_profile.hpp"

using namespace dtsim;
using namespace dtsim::testing;

namespace {

struct Bf16Case {
  TransformerSpec m = model_preset("gpt3-1.3b");
  ClusterSpec c = load_cluster("dgx-a100:8");
  ParallelPlan plan;
  Calibration on, off;
  SimOptions opt;
  Bf16Case() {
    m.dtype = DType::BF16;
    plan.pp = 2;
    plan.dp = 4;
    plan.zero_stage = 1;
    plan.micro_batch_size = 1;
    plan.global_batch_size = 32;  // 8 micro-batches per pipeline
    plan.stack = "megatron-deepspeed";
    plan.validate(m, c);
    on = with_stack(default_calibration("a100-sxm4-80gb"), "megatron-deepspeed");
    off = on;
    off.bf16_optimizer = false;
    off.pin("bf16_optimizer");
    opt.network = NetworkMode::ANALYTIC;
  }
  double iteration_s(const Calibration& cal) const {
    Inputs in{&m, &c, &plan, &cal, &opt};
    return simulate(in).report.iteration_time_s;
  }
};

// Sum over the tasks named `name` of f(task), and how many there are.
template <typename F>
std::pair<double, int> sum_named(const Lowered& low, const std::string& name, F f) {
  double s = 0;
  int n = 0;
  for (const auto& t : low.graph.tasks())
    if (t.name >= 0 && low.graph.names()[static_cast<std::size_t>(t.name)] == name) s += f(t), ++n;
  return {s, n};
}

// Bytes of the flows of the collectives named `name`.
double flow_bytes(const Lowered& low, const std::string& name) {
  return sum_named(low, name, [](const Task& t) { return t.kind == TaskKind::FLOW ? t.bytes : 0.0; }).first;
}

}  // namespace

TEST(Bf16Optimizer, OnlyMegatronDeepSpeedRunsIt) {
  EXPECT_TRUE(stack_profile("megatron-deepspeed").bf16_optimizer);
  for (const char* s : {"megatron-lm", "megatron-core", "torchtitan"})
    EXPECT_FALSE(stack_profile(s).bf16_optimizer) << s;
  const Bf16Case st;
  EXPECT_TRUE(bf16_optimizer_active(st.on, true, 0));
  EXPECT_TRUE(bf16_optimizer_active(st.on, true, 1));
  EXPECT_FALSE(bf16_optimizer_active(st.on, false, 1));  // fp16: DeepSpeed's FP16 optimizers
  EXPECT_FALSE(bf16_optimizer_active(st.on, true, 2));   // ZeRO-2: its stage-1/2 optimizer
  EXPECT_FALSE(bf16_optimizer_active(st.off, true, 1));
}

// One accumulation pass per micro-batch on every rank, each moving 18 bytes per parameter of the rank's stage at the
// calibrated HBM bandwidth, plus one launch.
TEST(Bf16Optimizer, AccumulationPassPerMicroBatchMatchesClosedForm) {
  const Bf16Case st;
  const Lowered low = lower(st.m, st.c, st.plan, st.on, st.opt);
  const int mb = st.plan.num_microbatches();
  for (std::size_t si = 0; si < low.ranks.size(); ++si) {
    const int stage = low.ranks[si].coord.pp;
    const double params = memory::static_memory(st.m, st.plan.stage_view(stage), stage).params;
    const double expected =
        params * kBf16OptimizerAccumulateBytesPerParam / (st.c.gpu.hbm_Bps * st.on.memory_bandwidth_efficiency) +
        st.on.kernel_launch_s;
    double total = 0;
    int n = 0;
    for (const auto& t : low.graph.tasks())
      if (t.rank == static_cast<int>(si) && t.name >= 0 &&
          low.graph.names()[static_cast<std::size_t>(t.name)] == "hp-grad-accumulate") {
        EXPECT_EQ(t.kind, TaskKind::COMPUTE);
        EXPECT_NEAR(t.duration_s, expected, 1e-9 * expected);
        total += t.duration_s;
        ++n;
      }
    EXPECT_EQ(n, mb) << "rank " << si;
    EXPECT_NEAR(total, mb * expected, 1e-9 * mb * expected);
  }
  const Lowered without = lower(st.m, st.c, st.plan, st.off, st.opt);
  EXPECT_EQ(sum_named(without, "hp-grad-accumulate", [](const Task&) { return 1.0; }).second, 0);
}

// ZeRO-1: the gradient buckets are all-reduced (ring: 2 (n-1)/n of the bytes per rank) instead of reduce-scattered
// ((n-1)/n): twice the bytes; the parameter all-gather after the step is the same.
TEST(Bf16Optimizer, ZeroOneAllReducesTheGradients) {
  const Bf16Case st;
  const Lowered on = lower(st.m, st.c, st.plan, st.on, st.opt), off = lower(st.m, st.c, st.plan, st.off, st.opt);
  const double ar = flow_bytes(on, "grad-bucket all-reduce"), rs = flow_bytes(off, "grad-bucket reduce-scatter");
  ASSERT_GT(rs, 0);
  EXPECT_NEAR(ar, 2 * rs, 1e-9 * ar);
  const double ag_on = flow_bytes(on, "param-gather all-gather"), ag_off = flow_bytes(off, "param-gather all-gather");
  ASSERT_GT(ag_off, 0);
  EXPECT_NEAR(ag_on, ag_off, 1e-9 * ag_off);
}

// The tied embedding's gradients are all-reduced in fp32 (DeepSpeed all-reduces weight._hp_grad): twice the bf16
// bytes.
TEST(Bf16Optimizer, TiedEmbeddingGradientsInFp32) {
  const Bf16Case st;
  ASSERT_TRUE(st.m.tied_embeddings);
  const Lowered on = lower(st.m, st.c, st.plan, st.on, st.opt), off = lower(st.m, st.c, st.plan, st.off, st.opt);
  const double fp32 = flow_bytes(on, "embedding-grad all-reduce"), bf16 = flow_bytes(off, "embedding-grad all-reduce");
  ASSERT_GT(bf16, 0);
  EXPECT_NEAR(fp32, 2 * bf16, 1e-9 * fp32);
}

// The footprint estimate counts the added tasks and edges exactly; the estimator follows the simulator's slowdown.
TEST(Bf16Optimizer, FootprintAndEstimatorFollowTheLowering) {
  const Bf16Case st;
  const Lowered on = lower(st.m, st.c, st.plan, st.on, st.opt), off = lower(st.m, st.c, st.plan, st.off, st.opt);
  const auto f_on = estimate_footprint(st.m, st.c, st.plan, st.on, st.opt, {});
  const auto f_off = estimate_footprint(st.m, st.c, st.plan, st.off, st.opt, {});
  EXPECT_DOUBLE_EQ(f_on.tasks - f_off.tasks,
                   static_cast<double>(on.graph.size()) - static_cast<double>(off.graph.size()));
  EXPECT_DOUBLE_EQ(f_on.edges - f_off.edges,
                   static_cast<double>(on.graph.edge_count()) - static_cast<double>(off.graph.edge_count()));
  const double sim = st.iteration_s(st.on) - st.iteration_s(st.off);
  const double est = estimate::estimate(st.m, st.c, st.on, st.plan).iteration_s -
                     estimate::estimate(st.m, st.c, st.off, st.plan).iteration_s;
  ASSERT_GT(sim, 0);
  EXPECT_NEAR(est, sim, 0.3 * sim);
}

// Memory: the fp32 gradient copies (4 bytes per parameter of the rank's stage, not partitioned) add to the simulated
// ranks' gradient bytes and to the estimator's peak.
TEST(Bf16Optimizer, Fp32GradientCopiesInMemory) {
  const Bf16Case st;
  const Lowered on = lower(st.m, st.c, st.plan, st.on, st.opt), off = lower(st.m, st.c, st.plan, st.off, st.opt);
  ASSERT_EQ(on.ranks.size(), off.ranks.size());
  for (std::size_t i = 0; i < on.ranks.size(); ++i) {
    const int stage = on.ranks[i].coord.pp;
    const double params = memory::static_memory(st.m, st.plan.stage_view(stage), stage).params;
    EXPECT_DOUBLE_EQ(on.ranks[i].static_mem.gradient_bytes - off.ranks[i].static_mem.gradient_bytes, 4 * params);
  }
  const auto e_on = estimate::estimate(st.m, st.c, st.on, st.plan),
             e_off = estimate::estimate(st.m, st.c, st.off, st.plan);
  for (int s = 0; s < st.plan.pp; ++s)
    EXPECT_DOUBLE_EQ(
        e_on.stage_peak_bytes[static_cast<std::size_t>(s)] - e_off.stage_peak_bytes[static_cast<std::size_t>(s)],
        4 * memory::static_memory(st.m, st.plan.stage_view(s), s).params);
}
