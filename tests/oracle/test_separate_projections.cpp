// Oracle tests of separate projection GEMMs (Calibration::fused_projections false, the torchtitan stack's;
// torchtitan/models/llama/model.py at e846b6946: wq, wk, wv and w1, w3 are separate nn.Linear modules). Megatron runs
// the QKV projection and SwiGLU's gate and up projections as one GEMM each; torchtitan runs one GEMM per module, each
// at the efficiency of its own size and each reading the whole input, and autograd sums the modules' input gradients.
// The closed forms: the sum of the modules' GEMMs (and, for the activation gradient, one input-sized add per module
// after the first); stacks that fuse time the one GEMM as before.
#include <gtest/gtest.h>

#include <string>

#include "strategies/transformer_costs.hpp"
#include "tests/support/cost_shape.hpp"
#include "tests/support/sim_fixture.hpp"
#include "traces/stack_profile.hpp"

using namespace dtsim;
using namespace dtsim::testing;

namespace {
const cost::Op& find_op(const std::vector<cost::Step>& steps, const std::string& name) {
  for (const auto& st : steps)
    for (const auto& op : st.ops)
      if (op.name == name) return op;
  ADD_FAILURE() << "no op " << name;
  static const cost::Op none;
  return none;
}

// One GEMM batch 1 x (m x k) * (k x n) in bf16, as the cost model sizes it.
cost::Op plain_gemm(double m, double k, double n, bool weight_grad) {
  cost::Op o;
  o.gemm = true;
  o.flops = 2 * m * k * n;
  o.bytes = (m * k + k * n + m * n) * 2;
  o.weight_grad = weight_grad;
  o.m = m;
  o.k = k;
  o.n = n;
  return o;
}
}  // namespace

TEST(SeparateProjections, ModulesTimedAsTheirOwnGemms) {
  // Llama 3 8B at TP 8 with sequence parallelism: per rank wq 4096 -> 512, wk and wv 4096 -> 128, w1 and w3
  // 4096 -> 1792, on the 8,192 gathered tokens of one sequence.
  const TransformerSpec m = model_preset("llama3-8b");
  const auto lp = cost::layer_passes(m, layer_shape(8, true), false);
  const double T = m.seq_len, h = m.hidden, q = 4096.0 / 8, kv = 1024.0 / 8, f = 14336.0 / 8;
  const cost::Op& qkv = find_op(lp.forward, "qkv");
  ASSERT_EQ(qkv.separate.size(), 3u);
  EXPECT_DOUBLE_EQ(qkv.separate[0], 4096.0 / 6144);
  EXPECT_DOUBLE_EQ(qkv.separate[1], 1024.0 / 6144);
  EXPECT_DOUBLE_EQ(qkv.n, q + 2 * kv);
  EXPECT_FALSE(qkv.separate_on_k);
  const cost::Op& qkv_d = find_op(lp.backward, "qkv-dgrad");
  const cost::Op& qkv_w = find_op(lp.backward, "qkv-wgrad");
  EXPECT_TRUE(qkv_d.separate_on_k);
  EXPECT_FALSE(qkv_w.separate_on_k);
  const cost::Op& fc1 = find_op(lp.forward, "fc1");
  ASSERT_EQ(fc1.separate.size(), 2u);
  EXPECT_DOUBLE_EQ(fc1.separate[0], 0.5);
  EXPECT_TRUE(find_op(lp.forward, "fc2").separate.empty());
  EXPECT_TRUE(find_op(lp.forward, "proj").separate.empty());

  const GpuSpec gpu = gpu_preset("h100-sxm5-80gb");
  const Calibration hw = default_calibration("h100-sxm5-80gb");
  const Calibration titan = with_stack(hw, "torchtitan"), core = with_stack(hw, "megatron-core");
  ASSERT_FALSE(titan.fused_projections);
  ASSERT_TRUE(core.fused_projections);
  auto t = [&](const cost::Op& o, const Calibration& c) { return cost::op_time_s(o, gpu, m.dtype, c); };
  // Forward: wq, wk, wv; w1, w3 (the bf16 GEMM with the torchtitan calibration's values).
  EXPECT_NEAR(t(qkv, titan), t(plain_gemm(T, h, q, false), titan) + 2 * t(plain_gemm(T, h, kv, false), titan), 1e-12);
  EXPECT_NEAR(t(fc1, titan), 2 * t(plain_gemm(T, h, f, false), titan), 1e-12);
  // Weight gradients: X^T (h x T) times each module's output gradient.
  EXPECT_NEAR(t(qkv_w, titan), t(plain_gemm(h, T, q, true), titan) + 2 * t(plain_gemm(h, T, kv, true), titan), 1e-12);
  // Activation gradients: each module's dY_i W_i (the reduction split), then two adds of the T x h gradient.
  const double add_s = 3 * T * h * 2 / (gpu.hbm_Bps * titan.memory_bandwidth_efficiency) + titan.kernel_launch_s;
  EXPECT_NEAR(t(qkv_d, titan),
              t(plain_gemm(T, q, h, false), titan) + 2 * t(plain_gemm(T, kv, h, false), titan) + 2 * add_s, 1e-12);
  EXPECT_NEAR(t(find_op(lp.backward, "fc1-dgrad"), titan), 2 * t(plain_gemm(T, f, h, false), titan) + add_s, 1e-12);
  // A stack that fuses them: the one GEMM, as sized.
  EXPECT_NEAR(t(qkv, core), t(plain_gemm(T, h, q + 2 * kv, false), core), 1e-12);
  EXPECT_NEAR(t(qkv_d, core), t(plain_gemm(T, q + 2 * kv, h, false), core), 1e-12);
  // The skinny modules cost more than their share of the fused GEMM (each reads the whole input).
  EXPECT_GT(t(qkv, titan), t(qkv, core));
}

TEST(SeparateProjections, OneModuleOfARecomputeIsOneGemm) {
  // torchtitan's op-level checkpointing re-runs every second matmul: wk of the QKV projection, w3 of FC1 (their
  // shares), each one module: no further split.
  const TransformerSpec m = model_preset("llama3-8b");
  cost::Shape sh = layer_shape(1, false);
  sh.recompute = Recompute::SELECTIVE;
  sh.recompute_modules = RECOMPUTE_OP_SAC;
  const auto lp = cost::layer_passes(m, sh, false);
  int gemms = 0;
  for (const auto& st : lp.recompute)
    for (const auto& op : st.ops) {
      EXPECT_TRUE(op.separate.empty()) << op.name;
      gemms += op.gemm;
    }
  EXPECT_GE(gemms, 2);
}

TEST(SeparateProjections, StackProfileField) {
  EXPECT_FALSE(stack_profile("torchtitan").fused_projections);
  for (const char* s : {"megatron-core", "megatron-lm", "megatron-deepspeed"})
    EXPECT_TRUE(stack_profile(s).fused_projections) << s;
  auto j = to_json(stack_profile("torchtitan"));
  EXPECT_FALSE(stack_profile_from_json(j, "t").fused_projections);
  j.erase("fused_projections");
  EXPECT_TRUE(stack_profile_from_json(j, "t").fused_projections);  // the default: fused
}
