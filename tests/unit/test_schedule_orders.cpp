// Schedule orders without simulation: generated orders are complete and deadlock-free, custom orders are
// checked, warm-up counts, ZeRO memory per the ZeRO paper's example.
#include <gtest/gtest.h>

#include "strategies/memory_model.hpp"
#include "strategies/schedule.hpp"
#include "traces/error.hpp"

using namespace dtsim;
using sched::PipeOp;
using K = PipeOp::Kind;

namespace {
ParallelPlan plan_of(Schedule s, int p, int m, int v = 1) {
  ParallelPlan plan;
  plan.pp = p;
  plan.global_batch_size = m;
  plan.schedule = s;
  plan.virtual_stages = v;
  return plan;
}
std::string joined(const std::vector<PipeOp>& ops) {
  std::string s;
  for (const auto& op : ops) {
    if (!s.empty()) s += ' ';
    s += to_string(op);
  }
  return s;
}
}  // namespace

TEST(ScheduleOrders, EveryGeneratedOrderIsCompleteAndDeadlockFree) {
  for (Schedule s : {Schedule::GPIPE, Schedule::ONE_F_ONE_B, Schedule::ZB_H1, Schedule::ZB_H2, Schedule::INTERLEAVED})
    for (int p : {1, 2, 3, 4, 8})
      for (int m : {1, 2, 3, 5, 8, 16, 24})
        for (int v : {1, 2, 3}) {
          if ((s == Schedule::INTERLEAVED) != (v > 1)) continue;
          if (s == Schedule::INTERLEAVED && (m % p != 0 || p < 2)) continue;
          for (bool dapple : {false, true}) {
            if (dapple && s != Schedule::ONE_F_ONE_B) continue;
            ParallelPlan plan = plan_of(s, p, m, v);
            plan.dapple_warmup = dapple;
            SCOPED_TRACE(plan.schedule_name() + " p=" + std::to_string(p) + " m=" + std::to_string(m));
            EXPECT_NO_THROW(sched::validate_orders(sched::plan_orders(plan), p, m, v, plan.split_backward(), "t"));
          }
        }
}

TEST(ScheduleOrders, OneFOneBWarmupMegatronAndDapple) {
  // Megatron: stage 0 of 4 warms up with p-s-1 = 3 forwards; DAPPLE: p-s = 4, then backward first.
  EXPECT_EQ(joined(sched::stage_order(Schedule::ONE_F_ONE_B, 4, 6, 0)), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(joined(sched::stage_order(Schedule::ONE_F_ONE_B, 4, 6, 0, true)), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(joined(sched::stage_order(Schedule::ONE_F_ONE_B, 4, 6, 2)), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  EXPECT_EQ(joined(sched::stage_order(Schedule::ONE_F_ONE_B, 4, 6, 2, true)), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  EXPECT_EQ(joined(sched::stage_order(Schedule::ONE_F_ONE_B, 4, 6, 3)), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
}

TEST(ScheduleOrders, ZbH1DelaysWeightPassesByStageIndex) {
  EXPECT_EQ(joined(sched::stage_order(Schedule::ZB_H1, 4, 5, 0)), "F0 F1 F2 F3 B0 W0 F4 B1 W1 B2 W2 B3 W3 B4 W4");
  EXPECT_EQ(joined(sched::stage_order(Schedule::ZB_H1, 4, 5, 3)), "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 W2 W3 W4");
}

TEST(ScheduleOrders, InterleavedStartsWithTheMegatronWarmup) {
  // p = 2, v = 2, m = 4: stage 0 warms up with 2(p-s-1) + (v-1)p = 4 forwards over chunks 0 then 1.
  auto orders = sched::plan_orders(plan_of(Schedule::INTERLEAVED, 2, 4, 2));
  EXPECT_EQ(joined(orders[0]), "F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3");
}

TEST(ScheduleOrders, MaxInFlight) {
  for (int p : {2, 4, 8})
    for (int s = 0; s < p; ++s) {
      EXPECT_EQ(sched::max_in_flight(Schedule::GPIPE, p, 16, s), 16);
      EXPECT_EQ(sched::max_in_flight(Schedule::ONE_F_ONE_B, p, 16, s), p - s);
      EXPECT_EQ(sched::max_in_flight(Schedule::ZB_H1, p, 16, s), p);
    }
  EXPECT_EQ(sched::max_in_flight(Schedule::ZB_H2, 4, 16, 0), 7);
}

TEST(CustomSchedule, CycleIsRejected) {
  // Stage 0 waits for B0 (which needs F0 on stage 1), stage 1 starts with F1, which needs F1 of stage 0: deadlock.
  std::vector<std::vector<PipeOp>> orders = {{{K::F, 0}, {K::B, 0}, {K::F, 1}, {K::B, 1}},
                                             {{K::F, 1}, {K::B, 1}, {K::F, 0}, {K::B, 0}}};
  try {
    sched::validate_orders(orders, 2, 2, 1, false, "custom schedule 'x.json'");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("deadlocks"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("stage 1 at F1"), std::string::npos) << e.what();
  }
}

TEST(CustomSchedule, MissingDuplicateAndOutOfRangePassesAreRejected) {
  auto err = [](const std::vector<std::vector<PipeOp>>& o, int m, bool split) {
    try {
      sched::validate_orders(o, 1, m, 1, split, "c");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(err({{{K::F, 0}}}, 1, false).find("lacks pass B0"), std::string::npos);
  EXPECT_NE(err({{{K::F, 0}, {K::F, 0}, {K::B, 0}}}, 1, false).find("appears twice"), std::string::npos);
  EXPECT_NE(err({{{K::F, 0}, {K::B, 0}, {K::F, 3}, {K::B, 3}}}, 1, false).find("micro-batch 3"), std::string::npos);
  EXPECT_NE(err({{{K::F, 0}, {K::B, 0}}}, 1, true).find("lacks pass W0"), std::string::npos);
  EXPECT_EQ(err({{{K::F, 0}, {K::B, 0}, {K::W, 0}}}, 1, true), "no error");
}

TEST(CustomSchedule, PassSyntax) {
  EXPECT_EQ(pipe_op_from_string("F12", "c"), (PipeOp{K::F, 12, 0}));
  EXPECT_EQ(pipe_op_from_string("W3.2", "c"), (PipeOp{K::W, 3, 2}));
  for (const char* bad : {"", "F", "X1", "F-1", "F1.", "F1.x", "Fone"})
    EXPECT_THROW(pipe_op_from_string(bad, "c"), ConfigError) << bad;
}

TEST(ZeroMemory, PaperExampleIs120_31_4_16_6_1_9GB) {
  // Rajbhandari et al. 2020: Psi = 7.5e9 parameters, N_d = 64, mixed-precision Adam (K = 12).
  const double psi = 7.5e9;
  auto total = [&](int zero) { return memory::static_memory_for_params(psi, DType::FP16, zero, 64).total(); };
  EXPECT_DOUBLE_EQ(total(0), 16 * psi);                 // 120 GB
  EXPECT_DOUBLE_EQ(total(1), 4 * psi + 12 * psi / 64);  // 31.4 GB
  EXPECT_DOUBLE_EQ(total(2), 2 * psi + 14 * psi / 64);  // 16.6 GB
  EXPECT_DOUBLE_EQ(total(3), 16 * psi / 64);            // 1.9 GB
  EXPECT_NEAR(total(0) / 1e9, 120.0, 1e-9);
  EXPECT_NEAR(total(1) / 1e9, 31.40625, 1e-9);
  EXPECT_NEAR(total(2) / 1e9, 16.640625, 1e-9);
  EXPECT_NEAR(total(3) / 1e9, 1.875, 1e-9);
}

// ---- DualPipeV (github.com/deepseek-ai/DualPipe, dualpipev.py).

TEST(ScheduleOrders, DualPipeVIsCompleteAndDeadlockFreeInItsVShape) {
  for (int p : {2, 3, 4, 5, 8})
    for (int m : {2 * p, 2 * p + 1, 2 * p + 3, 4 * p}) {
      ParallelPlan plan = plan_of(Schedule::DUALPIPEV, p, m, 2);
      SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
      const auto orders = sched::plan_orders(plan);
      EXPECT_NO_THROW(sched::validate_orders(orders, p, m, 2, true, "t", true));
      // The DualPipe README's table: PP + 1 chunk activations per device (PP = 2p model chunks).
      for (int s = 0; s < p; ++s) EXPECT_EQ(sched::max_in_flight(orders[s], true), 2 * p + 1) << "stage " << s;
    }
}

TEST(ScheduleOrders, DualPipeVPlacesTheHeadOnTheFirstStage) {
  ParallelPlan plan = plan_of(Schedule::DUALPIPEV, 4, 8, 2);
  EXPECT_EQ(plan.model_chunk(0, 0), 0);
  EXPECT_EQ(plan.model_chunk(0, 1), 7);
  EXPECT_EQ(plan.model_chunk(3, 0), 3);
  EXPECT_EQ(plan.model_chunk(3, 1), 4);
  for (int k = 0; k < 8; ++k) EXPECT_EQ(plan.model_chunk(plan.stage_of_chunk(k), plan.chunk_index(k)), k);
  EXPECT_EQ(plan.head_stage(), 0);
  EXPECT_EQ(plan.stage_layers(16), (std::vector<int>{4, 4, 4, 4}));
  // Interleaved keeps c * p + s and the head on the last stage.
  ParallelPlan il = plan_of(Schedule::INTERLEAVED, 4, 8, 2);
  EXPECT_EQ(il.model_chunk(0, 1), 4);
  EXPECT_EQ(il.head_stage(), 3);
}

TEST(ScheduleOrders, DualPipeVDeviceZeroAsInDeepSeeksFigure) {
  // DualPipe README, "Example DualPipeV scheduling for 4 PP ranks (8 PP stages) and 10 micro-batches"
  // (images/dualpipev.png), device 0 read cell by cell; a full backward is B then W, an overlapped pair F&B is
  // F (with_next) then B then W; ".1" marks chunk 1.
  const std::string figure =
      "F0 F1 F2 F3 F4 F5 F6 F0.1 B0.1 W0.1 F1.1 B1.1 W1.1 F2.1 B2.1 W2.1 F3.1 "
      "F7 B3.1 W3.1 F4.1 B0 W0 F8 B4.1 W4.1 F5.1 B1 W1 F9 B5.1 W5.1 F6.1 B2 W2 "
      "B6.1 W6.1 F7.1 B3 W3 B7.1 W7.1 F8.1 B4 W4 B8.1 W8.1 F9.1 B5 W5 "
      "B9.1 W9.1 B6 W6 B7 W7 B8 W8 B9 W9";
  const auto o = sched::stage_order(Schedule::DUALPIPEV, 4, 10, 0);
  EXPECT_EQ(joined(o), figure);
  std::string paired;
  for (const auto& op : o)
    if (op.with_next) paired += (paired.empty() ? "" : " ") + to_string(op);
  EXPECT_EQ(paired, "F7 F4.1 F8 F5.1 F9 F6.1 F7.1 F8.1 F9.1");
  // The last device does not overlap its first pair ("to further reduce bubble size").
  const auto last = sched::stage_order(Schedule::DUALPIPEV, 4, 10, 3);
  EXPECT_EQ(joined(std::vector<PipeOp>(last.begin(), last.begin() + 11)),
            "F0 F0.1 F1 F1.1 F2 F2.1 F3 F3.1 F4 B0.1 W0.1");
  EXPECT_FALSE(last[8].with_next);
  EXPECT_TRUE(last[11].with_next);
}

// ---- Bidirectional DualPipe (github.com/deepseek-ai/DualPipe, dualpipe.py).

TEST(ScheduleOrders, DualPipeIsCompleteAndDeadlockFreeInBothDirections) {
  for (int p : {2, 4, 6, 8})
    for (int m : {2 * p, 2 * p + 2, 4 * p}) {
      ParallelPlan plan = plan_of(Schedule::DUALPIPE, p, m, 2);
      SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
      const auto orders = sched::plan_orders(plan);
      EXPECT_NO_THROW(sched::validate_orders(orders, p, m, 2, true, "t", true, true));
      for (int s = 0; s < p; ++s) {
        // Micro-batches 0..m/2-1 run the forward direction (chunk 0), the rest the reverse (chunk 1); the mirror
        // stage pp-1-s runs the same order with the directions swapped.
        for (const auto& op : orders[s]) EXPECT_EQ(op.chunk, 2 * op.microbatch >= m ? 1 : 0) << to_string(op);
        const auto& mirror = orders[p - 1 - s];
        ASSERT_EQ(orders[s].size(), mirror.size());
        for (std::size_t i = 0; i < mirror.size(); ++i) {
          const PipeOp& a = orders[s][i];
          const PipeOp& b = mirror[i];
          EXPECT_EQ(a.kind, b.kind);
          EXPECT_EQ(a.chunk, 1 - b.chunk);
          EXPECT_EQ(a.microbatch % (m / 2), b.microbatch % (m / 2));
        }
        // The DualPipe README's table: PP + 1 chunk activations per device (PP = p stages).
        EXPECT_EQ(sched::max_in_flight(orders[s], true), p + 1) << "stage " << s;
      }
    }
  // A micro-batch on the other direction's chunk is refused.
  auto orders = sched::plan_orders(plan_of(Schedule::DUALPIPE, 2, 4, 2));
  orders[0][0].chunk = 1;
  EXPECT_THROW(sched::validate_orders(orders, 2, 4, 2, true, "t", true, true), ConfigError);
}

TEST(ScheduleOrders, DualPipeHoldsTwoCopiesOfTheModel) {
  ParallelPlan plan = plan_of(Schedule::DUALPIPE, 4, 8, 2);
  // Stage s: stage s of the forward copy (model chunk s) and stage 3 - s of the reverse copy (model chunk 7 - s).
  EXPECT_EQ(plan.model_chunk(0, 1), 7);
  EXPECT_EQ(plan.model_chunk(3, 1), 4);
  EXPECT_EQ(plan.pipeline_chunks(), 4);
  EXPECT_EQ(plan.chunk_layers(16), (std::vector<int>{4, 4, 4, 4, 4, 4, 4, 4}));
  EXPECT_EQ(plan.chunk_first_layers(16), (std::vector<int>{0, 4, 8, 12, 0, 4, 8, 12}));
  EXPECT_EQ(plan.stage_layers(16), (std::vector<int>{8, 8, 8, 8}));
  EXPECT_EQ(plan.first_chunk_of(3), 0);
  EXPECT_EQ(plan.first_chunk_of(4), 4);
  for (int s : {0, 3}) EXPECT_TRUE(plan.is_embedding_stage(s) && plan.is_head_stage(s)) << s;
  for (int s : {1, 2}) EXPECT_FALSE(plan.is_embedding_stage(s) || plan.is_head_stage(s)) << s;
  // Uneven stages: layers_per_stage gives one copy's pp stages, the other copy mirrors them.
  plan.layers_per_stage = {3, 5, 5, 3};
  EXPECT_EQ(plan.chunk_layers(16), (std::vector<int>{3, 5, 5, 3, 3, 5, 5, 3}));
  EXPECT_EQ(plan.stage_layers(16), (std::vector<int>{6, 10, 10, 6}));
  EXPECT_EQ(plan.chunk_first_layers(16), (std::vector<int>{0, 3, 8, 13, 0, 3, 8, 13}));
}

TEST(ScheduleOrders, OverlapMoeCommPairsIndependentForwardsAndBackwards) {
  // Without pipelining: F(i+1) with B(i) (combined_1f1b_schedule_for_no_pipelining).
  ParallelPlan plan = plan_of(Schedule::ONE_F_ONE_B, 1, 4);
  plan.overlap_moe_comm = true;
  auto orders = sched::plan_orders(plan);
  EXPECT_NO_THROW(sched::validate_orders(orders, 1, 4, 1, false, "t"));
  EXPECT_EQ(joined(orders[0]), "F0 F1 B0 F2 B1 F3 B2 B3");
  // Interleaved: one more forward in the warm-up (stage 0 of 2 with 2 chunks: 2 + 2 + 1 = 5).
  plan = plan_of(Schedule::INTERLEAVED, 2, 4, 2);
  plan.overlap_moe_comm = true;
  orders = sched::plan_orders(plan);
  EXPECT_NO_THROW(sched::validate_orders(orders, 2, 4, 2, false, "t"));
  EXPECT_EQ(joined(orders[0]), "F0 F1 F0.1 F1.1 F2 F3 B0.1 F2.1 B1.1 F3.1 B0 B1 B2.1 B3.1 B2 B3");
  for (const auto& o : orders)
    for (std::size_t i = 0; i < o.size(); ++i)
      EXPECT_EQ(o[i].with_next, o[i].kind == K::F && i + 1 < o.size() && o[i + 1].kind == K::B) << to_string(o[i]);
}
