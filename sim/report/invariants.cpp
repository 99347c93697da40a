#include "sim/report/invariants.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "traces/error.hpp"

namespace dtsim::sim {
namespace {

constexpr double kRel = 1e-6;  // relative tolerance: the engines' own rounding

[[noreturn]] void violated(const std::string& what) { throw InternalError("result invariant violated: " + what); }

bool finite_nonneg(double v) { return std::isfinite(v) && v >= 0; }

std::string num(double v) {
  std::ostringstream o;
  o.precision(9);
  o << v;
  return o.str();
}

/// The highest dense peak (FLOP/s) the plan's GEMMs can use on this GPU: the model's dtype, TF32 (at most the BF16
/// peak) for an fp32 model, FP8 for FP8 recipes and MXFP8, FP4 for NVFP4.
double fastest_peak_flops(const TransformerSpec& m, const ClusterSpec& c, const ParallelPlan& p) {
  double peak = c.gpu.peak_flops(m.dtype);
  if (m.dtype == DType::FP32) peak = std::max(peak, c.gpu.peak_bf16_flops);
  if (is_fp8(p.precision)) peak = std::max(peak, c.gpu.peak_fp8_flops);
  if (p.precision == Precision::NVFP4) peak = std::max({peak, c.gpu.peak_fp8_flops, c.gpu.peak_fp4_flops});
  return peak;
}

}  // namespace

void check_invariants(const Inputs& in, const Lowered& low, const EngineResult& res, const Report& rep) {
  const double T = rep.iteration_time_s;
  if (!std::isfinite(T) || !(T > 0)) violated("iteration time " + num(T) + " s is not a finite positive number");
  const double t_max = T * (1 + kRel);
  if (res.start_s.size() != res.end_s.size()) violated("the engine timed starts and ends of different task counts");
  for (std::size_t i = 0; i < res.end_s.size(); ++i) {
    const double s = res.start_s[i], e = res.end_s[i];
    if (!finite_nonneg(s) || !std::isfinite(e) || e < s || e > t_max)
      violated("task " + std::to_string(i) + " ran from " + num(s) + " s to " + num(e) + " s in an iteration of " +
               num(T) + " s");
  }
  for (const auto& r : rep.ranks) {
    const std::string who = "rank " + std::to_string(r.global_rank);
    if (!finite_nonneg(r.peak_bytes)) violated(who + ": peak memory " + num(r.peak_bytes) + " B");
    for (const auto& [t, bytes] : r.memory_timeline) {
      double total = 0;
      for (double b : bytes) total += b;
      if (!std::isfinite(t) || !(total >= -1.0))  // a byte of rounding
        violated(who + ": memory in use " + num(total) + " B at " + num(t) + " s");
    }
    for (const auto& [v, name] : {std::pair{r.compute_s, "compute"}, std::pair{r.exposed_comm_s, "exposed comm"},
                                  std::pair{r.bubble_s, "bubble"}, std::pair{r.variability_wait_s, "slowest-GPU wait"}})
      if (!finite_nonneg(v) || v > t_max)
        violated(who + ": " + name + " time " + num(v) + " s in an iteration of " + num(T) + " s");
  }
  const auto& plan = *in.plan;
  const double peak = fastest_peak_flops(*in.model, *in.cluster, plan);
  const double gpus = plan.world_size();
  for (const auto& [flops, name] :
       {std::pair{low.model_flops_per_iteration, "model"}, std::pair{low.hardware_flops_per_iteration, "executed"}}) {
    const double rate = flops / T / gpus;
    if (!finite_nonneg(flops) || rate > peak * (1 + kRel))
      violated(std::string(name) + " FLOPs of " + num(rate / 1e12) + " TFLOP/s per GPU exceed the GPU's peak of " +
               num(peak / 1e12) + " TFLOP/s");
  }
  for (const auto& l : res.link_stats) {
    if (!finite_nonneg(l.bytes) || !finite_nonneg(l.busy_s) || l.busy_s > t_max)
      violated("link " + l.name + ": " + num(l.bytes) + " B, busy " + num(l.busy_s) + " s in an iteration of " +
               num(T) + " s");
    if (!finite_nonneg(l.peak_utilization) || l.peak_utilization > 1 + kRel || !finite_nonneg(l.peak_demand))
      violated("link " + l.name + ": peak utilisation " + num(l.peak_utilization) + " is above 1");
  }
  if (!plan.routing.loads.empty()) {
    double sum = 0;
    for (double f : plan.routing.loads) {
      if (!finite_nonneg(f)) violated("routing load " + num(f));
      sum += f;
    }
    if (!(sum > 0) || !std::isfinite(sum)) violated("routing loads sum to " + num(sum));
  }
}

}  // namespace dtsim::sim
