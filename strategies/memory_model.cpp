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

StaticMemory static_memory_for_params(double params, DType dtype, int zero_stage, int dp) {
  StaticMemory s;
  s.params = params;
  const double e = dtype_bytes(dtype);
  // ZeRO: stage 1 shards optimizer states, 2 also gradients, 3 also parameters.
  s.weight_bytes = params * e / (zero_stage >= 3 ? dp : 1);
  s.gradient_bytes = params * e / (zero_stage >= 2 ? dp : 1);
  s.optimizer_bytes = params * optimizer_bytes_per_param(dtype) / (zero_stage >= 1 ? dp : 1);
  return s;
}

StaticMemory static_memory(const TransformerSpec& m, const ParallelPlan& plan, int stage) {
  return static_memory_for_params(stage_params_per_rank(m, plan, stage), m.dtype, plan.zero_stage, plan.dp);
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
  const auto orders = sched::plan_orders(plan);
  // In-flight (micro-batch, chunk) pairs, each holding 1/v of the stage's activations (uniform chunks).
  const int in_flight = sched::max_in_flight(orders[stage], plan.split_backward());
  return reserved_bytes + static_memory(m, plan, stage).total() +
         in_flight * stage_activation_bytes_per_microbatch(m, plan, stage) / plan.virtual_stages +
         cost::layer_activation_bytes(m, shape_of(plan)).transient;
}

}  // namespace dtsim::memory
