// Unit tests of dtsim::strategies: per-layer costs (FLOPs, collectives, activations, parameters), the roofline,
// pipeline schedules and the static/analytic memory model. Expected values are closed forms derived in comments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "strategies/memory_model.hpp"
#include "strategies/schedule.hpp"
#include "strategies/transformer_costs.hpp"
#include "traces/calibration.hpp"
#include "traces/cluster.hpp"
#include "traces/error.hpp"
#include "traces/model.hpp"
#include "traces/plan.hpp"

using dtsim::Recompute;
using dtsim::Schedule;
using dtsim::cost::CollectiveKind;
using dtsim::cost::Shape;
using dtsim::cost::Step;
using dtsim::sched::PipeOp;

// Relative-tolerance comparison for doubles (1e-9 of the expected magnitude).
#define EXPECT_REL(actual, expected)                                                        \
  do {                                                                                      \
    const double dtsim_e_ = static_cast<double>(expected);                                  \
    EXPECT_NEAR(static_cast<double>(actual), dtsim_e_, std::abs(dtsim_e_) * 1e-9 + 1e-300); \
  } while (false)

namespace {

// The GPT-3 175B layer of Korthikanti et al. (Table 3/4): s = 2048, b = 1, h = 12288, a = 96, fp16.
dtsim::TransformerSpec gpt3_layer_spec() {
  dtsim::TransformerSpec m;
  m.name = "gpt3-korthikanti";
  m.num_layers = 96;
  m.hidden = 12288;
  m.heads = 96;
  m.kv_heads = 96;
  m.ffn_hidden = 4 * 12288;
  m.seq_len = 2048;
  m.vocab = 51200;
  m.dtype = dtsim::DType::FP16;
  m.tied_embeddings = true;
  m.learned_pos_embedding = true;
  m.mlp = dtsim::MlpKind::GELU;
  return m;
}

Shape shape(int b, int tp, bool sp, Recompute r) {
  Shape sh;
  sh.micro_batch = b;
  sh.tp = tp;
  sh.sequence_parallel = sp;
  sh.recompute = r;
  return sh;
}

double flops_of(const std::vector<Step>& steps) {
  double f = 0;
  for (const auto& s : steps) f += s.flops();
  return f;
}

std::vector<const Step*> collectives(const std::vector<Step>& steps) {
  std::vector<const Step*> out;
  for (const auto& s : steps)
    if (s.kind == Step::Kind::TP_COLLECTIVE) out.push_back(&s);
  return out;
}

// Korthikanti constants for the GPT-3 layer: sbh = 2048*12288 = 25,165,824; 5as^2b = 5*96*2048^2 = 2,013,265,920.
constexpr double kSbh = 2048.0 * 12288.0;
constexpr double k5as2b = 5.0 * 96.0 * 2048.0 * 2048.0;

PipeOp F(int i) { return {PipeOp::Kind::F, i}; }
PipeOp B(int i) { return {PipeOp::Kind::B, i}; }

std::string order_string(const std::vector<PipeOp>& ops) {
  std::string s;
  for (const auto& o : ops) {
    s += o.kind == PipeOp::Kind::F ? 'F' : 'B';
    s += std::to_string(o.microbatch);
    s += ' ';
  }
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Activation memory: Korthikanti et al. 2023, Table 2 (bytes, fp16)
// ---------------------------------------------------------------------------------------------------------------

TEST(Activations, NoParallelismIs34sbhPlus5as2b) {
  const auto m = gpt3_layer_spec();
  const auto a = dtsim::cost::layer_activation_bytes(m, shape(1, 1, false, Recompute::NONE));
  // 34*25,165,824 + 2,013,265,920 = 855,638,016 + 2,013,265,920 = 2,868,903,936 bytes (~2.87 GB)
  EXPECT_EQ(34 * kSbh + k5as2b, 2868903936.0);
  EXPECT_REL(a.stored, 2868903936.0);
  EXPECT_EQ(a.transient, 0.0);
}

TEST(Activations, TensorParallel8WithSequenceParallelIsOneEighth) {
  const auto m = gpt3_layer_spec();
  const auto a = dtsim::cost::layer_activation_bytes(m, shape(1, 8, true, Recompute::NONE));
  // (34sbh + 5as^2b)/8 = 2,868,903,936/8 = 358,612,992 bytes (~0.36 GB)
  EXPECT_REL(a.stored, 358612992.0);
  EXPECT_EQ(a.transient, 0.0);
}

TEST(Activations, TensorParallel8WithoutSequenceParallel) {
  const auto m = gpt3_layer_spec();
  const auto a = dtsim::cost::layer_activation_bytes(m, shape(1, 8, false, Recompute::NONE));
  // sbh(10 + 24/8) + 5as^2b/8 = 13*25,165,824 + 251,658,240 = 327,155,712 + 251,658,240 = 578,813,952
  EXPECT_REL(a.stored, kSbh * (10 + 24.0 / 8) + k5as2b / 8);
  EXPECT_REL(a.stored, 578813952.0);
}

TEST(Activations, SelectiveRecomputeStores34sbhOverT) {
  const auto m = gpt3_layer_spec();
  const auto a = dtsim::cost::layer_activation_bytes(m, shape(1, 8, true, Recompute::SELECTIVE));
  // stored = 34sbh/8 = 106,954,752 (~0.107 GB); transient (recomputed attention scores) = 5as^2b/8 = 251,658,240
  EXPECT_REL(a.stored, 34 * kSbh / 8);
  EXPECT_REL(a.stored, 106954752.0);
  EXPECT_REL(a.transient, 251658240.0);
}

TEST(Activations, FullRecomputeStoresLayerInputOnly) {
  const auto m = gpt3_layer_spec();
  const auto tp1 = dtsim::cost::layer_activation_bytes(m, shape(1, 1, false, Recompute::FULL));
  EXPECT_REL(tp1.stored, 2 * kSbh);         // 2sbh = 50,331,648
  EXPECT_REL(tp1.transient, 2868903936.0);  // the whole layer is rebuilt during backward
  const auto tp8sp = dtsim::cost::layer_activation_bytes(m, shape(1, 8, true, Recompute::FULL));
  EXPECT_REL(tp8sp.stored, 2 * kSbh / 8);  // 6,291,456
  EXPECT_REL(tp8sp.transient, 358612992.0);
  // Without SP the layer input is replicated on every TP rank: still 2sbh.
  const auto tp8 = dtsim::cost::layer_activation_bytes(m, shape(1, 8, false, Recompute::FULL));
  EXPECT_REL(tp8.stored, 2 * kSbh);
}

// Without Megatron's fused softmax (here 48 heads at TP 8, micro-batch 1: 6 score matrices per rank) the softmax
// output is kept in fp32: the score terms are 7as^2b/t instead of 5as^2b/t.
TEST(Activations, SoftmaxFallbackKeepsFp32SoftmaxOutput) {
  auto m = gpt3_layer_spec();
  m.heads = 48;
  m.kv_heads = 48;
  const double as2b = 48.0 * 2048 * 2048 * 1;
  const auto a = dtsim::cost::layer_activation_bytes(m, shape(1, 8, false, Recompute::NONE));
  EXPECT_REL(a.stored, kSbh * (10 + 24.0 / 8) + 7 * as2b / 8);
  const auto fused = dtsim::cost::layer_activation_bytes(m, shape(2, 8, false, Recompute::NONE));
  EXPECT_REL(fused.stored, 2 * (kSbh * (10 + 24.0 / 8) + 5 * as2b / 8));
}

TEST(Activations, ScaleLinearlyWithMicroBatch) {
  const auto m = gpt3_layer_spec();
  const auto a = dtsim::cost::layer_activation_bytes(m, shape(4, 2, false, Recompute::NONE));
  // b = 4, t = 2: 4 * (sbh(10 + 24/2) + 5as^2/2)
  EXPECT_REL(a.stored, 4 * (kSbh * 22 + k5as2b / 2));
}

TEST(Activations, EmbeddingAndHead) {
  const auto m = gpt3_layer_spec();
  const auto sh = shape(1, 8, true, Recompute::NONE);
  // Embedding: one 1-byte dropout mask of the (sequence-sharded) output: sbh/8 = 3,145,728.
  EXPECT_REL(dtsim::cost::embedding_activation_bytes(m, sh).stored, kSbh / 8);
  // Head: final LN input 2*sbh/8 + logits and fp32 copy s*V/8*(2+4) = 6,291,456 + 78,643,200 = 84,934,656.
  EXPECT_REL(dtsim::cost::head_activation_bytes(m, sh).stored, 84934656.0);
}

// ---------------------------------------------------------------------------------------------------------------
// Parameters and static memory
// ---------------------------------------------------------------------------------------------------------------

TEST(StaticMemory, SixteenBytesPerParamForMixedPrecisionAdam) {
  EXPECT_EQ(dtsim::memory::optimizer_bytes_per_param(dtsim::DType::FP16), 12.0);  // fp32 master 4 + m 4 + v 4
  EXPECT_EQ(dtsim::memory::optimizer_bytes_per_param(dtsim::DType::BF16), 12.0);
  EXPECT_EQ(dtsim::memory::optimizer_bytes_per_param(dtsim::DType::FP32), 8.0);  // no separate master copy
  const auto m = dtsim::model_preset("gpt3-175b");
  dtsim::ParallelPlan plan;
  plan.tp = 8;
  plan.pp = 8;
  plan.dp = 16;
  for (int stage : {0, 3, 7}) {
    SCOPED_TRACE(stage);
    const auto s = dtsim::memory::static_memory(m, plan, stage);
    const double p = dtsim::memory::stage_params_per_rank(m, plan, stage);
    EXPECT_EQ(s.params, p);
    EXPECT_REL(s.weight_bytes, 2 * p);
    EXPECT_REL(s.gradient_bytes, 2 * p);
    EXPECT_REL(s.optimizer_bytes, 12 * p);
    EXPECT_REL(s.total(), 16 * p);
  }
}

TEST(StaticMemory, Zero1DividesOnlyOptimizerBytesByDp) {
  const auto m = dtsim::model_preset("gpt3-175b");
  dtsim::ParallelPlan plan;
  plan.tp = 8;
  plan.pp = 8;
  plan.dp = 16;
  const auto z0 = dtsim::memory::static_memory(m, plan, 0);
  plan.zero_stage = 1;
  const auto z1 = dtsim::memory::static_memory(m, plan, 0);
  EXPECT_EQ(z1.params, z0.params);
  EXPECT_EQ(z1.weight_bytes, z0.weight_bytes);
  EXPECT_EQ(z1.gradient_bytes, z0.gradient_bytes);
  EXPECT_REL(z1.optimizer_bytes, z0.optimizer_bytes / 16);
  // Stage 0 params 2,822,731,776: 16 B/param without ZeRO, 2 + 2 + 12/16 = 4.75 B/param with ZeRO-1 over dp 16.
  EXPECT_REL(z0.total(), 16 * 2822731776.0);
  EXPECT_REL(z1.total(), 4.75 * 2822731776.0);
}

TEST(Params, LayerParamsPerRankGeluReplicates6h) {
  const auto m = dtsim::model_preset("gpt3-175b");
  const double h = 12288;
  // (layer - 6h)/t + 6h: two norms (4h) and the two row-parallel biases (2h) are replicated.
  // t = 8: (1,812,099,072 - 73,728)/8 + 73,728 = 226,503,168 + 73,728 = 226,576,896
  EXPECT_REL(dtsim::cost::layer_params_per_rank(m, 8), 226576896.0);
  for (int t : {1, 2, 4, 8, 16}) {
    SCOPED_TRACE(t);
    EXPECT_REL(dtsim::cost::layer_params_per_rank(m, t), (1812099072.0 - 6 * h) / t + 6 * h);
  }
  EXPECT_REL(dtsim::cost::layer_params_per_rank(m, 1), 1812099072.0);
}

TEST(Params, LayerParamsPerRankSwigluReplicates4h) {
  const auto m = dtsim::model_preset("llama2-70b");
  // SwiGLU has no biases: only the norms (4h = 32,768) are replicated.
  // (855,670,784 - 32,768)/8 + 32,768 = 106,954,752 + 32,768 = 106,987,520
  EXPECT_REL(dtsim::cost::layer_params_per_rank(m, 8), 106987520.0);
}

TEST(Params, StageParamsGpt3_175bTp8Pp8) {
  const auto m = dtsim::model_preset("gpt3-175b");
  dtsim::ParallelPlan plan;
  plan.tp = 8;
  plan.pp = 8;
  const double h = 12288, V = 51200, s = 2048;
  const double lppr = 226576896.0;  // see LayerParamsPerRankGeluReplicates6h; 96/8 = 12 layers per stage
  // Stage 0: 12 layers + vocabulary-parallel embedding V*h/8 + position table s*h (replicated)
  //   = 2,718,922,752 + 78,643,200 + 25,165,824 = 2,822,731,776
  EXPECT_REL(dtsim::memory::stage_params_per_rank(m, plan, 0), 12 * lppr + V * h / 8 + s * h);
  EXPECT_REL(dtsim::memory::stage_params_per_rank(m, plan, 0), 2822731776.0);
  // Middle stages: layers only = 2,718,922,752
  for (int st = 1; st < 7; ++st) EXPECT_REL(dtsim::memory::stage_params_per_rank(m, plan, st), 12 * lppr);
  // Last stage (tied, pp > 1): layers + the copy of the word embedding V*h/8 + final norm 2h = 2,797,590,528
  EXPECT_REL(dtsim::memory::stage_params_per_rank(m, plan, 7), 12 * lppr + V * h / 8 + 2 * h);
  EXPECT_REL(dtsim::memory::stage_params_per_rank(m, plan, 7), 2797590528.0);
}

TEST(Params, SingleRankHoldsExactlyTotalParams) {
  // tp = pp = 1: the only stage holds every parameter once (tied: no second copy of the embedding).
  for (const char* name : {"gpt3-1.3b", "gpt3-175b", "llama2-7b", "llama2-70b"}) {
    SCOPED_TRACE(name);
    const auto m = dtsim::model_preset(name);
    dtsim::ParallelPlan plan;
    EXPECT_REL(dtsim::memory::stage_params_per_rank(m, plan, 0), static_cast<double>(m.total_params()));
  }
}

TEST(Params, PipelineWithTiedEmbeddingsAddsOneEmbeddingCopy) {
  // tp 1, pp 4, tied: the stages sum to total + V*h (the last stage's copy of the word embedding).
  const auto m = dtsim::model_preset("gpt3-1.3b");
  dtsim::ParallelPlan plan;
  plan.pp = 4;
  double sum = 0;
  for (int st = 0; st < 4; ++st) sum += dtsim::memory::stage_params_per_rank(m, plan, st);
  EXPECT_REL(sum, static_cast<double>(m.total_params()) + 51200.0 * 2048.0);
  // Untied (llama2-7b): the output projection is counted once, on the last stage, so the sum is the total.
  const auto l = dtsim::model_preset("llama2-7b");
  sum = 0;
  for (int st = 0; st < 4; ++st) sum += dtsim::memory::stage_params_per_rank(l, plan, st);
  EXPECT_REL(sum, static_cast<double>(l.total_params()));
}

TEST(Params, LastStageExtraPerTieAndPp) {
  const auto gpt = dtsim::model_preset("gpt3-175b");
  const double h = 12288, V = 51200;
  EXPECT_REL(dtsim::cost::last_stage_extra_params(gpt, 8, 1), 2 * h);              // tied, pp 1: norm only
  EXPECT_REL(dtsim::cost::last_stage_extra_params(gpt, 8, 8), 2 * h + V * h / 8);  // tied, pp > 1: copy
  EXPECT_REL(dtsim::cost::first_stage_extra_params(gpt, 8), V * h / 8 + 2048 * h);
  const auto llama = dtsim::model_preset("llama2-7b");  // untied, rotary: no position table
  EXPECT_REL(dtsim::cost::last_stage_extra_params(llama, 4, 1), 2 * 4096.0 + 32000.0 * 4096 / 4);
  EXPECT_REL(dtsim::cost::first_stage_extra_params(llama, 4), 32000.0 * 4096 / 4);
}

TEST(AnalyticPeak, Gpt3_175bStage0SelectiveSp) {
  const auto m = dtsim::model_preset("gpt3-175b");
  dtsim::ParallelPlan plan;
  plan.tp = 8;
  plan.pp = 8;
  plan.dp = 16;
  plan.micro_batch_size = 1;
  plan.global_batch_size = 1536;  // m = 1536/16 = 96 micro-batches
  plan.sequence_parallel = true;
  plan.recompute = Recompute::SELECTIVE;
  // Activations of one micro-batch on stage 0: 12 layers * 34sbh/8 + embedding mask sbh/8
  //   = 12 * 106,954,752 + 3,145,728 = 1,286,602,752
  EXPECT_REL(dtsim::memory::stage_activation_bytes_per_microbatch(m, plan, 0), 1286602752.0);
  // Peak = reserved 2e9 + static 16 * 2,822,731,776 + min(p - 0, m) = 8 in flight * 1,286,602,752
  //      + transient 5as^2b/8 = 251,658,240  ->  57,708,188,672
  EXPECT_REL(dtsim::memory::analytic_peak_bytes(m, plan, 0, 2e9), 57708188672.0);
}

// ---------------------------------------------------------------------------------------------------------------
// Pipeline schedules
// ---------------------------------------------------------------------------------------------------------------

TEST(Schedule, GpipeAllForwardsThenAllBackwards) {
  const auto o = dtsim::sched::stage_order(Schedule::GPIPE, 4, 3, 1);
  EXPECT_EQ(o, (std::vector<PipeOp>{F(0), F(1), F(2), B(0), B(1), B(2)})) << order_string(o);
  // The same on every stage.
  for (int s = 0; s < 4; ++s) EXPECT_EQ(dtsim::sched::stage_order(Schedule::GPIPE, 4, 3, s), o);
}

TEST(Schedule, OneFOneBStage0P4M8) {
  // Warm-up p - s - 1 = 3 forwards, then (F, B) pairs for the remaining 5 forwards, then 3 backwards.
  const auto o = dtsim::sched::stage_order(Schedule::ONE_F_ONE_B, 4, 8, 0);
  const std::vector<PipeOp> expected = {F(0), F(1), F(2), F(3), B(0), F(4), B(1), F(5),
                                        B(2), F(6), B(3), F(7), B(4), B(5), B(6), B(7)};
  EXPECT_EQ(o, expected) << order_string(o);
}

TEST(Schedule, OneFOneBLastStageP4M8Alternates) {
  // Last stage: no warm-up; strict F(i), B(i) alternation.
  const auto o = dtsim::sched::stage_order(Schedule::ONE_F_ONE_B, 4, 8, 3);
  const std::vector<PipeOp> expected = {F(0), B(0), F(1), B(1), F(2), B(2), F(3), B(3),
                                        F(4), B(4), F(5), B(5), F(6), B(6), F(7), B(7)};
  EXPECT_EQ(o, expected) << order_string(o);
}

TEST(Schedule, OneFOneBFewerMicrobatchesThanWarmup) {
  // p = 8, m = 2, stage 0: warm-up min(7, 2) = 2 forwards, no steady state, then 2 backwards.
  const auto o = dtsim::sched::stage_order(Schedule::ONE_F_ONE_B, 8, 2, 0);
  EXPECT_EQ(o, (std::vector<PipeOp>{F(0), F(1), B(0), B(1)})) << order_string(o);
}

TEST(Schedule, EveryOrderRunsEachPassOnceForwardBeforeBackward) {
  for (Schedule sc : {Schedule::GPIPE, Schedule::ONE_F_ONE_B})
    for (int p : {1, 2, 3, 4, 8})
      for (int m : {1, 2, 3, 8, 32})
        for (int s = 0; s < p; ++s) {
          SCOPED_TRACE(dtsim::to_string(sc) + " p=" + std::to_string(p) + " m=" + std::to_string(m) +
                       " s=" + std::to_string(s));
          const auto o = dtsim::sched::stage_order(sc, p, m, s);
          ASSERT_EQ(o.size(), static_cast<size_t>(2 * m));
          std::vector<int> f_pos(m, -1), b_pos(m, -1);
          for (int i = 0; i < static_cast<int>(o.size()); ++i) {
            ASSERT_GE(o[i].microbatch, 0);
            ASSERT_LT(o[i].microbatch, m);
            auto& pos = o[i].kind == PipeOp::Kind::F ? f_pos : b_pos;
            EXPECT_EQ(pos[o[i].microbatch], -1) << "pass repeated";
            pos[o[i].microbatch] = i;
          }
          for (int i = 0; i < m; ++i) {
            EXPECT_GE(f_pos[i], 0);
            EXPECT_GE(b_pos[i], 0);
            EXPECT_LT(f_pos[i], b_pos[i]) << "B" << i << " before F" << i;
            // Forwards and backwards each run in micro-batch order.
            if (i > 0) {
              EXPECT_LT(f_pos[i - 1], f_pos[i]);
              EXPECT_LT(b_pos[i - 1], b_pos[i]);
            }
          }
        }
}

TEST(Schedule, MaxInFlightGpipeIsMAndOneFOneBIsMinPMinusSM) {
  for (int p : {1, 2, 4, 8})
    for (int m : {1, 3, 8, 32})
      for (int s = 0; s < p; ++s) {
        SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) + " s=" + std::to_string(s));
        EXPECT_EQ(dtsim::sched::max_in_flight(Schedule::GPIPE, p, m, s), m);
        EXPECT_EQ(dtsim::sched::max_in_flight(Schedule::ONE_F_ONE_B, p, m, s), std::min(p - s, m));
      }
}

TEST(Schedule, BadShapeIsInternalError) {
  EXPECT_THROW(dtsim::sched::stage_order(Schedule::GPIPE, 4, 8, 4), dtsim::InternalError);
  EXPECT_THROW(dtsim::sched::stage_order(Schedule::ONE_F_ONE_B, 4, 0, 0), dtsim::InternalError);
  EXPECT_THROW(dtsim::sched::stage_order(Schedule::ONE_F_ONE_B, 0, 1, 0), dtsim::InternalError);
}

// ---------------------------------------------------------------------------------------------------------------
// FLOP counts
// ---------------------------------------------------------------------------------------------------------------

TEST(Flops, ForwardLayerIsMegatronCount) {
  const auto m = gpt3_layer_spec();
  const double s = 2048, h = 12288;
  // QKV 2*s*h*3h + QK^T and AV 2*s*s*h*2 + projection 2*s*h*h + MLP 2*2*s*h*4h = 24sh^2 + 4s^2h
  //   = 7,421,703,487,488 + 206,158,430,208 = 7,627,861,917,696
  const double expected = 24 * s * h * h + 4 * s * s * h;
  EXPECT_EQ(expected, 7627861917696.0);
  const auto p = dtsim::cost::layer_passes(m, shape(1, 1, false, Recompute::NONE));
  EXPECT_REL(flops_of(p.forward), expected);
}

TEST(Flops, TensorParallelRankDoesOneTthOfLayer) {
  const auto m = gpt3_layer_spec();
  const double full = 7627861917696.0;
  for (int t : {2, 4, 8})
    for (bool sp : {false, true}) {
      SCOPED_TRACE("t=" + std::to_string(t) + (sp ? " sp" : ""));
      const auto p = dtsim::cost::layer_passes(m, shape(1, t, sp, Recompute::NONE));
      EXPECT_REL(flops_of(p.forward), full / t);
    }
  // And micro-batch b multiplies every term by b.
  EXPECT_REL(flops_of(dtsim::cost::layer_passes(m, shape(3, 4, false, Recompute::NONE)).forward), 3 * full / 4);
}

TEST(Flops, BackwardIsTwiceForward) {
  const auto m = gpt3_layer_spec();
  for (int t : {1, 8})
    for (bool sp : {false, true}) {
      if (sp && t == 1) continue;
      SCOPED_TRACE("t=" + std::to_string(t) + (sp ? " sp" : ""));
      const auto p = dtsim::cost::layer_passes(m, shape(1, t, sp, Recompute::NONE));
      EXPECT_REL(flops_of(p.backward), 2 * flops_of(p.forward));
      EXPECT_REL(flops_of(p.backward), 2 * 7627861917696.0 / t);
      EXPECT_TRUE(p.recompute.empty());
    }
}

TEST(Flops, FullRecomputeRepeatsTheForward) {
  const auto m = gpt3_layer_spec();
  const auto p = dtsim::cost::layer_passes(m, shape(1, 8, true, Recompute::FULL));
  EXPECT_REL(flops_of(p.recompute), flops_of(p.forward));
  EXPECT_REL(flops_of(p.recompute), 7627861917696.0 / 8);
  // Same steps (collectives included), renamed.
  ASSERT_EQ(p.recompute.size(), p.forward.size());
  for (size_t i = 0; i < p.forward.size(); ++i) {
    EXPECT_EQ(p.recompute[i].kind, p.forward[i].kind);
    EXPECT_EQ(p.recompute[i].name, "recompute-" + p.forward[i].name);
  }
}

TEST(Flops, SelectiveRecomputeIsAttentionCoreOnly) {
  const auto m = gpt3_layer_spec();
  const double s = 2048, h = 12288;
  for (int t : {1, 8}) {
    SCOPED_TRACE(t);
    const auto p = dtsim::cost::layer_passes(m, shape(1, t, t > 1, Recompute::SELECTIVE));
    // QK^T and AV only: 4 s^2 h / t (t = 8: 25,769,803,776)
    EXPECT_REL(flops_of(p.recompute), 4 * s * s * h / t);
    EXPECT_TRUE(collectives(p.recompute).empty());
  }
}

TEST(Flops, Megatron96FormulaWithFullRecompute) {
  // Narayanan et al. SC'21: with full recompute one iteration of B samples costs
  //   96 B s L h^2 (1 + s/(6h) + V/(16 L h)):
  // layers run forward + recompute + backward = 4 x (24sh^2 + 4s^2h), the logit GEMM forward + backward
  // = 3 x 2shV, and 96 s L h^2 * V/(16 L h) = 6 s h V. Check per sample (B = 1) for gpt3-175b, tp 1.
  const auto m = dtsim::model_preset("gpt3-175b");
  const double s = 2048, h = 12288, L = 96, V = 51200;
  const auto layer = dtsim::cost::layer_passes(m, shape(1, 1, false, Recompute::FULL));
  const auto head = dtsim::cost::head_passes(m, shape(1, 1, false, Recompute::FULL));
  const double total = L * (flops_of(layer.forward) + flops_of(layer.recompute) + flops_of(layer.backward)) +
                       flops_of(head.forward) + flops_of(head.backward);
  EXPECT_REL(total, 96 * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h)));
}

TEST(Flops, ModelForwardPerSampleExactIdentity) {
  // Forward per sample = L(24sh^2 + 4s^2h) + 2shV (logit GEMM; the embedding lookup has no FLOPs)
  //                    = 24 L s h^2 (1 + s/(6h) + V/(12 L h))   -- one third of Megatron's 72 (no recompute).
  // (Megatron's V/(16Lh) term belongs to the 96 formula with recompute, see Megatron96FormulaWithFullRecompute.)
  // gpt3-175b: 96 * 7,627,861,917,696 + 2*2048*12288*51200 = 732,274,744,098,816 + 2,576,980,377,600
  //          = 734,851,724,476,416
  const auto m = dtsim::model_preset("gpt3-175b");
  const double s = 2048, h = 12288, L = 96, V = 51200;
  const double f = dtsim::cost::model_forward_flops_per_sample(m);
  EXPECT_REL(f, 734851724476416.0);
  EXPECT_REL(f, 24 * L * s * h * h * (1 + s / (6 * h) + V / (12 * L * h)));
}

TEST(Flops, SwigluMlpCountsThreeGemms) {
  // llama2-7b, tp 1, b 1: QKV 2*s*h*(h+2kv) + attention 4s^2h + proj 2sh^2 + gate/up 2*s*h*2f + down 2*s*f*h
  //   with kv = h: 8sh^2 + 4s^2h + 6shf
  const auto m = dtsim::model_preset("llama2-7b");
  const double s = 4096, h = 4096, f = 11008;
  const auto p = dtsim::cost::layer_passes(m, shape(1, 1, false, Recompute::NONE));
  EXPECT_REL(flops_of(p.forward), 8 * s * h * h + 4 * s * s * h + 6 * s * h * f);
}

// ---------------------------------------------------------------------------------------------------------------
// Layer pass structure: tensor-parallel collectives
// ---------------------------------------------------------------------------------------------------------------

TEST(LayerPasses, TensorParallelWithoutSpHasTwoAllReduces) {
  const auto m = gpt3_layer_spec();
  const auto p = dtsim::cost::layer_passes(m, shape(2, 8, false, Recompute::NONE));
  // Megatron's g operator after attention and after the MLP: all-reduce of the b*s*h fp16 hidden state
  //   = 2 * 2048 * 12288 * 2 = 100,663,296 bytes.
  for (const auto* pass : {&p.forward, &p.backward}) {
    const auto c = collectives(*pass);
    ASSERT_EQ(c.size(), 2u);
    for (const auto* s : c) {
      EXPECT_EQ(s->collective, CollectiveKind::ALL_REDUCE) << s->name;
      EXPECT_REL(s->collective_bytes, 2.0 * 2048 * 12288 * 2);
      EXPECT_TRUE(s->ops.empty());
      EXPECT_EQ(s->flops(), 0.0);
    }
  }
}

TEST(LayerPasses, SequenceParallelHasTwoAllGathersAndTwoReduceScatters) {
  const auto m = gpt3_layer_spec();
  const auto p = dtsim::cost::layer_passes(m, shape(1, 8, true, Recompute::NONE));
  for (const auto* pass : {&p.forward, &p.backward}) {
    const auto c = collectives(*pass);
    ASSERT_EQ(c.size(), 4u);
    int ag = 0, rs = 0;
    for (const auto* s : c) {
      ag += s->collective == CollectiveKind::ALL_GATHER;
      rs += s->collective == CollectiveKind::REDUCE_SCATTER;
      EXPECT_REL(s->collective_bytes, 2048.0 * 12288 * 2);  // full (unsharded) buffer b*s*h*e
    }
    EXPECT_EQ(ag, 2);
    EXPECT_EQ(rs, 2);
  }
  // Forward order: AG before attention, RS after it, AG before the MLP, RS after it.
  const auto fc = collectives(p.forward);
  EXPECT_EQ(fc[0]->collective, CollectiveKind::ALL_GATHER);
  EXPECT_EQ(fc[1]->collective, CollectiveKind::REDUCE_SCATTER);
  EXPECT_EQ(fc[2]->collective, CollectiveKind::ALL_GATHER);
  EXPECT_EQ(fc[3]->collective, CollectiveKind::REDUCE_SCATTER);
}

TEST(LayerPasses, NoTensorParallelNoCollectives) {
  const auto m = gpt3_layer_spec();
  for (Recompute r : {Recompute::NONE, Recompute::SELECTIVE, Recompute::FULL}) {
    const auto p = dtsim::cost::layer_passes(m, shape(1, 1, false, r));
    EXPECT_TRUE(collectives(p.forward).empty());
    EXPECT_TRUE(collectives(p.backward).empty());
    EXPECT_TRUE(collectives(p.recompute).empty());
  }
}

TEST(LayerPasses, HeadLossAllReduceAndEmbeddingCollectives) {
  const auto m = gpt3_layer_spec();
  const auto head = dtsim::cost::head_passes(m, shape(1, 8, false, Recompute::NONE));
  const auto hc = collectives(head.forward);
  ASSERT_EQ(hc.size(), 1u);
  EXPECT_EQ(hc[0]->collective, CollectiveKind::ALL_REDUCE);
  EXPECT_REL(hc[0]->collective_bytes, 2.0 * 2048 * 4);  // max and sum: two fp32 values per token
  // Logit GEMM forward on one rank: 2 * s * h * V/8.
  EXPECT_REL(flops_of(head.forward), 2.0 * 2048 * 12288 * 51200 / 8);
  // Megatron's vocab-parallel cross entropy on an fp32 copy of the logits, per element of the s x V/8 shard:
  // forward copy 2+4, max 4, subtract 8, exp 8, sum 4, divide 8 = 38 bytes; backward 8 + (4+2) = 14 bytes.
  auto memory_bound_bytes = [](const std::vector<dtsim::cost::Step>& steps, const std::string& prefix) {
    double b = 0;
    for (const auto& st : steps)
      for (const auto& op : st.ops)
        if (!op.gemm && op.name.rfind(prefix, 0) == 0) b += op.bytes;
    return b;
  };
  EXPECT_REL(memory_bound_bytes(head.forward, "ce-"), 38.0 * 2048 * 51200 / 8);
  EXPECT_REL(memory_bound_bytes(head.backward, "ce-"), 14.0 * 2048 * 51200 / 8);
  const auto emb = dtsim::cost::embedding_passes(m, shape(1, 8, true, Recompute::NONE));
  const auto ec = collectives(emb.forward);
  ASSERT_EQ(ec.size(), 1u);
  EXPECT_EQ(ec[0]->collective, CollectiveKind::REDUCE_SCATTER);
  EXPECT_EQ(flops_of(emb.forward), 0.0);
  EXPECT_TRUE(collectives(dtsim::cost::embedding_passes(m, shape(1, 1, false, Recompute::NONE)).forward).empty());
}

// An fp32 model (SAILOR's OPT-350M rows): Megatron casts only fp16/bf16 scores and logits to fp32, so the unfused
// softmax and the cross entropy have no cast kernels; every element is 4 bytes; the softmax is kept in the logits
// themselves; weights 4 + gradients 4 + Adam m, v 8 = 16 bytes per parameter with no separate master copy.
TEST(LayerPasses, Fp32ModelHasNoCastKernelsAndSixteenBytesPerParam) {
  auto m = gpt3_layer_spec();
  m.dtype = dtsim::DType::FP32;
  auto bytes_of = [](const std::vector<Step>& steps, const std::string& prefix) {
    double b = 0;
    for (const auto& st : steps)
      for (const auto& op : st.ops)
        if (!op.gemm && op.name.rfind(prefix, 0) == 0) b += op.bytes;
    return b;
  };
  auto named = [](const dtsim::cost::LayerPasses& p, const std::string& name) {
    for (const auto* steps : {&p.forward, &p.recompute, &p.backward})
      for (const auto& st : *steps)
        for (const auto& op : st.ops)
          if (op.name == name) return true;
    return false;
  };
  // 96 heads / tp 8 = 12 score matrices per rank: fused for fp16, but the fused kernel takes fp16/bf16 only.
  EXPECT_TRUE(dtsim::cost::megatron_fused_softmax(12, 2048, 2));
  EXPECT_FALSE(dtsim::cost::megatron_fused_softmax(12, 2048, 4));
  const auto layer = dtsim::cost::layer_passes(m, shape(1, 8, false, Recompute::NONE));
  EXPECT_FALSE(named(layer, "softmax-to-fp32"));
  EXPECT_FALSE(named(layer, "softmax-to-half"));
  // scale (read 4 write 4) + mask (read 4 + mask 1, write 4) + softmax (read 4 write 4) = 25 bytes per score.
  const double scores = 12.0 * 2048 * 2048;
  EXPECT_REL(bytes_of(layer.forward, "softmax"), 25.0 * scores);
  // The GEMMs move 4-byte elements: the QK^T GEMM reads q and k and writes the scores.
  double qk_bytes = 0;
  for (const auto& st : layer.forward)
    for (const auto& op : st.ops)
      if (op.name == "qk") qk_bytes = op.bytes;
  EXPECT_REL(qk_bytes, (12.0 * 2 * 2048 * 128 + scores) * 4);
  // Cross entropy without the copy: max 4, subtract 8, exp 8, sum 4, divide 8 = 32 bytes forward, 8 backward.
  const auto head = dtsim::cost::head_passes(m, shape(1, 8, false, Recompute::NONE));
  EXPECT_FALSE(named(head, "ce-to-fp32"));
  EXPECT_FALSE(named(head, "ce-grad-to-dtype"));
  EXPECT_REL(bytes_of(head.forward, "ce-"), 32.0 * 2048 * 51200 / 8);
  EXPECT_REL(bytes_of(head.backward, "ce-"), 8.0 * 2048 * 51200 / 8);
  // Head activations: final LN input 4 sbh + the softmax in place of the logits, 4 bytes per logit.
  EXPECT_REL(dtsim::cost::head_activation_bytes(m, shape(1, 8, false, Recompute::NONE)).stored,
             4.0 * kSbh + 4.0 * 2048 * 51200 / 8);
  // Static memory: 4 + 4 + 8 bytes per parameter.
  const auto s = dtsim::memory::static_memory_for_params(1e9, dtsim::DType::FP32, 0, 1, false);
  EXPECT_EQ(s.weight_bytes, 4e9);
  EXPECT_EQ(s.gradient_bytes, 4e9);
  EXPECT_EQ(s.optimizer_bytes, 8e9);
  EXPECT_EQ(s.total(), 16e9);
}

// ---------------------------------------------------------------------------------------------------------------
// Roofline
// ---------------------------------------------------------------------------------------------------------------

namespace {
struct Roofline {
  dtsim::GpuSpec gpu = dtsim::gpu_preset("a100-sxm4-80gb");  // 312e12 FLOP/s fp16, 2039e9 B/s
  // Explicit values (the formulas are under test, not the shipped preset): eff 0.75, half 1e9, exponent 1
  // (the hyperbola), mem 0.8, 4 us.
  dtsim::Calibration cal = [] {
    auto c = dtsim::default_calibration("a100-sxm4-80gb");
    c.gemm_efficiency_max = 0.75;
    c.gemm_half_efficiency_flops = 1e9;
    c.gemm_efficiency_exponent = 1;
    c.memory_bandwidth_efficiency = 0.8;
    c.kernel_launch_s = 4e-6;
    c.host_issue_s = 0;
    c.pin("host_issue_s");
    return c;
  }();
};
}  // namespace

TEST(Roofline, GemmEfficiencyCurve) {
  Roofline r;
  // eff(f) = 0.75 f / (f + 1e9)
  EXPECT_REL(dtsim::cost::gemm_efficiency(1e9, r.cal), 0.375);   // half of the maximum at f_half
  EXPECT_REL(dtsim::cost::gemm_efficiency(3e9, r.cal), 0.5625);  // 0.75 * 3/4
  EXPECT_REL(dtsim::cost::gemm_efficiency(1e12, r.cal), 0.75 * 1e12 / (1e12 + 1e9));
  EXPECT_EQ(dtsim::cost::gemm_efficiency(0, r.cal), 0.75);
  // With exponent p the curve is max * f^p / (f^p + half^p): still half at f_half, sharper on either side.
  r.cal.gemm_efficiency_exponent = 2;
  EXPECT_REL(dtsim::cost::gemm_efficiency(1e9, r.cal), 0.375);
  EXPECT_REL(dtsim::cost::gemm_efficiency(3e9, r.cal), 0.75 * 9.0 / 10.0);
  EXPECT_EQ(dtsim::cost::gemm_efficiency(0, r.cal), 0.75);
  // Below f* = half (p - 1)^(1/p) the efficiency is held at eff(f*), so time keeps falling with size: at p = 2,
  // f* = half, and a GEMM of half that size runs at eff(half), not 0.75 x 0.25 / 1.25 (which would take it longer
  // than the GEMM of twice its size: 0.5e9 / 0.15 > 1e9 / 0.375).
  EXPECT_REL(dtsim::cost::gemm_monotone_flops(r.cal), 1e9);
  EXPECT_REL(dtsim::cost::gemm_efficiency(0.5e9, r.cal), 0.375);
  r.cal.gemm_efficiency_exponent = 1.5;  // f* = half x 0.5^(2/3)
  EXPECT_REL(dtsim::cost::gemm_monotone_flops(r.cal), 1e9 * std::pow(0.5, 2.0 / 3.0));
  r.cal.gemm_efficiency_exponent = 0.8;  // p <= 1: time f / eff(f) = (f^p + h^p) f^(1-p) / max rises with f
  EXPECT_EQ(dtsim::cost::gemm_monotone_flops(r.cal), 0.0);
  EXPECT_REL(dtsim::cost::gemm_efficiency(0.5e9, r.cal), 0.75 / (1 + std::pow(2.0, 0.8)));
}

// A GEMM's compute time f / (peak x eff(f)) never grows as its FLOPs shrink, for any exponent of the curve (the
// shipped A100 fit once put a 0.1 GFLOP GEMM at 316 us and a 5.5 GFLOP one at 60 us).
TEST(Roofline, GemmTimeGrowsWithItsFlops) {
  Roofline r;
  for (double p : {0.7, 1.0, 1.1, 1.516, 2.0, 4.0}) {
    r.cal.gemm_efficiency_exponent = p;
    r.cal.gemm_half_efficiency_flops = 8.566e9;
    double previous = 0;
    for (double f = 1e6; f < 1e13; f *= 1.1) {
      const double t = f / dtsim::cost::gemm_efficiency(f, r.cal);
      EXPECT_GE(t, previous * (1 - 1e-12)) << "p " << p << ", " << f << " FLOP";
      previous = t;
    }
  }
}

TEST(Roofline, ComputeBoundGemm) {
  Roofline r;
  const dtsim::cost::Op op{"g", true, 1e12, 1e3};
  // 1e12 / (312e12 * 0.75e12/(1e12 + 1e9)) + 4e-6 = (1e12 + 1e9) / (312e12 * 0.75) + 4e-6
  const double expected = 1.001e12 / (312e12 * 0.75) + 4e-6;
  EXPECT_REL(dtsim::cost::op_time_s(op, r.gpu, dtsim::DType::FP16, r.cal), expected);
  // FP32 uses the FP32 peak, 19.5e12, and reads the curve at the BF16 GEMM of the same duration (16 x 1e12 FLOPs):
  // the half-efficiency size counts 1/16 as much.
  EXPECT_REL(dtsim::cost::op_time_s(op, r.gpu, dtsim::DType::FP32, r.cal),
             (1e12 + 1e9 * 19.5e12 / 312e12) / (19.5e12 * 0.75) + 4e-6);
}

// Grouped GEMMs (one GEMM per local expert): the tile fill of a group's tokens, closed forms.
TEST(GroupedGemm, TileFillClosedForms) {
  using dtsim::cost::grouped_tile_fill;
  EXPECT_EQ(grouped_tile_fill(154, 0), 1.0);  // off
  // 192 tokens (sd 13.9) lie 4.6 sd from either tile boundary: two 128-row tiles, filled 192 / 256.
  EXPECT_NEAR(grouped_tile_fill(192, 128), 0.75, 1e-5);
  // 320 tokens: three tiles (384 rows). On a boundary of 64-deep tiles, half of the counts need a sixth: 5.5 tiles.
  EXPECT_NEAR(grouped_tile_fill(320, 128), 320.0 / 384, 1e-5);
  EXPECT_NEAR(grouped_tile_fill(320, 64), 320.0 / (5.5 * 64), 1e-5);
  // Far larger counts (sd 1,000 >> 128 rows): the remainder is uniform, half a tile padded on average.
  EXPECT_NEAR(grouped_tile_fill(1e6, 128), 1e6 / (1e6 + 64), 1e-6);
  // Never above 1, monotone enough to be sane at a handful of tokens.
  for (double t : {1.0, 3.0, 17.0, 100.0, 127.0, 128.0, 129.0, 5000.0}) {
    EXPECT_LE(grouped_tile_fill(t, 128), 1.0);
    EXPECT_GT(grouped_tile_fill(t, 128), 0.0);
  }
}

TEST(GroupedGemm, EachGroupRunsAtItsOwnSizeWithItsTokensPadded) {
  Roofline r;
  // 16 groups of 192 tokens x 1024 x 2048: each group 2*192*1024*2048 FLOPs.
  const double G = 16, per = 2.0 * 192 * 1024 * 2048;
  dtsim::cost::Op op{"expert-fc1", true, G * per, 1e3, false, 192, 1024, 2048, G};
  const double batched_s = G * per / (312e12 * 0.75 * G * per / (G * per + 1e9)) + 4e-6;
  EXPECT_REL(dtsim::cost::op_time_s(op, r.gpu, dtsim::DType::FP16, r.cal), batched_s);  // one batched kernel
  op.grouped = true;
  const double eff_group = 0.75 * per / (per + 1e9) * (192.0 / 256);
  EXPECT_NEAR(dtsim::cost::op_time_s(op, r.gpu, dtsim::DType::FP16, r.cal), G * per / (312e12 * eff_group) + 4e-6,
              1e-5 * batched_s * 2);
  // The weight gradient pads the tokens as its reduction: 192 is a boundary of 64-deep tiles, so 3.5 on average.
  dtsim::cost::Op w{"expert-fc1-wgrad", true, G * per, 1e3, true, 1024, 192, 2048, G};
  w.grouped = true;
  EXPECT_NEAR(dtsim::cost::op_time_s(w, r.gpu, dtsim::DType::FP16, r.cal),
              G * per / (312e12 * 0.75 * per / (per + 1e9) * (192.0 / 224)) + 4e-6, 1e-5 * batched_s);
  r.cal.gemm_tile_m = 0;  // off: the dense curve at the group's size
  EXPECT_REL(dtsim::cost::op_time_s(op, r.gpu, dtsim::DType::FP16, r.cal),
             G * per / (312e12 * 0.75 * per / (per + 1e9)) + 4e-6);
}

TEST(GroupedGemm, Fp32AccumulationAddsToGroupedGemmsAndJoinsTheRooflineOfDenseOnes) {
  Roofline r;
  const double acc = 8.0 * 1024 * 2048 * 16, t_acc = acc / (2039e9 * 0.8);
  dtsim::cost::Op w{"expert-fc1-wgrad", true, 2.0 * 1024 * 192 * 2048 * 16, 1e3, true, 1024, 192, 2048, 16};
  w.grouped = true;
  const double plain = dtsim::cost::op_time_s(w, r.gpu, dtsim::DType::FP16, r.cal);
  w.accumulate_bytes = acc;
  EXPECT_REL(dtsim::cost::op_time_s(w, r.gpu, dtsim::DType::FP16, r.cal), plain + t_acc);
  r.cal.gemm_accumulate_epilogue = false;
  EXPECT_REL(dtsim::cost::op_time_s(w, r.gpu, dtsim::DType::FP16, r.cal), plain);
  r.cal.gemm_accumulate_epilogue = true;
  // Dense: max(bytes + accumulate traffic, FLOPs). Compute-bound here, so free; memory-bound when the traffic wins.
  dtsim::cost::Op d{"fc1-wgrad", true, 1e12, 1e3, true, 8192, 8192, 8192, 1};
  const double dense = dtsim::cost::op_time_s(d, r.gpu, dtsim::DType::FP16, r.cal);
  d.accumulate_bytes = 8.0 * 8192 * 8192;
  EXPECT_REL(dtsim::cost::op_time_s(d, r.gpu, dtsim::DType::FP16, r.cal), dense);
  d.accumulate_bytes = 1e13;
  EXPECT_REL(dtsim::cost::op_time_s(d, r.gpu, dtsim::DType::FP16, r.cal), (1e13 + 1e3) / (2039e9 * 0.8) + 4e-6);
}

TEST(GroupedGemm, WeightGradientsCarryTheirFp32AccumulationWhenThePlanKeepsFp32Grads) {
  auto m = dtsim::model_preset("mixtral-8x7b");
  m.num_layers = 2;
  dtsim::ParallelPlan plan;
  plan.ep = 2;
  plan.fp32_grads = true;
  auto sh = dtsim::cost::shape_of(plan, 1);
  EXPECT_TRUE(sh.fp32_grad_accumulation);
  int wgrads = 0, grouped = 0;
  for (bool moe : {false, true}) {
    const auto p = dtsim::cost::layer_passes(m, sh, moe);
    for (const auto& st : p.backward)
      for (const auto& op : st.ops) {
        if (op.gemm && op.weight_grad) {
          ++wgrads;
          grouped += op.grouped ? 1 : 0;
          EXPECT_DOUBLE_EQ(op.accumulate_bytes, 8 * op.m * op.n * op.batch) << op.name;
        } else {
          EXPECT_EQ(op.accumulate_bytes, 0) << op.name;
        }
      }
    // The zero-bubble W pass keeps the same ops.
    for (const auto& st : p.backward_weight)
      for (const auto& op : st.ops) EXPECT_GT(op.accumulate_bytes, 0) << op.name;
  }
  EXPECT_GT(wgrads, 4);
  EXPECT_EQ(grouped, 2);  // expert FC1 and FC2
  for (const auto& st : dtsim::cost::head_passes(m, sh).backward)
    for (const auto& op : st.ops)
      if (op.weight_grad) {
        EXPECT_GT(op.accumulate_bytes, 0);
      }
  plan.fp32_grads = false;
  sh = dtsim::cost::shape_of(plan, 1);
  for (const auto& st : dtsim::cost::layer_passes(m, sh, true).backward)
    for (const auto& op : st.ops) EXPECT_EQ(op.accumulate_bytes, 0) << op.name;
}

// A check, not a fit: SimuMax's grouped GEMMs measured on B200 (MooreThreads/SimuMax configs/system/
// b200_bf16_ceperm.json: DeepSeek-V2's expert FC1, K 5,120, N 3,072, at EP 8 (20 groups of 1,232 tokens) and EP 1
// (160 groups of 154)) against the shipped B200 device model, which saw no B200 measurement. Forward and activation
// gradient run at the tokens' tile fill, the weight gradient pays its fp32 main_grad epilogue.
TEST(GroupedGemm, B200DeviceModelFollowsSimuMaxsMeasuredGroupedGemms) {
  const auto gpu = dtsim::gpu_preset("b200-sxm-180gb");
  auto cal = dtsim::default_calibration("b200-sxm-180gb");
  cal.sustained_tensor_ratio = 1;  // SimuMax's kernel benchmarks time each kernel alone: bursts, not sustained load
  struct Case {
    double groups, tokens, fwd, dgrad, wgrad;  // measured fractions of the 2,250 TFLOP/s peak
  };
  for (const Case c : {Case{20, 1232, 0.51, 0.42, 0.33}, Case{160, 154, 0.20, 0.19, 0.09}}) {
    const double K = 5120, N = 3072, f = 2 * c.groups * c.tokens * K * N;
    dtsim::cost::Op fwd{
        "expert-fc1", true, f, (c.groups * c.tokens * (K + N) + c.groups * K * N) * 2, false, c.tokens, K, N, c.groups};
    fwd.grouped = true;
    auto b = dtsim::cost::gemm_bwd(fwd);
    b[1].accumulate_bytes = 8 * K * N * c.groups;
    auto eff = [&](const dtsim::cost::Op& op) {
      return f / (gpu.peak_bf16_flops * dtsim::cost::op_time_s(op, gpu, dtsim::DType::BF16, cal));
    };
    std::printf("%g groups x %g tokens: fwd %.3f (%.2f) dgrad %.3f (%.2f) wgrad %.3f (%.2f)\n", c.groups, c.tokens,
                eff(fwd), c.fwd, eff(b[0]), c.dgrad, eff(b[1]), c.wgrad);
    EXPECT_NEAR(eff(fwd) / c.fwd, 1, 0.15);
    EXPECT_NEAR(eff(b[0]) / c.dgrad, 1, 0.15);
    EXPECT_NEAR(eff(b[1]) / c.wgrad, 1, 0.15);
  }
}

TEST(Roofline, MisalignedGemmRunsAtTheMisalignedFactor) {
  Roofline r;
  r.cal.gemm_misaligned_efficiency = 0.4;
  // 1024 x 1024 x 50257 (the unpadded GPT-2 vocabulary): n is odd, so fp16 is misaligned (needs multiples of 8).
  const dtsim::cost::Op odd{"logits", true, 2.0 * 1024 * 1024 * 50257, 1e3, false, 1024, 1024, 50257, 1};
  const double f = odd.flops;
  const double aligned_s = f / (312e12 * 0.75 * f / (f + 1e9)) + 4e-6;
  const double misaligned_s = f / (312e12 * 0.75 * f / (f + 1e9) * 0.4) + 4e-6;
  EXPECT_TRUE(dtsim::cost::gemm_misaligned(odd, dtsim::DType::FP16));
  EXPECT_REL(dtsim::cost::op_time_s(odd, r.gpu, dtsim::DType::FP16, r.cal), misaligned_s);
  // 25128 = 50257 // 2 is a multiple of 8: full speed. 12564 (// 4) is a multiple of 4 only: aligned for fp32.
  dtsim::cost::Op even = odd;
  even.n = 25128;
  even.flops = f;  // same FLOPs, so only the alignment differs
  EXPECT_FALSE(dtsim::cost::gemm_misaligned(even, dtsim::DType::FP16));
  EXPECT_REL(dtsim::cost::op_time_s(even, r.gpu, dtsim::DType::FP16, r.cal), aligned_s);
  dtsim::cost::Op four = odd;
  four.n = 12564;
  EXPECT_TRUE(dtsim::cost::gemm_misaligned(four, dtsim::DType::FP16));
  EXPECT_FALSE(dtsim::cost::gemm_misaligned(four, dtsim::DType::FP32));
  // Graded by the widest vector every dimension allows: 12564 fp16 elements = 8-byte multiples (one halving below
  // 16 bytes: the cube root of the 2-byte factor), 6282 (50257 // 8) = 4-byte (two halvings), odd = 2-byte (three).
  EXPECT_EQ(dtsim::cost::gemm_alignment_bytes(four, dtsim::DType::FP16), 8);
  EXPECT_REL(dtsim::cost::gemm_alignment_factor(four, dtsim::DType::FP16, r.cal), std::cbrt(0.4));
  EXPECT_REL(dtsim::cost::op_time_s(four, r.gpu, dtsim::DType::FP16, r.cal),
             f / (312e12 * 0.75 * f / (f + 1e9) * std::cbrt(0.4)) + 4e-6);
  dtsim::cost::Op two = odd;
  two.n = 6282;
  EXPECT_EQ(dtsim::cost::gemm_alignment_bytes(two, dtsim::DType::FP16), 4);
  EXPECT_REL(dtsim::cost::gemm_alignment_factor(two, dtsim::DType::FP16, r.cal), std::pow(0.4, 2.0 / 3.0));
  EXPECT_EQ(dtsim::cost::gemm_alignment_bytes(odd, dtsim::DType::FP16), 2);
  EXPECT_REL(dtsim::cost::gemm_alignment_factor(odd, dtsim::DType::FP16, r.cal), 0.4);
  EXPECT_EQ(dtsim::cost::gemm_alignment_factor(even, dtsim::DType::FP16, r.cal), 1.0);
  // In fp32 an odd dimension is 4-byte aligned: two halvings.
  EXPECT_EQ(dtsim::cost::gemm_alignment_bytes(odd, dtsim::DType::FP32), 4);
  EXPECT_REL(dtsim::cost::gemm_alignment_factor(odd, dtsim::DType::FP32, r.cal), std::pow(0.4, 2.0 / 3.0));
  // Any of m, k, n counts; an Op without a shape (m = 0) and a memory op never do.
  dtsim::cost::Op k_odd = even;
  k_odd.k = 1001;
  EXPECT_TRUE(dtsim::cost::gemm_misaligned(k_odd, dtsim::DType::FP16));
  EXPECT_FALSE(dtsim::cost::gemm_misaligned(dtsim::cost::Op{"g", true, 1e12, 1e3}, dtsim::DType::FP16));
  EXPECT_FALSE(
      dtsim::cost::gemm_misaligned(dtsim::cost::Op{"m", false, 0, 1e9, false, 3, 3, 3, 1}, dtsim::DType::FP16));
}

// Megatron's fused scale-mask-softmax runs only when micro-batch x heads per rank is a multiple of the kernel's
// batches per block (4 for sequences over 128); otherwise the layer pays PyTorch's five-kernel fallback. In the
// vTrain set (16 heads, sequence 1024) that is TP 8 at micro-batch 1 alone: 2 score matrices per rank.
TEST(Softmax, MegatronFusedKernelAvailability) {
  using dtsim::cost::megatron_fused_softmax;
  EXPECT_FALSE(megatron_fused_softmax(2, 1024, 2));   // TP 8, micro-batch 1, 16 heads
  EXPECT_TRUE(megatron_fused_softmax(4, 1024, 2));    // TP 8 micro-batch 2, or TP 4 micro-batch 1
  EXPECT_TRUE(megatron_fused_softmax(12, 2048, 2));   // GPT-3 175B at TP 8
  EXPECT_FALSE(megatron_fused_softmax(6, 2048, 2));   // 48 heads at TP 8, micro-batch 1
  EXPECT_FALSE(megatron_fused_softmax(4, 1024, 4));   // fp32 input: no fused kernel
  EXPECT_FALSE(megatron_fused_softmax(4, 16, 2));     // sequence too short
  EXPECT_FALSE(megatron_fused_softmax(4, 32768, 2));  // sequence too long
  EXPECT_FALSE(megatron_fused_softmax(4, 1022, 2));   // sq % 4 != 0
  EXPECT_FALSE(megatron_fused_softmax(4, 128, 2));    // short rows: 8 per block
  EXPECT_TRUE(megatron_fused_softmax(8, 128, 2));
}

TEST(Softmax, FallbackAddsFourKernelsAndFp32Traffic) {
  auto m = gpt3_layer_spec();
  m.heads = 16;
  m.kv_heads = 16;
  m.hidden = 1024;
  m.ffn_hidden = 4096;
  m.seq_len = 1024;
  auto count = [](const std::vector<dtsim::cost::Step>& steps) {
    std::size_t n = 0;
    for (const auto& st : steps) n += st.ops.size();
    return n;
  };
  // TP 8 at micro-batch 2 (4 score matrices per rank: fused) against micro-batch 1 (2: the fallback), which has
  // four more kernels in the forward and four more in the backward (host issue slots as well as traffic).
  const auto fused = dtsim::cost::layer_passes(m, shape(2, 8, false, Recompute::NONE));
  const auto fallback = dtsim::cost::layer_passes(m, shape(1, 8, false, Recompute::NONE));
  EXPECT_EQ(count(fallback.forward), count(fused.forward) + 4);
  EXPECT_EQ(count(fallback.backward), count(fused.backward) + 4);
  // Softmax traffic per score element: fused 2 x 2 bytes; fallback 6 + 8 + 9 + 8 + 6 = 37 bytes.
  const double scores_fallback = 1.0 * 2 * 1024 * 1024;
  double softmax_fallback = 0;
  for (const auto& st : fallback.forward)
    for (const auto& op : st.ops)
      if (op.name.rfind("softmax", 0) == 0) softmax_fallback += op.bytes;
  EXPECT_REL(softmax_fallback, 37 * scores_fallback);
}

TEST(Roofline, MemoryOpAndMemoryBoundGemm) {
  Roofline r;
  const dtsim::cost::Op mem{"m", false, 0, 1e9};
  // 1e9 / (2039e9 * 0.8) + 4e-6
  EXPECT_REL(dtsim::cost::op_time_s(mem, r.gpu, dtsim::DType::FP16, r.cal), 1e9 / (2039e9 * 0.8) + 4e-6);
  // A non-GEMM op's FLOPs are ignored.
  const dtsim::cost::Op mem_with_flops{"m", false, 1e15, 1e9};
  EXPECT_REL(dtsim::cost::op_time_s(mem_with_flops, r.gpu, dtsim::DType::FP16, r.cal), 1e9 / (2039e9 * 0.8) + 4e-6);
  // A GEMM with tiny FLOPs and many bytes is bound by HBM: max(t_mem, t_flop).
  const dtsim::cost::Op thin{"g", true, 1e6, 1e9};
  EXPECT_REL(dtsim::cost::op_time_s(thin, r.gpu, dtsim::DType::FP16, r.cal), 1e9 / (2039e9 * 0.8) + 4e-6);
}

TEST(Roofline, StepTimeSumsOpsAndRejectsCollectives) {
  Roofline r;
  Step st;
  st.kind = Step::Kind::COMPUTE;
  st.ops = {{"a", false, 0, 1e9}, {"b", true, 1e12, 1e3}};
  EXPECT_REL(dtsim::cost::step_time_s(st, r.gpu, dtsim::DType::FP16, r.cal),
             1e9 / (2039e9 * 0.8) + 1.001e12 / (312e12 * 0.75) + 2 * 4e-6);
  Step c;
  c.kind = Step::Kind::TP_COLLECTIVE;
  c.name = "ar";
  EXPECT_THROW(dtsim::cost::step_time_s(c, r.gpu, dtsim::DType::FP16, r.cal), dtsim::InternalError);
}

TEST(Roofline, CollectiveKindNames) {
  EXPECT_EQ(dtsim::cost::to_string(CollectiveKind::ALL_REDUCE), "all-reduce");
  EXPECT_EQ(dtsim::cost::to_string(CollectiveKind::REDUCE_SCATTER), "reduce-scatter");
  EXPECT_EQ(dtsim::cost::to_string(CollectiveKind::ALL_GATHER), "all-gather");
}
