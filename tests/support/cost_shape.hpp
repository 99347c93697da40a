// The cost model's shape of one micro-batch of one sequence on a TP group, for the closed-form (oracle) tests of
// layer costs and stored activations.
#pragma once

#include "strategies/transformer_costs.hpp"
#include "traces/plan.hpp"

namespace dtsim::testing {

inline cost::Shape layer_shape(int tp, bool sequence_parallel, Precision precision = Precision::BF16) {
  cost::Shape sh;
  sh.micro_batch = 1;
  sh.tp = tp;
  sh.sequence_parallel = sequence_parallel;
  sh.precision = precision;
  return sh;
}

}  // namespace dtsim::testing
