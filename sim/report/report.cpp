#include "sim/report/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>

#include "sim/model/sort_runs.hpp"
#include "sim/report/trace_render.hpp"
#include "strategies/transformer_costs.hpp"
#include "traces/accuracy_bands.hpp"
#include "traces/stack_profile.hpp"
#include "traces/text.hpp"
#include "traces/units.hpp"

namespace dtsim::sim {

namespace {

/// The power-capping mechanism as the run applied it (strategies/transformer_costs.hpp at_tensor_share): the layers'
/// tensor-core share of kernel time and the sustained ratio it holds, beside the calibration's full-load one.
nlohmann::json sustained_clock_json(const Inputs& in, const Calibration& cal) {
  if (cal.sustained_tensor_ratio >= 1) return {{"full_load_ratio", 1.0}, {"applied_ratio", 1.0}};
  const double share = cost::tensor_time_share(*in.model, in.cluster->gpu, cal);
  return {{"full_load_ratio", cal.sustained_tensor_ratio},
          {"tensor_share", share},
          {"applied_ratio", cost::sustained_ratio_at_share(cal.sustained_tensor_ratio, share)}};
}

/// A run's accuracy band: the calibration's own (fitted to runs of its cluster at the run's scale) if it has one,
/// else the shipped band of the run's class (GPU, stack, one node or several), if any.
struct RunBand {
  AccuracyBand band;
  bool own = false;  ///< from the calibration's fit to measured runs
};
std::optional<RunBand> run_band(const Inputs& in) {
  const bool multi_node = in.plan->world_size() > in.cluster->gpus_per_node;
  if (in.calibration)
    for (const auto& b : in.calibration->accuracy_bands)
      if (b.key == (multi_node ? "multi-node" : "1-node")) return RunBand{b, true};
  if (auto b = accuracy_band(in.cluster->gpu.name, in.plan->stack, multi_node)) return RunBand{*b, false};
  return std::nullopt;
}

nlohmann::json interval_json(const Inputs& in, double t) {
  const auto rb = run_band(in);
  if (!rb) return nullptr;
  const auto& b = rb->band;
  return {{"low", t * std::exp(b.q05)},
          {"high", t * std::exp(b.q95)},
          {"coverage", 0.9},
          {"class", b.key},
          {"rows", b.rows},
          {"sources", rb->own ? nlohmann::json(nullptr) : nlohmann::json(b.sources)},
          {"source", rb->own ? "the calibration's fit to measured runs: " + in.calibration->accuracy_method
                             : "leave-one-source-out errors of the development sources (traces/accuracy/bands.json)"}};
}
using Interval = std::pair<double, double>;

std::vector<Interval> merge(std::vector<Interval> v) {
  sort_runs(v);  // a rank's intervals come in task order: time order on each stream
  std::vector<Interval> out;
  for (const auto& iv : v) {
    if (iv.second <= iv.first) continue;
    if (!out.empty() && iv.first <= out.back().second) out.back().second = std::max(out.back().second, iv.second);
    else out.push_back(iv);
  }
  return out;
}

// Length of the intersection of [a, b) with a merged, sorted interval list.
double overlap(const std::vector<Interval>& merged, double a, double b) {
  double total = 0;
  auto it = std::lower_bound(merged.begin(), merged.end(), Interval{a, a},
                             [](const Interval& x, const Interval& y) { return x.second < y.first; });
  for (; it != merged.end() && it->first < b; ++it)
    total += std::max(0.0, std::min(b, it->second) - std::max(a, it->first));
  return total;
}

std::string gb(double bytes) { return format_number("%.2f", bytes / units::kGB) + " GB"; }
}  // namespace

const char* comm_kind_name(int kind) {
  static const char* const names[kNumCommKinds] = {"tp", "cp", "ep", "dp", "pp"};
  return kind >= 0 && kind < kNumCommKinds ? names[kind] : "?";
}

int comm_kind_of(const std::string& n) {
  if (n.find("attention-ring") != std::string::npos || n.find("attention-cp") != std::string::npos) return 1;
  if (n.find("moe-") != std::string::npos) return 2;
  if (n.find("grad") != std::string::npos || n.find("param-gather") != std::string::npos) return 3;
  if (n.rfind("send-", 0) == 0) return 4;
  return 0;
}

Report analyze(const Inputs& in, const Lowered& low, const EngineResult& res) {
  const auto& tasks = low.graph.tasks();
  const std::size_t nr = low.ranks.size();
  Report rep;
  rep.tasks = tasks.size();
  rep.activities = res.activities;
  double T = 0;
  for (double e : res.end_s) T = std::max(T, e);
  rep.iteration_time_s = T;

  // Each rank's compute and communication tasks (a flow also counts for its receiver), in task order: one rank's
  // intervals exist at a time (4 bytes per entry here, instead of every rank's intervals at once).
  auto is_comm = [](const Task& t) {
    return (t.kind == TaskKind::FLOW || t.kind == TaskKind::DELAY) && t.stream != Stream::HOST &&
           t.stream != Stream::TO_HOST && t.stream != Stream::FROM_HOST;
  };
  auto received = [](const Task& t) { return t.kind == TaskKind::FLOW && t.peer >= 0 && t.peer != t.rank; };
  std::vector<std::size_t> first(nr + 1, 0);
  for (const Task& t : tasks) {
    if (t.kind == TaskKind::COMPUTE || is_comm(t)) ++first[static_cast<std::size_t>(t.rank) + 1];
    if (is_comm(t) && received(t)) ++first[static_cast<std::size_t>(t.peer) + 1];
  }
  for (std::size_t r = 0; r < nr; ++r) first[r + 1] += first[r];
  std::vector<std::int32_t> by_rank(first[nr]);
  {
    std::vector<std::size_t> cursor(first.begin(), first.end() - 1);
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      const Task& t = tasks[i];
      if (t.kind == TaskKind::COMPUTE || is_comm(t)) by_rank[cursor[t.rank]++] = static_cast<std::int32_t>(i);
      if (is_comm(t) && received(t)) by_rank[cursor[t.peer]++] = static_cast<std::int32_t>(i);
    }
  }
  std::vector<int> kind_of_name(low.graph.names().size(), -1);
  // The wait for the job's slowest GPU (per-GPU speed variability) is counted apart from compute.
  std::int32_t wait_name = -1;
  for (std::size_t i = 0; i < low.graph.names().size(); ++i)
    if (low.graph.names()[i] == kVariabilityWaitName) wait_name = static_cast<std::int32_t>(i);
  std::vector<Interval> compute, comm, waits;
  std::array<std::vector<Interval>, kNumCommKinds> comm_kind;
  double interference = 0;
  // Rank r's intervals into compute, comm and comm_kind.
  auto collect = [&](std::size_t r) {
    compute.clear();
    comm.clear();
    waits.clear();
    for (auto& v : comm_kind) v.clear();
    interference = 0;
    for (std::size_t j = first[r]; j < first[r + 1]; ++j) {
      const std::int32_t i = by_rank[j];
      const Task& t = tasks[i];
      const double s = res.start_s[i], e = res.end_s[i];
      if (t.kind == TaskKind::COMPUTE && t.name == wait_name) {
        waits.emplace_back(s, e);
        continue;
      }
      if (t.kind == TaskKind::COMPUTE) {
        compute.emplace_back(s, e);
        if (t.interference > 0) interference += std::max(0.0, (e - s) - t.duration_s);
        continue;
      }
      int& k = kind_of_name[static_cast<std::size_t>(t.name)];
      if (k < 0) k = comm_kind_of(low.graph.names()[t.name]);
      comm.emplace_back(s, e);
      comm_kind[k].emplace_back(s, e);
    }
  };
  struct TimedMem {
    double t;
    int order;  // frees (0) before allocations (1) at the same instant
    std::size_t index;
    const MemEvent* ev;
  };
  std::vector<std::vector<TimedMem>> mem(nr);
  const auto& events = low.graph.memory_events();
  for (std::size_t i = 0; i < events.size(); ++i) {
    const MemEvent& ev = events[i];
    const double t = ev.at_end ? res.end_s[ev.task] : res.start_s[ev.task];
    mem[tasks[ev.task].rank].push_back({t, ev.bytes < 0 ? 0 : 1, i, &ev});
  }
  auto describe = [&](const MemEvent& ev) {
    const Task& t = tasks[ev.task];
    std::string d = low.graph.names()[t.name];
    if (t.layer >= 0) d += " layer " + std::to_string(t.layer);
    if (t.microbatch >= 0) d += " micro-batch " + std::to_string(t.microbatch);
    return d + std::string(" (") + (ev.at_end ? "end" : "start") + ", " + mem_category_name(ev.category) + " " +
           format_number("%+.3f", ev.bytes / units::kGB) + " GB)";
  };

  const double capacity = in.cluster->gpu.memory_bytes;
  for (std::size_t r = 0; r < nr; ++r) {
    RankReport rr;
    rr.sim_index = static_cast<int>(r);
    rr.global_rank = low.ranks[r].global_rank;
    rr.coord = low.ranks[r].coord;
    collect(r);
    auto busy = merge(compute);
    auto inflight = merge(comm);
    std::array<std::vector<Interval>, kNumCommKinds> by_kind;
    for (int k = 0; k < kNumCommKinds; ++k) by_kind[k] = merge(comm_kind[k]);
    auto idle = [&](double a, double b) {
      double ex = overlap(inflight, a, b);
      rr.exposed_comm_s += ex;
      rr.bubble_s += (b - a) - ex;
      for (int k = 0; k < kNumCommKinds; ++k)
        if (!by_kind[k].empty()) rr.exposed_by_kind_s[k] += overlap(by_kind[k], a, b);
    };
    // A rank waiting for the slowest GPU is neither computing nor idle: its waits join the busy intervals for the
    // idle accounting and are reported on their own.
    for (const auto& [a, b] : merge(waits)) rr.variability_wait_s += b - a;
    if (!waits.empty()) {
      std::vector<Interval> both = compute;
      both.insert(both.end(), waits.begin(), waits.end());
      busy = merge(both);
    }
    double cursor = 0;
    for (const auto& [a, b] : busy) {
      rr.compute_s += b - a;
      if (a > cursor) idle(cursor, a);
      cursor = std::max(cursor, b);
    }
    rr.compute_s = std::max(0.0, rr.compute_s - rr.variability_wait_s);
    if (T > cursor) idle(cursor, T);
    for (int k = 0; k < kNumCommKinds; ++k) {
      double total = 0;
      for (const auto& [a, b] : by_kind[k]) total += b - a;
      rr.overlapped_by_kind_s[k] = std::max(0.0, total - rr.exposed_by_kind_s[k]);
    }
    rr.interference_s = interference;
    if (r < low.nccl_floor_s.size())
      for (const auto& [name, seconds] : low.nccl_floor_s[r])
        rr.nccl_floor_by_kind_s[comm_kind_of(low.graph.names()[static_cast<std::size_t>(name)])] += seconds;
    rr.bubble_fraction = rr.compute_s > 0 ? rr.bubble_s / rr.compute_s : 0;
    // Memory timeline: static parts at t = 0, then every event in time order.
    const auto& sm = low.ranks[r].static_mem;
    std::array<double, kNumMemCategories> cur{};
    cur[static_cast<int>(MemCategory::WEIGHTS)] = sm.weight_bytes + sm.lowp_weight_bytes;
    cur[static_cast<int>(MemCategory::GRADIENTS)] = sm.gradient_bytes;
    cur[static_cast<int>(MemCategory::OPTIMIZER)] = sm.optimizer_bytes;
    cur[static_cast<int>(MemCategory::RESERVED)] = low.ranks[r].reserved_bytes;
    auto total = [&] {
      double x = 0;
      for (double b : cur) x += b;
      return x;
    };
    rr.peak_bytes = total();
    rr.at_peak = cur;
    rr.peak_event = "static memory at start";
    if (rr.peak_bytes > capacity) rr.oom_event = "static memory at start (weights, gradients, optimizer, reserved)";
    rr.memory_timeline.emplace_back(0.0, cur);
    auto& ev = mem[r];
    std::sort(ev.begin(), ev.end(), [](const TimedMem& x, const TimedMem& y) {
      return std::tie(x.t, x.order, x.index) < std::tie(y.t, y.order, y.index);
    });
    for (const auto& e : ev) {
      double& slot = cur[static_cast<int>(e.ev->category)];
      slot += e.ev->bytes;
      DTSIM_ASSERT(slot > -1.0, "memory of rank " << rr.global_rank << " in category "
                                                  << mem_category_name(e.ev->category) << " went negative (" << slot
                                                  << " bytes) at " << describe(*e.ev));
      const double now = total();
      if (now > rr.peak_bytes) {
        rr.peak_bytes = now;
        rr.at_peak = cur;
        rr.peak_time_s = e.t;
        rr.peak_event = describe(*e.ev);
      }
      if (now > capacity && rr.oom_event.empty()) {
        rr.oom_event = describe(*e.ev);
        rr.oom_time_s = e.t;
      }
      if (rr.memory_timeline.back().first == e.t) rr.memory_timeline.back().second = cur;
      else rr.memory_timeline.emplace_back(e.t, cur);
    }
    rr.peak_activation_bytes =
        rr.at_peak[static_cast<int>(MemCategory::ACTIVATIONS)] + rr.at_peak[static_cast<int>(MemCategory::RECOMPUTE)];
    rep.ranks.push_back(std::move(rr));
  }
  const bool list_all = static_cast<int>(low.sim_index_of.size()) <= kListRanksUpTo;
  if (list_all) {
    for (int g = 0; g < static_cast<int>(low.sim_index_of.size()); ++g) {
      const auto& rr = rep.ranks[low.sim_index_of[g]];
      if (rr.peak_bytes > capacity)
        rep.oom.push_back({g, rr.peak_bytes, capacity, rr.peak_time_s, rr.oom_event, rr.oom_time_s});
    }
  } else {
    for (const auto& rr : rep.ranks)
      if (rr.peak_bytes > capacity)
        rep.oom.push_back({rr.global_rank, rr.peak_bytes, capacity, rr.peak_time_s, rr.oom_event, rr.oom_time_s,
                           low.ranks[rr.sim_index].class_size});
  }
  for (const auto& o : rep.oom) rep.oom_ranks += o.represents;

  for (const auto& rr : rep.ranks) rep.max_bubble_fraction = std::max(rep.max_bubble_fraction, rr.bubble_fraction);
  const auto& plan = *in.plan;
  const int gpus = plan.world_size();
  rep.samples_per_s = plan.global_batch_size / T;
  rep.tokens_per_s = rep.samples_per_s * in.model->seq_len;
  rep.model_tflops_per_gpu = low.model_flops_per_iteration / T / gpus / units::kTera;
  rep.hardware_tflops_per_gpu = low.hardware_flops_per_iteration / T / gpus / units::kTera;
  const double peak_flops = in.cluster->gpu.peak_flops(in.model->dtype);
  rep.mfu = low.model_flops_per_iteration / T / gpus / peak_flops;
  // 6 (forward + backward) or 8 (full recompute) FLOPs per parameter and token; heterogeneous plans weigh each
  // stage's recompute by its layers.
  double k = plan.recompute == Recompute::FULL ? 8.0 : 6.0;
  if (plan.has_stage_strategies()) {
    const auto layers = plan.stage_layers(in.model->num_layers);
    double full = 0;
    for (int s = 0; s < plan.pp; ++s) full += plan.stage_strategy(s).recompute == Recompute::FULL ? layers[s] : 0;
    k = 6.0 + 2.0 * full / in.model->num_layers;
  } else if (plan.recompute == Recompute::FULL && plan.recompute_num_layers > 0) {  // Megatron's block method
    double full = 0;
    for (int l = 0; l < in.model->num_layers; ++l) full += plan.recomputes_layer(l, in.model->num_layers) ? 1 : 0;
    k = 6.0 + 2.0 * full / in.model->num_layers;
  }
  const double tokens = static_cast<double>(plan.global_batch_size) * in.model->seq_len;
  // MoE: the parameters a token passes through (active), not all experts.
  rep.hand_estimate_flops_per_param_token = k;
  rep.hand_estimate_s = k * static_cast<double>(in.model->active_params()) * tokens /
                        (gpus * peak_flops * in.calibration->gemm_efficiency_max);
  return rep;
}

namespace {
/// A link's bytes over what it could carry in the iteration. The analytic engine does not share links, so
/// overlapping flows can demand more than the link carries (avg_demand, reported apart as peak_demand is); the
/// utilisation cannot pass 1 (issue Guard). The flow engines share links: their demand is their utilisation.
double avg_demand(const LinkStats& l, double T) { return T > 0 ? l.bytes / (l.bandwidth_Bps * T) : 0; }
double avg_utilization(const LinkStats& l, double T, const EngineResult& res) {
  return res.engine == "analytic" ? std::min(1.0, avg_demand(l, T)) : avg_demand(l, T);
}

nlohmann::json links_json(const EngineResult& res, double T) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& l : res.link_stats) {
    out.push_back({{"name", l.name},
                   {"bandwidth_Bps", l.bandwidth_Bps},
                   {"bytes", l.bytes},
                   {"busy_s", l.busy_s},
                   {"busy_fraction", T > 0 ? l.busy_s / T : 0},
                   {"avg_utilization", avg_utilization(l, T, res)},
                   {"peak_utilization", l.peak_utilization}});
    if (res.engine == "analytic") {
      out.back()["peak_demand"] = l.peak_demand;
      out.back()["avg_demand"] = avg_demand(l, T);
    }
    // Folding with multiplicity: the simulated flows each stood for this many real ones (counted in bytes).
    if (l.multiplicity > 1) out.back()["multiplicity"] = l.multiplicity;
  }
  return out;
}

// Links by average utilisation, highest first (stable: ties keep creation order).
std::vector<const LinkStats*> busiest_links(const EngineResult& res, double T, std::size_t n) {
  std::vector<const LinkStats*> v;
  for (const auto& l : res.link_stats)
    if (l.bytes > 0) v.push_back(&l);
  std::stable_sort(v.begin(), v.end(),
                   [&](const LinkStats* a, const LinkStats* b) { return avg_demand(*a, T) > avg_demand(*b, T); });
  if (v.size() > n) v.resize(n);
  return v;
}
}  // namespace

nlohmann::json summary_json(const Inputs& in, const Lowered& low, const EngineResult& res, const Report& rep) {
  using nlohmann::json;
  const Calibration cal = with_stack(*in.calibration, in.plan->stack);  // the hardware's, with the run's stack filled
  json ranks = json::array();
  const int world = static_cast<int>(low.sim_index_of.size());
  const bool list_all = world <= kListRanksUpTo;
  for (int i = 0; i < (list_all ? world : static_cast<int>(rep.ranks.size())); ++i) {
    const auto& rr = list_all ? rep.ranks[low.sim_index_of[i]] : rep.ranks[i];
    const int g = list_all ? i : rr.global_rank;
    RankCoord c = in.plan->coord_of(g);
    ranks.push_back({{"rank", g},
                     {"tp", c.tp},
                     {"dp", c.dp},
                     {"pp", c.pp},
                     {"stage_replica", c.rep},
                     {"simulated_as", rr.global_rank},
                     {"compute_s", rr.compute_s},
                     {"exposed_comm_s", rr.exposed_comm_s},
                     {"bubble_s", rr.bubble_s},
                     {"bubble_fraction", rr.bubble_fraction},
                     {"gpu_variability_wait_s", rr.variability_wait_s},
                     {"peak_memory_bytes", rr.peak_bytes},
                     {"peak_memory_time_s", rr.peak_time_s},
                     {"peak_activation_bytes", rr.peak_activation_bytes}});
    if (!list_all) ranks.back()["represents"] = low.ranks[rr.sim_index].class_size;
  }
  json stages = json::array();
  for (int s = 0; s < in.plan->pp; ++s) {
    RankCoord c;
    c.pp = s;
    const auto& rr = rep.ranks[low.sim_index_of[in.plan->rank_of(c)]];
    const auto& sm = low.ranks[rr.sim_index].static_mem;
    json at_peak = json::object();
    for (int k = 0; k < kNumMemCategories; ++k) at_peak[mem_category_name(static_cast<MemCategory>(k))] = rr.at_peak[k];
    json by_kind = json::object();
    nlohmann::json hidden_kind;
    for (int k = 0; k < kNumCommKinds; ++k) by_kind[comm_kind_name(k)] = rr.exposed_by_kind_s[k];
    for (int k = 0; k < kNumCommKinds; ++k) hidden_kind[comm_kind_name(k)] = rr.overlapped_by_kind_s[k];
    json floor_kind = json::object();
    for (int k = 0; k < kNumCommKinds; ++k) floor_kind[comm_kind_name(k)] = rr.nccl_floor_by_kind_s[k];
    stages.push_back({{"stage", s},
                      {"exposed_comm_by_kind_s", by_kind},
                      {"overlapped_comm_by_kind_s", hidden_kind},
                      {"nccl_floor_by_kind_s", floor_kind},
                      {"interference_s", rr.interference_s},
                      {"layers", in.plan->stage_layers(in.model->num_layers)[s]},
                      {"replicas", in.plan->replicas(s)},
                      {"params_per_rank", sm.params},
                      {"weight_bytes", sm.weight_bytes},
                      {"lowp_weight_bytes", sm.lowp_weight_bytes},
                      {"gradient_bytes", sm.gradient_bytes},
                      {"optimizer_bytes", sm.optimizer_bytes},
                      {"host_offload_bytes", sm.host_bytes},
                      {"reserved_bytes", low.ranks[rr.sim_index].reserved_bytes},
                      {"peak_activation_bytes", rr.peak_activation_bytes},
                      {"peak_memory_bytes", rr.peak_bytes},
                      {"peak_memory_time_s", rr.peak_time_s},
                      {"peak_memory_event", rr.peak_event},
                      {"memory_at_peak_bytes", at_peak},
                      {"compute_s", rr.compute_s},
                      {"exposed_comm_s", rr.exposed_comm_s},
                      {"bubble_s", rr.bubble_s},
                      {"bubble_fraction", rr.bubble_fraction},
                      {"gpu_variability_wait_s", rr.variability_wait_s}});
    if (in.plan->has_stage_tp()) stages.back()["tp"] = in.plan->stage_tp(s);
  }
  json oom = json::array();
  for (const auto& o : rep.oom)
    oom.push_back({{"rank", o.global_rank},
                   {"peak_memory_bytes", o.peak_bytes},
                   {"capacity_bytes", o.capacity_bytes},
                   {"excess_bytes", o.peak_bytes - o.capacity_bytes},
                   {"peak_time_s", o.peak_time_s},
                   {"crossed_at_s", o.event_time_s},
                   {"crossed_by", o.event}});
  for (std::size_t i = 0; i < rep.oom.size() && !list_all; ++i) oom[i]["represents"] = rep.oom[i].represents;
  json summary = {{"schema", "dtsim.summary"},
                  {"schema_version", 1},
                  {"dtsim_version", DTSIM_VERSION},
                  {"simgrid_version", simgrid_version()},
                  {"config",
                   {{"model", to_json(*in.model)},
                    {"cluster", to_json(*in.cluster)},
                    {"plan", to_json(*in.plan, in.model->num_layers)},
                    {"schedule", in.plan->schedule_name()},
                    {"calibration", to_json(cal)},
                    {"stack", to_json(stack_profile(in.plan->stack))},
                    {"sustained_clock", sustained_clock_json(in, cal)},
                    {"simulation",
                     {{"collective_mode", to_string(in.options->collective_mode)},
                      {"fold", to_string(in.options->fold)},
                      {"folded_tp", low.fold_tp},
                      {"folded_dp", low.fold_dp},
                      {"folded_edp", low.fold_edp},
                      {"fold_reason", low.fold_reason},
                      {"simulated_ranks", low.ranks.size()},
                      {"network", to_string(in.options->network)},
                      {"collective_algorithm", to_string(in.options->collective_algorithm)},
                      {"channels", in.options->channels},
                      {"spread_rings", in.options->spread_rings},
                      {"network_model", in.options->network == NetworkMode::FLOW
                                            ? "SimGrid CM02 max-min, latency/bandwidth factors 1, no TCP window"
                                            : "analytic alpha-beta, contention-free"}}}}},
                  {"results",
                   {{"iteration_time_s", rep.iteration_time_s},
                    {"iteration_time_interval_s", interval_json(in, rep.iteration_time_s)},
                    {"samples_per_s", rep.samples_per_s},
                    {"tokens_per_s", rep.tokens_per_s},
                    {"model_tflops_per_gpu", rep.model_tflops_per_gpu},
                    {"hardware_tflops_per_gpu", rep.hardware_tflops_per_gpu},
                    {"mfu", rep.mfu},
                    {"model_flops_per_iteration", low.model_flops_per_iteration},
                    {"hardware_flops_per_iteration", low.hardware_flops_per_iteration},
                    {"hand_estimate_s", rep.hand_estimate_s},
                    {"max_bubble_fraction", rep.max_bubble_fraction},
                    {"fits_in_memory", rep.oom.empty()},
                    {"oom", oom}}},
                  {"stages", stages},
                  {"ranks", ranks},
                  {"links", links_json(res, rep.iteration_time_s)},
                  {"simulation_stats",
                   {{"tasks", rep.tasks},
                    {"edges", low.graph.edge_count()},
                    {"engine", res.engine},
                    {"simgrid_activities", res.activities},
                    {"platform_hosts", res.hosts},
                    {"platform_links", res.links}}}};
  if (!list_all) {
    summary["results"]["oom_ranks"] = rep.oom_ranks;
    summary["ranks_listed"] = "one entry per simulated rank (more than " + std::to_string(kListRanksUpTo) +
                              " ranks); 'represents' = how many global ranks it stands for";
  }
  return summary;
}

std::string trace_json(const Inputs& in, const Lowered& low, const EngineResult& res, const Report& rep,
                       bool link_tracks) {
  return trace_json(in, low, res, rep, select_all(low, res, link_tracks));
}

std::string human_summary(const Inputs& in, const Lowered& low, const EngineResult& res, const Report& rep) {
  const auto& plan = *in.plan;
  std::ostringstream o;
  o << "dtsim " << DTSIM_VERSION << " | " << in.model->name << " ("
    << format_number("%.1f", static_cast<double>(in.model->total_params()) / 1e9) << "B params"
    << (in.model->moe.enabled()
            ? ", " + format_number("%.1f", static_cast<double>(in.model->active_params()) / 1e9) + "B active"
            : std::string())
    << ") on " << in.cluster->name << " (" << in.cluster->total_gpus() << " x " << in.cluster->gpu.name << ")\n";
  o << "plan: tp " << plan.tp << " pp " << plan.pp << " dp " << plan.dp;
  if (plan.cp > 1) o << " cp " << plan.cp << " (" << to_string(plan.cp_kind) << ")";
  if (in.model->moe.enabled())
    o << " ep " << plan.ep << " etp " << plan.expert_tp() << " (" << to_string(plan.dispatcher) << ", routing "
      << to_string(plan.routing) << ")";
  o << " | micro-batch " << plan.micro_batch_size << " global batch " << plan.global_batch_size << " ("
    << plan.num_microbatches() << " micro-batches) | " << plan.schedule_name() << " | recompute "
    << to_string(plan.recompute)
    << (plan.recompute_num_layers > 0 ? " (first " + std::to_string(plan.recompute_num_layers) + " layers per chunk)"
                                      : std::string())
    << " | zero " << plan.zero_stage
    << (plan.megatron_fsdp ? (plan.fsdp_double_buffer ? " (Megatron-FSDP, double buffer)" : " (Megatron-FSDP)") : "")
    << (plan.sequence_parallel ? " | sequence parallel" : "") << " | stack "
    << (plan.stack.empty() ? kDefaultStack : plan.stack);
  if (plan.has_stage_replicas()) {
    o << " | stage replicas";
    for (int s = 0; s < plan.pp; ++s) o << (s ? "," : " ") << plan.replicas(s);
  }
  if (plan.has_stage_cuts()) {
    o << " | boundaries inside layers (atoms before the cut)";
    for (int s = 0; s + 1 < plan.pp; ++s) o << (s ? "," : " ") << plan.cut_atoms(s);
  }
  o << "\n";
  if (plan.has_stage_strategies()) {
    o << "stage strategies:";
    for (int s = 0; s < plan.pp; ++s) o << (s ? " | " : " ") << s << ": " << to_string(plan.stage_strategy(s));
    o << "\n";
  }
  o << "simulation: " << low.ranks.size() << " simulated ranks (" << low.fold_reason << "), " << rep.tasks << " tasks, "
    << rep.activities << " activities, collectives as " << to_string(in.options->collective_mode) << ", "
    << to_string(in.options->network) << " network\n\n";
  o << "iteration time      " << format_number("%.3f", rep.iteration_time_s) << " s";
  if (const auto rb = run_band(in))
    o << "  (90% interval " << format_number("%.3f", rep.iteration_time_s * std::exp(rb->band.q05)) << "-"
      << format_number("%.3f", rep.iteration_time_s * std::exp(rb->band.q95)) << " s from the "
      << (rb->own ? "leave-one-out errors of the calibration's fit to " + std::to_string(rb->band.rows) + " measured " +
                        rb->band.key + " runs"
                  : "cross-validated errors of " + std::to_string(rb->band.rows) + " published runs (" +
                        std::to_string(rb->band.sources) +
                        (rb->band.sources == 1 ? " source) of class " : " sources) of class ") + rb->band.key)
      << ")";
  o << "\n";
  o << "throughput          " << format_number("%.0f", rep.tokens_per_s) << " tokens/s, "
    << format_number("%.2f", rep.samples_per_s) << " samples/s\n";
  o << "per GPU             " << format_number("%.1f", rep.model_tflops_per_gpu) << " TFLOP/s model ("
    << format_number("%.1f", rep.hardware_tflops_per_gpu) << " executed), MFU " << format_number("%.1f", 100 * rep.mfu)
    << "%\n";
  o << "hand estimate       " << format_number("%.3f", rep.hand_estimate_s) << " s  ("
    << format_number("%g", rep.hand_estimate_flops_per_param_token) << " x "
    << (in.model->moe.enabled() ? "active " : "") << "params x tokens / (GPUs x peak x "
    << format_number("%.2f", in.calibration->gemm_efficiency_max) << "))\n\n";
  o << "stage  layers  compute s  exposed comm s  bubble s (fraction)  peak memory (static + dynamic)\n";
  for (int s = 0; s < plan.pp; ++s) {
    RankCoord c;
    c.pp = s;
    const auto& rr = rep.ranks[low.sim_index_of[plan.rank_of(c)]];
    const auto& sr = low.ranks[rr.sim_index];
    char line[200];
    const double stat = sr.static_mem.total() + sr.reserved_bytes;
    std::snprintf(line, sizeof line, "%5d  %6d  %9.3f  %14.3f  %8.3f (%5.1f%%)  %s (%s + %s)\n", s,
                  plan.stage_layers(in.model->num_layers)[s], rr.compute_s, rr.exposed_comm_s, rr.bubble_s,
                  100 * rr.bubble_fraction, gb(rr.peak_bytes).c_str(), gb(stat).c_str(),
                  gb(rr.peak_bytes - stat).c_str());
    o << line;
  }
  double max_wait = 0;
  for (const auto& rr : rep.ranks) max_wait = std::max(max_wait, rr.variability_wait_s);
  if (max_wait > 0)
    o << "slowest-GPU wait    up to " << format_number("%.3f", max_wait)
      << " s per rank, outside the columns above (GPU"
      << " speed spread " << format_number("%.1f", 100 * in.calibration->gpu_speed_cv) << "% over " << plan.world_size()
      << " GPUs; --gpu-speed-cv 0 turns it off)\n";
  // Which communication the idle compute stream waited for, per stage (kinds in flight together count in each).
  bool any_kind = false, any_interference = false;
  for (const auto& rr : rep.ranks) {
    for (int k = 1; k < kNumCommKinds; ++k) any_kind = any_kind || (k < 3 && rr.exposed_by_kind_s[k] > 0);
    any_interference = any_interference || rr.interference_s > 0;
  }
  // The simulated rank standing for stage s (coordinates 0 on the other axes).
  auto stage_rank = [&](int s) -> const RankReport& {
    RankCoord c;
    c.pp = s;
    return rep.ranks[low.sim_index_of[plan.rank_of(c)]];
  };
  if (in.plan->tp_comm_overlap || in.plan->overlap_param_gather || any_interference) {
    // Exposed (compute idle) and overlapped (in flight while compute runs) communication of each kind, and what the
    // overlap cost the kernels (interference).
    o << "communication by kind, exposed / overlapped (s), and interference"
      << (!low.graph.interference_on            ? " (off)"
          : res.engine.rfind("simgrid", 0) != 0 ? " (not modelled by the " + res.engine + " engine)"
                                                : "")
      << ":\n";
    for (int s = 0; s < plan.pp; ++s) {
      const auto& rr = stage_rank(s);
      o << "  stage " << s << ":";
      for (int k = 0; k < kNumCommKinds; ++k)
        if (rr.exposed_by_kind_s[k] > 0 || rr.overlapped_by_kind_s[k] > 0)
          o << " " << comm_kind_name(k) << " " << format_number("%.3f", rr.exposed_by_kind_s[k]) << " / "
            << format_number("%.3f", rr.overlapped_by_kind_s[k]);
      o << " | interference +" << format_number("%.3f", rr.interference_s) << " s compute\n";
    }
  } else if (any_kind) {
    o << "exposed communication by kind (s):\n";
    for (int s = 0; s < plan.pp; ++s) {
      const auto& rr = stage_rank(s);
      o << "  stage " << s << ":";
      for (int k = 0; k < kNumCommKinds; ++k)
        if (rr.exposed_by_kind_s[k] > 0)
          o << " " << comm_kind_name(k)
            << (k == 1   ? (plan.cp_kind == CpKind::RING ? " (ring attention)" : "")
                : k == 2 ? " (moe dispatch/combine)"
                         : "")
            << " " << format_number("%.3f", rr.exposed_by_kind_s[k]);
      o << "\n";
    }
  }
  o << "\n";
  const auto busiest = busiest_links(res, rep.iteration_time_s, 3);
  if (!busiest.empty()) {
    o << "busiest links";
    if (low.fold_tp || low.fold_dp || low.fold_edp) o << " (of the simulated ranks; folded ranks load theirs alike)";
    o << ":\n";
    for (const auto* l : busiest) {
      char line[200];
      std::snprintf(line, sizeof line, "  %-16s %6.1f%% average, %5.1f%% peak, busy %5.1f%% of the iteration, %s\n",
                    l->name.c_str(), 100 * avg_utilization(*l, rep.iteration_time_s, res), 100 * l->peak_utilization,
                    100 * l->busy_s / rep.iteration_time_s, gb(l->bytes).c_str());
      o << line;
    }
  }
  if (rep.oom.empty()) {
    o << "memory: fits (" << gb(in.cluster->gpu.memory_bytes) << " per GPU)\n";
  } else {
    double worst = 0;
    int worst_rank = 0;
    for (const auto& e : rep.oom)
      if (e.peak_bytes - e.capacity_bytes > worst) {
        worst = e.peak_bytes - e.capacity_bytes;
        worst_rank = e.global_rank;
      }
    o << "memory: OUT OF MEMORY on " << rep.oom_ranks << " of " << plan.world_size() << " ranks (worst: rank "
      << worst_rank << " over by " << gb(worst) << " of " << gb(in.cluster->gpu.memory_bytes) << ")\n";
    for (const auto& e : rep.oom)
      if (e.global_rank == worst_rank)
        o << "        capacity first crossed at " << format_number("%.4f", e.event_time_s) << " s by " << e.event
          << "\n";
  }
  return o.str();
}

}  // namespace dtsim::sim
