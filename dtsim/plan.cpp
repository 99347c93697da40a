// Public API, planners: plan, bakeoff, capacity (dtsim/plan.hpp).
#include "dtsim/plan.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "dtsim/dtsim.hpp"
#include "dtsim/internal.hpp"
#include "sim/report/trace_render.hpp"
#include "sim/simulate.hpp"
#include "strategies/capacity.hpp"
#include "studies/plan/capacity_deadline.hpp"
#include "studies/plan/plan_search.hpp"
#include "traces/limits.hpp"
#include "traces/stack_profile.hpp"
#include "traces/units.hpp"

namespace dtsim {
namespace {

/// The calibration planners cost and simulate with: `hw` with the software values of `stack` ("" = the default
/// stack), pinned, since the plans they emit name no stack (a simulation then keeps these values).
Calibration planning_calibration(const Calibration& hw, const std::string& stack) {
  Calibration c = with_stack(hw, stack.empty() ? std::string(kDefaultStack) : stack);
  for (const auto& f : kSoftwareFields) c.pin(f);
  return c;
}

/// Cluster, calibration, global batch and memory limit of a planner input (plan, bakeoff, capacity), with the CLI's
/// checks and messages naming `cmd`.
void cluster_input(const std::string& cluster, const std::string& calibration, const std::string& stack,
                   int global_batch_size, double memory_limit_bytes, const std::string& cmd,
                   planning::PlannerInput& in) {
  in.cluster = load_cluster(cluster);
  in.calibration = planning_calibration(resolve_calibration(calibration, in.cluster), stack);
  in.global_batch_size = global_batch_size;
  if (in.global_batch_size <= 0 || in.global_batch_size > limits::kMaxGlobalBatch)
    throw ConfigError(cmd + ": --gbs must be from 1 to " + std::to_string(limits::kMaxGlobalBatch) + ", got " +
                      std::to_string(in.global_batch_size));
  if (memory_limit_bytes < 0) throw ConfigError(cmd + ": --memory-limit must be positive");
  in.memory_limit_bytes = memory_limit_bytes;
}

/// The planner input and simulation options of a request, with the CLI's checks and messages.
planning::PlannerInput planner_input(const PlanRequest& req, sim::SimOptions& opt) {
  const std::string& cmd = req.command;
  planning::PlannerInput in;
  in.model = load_model(req.model);
  if (req.seq_len != 0) {
    in.model.seq_len = req.seq_len;
    in.model.validate();
  }
  cluster_input(req.cluster, req.calibration, req.stack, req.global_batch_size, req.memory_limit_bytes, cmd, in);
  in.tensor_parallel = req.tensor_parallel;
  if (req.top < 1 || req.top > 100) throw ConfigError(cmd + ": --top must be between 1 and 100");
  in.precision = precision_from_string(req.precision, cmd + ": --precision");
  {
    // The GPU must have the precision's tensor cores and the model a 16-bit dtype: one message here instead of every
    // candidate failing validation.
    ParallelPlan probe;
    probe.precision = in.precision;
    try {
      probe.validate_precision_overlap(in.model, in.cluster);
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      throw ConfigError(cmd + ": " + (msg.rfind("plan: ", 0) == 0 ? msg.substr(6) : msg));
    }
  }
  opt.network = detail::network_mode(req.network, cmd);
  return in;
}

/// ", sequence 32768 tokens, precision fp8-delayed" for a --seq-len and a precision other than bf16 ("" without).
std::string run_options(const PlanRequest& req, const planning::PlannerInput& in) {
  std::string s;
  if (req.seq_len != 0) s += ", sequence " + std::to_string(in.model.seq_len) + " tokens";
  if (in.precision != Precision::BF16) s += ", precision " + to_string(in.precision);
  return s;
}

PlanResult result_of(const sim::PlanSearch& search) {
  const auto& pr = search.planner;
  PlanResult r;
  r.planner = pr.planner;
  r.considered = pr.considered;
  r.invalid = pr.invalid;
  r.over_memory = pr.over_memory;
  r.pruned = pr.pruned;
  r.feasible = pr.ranked.size();
  r.search_s = pr.search_s;
  r.simulate_s = search.simulate_s;
  r.chosen = search.best;
  for (const auto& ev : search.evaluated)
    r.candidates.push_back({ev.candidate.plan, planning::describe(ev.candidate.plan), ev.candidate.estimate.iteration_s,
                            ev.candidate.estimate.peak_bytes, ev.simulated_s, ev.peak_bytes, ev.fits});
  return r;
}

}  // namespace

PlanResult plan(const PlanRequest& req) {
  sim::SimOptions opt;
  const planning::PlannerInput in = planner_input(req, opt);
  const auto search = sim::search_plan(in, req.planner, req.top, opt);
  PlanResult r = result_of(search);
  for (auto& c : r.candidates) c.plan.stack = req.stack;  // what they were costed and simulated with
  {
    char line[400];
    std::snprintf(
        line, sizeof line,
        "dtsim %s | planner %s | %s on %s, global batch %d%s\nsearch: %zu plans considered, %zu invalid, %zu over "
        "memory, %zu pruned, %zu feasible in %.2f s; %zu simulated in %.2f s\n\n",
        DTSIM_VERSION, r.planner.c_str(), in.model.name.c_str(), in.cluster.name.c_str(), in.global_batch_size,
        run_options(req, in).c_str(), r.considered, r.invalid, r.over_memory, r.pruned, r.feasible, r.search_s,
        r.candidates.size(), r.simulate_s);
    r.text += line;
    r.text +=
        "  #  plan                                                                predicted s  simulated s  peak GB  "
        "fits\n";
    for (std::size_t i = 0; i < r.candidates.size(); ++i) {
      const auto& c = r.candidates[i];
      std::snprintf(line, sizeof line, "%3zu%s %-68s %11.3f  %11.3f  %7.1f  %s\n", i + 1,
                    static_cast<int>(i) == r.chosen ? "*" : " ", c.description.c_str(), c.predicted_s, c.simulated_s,
                    c.simulated_peak_bytes / units::kGB, c.fits ? "yes" : "no");
      r.text += line;
    }
  }
  nlohmann::json cands = nlohmann::json::array();
  for (const auto& c : r.candidates)
    cands.push_back({{"plan", to_json(c.plan, in.model.num_layers)},
                     {"predicted_iteration_s", c.predicted_s},
                     {"predicted_peak_bytes", c.predicted_peak_bytes},
                     {"simulated_iteration_s", c.simulated_s},
                     {"simulated_peak_bytes", c.simulated_peak_bytes},
                     {"fits", c.fits}});
  if (r.chosen < 0) {
    r.text += "\nno candidate fits in memory in simulation\n";
  } else if (req.simulate_chosen) {
    const auto& best = r.candidates[r.chosen].plan;
    const sim::Inputs sin{&in.model, &in.cluster, &best, &in.calibration, &opt};
    const auto s = sim::simulate(sin);
    r.files.emplace_back("plan.json", to_json(best, in.model.num_layers).dump(2) + "\n");
    r.files.emplace_back("summary.json", sim::summary_json(sin, s.lowered, s.engine, s.report).dump(2) + "\n");
    r.files.emplace_back("trace.json", sim::trace_json(sin, s.lowered, s.engine, s.report,
                                                       sim::select_trace(s.lowered, s.report, s.engine, {})));
  }
  const nlohmann::json j = {{"schema", "dtsim.plan_search"},
                            {"schema_version", 1},
                            {"planner", r.planner},
                            {"considered", r.considered},
                            {"invalid", r.invalid},
                            {"over_memory", r.over_memory},
                            {"pruned", r.pruned},
                            {"feasible", r.feasible},
                            {"search_s_note", "wall times are not recorded here so that outputs are reproducible"},
                            {"chosen", r.chosen},
                            {"candidates", cands}};
  r.files.emplace_back("candidates.json", j.dump(2) + "\n");
  return r;
}

BakeoffResult bakeoff(const PlanRequest& req) {
  sim::SimOptions opt;
  const planning::PlannerInput in = planner_input(req, opt);
  BakeoffResult out;
  char line[512];
  std::snprintf(line, sizeof line,
                "dtsim %s | bakeoff | %s on %s, global batch %d%s; each planner's best %d simulated\n\n", DTSIM_VERSION,
                in.model.name.c_str(), in.cluster.name.c_str(), in.global_batch_size, run_options(req, in).c_str(),
                req.top);
  out.text = line;
  out.text += "planner     own pred s  simulated s  peak GB  fits  search s  plan\n";
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& name : planning::planner_names()) {
    PlanResult r = result_of(sim::search_plan(in, name, req.top, opt));
    for (auto& c : r.candidates) c.plan.stack = req.stack;
    nlohmann::json row = {{"planner", name}, {"considered", r.considered}, {"feasible", r.feasible}};
    if (r.chosen < 0) {
      std::snprintf(line, sizeof line, "%-10s  %10s  %11s  %7s  %4s  %8.2f  (%s)\n", name.c_str(), "-", "-", "-", "no",
                    r.search_s,
                    r.feasible == 0 ? "no plan fits the planner's memory model" : "no candidate fits in simulation");
      row["plan"] = nullptr;
    } else {
      const auto& c = r.candidates[r.chosen];
      std::snprintf(line, sizeof line, "%-10s  %10.3f  %11.3f  %7.1f  %4s  %8.2f  %s\n", name.c_str(), c.predicted_s,
                    c.simulated_s, c.simulated_peak_bytes / units::kGB, "yes", r.search_s, c.description.c_str());
      row["plan"] = to_json(c.plan, in.model.num_layers);
      row["summary"] = c.description;
      row["predicted_iteration_s"] = c.predicted_s;
      row["simulated_iteration_s"] = c.simulated_s;
      row["simulated_peak_bytes"] = c.simulated_peak_bytes;
      row["fits"] = c.fits;
    }
    out.text += line;
    rows.push_back(row);
    out.planners.push_back(r);
  }
  out.text +=
      "\nown pred: the planner's own cost model; simulated: dtsim (flow-level network unless --network analytic);\n"
      "search s: the planner's search wall time (not written to bakeoff.json, which stays reproducible).\n";
  const nlohmann::json j = {{"schema", "dtsim.bakeoff"},
                            {"schema_version", 1},
                            {"model", in.model.name},
                            {"cluster", in.cluster.name},
                            {"global_batch_size", in.global_batch_size},
                            {"planners", rows}};
  out.files.emplace_back("bakeoff.json", j.dump(2) + "\n");
  return out;
}

CapacityResult capacity(const CapacityRequest& req) {
  planning::PlannerInput in;
  cluster_input(req.cluster, req.calibration, req.stack, req.global_batch_size, req.memory_limit_bytes, "capacity", in);
  CapacityResult out;
  out.ladder = req.models.empty() ? planning::default_capacity_ladder() : req.models;
  for (const auto& m : out.ladder) load_model(m);  // a bad name fails before any search
  std::vector<std::string> planners = req.planners;
  if (planners.empty()) {
    planners = planning::planner_names();
    planners.push_back(planning::kMegatronBaseline);
  }
  const auto rows = planning::capacity(in, out.ladder, planners);
  double baseline = 0;
  for (const auto& r : rows)
    if (r.planner == planning::kMegatronBaseline) baseline = r.largest_params;
  char line[512];
  std::snprintf(line, sizeof line, "dtsim %s | capacity | %s, global batch %d, %zu models from %s to %s\n\n",
                DTSIM_VERSION, in.cluster.name.c_str(), in.global_batch_size, out.ladder.size(),
                out.ladder.front().c_str(), out.ladder.back().c_str());
  out.text = line;
  out.text += "planner        largest model     params  vs megatron-tp  plan\n";
  nlohmann::json jrows = nlohmann::json::array();
  for (const auto& r : rows) {
    out.rows.push_back({r.planner, r.largest_model, r.largest_params, r.plan, r.fits});
    const bool any = !r.largest_model.empty();
    std::string ratio = "-";
    if (any && baseline > 0) {
      char b[32];
      std::snprintf(b, sizeof b, "%.2fx", r.largest_params / baseline);
      ratio = b;
    }
    std::snprintf(line, sizeof line, "%-13s  %-15s  %7.1fB  %14s  %s\n", r.planner.c_str(),
                  any ? r.largest_model.c_str() : "(none)", r.largest_params / 1e9, ratio.c_str(),
                  any ? planning::describe(r.plan).c_str() : "-");
    out.text += line;
    nlohmann::json jr = {{"planner", r.planner}, {"fits", r.fits}};
    if (any) {
      jr["largest_model"] = r.largest_model;
      jr["largest_params"] = r.largest_params;
      jr["plan"] = to_json(r.plan, load_model(r.largest_model).num_layers);
    } else {
      jr["largest_model"] = nullptr;
    }
    jrows.push_back(jr);
  }
  const nlohmann::json j = {{"schema", "dtsim.capacity"}, {"schema_version", 1},
                            {"cluster", in.cluster.name}, {"global_batch_size", in.global_batch_size},
                            {"ladder", out.ladder},       {"planners", jrows}};
  out.files.emplace_back("capacity.json", j.dump(2) + "\n");
  return out;
}

namespace {

/// A cluster preset name ("dgx-h100"), the GPU of one ("h100-sxm5-80gb") or a GPU alias ("b200") -> the cluster
/// preset (the first one with that GPU).
std::string cluster_preset_for(const std::string& gpu_or_cluster) {
  std::string gpu = gpu_or_cluster;
  try {
    gpu = gpu_preset(gpu_or_cluster).name;  // an alias names its preset's GPU
  } catch (const ConfigError&) {
    // not a GPU preset: a cluster preset, or unknown (reported below)
  }
  std::string known;
  for (const auto& c : cluster_preset_names()) {
    const ClusterSpec spec = load_cluster(c);  // a bare preset: one whole node, whatever the node size
    if (c == gpu_or_cluster || spec.gpu.name == gpu) return c;
    known += (known.empty() ? "" : ", ") + c + " (" + spec.gpu.name + ")";
  }
  throw ConfigError("capacity: --gpu '" + gpu_or_cluster + "' is not known (known: " + known + ")");
}

}  // namespace

DeadlineResult deadline(const DeadlineRequest& req) {
  sim::DeadlineInput in;
  in.model = load_model(req.model);
  in.cluster_preset = cluster_preset_for(req.gpu);
  const std::string gpu = load_cluster(in.cluster_preset).gpu.name;
  in.calibration = planning_calibration(calibration_or_default(req.calibration, gpu), req.stack);
  in.tokens = req.tokens;
  in.days = req.days;
  in.price_per_gpu_hour = req.price_per_gpu_hour;
  if (req.global_batch_size != 0) {
    if (req.global_batch_size < 0 || req.global_batch_size > limits::kMaxGlobalBatch)
      throw ConfigError("capacity: --gbs must be from 1 to " + std::to_string(limits::kMaxGlobalBatch) + ", got " +
                        std::to_string(req.global_batch_size));
    in.global_batch_size = req.global_batch_size;
  } else {
    // About 4M tokens: a power of two times the odd part of the node size (1 for 8-GPU nodes; 9 for 72-GPU NVL72
    // racks, whose whole-rack counts have data-parallel degrees of 9 x 2^k).
    int odd = load_cluster(in.cluster_preset).gpus_per_node;
    while (odd > 1 && odd % 2 == 0) odd /= 2;
    in.global_batch_size = odd;
    while (2.0 * in.global_batch_size * in.model.seq_len <= 4.0 * (1 << 20)) in.global_batch_size *= 2;
  }
  in.max_gpus = req.max_gpus;
  in.top = req.top;
  if (in.top < 1 || in.top > 100) throw ConfigError("capacity: --top must be between 1 and 100");
  in.memory_limit_bytes = req.memory_limit_bytes;
  in.options.network = detail::network_mode(req.network, "capacity");

  const auto r = sim::plan_for_deadline(in);

  char line[512];
  DeadlineResult out;
  std::string& text = out.text;
  std::snprintf(line, sizeof line,
                "dtsim %s | capacity | %s, %.4g tokens in %.4g days on %s (%s), global batch %d x %d tokens\n"
                "needs %.4g tokens/s; hardware bound: at least %.1f GPUs (6 x params x tokens/s at %.0f%% of peak)\n\n",
                DTSIM_VERSION, in.model.name.c_str(), in.tokens, in.days, in.cluster_preset.c_str(), gpu.c_str(),
                in.global_batch_size, in.model.seq_len, r.required_tokens_per_s, r.bound_gpus,
                100 * in.calibration.gemm_efficiency_max);
  text += line;
  text +=
      "   GPUs  best strategy (simulated)                          tokens/s     MFU       days  meets        cost\n";
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& st : r.steps) {
    if (!st.found) {
      std::snprintf(line, sizeof line, "%7d  no plan fits memory (%zu considered)\n", st.gpus, st.plans_considered);
    } else {
      std::snprintf(line, sizeof line, "%7d  %-48s %10.4g  %5.1f%%  %9.2f  %-5s  %10.4g\n", st.gpus,
                    planning::describe(st.plan).c_str(), st.tokens_per_s, 100 * st.mfu, st.days,
                    st.meets ? "yes" : "no", st.cost);
    }
    text += line;
    steps.push_back({{"gpus", st.gpus},
                     {"found", st.found},
                     {"plan", st.found ? planning::describe(st.plan) : ""},
                     {"iteration_s", st.iteration_s},
                     {"tokens_per_s", st.tokens_per_s},
                     {"mfu", st.mfu},
                     {"days", st.days},
                     {"meets", st.meets},
                     {"cost", st.cost}});
  }
  if (r.answer >= 0) {
    const auto& a = r.steps[r.answer];
    std::snprintf(line, sizeof line, "\nanswer: %d GPUs, %s: %.2f days", a.gpus, planning::describe(a.plan).c_str(),
                  a.days);
    text += line;
    if (in.price_per_gpu_hour > 0) {
      std::snprintf(line, sizeof line, ", %.4g GPU-hours, cost %.4g", a.gpus * a.days * 24, a.cost);
      text += line;
    }
    text += "\n";
  } else {
    std::snprintf(line, sizeof line, "\nanswer: the deadline is not met with up to %d GPUs\n", in.max_gpus);
    text += line;
  }
  out.required_tokens_per_s = r.required_tokens_per_s;
  out.bound_gpus = r.bound_gpus;
  out.answer = r.answer;
  for (const auto& st : r.steps)
    out.steps.push_back({st.gpus, st.found, st.plan, st.found ? planning::describe(st.plan) : "", st.iteration_s,
                         st.tokens_per_s, st.days, st.cost, st.mfu, st.meets});
  const nlohmann::json j = {{"model", in.model.name},
                            {"gpu", gpu},
                            {"cluster_preset", in.cluster_preset},
                            {"tokens", in.tokens},
                            {"days", in.days},
                            {"global_batch_size", in.global_batch_size},
                            {"price_per_gpu_hour", in.price_per_gpu_hour},
                            {"required_tokens_per_s", r.required_tokens_per_s},
                            {"bound_gpus", r.bound_gpus},
                            {"steps", steps},
                            {"answer_gpus", r.answer >= 0 ? r.steps[r.answer].gpus : -1}};
  out.files.emplace_back("capacity.json", j.dump(2) + "\n");
  return out;
}

}  // namespace dtsim
