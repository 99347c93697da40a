// Pipeline schedules as per-stage orders of forward (F), backward (B) and weight-gradient (W) passes.
//
//  gpipe        all forwards, then all backwards (fill-drain; Huang et al. 2019)
//  1f1b         PipeDream-Flush / Megatron-LM (Narayanan et al. 2021): min(p-s-1, m) warm-up forwards, then
//               one forward and one backward in turn, then the remaining backwards; with DAPPLE's warm-up
//               (Fan et al. 2021, "early backward") K_s = p-s and the steady state backward-then-forward
//  interleaved  Megatron-LM's interleaved 1F1B with v model chunks per stage (chunk c of stage s is model
//               chunk c*p+s); warm-up 2(p-s-1) + (v-1)p passes; needs m to be a multiple of p
//  zb-h1        Qi et al., "Zero Bubble Pipeline Parallelism" (ICLR 2024), ZB-H1: 1F1B with the backward split
//               into B and W; stage s delays its W passes by s places so that every stage keeps at most p
//               micro-batches in flight and W passes fill the cool-down: bubble (p-1)(T_F + T_B - T_W)
//  zb-h2        ZB-H2: up to 2p-1 micro-batches in flight; the order is produced by list scheduling with unit
//               pass times under the limits F-B <= 2(p-s)-1 and F-W <= 2p-1 per stage, which gives zero
//               bubble when T_F = T_B = T_W
//  dualpipev    DeepSeek's DualPipeV (DeepSeek-V3 report sec. 3.2.1; github.com/deepseek-ai/DualPipe dualpipev.py):
//               two chunks per stage in a V (stage s: model chunks s and 2p-1-s), zero-bubble B/W splits, and
//               the steady state's forward of one chunk run together with the backward of the other (with_next);
//               needs m >= 2p
//  dualpipe     bidirectional DualPipe (github.com/deepseek-ai/DualPipe dualpipe.py): the same steps on two
//               pipelines of p stages in opposite directions sharing the ranks (stage s: stage s of one copy of
//               the model and stage p-1-s of the other), m/2 micro-batches each; needs p even, m even, m >= 2p
//  custom       any order given per stage (validated here: complete, no duplicates, no deadlock)
#pragma once
#include <string>
#include <vector>

#include "traces/plan.hpp"

namespace dtsim::sched {

using PipeOp = dtsim::PipeOp;

/// Order of passes on stage `stage` for the schedules one stage's order of which needs no plan (gpipe, 1f1b,
/// zb-h1, zb-h2, dualpipev, dualpipe).
std::vector<PipeOp> stage_order(Schedule schedule, int p, int m, int stage, bool dapple_warmup = false);
/// DualPipeV's or (bidirectional) DualPipe's exchanges (the _send_* / _recv_* calls and _commit_and_wait_comm): before
/// pass i of the stage's order (i = the order's size: after the last pass) the stage posts sends[i] and recvs[i] in one
/// batch and waits for all of them. A send names the pass whose output goes out (F: its activation to the next model
/// chunk; B: its gradient to the previous), a receive the pass whose input comes in. Transfers between a stage and
/// itself (the last stage's turn) are not listed.
struct Exchanges {
  std::vector<std::vector<PipeOp>> sends, recvs;
};
Exchanges dualpipe_exchanges(int p, int m, int stage, bool bidirectional);
/// Order of passes on every stage of `plan` (any schedule, custom included).
std::vector<std::vector<PipeOp>> plan_orders(const ParallelPlan& plan);

/// Checks that `orders` (one list per stage) has every pass exactly once -- F and B (and W when `split`) of
/// every micro-batch < m on every chunk < v -- and can run without deadlock given the pipeline dependencies
/// F(i, k-1) -> F(i, k), F(i, k) -> B(i, k), B(i, k+1) -> B(i, k), B(i, k) -> W(i, k) over model chunks k.
/// Throws ConfigError naming the stage and pass at fault.
/// `v_shape`: chunks placed as DualPipeV places them (ParallelPlan::model_chunk), else chunk c of stage s is c*p+s.
/// `bidirectional`: DualPipe's (v_shape placement; micro-batch i runs only on chunk 2i >= m, model chunks 0..p-1 and
/// p..2p-1 are two pipelines).
void validate_orders(const std::vector<std::vector<PipeOp>>& orders, int p, int m, int v, bool split,
                     const std::string& ctx, bool v_shape = false, bool bidirectional = false);
/// The same for `plan`'s orders, its shape, placement and schedule named in the message.
void validate_orders(const std::vector<std::vector<PipeOp>>& orders, const ParallelPlan& plan);

/// Largest number of (micro-batch, chunk) activations a stage order holds at once: + at F, - at B (or at W
/// when the backward is split, since W still needs the layer inputs).
int max_in_flight(const std::vector<PipeOp>& order, bool split);
int max_in_flight(Schedule schedule, int p, int m, int stage);

}  // namespace dtsim::sched
