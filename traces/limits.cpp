#include "traces/limits.hpp"

#include <cmath>
#include <cstdio>

#include "traces/error.hpp"

namespace dtsim::limits {
std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string describe(const Range& r) {
  std::string s = "[";
  s.append(number(r.lo)).append(", ").append(number(r.hi)).append("]");
  if (*r.unit) s.append(" ").append(r.unit);
  return s;
}

void check(double v, const Range& r, const std::string& ctx, const std::string& field) {
  if (std::isfinite(v) && v >= r.lo && v <= r.hi) return;
  throw ConfigError(ctx + ": " + field + " = " + number(v) + " is outside its range " + describe(r));
}

void check_or_zero(double v, const Range& r, const std::string& ctx, const std::string& field) {
  if (v == 0) return;
  if (std::isfinite(v) && v >= r.lo && v <= r.hi) return;
  throw ConfigError(ctx + ": " + field + " = " + number(v) + " is outside its range 0 or " + describe(r));
}

long long checked_product(std::initializer_list<long long> factors, const std::string& ctx, const std::string& what,
                          long long max) {
  long long p = 1;
  std::string terms;
  bool overflow = false;
  for (long long f : factors) {
    if (!terms.empty()) terms.append("*");
    terms.append(std::to_string(f));
    if (f < 0) throw ConfigError(ctx + ": " + what + " has a negative factor (" + std::to_string(f) + ")");
    if (overflow) continue;
    if (f != 0 && p > max / f) overflow = true;
    else p *= f;
  }
  if (overflow)
    throw ConfigError(ctx + ": " + what + " = " + terms + " is beyond what dtsim models (at most " +
                      std::to_string(max) + ")");
  return p;
}

const std::vector<Entry>& table() {
  static const std::vector<Entry> t = {
      {"cluster JSON", "gpu.peak_*_flops (fp8/fp4: 0 = none)", kPeakFlops},
      {"cluster JSON",
       "gpu.hbm_Bps, intra_node.bandwidth_Bps, inter_node.nic_bandwidth_Bps, graph links' bandwidth_Bps", kBandwidth},
      {"cluster JSON", "gpu.memory_bytes", kDeviceMemory},
      {"cluster JSON", "gpu.board_power_w (0 = not stated)", kBoardPower},
      {"cluster JSON", "gpu.sm_count (0 = not stated; a whole number)", kSmCount},
      {"cluster JSON", "intra_node.latency_s, inter_node.latency_s, inter_node.spine_latency_s, graph links' latency_s",
       kLatency},
      {"cluster JSON", "inter_node.oversubscription, inter_node.pod_oversubscription", kOversubscription},
      {"stack profile, calibration JSON",
       "host_issue_s, host_collective_issue_s, p2p_overhead_s, kernel_launch_s, collective_step_overhead_s", kOverhead},
      {"stack profile, calibration JSON", "per_iteration_s", kIterationOverhead},
      {"calibration JSON", "compute.gemm_half_efficiency_flops", kFlopScale},
      {"calibration JSON", "compute.optimizer_bytes_per_param", kBytesPerParam},
      {"calibration JSON", "memory.reserved_memory_bytes", kReservedBytes},
      {"calibration JSON", "network.collective_algorithms[].max_bytes, network.segments[].max_bytes", kMessageBytes},
      {"calibration JSON", "network.segments[].latency_factor, bandwidth_factor (> 0)", kFactor},
      {"calibration JSON", "compute.*_efficiency*, network.*_bandwidth_efficiency", kEfficiency},
      {"plan JSON, --dp-bucket-mb", "dp_bucket_bytes (plan JSON: or 0, the stack's)", kBucketBytes},
      {"stack profile, calibration JSON", "dp_bucket_min_params, dp_bucket_params_per_dp", kBucketParams},
      {"--routing loads:..., routing loads file", "each expert's load (normalised to fractions)", kRoutingLoad},
      {"--routing skew:S", "S", kRoutingSkew},
      {"--routing ...,cf:X", "X (capacity factor)", kCapacityFactor},
      {"published-data rows, calibrate runs", "measured iteration time", kMeasuredTime},
      {"published-data rows", "measured peak memory", kMeasuredMemory},
      {"published-data rows", "mfu", kMfu},
  };
  return t;
}

}  // namespace dtsim::limits
