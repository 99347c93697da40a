#include "traces/calibration.hpp"

#include "traces/calibration_data.hpp"
#include "traces/error.hpp"
#include "traces/json_util.hpp"

namespace dtsim {
using json_util::get;
using json_util::get_or;

void Calibration::validate(const std::string& ctx) const {
  auto in01 = [&](double v, const char* f) {
    if (!(v > 0 && v <= 1)) throw ConfigError(ctx + ": " + f + " must be in (0, 1], got " + std::to_string(v));
  };
  auto nonneg = [&](double v, const char* f) {
    if (!(v >= 0)) throw ConfigError(ctx + ": " + f + " must not be negative, got " + std::to_string(v));
  };
  in01(gemm_efficiency_max, "compute.gemm_efficiency_max");
  in01(memory_bandwidth_efficiency, "compute.memory_bandwidth_efficiency");
  in01(intra_bandwidth_efficiency, "network.intra_bandwidth_efficiency");
  in01(inter_bandwidth_efficiency, "network.inter_bandwidth_efficiency");
  nonneg(gemm_half_efficiency_flops, "compute.gemm_half_efficiency_flops");
  nonneg(kernel_launch_s, "compute.kernel_launch_s");
  nonneg(optimizer_bytes_per_param, "compute.optimizer_bytes_per_param");
  nonneg(collective_step_overhead_s, "network.collective_step_overhead_s");
  nonneg(p2p_overhead_s, "network.p2p_overhead_s");
  nonneg(reserved_memory_bytes, "memory.reserved_memory_bytes");
}

nlohmann::json to_json(const Calibration& c) {
  return {{"schema_version", 1},
          {"name", c.name},
          {"gpu", c.gpu},
          {"provenance", c.provenance},
          {"compute",
           {{"gemm_efficiency_max", c.gemm_efficiency_max},
            {"gemm_half_efficiency_flops", c.gemm_half_efficiency_flops},
            {"memory_bandwidth_efficiency", c.memory_bandwidth_efficiency},
            {"kernel_launch_s", c.kernel_launch_s},
            {"optimizer_bytes_per_param", c.optimizer_bytes_per_param}}},
          {"network",
           {{"intra_bandwidth_efficiency", c.intra_bandwidth_efficiency},
            {"inter_bandwidth_efficiency", c.inter_bandwidth_efficiency},
            {"collective_step_overhead_s", c.collective_step_overhead_s},
            {"p2p_overhead_s", c.p2p_overhead_s}}},
          {"memory", {{"reserved_memory_bytes", c.reserved_memory_bytes}}}};
}

Calibration calibration_from_json(const nlohmann::json& j, const std::string& ctx) {
  json_util::check_schema_version(j, ctx, 1);
  json_util::reject_unknown(j, ctx, {"schema_version", "name", "gpu", "provenance", "compute", "network", "memory"});
  Calibration c;
  c.name = get_or<std::string>(j, ctx, "name", "custom");
  c.gpu = get_or<std::string>(j, ctx, "gpu", "");
  c.provenance = get_or<nlohmann::json>(j, ctx, "provenance", nlohmann::json::object());
  auto cj = get<nlohmann::json>(j, ctx, "compute");
  const std::string cc = ctx + ".compute";
  json_util::reject_unknown(cj, cc, {"gemm_efficiency_max", "gemm_half_efficiency_flops", "memory_bandwidth_efficiency",
                                     "kernel_launch_s", "optimizer_bytes_per_param"});
  c.gemm_efficiency_max = get<double>(cj, cc, "gemm_efficiency_max");
  c.gemm_half_efficiency_flops = get<double>(cj, cc, "gemm_half_efficiency_flops");
  c.memory_bandwidth_efficiency = get<double>(cj, cc, "memory_bandwidth_efficiency");
  c.kernel_launch_s = get<double>(cj, cc, "kernel_launch_s");
  c.optimizer_bytes_per_param = get<double>(cj, cc, "optimizer_bytes_per_param");
  auto nj = get<nlohmann::json>(j, ctx, "network");
  const std::string nc = ctx + ".network";
  json_util::reject_unknown(nj, nc, {"intra_bandwidth_efficiency", "inter_bandwidth_efficiency",
                                     "collective_step_overhead_s", "p2p_overhead_s"});
  c.intra_bandwidth_efficiency = get<double>(nj, nc, "intra_bandwidth_efficiency");
  c.inter_bandwidth_efficiency = get<double>(nj, nc, "inter_bandwidth_efficiency");
  c.collective_step_overhead_s = get<double>(nj, nc, "collective_step_overhead_s");
  c.p2p_overhead_s = get<double>(nj, nc, "p2p_overhead_s");
  auto mj = get_or<nlohmann::json>(j, ctx, "memory", nlohmann::json::object());
  json_util::reject_unknown(mj, ctx + ".memory", {"reserved_memory_bytes"});
  c.reserved_memory_bytes = get_or<double>(mj, ctx + ".memory", "reserved_memory_bytes", 0.0);
  c.validate(ctx);
  return c;
}

Calibration default_calibration(const std::string& gpu_name) {
  for (const auto& [gpu, text] : detail::builtin_calibrations()) {
    if (gpu == gpu_name) return calibration_from_json(nlohmann::json::parse(text), "built-in calibration '" + gpu + "'");
  }
  throw ConfigError("no built-in calibration for gpu '" + gpu_name + "'; pass --calibration FILE");
}

Calibration load_calibration(const std::string& path) {
  return calibration_from_json(json_util::read_file(path), "calibration file '" + path + "'");
}

}  // namespace dtsim
