#include "traces/plan.hpp"

#include <cmath>
#include <numeric>
#include <sstream>

#include "traces/error.hpp"
#include "traces/json_util.hpp"

namespace dtsim {
using json_util::get;
using json_util::get_or;

std::string to_string(Schedule s) { return s == Schedule::GPIPE ? "gpipe" : "1f1b"; }
std::string to_string(Recompute r) {
  return r == Recompute::NONE ? "none" : r == Recompute::SELECTIVE ? "selective" : "full";
}
std::string to_string(Axis a) { return a == Axis::TP ? "tp" : a == Axis::DP ? "dp" : "pp"; }

Schedule schedule_from_string(const std::string& s, const std::string& ctx) {
  if (s == "gpipe") return Schedule::GPIPE;
  if (s == "1f1b") return Schedule::ONE_F_ONE_B;
  throw ConfigError(ctx + ": unknown schedule '" + s + "' (known: gpipe, 1f1b)");
}

Recompute recompute_from_string(const std::string& s, const std::string& ctx) {
  if (s == "none") return Recompute::NONE;
  if (s == "selective") return Recompute::SELECTIVE;
  if (s == "full") return Recompute::FULL;
  throw ConfigError(ctx + ": unknown recompute '" + s + "' (known: none, selective, full)");
}

std::string rank_order_string(const std::array<Axis, 3>& order) {
  return to_string(order[0]) + "," + to_string(order[1]) + "," + to_string(order[2]);
}

std::array<Axis, 3> rank_order_from_string(const std::string& s, const std::string& ctx) {
  std::array<Axis, 3> out{};
  std::stringstream ss(s);
  std::string item;
  int n = 0;
  bool seen[3] = {false, false, false};
  while (std::getline(ss, item, ',')) {
    if (n >= 3) throw ConfigError(ctx + ": rank order '" + s + "' must name tp, dp and pp once each");
    Axis a;
    if (item == "tp") a = Axis::TP;
    else if (item == "dp") a = Axis::DP;
    else if (item == "pp") a = Axis::PP;
    else throw ConfigError(ctx + ": rank order '" + s + "' has unknown axis '" + item + "' (known: tp, dp, pp)");
    if (seen[static_cast<int>(a)]) throw ConfigError(ctx + ": rank order '" + s + "' names '" + item + "' twice");
    seen[static_cast<int>(a)] = true;
    out[n++] = a;
  }
  if (n != 3) throw ConfigError(ctx + ": rank order '" + s + "' must name tp, dp and pp once each");
  return out;
}

int ParallelPlan::rank_of(const RankCoord& c) const {
  int rank = 0, stride = 1;
  for (Axis a : rank_order) {
    rank += c.get(a) * stride;
    stride *= degree(a);
  }
  return rank;
}

RankCoord ParallelPlan::coord_of(int rank) const {
  RankCoord c;
  for (Axis a : rank_order) {
    c.set(a, rank % degree(a));
    rank /= degree(a);
  }
  return c;
}

std::vector<int> ParallelPlan::stage_layers(int num_layers) const {
  if (!layers_per_stage.empty()) return layers_per_stage;
  std::vector<int> out(pp, num_layers / pp);
  for (int s = 0; s < num_layers % pp; ++s) out[s] += 1;
  return out;
}

void ParallelPlan::validate(const TransformerSpec& model, const ClusterSpec& cluster) const {
  const std::string ctx = "plan";
  auto positive = [&](long v, const char* field) {
    if (v <= 0) throw ConfigError(ctx + ": " + field + " must be positive, got " + std::to_string(v));
  };
  positive(tp, "tp");
  positive(pp, "pp");
  positive(dp, "dp");
  positive(micro_batch_size, "micro batch size");
  positive(global_batch_size, "global batch size");
  if (world_size() != cluster.total_gpus())
    throw ConfigError(ctx + ": tp*pp*dp = " + std::to_string(tp) + "*" + std::to_string(pp) + "*" +
                      std::to_string(dp) + " = " + std::to_string(world_size()) + " does not match the " +
                      std::to_string(cluster.total_gpus()) + " GPUs of cluster '" + cluster.name + "'");
  if (global_batch_size % (micro_batch_size * dp) != 0)
    throw ConfigError(ctx + ": global batch " + std::to_string(global_batch_size) +
                      " is not divisible by micro batch * dp = " + std::to_string(micro_batch_size * dp));
  if (model.heads % tp != 0)
    throw ConfigError(ctx + ": tp " + std::to_string(tp) + " does not divide the " + std::to_string(model.heads) +
                      " attention heads of '" + model.name + "'");
  if (model.kv_heads % tp != 0 && tp % model.kv_heads != 0)
    throw ConfigError(ctx + ": tp " + std::to_string(tp) + " and kv_heads " + std::to_string(model.kv_heads) +
                      " must divide one another");
  if (model.ffn_hidden % tp != 0)
    throw ConfigError(ctx + ": tp " + std::to_string(tp) + " does not divide ffn_hidden " +
                      std::to_string(model.ffn_hidden));
  if (model.vocab % tp != 0)
    throw ConfigError(ctx + ": tp " + std::to_string(tp) + " does not divide vocab " + std::to_string(model.vocab));
  if (sequence_parallel && model.seq_len % tp != 0)
    throw ConfigError(ctx + ": sequence parallelism needs tp " + std::to_string(tp) + " to divide seq_len " +
                      std::to_string(model.seq_len));
  if (sequence_parallel && tp == 1) throw ConfigError(ctx + ": sequence parallelism needs tp > 1");
  if (pp > model.num_layers)
    throw ConfigError(ctx + ": pp " + std::to_string(pp) + " exceeds the " + std::to_string(model.num_layers) +
                      " layers of '" + model.name + "'");
  if (!layers_per_stage.empty()) {
    if (static_cast<int>(layers_per_stage.size()) != pp)
      throw ConfigError(ctx + ": layers_per_stage has " + std::to_string(layers_per_stage.size()) +
                        " entries but pp is " + std::to_string(pp));
    for (int l : layers_per_stage)
      if (l <= 0) throw ConfigError(ctx + ": layers_per_stage entries must be positive");
    int sum = std::accumulate(layers_per_stage.begin(), layers_per_stage.end(), 0);
    if (sum != model.num_layers)
      throw ConfigError(ctx + ": layers_per_stage sums to " + std::to_string(sum) + " but the model has " +
                        std::to_string(model.num_layers) + " layers");
  }
  if (zero_stage != 0 && zero_stage != 1)
    throw ConfigError(ctx + ": zero stage " + std::to_string(zero_stage) + " is not supported (known: 0, 1)");
  if (!(dp_bucket_bytes > 0) || !std::isfinite(dp_bucket_bytes))
    throw ConfigError(ctx + ": dp bucket size must be a positive finite number of bytes");
}

nlohmann::json to_json(const ParallelPlan& p, int num_layers) {
  return {{"schema_version", 1},
          {"tp", p.tp},
          {"pp", p.pp},
          {"dp", p.dp},
          {"micro_batch_size", p.micro_batch_size},
          {"global_batch_size", p.global_batch_size},
          {"num_microbatches", p.num_microbatches()},
          {"layers_per_stage", p.stage_layers(num_layers)},
          {"schedule", to_string(p.schedule)},
          {"zero_stage", p.zero_stage},
          {"recompute", to_string(p.recompute)},
          {"sequence_parallel", p.sequence_parallel},
          {"rank_order", rank_order_string(p.rank_order)},
          {"dp_overlap", p.dp_overlap},
          {"dp_bucket_bytes", p.dp_bucket_bytes}};
}

ParallelPlan plan_from_json(const nlohmann::json& j, const std::string& ctx) {
  json_util::check_schema_version(j, ctx, 1);
  json_util::reject_unknown(j, ctx,
                            {"schema_version", "tp", "pp", "dp", "micro_batch_size", "global_batch_size",
                             "num_microbatches", "layers_per_stage", "schedule", "zero_stage", "recompute",
                             "sequence_parallel", "rank_order", "dp_overlap", "dp_bucket_bytes"});
  ParallelPlan p;
  p.tp = get_or<int>(j, ctx, "tp", 1);
  p.pp = get_or<int>(j, ctx, "pp", 1);
  p.dp = get_or<int>(j, ctx, "dp", 1);
  p.micro_batch_size = get<int>(j, ctx, "micro_batch_size");
  p.global_batch_size = get<int>(j, ctx, "global_batch_size");
  p.layers_per_stage = get_or<std::vector<int>>(j, ctx, "layers_per_stage", {});
  p.schedule = schedule_from_string(get_or<std::string>(j, ctx, "schedule", "1f1b"), ctx);
  p.zero_stage = get_or<int>(j, ctx, "zero_stage", 0);
  p.recompute = recompute_from_string(get_or<std::string>(j, ctx, "recompute", "none"), ctx);
  p.sequence_parallel = get_or<bool>(j, ctx, "sequence_parallel", false);
  p.rank_order = rank_order_from_string(get_or<std::string>(j, ctx, "rank_order", "tp,dp,pp"), ctx);
  p.dp_overlap = get_or<bool>(j, ctx, "dp_overlap", true);
  p.dp_bucket_bytes = get_or<double>(j, ctx, "dp_bucket_bytes", p.dp_bucket_bytes);
  if (j.contains("num_microbatches") && p.micro_batch_size > 0 && p.dp > 0) {
    int m = get<int>(j, ctx, "num_microbatches");
    if (m != p.num_microbatches())
      throw ConfigError(ctx + ": num_microbatches " + std::to_string(m) + " disagrees with global_batch_size / (micro_batch_size * dp) = " +
                        std::to_string(p.num_microbatches()));
  }
  return p;
}

ParallelPlan load_plan(const std::string& path) {
  return plan_from_json(json_util::read_file(path), "plan file '" + path + "'");
}

}  // namespace dtsim
