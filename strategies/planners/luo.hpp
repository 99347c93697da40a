// Pieces of the planner after Luo et al. (strategies/planners/luo.cpp) that tests check against closed forms.
#pragma once
#include <vector>

#include "traces/plan.hpp"

namespace dtsim::planning::luo {

/// Stage order "warm-up K forwards, then backward and forward in turn, then the remaining backwards" for M
/// micro-batches (K clamped to 1..M). K = p - s is DAPPLE's early backward (= Megatron 1F1B); K = M is GPipe.
std::vector<PipeOp> warmup_order(int M, int K);

/// Per-stage times of one micro-batch and the links between stages.
struct StageTimes {
  std::vector<double> forward_s, backward_s;  ///< per stage
  std::vector<double> send_s;                 ///< one-way transfer after stage k (p - 1 entries)
  std::vector<double> all_reduce_s;           ///< gradient synchronisation of each stage after its last backward
};

/// List schedule of per-stage orders (each stage runs its passes in order, a pass starts when its inputs have
/// arrived): the barrier time max_s(end of stage s's last pass + all_reduce_s), or infinity on deadlock.
double evaluate_orders(const std::vector<std::vector<PipeOp>>& orders, const StageTimes& t, int M);

}  // namespace dtsim::planning::luo
