#include "validate/compare/measurements.hpp"

#include <algorithm>

#include "traces/error.hpp"
#include "traces/json_util.hpp"

namespace dtsim::exec {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

nlohmann::json to_json(const Measurements& m) {
  nlohmann::json ranks = nlohmann::json::array(), tasks = nlohmann::json::array();
  for (const auto& r : m.ranks)
    ranks.push_back({{"sim_rank", r.sim_rank},
                     {"global_rank", r.global_rank},
                     {"ok", r.ok},
                     {"error", r.error},
                     {"iteration_s", r.iteration_s},
                     {"context_bytes", r.context_bytes},
                     {"pool_used_high_bytes", r.pool_used_high_bytes},
                     {"pool_reserved_high_bytes", r.pool_reserved_high_bytes},
                     {"peak_memory_bytes", r.peak_memory_bytes},
                     {"scratch_bytes", r.scratch_bytes}});
  for (const auto& t : m.tasks) tasks.push_back({{"task", t.task}, {"duration_s", t.duration_s}});
  return {{"schema", "dtsim-measurements"}, {"schema_version", 1}, {"device", m.device_name}, {"warmup", m.warmup},
          {"iterations", m.iterations},     {"ranks", ranks},      {"tasks", tasks}};
}

Measurements measurements_from_json(const nlohmann::json& j, const std::string& ctx) {
  using json_util::get;
  json_util::check_schema_version(j, ctx, 1);
  if (get<std::string>(j, ctx, "schema") != "dtsim-measurements")
    throw FormatError(ctx + ": not a dtsim measurements file (schema '" + get<std::string>(j, ctx, "schema") + "')");
  Measurements m;
  m.device_name = get<std::string>(j, ctx, "device");
  m.warmup = get<int>(j, ctx, "warmup");
  m.iterations = get<int>(j, ctx, "iterations");
  const auto ranks = get<nlohmann::json>(j, ctx, "ranks");
  const auto tasks = get<nlohmann::json>(j, ctx, "tasks");
  if (!ranks.is_array() || !tasks.is_array()) throw FormatError(ctx + ": 'ranks' and 'tasks' must be lists");
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const std::string c = ctx + ": ranks[" + std::to_string(i) + "]";
    RankMeasurement r;
    r.sim_rank = get<int>(ranks[i], c, "sim_rank");
    r.global_rank = get<int>(ranks[i], c, "global_rank");
    r.ok = get<bool>(ranks[i], c, "ok");
    r.error = get<std::string>(ranks[i], c, "error");
    r.iteration_s = get<std::vector<double>>(ranks[i], c, "iteration_s");
    r.context_bytes = get<double>(ranks[i], c, "context_bytes");
    r.pool_used_high_bytes = get<double>(ranks[i], c, "pool_used_high_bytes");
    r.pool_reserved_high_bytes = get<double>(ranks[i], c, "pool_reserved_high_bytes");
    r.peak_memory_bytes = get<double>(ranks[i], c, "peak_memory_bytes");
    r.scratch_bytes = get<double>(ranks[i], c, "scratch_bytes");
    m.ranks.push_back(std::move(r));
  }
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const std::string c = ctx + ": tasks[" + std::to_string(i) + "]";
    TaskMeasurement t;
    t.task = get<int>(tasks[i], c, "task");
    t.duration_s = get<std::vector<double>>(tasks[i], c, "duration_s");
    for (double d : t.duration_s)
      if (!(d >= 0)) throw FormatError(c + ": negative or invalid duration");
    m.tasks.push_back(std::move(t));
  }
  return m;
}

Measurements load_measurements(const std::string& path) {
  return measurements_from_json(json_util::read_file(path), path);
}

}  // namespace dtsim::exec
