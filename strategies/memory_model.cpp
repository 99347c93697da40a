#include "strategies/memory_model.hpp"

#include <algorithm>

#include "strategies/schedule.hpp"
#include "strategies/transformer_costs.hpp"

namespace dtsim::memory {

double optimizer_bytes_per_param(DType dtype) { return (dtype == DType::FP32 ? 0.0 : 4.0) + 8.0; }

double stage_params_per_rank(const TransformerSpec& m, const ParallelPlan& plan, int stage) {
  const auto layers = plan.stage_layers(m.num_layers);
  double p = layers[stage] * cost::layer_params_per_rank(m, plan.tp);
  if (stage == 0) p += cost::first_stage_extra_params(m, plan.tp);
  if (stage == plan.pp - 1) p += cost::last_stage_extra_params(m, plan.tp, plan.pp);
  return p;
}

StaticMemory static_memory(const TransformerSpec& m, const ParallelPlan& plan, int stage) {
  StaticMemory s;
  s.params = stage_params_per_rank(m, plan, stage);
  const double e = dtype_bytes(m.dtype);
  s.weight_bytes = s.params * e;
  s.gradient_bytes = s.params * e;
  s.optimizer_bytes = s.params * optimizer_bytes_per_param(m.dtype) / (plan.zero_stage >= 1 ? plan.dp : 1);
  return s;
}

namespace {
cost::Shape shape_of(const ParallelPlan& plan) {
  return {plan.micro_batch_size, plan.tp, plan.sequence_parallel, plan.recompute};
}
}  // namespace

double stage_activation_bytes_per_microbatch(const TransformerSpec& m, const ParallelPlan& plan, int stage) {
  const auto sh = shape_of(plan);
  double a = plan.stage_layers(m.num_layers)[stage] * cost::layer_activation_bytes(m, sh).stored;
  if (stage == 0) a += cost::embedding_activation_bytes(m, sh).stored;
  if (stage == plan.pp - 1) a += cost::head_activation_bytes(m, sh).stored;
  return a;
}

double analytic_peak_bytes(const TransformerSpec& m, const ParallelPlan& plan, int stage, double reserved_bytes) {
  const int in_flight = sched::max_in_flight(plan.schedule, plan.pp, plan.num_microbatches(), stage);
  return reserved_bytes + static_memory(m, plan, stage).total() +
         in_flight * stage_activation_bytes_per_microbatch(m, plan, stage) +
         cost::layer_activation_bytes(m, shape_of(plan)).transient;
}

}  // namespace dtsim::memory
