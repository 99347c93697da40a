#include "strategies/schedule.hpp"

#include <algorithm>

#include "traces/error.hpp"

namespace dtsim::sched {

std::vector<PipeOp> stage_order(Schedule schedule, int p, int m, int stage) {
  DTSIM_ASSERT(p > 0 && m > 0 && stage >= 0 && stage < p, "bad pipeline shape p=" << p << " m=" << m << " s=" << stage);
  std::vector<PipeOp> order;
  order.reserve(2 * m);
  if (schedule == Schedule::GPIPE) {
    for (int i = 0; i < m; ++i) order.push_back({PipeOp::Kind::F, i});
    for (int i = 0; i < m; ++i) order.push_back({PipeOp::Kind::B, i});
    return order;
  }
  const int warmup = std::min(p - stage - 1, m);
  for (int i = 0; i < warmup; ++i) order.push_back({PipeOp::Kind::F, i});
  for (int i = 0; i < m - warmup; ++i) {
    order.push_back({PipeOp::Kind::F, warmup + i});
    order.push_back({PipeOp::Kind::B, i});
  }
  for (int i = m - warmup; i < m; ++i) order.push_back({PipeOp::Kind::B, i});
  return order;
}

int max_in_flight(Schedule schedule, int p, int m, int stage) {
  int held = 0, peak = 0;
  for (const auto& op : stage_order(schedule, p, m, stage)) {
    held += op.kind == PipeOp::Kind::F ? 1 : -1;
    peak = std::max(peak, held);
  }
  return peak;
}

}  // namespace dtsim::sched
