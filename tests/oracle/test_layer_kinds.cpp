// Oracle tests of the layer kinds beyond attention + FFN (issue "Workloads"): the presets' parameter counts against
// their published totals, each kind's forward FLOPs against its closed form (Mamba-2's SSD scan, the gated delta rule,
// a sliding window's attention pairs, single-block layers), tensor parallelism splitting them, folded = unfolded runs
// of a hybrid model, and the model file's checks.
#include <gtest/gtest.h>

#include <cmath>

#include "strategies/estimator.hpp"
#include "strategies/memory_model.hpp"
#include "strategies/transformer_costs.hpp"
#include "tests/support/sim_fixture.hpp"
#include "traces/error.hpp"

using namespace dtsim;
using namespace dtsim::testing;

namespace {
double forward_flops(const TransformerSpec& m, const cost::Shape& sh, LayerKind k) {
  double f = 0;
  for (const auto& st : cost::layer_passes(m, sh, k).forward) f += st.flops();
  return f;
}
double gemm_flops(const TransformerSpec& m, const cost::Shape& sh, LayerKind k, const std::string& name) {
  double f = 0;
  for (const auto& st : cost::layer_passes(m, sh, k).forward)
    for (const auto& op : st.ops)
      if (op.name == name) f += op.flops;
  return f;
}
// The plan simulated folded and unfolded on the analytic engine (SimGrid runs once per process), H100 calibration.
std::pair<Simulation, Simulation> folded_and_unfolded(const TransformerSpec& m, const ClusterSpec& cluster,
                                                      const ParallelPlan& plan) {
  const Calibration cal = default_calibration("h100-sxm5-80gb");
  auto run = [&](FoldMode fold) {
    SimOptions opt;
    opt.fold = fold;
    opt.engine = FlowEngine::MAXMIN;
    Inputs in{&m, &cluster, &plan, &cal, &opt};
    return simulate(in);
  };
  return {run(FoldMode::AUTO), run(FoldMode::NONE)};
}
// A hybrid model's plan: tp (with SP), pp, cp and dp, micro-batch 1, ZeRO-1.
ParallelPlan hybrid_plan(int tp, int pp, int cp, int dp, int gbs) {
  ParallelPlan plan;
  plan.tp = tp;
  plan.pp = pp;
  plan.cp = cp;
  plan.dp = dp;
  plan.sequence_parallel = true;
  plan.micro_batch_size = 1;
  plan.global_batch_size = gbs;
  plan.zero_stage = 1;
  return plan;
}
constexpr LayerKind kMamba{MixerKind::MAMBA2, FfnKind::NONE};
constexpr LayerKind kDeltaNetMoe{MixerKind::GATED_DELTANET, FfnKind::MOE};
}  // namespace

TEST(LayerKinds, PresetParametersMatchPublishedTotals) {
  // Nemotron-H 8B: 8,100,852,736 parameters in its Hugging Face checkpoint (nvidia/Nemotron-H-8B-Base-8K safetensors
  // index); 56B: "56B" (Nemotron-H report, arXiv 2504.03624); Nemotron 3 Nano: 31.6B total (its model card);
  // Qwen3-Next-80B-A3B: 80B total (its model card; the MTP module is not counted here).
  EXPECT_NEAR(model_preset("nemotron-h-8b").total_params(), 8100852736.0, 8100852736.0 * 1e-3);
  EXPECT_NEAR(model_preset("nemotron-h-56b").total_params(), 56e9, 56e9 * 0.01);
  EXPECT_NEAR(model_preset("nemotron-3-nano").total_params(), 31.6e9, 31.6e9 * 0.01);
  EXPECT_NEAR(model_preset("qwen3-next-80b-a3b").total_params(), 80e9, 80e9 * 0.01);
  // Layer counts by kind from the patterns: 8B has 24 Mamba, 4 attention and 24 MLP blocks.
  const TransformerSpec m = model_preset("nemotron-h-8b");
  int mamba = 0, attention = 0, mlp = 0;
  for (int l = 0; l < m.num_layers; ++l) {
    const LayerKind k = m.layer_kind(l);
    mamba += k == kMamba;
    attention += k == LayerKind{MixerKind::ATTENTION, FfnKind::NONE};
    mlp += k == LayerKind{MixerKind::NONE, FfnKind::DENSE};
  }
  EXPECT_EQ(mamba, 24);
  EXPECT_EQ(attention, 4);
  EXPECT_EQ(mlp, 24);
  // A repeated pattern: Qwen3-Next's layer 3 of every 4 is full attention, the others Gated DeltaNet, all MoE.
  const TransformerSpec q = model_preset("qwen3-next-80b-a3b");
  EXPECT_EQ(q.layer_kind(3), (LayerKind{MixerKind::ATTENTION, FfnKind::MOE}));
  EXPECT_EQ(q.layer_kind(46), kDeltaNetMoe);
  EXPECT_EQ(q.num_moe_layers(), 48);
}

TEST(LayerKinds, MambaForwardFlopsMatchTheSsdClosedForm) {
  const TransformerSpec m = model_preset("nemotron-h-8b");
  const double T = m.seq_len, h = m.hidden, H = m.mamba.heads, P = m.mamba.head_dim, G = m.mamba.groups,
               N = m.mamba.state, Q = m.mamba.chunk, di = H * P;
  cost::Shape sh;
  // in_proj (z, x, B, C, dt) and out_proj GEMMs; the scan: C B^T per group (2 Q N per token), per head the chunk's
  // masked product with x (2 Q P), its state B^T x and the output from the incoming state (2 N P each).
  const double proj = 2 * T * h * (2 * di + 2 * G * N + H) + 2 * T * di * h;
  const double scan = T * (G * 2 * Q * N + H * (2 * Q * P + 4 * N * P));
  EXPECT_NEAR(forward_flops(m, sh, kMamba), proj + scan, (proj + scan) * 1e-12);
  // Tensor parallelism splits heads and groups: each of 2 ranks does half.
  cost::Shape tp2;
  tp2.tp = 2;
  tp2.sequence_parallel = true;
  EXPECT_NEAR(forward_flops(m, tp2, kMamba), (proj + scan) / 2, (proj + scan) * 1e-12);
  // Parameters on a rank: everything but the block's norm split by tp.
  const double all = static_cast<double>(m.kind_params(kMamba));
  EXPECT_NEAR(cost::kind_params_per_rank(m, kMamba, 2, 1, 1).dense, (all - 2 * h) / 2 + 2 * h, 1e-6);
}

TEST(LayerKinds, GatedDeltaNetForwardFlopsMatchTheChunkwiseClosedForm) {
  TransformerSpec m = model_preset("qwen3-next-80b-a3b");
  const double T = m.seq_len, h = m.hidden, Hk = m.linear.key_heads, Hv = m.linear.value_heads,
               dk = m.linear.key_head_dim, dv = m.linear.value_head_dim, C = m.linear.chunk;
  cost::Shape sh;
  const LayerKind mixer_only{MixerKind::GATED_DELTANET, FfnKind::NONE};
  // Projections to q, k, v, z, beta, decay and back; the rule: 2 C (3 d_k + 2 d_v) + 6 d_k d_v per token and value
  // head (K K^T, W, U, Q K^T, the masked product; W S, Q S, the state update).
  const double proj = 2 * T * h * (2 * Hk * dk + 2 * Hv * dv + 2 * Hv) + 2 * T * Hv * dv * h;
  const double rule = T * Hv * (2 * C * (3 * dk + 2 * dv) + 6 * dk * dv);
  EXPECT_NEAR(forward_flops(m, sh, mixer_only), proj + rule, (proj + rule) * 1e-12);
  // With its MoE FFN the layer adds exactly the MoE block of a standard MoE layer (router, experts, shared expert).
  const double moe_std = forward_flops(m, sh, LayerKind{MixerKind::ATTENTION, FfnKind::MOE}) -
                         forward_flops(m, sh, LayerKind{MixerKind::ATTENTION, FfnKind::NONE});
  EXPECT_NEAR(forward_flops(m, sh, kDeltaNetMoe), proj + rule + moe_std, (proj + rule + moe_std) * 1e-9);
}

TEST(LayerKinds, SlidingWindowAttentionCountsOnlyItsWindow) {
  const TransformerSpec m = model_preset("gpt-oss-120b");  // alternating 128-token windows and full attention
  ASSERT_EQ(m.layer_kind(0).mixer, MixerKind::SLIDING_ATTENTION);
  ASSERT_EQ(m.layer_kind(1).mixer, MixerKind::ATTENTION);
  cost::Shape sh;
  const double s = m.seq_len, w = m.sliding_window, a = m.heads, d = m.head_dim();
  // FlashAttention forward: 2 (d_qk + d_v) flops per (query, key) pair per head; causal full attention s^2 / 2 pairs,
  // a window sum_i min(i + 1, w) = w s - w (w - 1) / 2.
  auto core = [&](LayerKind k) { return gemm_flops(m, sh, k, "flash-attention"); };
  EXPECT_NEAR(core(m.layer_kind(1)), 4 * d * a * s * s / 2, 1e-3);
  EXPECT_NEAR(core(m.layer_kind(0)), 4 * d * a * (w * s - w * (w - 1) / 2), 1e-3);
  // Everything else of the two layers is the same.
  const double rest0 = forward_flops(m, sh, m.layer_kind(0)) - core(m.layer_kind(0));
  const double rest1 = forward_flops(m, sh, m.layer_kind(1)) - core(m.layer_kind(1));
  EXPECT_NEAR(rest0, rest1, rest1 * 1e-12);
}

TEST(LayerKinds, SingleBlocksSplitAStandardLayer) {
  // A '*' block plus a '-' block does the work of one standard dense layer: same GEMM and attention FLOPs.
  TransformerSpec m = model_preset("nemotron-h-8b");
  cost::Shape sh;
  sh.tp = 2;
  sh.sequence_parallel = true;
  const double blocks = forward_flops(m, sh, LayerKind{MixerKind::ATTENTION, FfnKind::NONE}) +
                        forward_flops(m, sh, LayerKind{MixerKind::NONE, FfnKind::DENSE});
  const double layer = forward_flops(m, sh, LayerKind{MixerKind::ATTENTION, FfnKind::DENSE});
  EXPECT_NEAR(blocks, layer, layer * 1e-12);
  // Parameters likewise (one norm per block, two per layer).
  EXPECT_EQ(m.kind_params({MixerKind::ATTENTION, FfnKind::NONE}) + m.kind_params({MixerKind::NONE, FfnKind::DENSE}),
            m.layer_params());
}

TEST(LayerKinds, HybridModelFoldsExactly) {
  TransformerSpec m = model_preset("nemotron-h-8b");
  m.seq_len = 1024;
  const ClusterSpec cluster = load_cluster("dgx-h100:32");
  const ParallelPlan plan = hybrid_plan(2, 2, 1, 8, 32);
  plan.validate(m, cluster);
  const auto [folded, unfolded] = folded_and_unfolded(m, cluster, plan);
  EXPECT_LT(folded.lowered.ranks.size(), unfolded.lowered.ranks.size());
  const double t = unfolded.report.iteration_time_s;
  EXPECT_GT(t, 0);
  EXPECT_NEAR(folded.report.iteration_time_s, t, t * 1e-9);
  // The stage memory model sums the stage's layer kinds: the two stages hold 26 blocks each, different ones.
  EXPECT_GT(memory::stage_params_per_rank(m, plan, 0), 0);
  double all = 0;
  for (int s = 0; s < 2; ++s) all += memory::stage_params_per_rank(m, plan, s);
  // Over tp = 2, the split parameters halve and the norms stay whole: the stages' sum lies between total/2 and total.
  EXPECT_GT(all, m.total_params() / 2.0);
  EXPECT_LT(all, m.total_params() / 2.0 * 1.01);
}

TEST(LayerKinds, ModelFileChecksThePattern) {
  TransformerSpec m = model_preset("nemotron-h-8b");
  m.layer_pattern = "M-X";
  EXPECT_THROW(m.validate(), ConfigError);  // unknown character
  m.layer_pattern = "M-M";
  EXPECT_THROW(m.validate(), ConfigError);  // 3 does not divide 52
  m.layer_pattern = "M-";
  m.mamba.heads = 0;
  EXPECT_THROW(m.validate(), ConfigError);  // 'M' without a Mamba mixer
  m = model_preset("gpt-oss-120b");
  m.sliding_window = 0;
  EXPECT_THROW(m.validate(), ConfigError);  // 'S' without a window
  // The JSON form round-trips.
  const TransformerSpec q = model_preset("qwen3-next-80b-a3b");
  const TransformerSpec back = model_from_json(to_json(q), "test");
  EXPECT_EQ(back.total_params(), q.total_params());
  EXPECT_EQ(back.layer_pattern, q.layer_pattern);
  EXPECT_EQ(back.linear, q.linear);
  EXPECT_TRUE(back.attention_gate);
}

TEST(MultiTokenPrediction, DepthAddsItsLayerProjectionAndHead) {
  const TransformerSpec base = model_preset("deepseek-v3"), m = model_preset("deepseek-v3-mtp");
  // DeepSeek-V3's MTP module: 11.5B parameters besides the embedding and output head it shares with the main model
  // (deepseek-ai/DeepSeek-V3 README_WEIGHTS.md: 14B with their copies).
  const double depth = static_cast<double>(m.total_params() - base.total_params());
  EXPECT_EQ(m.total_params() - base.total_params(), m.mtp_depth_params());
  EXPECT_NEAR(depth, 11.5e9, 11.5e9 * 0.01);
  // Forward FLOPs of one depth: the 2h -> h projection, one MoE layer and the output head (logits GEMM), nothing else
  // with FLOPs.
  cost::Shape sh;
  double mtp = 0, layer = 0, head = 0;
  for (const auto& st : cost::mtp_passes(m, sh).forward) mtp += st.flops();
  for (const auto& st : cost::layer_passes(m, sh, m.mtp_kind()).forward) layer += st.flops();
  for (const auto& st : cost::head_passes(m, sh).forward) head += st.flops();
  const double T = m.seq_len, h = m.hidden;
  EXPECT_NEAR(mtp, 2 * T * 2 * h * h + layer + head, mtp * 1e-12);
  // The model's FLOPs per sample grow by exactly that (MFU counts the MTP work).
  EXPECT_NEAR(cost::model_forward_flops_per_sample(m) - cost::model_forward_flops_per_sample(base), mtp, mtp * 1e-9);
}

TEST(MultiTokenPrediction, MegatronLayoutsReadAndRunFoldedAsUnfolded) {
  // DeepSeek-V3's 16-stage layout: 4 layers with the embedding, 14 stages of 4, the last layer with MTP and the loss.
  const PipelineLayout pl = parse_pipeline_layout("Et*4|(t*4|)*14tmL", "test");
  ASSERT_EQ(pl.layers.size(), 16u);
  EXPECT_EQ(pl.layers.front(), 4);
  EXPECT_EQ(pl.layers.back(), 1);
  EXPECT_EQ(pl.embedding_chunks, std::vector<int>{0});
  EXPECT_EQ(pl.loss_chunks, std::vector<int>{15});
  EXPECT_EQ(pl.mtp_chunks, std::vector<int>{15});
  EXPECT_THROW(parse_pipeline_layout("Et*4|(t*4|*14tmL", "test"), ConfigError);  // unclosed group
  EXPECT_THROW(parse_pipeline_layout("Et*4|x", "test"), ConfigError);            // unknown character
  // A small MTP model on 4 stages, its last chunk the MTP depth and loss only: folded = unfolded, and the plan
  // refuses a layout without the model's 'm'.
  TransformerSpec m = model_preset("deepseek-v3-mtp");
  m.num_layers = 6;
  m.moe.dense_layers = 1;
  m.seq_len = 512;
  const ClusterSpec cluster = load_cluster("dgx-h100:16");
  ParallelPlan plan;
  plan.pp = 4;
  plan.dp = 4;
  plan.ep = 4;
  plan.micro_batch_size = 1;
  plan.global_batch_size = 16;
  plan.pipeline_layout = "Et*2|tt|tt|mL";
  plan.layers_per_stage = parse_pipeline_layout(plan.pipeline_layout, "test").layers;
  plan.validate(m, cluster);
  const auto [folded, unfolded] = folded_and_unfolded(m, cluster, plan);
  const double t = unfolded.report.iteration_time_s;
  EXPECT_GT(t, 0);
  EXPECT_NEAR(folded.report.iteration_time_s, t, t * 1e-9);
  // The last stage holds the MTP depth's parameters (its MoE layer's experts over ep) besides the head.
  EXPECT_GT(memory::stage_params_per_rank(m, plan, 3), cost::last_stage_extra_params(m, 1, 4));
  ParallelPlan bad = plan;
  bad.pipeline_layout = "Et*2|tt|tt|L";
  bad.layers_per_stage = parse_pipeline_layout(bad.pipeline_layout, "test").layers;
  EXPECT_THROW(bad.validate(m, cluster), ConfigError);
}

namespace {
// Bytes of the layer's all-to-alls over the CP group in one pass.
double cp_a2a_bytes(const std::vector<cost::Step>& steps) {
  double b = 0;
  for (const auto& st : steps)
    if (st.kind == cost::Step::Kind::TP_COLLECTIVE && st.group == cost::CommGroup::CP &&
        st.collective == cost::CollectiveKind::ALL_TO_ALL)
      b += st.collective_bytes;
  return b;
}
}  // namespace

// Megatron-Core's all-to-all context parallelism of the Mamba-2 mixer (mamba_context_parallel.py): z, x, B, C and dt
// of the rank's s / cp tokens go out to the CP ranks by heads before the conv1d and the scan, y comes back after; the
// same two in the backward. The kernels' FLOPs per rank halve with cp 2 (tokens x heads). Nemotron-H 8B: 128 heads of
// 64, 8 groups of state 128; at tp 4 and cp 4 the 2 groups of a TP rank are repeated twice.
TEST(LayerKinds, MambaContextParallelExchangesTheMixerByHeads) {
  const TransformerSpec m = model_preset("nemotron-h-8b");
  const double H = m.mamba.heads, P = m.mamba.head_dim, G = m.mamba.groups, N = m.mamba.state, e = 2;
  for (const auto& [tp, cp] : std::vector<std::pair<int, int>>{{1, 2}, {4, 4}}) {
    cost::Shape sh;
    sh.tp = tp;
    sh.sequence_parallel = tp > 1;
    sh.cp = cp;
    const double T = static_cast<double>(m.seq_len) / cp, Ht = H / tp, Gt = G / tp;
    const double repeat = Gt < cp ? cp / Gt : 1;
    const double in = T * (2 * Ht * P + 2 * Gt * N * repeat + Ht) * e, out = T * Ht * P * e;
    const auto passes = cost::layer_passes(m, sh, kMamba);
    EXPECT_NEAR(cp_a2a_bytes(passes.forward), in + out, 1e-6) << "tp " << tp << " cp " << cp;
    EXPECT_NEAR(cp_a2a_bytes(passes.backward), in + out, 1e-6) << "tp " << tp << " cp " << cp;
    cost::Shape no_cp = sh;
    no_cp.cp = 1;
    EXPECT_NEAR(forward_flops(m, sh, kMamba), forward_flops(m, no_cp, kMamba) / cp,
                forward_flops(m, no_cp, kMamba) * 1e-12);
  }
}

// Gated DeltaNet (gdn.py a2a_cp_to_hp): the whole input projection's output goes out by heads, the gated norm's
// output comes back. Qwen3-Next-80B-A3B's mixer: 16 key heads of 128, 32 value heads of 128.
TEST(LayerKinds, GatedDeltaNetContextParallelExchangesTheMixerByHeads) {
  const TransformerSpec m = model_preset("qwen3-next-80b-a3b");
  cost::Shape sh;
  sh.tp = 2;
  sh.sequence_parallel = true;
  sh.cp = 2;
  const double T = m.seq_len / 2.0, kd = m.linear.key_heads / 2.0 * m.linear.key_head_dim,
               Hv = m.linear.value_heads / 2.0, vd = Hv * m.linear.value_head_dim;
  const LayerKind mixer_only{MixerKind::GATED_DELTANET, FfnKind::NONE};
  const auto passes = cost::layer_passes(m, sh, mixer_only);
  EXPECT_NEAR(cp_a2a_bytes(passes.forward), T * (2 * kd + 2 * vd + 2 * Hv) * 2 + T * vd * 2, 1e-6);
  EXPECT_NEAR(cp_a2a_bytes(passes.backward), cp_a2a_bytes(passes.forward), 1e-6);
}

// A hybrid model with context parallelism simulates, folds exactly, its attention blocks run ring attention over the
// CP group, and the estimator follows the simulator; a CP degree that does not split the heads is refused.
TEST(LayerKinds, HybridModelWithContextParallelism) {
  TransformerSpec m = model_preset("nemotron-h-8b");
  m.seq_len = 4096;
  const ClusterSpec cluster = load_cluster("dgx-h100:16");
  const ParallelPlan plan = hybrid_plan(2, 1, 2, 4, 16);
  plan.validate(m, cluster);
  cost::Shape sh = cost::shape_of(plan, 1);
  bool ring = false;
  for (const auto& st : cost::layer_passes(m, sh, LayerKind{MixerKind::ATTENTION, FfnKind::NONE}).forward)
    ring = ring || st.kind == cost::Step::Kind::RING_ATTENTION;
  EXPECT_TRUE(ring);
  const auto [folded, unfolded] = folded_and_unfolded(m, cluster, plan);
  const double t = unfolded.report.iteration_time_s;
  EXPECT_GT(t, 0);
  EXPECT_NEAR(folded.report.iteration_time_s, t, t * 1e-9);
  const Calibration cal = default_calibration("h100-sxm5-80gb");
  EXPECT_NEAR(estimate::estimate(m, cluster, cal, plan).iteration_s / t, 1.0, 0.10);
  // 3 CP ranks split neither the 128 Mamba heads nor the 8 groups.
  ParallelPlan bad = plan;
  bad.tp = 1;
  bad.cp = 3;
  bad.dp = 1;
  m.seq_len = 3 * 1024;
  EXPECT_THROW(bad.validate(m, load_cluster("dgx-h100:8")), ConfigError);
}
