#include "studies/sweep/sweep.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <set>
#include <unordered_set>

#include "sim/simulate.hpp"
#include "strategies/memory_model.hpp"
#include "strategies/planner.hpp"
#include "strategies/schedule.hpp"
#include "strategies/transformer_costs.hpp"
#include "traces/error.hpp"
#include "traces/json_util.hpp"
#include "traces/stack_profile.hpp"
#include "traces/units.hpp"

namespace dtsim::sim::sweep {
namespace {
using nlohmann::json;

const std::string kCtx = "sweep spec";

/// A knob's values: absent -> `fallback`, a list -> its items (not empty), a scalar -> one item.
std::vector<json> values(const json& spec, const std::string& key, std::vector<json> fallback) {
  auto it = spec.find(key);
  if (it == spec.end() || it->is_null()) return fallback;
  if (!it->is_array()) return {*it};
  if (it->empty()) throw ConfigError(kCtx + ": '" + key + "' is an empty list");
  return std::vector<json>(it->begin(), it->end());
}

std::vector<int> ints(const json& spec, const std::string& key, std::vector<json> fallback, int lo, int hi) {
  std::vector<int> out;
  for (const json& v : values(spec, key, std::move(fallback))) {
    if (!v.is_number_integer() || v.get<long>() < lo || v.get<long>() > hi)
      throw ConfigError(kCtx + ": '" + key + "' value " + v.dump() + " is not an integer in " + std::to_string(lo) +
                        ".." + std::to_string(hi));
    out.push_back(v.get<int>());
  }
  return out;
}

std::vector<std::string> strings(const json& spec, const std::string& key, std::vector<json> fallback) {
  std::vector<std::string> out;
  for (const json& v : values(spec, key, std::move(fallback))) {
    if (!v.is_string()) throw ConfigError(kCtx + ": '" + key + "' value " + v.dump() + " is not a string");
    out.push_back(v.get<std::string>());
  }
  return out;
}

std::vector<bool> bools(const json& spec, const std::string& key) {
  std::vector<bool> out;
  for (const json& v : values(spec, key, {false})) {
    if (!v.is_boolean()) throw ConfigError(kCtx + ": '" + key + "' value " + v.dump() + " is not true or false");
    out.push_back(v.get<bool>());
  }
  return out;
}

std::string layout_name(const ParallelPlan& p) {
  return p.tp_layout == TpLayout::D2_5 ? "2.5d:" + std::to_string(p.tp_depth) : to_string(p.tp_layout);
}

/// "plan: tp 3 does not divide the 96 attention heads of 'x'" -> "tp N does not divide the N attention heads of
/// '...'": validation messages grouped into a few skip reasons (numbers that are part of a name, such as 2d or
/// q^2, stay).
std::string normalise(std::string msg) {
  if (msg.rfind("plan: ", 0) == 0) msg = msg.substr(6);
  auto digit = [&](std::size_t i) { return i < msg.size() && std::isdigit(static_cast<unsigned char>(msg[i])); };
  auto wordy = [&](std::size_t i) {
    return i < msg.size() && (std::isalpha(static_cast<unsigned char>(msg[i])) || msg[i] == '.' || msg[i] == '^');
  };
  std::string out;
  for (std::size_t i = 0; i < msg.size(); ++i) {
    if (digit(i) && !(i > 0 && (wordy(i - 1) || digit(i - 1)))) {
      std::size_t j = i;
      while (digit(j + 1)) ++j;
      if (wordy(j + 1)) {
        out.append(msg, i, j - i + 1);
      } else {
        out += 'N';
      }
      i = j;
    } else if (msg[i] == '\'') {
      const auto end = msg.find('\'', i + 1);
      if (end == std::string::npos) {
        out += msg[i];
        continue;
      }
      out += "'...'";
      i = end;
    } else {
      out += msg[i];
    }
  }
  return out;
}

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// k distinct positions of [0, n), ascending (Floyd's algorithm: k draws whatever n is).
std::vector<std::size_t> sample_positions(std::size_t n, std::size_t k, std::uint64_t seed) {
  std::set<std::size_t> chosen;
  std::uint64_t state = seed;
  for (std::size_t j = n - k; j < n; ++j) {
    const std::size_t t = static_cast<std::size_t>(splitmix64(state) % (j + 1));
    if (!chosen.insert(t).second) chosen.insert(j);
  }
  return {chosen.begin(), chosen.end()};
}

std::string resolve(const std::string& path, const std::string& dir) {
  namespace fs = std::filesystem;
  const bool is_path =
      path.find('/') != std::string::npos || (path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0);
  if (!is_path || fs::path(path).is_absolute()) return path;
  std::error_code ec;
  const fs::path near_spec = fs::path(dir) / path;
  return fs::exists(near_spec, ec) ? near_spec.string() : path;
}

/// The recompute knob: "none", "selective", "full", or "full:N" (the first N layers of every chunk).
std::string recompute_knob(const ParallelPlan& p) {
  std::string out = to_string(p.recompute);
  if (p.recompute_num_layers > 0) {
    out += ':';
    out += std::to_string(p.recompute_num_layers);
  }
  return out;
}

/// The plan knobs of a row; `known` false (a planner scenario whose plan is not known) gives 0 / "".
void set_plan_fields(Row& r, const ParallelPlan& p, bool known) {
  r["tp"] = known ? p.tp : 0;
  r["pp"] = known ? p.pp : 0;
  r["dp"] = known ? p.dp : 0;
  r["cp"] = known ? p.cp : 0;
  r["ep"] = known ? p.ep : 0;
  r["vp"] = known ? p.virtual_stages : 0;
  r["mbs"] = known ? p.micro_batch_size : 0;
  r["gbs"] = p.global_batch_size;
  r["schedule"] = known ? p.schedule_name() : "";
  r["zero"] = known ? p.zero_stage : 0;
  r["recompute"] = known ? recompute_knob(p) : "";
  r["tp_layout"] = known ? layout_name(p) : "";
  r["sequence_parallel"] = known && p.sequence_parallel;
  r["precision"] = known ? to_string(p.precision) : "";
  r["tp_comm_overlap"] = known && p.tp_comm_overlap;
  r["overlap_param_gather"] = known && p.overlap_param_gather;
  r["cuda_graphs"] = known && p.cuda_graphs;
  r["dispatcher"] = known ? to_string(p.dispatcher) : "";
  r["overlap_moe_comm"] = known && p.overlap_moe_comm;
  r["megatron_fsdp"] = known && p.megatron_fsdp;
  // Heterogeneous plans (a planner's pick): each stage's replicas and strategy, "" for uniform plans.
  std::string replicas, strategies;
  for (int s = 0; known && s < p.pp; ++s) {
    if (p.has_stage_replicas()) {
      if (s > 0) replicas += '/';
      replicas += std::to_string(p.replicas(s));
    }
    if (p.has_stage_strategies()) {
      if (s > 0) strategies += " | ";
      strategies += to_string(p.stage_strategy(s));
    }
  }
  r["stage_replicas"] = replicas;
  r["stage_strategies"] = strategies;
}

/// The canonical inputs of a grid point (the id hashes them with the model, cluster and calibration contents).
json plan_knobs(const ParallelPlan& p) {
  json j = {{"tp", p.tp},
            {"pp", p.pp},
            {"dp", p.dp},
            {"vp", p.virtual_stages},
            {"mbs", p.micro_batch_size},
            {"gbs", p.global_batch_size},
            {"schedule", p.schedule_name()},
            {"zero", p.zero_stage},
            {"recompute", recompute_knob(p)},
            {"tp_layout", layout_name(p)},
            {"sequence_parallel", p.sequence_parallel}};
  // Context and expert parallelism only when used: the ids of plans without them stay what they were.
  if (p.cp > 1) {
    j["cp"] = p.cp;
    j["cp_kind"] = to_string(p.cp_kind);
  }
  if (p.ep > 1) j["ep"] = p.ep;
  // Likewise precision and the overlap / launch options: only when they differ from the defaults.
  if (p.precision != Precision::BF16) j["precision"] = to_string(p.precision);
  if (p.tp_comm_overlap) j["tp_comm_overlap"] = true;
  if (p.overlap_param_gather) j["overlap_param_gather"] = true;
  if (p.cuda_graphs) j["cuda_graphs"] = true;
  if (p.dispatcher != Dispatcher::ALL_TO_ALL) j["dispatcher"] = to_string(p.dispatcher);
  if (p.overlap_moe_comm) j["overlap_moe_comm"] = true;
  if (p.megatron_fsdp) j["megatron_fsdp"] = true;
  return j;
}

}  // namespace

double analytic_peak_bytes(const TransformerSpec& m, const ParallelPlan& plan, double reserved_bytes) {
  // memory::analytic_peak_bytes for every stage, with the schedule's orders built once instead of once per stage
  // (a zb-h2 list schedule of 32 stages x 512 micro-batches is not cheap). The same walk; a test keeps them equal.
  const auto orders = sched::plan_orders(plan);
  const auto layers = plan.stage_layers(m.num_layers);
  const double v = plan.virtual_stages;
  const bool split = plan.split_backward();
  double worst = 0;
  for (int st = 0; st < plan.pp; ++st) {
    // MoE models: the MoE layer's transient bytes (the larger of the two kinds).
    const auto act = cost::layer_activation_bytes(m, cost::shape_of(plan, plan.micro_batch_size / plan.replicas(st)),
                                                  m.moe.enabled());
    const double stored_chunk = memory::stage_activation_bytes_per_microbatch(m, plan, st) / v;
    const double recompute_chunk = layers[st] / v * act.transient;
    double held = 0, peak = 0;
    for (const auto& op : orders[st]) {
      if (op.kind == PipeOp::Kind::F) {
        held += stored_chunk;
        peak = std::max(peak, held);
      } else if (op.kind == PipeOp::Kind::B) {
        if (split) {
          held += recompute_chunk;
          peak = std::max(peak, held);
        } else {
          peak = std::max(peak, held + act.transient);
          held -= stored_chunk;
        }
      } else {
        held -= stored_chunk + recompute_chunk;
      }
    }
    worst = std::max(worst, reserved_bytes + memory::static_memory(m, plan, st).total() + peak);
  }
  return worst;
}

std::string fnv1a_hex(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

json load_spec(const std::string& path) { return json_util::read_file(path); }

Expansion expand(const json& spec, const std::string& spec_dir, bool prefilter) {
  json_util::reject_unknown(spec, kCtx,
                            {"schema_version",
                             "name",
                             "description",
                             "models",
                             "clusters",
                             "gpus",
                             "cluster_preset",
                             "calibration",
                             "stack",
                             "tp",
                             "pp",
                             "dp",
                             "vp",
                             "mbs",
                             "gbs",
                             "schedule",
                             "zero",
                             "recompute",
                             "tp_layout",
                             "sequence_parallel",
                             "cp",
                             "cp_kind",
                             "ep",
                             "precision",
                             "tp_comm_overlap",
                             "overlap_param_gather",
                             "cuda_graphs",
                             "dispatcher",
                             "overlap_moe_comm",
                             "megatron_fsdp",
                             "network",
                             "grid_points",
                             "planners",
                             "random"});
  if (!spec.contains("schema_version"))
    throw ConfigError(kCtx + ": missing field 'schema_version' (this dtsim reads 1)");
  json_util::check_schema_version(spec, kCtx, 1);
  Expansion ex;
  ex.spec = spec;

  // Models, clusters, calibrations.
  for (const std::string& m : strings(spec, "models", {})) ex.models.push_back(load_model(resolve(m, spec_dir)));
  if (ex.models.empty()) throw ConfigError(kCtx + ": 'models' is required (preset names or model files)");
  for (const std::string& c : strings(spec, "clusters", {})) ex.clusters.push_back(load_cluster(resolve(c, spec_dir)));
  if (spec.contains("cluster_preset") && !spec.contains("gpus"))
    throw ConfigError(kCtx + ": 'cluster_preset' needs 'gpus' (the GPU counts to build it with)");
  if (spec.contains("gpus")) {
    const std::string preset = json_util::get_or<std::string>(spec, kCtx, "cluster_preset", "dgx-a100");
    const auto colon = preset.find(':');
    for (int n : ints(spec, "gpus", {}, 1, 1 << 24))
      ex.clusters.push_back(load_cluster(preset.substr(0, colon) + ":" + std::to_string(n) +
                                         (colon == std::string::npos ? "" : preset.substr(colon))));
  }
  if (ex.clusters.empty()) throw ConfigError(kCtx + ": give 'clusters' and/or 'gpus' (with 'cluster_preset')");
  std::string cal_path;
  if (spec.contains("calibration"))
    cal_path = resolve(json_util::get<std::string>(spec, kCtx, "calibration"), spec_dir);
  for (const auto& c : ex.clusters) ex.calibrations.push_back(calibration_or_default(cal_path, c.gpu.name));
  if (spec.contains("stack")) {
    // Every scenario's software values from one stack (a name or a profile file, e.g. `calibrate runs`' stack.json),
    // pinned into its calibration: the ids then hash them too.
    std::string stack = json_util::get<std::string>(spec, kCtx, "stack");
    if (stack.size() > 5 && stack.compare(stack.size() - 5, 5, ".json") == 0) stack = resolve(stack, spec_dir);
    const StackProfile profile = stack_profile(stack);
    for (auto& c : ex.calibrations) {
      c = with_stack(c, profile);
      for (const auto& f : kSoftwareFields) c.pin(f);
    }
  }
  std::vector<std::string> model_hash, cluster_hash, cal_hash;
  for (const auto& m : ex.models) model_hash.push_back(fnv1a_hex(to_json(m).dump()));
  for (std::size_t i = 0; i < ex.clusters.size(); ++i) {
    cluster_hash.push_back(fnv1a_hex(to_json(ex.clusters[i]).dump()));
    cal_hash.push_back(fnv1a_hex(to_json(ex.calibrations[i]).dump()));
  }

  // Knobs.
  const auto tps = ints(spec, "tp", {1}, 1, 1 << 20), pps = ints(spec, "pp", {1}, 1, 1 << 20),
             vps = ints(spec, "vp", {1}, 1, 1024), mbss = ints(spec, "mbs", {1}, 1, 1 << 24),
             zeros = ints(spec, "zero", {0}, 0, 3), cps = ints(spec, "cp", {1}, 1, 1 << 20),
             eps = ints(spec, "ep", {1}, 1, 1 << 20);
  std::vector<CpKind> cp_kinds;
  for (const std::string& k : strings(spec, "cp_kind", {"ring"})) cp_kinds.push_back(cp_kind_from_string(k, kCtx));
  if (!spec.contains("gbs")) throw ConfigError(kCtx + ": 'gbs' (global batch sizes) is required");
  const auto gbss = ints(spec, "gbs", {}, 1, 1 << 30);
  std::vector<int> dps;  // 0 = auto
  for (const json& v : values(spec, "dp", {"auto"})) {
    if (v == "auto") dps.push_back(0);
    else if (v.is_number_integer() && v.get<long>() >= 1 && v.get<long>() <= (1 << 24)) dps.push_back(v.get<int>());
    else throw ConfigError(kCtx + ": 'dp' value " + v.dump() + " is neither a positive integer nor \"auto\"");
  }
  const auto schedules = strings(spec, "schedule", {"1f1b"});
  for (const std::string& s : schedules) {
    if (s.rfind("interleaved:", 0) == 0)
      throw ConfigError(kCtx + ": schedule '" + s + "': write \"interleaved\" and give the chunks per stage in 'vp'");
    ParallelPlan probe;
    if (s != "interleaved") set_schedule(probe, s, kCtx);
  }
  // "full:N": full recompute of the first N layers of every chunk (Megatron's block method, recompute_num_layers).
  std::vector<std::pair<Recompute, int>> recomputes;
  for (const std::string& s : strings(spec, "recompute", {"none"})) {
    if (s.rfind("full:", 0) == 0) {
      const std::string n = s.substr(5);
      if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos || std::stoi(n) < 1)
        throw ConfigError(kCtx + ": recompute '" + s + "' needs a positive layer count, e.g. full:2");
      recomputes.emplace_back(Recompute::FULL, std::stoi(n));
    } else {
      recomputes.emplace_back(recompute_from_string(s, kCtx), 0);
    }
  }
  std::vector<std::pair<TpLayout, int>> layouts;
  for (const std::string& s : strings(spec, "tp_layout", {"1d"})) {
    if (s.rfind("2.5d:", 0) == 0) {
      const std::string d = s.substr(5);
      if (d.empty() || d.size() > 3 || d.find_first_not_of("0123456789") != std::string::npos || std::stoi(d) < 1)
        throw ConfigError(kCtx + ": tp_layout '" + s + "' needs a positive depth, e.g. 2.5d:2");
      layouts.emplace_back(TpLayout::D2_5, std::stoi(d));
    } else if (s == "2.5d") {
      throw ConfigError(kCtx + ": tp_layout 2.5d needs its depth: 2.5d:D");
    } else {
      layouts.emplace_back(tp_layout_from_string(s, kCtx), 1);
    }
  }
  const std::vector<bool> sps = bools(spec, "sequence_parallel");
  std::vector<Precision> precisions;
  for (const std::string& s : strings(spec, "precision", {"bf16"}))
    precisions.push_back(precision_from_string(s, kCtx));
  const std::vector<bool> tcos = bools(spec, "tp_comm_overlap"), opgs = bools(spec, "overlap_param_gather"),
                          graphs = bools(spec, "cuda_graphs"), moe_overlaps = bools(spec, "overlap_moe_comm"),
                          megatron_fsdps = bools(spec, "megatron_fsdp");
  std::vector<Dispatcher> dispatchers;
  for (const std::string& s : strings(spec, "dispatcher", {"alltoall"}))
    dispatchers.push_back(dispatcher_from_string(s, kCtx));
  // Precision and the overlap / launch options: the innermost loop, one entry per combination (in this order).
  struct Options {
    Precision precision;
    bool tp_comm_overlap, overlap_param_gather, cuda_graphs;
    Dispatcher dispatcher;
    bool overlap_moe_comm, megatron_fsdp;
  };
  std::vector<Options> options;
  for (Precision pr : precisions)
    for (bool tco : tcos)
      for (bool opg : opgs)
        for (bool g : graphs)
          for (Dispatcher d : dispatchers)
            for (bool mo : moe_overlaps)
              for (bool mf : megatron_fsdps) options.push_back({pr, tco, opg, g, d, mo, mf});
  std::vector<NetworkMode> networks;
  for (const std::string& s : strings(spec, "network", {"analytic"})) {
    if (s == "analytic") networks.push_back(NetworkMode::ANALYTIC);
    else if (s == "flow") networks.push_back(NetworkMode::FLOW);
    else throw ConfigError(kCtx + ": network '" + s + "' is not known (known: analytic, flow)");
  }
  const std::vector<std::string> planners = strings(spec, "planners", json::array());
  for (const std::string& p : planners) {
    const auto colon = p.find(':');
    planning::make_planner(p.substr(0, colon));  // throws for unknown names
    if (colon != std::string::npos) {
      const std::string t = p.substr(colon + 1);
      if (t.empty() || t.size() > 4 || t.find_first_not_of("0123456789") != std::string::npos || std::stoi(t) < 1)
        throw ConfigError(kCtx + ": planner '" + p +
                          "': after ':' give the GPUs per device (tensor parallel), e.g. dapple:8");
    }
  }
  const bool grid = json_util::get_or<bool>(spec, kCtx, "grid_points", true);
  std::size_t samples = 0;
  std::uint64_t seed = 0;
  if (spec.contains("random")) {
    const json& r = spec["random"];
    json_util::reject_unknown(r, kCtx + ": random", {"samples", "seed"});
    const long n = json_util::get<long>(r, kCtx + ": random", "samples");
    if (n < 1) throw ConfigError(kCtx + ": random: 'samples' must be positive");
    samples = static_cast<std::size_t>(n);
    seed = json_util::get_or<std::uint64_t>(r, kCtx + ": random", "seed", 0);
  }

  // Grid points, filtered and deduplicated.
  std::vector<Scenario> points;
  std::unordered_set<std::string> ids;
  auto skip = [&](const std::string& reason) { ++ex.skipped[reason]; };
  auto id_of = [&](int m, int c, NetworkMode net, const json& what) {
    const json key = {{"model", model_hash[m]},
                      {"cluster", cluster_hash[c]},
                      {"calibration", cal_hash[c]},
                      {"network", to_string(net)},
                      {"scenario", what}};
    return fnv1a_hex(key.dump());
  };
  if (grid) {
    ex.grid_points = ex.models.size() * ex.clusters.size() * gbss.size() * networks.size() * tps.size() * pps.size() *
                     dps.size() * vps.size() * mbss.size() * schedules.size() * zeros.size() * recomputes.size() *
                     layouts.size() * sps.size() * cps.size() * eps.size() * cp_kinds.size() * options.size();
    for (int mi = 0; mi < static_cast<int>(ex.models.size()); ++mi)
      for (int ci = 0; ci < static_cast<int>(ex.clusters.size()); ++ci) {
        const TransformerSpec& model = ex.models[mi];
        const ClusterSpec& cluster = ex.clusters[ci];
        const int gpus = cluster.total_gpus();
        for (int gbs : gbss)
          for (NetworkMode net : networks)
            for (int tp : tps)
              for (int pp : pps)
                for (int dp0 : dps)
                  for (int vp : vps)
                    for (int mbs : mbss)
                      for (const std::string& sched : schedules)
                        for (int zero : zeros)
                          for (const auto& [rc, rc_layers] : recomputes)
                            for (const auto& [layout, depth] : layouts)
                              for (bool sp : sps)
                                for (int cp : cps)
                                  for (int ep : eps)
                                    for (CpKind ck : cp_kinds)
                                      for (const Options& o : options) {
                                        // Cheap rules first (named reasons), then the plan's own validation.
                                        if (cp == 1 && ck != cp_kinds.front()) {
                                          skip("no-op: cp_kind with cp 1");
                                          continue;
                                        }
                                        if (dp0 == 0 && gpus % (tp * cp * pp) != 0) {
                                          skip("divisibility: tp*cp*pp does not divide gpus (dp auto)");
                                          continue;
                                        }
                                        const int dp = dp0 == 0 ? gpus / (tp * cp * pp) : dp0;
                                        if (static_cast<long>(tp) * cp * pp * dp != gpus) {
                                          skip("divisibility: tp*cp*pp*dp != gpus");
                                          continue;
                                        }
                                        const bool interleaved = sched == "interleaved";
                                        if (interleaved && vp == 1) {
                                          skip("schedule: interleaved needs vp > 1");
                                          continue;
                                        }
                                        if (!interleaved && vp > 1 && sched.rfind("custom:", 0) != 0) {
                                          skip("schedule: vp > 1 needs the interleaved schedule");
                                          continue;
                                        }
                                        if (interleaved && pp == 1) {
                                          skip("schedule: interleaved needs pp > 1");
                                          continue;
                                        }
                                        if (sp && tp == 1) {
                                          skip("no-op: sequence_parallel with tp 1");
                                          continue;
                                        }
                                        if (o.tp_comm_overlap && tp == 1) {
                                          skip("no-op: tp_comm_overlap with tp 1");
                                          continue;
                                        }
                                        if (o.dispatcher != Dispatcher::ALL_TO_ALL && !model.moe.enabled()) {
                                          skip("no-op: dispatcher on a dense model");
                                          continue;
                                        }
                                        if (model.num_layers % (pp * vp) != 0) {
                                          skip("divisibility: layers % (pp*vp) != 0");
                                          continue;
                                        }
                                        if (layout == TpLayout::D1 && model.heads % tp != 0) {
                                          skip("divisibility: heads % tp != 0");
                                          continue;
                                        }
                                        if (gbs % (mbs * dp) != 0) {
                                          skip("divisibility: gbs % (mbs*dp) != 0");
                                          continue;
                                        }
                                        Scenario s;
                                        s.model = mi;
                                        s.cluster = ci;
                                        s.network = net;
                                        ParallelPlan& p = s.plan;
                                        p.tp = tp, p.pp = pp, p.dp = dp, p.micro_batch_size = mbs,
                                        p.global_batch_size = gbs;
                                        set_schedule(p, interleaved ? "interleaved:" + std::to_string(vp) : sched,
                                                     kCtx);
                                        p.zero_stage = zero;
                                        p.recompute = rc;
                                        p.recompute_num_layers = rc_layers;
                                        p.tp_layout = layout;
                                        p.tp_depth = depth;
                                        p.sequence_parallel = sp;
                                        p.cp = cp;
                                        p.cp_kind = ck;
                                        p.ep = ep;
                                        p.precision = o.precision;
                                        p.tp_comm_overlap = o.tp_comm_overlap;
                                        p.overlap_param_gather = o.overlap_param_gather;
                                        p.cuda_graphs = o.cuda_graphs;
                                        p.dispatcher = o.dispatcher;
                                        p.overlap_moe_comm = o.overlap_moe_comm;
                                        p.megatron_fsdp = o.megatron_fsdp;
                                        try {
                                          p.validate(model, cluster);
                                        } catch (const ConfigError& e) {
                                          skip("plan validation: " + normalise(e.what()));
                                          continue;
                                        }
                                        s.id = id_of(mi, ci, net, plan_knobs(p));
                                        if (!ids.insert(s.id).second) {
                                          skip("duplicate (the same scenario listed twice)");
                                          continue;
                                        }
                                        points.push_back(std::move(s));
                                      }
      }
  }
  if (samples > 0 && samples < points.size()) {
    std::vector<Scenario> kept;
    for (std::size_t i : sample_positions(points.size(), samples, seed)) kept.push_back(std::move(points[i]));
    ex.skipped["not sampled (random)"] += points.size() - kept.size();
    points = std::move(kept);
  }

  // Planner scenarios: the planner runs in the worker, on every model x cluster x gbs x network.
  for (int mi = 0; mi < static_cast<int>(ex.models.size()); ++mi)
    for (int ci = 0; ci < static_cast<int>(ex.clusters.size()); ++ci)
      for (int gbs : gbss)
        for (NetworkMode net : networks)
          for (const std::string& name : planners) {
            Scenario s;
            s.model = mi, s.cluster = ci, s.network = net, s.planner = name;
            s.plan.global_batch_size = gbs;
            s.id = id_of(mi, ci, net, {{"planner", name}, {"gbs", gbs}});
            if (!ids.insert(s.id).second) {
              skip("duplicate (the same scenario listed twice)");
              continue;
            }
            points.push_back(std::move(s));
          }

  // Numbering, then the analytic memory pre-filter (grid points only: planners check memory themselves).
  for (std::size_t i = 0; i < points.size(); ++i) {
    Scenario& s = points[i];
    s.index = static_cast<int>(i);
    if (!prefilter || !s.planner.empty()) continue;
    const double capacity = ex.clusters[s.cluster].gpu.memory_bytes;
    const double reserved = ex.calibrations[s.cluster].reserved_memory_bytes;
    try {
      s.prefiltered = analytic_peak_bytes(ex.models[s.model], s.plan, reserved) > capacity;
    } catch (const Error&) {
      // The simulation reports whatever the analytic model could not evaluate.
    }
    if (s.prefiltered) ++ex.prefiltered;
  }
  ex.scenarios = std::move(points);
  return ex;
}

Row row_skeleton(const Expansion& ex, const Scenario& s, const std::string& status, const std::string& error) {
  const TransformerSpec& m = ex.models[s.model];
  const ClusterSpec& c = ex.clusters[s.cluster];
  Row r;
  r["id"] = s.id;
  r["index"] = s.index;
  r["model"] = m.name;
  r["params"] = m.total_params();
  r["cluster"] = c.name;
  r["gpu"] = c.gpu.name;
  r["gpus"] = c.total_gpus();
  r["nodes"] = c.num_nodes;
  r["network"] = to_string(s.network);
  r["planner"] = s.planner;
  set_plan_fields(r, s.plan, s.planner.empty());
  r["status"] = status;
  r["error"] = error;
  for (const char* k :
       {"iteration_time_s", "tokens_per_s", "samples_per_s", "mfu", "model_tflops_per_gpu", "peak_memory_bytes"})
    r[k] = nullptr;
  r["memory_capacity_bytes"] = c.gpu.memory_bytes;
  for (const char* k : {"fits", "memory_bytes", "compute_s", "exposed_comm_s", "bubble_s", "sim_wall_s"})
    r[k] = nullptr;
  return r;
}

Row run_scenario(const Expansion& ex, const Scenario& s) {
  const auto t0 = std::chrono::steady_clock::now();
  Row r = row_skeleton(ex, s, "ok", "");
  auto wall = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  try {
    const TransformerSpec& model = ex.models[s.model];
    const ClusterSpec& cluster = ex.clusters[s.cluster];
    const Calibration& cal = ex.calibrations[s.cluster];
    ParallelPlan plan = s.plan;
    if (!s.planner.empty()) {
      const auto colon = s.planner.find(':');
      planning::PlannerInput in;
      in.model = model;
      in.cluster = cluster;
      in.calibration = cal;
      in.global_batch_size = plan.global_batch_size;
      if (colon != std::string::npos) in.tensor_parallel = std::stoi(s.planner.substr(colon + 1));
      const auto res = planning::make_planner(s.planner.substr(0, colon))->plan(in);
      if (res.ranked.empty()) {
        r["status"] = "failed";
        r["error"] = "planner found no feasible plan (" + std::to_string(res.considered) + " considered, " +
                     std::to_string(res.invalid) + " invalid, " + std::to_string(res.over_memory) + " over memory, " +
                     std::to_string(res.pruned) + " pruned)";
        r["sim_wall_s"] = wall();
        return r;
      }
      plan = res.ranked.front().plan;
      set_plan_fields(r, plan, true);
    }
    SimOptions opt;
    opt.network = s.network;
    const Inputs in{&model, &cluster, &plan, &cal, &opt};
    const Simulation sim = simulate(in);
    const Report& rep = sim.report;
    // The peak rank (largest peak) gives the memory; the rank with the largest bubble gives the time breakdown.
    const RankReport* peak = &rep.ranks.front();
    const RankReport* bubble = &rep.ranks.front();
    for (const auto& rr : rep.ranks) {
      if (rr.peak_bytes > peak->peak_bytes) peak = &rr;
      if (rr.bubble_s > bubble->bubble_s) bubble = &rr;
    }
    auto at = [&](MemCategory c) { return peak->at_peak[static_cast<int>(c)]; };
    const bool fits = rep.oom.empty();
    if (fits) {
      r["iteration_time_s"] = rep.iteration_time_s;
      r["tokens_per_s"] = rep.tokens_per_s;
      r["samples_per_s"] = rep.samples_per_s;
      r["mfu"] = rep.mfu;
      r["model_tflops_per_gpu"] = rep.model_tflops_per_gpu;
    } else {
      double worst = 0;
      for (const auto& o : rep.oom) worst = std::max(worst, o.peak_bytes - o.capacity_bytes);
      char msg[200];
      std::snprintf(msg, sizeof msg, "out of memory on %lld of %d ranks (worst over by %.2f GB)",
                    static_cast<long long>(rep.oom_ranks), plan.world_size(), worst / units::kGB);
      r["status"] = "oom";
      r["error"] = msg;
    }
    r["peak_memory_bytes"] = peak->peak_bytes;
    r["fits"] = fits;
    Row mem;
    mem["weights"] = at(MemCategory::WEIGHTS) + at(MemCategory::GATHERED_PARAMS);
    mem["gradients"] = at(MemCategory::GRADIENTS) + at(MemCategory::GRAD_BUFFERS);
    mem["optimizer"] = at(MemCategory::OPTIMIZER);
    mem["activations"] = at(MemCategory::ACTIVATIONS) + at(MemCategory::RECOMPUTE);
    mem["reserved"] = at(MemCategory::RESERVED);
    r["memory_bytes"] = mem;
    if (fits) {
      r["compute_s"] = bubble->compute_s;
      r["exposed_comm_s"] = bubble->exposed_comm_s;
      r["bubble_s"] = bubble->bubble_s;
    }
  } catch (const std::exception& e) {
    Row f = row_skeleton(ex, s, "failed", e.what());
    // A planner's chosen plan stays visible: every column set_plan_fields writes, as the run had set it.
    Row plan_columns;
    set_plan_fields(plan_columns, ParallelPlan{}, false);
    for (const auto& [k, v] : plan_columns.items()) f[k] = r[k];
    r = std::move(f);
  }
  r["sim_wall_s"] = wall();
  return r;
}

namespace {
std::string csv_field(const json& v) {
  if (v.is_null()) return "";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (!v.is_string()) return v.dump();
  std::string s = v.get<std::string>();
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}
const char* const kMemKeys[] = {"weights", "gradients", "optimizer", "activations", "reserved"};
const char* const kColumns[] = {"id",
                                "index",
                                "model",
                                "params",
                                "cluster",
                                "gpu",
                                "gpus",
                                "nodes",
                                "network",
                                "planner",
                                "tp",
                                "pp",
                                "dp",
                                "cp",
                                "ep",
                                "vp",
                                "mbs",
                                "gbs",
                                "schedule",
                                "zero",
                                "recompute",
                                "tp_layout",
                                "sequence_parallel",
                                "precision",
                                "tp_comm_overlap",
                                "overlap_param_gather",
                                "cuda_graphs",
                                "dispatcher",
                                "overlap_moe_comm",
                                "megatron_fsdp",
                                "stage_replicas",
                                "stage_strategies",
                                "status",
                                "error",
                                "iteration_time_s",
                                "tokens_per_s",
                                "samples_per_s",
                                "mfu",
                                "model_tflops_per_gpu",
                                "peak_memory_bytes",
                                "memory_capacity_bytes",
                                "fits",
                                "memory_bytes",
                                "compute_s",
                                "exposed_comm_s",
                                "bubble_s",
                                "sim_wall_s"};
}  // namespace

std::string csv_header() {
  std::string h;
  for (const char* c : kColumns) {
    if (std::string(c) == "memory_bytes") {
      for (const char* k : kMemKeys) h += std::string("memory_bytes.") + k + ",";
    } else {
      h += std::string(c) + ",";
    }
  }
  h.back() = '\n';
  return h;
}

std::string csv_line(const Row& row) {
  std::string line;
  for (const char* c : kColumns) {
    const json v = row.contains(c) ? json(row.at(c)) : json(nullptr);
    if (std::string(c) == "memory_bytes") {
      for (const char* k : kMemKeys) line += csv_field(v.is_object() && v.contains(k) ? v.at(k) : json(nullptr)) + ",";
    } else {
      line += csv_field(v) + ",";
    }
  }
  line.back() = '\n';
  return line;
}

}  // namespace dtsim::sim::sweep
