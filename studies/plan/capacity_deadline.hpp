// Capacity planning against a deadline: the smallest GPU count (powers of two up to one node, then whole nodes,
// doubling: 72, 144, 288, ... on 72-GPU NVL72 racks) whose best strategy trains `tokens` tokens within `days`, and
// what it costs.
//
// Per GPU count N the grid planner (every TP x PP x DP x micro-batch x schedule x recompute x ZeRO plan, estimated
// in closed form) ranks the plans, the best `top` are simulated (each in its own process) and the fastest that fits
// memory is kept: a sweep of the strategy space at that N. Counts are scanned upwards from the largest such count
// below a hardware bound no strategy can beat: N >= tokens x 6 x params / (seconds x peak x gemm_efficiency_max)
// (6 FLOPs per parameter and token for forward + backward, attention and recompute ignored, perfect scaling), and
// the first N that meets the deadline is the answer (training time is assumed not to grow with N; the table shows
// every count tried).
#pragma once
#include <string>
#include <vector>

#include "sim/model/lowering.hpp"
#include "strategies/planner.hpp"

namespace dtsim::sim {

struct DeadlineInput {
  TransformerSpec model;
  std::string cluster_preset;  ///< "dgx-a100": clusters are "<preset>:N"
  Calibration calibration;
  double tokens = 0;              ///< to train
  double days = 0;                ///< deadline
  double price_per_gpu_hour = 0;  ///< 0: no cost column
  int global_batch_size = 0;      ///< sequences per iteration
  double memory_limit_bytes = 0;  ///< 0 = the device's
  int max_gpus = 16384;
  int top = 3;  ///< candidates simulated per GPU count
  SimOptions options;
};

struct DeadlineStep {
  int gpus = 0;
  bool found = false;  ///< a plan fits memory
  ParallelPlan plan;
  double iteration_s = 0, tokens_per_s = 0, days = 0, cost = 0, mfu = 0;
  bool meets = false;
  std::size_t plans_considered = 0;
};

struct DeadlineResult {
  double required_tokens_per_s = 0;
  double bound_gpus = 0;            ///< the hardware bound above (fractional)
  std::vector<DeadlineStep> steps;  ///< in the order tried
  int answer = -1;                  ///< index into steps; -1: not met up to max_gpus
};

/// ConfigError on bad input (non-positive tokens, days or batch; unknown preset).
DeadlineResult plan_for_deadline(const DeadlineInput& in);

}  // namespace dtsim::sim
