// Pipeline schedules as per-stage orders of forward (F) and backward (B) micro-batch passes.
#pragma once
#include <vector>

#include "traces/plan.hpp"

namespace dtsim::sched {

struct PipeOp {
  enum class Kind { F, B } kind = Kind::F;
  int microbatch = 0;
  bool operator==(const PipeOp&) const = default;
};

/// Order of passes on stage `stage` (0-based) of `p` stages with `m` micro-batches.
/// GPipe: all forwards, then all backwards (fill-drain, Huang et al. 2019).
/// 1F1B (PipeDream-Flush, Narayanan et al. 2021; DAPPLE's early backward): min(p-s-1, m) warm-up forwards,
/// then alternate one forward and one backward, then drain the remaining backwards.
std::vector<PipeOp> stage_order(Schedule schedule, int p, int m, int stage);

/// Largest number of micro-batches whose activations stage `stage` holds at once under `schedule`.
int max_in_flight(Schedule schedule, int p, int m, int stage);

}  // namespace dtsim::sched
