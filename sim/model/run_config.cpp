#include "sim/model/run_config.hpp"

#include <filesystem>

#include "traces/error.hpp"
#include "traces/json_util.hpp"

namespace dtsim::sim {
namespace {

/// The value of `names` whose to_string equals `s`; ConfigError listing the known ones otherwise.
template <typename E>
E parse_enum(const std::string& s, std::initializer_list<E> values, const std::string& ctx, const std::string& field) {
  std::string known;
  for (E v : values) {
    if (to_string(v) == s) return v;
    known += (known.empty() ? "" : ", ") + to_string(v);
  }
  throw ConfigError(ctx + ": " + field + " '" + s + "' is not known (known: " + known + ")");
}

}  // namespace

RunConfig run_config_from_summary(const nlohmann::json& summary, const std::string& ctx) {
  using json_util::get;
  const auto cfg = get<nlohmann::json>(summary, ctx, "config");
  const std::string c = ctx + ": config";
  RunConfig rc;
  rc.model = model_from_json(get<nlohmann::json>(cfg, c, "model"), c + ".model");
  rc.cluster = cluster_from_json(get<nlohmann::json>(cfg, c, "cluster"), c + ".cluster");
  rc.plan = plan_from_json(get<nlohmann::json>(cfg, c, "plan"), c + ".plan");
  rc.calibration = calibration_from_json(get<nlohmann::json>(cfg, c, "calibration"), c + ".calibration");
  const auto sim = get<nlohmann::json>(cfg, c, "simulation");
  const std::string s = c + ".simulation";
  rc.options.channels = get<int>(sim, s, "channels");
  // Absent from summaries written before 2026-11-29, whose rings crossed each node through one NIC.
  rc.options.spread_rings = json_util::get_or<bool>(sim, s, "spread_rings", false);
  rc.options.collective_mode = parse_enum(get<std::string>(sim, s, "collective_mode"),
                                          {CollectiveMode::FLOW, CollectiveMode::STEPS}, s, "collective_mode");
  rc.options.fold = parse_enum(get<std::string>(sim, s, "fold"), {FoldMode::AUTO, FoldMode::NONE}, s, "fold");
  rc.options.collective_algorithm =
      parse_enum(get<std::string>(sim, s, "collective_algorithm"),
                 {CollectiveAlgorithm::AUTO, CollectiveAlgorithm::RING, CollectiveAlgorithm::HIERARCHICAL,
                  CollectiveAlgorithm::TREE, CollectiveAlgorithm::NVLS},
                 s, "collective_algorithm");
  rc.options.network =
      parse_enum(get<std::string>(sim, s, "network"), {NetworkMode::FLOW, NetworkMode::ANALYTIC}, s, "network");
  return rc;
}

RunConfig load_run_config(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "summary.json").string();
  if (!std::filesystem::exists(path))
    throw ConfigError(path + ": not found (expected the --out directory of 'dtsim simulate')");
  return run_config_from_summary(json_util::read_file(path), path);
}

}  // namespace dtsim::sim
