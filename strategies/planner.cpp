// Planner registry and shared helpers.
#include <algorithm>
#include <sstream>

#include "strategies/planners/registry.hpp"
#include "traces/error.hpp"

namespace dtsim::planning {

std::string describe(const ParallelPlan& p) {
  std::ostringstream o;
  o << "tp " << p.tp << " pp " << p.pp << " dp " << p.dp;
  if (p.cp > 1) o << " cp " << p.cp << " (" << to_string(p.cp_kind) << ")";
  if (p.ep > 1) o << " ep " << p.ep;
  if (p.ep > 1 && p.expert_tp() != p.tp) o << " etp " << p.expert_tp();
  if (p.dispatcher != Dispatcher::ALL_TO_ALL) o << " " << to_string(p.dispatcher);
  if (p.overlap_moe_comm) o << " overlap-moe-comm";
  o << " mbs " << p.micro_batch_size << " " << p.schedule_name() << " recompute " << to_string(p.recompute);
  if (p.recompute_modules != 0) o << " (" << recompute_modules_to_string(p.recompute_modules) << ")";
  if (p.recompute_num_layers > 0) o << " (" << p.recompute_num_layers << " layers per chunk)";
  o << " zero " << p.zero_stage << (p.megatron_fsdp ? " megatron-fsdp" : "")
    << (p.fsdp_double_buffer ? " double-buffer" : "") << (p.sequence_parallel ? " sp" : "");
  if (p.tp_layout != TpLayout::D1) {
    o << " tp-layout " << to_string(p.tp_layout);
    if (p.tp_layout == TpLayout::D2_5) o << ':' << p.tp_depth;
  }
  auto list = [&](const char* what, const std::vector<int>& v) {
    o << " " << what << " ";
    for (std::size_t i = 0; i < v.size() && i < 8; ++i) o << (i ? "/" : "") << v[i];
    if (v.size() > 8) o << "/...";
  };
  if (!p.layers_per_stage.empty()) list("layers", p.layers_per_stage);
  if (p.has_stage_replicas()) list("replicas", p.stage_replicas);
  if (p.has_stage_cuts()) list("cut-atoms", p.stage_cut_atoms);
  if (p.has_stage_strategies()) {
    o << " stages";
    for (int st = 0; st < p.pp; ++st) o << (st ? " | " : " ") << to_string(p.stage_strategy(st));
  }
  if (p.has_device_map()) o << " mapped";
  return o.str();
}

void finish(PlannerResult& r, std::chrono::steady_clock::time_point t0) {
  std::stable_sort(r.ranked.begin(), r.ranked.end(), [](const Candidate& a, const Candidate& b) {
    return a.estimate.iteration_s < b.estimate.iteration_s;
  });
  r.search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<std::string> planner_names() { return {"grid", "pipedream", "dapple", "rannc", "uniap", "luo"}; }

std::unique_ptr<Planner> make_planner(const std::string& name) {
  if (name == "grid") return make_grid_planner();
  if (name == "pipedream") return make_pipedream_planner();
  if (name == "dapple") return make_dapple_planner();
  if (name == "uniap") return make_uniap_planner(true);
  if (name == "uniap-k1") return make_uniap_planner(false);
  if (name == "luo") return make_luo_planner();
  if (name == "rannc") return make_rannc_planner(false, true);
  if (name == "rannc-paper") return make_rannc_planner(true, true);
  if (name == "rannc-layers") return make_rannc_planner(false, false);
  std::string known;
  for (const auto& n : planner_names()) known += (known.empty() ? "" : ", ") + n;
  throw ConfigError("unknown planner '" + name + "' (known: " + known + ", rannc-paper, rannc-layers, uniap-k1)");
}

}  // namespace dtsim::planning
