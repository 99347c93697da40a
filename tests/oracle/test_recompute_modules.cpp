// Oracle tests of selective recompute by module (issue "Workloads"; Megatron-Core's --recompute-modules,
// megatron/core/transformer/transformer_config.py): each module recomputes its own forward work -- checked against the
// closed form of that work -- and frees its own activations, no more; the plan file and the checks of the options.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "strategies/memory_model.hpp"
#include "strategies/transformer_costs.hpp"
#include "tests/support/sim_fixture.hpp"
#include "traces/error.hpp"

using namespace dtsim;
using namespace dtsim::testing;

namespace {
cost::Shape shape(int tp, int ep, unsigned mods) {
  cost::Shape sh;
  sh.micro_batch = 1;
  sh.tp = tp;
  sh.sequence_parallel = tp > 1;
  sh.ep = ep;
  sh.etp = tp;
  sh.recompute = Recompute::SELECTIVE;
  sh.recompute_modules = mods;
  return sh;
}
double recompute_flops(const cost::LayerPasses& p) {
  double f = 0;
  for (const auto& st : p.recompute) f += st.flops();
  return f;
}
double op_bytes(const cost::LayerPasses& p, const std::string& name) {
  double b = 0;
  for (const auto& st : p.recompute)
    for (const auto& op : st.ops)
      if (op.name == name) b += op.bytes;
  return b;
}
int steps_of(const cost::LayerPasses& p, cost::CollectiveKind k) {
  int n = 0;
  for (const auto& st : p.recompute) n += st.kind != cost::Step::Kind::COMPUTE && st.collective == k ? 1 : 0;
  return n;
}
// Bytes a module set frees relative to keeping everything (the NONE case), and what it re-makes in the backward.
std::pair<double, double> freed(const TransformerSpec& m, cost::Shape sh, bool moe) {
  const cost::ActivationBytes with = cost::layer_activation_bytes(m, sh, moe);
  sh.recompute = Recompute::NONE;
  sh.recompute_modules = 0;
  return {cost::layer_activation_bytes(m, sh, moe).stored - with.stored, with.transient};
}
// The plan's validation refuses `p` with a message containing `what`.
void expect_refused(const TransformerSpec& model, const ClusterSpec& c, const ParallelPlan& p,
                    const std::string& what) {
  try {
    p.validate(model, c);
    ADD_FAILURE() << "accepted: " << what;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(RecomputeModules, NamesParseAndPrintInMegatronOrder) {
  EXPECT_EQ(recompute_modules_from_string("moe_act,core_attn", "t"), RECOMPUTE_CORE_ATTN | RECOMPUTE_MOE_ACT);
  EXPECT_EQ(recompute_modules_to_string(RECOMPUTE_MOE_ACT | RECOMPUTE_CORE_ATTN), "core_attn,moe_act");
  EXPECT_EQ(recompute_modules_to_string((1U << kRecomputeModules) - 1),
            "core_attn,moe_act,layernorm,mla_up_proj,mlp,moe,shared_experts,op_sac");
  EXPECT_THROW(
      {
        try {
          (void)recompute_modules_from_string("core_attn,attn", "--recompute-modules");
        } catch (const ConfigError& e) {
          EXPECT_NE(std::string(e.what()).find("unknown recompute module 'attn'"), std::string::npos) << e.what();
          throw;
        }
      },
      ConfigError);
  EXPECT_THROW((void)recompute_modules_from_string("", "t"), ConfigError);
  EXPECT_THROW((void)recompute_modules_from_string("core_attn,", "t"), ConfigError);
}

// A dense Llama layer at TP 4 with sequence parallelism: mlp re-runs FC1 + FC2 (6 T h f / t FLOPs) with its
// all-gather and reduce-scatter and frees the FC1 and SwiGLU outputs (3 T f e / t); layernorm re-runs both norms
// (2 x 2 T h e / t bytes) and frees their outputs (2 T h e / t); core_attn re-runs FlashAttention's forward
// (2 b (H/t) s^2/2 (d_qk + d_v)) and frees its log-sum-exp (b (H/t) s 4 bytes).
TEST(RecomputeModules, DenseModulesRecomputeAndFreeTheirClosedForms) {
  const TransformerSpec m = model_preset("llama3-8b");
  const int t = 4;
  const double T = m.seq_len, h = m.hidden, f = m.ffn_hidden, e = 2, H = m.heads, dh = m.head_dim();
  {
    const cost::Shape sh = shape(t, 1, RECOMPUTE_MLP);
    const auto p = cost::layer_passes(m, sh, false);
    EXPECT_NEAR(recompute_flops(p), 6 * T * h * f / t, 1e-9 * 6 * T * h * f / t);
    EXPECT_EQ(steps_of(p, cost::CollectiveKind::ALL_GATHER), 1);
    EXPECT_EQ(steps_of(p, cost::CollectiveKind::REDUCE_SCATTER), 1);
    const auto [drop, transient] = freed(m, sh, false);
    EXPECT_NEAR(drop, 3 * T * f * e / t, 1e-6);
    EXPECT_NEAR(transient, drop, 1e-6);
  }
  {
    const cost::Shape sh = shape(t, 1, RECOMPUTE_LAYERNORM);
    const auto p = cost::layer_passes(m, sh, false);
    EXPECT_EQ(recompute_flops(p), 0);
    EXPECT_NEAR(op_bytes(p, "ln1") + op_bytes(p, "ln2"), 2 * 2 * T * h * e / t, 1e-6);
    EXPECT_EQ(steps_of(p, cost::CollectiveKind::ALL_GATHER), 0);
    EXPECT_NEAR(freed(m, sh, false).first, 2 * T * h * e / t, 1e-6);
  }
  {
    const cost::Shape sh = shape(t, 1, RECOMPUTE_CORE_ATTN);
    const auto p = cost::layer_passes(m, sh, false);
    const double flash = 2 * (H / t) * T * T / 2 * (dh + dh);
    EXPECT_NEAR(recompute_flops(p), flash, 1e-9 * flash);
    EXPECT_NEAR(freed(m, sh, false).first, (H / t) * T * 4, 1e-6);
    // Korthikanti's selective recompute (no modules) recomputes nothing under FlashAttention.
    EXPECT_TRUE(cost::layer_passes(m, shape(t, 1, 0), false).recompute.empty());
  }
  // Modules add up: the union recomputes and frees the sum of its parts.
  const unsigned all = RECOMPUTE_MLP | RECOMPUTE_LAYERNORM | RECOMPUTE_CORE_ATTN;
  double parts_flops = 0, parts_freed = 0;
  for (unsigned b : {RECOMPUTE_MLP, RECOMPUTE_LAYERNORM, RECOMPUTE_CORE_ATTN}) {
    parts_flops += recompute_flops(cost::layer_passes(m, shape(t, 1, b), false));
    parts_freed += freed(m, shape(t, 1, b), false).first;
  }
  EXPECT_NEAR(recompute_flops(cost::layer_passes(m, shape(t, 1, all), false)), parts_flops, 1e-9 * parts_flops);
  EXPECT_NEAR(freed(m, shape(t, 1, all), false).first, parts_freed, 1e-6 * parts_freed);
}

// DeepSeek-V3 (MLA, 256 routed experts top-8, one shared expert) at TP 2, EP 8: moe_act re-runs the experts' SwiGLU
// (3 N f_e e bytes, N = T/t k etp tokens) and frees its output (N f_e e); mla_up_proj re-runs the q and kv
// up-projections (2 T r_q H/t d_qk + 2 T r_kv H/t (d_nope + d_v)) and frees q, k, v; moe re-runs the whole block, both
// all-to-alls included; shared_experts its dense FFN with the TP gather and scatter.
TEST(RecomputeModules, MoeAndMlaModulesRecomputeAndFreeTheirClosedForms) {
  const TransformerSpec m = model_preset("deepseek-v3");
  const int t = 2, ep = 8;
  const auto& x = m.moe;
  const double T = m.seq_len, e = 2, Ht = static_cast<double>(m.heads) / t, k = x.top_k,
               fe = static_cast<double>(x.expert_ffn_hidden) / t;
  const double N = T / t * k * t;
  {
    const cost::Shape sh = shape(t, ep, RECOMPUTE_MOE_ACT);
    const auto p = cost::layer_passes(m, sh, true);
    EXPECT_NEAR(op_bytes(p, "expert-swiglu"), 3 * N * fe * e, 1e-6 * N * fe);
    EXPECT_EQ(recompute_flops(p), 0);
    EXPECT_EQ(steps_of(p, cost::CollectiveKind::ALL_TO_ALL), 0);
    EXPECT_NEAR(freed(m, sh, true).first, N * fe * e, 1e-6 * N * fe);
  }
  {
    const cost::Shape sh = shape(t, ep, RECOMPUTE_MLA_UP_PROJ);
    const auto p = cost::layer_passes(m, sh, true);
    const auto& a = m.mla;
    const double up = 2 * T * a.q_lora_rank * Ht * (a.qk_nope_head_dim + a.qk_rope_head_dim) +
                      2 * T * a.kv_lora_rank * Ht * (a.qk_nope_head_dim + a.v_head_dim);
    EXPECT_NEAR(recompute_flops(p), up, 1e-9 * up);
    const double qkv = T * Ht * ((a.qk_nope_head_dim + a.qk_rope_head_dim) * 2 + a.v_head_dim) * e;
    EXPECT_NEAR(freed(m, sh, true).first, qkv, 1e-6 * qkv);
  }
  {
    const cost::Shape sh = shape(t, ep, RECOMPUTE_MOE);
    const auto p = cost::layer_passes(m, sh, true);
    EXPECT_EQ(steps_of(p, cost::CollectiveKind::ALL_TO_ALL), 2);  // dispatch and combine
    double moe_fwd = 0;
    for (const auto& st : cost::layer_passes(m, shape(t, ep, 0), true).forward)
      if (st.name.rfind("moe-", 0) == 0 || st.name.rfind("shared-", 0) == 0) moe_fwd += st.flops();
    EXPECT_NEAR(recompute_flops(p), moe_fwd, 1e-9 * moe_fwd);
    // Everything the block keeps is freed: more than the experts' activation and the shared experts' parts.
    EXPECT_GT(freed(m, sh, true).first,
              freed(m, shape(t, ep, RECOMPUTE_MOE_ACT | RECOMPUTE_SHARED_EXPERTS), true).first);
  }
  {
    const cost::Shape sh = shape(t, ep, RECOMPUTE_SHARED_EXPERTS);
    const auto p = cost::layer_passes(m, sh, true);
    const double sf = static_cast<double>(x.shared_ffn_hidden) / t;
    EXPECT_NEAR(recompute_flops(p), 6 * T * m.hidden * sf, 1e-9 * 6 * T * m.hidden * sf);
    EXPECT_EQ(steps_of(p, cost::CollectiveKind::ALL_GATHER), 1);
    EXPECT_NEAR(freed(m, sh, true).first, T * sf * 3 * e, 1e-6 * T * sf);
  }
}

// A plan with modules simulates between Korthikanti's selective and full recompute in time, and frees memory as
// the closed forms say; the plan file keeps the modules; the options are checked.
TEST(RecomputeModules, PlanSimulatesAndChecksItsOptions) {
  const TransformerSpec m = model_preset("llama3-8b");
  const ClusterSpec c = load_cluster("dgx-h100:8");
  ParallelPlan plan;
  plan.tp = 8;
  plan.global_batch_size = 8;
  plan.recompute = Recompute::SELECTIVE;
  plan.sequence_parallel = true;
  const Calibration cal = default_calibration("h100-sxm5-80gb");
  auto time_of = [&](const ParallelPlan& p) {
    SimOptions opt;
    opt.engine = FlowEngine::MAXMIN;
    Inputs in{&m, &c, &p, &cal, &opt};
    return simulate(in).report.iteration_time_s;
  };
  const double selective = time_of(plan);
  ParallelPlan mods = plan;
  mods.recompute_modules = RECOMPUTE_CORE_ATTN | RECOMPUTE_MLP | RECOMPUTE_LAYERNORM;
  ParallelPlan full = plan;
  full.recompute = Recompute::FULL;
  const double with_modules = time_of(mods), with_full = time_of(full);
  EXPECT_GT(with_modules, selective);
  EXPECT_LT(with_modules, with_full);
  const double peak_sel = memory::analytic_peak_bytes(m, plan, 0, 0);
  const double peak_mod = memory::analytic_peak_bytes(m, mods, 0, 0);
  EXPECT_LT(peak_mod, peak_sel);

  const ParallelPlan back = plan_from_json(to_json(mods, m.num_layers), "t");
  EXPECT_EQ(back.recompute_modules, mods.recompute_modules);
  EXPECT_FALSE(to_json(plan, m.num_layers).contains("recompute_modules"));

  auto refused = [&](const TransformerSpec& model, const ParallelPlan& p, const std::string& what) {
    expect_refused(model, c, p, what);
  };
  ParallelPlan full_mods = full;
  full_mods.recompute_modules = RECOMPUTE_MLP;
  refused(m, full_mods, "needs recompute selective");
  ParallelPlan mla = plan;
  mla.recompute_modules = RECOMPUTE_MLA_UP_PROJ;
  refused(m, mla, "recompute module mla_up_proj has no effect without multi-head latent attention");
  ParallelPlan moe = plan;
  moe.recompute_modules = RECOMPUTE_MOE_ACT;
  refused(m, moe, "recompute module moe_act has no effect on a dense model");
}

// torchtitan's op-level selective activation checkpointing (recompute module op_sac; strategies/transformer_costs.cpp
// op_sac_recompute): the policy keeps the outputs of every odd mm of a block (wq, wv, w1, w2), SDPA's and the
// reduce-scatters', so a Llama block's backward re-runs wk, wo (without tensor parallelism), w3, both norms, the
// residual add, the activation and, with sequence-parallel TP, both all-gathers -- checked against the closed forms
// of that work and of what stays stored; the plan's checks of the option.
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
    const auto p = cost::layer_passes(m, shape(t, 1, RECOMPUTE_OP_SAC), false);
    const double want = 2 * T * h * kv / t + (t == 1 ? 2 * T * qd * h : 0) + 2 * T * h * f / t;
    EXPECT_NEAR(recompute_flops(p), want, 1e-9 * want);
    EXPECT_EQ(steps_of(p, cost::CollectiveKind::ALL_GATHER), t > 1 ? 2 : 0);
    const double rows = t > 1 ? T / t : T;  // a replicated kernel's tokens (sequence parallel: the rank's shard)
    EXPECT_NEAR(op_bytes(p, "ln1") + op_bytes(p, "ln2"), 2 * 2 * rows * h * e, 1e-6);
    EXPECT_NEAR(op_bytes(p, "swiglu"), 3 * T * f / t * e, 1e-6);
    EXPECT_GT(op_bytes(p, "dropout-residual1"), 0);
    EXPECT_EQ(op_bytes(p, "flash-attention"), 0);
    // Between Korthikanti's selective recompute (nothing under FlashAttention) and full recompute.
    cost::Shape full_sh = shape(t, 1, 0);
    full_sh.recompute = Recompute::FULL;
    const auto full = cost::layer_passes(m, full_sh, false);
    EXPECT_LT(recompute_flops(p), 0.5 * recompute_flops(full));
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
    const auto a = cost::layer_activation_bytes(m, shape(t, 1, RECOMPUTE_OP_SAC), false);
    const double want = T * h * (e + 2) * rep + T * (qd + kv + qd) / t * e + (H / t) * T * 4 + T * f / t * e +
                        T * h * e + (t > 1 ? 2 * T * h * e * rep : 0);
    EXPECT_NEAR(a.stored, want, 1e-6 * want);
    cost::Shape none_sh = shape(t, 1, 0);
    none_sh.recompute = Recompute::NONE;
    const auto none = cost::layer_activation_bytes(m, none_sh, false);
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
    expect_refused(model, c, p, what);
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
