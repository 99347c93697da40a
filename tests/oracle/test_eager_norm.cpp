// Oracle tests of eager PyTorch's composite RMSNorm (Calibration::eager_rmsnorm, the torchtitan stack's; torchtitan/
// models/norms.py RMSNorm): uncompiled, a Llama block's two norms move 4e + 28 bytes per element forward and 8e + 60
// backward instead of one fused kernel's 2e and 3e; under torch.compile (ParallelPlan::torch_compile) they fuse. The
// op's time follows the bytes the stack's kernels move; stacks with fused norms are unchanged.
#include <gtest/gtest.h>

#include <string>

#include "strategies/transformer_costs.hpp"
#include "tests/support/sim_fixture.hpp"
#include "traces/stack_profile.hpp"

using namespace dtsim;
using namespace dtsim::testing;

namespace {
const cost::Op* find_op(const std::vector<cost::Step>& steps, const std::string& name) {
  for (const auto& st : steps)
    for (const auto& op : st.ops)
      if (op.name == name) return &op;
  return nullptr;
}
}  // namespace

TEST(EagerNorm, ComposeRmsNormBytesAndTime) {
  const TransformerSpec m = model_preset("llama3-8b");
  const double n = static_cast<double>(m.seq_len) * m.hidden, e = 2;
  cost::Shape sh;
  sh.micro_batch = 1;
  const auto eager = cost::layer_passes(m, sh, false);
  sh.torch_compile = true;
  const auto compiled = cost::layer_passes(m, sh, false);
  for (const char* ln : {"ln1", "ln2"}) {
    SCOPED_TRACE(ln);
    const cost::Op* f = find_op(eager.forward, ln);
    const cost::Op* b = find_op(eager.backward, std::string(ln) + "-bwd");
    ASSERT_NE(f, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_DOUBLE_EQ(f->eager_norm_bytes, n * (4 * e + 28));
    EXPECT_DOUBLE_EQ(b->eager_norm_bytes, n * (8 * e + 60));
    EXPECT_DOUBLE_EQ(f->bytes, 2 * n * e);  // one fused kernel: read and write once
    EXPECT_EQ(find_op(compiled.forward, ln)->eager_norm_bytes, 0);
    EXPECT_EQ(find_op(compiled.backward, std::string(ln) + "-bwd")->eager_norm_bytes, 0);
  }
  // The time: the eager composite's bytes where the stack runs it (torchtitan), the fused kernel's elsewhere.
  const GpuSpec gpu = gpu_preset("h100-sxm5-80gb");
  const Calibration hw = default_calibration("h100-sxm5-80gb");
  const Calibration titan = with_stack(hw, "torchtitan"), core = with_stack(hw, "megatron-core");
  ASSERT_TRUE(titan.eager_rmsnorm);
  ASSERT_FALSE(core.eager_rmsnorm);
  const cost::Op& ln1 = *find_op(eager.forward, "ln1");
  const double bw = gpu.hbm_Bps * titan.memory_bandwidth_efficiency;
  EXPECT_NEAR(cost::op_time_s(ln1, gpu, m.dtype, titan), ln1.eager_norm_bytes / bw + titan.kernel_launch_s, 1e-15);
  EXPECT_NEAR(cost::op_time_s(ln1, gpu, m.dtype, core),
              ln1.bytes / (gpu.hbm_Bps * core.memory_bandwidth_efficiency) + core.kernel_launch_s, 1e-15);
  // Full recompute re-runs the eager norms as they ran.
  sh.torch_compile = false;
  sh.recompute = Recompute::FULL;
  EXPECT_DOUBLE_EQ(find_op(cost::layer_passes(m, sh, false).recompute, "ln1")->eager_norm_bytes, n * (4 * e + 28));
}

TEST(EagerNorm, PlanKeepsTorchCompile) {
  ParallelPlan plan;
  plan.torch_compile = true;
  EXPECT_TRUE(plan_from_json(to_json(plan, 32), "t").torch_compile);
  EXPECT_FALSE(to_json(ParallelPlan{}, 32).contains("torch_compile"));
}
