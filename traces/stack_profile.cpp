#include "traces/stack_profile.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include "traces/error.hpp"
#include "traces/json_util.hpp"
#include "traces/limits.hpp"
#include "traces/stack_data.hpp"

namespace dtsim {
using json_util::get;
using json_util::get_or;

void StackProfile::validate(const std::string& ctx) const {
  limits::check(host_issue_s, limits::kOverhead, ctx, "host_issue_s");
  limits::check(host_collective_issue_s, limits::kOverhead, ctx, "host_collective_issue_s");
  limits::check(p2p_overhead_s, limits::kOverhead, ctx, "p2p_overhead_s");
  check_p2p_sync(p2p_sync, ctx + ": p2p_sync");
  check_pp_scatter_gather(pp_scatter_gather, ctx + ": pp_scatter_gather");
  limits::check(per_iteration_s, limits::kIterationOverhead, ctx, "per_iteration_s");
  limits::check(dp_bucket_min_params, limits::kBucketParams, ctx, "dp_bucket_min_params");
  limits::check(dp_bucket_params_per_dp, limits::kBucketParams, ctx, "dp_bucket_params_per_dp");
  if (name.empty()) throw ConfigError(ctx + ": 'name' must not be empty");
}

namespace {
/// The JSON of the profile `name_or_path` names (a shipped profile or a .json file) and the context its errors
/// carry; ConfigError "<prefix>unknown software stack '<name>' (known: ...)" for any other name.
std::pair<nlohmann::json, std::string> profile_json(const std::string& n, const std::string& prefix) {
  if (n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0)
    return {json_util::read_file(n), "stack profile '" + n + "'"};
  for (const auto& [name, text] : detail::builtin_stacks())
    if (name == n) return {nlohmann::json::parse(text), "built-in stack profile '" + name + "'"};
  std::string known;
  for (const auto& s : stack_names()) known += (known.empty() ? "" : ", ") + s;
  throw ConfigError(prefix + "unknown software stack '" + n + "' (known: " + known + ", or a .json profile file)");
}

/// `j` with its "base" resolved: the base profile's fields (its own base resolved first), then `j`'s on top; a
/// provenance object is merged key by key (the derived profile's entries win), every other field replaced whole.
/// `depth` counts the bases followed: a chain longer than kMaxBaseDepth is a cycle or a mistake (reported under
/// `top_ctx`, the profile first read; `ctx` names the profile at this depth).
nlohmann::json resolve_base(const nlohmann::json& j, const std::string& top_ctx, const std::string& ctx, int depth) {
  constexpr int kMaxBaseDepth = 8;
  if (!j.is_object() || !j.contains("base")) return j;
  if (!j.at("base").is_string() || j.at("base").get<std::string>().empty())
    throw ConfigError(ctx + ": 'base' must be the name of a software stack or a .json profile file");
  if (depth >= kMaxBaseDepth)
    throw ConfigError(top_ctx + ": 'base' chain longer than " + std::to_string(kMaxBaseDepth) +
                      " profiles (a profile that is its own base?)");
  const std::string base = j.at("base").get<std::string>();
  const std::string base_ctx = ctx + ": base '" + base + "'";
  nlohmann::json merged =
      resolve_base(profile_json(base, ctx + ": 'base' names an ").first, top_ctx, base_ctx, depth + 1);
  if (!merged.is_object()) throw ConfigError(base_ctx + ": not a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (key == "base") continue;
    if (key == "provenance" && value.is_object() && merged.contains("provenance") &&
        merged.at("provenance").is_object()) {
      for (const auto& [pk, pv] : value.items()) merged["provenance"][pk] = pv;
    } else {
      merged[key] = value;
    }
  }
  merged["provenance"]["base"] = base;
  return merged;
}
}  // namespace

StackProfile stack_profile_from_json(const nlohmann::json& raw, const std::string& ctx) {
  json_util::check_schema_version(raw, ctx, 1);
  // A profile holds its metadata and the calibration's software fields, nothing else; "base" names a profile whose
  // values it starts from (only its differences are written).
  std::set<std::string> allowed = {"schema_version", "name", "framework", "provenance", "fitted_on", "base"};
  allowed.insert(kSoftwareFields.begin(), kSoftwareFields.end());
  json_util::reject_unknown(raw, ctx, allowed);
  const nlohmann::json j = resolve_base(raw, ctx, ctx, 0);
  json_util::reject_unknown(j, ctx, allowed);
  StackProfile s;
  s.name = get<std::string>(j, ctx, "name");
  s.framework = get_or<std::string>(j, ctx, "framework", "");
  s.provenance = get_or<nlohmann::json>(j, ctx, "provenance", nlohmann::json::object());
  s.fitted_on = get_or<std::vector<std::string>>(j, ctx, "fitted_on", {});
  s.host_issue_s = get<double>(j, ctx, "host_issue_s");
  s.host_sync_each_pass = get<bool>(j, ctx, "host_sync_each_pass");
  s.host_collective_issue_s = get<double>(j, ctx, "host_collective_issue_s");
  s.p2p_overhead_s = get<double>(j, ctx, "p2p_overhead_s");
  s.p2p_sync = get_or<std::string>(j, ctx, "p2p_sync", "none");
  s.pp_scatter_gather = get_or<std::string>(j, ctx, "pp_scatter_gather", "none");
  s.fa2_attention = get_or<bool>(j, ctx, "fa2_attention", false);
  s.eager_rmsnorm = get_or<bool>(j, ctx, "eager_rmsnorm", false);
  s.fused_projections = get_or<bool>(j, ctx, "fused_projections", true);
  s.per_iteration_s = get_or<double>(j, ctx, "per_iteration_s", 0.0);
  s.grad_clip = get_or<bool>(j, ctx, "grad_clip", true);
  s.tf32_matmul = get_or<bool>(j, ctx, "tf32_matmul", false);
  s.moe_dispatch_sync = get_or<bool>(j, ctx, "moe_dispatch_sync", false);
  s.grouped_gemm_single_kernel = get_or<bool>(j, ctx, "grouped_gemm_single_kernel", false);
  s.moe_permute_fusion = get_or<bool>(j, ctx, "moe_permute_fusion", true);
  s.bf16_optimizer = get_or<bool>(j, ctx, "bf16_optimizer", false);
  s.dp_bucket_min_params = get_or<double>(j, ctx, "dp_bucket_min_params", 0.0);
  s.dp_bucket_params_per_dp = get_or<double>(j, ctx, "dp_bucket_params_per_dp", 0.0);
  s.dp_buckets_first_chunk_only = get_or<bool>(j, ctx, "dp_buckets_first_chunk_only", false);
  s.validate(ctx);
  return s;
}

nlohmann::json to_json(const StackProfile& s) {
  return {{"schema_version", 1},
          {"name", s.name},
          {"framework", s.framework},
          {"provenance", s.provenance},
          {"fitted_on", s.fitted_on},
          {"host_issue_s", s.host_issue_s},
          {"host_sync_each_pass", s.host_sync_each_pass},
          {"host_collective_issue_s", s.host_collective_issue_s},
          {"p2p_overhead_s", s.p2p_overhead_s},
          {"p2p_sync", s.p2p_sync},
          {"pp_scatter_gather", s.pp_scatter_gather},
          {"fa2_attention", s.fa2_attention},
          {"eager_rmsnorm", s.eager_rmsnorm},
          {"fused_projections", s.fused_projections},
          {"per_iteration_s", s.per_iteration_s},
          {"grad_clip", s.grad_clip},
          {"tf32_matmul", s.tf32_matmul},
          {"moe_dispatch_sync", s.moe_dispatch_sync},
          {"grouped_gemm_single_kernel", s.grouped_gemm_single_kernel},
          {"moe_permute_fusion", s.moe_permute_fusion},
          {"bf16_optimizer", s.bf16_optimizer},
          {"dp_bucket_min_params", s.dp_bucket_min_params},
          {"dp_bucket_params_per_dp", s.dp_bucket_params_per_dp},
          {"dp_buckets_first_chunk_only", s.dp_buckets_first_chunk_only}};
}

std::vector<std::string> stack_names() {
  std::vector<std::string> names;
  for (const auto& [name, text] : detail::builtin_stacks()) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

StackProfile stack_profile(const std::string& name_or_path) {
  const auto [j, ctx] = profile_json(name_or_path.empty() ? std::string(kDefaultStack) : name_or_path, "");
  return stack_profile_from_json(j, ctx);
}

Calibration with_stack(const Calibration& hw, const StackProfile& s) {
  Calibration c = hw;
  auto fill = [&](const char* f, auto& field, auto value) {
    if (!c.pinned(f)) field = value;
  };
  fill("host_issue_s", c.host_issue_s, s.host_issue_s);
  fill("host_sync_each_pass", c.host_sync_each_pass, s.host_sync_each_pass);
  fill("host_collective_issue_s", c.host_collective_issue_s, s.host_collective_issue_s);
  fill("p2p_overhead_s", c.p2p_overhead_s, s.p2p_overhead_s);
  fill("p2p_sync", c.p2p_sync, s.p2p_sync);
  fill("pp_scatter_gather", c.pp_scatter_gather, s.pp_scatter_gather);
  fill("fa2_attention", c.fa2_attention, s.fa2_attention);
  fill("eager_rmsnorm", c.eager_rmsnorm, s.eager_rmsnorm);
  fill("fused_projections", c.fused_projections, s.fused_projections);
  fill("per_iteration_s", c.per_iteration_s, s.per_iteration_s);
  fill("grad_clip", c.grad_clip, s.grad_clip);
  fill("tf32_matmul", c.tf32_matmul, s.tf32_matmul);
  fill("moe_dispatch_sync", c.moe_dispatch_sync, s.moe_dispatch_sync);
  fill("grouped_gemm_single_kernel", c.grouped_gemm_single_kernel, s.grouped_gemm_single_kernel);
  fill("moe_permute_fusion", c.moe_permute_fusion, s.moe_permute_fusion);
  fill("bf16_optimizer", c.bf16_optimizer, s.bf16_optimizer);
  fill("dp_bucket_min_params", c.dp_bucket_min_params, s.dp_bucket_min_params);
  fill("dp_bucket_params_per_dp", c.dp_bucket_params_per_dp, s.dp_bucket_params_per_dp);
  fill("dp_buckets_first_chunk_only", c.dp_buckets_first_chunk_only, s.dp_buckets_first_chunk_only);
  c.stack = s.name;
  return c;
}

Calibration with_stack(const Calibration& hw, const std::string& stack_name) {
  // Shipped profiles are parsed once; files are read each time (a sweep names one file, read in microseconds).
  const std::string& n = stack_name.empty() ? std::string(kDefaultStack) : stack_name;
  static std::mutex mu;
  static std::map<std::string, StackProfile> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(n); it != cache.end()) return with_stack(hw, it->second);
  }
  StackProfile s = stack_profile(n);
  const bool builtin = !(n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0);
  if (builtin) {
    std::lock_guard<std::mutex> lock(mu);
    cache.emplace(n, s);
  }
  return with_stack(hw, s);
}

}  // namespace dtsim
