// Oracle tests of torchtitan's op-level selective activation checkpointing (recompute module op_sac;
// strategies/transformer_costs.cpp op_sac_recompute): the policy keeps the outputs of every odd mm of a block (wq,
// wv, w1, w2), SDPA's and the reduce-scatters', so a Llama block's backward re-runs wk, wo (without tensor
// parallelism), w3, both norms, the residual add, the activation and, with sequence-parallel TP, both all-gathers --
// checked against the closed forms of that work and of what stays stored; the plan's checks of the option.
#include <gtest/gtest.h>

#include <string>

#include "strategies/transformer_costs.hpp"
#include "tests/support/sim_fixture.hpp"
#include "traces/error.hpp"

using namespace dtsim;
using namespace dtsim::testing;

namespace {
cost::Shape shape(int tp, Recompute r, unsigned mods) {
  cost::Shape sh;
  sh.micro_batch = 1;
  sh.tp = tp;
  sh.sequence_parallel = tp > 1;
  sh.recompute = r;
  sh.recompute_modules = mods;
  return sh;
}
double gemm_flops(const cost::LayerPasses& p) {
  double f = 0;
  for (const auto& st : p.recompute) f += st.flops();
  return f;
}
double bytes_of(const cost::LayerPasses& p, const std::string& name) {
  double b = 0;
  for (const auto& st : p.recompute)
    for (const auto& op : st.ops)
      if (op.name == name) b += op.bytes;
  return b;
}
int gathers(const cost::LayerPasses& p) {
  int n = 0;
  for (const auto& st : p.recompute)
    n += st.kind == cost::Step::Kind::TP_COLLECTIVE && st.collective == cost::CollectiveKind::ALL_GATHER ? 1 : 0;
  return n;
}
}  // namespace

// Llama 3 8B (GQA: 32 query heads, 8 KV heads of 128; SwiGLU), one sequence of T tokens. Without TP: 2 T h kv (wk)
// + 2 T qd h (wo) + 2 T h f (w3) FLOPs; with TP 4 and sequence parallelism: 2 T h kv / t + 2 T h f / t (wo's output
// feeds the saved reduce-scatter) and the two all-gathers. Both norms (2 T h e per rank's tokens, read and written),
// the activation (3 T f e / t) and the residual add are re-run either way; the attention core never.
TEST(OpSac, RecomputesTheUnsavedWorkOfALlamaBlock) {
  const TransformerSpec m = model_preset("llama3-8b");
  ASSERT_EQ(m.attention, AttentionKind::FLASH);
  const double T = m.seq_len, h = m.hidden, f = m.ffn_hidden, e = 2;
  const double kv = static_cast<double>(m.kv_heads) * m.head_dim(), qd = static_cast<double>(m.heads) * m.head_dim();
  for (int t : {1, 4}) {
    SCOPED_TRACE("tp " + std::to_string(t));
    const auto p = cost::layer_passes(m, shape(t, Recompute::SELECTIVE, RECOMPUTE_OP_SAC), false);
    const double want = 2 * T * h * kv / t + (t == 1 ? 2 * T * qd * h : 0) + 2 * T * h * f / t;
    EXPECT_NEAR(gemm_flops(p), want, 1e-9 * want);
    EXPECT_EQ(gathers(p), t > 1 ? 2 : 0);
    const double rows = t > 1 ? T / t : T;  // a replicated kernel's tokens (sequence parallel: the rank's shard)
    EXPECT_NEAR(bytes_of(p, "ln1") + bytes_of(p, "ln2"), 2 * 2 * rows * h * e, 1e-6);
    EXPECT_NEAR(bytes_of(p, "swiglu"), 3 * T * f / t * e, 1e-6);
    EXPECT_GT(bytes_of(p, "dropout-residual1"), 0);
    EXPECT_EQ(bytes_of(p, "flash-attention"), 0);
    // Between Korthikanti's selective recompute (nothing under FlashAttention) and full recompute.
    const auto full = cost::layer_passes(m, shape(t, Recompute::FULL, 0), false);
    EXPECT_LT(gemm_flops(p), 0.5 * gemm_flops(full));
  }
}

// Stored per layer: the block input x, q, v, SDPA's output and log-sum-exp, w1's and w2's outputs (T h on every TP
// rank, before the reduce-scatter), with sequence-parallel TP both reduce-scatter outputs; two one-byte dropout
// masks (the Megatron layer's, kept by dtsim's model). What the backward re-makes is held while it runs.
TEST(OpSac, StoresTheSavedTensorsOfALlamaBlock) {
  const TransformerSpec m = model_preset("llama3-8b");
  const double T = m.seq_len, h = m.hidden, f = m.ffn_hidden, e = 2, H = m.heads;
  const double kv = static_cast<double>(m.kv_heads) * m.head_dim(), qd = H * m.head_dim();
  for (int t : {1, 4}) {
    SCOPED_TRACE("tp " + std::to_string(t));
    const double rep = t > 1 ? 1.0 / t : 1.0;
    const auto a = cost::layer_activation_bytes(m, shape(t, Recompute::SELECTIVE, RECOMPUTE_OP_SAC), false);
    const double want = T * h * (e + 2) * rep + T * (qd + kv + qd) / t * e + (H / t) * T * 4 + T * f / t * e +
                        T * h * e + (t > 1 ? 2 * T * h * e * rep : 0);
    EXPECT_NEAR(a.stored, want, 1e-6 * want);
    const auto none = cost::layer_activation_bytes(m, shape(t, Recompute::NONE, 0), false);
    EXPECT_NEAR(a.transient, none.stored + (T * h * e + (t > 1 ? 2 * T * h * e * rep : 0)) - a.stored,
                1e-6 * none.stored);
  }
}

TEST(OpSac, PlanChecksTheOption) {
  const ClusterSpec c = load_cluster("dgx-h100:8");
  ParallelPlan plan;
  plan.tp = 8;
  plan.global_batch_size = 8;
  plan.recompute = Recompute::SELECTIVE;
  plan.sequence_parallel = true;
  plan.recompute_modules = RECOMPUTE_OP_SAC;
  EXPECT_NO_THROW(plan.validate(model_preset("llama3-8b"), c));
  const ParallelPlan back = plan_from_json(to_json(plan, 32), "t");
  EXPECT_EQ(back.recompute_modules, RECOMPUTE_OP_SAC);
  auto refused = [&](const TransformerSpec& model, const ParallelPlan& p, const std::string& what) {
    try {
      p.validate(model, c);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  ParallelPlan both = plan;
  both.recompute_modules |= RECOMPUTE_MLP;
  refused(model_preset("llama3-8b"), both, "cannot be combined with Megatron-Core's modules (mlp)");
  ParallelPlan moe = plan;
  moe.tp = 1;
  moe.sequence_parallel = false;
  moe.ep = 8;
  refused(model_preset("qwen3-30b-a3b"), moe, "modelled for dense attention + MLP blocks only");
}
