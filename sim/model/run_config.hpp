// The inputs of one simulation read back from its summary.json ("config": model, cluster, plan, calibration,
// simulation options), so that other programs (the executor, `dtsim validate`) lower exactly the same graph.
// SimGrid-free (part of dtsim::sim_model).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "sim/model/lowering.hpp"

namespace dtsim::sim {

struct RunConfig {
  TransformerSpec model;
  ClusterSpec cluster;
  ParallelPlan plan;
  Calibration calibration;
  SimOptions options;
};

/// Parses a summary.json's "config"; ConfigError/FormatError naming `ctx` and the field.
RunConfig run_config_from_summary(const nlohmann::json& summary, const std::string& ctx);
/// DIR/summary.json of a `dtsim simulate --out DIR` run.
RunConfig load_run_config(const std::string& dir);

}  // namespace dtsim::sim
