#include "strategies/capacity.hpp"

#include <algorithm>

#include "traces/error.hpp"

namespace dtsim::planning {

std::vector<std::string> default_capacity_ladder() {
  std::vector<std::string> out;
  for (const auto& name : model_preset_names())
    if (name.rfind("megatron-", 0) == 0) out.push_back(name);
  std::stable_sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    return model_preset(a).total_params() < model_preset(b).total_params();
  });
  return out;
}

namespace {
/// Candidates of `planner` for `in` (the baseline filters the grid search).
std::vector<Candidate> candidates(const PlannerInput& in, const std::string& planner) {
  if (planner != kMegatronBaseline) return make_planner(planner)->plan(in).ranked;
  std::vector<Candidate> out;
  for (auto& c : make_planner("grid")->plan(in).ranked)
    if (c.plan.pp == 1 && c.plan.tp_layout == TpLayout::D1 && c.plan.zero_stage == 0 && !c.plan.sequence_parallel &&
        c.plan.tp <= in.cluster.gpus_per_node)
      out.push_back(std::move(c));
  return out;
}
}  // namespace

std::vector<CapacityRow> capacity(const PlannerInput& base, const std::vector<std::string>& ladder,
                                  const std::vector<std::string>& planners) {
  if (ladder.empty()) throw ConfigError("capacity: the model ladder is empty");
  std::vector<CapacityRow> rows;
  for (const auto& planner : planners) {
    if (planner != kMegatronBaseline) make_planner(planner);  // unknown names fail before any work
    CapacityRow row;
    row.planner = planner;
    for (const auto& model : ladder) {
      PlannerInput in = base;
      in.model = load_model(model);
      auto c = candidates(in, planner);
      if (c.empty()) continue;
      row.fits.push_back(model);
      if (in.model.total_params() > row.largest_params) {
        row.largest_params = in.model.total_params();
        row.largest_model = model;
        row.plan = c.front().plan;
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace dtsim::planning
