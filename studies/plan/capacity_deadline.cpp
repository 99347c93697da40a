#include "studies/plan/capacity_deadline.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "studies/plan/plan_search.hpp"
#include "traces/error.hpp"

namespace dtsim::sim {

DeadlineResult plan_for_deadline(const DeadlineInput& in) {
  if (!(in.tokens > 0)) throw ConfigError("capacity: --tokens must be positive");
  if (!(in.days > 0)) throw ConfigError("capacity: --days must be positive");
  if (in.global_batch_size <= 0) throw ConfigError("capacity: --gbs must be positive");
  if (in.price_per_gpu_hour < 0) throw ConfigError("capacity: --price-per-gpu-hour must not be negative");
  if (in.max_gpus < 1) throw ConfigError("capacity: --max-gpus must be positive");
  in.model.validate();
  const ClusterSpec probe = load_cluster(in.cluster_preset);  // a bare preset: one whole node
  // GPU counts tried: powers of two up to one node, then whole nodes, doubling (8-GPU nodes: 1, 2, 4, 8, 16, ...;
  // 72-GPU NVL72 racks: 1, 2, ..., 64, 72, 144, 288, ...).
  const int node = probe.gpus_per_node;
  auto next = [node](std::int64_t n) { return n < node ? std::min<std::int64_t>(2 * n, node) : 2 * n; };
  DeadlineResult out;
  const double seconds = in.days * 86400.0;
  out.required_tokens_per_s = in.tokens / seconds;
  const double per_gpu = probe.gpu.peak_flops(in.model.dtype) * in.calibration.gemm_efficiency_max /
                         (6.0 * static_cast<double>(in.model.total_params()));
  out.bound_gpus = out.required_tokens_per_s / per_gpu;
  std::int64_t first = 1;
  while (static_cast<double>(next(first)) <= out.bound_gpus && next(first) <= in.max_gpus) first = next(first);
  const double seq_tokens = static_cast<double>(in.global_batch_size) * in.model.seq_len;
  for (std::int64_t count = first; count <= in.max_gpus; count = next(count)) {
    const int n = static_cast<int>(count);
    planning::PlannerInput pin;
    pin.model = in.model;
    pin.cluster = load_cluster(in.cluster_preset + ":" + std::to_string(n));
    pin.calibration = in.calibration;
    pin.global_batch_size = in.global_batch_size;
    pin.memory_limit_bytes = in.memory_limit_bytes;
    DeadlineStep st;
    st.gpus = n;
    const PlanSearch s = search_plan(pin, "grid", in.top, in.options);
    st.plans_considered = s.planner.considered;
    if (s.best >= 0) {
      const EvaluatedPlan& e = s.evaluated[s.best];
      st.found = true;
      st.plan = e.candidate.plan;
      st.iteration_s = e.simulated_s;
      st.tokens_per_s = seq_tokens / e.simulated_s;
      st.days = in.tokens / st.tokens_per_s / 86400.0;
      st.cost = in.price_per_gpu_hour * n * st.days * 24.0;
      st.mfu = 6.0 * static_cast<double>(in.model.total_params()) * st.tokens_per_s /
               (n * pin.cluster.gpu.peak_flops(in.model.dtype));
      st.meets = st.days <= in.days;
    }
    out.steps.push_back(st);
    if (st.meets) {
      out.answer = static_cast<int>(out.steps.size()) - 1;
      break;
    }
  }
  return out;
}

}  // namespace dtsim::sim
