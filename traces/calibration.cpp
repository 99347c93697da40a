#include "traces/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "traces/calibration_data.hpp"
#include "traces/error.hpp"
#include "traces/json_util.hpp"
#include "traces/limits.hpp"
#include "traces/plan.hpp"

namespace dtsim {
using json_util::get;
using json_util::get_or;

void Calibration::validate(const std::string& ctx) const {
  // An efficiency is a fraction of a peak: (0, 1], and at least limits::kEfficiency.lo (1e-6) so that a time divided
  // by it stays finite (a denormal such as 1e-320 would make every kernel last longer than the universe).
  auto in01 = [&](double v, const char* f) {
    if (!(v >= limits::kEfficiency.lo && v <= limits::kEfficiency.hi))
      throw ConfigError(ctx + ": " + f + " must be in (0, 1] (at least " + limits::number(limits::kEfficiency.lo) +
                        "), got " + limits::number(v));
  };
  auto in_range = [&](double v, const char* f, const limits::Range& r) { limits::check(v, r, ctx, f); };
  in01(gemm_efficiency_max, "compute.gemm_efficiency_max");
  in01(sustained_tensor_ratio, "compute.sustained_tensor_ratio");
  in01(gemm_misaligned_efficiency, "compute.gemm_misaligned_efficiency");
  in01(memory_bandwidth_efficiency, "compute.memory_bandwidth_efficiency");
  in01(scatter_add_bandwidth_efficiency, "compute.scatter_add_bandwidth_efficiency");
  in01(flash_attention_efficiency, "compute.flash_attention_efficiency");
  if (!(flash_attention_backward_ratio > 0 && flash_attention_backward_ratio * flash_attention_efficiency <= 1))
    throw ConfigError(ctx + ": compute.flash_attention_backward_ratio must be > 0 and keep the backward's efficiency " +
                      "at most 1, got " + limits::number(flash_attention_backward_ratio));
  for (auto [v, f] : {std::pair{flash_attention_half_kv, "compute.flash_attention_half_kv"},
                      std::pair{flash_attention_backward_half_kv, "compute.flash_attention_backward_half_kv"}})
    if (!(v >= 0 && v <= 1e7))
      throw ConfigError(ctx + ": " + f + " must be 0 (no curve) or a key count in (0, 1e7], got " + limits::number(v));
  for (auto [v, f] : {std::pair{flash_attention_exponent, "compute.flash_attention_exponent"},
                      std::pair{flash_attention_backward_exponent, "compute.flash_attention_backward_exponent"}})
    if (!(v >= 0.25 && v <= 8)) throw ConfigError(ctx + ": " + f + " must be in [0.25, 8], got " + limits::number(v));
  in01(intra_bandwidth_efficiency, "network.intra_bandwidth_efficiency");
  in01(inter_bandwidth_efficiency, "network.inter_bandwidth_efficiency");
  in_range(gemm_half_efficiency_flops, "compute.gemm_half_efficiency_flops", limits::kFlopScale);
  if (!(gemm_efficiency_exponent >= 0.25 && gemm_efficiency_exponent <= 8))
    throw ConfigError(ctx + ": compute.gemm_efficiency_exponent must be in [0.25, 8], got " +
                      std::to_string(gemm_efficiency_exponent));
  for (auto [v, f] : {std::pair{gemm_tile_m, "compute.gemm_tile_m"}, std::pair{gemm_tile_k, "compute.gemm_tile_k"},
                      std::pair{gemm_tile_n, "compute.gemm_tile_n"}})
    if (!(v >= 0 && v <= 4096))
      throw ConfigError(ctx + ": " + f + " must be in [0, 4096] (0: off), got " + limits::number(v));
  in01(fp8_gemm_efficiency_scale, "compute.fp8_gemm_efficiency_scale");
  in01(fp8_rowwise_gemm_efficiency_scale, "compute.fp8_rowwise_gemm_efficiency_scale");
  in01(fp4_gemm_efficiency_scale, "compute.fp4_gemm_efficiency_scale");
  for (auto [v, f] : {std::pair{interference_gemm_slowdown, "compute.interference_gemm_slowdown"},
                      std::pair{interference_memory_slowdown, "compute.interference_memory_slowdown"},
                      std::pair{interference_flash_slowdown, "compute.interference_flash_slowdown"},
                      std::pair{interference_collective_slowdown, "compute.interference_collective_slowdown"}})
    if (!(v >= 0 && v <= 10)) throw ConfigError(ctx + ": " + f + " must be in [0, 10], got " + std::to_string(v));
  in_range(kernel_launch_s, "compute.kernel_launch_s", limits::kOverhead);
  if (!(gpu_speed_cv >= 0 && gpu_speed_cv <= 0.3))
    throw ConfigError(ctx + ": compute.gpu_speed_cv must be in [0, 0.3] (0: off), got " + limits::number(gpu_speed_cv));
  if (!(gpu_speed_reference_gpus >= 1 && gpu_speed_reference_gpus <= 1e7 &&
        gpu_speed_reference_gpus == std::floor(gpu_speed_reference_gpus)))
    throw ConfigError(ctx + ": compute.gpu_speed_reference_gpus must be a whole number in [1, 1e7], got " +
                      limits::number(gpu_speed_reference_gpus));
  in_range(host_issue_s, "compute.host_issue_s", limits::kOverhead);
  in_range(host_collective_issue_s, "compute.host_collective_issue_s", limits::kOverhead);
  if (!(fa2_attention_efficiency == 0 ||
        (fa2_attention_efficiency >= limits::kEfficiency.lo && fa2_attention_efficiency <= 1)))
    throw ConfigError(ctx + ": compute.fa2_attention_efficiency must be 0 (none) or in [1e-06, 1], got " +
                      limits::number(fa2_attention_efficiency));
  in_range(per_iteration_s, "compute.per_iteration_s", limits::kIterationOverhead);
  in_range(dp_bucket_min_params, "compute.dp_bucket_min_params", limits::kBucketParams);
  in_range(dp_bucket_params_per_dp, "compute.dp_bucket_params_per_dp", limits::kBucketParams);
  in_range(optimizer_bytes_per_param, "compute.optimizer_bytes_per_param", limits::kBytesPerParam);
  in_range(collective_step_overhead_s, "network.collective_step_overhead_s", limits::kOverhead);
  in_range(p2p_overhead_s, "network.p2p_overhead_s", limits::kOverhead);
  check_p2p_sync(p2p_sync, ctx + ": network.p2p_sync");
  check_pp_scatter_gather(pp_scatter_gather, ctx + ": network.pp_scatter_gather");
  if (nccl_protocol != "auto" && nccl_protocol != "off" && nccl_protocol != "ll" && nccl_protocol != "ll128" &&
      nccl_protocol != "simple")
    throw ConfigError(ctx + ": network.nccl_protocol '" + nccl_protocol +
                      "' is not known (known: auto, off, ll, ll128, simple)");
  in_range(reserved_memory_bytes, "memory.reserved_memory_bytes", limits::kReservedBytes);
  for (std::size_t i = 0; i < collective_algorithms.size(); ++i) {
    const auto& r = collective_algorithms[i];
    const std::string w = ctx + ": network.collective_algorithms[" + std::to_string(i) + "]";
    if (r.op != "all-reduce") throw ConfigError(w + ": op '" + r.op + "' is not supported (known: all-reduce)");
    if (r.algorithm != "ring" && r.algorithm != "tree" && r.algorithm != "hierarchical" && r.algorithm != "nvls")
      throw ConfigError(w + ": algorithm '" + r.algorithm + "' is not known (known: ring, tree, hierarchical, nvls)");
    limits::check(r.max_bytes, limits::kMessageBytes, w, "max_bytes");
  }
  for (std::size_t i = 0; i < network_segments.size(); ++i) {
    const auto& g = network_segments[i];
    const std::string w = ctx + ": network.segments[" + std::to_string(i) + "]";
    if (g.link != "intra" && g.link != "inter")
      throw ConfigError(w + ": link '" + g.link + "' is not known (known: intra, inter)");
    limits::check(g.max_bytes, limits::kMessageBytes, w, "max_bytes");
    limits::check(g.latency_factor, limits::kFactor, w, "latency_factor");
    limits::check(g.bandwidth_factor, limits::kFactor, w, "bandwidth_factor");
    if (!(g.bandwidth_factor > 0)) throw ConfigError(w + ": bandwidth_factor must be positive");
  }
}

std::pair<double, double> Calibration::segment_factors(const std::string& link, double bytes) const {
  for (const auto& g : network_segments)
    if (g.link == link && bytes <= g.max_bytes) return {g.latency_factor, g.bandwidth_factor};
  return {1.0, 1.0};
}

namespace {
nlohmann::json segments_json(const std::vector<NetworkSegment>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& g : v)
    a.push_back({{"link", g.link},
                 {"max_bytes", g.max_bytes},
                 {"latency_factor", g.latency_factor},
                 {"bandwidth_factor", g.bandwidth_factor}});
  return a;
}
}  // namespace

nlohmann::json to_json(const Calibration& c) {
  nlohmann::json j = {{"schema_version", 1},
                      {"name", c.name},
                      {"gpu", c.gpu},
                      {"provenance", c.provenance},
                      {"compute",
                       {{"gemm_efficiency_max", c.gemm_efficiency_max},
                        {"sustained_tensor_ratio", c.sustained_tensor_ratio},
                        {"gemm_half_efficiency_flops", c.gemm_half_efficiency_flops},
                        {"gemm_efficiency_exponent", c.gemm_efficiency_exponent},
                        {"gemm_misaligned_efficiency", c.gemm_misaligned_efficiency},
                        {"gemm_tile_m", c.gemm_tile_m},
                        {"gemm_tile_k", c.gemm_tile_k},
                        {"gemm_tile_n", c.gemm_tile_n},
                        {"gemm_accumulate_epilogue", c.gemm_accumulate_epilogue},
                        {"memory_bandwidth_efficiency", c.memory_bandwidth_efficiency},
                        {"scatter_add_bandwidth_efficiency", c.scatter_add_bandwidth_efficiency},
                        {"flash_attention_efficiency", c.flash_attention_efficiency},
                        {"flash_attention_half_kv", c.flash_attention_half_kv},
                        {"flash_attention_exponent", c.flash_attention_exponent},
                        {"flash_attention_backward_ratio", c.flash_attention_backward_ratio},
                        {"flash_attention_backward_half_kv", c.flash_attention_backward_half_kv},
                        {"flash_attention_backward_exponent", c.flash_attention_backward_exponent},
                        {"fp8_gemm_efficiency_scale", c.fp8_gemm_efficiency_scale},
                        {"fp8_rowwise_gemm_efficiency_scale", c.fp8_rowwise_gemm_efficiency_scale},
                        {"fp4_gemm_efficiency_scale", c.fp4_gemm_efficiency_scale},
                        {"interference_gemm_slowdown", c.interference_gemm_slowdown},
                        {"interference_memory_slowdown", c.interference_memory_slowdown},
                        {"interference_flash_slowdown", c.interference_flash_slowdown},
                        {"interference_collective_slowdown", c.interference_collective_slowdown},
                        {"kernel_launch_s", c.kernel_launch_s},
                        {"host_issue_s", c.host_issue_s},
                        {"host_sync_each_pass", c.host_sync_each_pass},
                        {"moe_dispatch_sync", c.moe_dispatch_sync},
                        {"grouped_gemm_single_kernel", c.grouped_gemm_single_kernel},
                        {"moe_permute_fusion", c.moe_permute_fusion},
                        {"bf16_optimizer", c.bf16_optimizer},
                        {"dp_bucket_min_params", c.dp_bucket_min_params},
                        {"dp_bucket_params_per_dp", c.dp_bucket_params_per_dp},
                        {"dp_buckets_first_chunk_only", c.dp_buckets_first_chunk_only},
                        {"host_collective_issue_s", c.host_collective_issue_s},
                        {"fa2_attention_efficiency", c.fa2_attention_efficiency},
                        {"fa2_attention", c.fa2_attention},
                        {"eager_rmsnorm", c.eager_rmsnorm},
                        {"fused_projections", c.fused_projections},
                        {"per_iteration_s", c.per_iteration_s},
                        {"grad_clip", c.grad_clip},
                        {"tf32_matmul", c.tf32_matmul},
                        {"optimizer_bytes_per_param", c.optimizer_bytes_per_param},
                        {"gpu_speed_cv", c.gpu_speed_cv},
                        {"gpu_speed_reference_gpus", c.gpu_speed_reference_gpus}}},
                      {"network",
                       {{"intra_bandwidth_efficiency", c.intra_bandwidth_efficiency},
                        {"inter_bandwidth_efficiency", c.inter_bandwidth_efficiency},
                        {"collective_step_overhead_s", c.collective_step_overhead_s},
                        {"p2p_overhead_s", c.p2p_overhead_s},
                        {"p2p_sync", c.p2p_sync},
                        {"pp_scatter_gather", c.pp_scatter_gather},
                        {"nccl_protocol", c.nccl_protocol},
                        {"segments", segments_json(c.network_segments)},
                        {"collective_algorithms",
                         [&] {
                           nlohmann::json a = nlohmann::json::array();
                           for (const auto& r : c.collective_algorithms)
                             a.push_back({{"op", r.op}, {"max_bytes", r.max_bytes}, {"algorithm", r.algorithm}});
                           return a;
                         }()}}},
                      {"memory", {{"reserved_memory_bytes", c.reserved_memory_bytes}}}};
  if (!c.accuracy_bands.empty()) {
    nlohmann::json bands = nlohmann::json::array();
    for (const auto& b : c.accuracy_bands)
      bands.push_back({{"scale", b.key}, {"rows", b.rows}, {"q05", b.q05}, {"q95", b.q95}});
    j["accuracy"] = {{"method", c.accuracy_method}, {"bands", bands}};
  }
  return j;
}

Calibration calibration_from_json(const nlohmann::json& j, const std::string& ctx) {
  json_util::check_schema_version(j, ctx, 1);
  json_util::reject_unknown(
      j, ctx, {"schema_version", "name", "gpu", "stack", "provenance", "compute", "network", "memory", "accuracy"});
  Calibration c;
  c.name = get_or<std::string>(j, ctx, "name", "custom");
  c.gpu = get_or<std::string>(j, ctx, "gpu", "");
  c.stack = get_or<std::string>(j, ctx, "stack", "");  // informational: the stack its software values came from
  c.provenance = get_or<nlohmann::json>(j, ctx, "provenance", nlohmann::json::object());
  auto cj = get<nlohmann::json>(j, ctx, "compute");
  const std::string cc = ctx + ".compute";
  json_util::reject_unknown(cj, cc,
                            {"gemm_efficiency_max",
                             "sustained_tensor_ratio",
                             "gemm_half_efficiency_flops",
                             "gemm_efficiency_exponent",
                             "gemm_misaligned_efficiency",
                             "gemm_tile_m",
                             "gemm_tile_k",
                             "gemm_tile_n",
                             "gemm_accumulate_epilogue",
                             "memory_bandwidth_efficiency",
                             "scatter_add_bandwidth_efficiency",
                             "flash_attention_efficiency",
                             "flash_attention_half_kv",
                             "flash_attention_exponent",
                             "flash_attention_backward_ratio",
                             "flash_attention_backward_half_kv",
                             "flash_attention_backward_exponent",
                             "fp8_gemm_efficiency_scale",
                             "fp8_rowwise_gemm_efficiency_scale",
                             "fp4_gemm_efficiency_scale",
                             "interference_gemm_slowdown",
                             "interference_memory_slowdown",
                             "interference_flash_slowdown",
                             "interference_collective_slowdown",
                             "kernel_launch_s",
                             "gpu_speed_cv",
                             "gpu_speed_reference_gpus",
                             "host_issue_s",
                             "host_sync_each_pass",
                             "moe_dispatch_sync",
                             "grouped_gemm_single_kernel",
                             "moe_permute_fusion",
                             "bf16_optimizer",
                             "dp_bucket_min_params",
                             "dp_bucket_params_per_dp",
                             "dp_buckets_first_chunk_only",
                             "host_collective_issue_s",
                             "fa2_attention_efficiency",
                             "fa2_attention",
                             "eager_rmsnorm",
                             "fused_projections",
                             "per_iteration_s",
                             "grad_clip",
                             "tf32_matmul",
                             "optimizer_bytes_per_param"});
  c.gemm_efficiency_max = get<double>(cj, cc, "gemm_efficiency_max");
  c.gemm_half_efficiency_flops = get<double>(cj, cc, "gemm_half_efficiency_flops");
  c.sustained_tensor_ratio = get_or<double>(cj, cc, "sustained_tensor_ratio", c.sustained_tensor_ratio);
  c.gemm_efficiency_exponent = get_or<double>(cj, cc, "gemm_efficiency_exponent", 1.0);
  c.gemm_misaligned_efficiency = get_or<double>(cj, cc, "gemm_misaligned_efficiency", 1.0);
  c.gemm_tile_m = get_or<double>(cj, cc, "gemm_tile_m", c.gemm_tile_m);
  c.gemm_tile_k = get_or<double>(cj, cc, "gemm_tile_k", c.gemm_tile_k);
  c.gemm_tile_n = get_or<double>(cj, cc, "gemm_tile_n", c.gemm_tile_n);
  c.gemm_accumulate_epilogue = get_or<bool>(cj, cc, "gemm_accumulate_epilogue", c.gemm_accumulate_epilogue);
  c.memory_bandwidth_efficiency = get<double>(cj, cc, "memory_bandwidth_efficiency");
  c.scatter_add_bandwidth_efficiency =
      get_or<double>(cj, cc, "scatter_add_bandwidth_efficiency", c.scatter_add_bandwidth_efficiency);
  c.flash_attention_efficiency = get_or<double>(cj, cc, "flash_attention_efficiency", c.flash_attention_efficiency);
  for (auto [f, v] : {std::pair{"flash_attention_half_kv", &c.flash_attention_half_kv},
                      std::pair{"flash_attention_exponent", &c.flash_attention_exponent},
                      std::pair{"flash_attention_backward_ratio", &c.flash_attention_backward_ratio},
                      std::pair{"flash_attention_backward_half_kv", &c.flash_attention_backward_half_kv},
                      std::pair{"flash_attention_backward_exponent", &c.flash_attention_backward_exponent}})
    *v = get_or<double>(cj, cc, f, *v);
  c.fa2_attention_efficiency = get_or<double>(cj, cc, "fa2_attention_efficiency", 0.0);
  for (auto [f, v] : {std::pair{"fp8_gemm_efficiency_scale", &c.fp8_gemm_efficiency_scale},
                      std::pair{"fp8_rowwise_gemm_efficiency_scale", &c.fp8_rowwise_gemm_efficiency_scale},
                      std::pair{"fp4_gemm_efficiency_scale", &c.fp4_gemm_efficiency_scale},
                      std::pair{"interference_gemm_slowdown", &c.interference_gemm_slowdown},
                      std::pair{"interference_memory_slowdown", &c.interference_memory_slowdown},
                      std::pair{"interference_flash_slowdown", &c.interference_flash_slowdown},
                      std::pair{"interference_collective_slowdown", &c.interference_collective_slowdown}})
    *v = get_or<double>(cj, cc, f, *v);
  c.kernel_launch_s = get<double>(cj, cc, "kernel_launch_s");
  // Software-stack values: pinned where the file sets them, else filled in from the run's stack (with_stack).
  auto software = [&](const nlohmann::json& sec, const std::string& sctx, const char* f, auto& v) {
    if (!sec.contains(f)) return;
    v = get<std::decay_t<decltype(v)>>(sec, sctx, f);
    c.pin(f);
  };
  software(cj, cc, "host_issue_s", c.host_issue_s);
  software(cj, cc, "host_sync_each_pass", c.host_sync_each_pass);
  software(cj, cc, "moe_dispatch_sync", c.moe_dispatch_sync);
  software(cj, cc, "grouped_gemm_single_kernel", c.grouped_gemm_single_kernel);
  software(cj, cc, "moe_permute_fusion", c.moe_permute_fusion);
  software(cj, cc, "bf16_optimizer", c.bf16_optimizer);
  software(cj, cc, "dp_bucket_min_params", c.dp_bucket_min_params);
  software(cj, cc, "dp_bucket_params_per_dp", c.dp_bucket_params_per_dp);
  software(cj, cc, "dp_buckets_first_chunk_only", c.dp_buckets_first_chunk_only);
  software(cj, cc, "host_collective_issue_s", c.host_collective_issue_s);
  software(cj, cc, "fa2_attention", c.fa2_attention);
  software(cj, cc, "eager_rmsnorm", c.eager_rmsnorm);
  software(cj, cc, "fused_projections", c.fused_projections);
  software(cj, cc, "per_iteration_s", c.per_iteration_s);
  software(cj, cc, "grad_clip", c.grad_clip);
  software(cj, cc, "tf32_matmul", c.tf32_matmul);
  c.optimizer_bytes_per_param = get<double>(cj, cc, "optimizer_bytes_per_param");
  c.gpu_speed_cv = get_or<double>(cj, cc, "gpu_speed_cv", c.gpu_speed_cv);
  c.gpu_speed_reference_gpus = get_or<double>(cj, cc, "gpu_speed_reference_gpus", c.gpu_speed_reference_gpus);
  auto nj = get<nlohmann::json>(j, ctx, "network");
  const std::string nc = ctx + ".network";
  json_util::reject_unknown(
      nj, nc,
      {"intra_bandwidth_efficiency", "inter_bandwidth_efficiency", "collective_step_overhead_s", "p2p_overhead_s",
       "p2p_sync", "pp_scatter_gather", "nccl_protocol", "segments", "collective_algorithms"});
  c.intra_bandwidth_efficiency = get<double>(nj, nc, "intra_bandwidth_efficiency");
  c.inter_bandwidth_efficiency = get<double>(nj, nc, "inter_bandwidth_efficiency");
  c.collective_step_overhead_s = get<double>(nj, nc, "collective_step_overhead_s");
  software(nj, nc, "p2p_overhead_s", c.p2p_overhead_s);
  software(nj, nc, "p2p_sync", c.p2p_sync);
  software(nj, nc, "pp_scatter_gather", c.pp_scatter_gather);
  c.nccl_protocol = get_or<std::string>(nj, nc, "nccl_protocol", "auto");
  auto aj = get_or<nlohmann::json>(nj, nc, "collective_algorithms", nlohmann::json::array());
  if (!aj.is_array()) throw ConfigError(nc + ": 'collective_algorithms' must be a list");
  for (std::size_t i = 0; i < aj.size(); ++i) {
    const std::string ac = nc + ".collective_algorithms[" + std::to_string(i) + "]";
    json_util::reject_unknown(aj[i], ac, {"op", "max_bytes", "algorithm"});
    c.collective_algorithms.push_back({get_or<std::string>(aj[i], ac, "op", "all-reduce"),
                                       get<double>(aj[i], ac, "max_bytes"), get<std::string>(aj[i], ac, "algorithm")});
  }
  auto sj = get_or<nlohmann::json>(nj, nc, "segments", nlohmann::json::array());
  if (!sj.is_array()) throw ConfigError(nc + ": 'segments' must be a list");
  for (std::size_t i = 0; i < sj.size(); ++i) {
    const std::string sc = nc + ".segments[" + std::to_string(i) + "]";
    json_util::reject_unknown(sj[i], sc, {"link", "max_bytes", "latency_factor", "bandwidth_factor"});
    c.network_segments.push_back({get<std::string>(sj[i], sc, "link"), get<double>(sj[i], sc, "max_bytes"),
                                  get_or<double>(sj[i], sc, "latency_factor", 1.0),
                                  get_or<double>(sj[i], sc, "bandwidth_factor", 1.0)});
  }
  std::stable_sort(c.network_segments.begin(), c.network_segments.end(),
                   [](const NetworkSegment& a, const NetworkSegment& b) {
                     return std::tie(a.link, a.max_bytes) < std::tie(b.link, b.max_bytes);
                   });
  auto mj = get_or<nlohmann::json>(j, ctx, "memory", nlohmann::json::object());
  json_util::reject_unknown(mj, ctx + ".memory", {"reserved_memory_bytes"});
  c.reserved_memory_bytes = get_or<double>(mj, ctx + ".memory", "reserved_memory_bytes", 0.0);
  if (j.contains("accuracy")) {
    const auto& accj = j["accuracy"];
    const std::string ac = ctx + ".accuracy";
    json_util::reject_unknown(accj, ac, {"method", "bands"});
    c.accuracy_method = get_or<std::string>(accj, ac, "method", "");
    const auto bj = get<nlohmann::json>(accj, ac, "bands");
    if (!bj.is_array()) throw ConfigError(ac + ": 'bands' must be a list");
    for (std::size_t i = 0; i < bj.size(); ++i) {
      const std::string bc = ac + ".bands[" + std::to_string(i) + "]";
      json_util::reject_unknown(bj[i], bc, {"scale", "rows", "q05", "q95"});
      AccuracyBand b{get<std::string>(bj[i], bc, "scale"), get<int>(bj[i], bc, "rows"), get<double>(bj[i], bc, "q05"),
                     get<double>(bj[i], bc, "q95"), 0};
      if (b.key != "1-node" && b.key != "multi-node")
        throw ConfigError(bc + ": scale '" + b.key + "' is not known (known: 1-node, multi-node)");
      if (!(b.rows > 0) || !std::isfinite(b.q05) || !std::isfinite(b.q95) || b.q05 > b.q95 || std::abs(b.q05) > 5 ||
          std::abs(b.q95) > 5)
        throw ConfigError(bc + ": needs rows > 0 and finite q05 <= q95 (logs of measured / predicted, within +-5)");
      c.accuracy_bands.push_back(std::move(b));
    }
  }
  c.validate(ctx);
  return c;
}

void check_p2p_sync(const std::string& value, const std::string& ctx) {
  if (value != "none" && value != "non_interleaved" && value != "all")
    throw ConfigError(ctx + " '" + value + "' is not known (known: none, non_interleaved, all)");
}

void check_pp_scatter_gather(const std::string& value, const std::string& ctx) {
  if (value != "none" && value != "without_sp" && value != "always")
    throw ConfigError(ctx + " '" + value + "' is not known (known: none, without_sp, always)");
}

bool pp_scatter_gather(const Calibration& c, bool sequence_parallel) {
  return c.pp_scatter_gather == "always" || (c.pp_scatter_gather == "without_sp" && !sequence_parallel);
}

bool pp_transfer_sliced(const Calibration& c, bool sequence_parallel) {
  return sequence_parallel || pp_scatter_gather(c, sequence_parallel);
}

bool p2p_blocking(const Calibration& c, bool interleaved) {
  return c.p2p_sync == "all" || (c.p2p_sync == "non_interleaved" && !interleaved);
}

bool moe_dispatch_waits(const Calibration& c, const ParallelPlan& plan, bool moe_model) {
  return moe_model && c.moe_dispatch_sync && c.host_issue_s > 0 &&
         !(plan.routing.capacity_factor > 0 && plan.routing.pad_to_capacity);
}

bool bf16_optimizer_active(const Calibration& c, bool bf16_model, int zero_stage) {
  return c.bf16_optimizer && bf16_model && zero_stage <= 1;
}

double dp_bucket_bytes(const Calibration& c, const ParallelPlan& plan, int stage, int chunk,
                       double grad_bytes_per_param) {
  if (plan.dp_bucket_bytes > 0) return plan.dp_bucket_bytes;
  if (c.dp_buckets_first_chunk_only && (!plan.dp_overlap || stage > 0 || chunk > 0))
    return std::numeric_limits<double>::infinity();
  const double params = std::max(c.dp_bucket_min_params, c.dp_bucket_params_per_dp * plan.dp);
  return params > 0 ? params * grad_bytes_per_param : kPytorchDdpBucketBytes;
}

P2pWait p2p_wait(const Calibration& c, const ParallelPlan& plan) {
  P2pWait w;
  w.sender = plan.pp > 1 && !plan.pp_comm_overlap && p2p_blocking(c, plan.virtual_stages > 1);
  w.receiver = w.sender && (plan.schedule == Schedule::GPIPE || plan.schedule == Schedule::ONE_F_ONE_B);
  // DualPipe exchanges its transfers itself, in batches (sched::dualpipe_exchanges), whatever the stack does.
  if (plan.dual_pipe()) w.sender = w.receiver = false;
  return w;
}

bool Calibration::pinned(const std::string& field) const {
  return std::find(pinned_software.begin(), pinned_software.end(), field) != pinned_software.end();
}

void Calibration::pin(const std::string& field) {
  DTSIM_ASSERT(std::find(kSoftwareFields.begin(), kSoftwareFields.end(), field) != kSoftwareFields.end(),
               "pin of '" << field << "', which is not a software field");
  if (!pinned(field)) pinned_software.push_back(field);
}

Calibration default_calibration(const std::string& gpu_name) {
  for (const auto& [gpu, text] : detail::builtin_calibrations()) {
    if (gpu == gpu_name)
      return calibration_from_json(nlohmann::json::parse(text), "built-in calibration '" + gpu + "'");
  }
  throw ConfigError("no built-in calibration for gpu '" + gpu_name + "'; pass --calibration FILE");
}

Calibration calibration_or_default(const std::string& path, const std::string& gpu_name) {
  return path.empty() ? default_calibration(gpu_name) : load_calibration(path);
}

Calibration load_calibration(const std::string& path) {
  return calibration_from_json(json_util::read_file(path), "calibration file '" + path + "'");
}

}  // namespace dtsim
