#include "traces/plan.hpp"

#include "traces/stack_profile.hpp"

#include <algorithm>

#include <cmath>
#include <cstdint>
#include <numeric>
#include <sstream>

#include "traces/error.hpp"
#include "traces/json_util.hpp"
#include "traces/limits.hpp"
#include "traces/text.hpp"

namespace dtsim {
constexpr std::int64_t kMaxMicroBatches = 1 << 20;  ///< micro-batches per replica per iteration (validate())
using json_util::get;
using json_util::get_or;

std::string to_string(Schedule s) {
  switch (s) {
    case Schedule::GPIPE: return "gpipe";
    case Schedule::ONE_F_ONE_B: return "1f1b";
    case Schedule::INTERLEAVED: return "interleaved";
    case Schedule::ZB_H1: return "zb-h1";
    case Schedule::ZB_H2: return "zb-h2";
    case Schedule::DUALPIPEV: return "dualpipev";
    case Schedule::DUALPIPE: return "dualpipe";
    case Schedule::CUSTOM: return "custom";
  }
  return "?";
}

std::string to_string(CpKind k) {
  switch (k) {
    case CpKind::RING: return "ring";
    case CpKind::ALL_TO_ALL: return "a2a";
    case CpKind::ALL_GATHER: return "allgather";
  }
  return "?";
}

CpKind cp_kind_from_string(const std::string& s, const std::string& ctx) {
  if (s == "ring" || s == "p2p") return CpKind::RING;
  if (s == "a2a" || s == "ulysses") return CpKind::ALL_TO_ALL;
  if (s == "allgather" || s == "all_gather") return CpKind::ALL_GATHER;
  throw ConfigError(ctx + ": unknown context-parallel kind '" + s + "' (known: ring, a2a, allgather)");
}

std::string to_string(Precision p) {
  switch (p) {
    case Precision::BF16: return "bf16";
    case Precision::FP8_DELAYED: return "fp8-delayed";
    case Precision::FP8_CURRENT: return "fp8-current";
    case Precision::FP8_ROWWISE: return "fp8-rowwise";
    case Precision::MXFP8: return "mxfp8";
    case Precision::NVFP4: return "nvfp4";
  }
  return "?";
}

Precision precision_from_string(const std::string& s, const std::string& ctx) {
  if (s == "bf16" || s == "fp16" || s == "none") return Precision::BF16;
  if (s == "fp8" || s == "fp8-delayed") return Precision::FP8_DELAYED;
  if (s == "fp8-current" || s == "fp8-tensorwise") return Precision::FP8_CURRENT;
  if (s == "fp8-rowwise") return Precision::FP8_ROWWISE;
  if (s == "mxfp8") return Precision::MXFP8;
  if (s == "nvfp4") return Precision::NVFP4;
  throw ConfigError(ctx + ": precision '" + s +
                    "' is not known (known: bf16, fp8, fp8-delayed, fp8-current, fp8-tensorwise, fp8-rowwise, mxfp8, "
                    "nvfp4)");
}

bool is_fp8(Precision p) {
  return p == Precision::FP8_DELAYED || p == Precision::FP8_CURRENT || p == Precision::FP8_ROWWISE ||
         p == Precision::MXFP8;
}

bool caches_lowp_weights(Precision p) {
  return p == Precision::FP8_DELAYED || p == Precision::MXFP8 || p == Precision::NVFP4;
}

std::string to_string(Dispatcher d) {
  switch (d) {
    case Dispatcher::ALL_TO_ALL: return "alltoall";
    case Dispatcher::ALL_GATHER: return "allgather";
    case Dispatcher::DEEPEP: return "deepep";
    case Dispatcher::HYBRIDEP: return "hybridep";
  }
  return "?";
}

Dispatcher dispatcher_from_string(const std::string& s, const std::string& ctx) {
  if (s == "alltoall" || s == "a2a") return Dispatcher::ALL_TO_ALL;
  if (s == "allgather") return Dispatcher::ALL_GATHER;
  if (s == "deepep" || s == "flex") return Dispatcher::DEEPEP;
  if (s == "hybridep") return Dispatcher::HYBRIDEP;
  throw ConfigError(ctx + ": unknown MoE dispatcher '" + s + "' (known: alltoall, allgather, deepep, flex, hybridep)");
}

namespace {
/// A number of a --routing spec, in `range`: "not a number" only for text that is none; a number outside the range
/// (or beyond a double, such as 1e-320 or 1e400) names the range.
double parse_number(const std::string& t, const std::string& what, const std::string& ctx, const limits::Range& range) {
  std::size_t used = 0;
  double v = 0;
  bool out_of_range = false;
  try {
    v = std::stod(t, &used);
  } catch (const std::out_of_range&) {
    out_of_range = true;  // underflow (1e-320) or overflow (1e400): a number, but not one dtsim can use
    used = t.size();
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != t.size()) throw ConfigError(ctx + ": " + what + " '" + t + "' is not a number");
  if (out_of_range || !std::isfinite(v) || v < range.lo || v > range.hi)
    throw ConfigError(ctx + ": " + what + " '" + t + "' is outside its range " + limits::describe(range));
  return v;
}
}  // namespace

std::vector<double> Routing::expert_fractions(int experts) const {
  DTSIM_ASSERT(experts > 0, "expert_fractions of " << experts << " experts");
  std::vector<double> f(static_cast<std::size_t>(experts), 1.0 / experts);
  if (!loads.empty()) {
    DTSIM_ASSERT(static_cast<int>(loads.size()) == experts, "routing loads for " << loads.size() << " experts");
    f = loads;
  } else if (kind == Kind::SKEW && skew != 0) {
    double sum = 0;
    for (int i = 0; i < experts; ++i) sum += f[static_cast<std::size_t>(i)] = std::pow(1.0 + i, -skew);
    for (auto& x : f) x /= sum;
  }
  if (capacity_factor > 0) {
    const double cap = capacity_factor / experts;
    for (auto& x : f) x = pad_to_capacity ? cap : std::min(x, cap);
  }
  return f;
}

double Routing::kept_fraction(int experts) const {
  if (!(capacity_factor > 0)) return 1.0;
  Routing uncapped = *this;
  uncapped.capacity_factor = 0;
  const double cap = capacity_factor / experts;
  double kept = 0;
  for (double f : uncapped.expert_fractions(experts)) kept += std::min(f, cap);
  return std::min(1.0, kept);
}

Routing routing_from_string(const std::string& spec, const std::string& ctx) {
  Routing r;
  std::string s = spec;
  // Optional capacity suffix: ",cf:X" or ",cf:X:pad".
  if (auto pos = s.find(",cf:"); pos != std::string::npos || s.rfind("cf:", 0) == 0) {
    const std::size_t start = pos == std::string::npos ? 0 : pos + 1;
    std::string cf = s.substr(start + 3);
    s = start == 0 ? "balanced" : s.substr(0, pos);
    if (cf.size() > 4 && cf.substr(cf.size() - 4) == ":pad") {
      r.pad_to_capacity = true;
      cf = cf.substr(0, cf.size() - 4);
    }
    r.capacity_factor = parse_number(cf, "capacity factor", ctx, limits::kCapacityFactor);
  }
  if (s == "balanced") return r;
  if (s == "exact") {
    r.exact = true;
    return r;
  }
  if (s.rfind("skew:", 0) == 0) {
    r.kind = Routing::Kind::SKEW;
    r.skew = parse_number(s.substr(5), "routing skew", ctx, limits::kRoutingSkew);
    return r;
  }
  if (s.rfind("loads:", 0) == 0) {
    r.kind = Routing::Kind::SKEW;
    std::string list = s.substr(6);
    if (list.find(',') == std::string::npos &&
        (list.find('/') != std::string::npos || list.find(".json") != std::string::npos)) {
      const auto j = json_util::read_file(list);
      if (!j.is_array())
        throw ConfigError(ctx + ": routing loads file '" + list + "' must hold a JSON list of numbers");
      for (const auto& x : j) {
        if (!x.is_number())
          throw ConfigError(ctx + ": routing loads file '" + list + "' must hold a JSON list of numbers");
        limits::check(x.get<double>(), limits::kRoutingLoad, ctx + ": routing loads file '" + list + "'",
                      "load " + std::to_string(r.loads.size()));
        r.loads.push_back(x.get<double>());
      }
    } else {
      std::stringstream in(list);
      std::string item;
      while (std::getline(in, item, ','))
        r.loads.push_back(parse_number(item, "routing load", ctx, limits::kRoutingLoad));
    }
    if (r.loads.size() > 1 << 16) throw ConfigError(ctx + ": routing gives more than 65536 loads");
    double sum = 0;  // at most 65536 loads of at most 1e12 each: finite
    for (double x : r.loads) sum += x;
    if (r.loads.empty() || !(sum > 0)) throw ConfigError(ctx + ": routing loads must not all be zero");
    for (auto& x : r.loads) x /= sum;  // fractions
    return r;
  }
  throw ConfigError(
      ctx + ": unknown routing '" + spec +
      "' (known: balanced, exact, skew:S, loads:f1,f2,... or loads:FILE, each with an optional ,cf:X[:pad] capacity "
      "factor)");
}

std::string to_string(const Routing& r) {
  std::ostringstream o;
  if (r.kind == Routing::Kind::BALANCED) {
    o << (r.exact ? "exact" : "balanced");
  } else if (!r.loads.empty()) {
    o << "loads:";
    for (std::size_t i = 0; i < r.loads.size(); ++i) o << (i ? "," : "") << r.loads[i];
  } else {
    o << "skew:" << r.skew;
  }
  if (r.capacity_factor > 0) o << ",cf:" << r.capacity_factor << (r.pad_to_capacity ? ":pad" : "");
  return o.str();
}

std::string to_string(const PipeOp& op) {
  std::string s(1, op.kind == PipeOp::Kind::F ? 'F' : op.kind == PipeOp::Kind::B ? 'B' : 'W');
  s += std::to_string(op.microbatch);
  if (op.chunk != 0) {
    s += '.';
    s += std::to_string(op.chunk);
  }
  return s;
}

PipeOp pipe_op_from_string(const std::string& s, const std::string& ctx) {
  auto bad = [&] {
    return ConfigError(ctx + ": pass '" + s + "' is not of the form F3, B3, W3 or F3.1 (micro-batch 3, chunk 1)");
  };
  if (s.size() < 2) throw bad();
  PipeOp op;
  switch (s[0]) {
    case 'F': op.kind = PipeOp::Kind::F; break;
    case 'B': op.kind = PipeOp::Kind::B; break;
    case 'W': op.kind = PipeOp::Kind::W; break;
    default: throw bad();
  }
  std::string rest = s.substr(1);
  auto dot = rest.find('.');
  auto parse_nonneg = [&](const std::string& t) {
    if (t.empty() || t.size() > 9 || t.find_first_not_of("0123456789") != std::string::npos) throw bad();
    return std::stoi(t);
  };
  op.microbatch = parse_nonneg(rest.substr(0, dot));
  if (dot != std::string::npos) op.chunk = parse_nonneg(rest.substr(dot + 1));
  return op;
}

bool ParallelPlan::grads_reduced_each_microbatch(int stage) const {
  const int zero = stage_strategy(stage).zero_stage;
  return zero >= 3 || (megatron_fsdp && zero == 2);
}

bool ParallelPlan::split_backward() const {
  if (schedule == Schedule::ZB_H1 || schedule == Schedule::ZB_H2 || dual_pipe()) return true;
  if (schedule == Schedule::CUSTOM)
    for (const auto& stage : custom_order)
      for (const auto& op : stage)
        if (op.kind == PipeOp::Kind::W) return true;
  return false;
}

std::string ParallelPlan::schedule_name() const {
  switch (schedule) {
    case Schedule::ONE_F_ONE_B: return dapple_warmup ? "1f1b:dapple" : "1f1b";
    case Schedule::INTERLEAVED: return "interleaved:" + std::to_string(virtual_stages);
    case Schedule::CUSTOM: return "custom:" + (custom_source.empty() ? std::string("inline") : custom_source);
    default: return to_string(schedule);
  }
}

void set_schedule(ParallelPlan& plan, const std::string& spec, const std::string& ctx) {
  plan.virtual_stages = 1;
  plan.dapple_warmup = false;
  plan.custom_order.clear();
  plan.custom_source.clear();
  const auto colon = spec.find(':');
  const std::string name = spec.substr(0, colon), arg = colon == std::string::npos ? "" : spec.substr(colon + 1);
  auto no_arg = [&] {
    if (colon != std::string::npos) throw ConfigError(ctx + ": schedule '" + name + "' takes no ':' argument");
  };
  if (name == "gpipe") {
    no_arg();
    plan.schedule = Schedule::GPIPE;
  } else if (name == "1f1b") {
    plan.schedule = Schedule::ONE_F_ONE_B;
    if (arg == "dapple") plan.dapple_warmup = true;
    else if (!arg.empty() && arg != "megatron")
      throw ConfigError(ctx + ": 1f1b warm-up '" + arg + "' is not known (known: 1f1b, 1f1b:megatron, 1f1b:dapple)");
  } else if (name == "interleaved") {
    plan.schedule = Schedule::INTERLEAVED;
    if (arg.empty() || arg.size() > 4 || arg.find_first_not_of("0123456789") != std::string::npos || std::stoi(arg) < 1)
      throw ConfigError(ctx + ": interleaved needs the number of chunks per stage, e.g. interleaved:2");
    plan.virtual_stages = std::stoi(arg);
  } else if (name == "zb-h1") {
    no_arg();
    plan.schedule = Schedule::ZB_H1;
  } else if (name == "zb-h2") {
    no_arg();
    plan.schedule = Schedule::ZB_H2;
  } else if (name == "dualpipev") {
    no_arg();
    plan.schedule = Schedule::DUALPIPEV;
    plan.virtual_stages = 2;
  } else if (name == "dualpipe") {
    no_arg();
    plan.schedule = Schedule::DUALPIPE;
    plan.virtual_stages = 2;
  } else if (name == "custom") {
    if (arg.empty()) throw ConfigError(ctx + ": custom schedule needs a file, e.g. custom:order.json");
    load_custom_schedule(plan, arg);
  } else {
    throw ConfigError(
        ctx + ": unknown schedule '" + spec +
        "' (known: gpipe, 1f1b, 1f1b:dapple, interleaved:V, zb-h1, zb-h2, dualpipev, dualpipe, custom:FILE)");
  }
}

namespace {
std::vector<std::vector<PipeOp>> custom_from_json(const nlohmann::json& stages, const std::string& ctx) {
  if (!stages.is_array()) throw ConfigError(ctx + ": 'stages' must be a list of per-stage pass lists");
  std::vector<std::vector<PipeOp>> out;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const std::string sctx = ctx + ": stage " + std::to_string(s);
    if (!stages[s].is_array()) throw ConfigError(sctx + " must be a list of passes such as \"F0\"");
    std::vector<PipeOp> ops;
    for (const auto& e : stages[s]) {
      if (!e.is_string()) throw ConfigError(sctx + " has a pass that is not a string");
      ops.push_back(pipe_op_from_string(e.get<std::string>(), sctx));
    }
    out.push_back(std::move(ops));
  }
  return out;
}
nlohmann::json custom_to_json(const std::vector<std::vector<PipeOp>>& order) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& st : order) {
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& op : st) ops.push_back(to_string(op));
    stages.push_back(ops);
  }
  return stages;
}
}  // namespace

void load_custom_schedule(ParallelPlan& plan, const std::string& path) {
  custom_schedule_from_json(plan, json_util::read_file(path), path);
}

void custom_schedule_from_json(ParallelPlan& plan, const nlohmann::json& j, const std::string& source) {
  const std::string ctx = "custom schedule '" + source + "'";
  json_util::check_schema_version(j, ctx, 1);
  json_util::reject_unknown(j, ctx, {"schema_version", "virtual_stages", "stages", "comment"});
  plan.schedule = Schedule::CUSTOM;
  plan.virtual_stages = get_or<int>(j, ctx, "virtual_stages", 1);
  plan.custom_order = custom_from_json(get<nlohmann::json>(j, ctx, "stages"), ctx);
  plan.custom_source = source;
}
std::string to_string(Recompute r) {
  return r == Recompute::NONE ? "none" : r == Recompute::SELECTIVE ? "selective" : "full";
}
std::string to_string(TpLayout l) {
  switch (l) {
    case TpLayout::D1: return "1d";
    case TpLayout::D2: return "2d";
    case TpLayout::D2_5: return "2.5d";
    case TpLayout::D3: return "3d";
  }
  return "?";
}

TpLayout tp_layout_from_string(const std::string& s, const std::string& ctx) {
  for (TpLayout l : {TpLayout::D1, TpLayout::D2, TpLayout::D2_5, TpLayout::D3})
    if (to_string(l) == s) return l;
  throw ConfigError(ctx + ": unknown tensor-parallel layout '" + s + "' (valid: 1d, 2d, 2.5d, 3d)");
}

namespace {
/// Why `model`'s layers are not the dense attention + MLP blocks that torchtitan's Llama applies its op-level
/// checkpointing and torchao's float8 all-gather to; empty where they are.
std::string not_dense_blocks(const TransformerSpec& model) {
  if (model.moe.enabled()) return "MoE layers";
  if (model.mla.enabled()) return "multi-head latent attention";
  if (model.hybrid()) return "layers other than attention + MLP (layer_pattern)";
  return "";
}

/// Exact integer k-th root of n, or 0 when n is not a perfect k-th power.
int exact_root(int n, int k) {
  if (n < 1) return 0;
  for (int q = 1;; ++q) {
    long long v = 1;
    for (int i = 0; i < k; ++i) v *= q;
    if (v == n) return q;
    if (v > n) return 0;
  }
}
}  // namespace

int tp_grid_side(TpLayout layout, int tp, int depth) {
  if (tp < 1) return 0;
  switch (layout) {
    case TpLayout::D1: return tp;
    case TpLayout::D2: return exact_root(tp, 2);
    case TpLayout::D2_5: return depth >= 1 && tp % depth == 0 ? exact_root(tp / depth, 2) : 0;
    case TpLayout::D3: return exact_root(tp, 3);
  }
  return 0;
}

std::string to_string(Axis a) { return a == Axis::TP ? "tp" : a == Axis::DP ? "dp" : "pp"; }

Schedule schedule_from_string(const std::string& s, const std::string& ctx) {
  ParallelPlan p;
  if (s.rfind("custom", 0) == 0) throw ConfigError(ctx + ": a custom schedule needs its order (use set_schedule)");
  set_schedule(p, s, ctx);
  return p.schedule;
}

Recompute recompute_from_string(const std::string& s, const std::string& ctx) {
  if (s == "none") return Recompute::NONE;
  if (s == "selective") return Recompute::SELECTIVE;
  if (s == "full") return Recompute::FULL;
  throw ConfigError(ctx + ": unknown recompute '" + s + "' (known: none, selective, full)");
}

namespace {
constexpr const char* kRecomputeModuleNames[kRecomputeModules] = {
    "core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts", "op_sac"};
}  // namespace

std::string recompute_modules_to_string(unsigned modules) {
  std::string out;
  for (int i = 0; i < kRecomputeModules; ++i)
    if (modules & (1U << i)) {
      if (!out.empty()) out += ',';
      out += kRecomputeModuleNames[i];
    }
  return out;
}

unsigned recompute_modules_from_string(const std::string& list, const std::string& ctx) {
  unsigned out = 0;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, comma - start);
    int found = -1;
    for (int i = 0; i < kRecomputeModules; ++i)
      if (name == kRecomputeModuleNames[i]) found = i;
    if (found < 0)
      throw ConfigError(ctx + ": unknown recompute module '" + name +
                        "' (known: " + recompute_modules_to_string((1U << kRecomputeModules) - 1) + ")");
    out |= 1U << found;
    start = comma + 1;
  }
  return out;
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

int ParallelPlan::stage_tp(int stage) const {
  if (!has_stage_strategies()) return tp;
  DTSIM_ASSERT(stage >= 0 && stage < static_cast<int>(stage_strategies.size()),
               "stage " << stage << " of " << stage_strategies.size() << " stage strategies");
  const int t = stage_strategies[static_cast<std::size_t>(stage)].tp;
  return t > 0 ? t : tp;
}

bool ParallelPlan::has_stage_cuts() const {
  for (int a : stage_cut_atoms)
    if (a != 0) return true;
  return false;
}

int ParallelPlan::cut_atoms(int boundary) const {
  if (boundary < 0 || boundary >= static_cast<int>(stage_cut_atoms.size())) return 0;
  return stage_cut_atoms[static_cast<std::size_t>(boundary)];
}

bool ParallelPlan::has_stage_tp() const {
  for (const StageStrategy& st : stage_strategies)
    if (st.tp > 0 && st.tp != tp) return true;
  return false;
}

int ParallelPlan::ranks_per_pipeline() const {
  if (!uses_stage_layout()) return tp * pp;
  int n = 0;
  for (int s = 0; s < pp; ++s) n += stage_tp(s) * replicas(s);
  return n;
}

int ParallelPlan::pipeline_copy_gpus() const {
  const auto sized = [&](std::size_t n) { return n == 0 || n == static_cast<std::size_t>(pp); };
  if (!sized(stage_replicas.size()) || !sized(stage_strategies.size())) return tp * cp * pp;
  return cp * ranks_per_pipeline();
}

std::string to_string(const StageStrategy& st) {
  std::string out;
  if (st.tp > 0) {
    out += "tp ";
    out += std::to_string(st.tp);
    out += ' ';
  }
  out += to_string(st.recompute);
  out += " zero ";
  out += std::to_string(st.zero_stage);
  if (st.sequence_parallel) out += " sp";
  if (st.tp_layout != TpLayout::D1) {
    out += ' ';
    out += to_string(st.tp_layout);
    if (st.tp_layout == TpLayout::D2_5) {
      out += ':';
      out += std::to_string(st.tp_depth);
    }
  }
  return out;
}

StageStrategy ParallelPlan::stage_strategy(int stage) const {
  if (has_stage_strategies()) {
    DTSIM_ASSERT(stage >= 0 && stage < static_cast<int>(stage_strategies.size()),
                 "stage " << stage << " of " << stage_strategies.size() << " stage strategies");
    return stage_strategies[static_cast<std::size_t>(stage)];
  }
  return {tp_layout, tp_depth, sequence_parallel, zero_stage, recompute};
}

ParallelPlan ParallelPlan::stage_view(int stage) const {
  ParallelPlan v = *this;
  if (!has_stage_strategies()) return v;
  const StageStrategy& st = stage_strategies[static_cast<std::size_t>(stage)];
  v.tp_layout = st.tp_layout;
  v.tp_depth = st.tp_depth;
  v.sequence_parallel = st.sequence_parallel;
  v.zero_stage = st.zero_stage;
  v.recompute = st.recompute;
  v.tp = stage_tp(stage);
  v.stage_strategies.clear();
  return v;
}

bool ParallelPlan::stage_layouts_differ(int a, int b) const {
  if (!has_stage_strategies()) return false;
  const StageStrategy &x = stage_strategies[static_cast<std::size_t>(a)],
                      &y = stage_strategies[static_cast<std::size_t>(b)];
  return x.tp_layout != y.tp_layout || x.tp_depth != y.tp_depth;
}

int ParallelPlan::rank_of(const RankCoord& c) const {
  if (uses_stage_layout()) {
    int offset = 0;
    for (int s = 0; s < c.pp; ++s) offset += stage_tp(s) * replicas(s);
    return c.dp * ranks_per_pipeline() + offset + c.rep * stage_tp(c.pp) + c.tp;
  }
  int rank = 0, stride = 1;
  for (Axis a : rank_order) {
    rank += (a == Axis::TP ? c.tp + tp * c.cp : c.get(a)) * stride;
    stride *= degree(a);
  }
  return rank;
}

RankCoord ParallelPlan::coord_of(int rank) const {
  RankCoord c;
  if (uses_stage_layout()) {
    const int per = ranks_per_pipeline();
    c.dp = rank / per;
    int x = rank % per;
    for (int w = stage_tp(0) * replicas(0); x >= w; w = stage_tp(c.pp) * replicas(c.pp)) {
      x -= w;
      ++c.pp;
    }
    c.rep = x / stage_tp(c.pp);
    c.tp = x % stage_tp(c.pp);
    return c;
  }
  for (Axis a : rank_order) {
    const int v = rank % degree(a);
    if (a == Axis::TP) {
      c.tp = v % tp;
      c.cp = v / tp;
    } else {
      c.set(a, v);
    }
    rank /= degree(a);
  }
  return c;
}

std::vector<int> ParallelPlan::chunk_layers(int num_layers) const {
  const int n = pipeline_chunks();
  std::vector<int> out = layers_per_stage;
  if (static_cast<int>(out.size()) != n) {
    out.assign(static_cast<std::size_t>(n), num_layers / n);
    for (int s = 0; s < num_layers % n; ++s) out[static_cast<std::size_t>(s)] += 1;
  }
  if (bidirectional()) out.insert(out.end(), out.begin(), out.end());  // the reverse direction's copy
  return out;
}

std::vector<int> ParallelPlan::chunk_first_layers(int num_layers) const {
  const auto layers = chunk_layers(num_layers);
  std::vector<int> out(layers.size(), 0);
  for (std::size_t k = 1; k < layers.size(); ++k)
    out[k] = chunk_position(static_cast<int>(k)) == 0 ? 0 : out[k - 1] + layers[k - 1];
  return out;
}

bool ParallelPlan::recomputes_layer(int layer, int num_layers) const {
  if (recompute_num_layers <= 0) return true;
  const auto layers = chunk_layers(num_layers);
  const auto first = chunk_first_layers(num_layers);
  for (std::size_t k = 0; k < layers.size(); ++k)  // DualPipe's copies place a layer alike: the first match answers
    if (first[k] <= layer && layer < first[k] + layers[k]) return layer - first[k] < recompute_num_layers;
  DTSIM_ASSERT(false, "layer " << layer << " is in no model chunk of " << num_layers << " layers");
  return true;
}

std::vector<int> ParallelPlan::stage_layers(int num_layers) const {
  if (virtual_stages == 1 && !layers_per_stage.empty()) return layers_per_stage;
  const auto chunks = chunk_layers(num_layers);
  std::vector<int> out(pp, 0);
  for (std::size_t i = 0; i < chunks.size(); ++i) out[stage_of_chunk(static_cast<int>(i))] += chunks[i];
  return out;
}

int ParallelPlan::model_chunk(int stage, int chunk) const {
  if (dual_pipe()) return chunk == 0 ? stage : 2 * pp - 1 - stage;
  return chunk * pp + stage;
}

int ParallelPlan::stage_of_chunk(int k) const {
  if (dual_pipe()) return k < pp ? k : 2 * pp - 1 - k;
  return k % pp;
}

int ParallelPlan::chunk_index(int k) const {
  if (dual_pipe()) return k < pp ? 0 : 1;
  return k / pp;
}

bool ParallelPlan::has_device_map() const {
  for (std::size_t r = 0; r < device_map.size(); ++r)
    if (device_map[r] != static_cast<int>(r)) return true;
  return false;
}

void ParallelPlan::place_ranks(std::vector<int> gpu_of_rank) {
  DTSIM_ASSERT(static_cast<int>(gpu_of_rank.size()) == world_size(),
               "placement of " << gpu_of_rank.size() << " ranks for " << world_size());
  device_map.clear();
  auto matches = [&](const ParallelPlan& alt) {
    for (int r = 0; r < world_size(); ++r)
      if (gpu_of_rank[r] != alt.rank_of(coord_of(r))) return false;
    return true;
  };
  if (matches(*this)) return;
  if (!uses_stage_layout()) {  // rank_order does not apply to the stage layout
    std::array<Axis, 3> order = {Axis::TP, Axis::DP, Axis::PP};
    std::sort(order.begin(), order.end());
    do {
      ParallelPlan alt = *this;
      alt.rank_order = order;
      if (matches(alt)) {
        rank_order = order;
        return;
      }
    } while (std::next_permutation(order.begin(), order.end()));
  }
  device_map = std::move(gpu_of_rank);
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
  if (!(optimizer_offload_fraction >= 0 && optimizer_offload_fraction <= 1))
    throw ConfigError(ctx + ": optimizer offload fraction must be between 0 and 1, got " +
                      format_number("%g", optimizer_offload_fraction));
  if (offload_activation_layers < 0)
    throw ConfigError(ctx + ": activation offload layers must be 0 or more, got " +
                      std::to_string(offload_activation_layers));
  if (recompute_num_layers < 0)
    throw ConfigError(ctx + ": recompute num layers must be 0 (every layer) or more, got " +
                      std::to_string(recompute_num_layers));
  if (offload_activation_layers > 0) {
    if (!cluster.host.known())
      throw ConfigError(ctx + ": activation offload needs the cluster's host link and memory (cluster '" +
                        cluster.name + "' gives no \"host\")");
  }
  if (optimizer_offload_fraction > 0 && !cluster.host.known())
    throw ConfigError(ctx + ": optimizer offload needs the cluster's host link and memory (cluster '" + cluster.name +
                      "' gives no \"host\")");
  positive(global_batch_size, "global batch size");
  if (global_batch_size > limits::kMaxGlobalBatch)
    throw ConfigError(ctx + ": global batch size must be at most " + std::to_string(limits::kMaxGlobalBatch) +
                      ", got " + std::to_string(global_batch_size));
  positive(cp, "cp");
  positive(ep, "ep");
  if (etp < 0) throw ConfigError(ctx + ": etp must be positive, got " + std::to_string(etp));
  validate_options_used(model);
  validate_moe_cp(model);
  if (has_stage_strategies() && static_cast<int>(stage_strategies.size()) != pp)
    throw ConfigError(ctx + ": stage_strategies has " + std::to_string(stage_strategies.size()) +
                      " entries but pp is " + std::to_string(pp));
  for (int s = 0; s < static_cast<int>(stage_strategies.size()); ++s)
    if (stage_strategies[static_cast<std::size_t>(s)].tp < 0)
      throw ConfigError(ctx + ": stage_strategies[" + std::to_string(s) + "]: tp must be positive, got " +
                        std::to_string(stage_strategies[static_cast<std::size_t>(s)].tp));
  if (has_stage_replicas()) {
    if (static_cast<int>(stage_replicas.size()) != pp)
      throw ConfigError(ctx + ": stage_replicas has " + std::to_string(stage_replicas.size()) + " entries but pp is " +
                        std::to_string(pp));
    for (int s = 0; s < pp; ++s) {
      if (stage_replicas[s] <= 0) throw ConfigError(ctx + ": stage_replicas entries must be positive");
      if (micro_batch_size % stage_replicas[s] != 0)
        throw ConfigError(ctx + ": stage " + std::to_string(s) + " has " + std::to_string(stage_replicas[s]) +
                          " replicas, which do not divide the micro batch of " + std::to_string(micro_batch_size));
    }
  }
  if (has_stage_tp() && pp > 1 && model.tied_embeddings && stage_tp(0) != stage_tp(pp - 1))
    throw ConfigError(ctx + ": '" + model.name + "' ties its input and output embeddings, so the first and last " +
                      "stages need the same tp (stage 0 has " + std::to_string(stage_tp(0)) + ", stage " +
                      std::to_string(pp - 1) + " has " + std::to_string(stage_tp(pp - 1)) + ")");
  if (uses_stage_layout()) {
    // In 64 bits: the int world_size() is only safe once it equals the cluster's GPU count.
    std::int64_t per_copy = 0;
    std::string terms;
    for (int s = 0; s < pp; ++s) {
      per_copy += static_cast<std::int64_t>(stage_tp(s)) * replicas(s);
      if (s > 0) terms += '+';
      terms += std::to_string(stage_tp(s));
      terms += '*';
      terms += std::to_string(replicas(s));
    }
    const std::int64_t world = per_copy * dp;
    if (world != cluster.total_gpus())
      throw ConfigError(ctx + ": dp*sum(stage tp*replicas) = " + std::to_string(dp) + "*(" + terms +
                        ") = " + std::to_string(world) + " does not match the " + std::to_string(cluster.total_gpus()) +
                        " GPUs of cluster '" + cluster.name + "'");
  } else if (const std::int64_t world = static_cast<std::int64_t>(tp) * cp * pp * dp; world != cluster.total_gpus()) {
    throw ConfigError(ctx +
                      (cp > 1 ? ": tp*cp*pp*dp = " + std::to_string(tp) + "*" + std::to_string(cp) + "*"
                              : ": tp*pp*dp = " + std::to_string(tp) + "*") +
                      std::to_string(pp) + "*" + std::to_string(dp) + " = " + std::to_string(world) +
                      " does not match the " + std::to_string(cluster.total_gpus()) + " GPUs of cluster '" +
                      cluster.name + "'");
  }
  if (!device_map.empty()) {
    if (static_cast<int>(device_map.size()) != world_size())
      throw ConfigError(ctx + ": device_map has " + std::to_string(device_map.size()) + " entries for " +
                        std::to_string(world_size()) + " ranks");
    std::vector<char> used(static_cast<std::size_t>(cluster.total_gpus()), 0);
    for (std::size_t r = 0; r < device_map.size(); ++r) {
      const int g = device_map[r];
      if (g < 0 || g >= cluster.total_gpus())
        throw ConfigError(ctx + ": device_map[" + std::to_string(r) + "] = " + std::to_string(g) +
                          " is not a GPU of cluster '" + cluster.name + "' (0.." +
                          std::to_string(cluster.total_gpus() - 1) + ")");
      if (used[static_cast<std::size_t>(g)]++)
        throw ConfigError(ctx + ": device_map gives GPU " + std::to_string(g) + " to two ranks");
    }
  }
  if (const std::int64_t per_step = static_cast<std::int64_t>(micro_batch_size) * dp; global_batch_size % per_step != 0)
    throw ConfigError(ctx + ": global batch " + std::to_string(global_batch_size) +
                      " is not divisible by micro batch * dp = " + std::to_string(per_step));
  // Every micro-batch is a pass in the schedules, the estimator and the lowering: bounded so that their
  // O(micro-batches) structures are built in well under a second (and the memory guard refuses what would not fit
  // before the work).
  if (const std::int64_t per_step = static_cast<std::int64_t>(micro_batch_size) * dp;
      global_batch_size / per_step > kMaxMicroBatches)
    throw ConfigError(ctx + ": global batch " + std::to_string(global_batch_size) + " is " +
                      std::to_string(global_batch_size / per_step) + " micro-batches of " +
                      std::to_string(micro_batch_size) + " per data-parallel replica; dtsim models at most " +
                      std::to_string(kMaxMicroBatches) + " (raise --mbs or dp)");
  if (!has_stage_strategies()) {
    validate_intra_layer(model, cluster);
  } else {
    // Each stage's view must be a valid plan on its own; its error names the stage.
    for (int s = 0; s < pp; ++s) {
      try {
        stage_view(s).validate_intra_layer(model, cluster);
      } catch (const ConfigError& e) {
        std::string what = e.what();
        if (what.rfind(ctx + ": ", 0) == 0) what = what.substr(ctx.size() + 2);
        throw ConfigError(ctx + ": stage_strategies[" + std::to_string(s) + "]: " + what);
      }
    }
  }
  if (pp > model.num_layers)
    throw ConfigError(ctx + ": pp " + std::to_string(pp) + " exceeds the " + std::to_string(model.num_layers) +
                      " layers of '" + model.name + "'");
  if (virtual_stages < 1) throw ConfigError(ctx + ": virtual stages must be positive");
  if (schedule == Schedule::INTERLEAVED) {
    if (pp < 2) throw ConfigError(ctx + ": the interleaved schedule needs pp >= 2");
    if (num_microbatches() % pp != 0)
      throw ConfigError(ctx + ": the interleaved schedule needs the number of micro-batches (" +
                        std::to_string(num_microbatches()) + ") to be a multiple of pp (" + std::to_string(pp) + ")");
  } else if (schedule == Schedule::DUALPIPEV) {
    // dualpipev.py asserts num_chunks >= num_ranks * 2.
    if (pp < 2) throw ConfigError(ctx + ": the dualpipev schedule needs pp >= 2");
    if (num_microbatches() < 2 * pp)
      throw ConfigError(ctx + ": the dualpipev schedule needs at least 2 * pp = " + std::to_string(2 * pp) +
                        " micro-batches, got " + std::to_string(num_microbatches()));
    if (virtual_stages != 2) throw ConfigError(ctx + ": the dualpipev schedule has 2 model chunks per stage");
  } else if (schedule == Schedule::DUALPIPE) {
    // dualpipe.py asserts num_ranks % 2 == 0, num_chunks % 2 == 0 and num_chunks >= num_ranks * 2.
    if (pp < 2 || pp % 2 != 0) throw ConfigError(ctx + ": the dualpipe schedule needs an even pp >= 2");
    if (num_microbatches() < 2 * pp || num_microbatches() % 2 != 0)
      throw ConfigError(ctx + ": the dualpipe schedule needs an even number of micro-batches, at least 2 * pp = " +
                        std::to_string(2 * pp) + ", got " + std::to_string(num_microbatches()));
    if (virtual_stages != 2) throw ConfigError(ctx + ": the dualpipe schedule has 2 model chunks per stage");
    if (model.tied_embeddings)
      throw ConfigError(ctx + ": the dualpipe schedule is modelled for untied embeddings ('" + model.name +
                        "' ties them); use dualpipev");
    if (has_stage_strategies() || has_stage_replicas() || has_stage_cuts() || !pipeline_layout.empty())
      throw ConfigError(ctx +
                        ": the dualpipe schedule is modelled with one strategy for every stage (its mirror "
                        "stages hold copies of each other's layers): no per-stage strategies, replicas, cuts "
                        "inside layers or pipeline layout");
  } else if (schedule != Schedule::CUSTOM && virtual_stages != 1) {
    throw ConfigError(ctx + ": virtual stages > 1 need the interleaved or a custom schedule");
  }
  if (is_flex(dispatcher) && model.moe.enabled()) {
    const std::string d = to_string(dispatcher);
    // Megatron-Core's flex dispatcher runs over the expert-TP x EP group; dtsim models it without expert TP.
    if (ep < 2) throw ConfigError(ctx + ": the " + d + " dispatcher sends tokens between EP ranks; it needs ep >= 2");
    if (expert_tp() != 1)
      throw ConfigError(ctx + ": the " + d + " dispatcher is modelled without expert tensor parallelism (etp " +
                        std::to_string(expert_tp()) + "); use etp 1");
    if (!routing.balanced() || routing.capacity_factor > 0)
      throw ConfigError(ctx + ": the " + d + " dispatcher is modelled for dropless balanced routing ('balanced' or " +
                        "'exact'), not '" + to_string(routing) + "'");
  }
  if (overlap_moe_comm) {
    if (!model.moe.enabled() || ep < 2)
      throw ConfigError(ctx +
                        ": overlap_moe_comm overlaps expert-parallel all-to-alls; it needs a MoE model and ep >= 2");
    // Megatron-Core runs its combined 1F1B without pipelining or with the interleaved schedule (schedules.py).
    if (!(schedule == Schedule::INTERLEAVED || (pp == 1 && schedule == Schedule::ONE_F_ONE_B)))
      throw ConfigError(ctx +
                        ": overlap_moe_comm pairs forwards and backwards of 1f1b without pipelining (pp 1) or "
                        "of interleaved (as Megatron-Core; dualpipev overlaps its own chunks), not " +
                        schedule_name() + (pp > 1 ? " with pp " + std::to_string(pp) : ""));
  }
  if ((bidirectional() ? pp : static_cast<std::int64_t>(pp) * virtual_stages) > model.num_layers)
    throw ConfigError(ctx +
                      ": pp * virtual stages = " + std::to_string(static_cast<std::int64_t>(pp) * virtual_stages) +
                      " exceeds the " + std::to_string(model.num_layers) + " layers of '" + model.name + "'");
  if (schedule == Schedule::CUSTOM && static_cast<int>(custom_order.size()) != pp)
    throw ConfigError(ctx + ": the custom schedule" + (custom_source.empty() ? "" : " '" + custom_source + "'") +
                      " lists " + std::to_string(custom_order.size()) + " stages but pp is " + std::to_string(pp));
  if (!pipeline_layout.empty()) {
    // Megatron-Core's layout: the embedding in the first chunk, the loss (and the MTP depths, as dtsim places them)
    // in the last, every decoder layer once.
    const PipelineLayout pl = parse_pipeline_layout(pipeline_layout, ctx);
    const int chunks = pp * virtual_stages, last = chunks - 1;
    if (static_cast<int>(pl.layers.size()) != chunks)
      throw ConfigError(ctx + ": pipeline layout '" + pipeline_layout + "' has " + std::to_string(pl.layers.size()) +
                        " chunks but pp * virtual stages is " + std::to_string(chunks));
    if (pl.embedding_chunks != std::vector<int>{0})
      throw ConfigError(ctx + ": pipeline layout '" + pipeline_layout + "' must place 'E' once, in its first chunk");
    if (pl.loss_chunks != std::vector<int>{last})
      throw ConfigError(ctx + ": pipeline layout '" + pipeline_layout + "' must place 'L' once, in its last chunk");
    if (static_cast<int>(pl.mtp_chunks.size()) != model.mtp_layers ||
        std::any_of(pl.mtp_chunks.begin(), pl.mtp_chunks.end(), [&](int c) { return c != last; }))
      throw ConfigError(ctx + ": pipeline layout '" + pipeline_layout + "' must place one 'm' per MTP depth of '" +
                        model.name + "' (" + std::to_string(model.mtp_layers) + "), in its last chunk");
    if (layers_per_stage != pl.layers)
      throw ConfigError(ctx + ": pipeline layout '" + pipeline_layout +
                        "' and layers_per_stage disagree (give one of them)");
  }
  if (!layers_per_stage.empty()) {
    const int n = static_cast<int>(layers_per_stage.size());
    if (n != pp && n != pp * virtual_stages)
      throw ConfigError(
          ctx + ": layers_per_stage has " + std::to_string(layers_per_stage.size()) + " entries but pp is " +
          std::to_string(pp) +
          (virtual_stages > 1 ? " (pp * virtual stages is " + std::to_string(pp * virtual_stages) + ")" : ""));
    if (bidirectional() && n != pp)
      throw ConfigError(ctx + ": under dualpipe layers_per_stage gives the " + std::to_string(pp) +
                        " stages of one copy of the model, not " + std::to_string(n) + " entries");
    if (n != pipeline_chunks())
      throw ConfigError(ctx + ": with " + std::to_string(virtual_stages) +
                        " virtual stages, layers_per_stage must give all " + std::to_string(pp * virtual_stages) +
                        " model chunks");
    for (int l : layers_per_stage)
      if (l < 0) throw ConfigError(ctx + ": layers_per_stage entries must not be negative");
    // A chunk without decoder layers holds the embedding or the loss (Megatron-Core layouts such as "Et|...|mL"); the
    // inner chunks need layers.
    for (int k = 1; k + 1 < n; ++k)
      if (layers_per_stage[static_cast<std::size_t>(k)] == 0)
        throw ConfigError(ctx + ": layers_per_stage entry " + std::to_string(k) +
                          " is 0: only the first and last chunks may hold no decoder layers");
    const std::int64_t sum = std::accumulate(layers_per_stage.begin(), layers_per_stage.end(), std::int64_t{0});
    if (sum != model.num_layers)
      throw ConfigError(ctx + ": layers_per_stage sums to " + std::to_string(sum) + " but the model has " +
                        std::to_string(model.num_layers) + " layers");
  }
  if (!(dp_bucket_bytes >= 0) || !std::isfinite(dp_bucket_bytes))
    throw ConfigError(ctx + ": dp bucket size must be a positive finite number of bytes (or 0: the stack's default)");
  if (!stage_cut_atoms.empty()) validate_cuts(model);
}

void ParallelPlan::validate_cuts(const TransformerSpec& model) const {
  const std::string ctx = "plan";
  if (static_cast<int>(stage_cut_atoms.size()) != pp - 1)
    throw ConfigError(ctx + ": stage_cut_atoms has " + std::to_string(stage_cut_atoms.size()) + " entries for " +
                      std::to_string(pp - 1) + " stage boundaries (one per boundary: pp - 1)");
  for (int a : stage_cut_atoms)
    if (a < 0 || a >= kLayerAtoms)
      throw ConfigError(ctx + ": stage_cut_atoms entries must be in 0.." + std::to_string(kLayerAtoms - 1) + ", got " +
                        std::to_string(a));
  if (!has_stage_cuts()) return;
  std::string obstacle;
  if (model.moe.enabled()) obstacle = "mixture-of-experts layers";
  else if (model.mla.enabled()) obstacle = "multi-head latent attention";
  else if (model.parallel_block) obstacle = "parallel transformer blocks";
  else if (virtual_stages != 1) obstacle = "several model chunks per stage";
  else if (cp > 1) obstacle = "context parallelism";
  else if (precision != Precision::BF16) obstacle = "precision " + to_string(precision);
  else if (tp_comm_overlap) obstacle = "TP communication overlap";
  else if (has_stage_tp()) obstacle = "per-stage tp degrees";
  for (int s = 0; s < pp && obstacle.empty(); ++s)
    if (stage_strategy(s).tp_layout != TpLayout::D1)
      obstacle = "the " + to_string(stage_strategy(s).tp_layout) + " layout";
  if (!obstacle.empty())
    throw ConfigError(ctx + ": stage boundaries inside layers (stage_cut_atoms) do not support " + obstacle);
}

void ParallelPlan::validate_intra_layer(const TransformerSpec& model, const ClusterSpec& cluster) const {
  const std::string ctx = "plan";
  // 1-D splits the heads tp ways; 2-D/2.5-D/3-D split them q ways (the hidden columns) [seed-algorithms §2].
  const int head_split = tp_layout == TpLayout::D1 ? tp : std::max(1, tp_grid_side(tp_layout, tp, tp_depth));
  if (model.heads % head_split != 0)
    throw ConfigError(ctx + ": " + (tp_layout == TpLayout::D1 ? "tp " : "the grid side ") + std::to_string(head_split) +
                      " does not divide the " + std::to_string(model.heads) + " attention heads of '" + model.name +
                      "'");
  if (model.kv_heads % head_split != 0 && head_split % model.kv_heads != 0)
    throw ConfigError(ctx + ": " + std::to_string(head_split) + " head groups and kv_heads " +
                      std::to_string(model.kv_heads) + " must divide one another");
  if (model.ffn_hidden % tp != 0)
    throw ConfigError(ctx + ": tp " + std::to_string(tp) + " does not divide ffn_hidden " +
                      std::to_string(model.ffn_hidden));
  if (model.vocab % tp != 0)
    throw ConfigError(ctx + ": tp " + std::to_string(tp) + " does not divide vocab " + std::to_string(model.vocab));
  if (sequence_parallel && model.seq_len % tp != 0)
    throw ConfigError(ctx + ": sequence parallelism needs tp " + std::to_string(tp) + " to divide seq_len " +
                      std::to_string(model.seq_len));
  if (sequence_parallel && tp == 1) throw ConfigError(ctx + ": sequence parallelism needs tp > 1");
  if (model.hybrid()) {
    // Mamba-2, Gated DeltaNet, sliding-window and single-block layers are modelled with 1-D tensor parallelism and
    // with stage boundaries between layers; context parallelism as Megatron-Core's all-to-all CP for the Mamba and
    // Gated DeltaNet mixers (each CP rank takes heads / (tp cp): mamba_context_parallel.py, gdn.py), not for sliding
    // windows.
    auto refuse = [&](const std::string& what) {
      throw ConfigError(ctx + ": " + what + " is not modelled for the hybrid layers of '" + model.name +
                        "' (layer_pattern)");
    };
    if (cp > 1 && model.sliding_window > 0) refuse("context parallelism with sliding-window attention");
    if (cp > 1 && model.mamba.enabled()) {
      const int groups_tp = model.mamba.groups / tp;
      if (model.mamba.heads % (tp * cp) != 0 || (groups_tp > 0 && groups_tp % cp != 0 && cp % groups_tp != 0))
        throw ConfigError(ctx + ": context parallelism splits the " + std::to_string(model.mamba.heads) +
                          " Mamba heads over tp*cp = " + std::to_string(tp * cp) + " ranks and its " +
                          std::to_string(model.mamba.groups) +
                          " groups per TP rank evenly over the cp ranks (or repeats them), which it cannot here");
    }
    if (cp > 1 && model.linear.enabled() &&
        (model.linear.key_heads % (tp * cp) != 0 || model.linear.value_heads % (tp * cp) != 0))
      throw ConfigError(ctx + ": context parallelism splits the " + std::to_string(model.linear.key_heads) +
                        " key heads and " + std::to_string(model.linear.value_heads) +
                        " value heads of the linear attention over tp*cp = " + std::to_string(tp * cp) + " ranks");
    for (int s = 0; s < pp; ++s)
      if (stage_strategy(s).tp_layout != TpLayout::D1)
        refuse("the " + to_string(stage_strategy(s).tp_layout) + " layout");
    if (has_stage_cuts()) refuse("a stage boundary inside a layer");
    if (model.mamba.enabled() && (model.mamba.heads % tp != 0 || model.mamba.groups % tp != 0))
      throw ConfigError(ctx + ": tp " + std::to_string(tp) + " must divide the " + std::to_string(model.mamba.heads) +
                        " Mamba heads and " + std::to_string(model.mamba.groups) + " groups of '" + model.name + "'");
    if (model.linear.enabled() && (model.linear.key_heads % tp != 0 || model.linear.value_heads % tp != 0))
      throw ConfigError(ctx + ": tp " + std::to_string(tp) + " must divide the " +
                        std::to_string(model.linear.key_heads) + " key heads and " +
                        std::to_string(model.linear.value_heads) + " value heads of the linear attention of '" +
                        model.name + "'");
  }
  if (tp_layout != TpLayout::D2_5 && tp_depth != 1)
    throw ConfigError(ctx + ": tp_depth applies to the 2.5d layout only");
  if (tp_layout != TpLayout::D1) {
    const int q = tp_grid_side(tp_layout, tp, tp_depth);
    if (q == 0)
      throw ConfigError(ctx + ": tensor-parallel layout " + to_string(tp_layout) + " cannot arrange tp " +
                        std::to_string(tp) +
                        (tp_layout == TpLayout::D2_5 ? " with depth " + std::to_string(tp_depth) : "") +
                        " (2d: tp = q^2; 2.5d: tp = q^2 * depth; 3d: tp = q^3)");
    if (sequence_parallel)
      throw ConfigError(ctx +
                        ": sequence parallelism is part of the 1d layout (2d/2.5d/3d partition activations already)");
    if (model.hidden % q != 0 || model.ffn_hidden % q != 0)
      throw ConfigError(ctx + ": layout " + to_string(tp_layout) + " splits hidden " + std::to_string(model.hidden) +
                        " and ffn_hidden " + std::to_string(model.ffn_hidden) + " into " + std::to_string(q) +
                        " blocks: they must be divisible");
    const long tokens = static_cast<long>(micro_batch_size) * model.seq_len;
    const long rows = static_cast<long>(tp) / q;  // row blocks of a micro-batch: q (2-D), q d (2.5-D), q^2 (3-D)
    if (tokens % rows != 0)
      throw ConfigError(ctx + ": layout " + to_string(tp_layout) + " splits the " + std::to_string(tokens) +
                        " tokens of a micro-batch into " + std::to_string(rows) + " row blocks: not divisible");
    if (has_stage_replicas()) throw ConfigError(ctx + ": stage replication is only supported with the 1d layout");
  }
  if (zero_stage < 0 || zero_stage > 3)
    throw ConfigError(ctx + ": zero stage " + std::to_string(zero_stage) + " is not supported (known: 0, 1, 2, 3)");
  validate_precision_overlap(model, cluster);
}

void ParallelPlan::validate_precision_overlap(const TransformerSpec& model, const ClusterSpec& cluster) const {
  const std::string ctx = "plan";
  if (is_fp8(precision) && !(cluster.gpu.peak_fp8_flops > 0))
    throw ConfigError(ctx + ": precision " + to_string(precision) + " needs FP8 tensor cores, and gpu '" +
                      cluster.gpu.name + "' has none (peak_fp8_flops is 0)");
  if (precision == Precision::NVFP4 && !(cluster.gpu.peak_fp4_flops > 0))
    throw ConfigError(ctx + ": precision nvfp4 needs FP4 tensor cores, and gpu '" + cluster.gpu.name +
                      "' has none (peak_fp4_flops is 0)");
  if ((precision == Precision::MXFP8 || precision == Precision::NVFP4) && !(cluster.gpu.peak_fp4_flops > 0))
    throw ConfigError(ctx + ": precision " + to_string(precision) + " is a Blackwell block-scaled format; gpu '" +
                      cluster.gpu.name + "' has no block-scaled tensor cores");
  if (precision != Precision::BF16 && model.dtype == DType::FP32)
    throw ConfigError(ctx + ": low-precision GEMMs (" + to_string(precision) +
                      ") need a bf16 or fp16 model (the model's dtype is fp32)");
  if (tp_comm_overlap) {
    if (tp < 2) throw ConfigError(ctx + ": tp-comm-overlap needs tp >= 2");
    if (!sequence_parallel)
      throw ConfigError(ctx +
                        ": tp-comm-overlap needs sequence parallelism (Megatron-Core and async TP overlap the "
                        "all-gather and reduce-scatter of sequence-parallel layers)");
    if (tp_layout != TpLayout::D1) throw ConfigError(ctx + ": tp-comm-overlap needs the 1d tensor-parallel layout");
  }
  if (tp_overlap_chunks < 0 || tp_overlap_chunks > 64)
    throw ConfigError(ctx + ": tp overlap chunks must be between 0 (= tp) and 64");
  if (overlap_param_gather && zero_stage != 1 && zero_stage != 2)
    throw ConfigError(ctx + ": overlap-param-gather needs the distributed optimizer (zero stage 1 or 2)");
  if (pp_comm_overlap && pp == 1)
    throw ConfigError(ctx + ": pp-comm-overlap needs pipeline parallelism (pp > 1): there are no pipeline exchanges");
  if (fsdp_prefetch < 0 || fsdp_prefetch > 8) throw ConfigError(ctx + ": fsdp prefetch must be between 0 and 8");
  if (megatron_fsdp) {
    bool sharded = zero_stage >= 2;
    for (const auto& st : stage_strategies) sharded = sharded || st.zero_stage >= 2;
    if (!sharded)
      throw ConfigError(ctx +
                        ": megatron-fsdp needs zero stage 2 (optim_grads) or 3 (optim_grads_params); at 0 and 1 "
                        "Megatron-FSDP runs as DDP and the distributed optimizer (no --megatron-fsdp)");
    if (overlap_param_gather)
      throw ConfigError(ctx +
                        ": megatron-fsdp gathers parameters itself (overlap-param-gather is the distributed "
                        "optimizer's)");
    if (overlap_moe_comm && fsdp_double_buffer)
      throw ConfigError(ctx +
                        ": overlap-moe-comm with megatron-fsdp does not support fsdp-double-buffer "
                        "(Megatron-Core mcore_fsdp_adapter.py asserts it)");
  }
  if (fsdp_double_buffer && !megatron_fsdp)
    throw ConfigError(ctx + ": fsdp-double-buffer is Megatron-FSDP's option (needs megatron-fsdp)");
  if (!stack.empty()) (void)stack_profile(stack);  // ConfigError naming the known stacks
}

void ParallelPlan::validate_options_used(const TransformerSpec& model) const {
  const std::string ctx = "plan";
  auto given = [&](const char* key) {
    return std::find(given_options.begin(), given_options.end(), key) != given_options.end();
  };
  auto no_effect = [&](const char* key, const std::string& why) {
    std::string flag = key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    throw ConfigError(ctx + ": " + key + " (--" + flag + ") has no effect " + why);
  };
  if (given("tp_overlap_chunks") && !tp_comm_overlap)
    no_effect("tp_overlap_chunks", "without tp_comm_overlap (--tp-comm-overlap)");
  if (given("fsdp_prefetch") && megatron_fsdp)
    no_effect("fsdp_prefetch", "with megatron_fsdp (--megatron-fsdp prefetches the next 500 M parameters' units)");
  if (given("fsdp_prefetch") && zero_stage != 3)
    no_effect("fsdp_prefetch",
              "unless zero stage is 3 (ZeRO-3/FSDP; this plan has " + std::to_string(zero_stage) + ")");
  if (fsdp_float8_all_gather && (zero_stage != 3 || megatron_fsdp))
    no_effect("fsdp_float8_all_gather", "unless zero stage is 3 with FSDP2 (this plan has zero stage " +
                                            std::to_string(zero_stage) + (megatron_fsdp ? ", megatron_fsdp" : "") +
                                            ")");
  if (fsdp_float8_all_gather && precision != Precision::FP8_CURRENT && precision != Precision::FP8_DELAYED)
    no_effect("fsdp_float8_all_gather",
              "without per-tensor FP8 linears (torchao's tensorwise scaling: --precision "
              "fp8-current or fp8; this plan has " +
                  to_string(precision) + ")");
  if (const std::string why = not_dense_blocks(model); fsdp_float8_all_gather && !why.empty())
    no_effect("fsdp_float8_all_gather", "on '" + model.name + "': modelled for dense attention + MLP layers only " +
                                            "(torchao converts their nn.Linear weights; this model has " + why + ")");
  if (given("cp_kind") && cp == 1) no_effect("cp_kind", "with cp 1 (no context parallelism)");
  if (offload_activation_layers > 0 && pp > 0 && virtual_stages > 0) {
    if (has_stage_cuts())
      throw ConfigError(ctx + ": activation offload cannot be combined with stage boundaries inside layers");
    const auto layers = chunk_layers(model.num_layers);
    const int fewest = *std::min_element(layers.begin(), layers.end());
    if (offload_activation_layers >= fewest)
      throw ConfigError(ctx + ": activation offload of " + std::to_string(offload_activation_layers) +
                        " layers per model chunk must be fewer than the layers of every chunk (the smallest has " +
                        std::to_string(fewest) + "; Megatron-Core keeps the last layer's activations on the GPU)");
  }
  if (recompute_num_layers > 0 && pp > 0 && virtual_stages > 0) {
    if (recompute != Recompute::FULL)
      throw ConfigError(ctx + ": recompute num layers (Megatron's block method) needs recompute full (this plan has " +
                        to_string(recompute) + ")");
    if (has_stage_strategies())
      throw ConfigError(ctx +
                        ": recompute num layers cannot be combined with per-stage strategies (give each stage "
                        "its recompute instead)");
    if (has_stage_cuts())
      throw ConfigError(ctx + ": recompute num layers cannot be combined with stage boundaries inside layers");
    const auto layers = chunk_layers(model.num_layers);
    const int most = *std::max_element(layers.begin(), layers.end());
    if (recompute_num_layers >= most)
      throw ConfigError(ctx + ": recompute num layers " + std::to_string(recompute_num_layers) +
                        " recomputes every layer of every model chunk (the largest has " + std::to_string(most) +
                        "): leave it out for recompute full of every layer");
  }
  if (given("overlap_optimizer_offload") && optimizer_offload_fraction <= 0)
    no_effect("overlap_optimizer_offload", "without optimizer_offload_fraction (--optimizer-offload)");
  if (recompute_modules != 0) {
    bool selective = recompute == Recompute::SELECTIVE;
    for (const auto& st : stage_strategies) selective = selective || st.recompute == Recompute::SELECTIVE;
    if (!selective)
      throw ConfigError(ctx + ": recompute_modules (--recompute-modules " +
                        recompute_modules_to_string(recompute_modules) + ") needs recompute selective (this plan has " +
                        to_string(recompute) + ")");
    auto refuse = [&](unsigned bit, const std::string& why) {
      if (recompute_modules & bit)
        throw ConfigError(ctx + ": recompute module " + recompute_modules_to_string(bit) + " has no effect " + why);
    };
    if (has_stage_cuts())
      throw ConfigError(ctx +
                        ": recompute_modules cannot be combined with stage boundaries inside layers "
                        "(stage_cut_atoms)");
    if (!model.mla.enabled())
      refuse(RECOMPUTE_MLA_UP_PROJ, "without multi-head latent attention ('" + model.name + "')");
    if (!model.moe.enabled()) {
      refuse(RECOMPUTE_MOE, "on a dense model ('" + model.name + "' has no experts)");
      refuse(RECOMPUTE_MOE_ACT, "on a dense model ('" + model.name + "' has no experts)");
    }
    if (model.moe.shared_ffn_hidden <= 0)
      refuse(RECOMPUTE_SHARED_EXPERTS, "without shared experts ('" + model.name + "' has none)");
    if (recompute_modules & RECOMPUTE_OP_SAC) {
      // torchtitan's op-level policy is modelled on its dense Llama blocks (strategies/transformer_costs.cpp).
      if (recompute_modules != RECOMPUTE_OP_SAC)
        throw ConfigError(ctx +
                          ": recompute module op_sac (torchtitan's op-level policy) cannot be combined with "
                          "Megatron-Core's modules (" +
                          recompute_modules_to_string(recompute_modules & ~RECOMPUTE_OP_SAC) + ")");
      const std::string why = [&]() -> std::string {
        if (std::string w = not_dense_blocks(model); !w.empty()) return w;
        if (model.parallel_block) return "parallel blocks";
        if (model.attention != AttentionKind::FLASH) return "unfused attention (op_sac keeps SDPA's output)";
        if (cp > 1) return "context parallelism";
        if (tp > 1 && !sequence_parallel) return "tensor parallelism without sequence parallelism";
        return "";
      }();
      if (!why.empty())
        throw ConfigError(ctx + ": recompute module op_sac is modelled for dense attention + MLP blocks only ('" +
                          model.name + "' with this plan has " + why + ")");
    }
  }
  if (!model.moe.enabled()) {
    for (const char* key : {"etp", "dispatcher"})
      if (given(key)) no_effect(key, "on a dense model ('" + model.name + "' has no experts)");
    if (!moe_grouped_gemm)
      throw ConfigError(ctx + ": moe_grouped_gemm false (--sequential-experts) has no effect on a dense model ('" +
                        model.name + "' has no experts)");
  }
}

void ParallelPlan::validate_moe_cp(const TransformerSpec& model) const {
  const std::string ctx = "plan";
  if (tp_layout != TpLayout::D1 && tp > 1 &&
      (model.moe.enabled() || model.mla.enabled() || model.head_dim_override > 0 ||
       model.attention == AttentionKind::FLASH || model.parallel_block))
    throw ConfigError(ctx + ": the " + to_string(tp_layout) +
                      " tensor-parallel layout models GPT layers with unfused attention only ('" + model.name +
                      "' has MoE, MLA, an explicit head_dim, flash attention or parallel blocks)");
  if (cp > 1) {
    if (model.attention != AttentionKind::FLASH)
      throw ConfigError(ctx +
                        ": context parallelism needs flash attention (--attention flash; Megatron-Core and "
                        "torchtitan run CP with fused attention kernels only)");
    if (model.seq_len % (cp_kind == CpKind::RING ? 2 * cp : cp) != 0)
      throw ConfigError(ctx + ": cp " + std::to_string(cp) + " must divide the sequence of " +
                        std::to_string(model.seq_len) + " tokens" +
                        (cp_kind == CpKind::RING ? " into 2*cp = " + std::to_string(2 * cp) +
                                                       " chunks (causal load balancing of ring attention)"
                                                 : ""));
    if (sequence_parallel && (model.seq_len / cp) % tp != 0)
      throw ConfigError(ctx + ": sequence parallelism needs tp " + std::to_string(tp) +
                        " to divide the per-cp-rank sequence of " + std::to_string(model.seq_len / cp));
    if (cp_kind == CpKind::ALL_TO_ALL &&
        (model.heads % (tp * cp) != 0 || (model.kv_heads % (tp * cp) != 0 && (tp * cp) % model.kv_heads != 0)))
      throw ConfigError(ctx + ": a2a context parallelism splits the heads tp*cp = " + std::to_string(tp * cp) +
                        " ways: it must divide the " + std::to_string(model.heads) +
                        " heads and divide or be a multiple of the " + std::to_string(model.kv_heads) + " kv heads");
    if (has_stage_replicas()) throw ConfigError(ctx + ": context parallelism is not supported with stage replication");
    if (has_stage_tp()) throw ConfigError(ctx + ": context parallelism is not supported with per-stage tp degrees");
    if (tp_layout != TpLayout::D1) throw ConfigError(ctx + ": context parallelism needs the 1d tensor-parallel layout");
  }
  if (!model.moe.enabled()) {
    if (ep > 1)
      throw ConfigError(ctx + ": ep " + std::to_string(ep) + " needs a mixture-of-experts model ('" + model.name +
                        "' is dense)");
    if (etp > 0 && etp != tp)
      throw ConfigError(ctx + ": etp needs a mixture-of-experts model ('" + model.name + "' is dense)");
    if (!routing.balanced() || routing.capacity_factor > 0)
      throw ConfigError(ctx + ": routing applies to mixture-of-experts models only ('" + model.name + "' is dense)");
    return;
  }
  if (has_stage_tp())
    throw ConfigError(ctx + ": per-stage tp degrees are not supported for mixture-of-experts models ('" + model.name +
                      "')");
  if (tp > 1 && !sequence_parallel)
    throw ConfigError(ctx +
                      ": a mixture-of-experts model with tp > 1 needs sequence parallelism (--sequence-parallel), "
                      "as Megatron-Core requires");
  if (model.moe.experts % ep != 0)
    throw ConfigError(ctx + ": ep " + std::to_string(ep) + " must divide the " + std::to_string(model.moe.experts) +
                      " experts of '" + model.name + "'");
  const std::int64_t block = static_cast<std::int64_t>(tp) * cp * dp;
  if (block % (static_cast<std::int64_t>(expert_tp()) * ep) != 0)
    throw ConfigError(ctx + ": etp*ep = " + std::to_string(expert_tp()) + "*" + std::to_string(ep) +
                      " must divide tp*cp*dp = " + std::to_string(block) +
                      " (expert groups are carved from the data- and context-parallel ranks of each stage)");
  if (model.moe.expert_ffn_hidden % expert_tp() != 0)
    throw ConfigError(ctx + ": etp " + std::to_string(expert_tp()) + " does not divide expert_ffn_hidden " +
                      std::to_string(model.moe.expert_ffn_hidden));
  if (model.moe.shared_ffn_hidden % tp != 0)
    throw ConfigError(ctx + ": tp " + std::to_string(tp) + " does not divide the shared experts' width " +
                      std::to_string(model.moe.shared_ffn_hidden));
  if (!routing.loads.empty() && static_cast<int>(routing.loads.size()) != model.moe.experts)
    throw ConfigError(ctx + ": routing gives loads for " + std::to_string(routing.loads.size()) + " experts but '" +
                      model.name + "' has " + std::to_string(model.moe.experts));
  if (has_stage_replicas()) throw ConfigError(ctx + ": expert parallelism is not supported with stage replication");
  if (tp_layout != TpLayout::D1 && (ep > 1 || etp > 0))
    throw ConfigError(ctx + ": expert parallelism needs the 1d tensor-parallel layout");
}

namespace {
// Expands a layout's repetitions: X*N and (...)*N, N a positive count (at most 10,000 characters in all).
std::string expand_layout(const std::string& s, std::size_t& i, const std::string& ctx, int depth) {
  if (depth > 8) throw ConfigError(ctx + ": pipeline layout nests groups more than 8 deep");
  std::string out;
  while (i < s.size() && s[i] != ')') {
    std::string item;
    if (s[i] == '(') {
      ++i;
      item = expand_layout(s, i, ctx, depth + 1);
      if (i >= s.size() || s[i] != ')') throw ConfigError(ctx + ": pipeline layout '" + s + "' has an unclosed '('");
      ++i;
    } else if (std::string("EtmL|").find(s[i]) != std::string::npos) {
      item = std::string(1, s[i++]);
    } else {
      throw ConfigError(ctx + ": pipeline layout '" + s + "' has '" + std::string(1, s[i]) +
                        "' (known: E embedding, t decoder layer, m MTP depth, L loss, | next chunk, *N repeat, "
                        "(...) group)");
    }
    if (i < s.size() && s[i] == '*') {
      ++i;
      std::size_t j = i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      if (j == i || j - i > 5) throw ConfigError(ctx + ": pipeline layout '" + s + "' has a '*' without a count");
      const int n = std::stoi(s.substr(i, j - i));
      i = j;
      std::string rep;
      for (int k = 0; k < n; ++k) rep += item;
      item = rep;
    }
    out += item;
    if (out.size() > 10000) throw ConfigError(ctx + ": pipeline layout '" + s + "' expands beyond 10,000 entries");
  }
  return out;
}
}  // namespace

PipelineLayout parse_pipeline_layout(const std::string& layout, const std::string& ctx) {
  std::size_t i = 0;
  const std::string flat = expand_layout(layout, i, ctx, 0);
  if (i != layout.size()) throw ConfigError(ctx + ": pipeline layout '" + layout + "' has an unmatched ')'");
  PipelineLayout out;
  out.layers.push_back(0);
  for (char c : flat) {
    const int chunk = static_cast<int>(out.layers.size()) - 1;
    if (c == '|') out.layers.push_back(0);
    else if (c == 't') ++out.layers.back();
    else if (c == 'E') out.embedding_chunks.push_back(chunk);
    else if (c == 'L') out.loss_chunks.push_back(chunk);
    else out.mtp_chunks.push_back(chunk);
  }
  return out;
}

nlohmann::json to_json(const ParallelPlan& p, int num_layers) {
  nlohmann::json j = {{"schema_version", 1},
                      {"tp", p.tp},
                      {"pp", p.pp},
                      {"dp", p.dp},
                      {"micro_batch_size", p.micro_batch_size},
                      {"global_batch_size", p.global_batch_size},
                      {"num_microbatches", p.num_microbatches()},
                      {"layers_per_stage",
                       [&] {
                         auto chunks = p.chunk_layers(num_layers);
                         if (p.bidirectional()) chunks.resize(static_cast<std::size_t>(p.pp));  // one copy's stages
                         return p.virtual_stages > 1 ? chunks : p.stage_layers(num_layers);
                       }()},
                      {"schedule", p.schedule == Schedule::CUSTOM ? std::string("custom") : p.schedule_name()},
                      {"virtual_stages", p.virtual_stages},
                      {"zero_stage", p.zero_stage},
                      {"recompute", to_string(p.recompute)},
                      {"sequence_parallel", p.sequence_parallel},
                      {"rank_order", rank_order_string(p.rank_order)},
                      {"dp_overlap", p.dp_overlap},
                      {"dp_bucket_bytes", p.dp_bucket_bytes}};
  if (p.optimizer_offload_fraction > 0) j["optimizer_offload_fraction"] = p.optimizer_offload_fraction;
  if (p.overlap_optimizer_offload) j["overlap_optimizer_offload"] = true;
  if (p.offload_activation_layers > 0) j["offload_activation_layers"] = p.offload_activation_layers;
  if (p.recompute_num_layers > 0) j["recompute_num_layers"] = p.recompute_num_layers;
  if (p.recompute_modules != 0) {
    std::vector<std::string> names;
    for (int i = 0; i < kRecomputeModules; ++i)
      if (p.recompute_modules & (1U << i)) names.emplace_back(kRecomputeModuleNames[i]);
    j["recompute_modules"] = names;
  }
  if (p.has_stage_replicas()) j["stage_replicas"] = p.stage_replicas;
  if (p.has_stage_cuts()) j["stage_cut_atoms"] = p.stage_cut_atoms;
  if (!p.device_map.empty()) j["device_map"] = p.device_map;
  if (p.cp > 1) {
    j["cp"] = p.cp;
    j["cp_kind"] = to_string(p.cp_kind);
  }
  if (p.ep > 1 || p.etp > 0) {
    j["ep"] = p.ep;
    j["etp"] = p.expert_tp();
    j["dispatcher"] = to_string(p.dispatcher);
  }
  if (!p.routing.balanced() || p.routing.capacity_factor > 0) j["routing"] = to_string(p.routing);
  if (p.fp32_grads) j["fp32_grads"] = true;
  if (p.precision != Precision::BF16) j["precision"] = to_string(p.precision);
  if (p.tp_comm_overlap) j["tp_comm_overlap"] = true;
  if (p.tp_overlap_chunks > 0) j["tp_overlap_chunks"] = p.tp_overlap_chunks;
  if (p.overlap_param_gather) j["overlap_param_gather"] = true;
  if (p.pp_comm_overlap) j["pp_comm_overlap"] = true;
  if (p.overlap_moe_comm) j["overlap_moe_comm"] = true;
  if (!p.moe_grouped_gemm) j["moe_grouped_gemm"] = false;
  if (p.fsdp_prefetch != 1) j["fsdp_prefetch"] = p.fsdp_prefetch;
  if (p.fsdp_float8_all_gather) j["fsdp_float8_all_gather"] = true;
  if (p.torch_compile) j["torch_compile"] = true;
  if (p.megatron_fsdp) j["megatron_fsdp"] = true;
  if (p.fsdp_double_buffer) j["fsdp_double_buffer"] = true;
  if (p.cuda_graphs) j["cuda_graphs"] = true;
  if (!p.stack.empty()) j["stack"] = p.stack;
  if (p.tp_layout != TpLayout::D1) j["tp_layout"] = to_string(p.tp_layout);
  if (p.tp_layout == TpLayout::D2_5) j["tp_depth"] = p.tp_depth;
  if (p.has_stage_strategies()) {
    nlohmann::json a = nlohmann::json::array();
    for (const StageStrategy& st : p.stage_strategies) {
      nlohmann::json o = {{"zero_stage", st.zero_stage},
                          {"recompute", to_string(st.recompute)},
                          {"sequence_parallel", st.sequence_parallel},
                          {"tp_layout", to_string(st.tp_layout)}};
      if (st.tp_layout == TpLayout::D2_5) o["tp_depth"] = st.tp_depth;
      if (st.tp > 0 && st.tp != p.tp) o["tp"] = st.tp;
      a.push_back(std::move(o));
    }
    j["stage_strategies"] = std::move(a);
  }
  if (p.schedule == Schedule::CUSTOM) {
    j["custom_order"] = custom_to_json(p.custom_order);
    if (!p.custom_source.empty()) j["custom_source"] = p.custom_source;
  }
  return j;
}

ParallelPlan plan_from_json(const nlohmann::json& j, const std::string& ctx) {
  json_util::check_schema_version(j, ctx, 1);
  json_util::reject_unknown(j, ctx,
                            {"schema_version",
                             "tp",
                             "pp",
                             "dp",
                             "micro_batch_size",
                             "global_batch_size",
                             "num_microbatches",
                             "layers_per_stage",
                             "pipeline_layout",
                             "schedule",
                             "virtual_stages",
                             "custom_order",
                             "custom_source",
                             "zero_stage",
                             "recompute",
                             "recompute_modules",
                             "optimizer_offload_fraction",
                             "overlap_optimizer_offload",
                             "offload_activation_layers",
                             "recompute_num_layers",
                             "sequence_parallel",
                             "rank_order",
                             "dp_overlap",
                             "dp_bucket_bytes",
                             "stage_replicas",
                             "stage_cut_atoms",
                             "device_map",
                             "tp_layout",
                             "tp_depth",
                             "cp",
                             "cp_kind",
                             "ep",
                             "etp",
                             "dispatcher",
                             "routing",
                             "fp32_grads",
                             "precision",
                             "tp_comm_overlap",
                             "tp_overlap_chunks",
                             "overlap_param_gather",
                             "pp_comm_overlap",
                             "overlap_moe_comm",
                             "moe_grouped_gemm",
                             "fsdp_prefetch",
                             "fsdp_float8_all_gather",
                             "torch_compile",
                             "megatron_fsdp",
                             "fsdp_double_buffer",
                             "cuda_graphs",
                             "stage_strategies",
                             "stack"});
  ParallelPlan p;
  p.tp = get_or<int>(j, ctx, "tp", 1);
  p.pp = get_or<int>(j, ctx, "pp", 1);
  p.dp = get_or<int>(j, ctx, "dp", 1);
  p.cp = get_or<int>(j, ctx, "cp", 1);
  p.cp_kind = cp_kind_from_string(get_or<std::string>(j, ctx, "cp_kind", "ring"), ctx);
  p.ep = get_or<int>(j, ctx, "ep", 1);
  p.etp = get_or<int>(j, ctx, "etp", 0);
  p.dispatcher = dispatcher_from_string(get_or<std::string>(j, ctx, "dispatcher", "alltoall"), ctx);
  p.routing = routing_from_string(get_or<std::string>(j, ctx, "routing", "balanced"), ctx);
  p.micro_batch_size = get<int>(j, ctx, "micro_batch_size");
  p.global_batch_size = get<int>(j, ctx, "global_batch_size");
  p.layers_per_stage = get_or<std::vector<int>>(j, ctx, "layers_per_stage", {});
  p.pipeline_layout = get_or<std::string>(j, ctx, "pipeline_layout", "");
  if (!p.pipeline_layout.empty() && p.layers_per_stage.empty())
    p.layers_per_stage = parse_pipeline_layout(p.pipeline_layout, ctx).layers;
  p.stage_replicas = get_or<std::vector<int>>(j, ctx, "stage_replicas", {});
  p.stage_cut_atoms = get_or<std::vector<int>>(j, ctx, "stage_cut_atoms", {});
  p.device_map = get_or<std::vector<int>>(j, ctx, "device_map", {});
  const std::string sched = get_or<std::string>(j, ctx, "schedule", "1f1b");
  if (sched == "custom") {
    p.schedule = Schedule::CUSTOM;
    p.custom_order = custom_from_json(get<nlohmann::json>(j, ctx, "custom_order"), ctx + ": custom_order");
    p.custom_source = get_or<std::string>(j, ctx, "custom_source", "");
    p.virtual_stages = get_or<int>(j, ctx, "virtual_stages", 1);
  } else {
    set_schedule(p, sched, ctx);
    if (j.contains("virtual_stages") && get<int>(j, ctx, "virtual_stages") != p.virtual_stages)
      throw ConfigError(ctx + ": virtual_stages " + std::to_string(get<int>(j, ctx, "virtual_stages")) +
                        " disagrees with schedule '" + sched + "'");
  }
  p.zero_stage = get_or<int>(j, ctx, "zero_stage", 0);
  p.fp32_grads = get_or<bool>(j, ctx, "fp32_grads", false);
  p.precision = precision_from_string(get_or<std::string>(j, ctx, "precision", "bf16"), ctx);
  p.tp_comm_overlap = get_or<bool>(j, ctx, "tp_comm_overlap", false);
  p.tp_overlap_chunks = get_or<int>(j, ctx, "tp_overlap_chunks", 0);
  p.overlap_param_gather = get_or<bool>(j, ctx, "overlap_param_gather", false);
  p.pp_comm_overlap = get_or<bool>(j, ctx, "pp_comm_overlap", false);
  p.overlap_moe_comm = get_or<bool>(j, ctx, "overlap_moe_comm", false);
  p.moe_grouped_gemm = get_or<bool>(j, ctx, "moe_grouped_gemm", true);
  p.fsdp_prefetch = get_or<int>(j, ctx, "fsdp_prefetch", 1);
  p.fsdp_float8_all_gather = get_or<bool>(j, ctx, "fsdp_float8_all_gather", false);
  p.torch_compile = get_or<bool>(j, ctx, "torch_compile", false);
  p.megatron_fsdp = get_or<bool>(j, ctx, "megatron_fsdp", false);
  p.fsdp_double_buffer = get_or<bool>(j, ctx, "fsdp_double_buffer", false);
  p.cuda_graphs = get_or<bool>(j, ctx, "cuda_graphs", false);
  // Options that act only with others: recorded when not at their default (a plan dtsim wrote reads back).
  if (p.tp_overlap_chunks != 0) p.given_options.emplace_back("tp_overlap_chunks");
  if (p.fsdp_prefetch != 1) p.given_options.emplace_back("fsdp_prefetch");
  if (p.cp_kind != CpKind::RING) p.given_options.emplace_back("cp_kind");
  if (p.dispatcher != Dispatcher::ALL_TO_ALL) p.given_options.emplace_back("dispatcher");
  if (p.etp != 0) p.given_options.emplace_back("etp");
  p.stack = get_or<std::string>(j, ctx, "stack", "");
  p.recompute = recompute_from_string(get_or<std::string>(j, ctx, "recompute", "none"), ctx);
  p.optimizer_offload_fraction = get_or<double>(j, ctx, "optimizer_offload_fraction", 0.0);
  p.overlap_optimizer_offload = get_or<bool>(j, ctx, "overlap_optimizer_offload", false);
  p.offload_activation_layers = get_or<int>(j, ctx, "offload_activation_layers", 0);
  p.recompute_num_layers = get_or<int>(j, ctx, "recompute_num_layers", 0);
  if (p.overlap_optimizer_offload) p.given_options.emplace_back("overlap_optimizer_offload");
  if (j.contains("recompute_modules")) {
    const auto names = get<std::vector<std::string>>(j, ctx, "recompute_modules");
    std::string list;
    for (const auto& n : names) {
      if (!list.empty()) list += ',';
      list += n;
    }
    if (names.empty()) throw ConfigError(ctx + ": recompute_modules is empty (leave it out for none)");
    p.recompute_modules = recompute_modules_from_string(list, ctx);
  }
  p.sequence_parallel = get_or<bool>(j, ctx, "sequence_parallel", false);
  p.tp_layout = tp_layout_from_string(get_or<std::string>(j, ctx, "tp_layout", "1d"), ctx);
  p.tp_depth = get_or<int>(j, ctx, "tp_depth", 1);
  p.rank_order = rank_order_from_string(get_or<std::string>(j, ctx, "rank_order", "tp,dp,pp"), ctx);
  p.dp_overlap = get_or<bool>(j, ctx, "dp_overlap", true);
  p.dp_bucket_bytes = get_or<double>(j, ctx, "dp_bucket_bytes", p.dp_bucket_bytes);
  if (j.contains("stage_strategies")) {
    const auto& a = get<nlohmann::json>(j, ctx, "stage_strategies");
    if (!a.is_array()) throw FormatError(ctx + ": stage_strategies must be an array with one object per stage");
    for (std::size_t s = 0; s < a.size(); ++s) {
      const std::string sctx = ctx + ": stage_strategies[" + std::to_string(s) + "]";
      const auto& o = a[s];
      if (!o.is_object()) throw FormatError(sctx + " must be an object");
      json_util::reject_unknown(o, sctx,
                                {"tp", "tp_layout", "tp_depth", "sequence_parallel", "zero_stage", "recompute"});
      // Unset fields are the plan's own (a tp equal to the plan's is stored as unset).
      StageStrategy st;
      if (o.contains("tp")) {
        st.tp = get<int>(o, sctx, "tp");
        if (st.tp <= 0) throw ConfigError(sctx + ": tp must be positive, got " + std::to_string(st.tp));
        if (st.tp == p.tp) st.tp = 0;
      }
      st.tp_layout =
          o.contains("tp_layout") ? tp_layout_from_string(get<std::string>(o, sctx, "tp_layout"), sctx) : p.tp_layout;
      st.tp_depth = get_or<int>(o, sctx, "tp_depth", st.tp_layout == p.tp_layout ? p.tp_depth : 1);
      st.sequence_parallel = get_or<bool>(o, sctx, "sequence_parallel", p.sequence_parallel);
      st.zero_stage = get_or<int>(o, sctx, "zero_stage", p.zero_stage);
      st.recompute =
          o.contains("recompute") ? recompute_from_string(get<std::string>(o, sctx, "recompute"), sctx) : p.recompute;
      p.stage_strategies.push_back(st);
    }
  }
  if (j.contains("num_microbatches") && p.micro_batch_size > 0 && p.dp > 0) {
    int m = get<int>(j, ctx, "num_microbatches");
    const std::int64_t derived = p.global_batch_size / (static_cast<std::int64_t>(p.micro_batch_size) * p.dp);
    if (m != derived)
      throw ConfigError(ctx + ": num_microbatches " + std::to_string(m) +
                        " disagrees with global_batch_size / (micro_batch_size * dp) = " + std::to_string(derived));
  }
  return p;
}

ParallelPlan load_plan(const std::string& path) {
  return plan_from_json(json_util::read_file(path), "plan file '" + path + "'");
}

}  // namespace dtsim
