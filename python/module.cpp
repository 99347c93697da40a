// The `dtsim._dtsim` extension module: pybind11 bindings of the public library API (dtsim/dtsim.hpp) for the Python
// package `dtsim` (python/dtsim/__init__.py), which is what users import.
//
// Every function here takes plain Python values (str, os.PathLike, dict, list, numbers) and returns plain ones
// (dict, list, str, bytes, float), so that python/dtsim/ can wrap them in result classes, run a simulation in a forked
// child and pickle its result back. Specs (model, cluster, plan, calibration) are a preset name, a path, or a dict
// with the JSON file's fields, parsed by the same code as the files (traces/*_from_json). A dtsim::Error becomes the
// Python exception of the same name in dtsim.errors, with the one-line message the CLI prints after
// "dtsim: error: ".
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "dtsim/dtsim.hpp"

namespace py = pybind11;
using nlohmann::json;

namespace dtsim::python {
namespace {

// ---- Python values -> C++ -----------------------------------------------------------------------------------------

bool is_path(const py::handle& o) { return py::isinstance<py::str>(o) || py::hasattr(o, "__fspath__"); }

std::string path_string(const py::handle& o) {
  return py::str(py::module_::import("os").attr("fspath")(o)).cast<std::string>();
}

/// A preset name or a file path given where only those are accepted; `what` names the argument in the error.
std::string name_of(const py::handle& o, const std::string& what) {
  if (!is_path(o))
    throw ConfigError(what + ": expected a preset name or a file path, not " +
                      py::str(py::type::of(o).attr("__name__")).cast<std::string>());
  return path_string(o);
}

/// A dict (or list) as nlohmann JSON, through Python's json module (so that every JSON value type carries over).
json to_json_value(const py::handle& o, const std::string& what) {
  std::string text;
  try {
    // allow_nan=False: NaN and infinities are not JSON; the error names them instead of a parse error later.
    text = py::module_::import("json").attr("dumps")(o, py::arg("allow_nan") = false).cast<std::string>();
  } catch (const py::error_already_set& e) {
    std::string why = py::str(e.value()).cast<std::string>();
    if (why.find("Out of range float") != std::string::npos) why = "a value is NaN or infinite";
    throw ConfigError(what + ": not representable as JSON (" + why + ")");
  }
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw ConfigError(what + ": not representable as JSON (" + std::string(e.what()) + ")");
  }
}

py::object from_json_value(const json& j) { return py::module_::import("json").attr("loads")(j.dump()); }

TransformerSpec model_of(const py::handle& o) {
  if (is_path(o)) return load_model(path_string(o));
  if (py::isinstance<py::dict>(o)) return model_from_json(to_json_value(o, "model"), "model");
  throw ConfigError("model: expected a preset name, a JSON file path or a dict, not " +
                    py::str(py::type::of(o).attr("__name__")).cast<std::string>());
}

ClusterSpec cluster_of(const py::handle& o) {
  if (is_path(o)) return load_cluster(path_string(o));
  if (py::isinstance<py::dict>(o)) return cluster_from_json(to_json_value(o, "cluster"), "cluster");
  throw ConfigError("cluster: expected a preset NAME:GPUS, a JSON file path or a dict, not " +
                    py::str(py::type::of(o).attr("__name__")).cast<std::string>());
}

Calibration calibration_of(const py::handle& o, const ClusterSpec& cluster) {
  if (o.is_none()) return resolve_calibration("", cluster);
  if (is_path(o)) return resolve_calibration(path_string(o), cluster);
  if (py::isinstance<py::dict>(o)) return calibration_from_json(to_json_value(o, "calibration"), "calibration");
  throw ConfigError("calibration: expected None, a JSON file path or a dict");
}

/// A plan file or dict. A dict without "dp" gets the data-parallel degree that fills the cluster, as the CLI's plan
/// flags do.
ParallelPlan plan_of(const py::handle& o, const ClusterSpec& cluster) {
  if (is_path(o)) return load_plan(path_string(o));
  if (!py::isinstance<py::dict>(o)) throw ConfigError("plan: expected a plan JSON file path or a dict");
  json j = to_json_value(o, "plan");
  ParallelPlan p = plan_from_json(j, "plan");
  if (!j.contains("dp")) {
    // Degrees are positive (as validate() says) before the default dp divides the cluster by them.
    for (const auto& [v, name] : {std::pair{p.tp, "tp"}, std::pair{p.pp, "pp"}, std::pair{p.cp, "cp"}})
      if (v < 1) throw ConfigError(std::string("plan: ") + name + " must be positive, got " + std::to_string(v));
    const int per_copy = p.pipeline_copy_gpus();
    if (per_copy <= 0 || cluster.total_gpus() % per_copy != 0)
      throw ConfigError("plan: one pipeline copy needs " + std::to_string(per_copy) +
                        " GPUs, which does not divide the " + std::to_string(cluster.total_gpus()) +
                        " GPUs; give \"dp\" explicitly");
    p.dp = cluster.total_gpus() / per_copy;
  }
  return p;
}

/// Reads the keys of `d` into the fields named in `setters`; an unknown key is a ConfigError naming `what`.
template <typename Fn>
void read_keys(const py::handle& d, const std::string& what, const std::vector<std::pair<const char*, Fn>>& setters) {
  if (d.is_none()) return;
  if (!py::isinstance<py::dict>(d)) throw ConfigError(what + ": expected a dict");
  for (const auto& [k, v] : py::reinterpret_borrow<py::dict>(d)) {
    const std::string key = py::str(k).cast<std::string>();
    bool found = false;
    for (const auto& [name, set] : setters)
      if (key == name) {
        try {
          set(py::reinterpret_borrow<py::object>(v));
        } catch (const py::cast_error&) {
          throw ConfigError(what + ": option '" + key + "' has the wrong type");
        }
        found = true;
        break;
      }
    if (!found) {
      std::string known;
      for (const auto& s : setters) {
        if (!known.empty()) known.append(", ");
        known.append(s.first);
      }
      throw ConfigError(what + ": unknown option '" + key + "' (known: " + known + ")");
    }
  }
}

using Setter = std::function<void(const py::object&)>;

SimulateOptions simulate_options_of(const py::handle& d, const std::string& command) {
  SimulateOptions o;
  o.command = command;
  o.trace = false;
  read_keys<Setter>(
      d, command,
      {{"collectives", [&](const py::object& v) { o.collectives = v.cast<std::string>(); }},
       {"fold", [&](const py::object& v) { o.fold = v.cast<std::string>(); }},
       {"collective_algorithm", [&](const py::object& v) { o.collective_algorithm = v.cast<std::string>(); }},
       {"network", [&](const py::object& v) { o.network = v.cast<std::string>(); }},
       {"engine", [&](const py::object& v) { o.engine = v.cast<std::string>(); }},
       {"channels", [&](const py::object& v) { o.channels = v.cast<int>(); }},
       {"spread_rings", [&](const py::object& v) { o.spread_rings = v.cast<bool>(); }},
       {"interference", [&](const py::object& v) { o.interference = v.cast<bool>(); }},
       {"receive_bound", [&](const py::object& v) { o.receive_bound = v.cast<bool>(); }},
       {"trace", [&](const py::object& v) { o.trace = v.cast<bool>(); }},
       {"trace_links", [&](const py::object& v) { o.trace_links = v.cast<bool>(); }},
       {"trace_ranks", [&](const py::object& v) { o.trace_ranks = v.cast<std::string>(); }},
       {"trace_link_count", [&](const py::object& v) { o.trace_link_count = py::str(v).cast<std::string>(); }},
       {"perfetto", [&](const py::object& v) { o.perfetto = v.cast<bool>(); }},
       {"export_chakra", [&](const py::object& v) { o.export_chakra = v.cast<bool>(); }},
       {"max_memory_bytes", [&](const py::object& v) {
          if (v.is_none()) {
            o.max_memory_bytes = -1.0;  // None: no limit
            return;
          }
          if (py::isinstance<py::bool_>(v)) throw py::cast_error();
          const double bytes = v.cast<double>();
          // As the CLI's --max-memory: a positive finite size (0 and negatives are the API's own encodings).
          if (!(bytes > 0) || !std::isfinite(bytes))
            throw ConfigError(command +
                              ": option 'max_memory_bytes' must be a positive number of bytes or None (no "
                              "limit), got " +
                              py::str(v).cast<std::string>());
          o.max_memory_bytes = bytes;
        }}});
  return o;
}

std::vector<std::string> string_list(const py::handle& o, const std::string& what) {
  std::vector<std::string> out;
  if (o.is_none()) return out;
  if (is_path(o)) return {path_string(o)};
  for (const auto& x : o) {
    if (!is_path(x)) throw ConfigError(what + ": expected a path or a list of paths");
    out.push_back(path_string(x));
  }
  return out;
}

// ---- C++ results -> Python values ---------------------------------------------------------------------------------

py::dict files_dict(const Files& files) {
  py::dict d;
  for (const auto& [name, content] : files) d[py::str(name)] = py::bytes(content);
  return d;
}

py::object plan_dict(const ParallelPlan& p, int num_layers) { return from_json_value(to_json(p, num_layers)); }

py::dict simulate_dict(const SimulateResult& r) {
  py::dict d;
  d["iteration_time_s"] = r.iteration_time_s;
  d["samples_per_s"] = r.samples_per_s;
  d["tokens_per_s"] = r.tokens_per_s;
  d["model_tflops_per_gpu"] = r.model_tflops_per_gpu;
  d["hardware_tflops_per_gpu"] = r.hardware_tflops_per_gpu;
  d["mfu"] = r.mfu;
  d["max_bubble_fraction"] = r.max_bubble_fraction;
  d["peak_bytes"] = r.peak_bytes;
  d["oom"] = r.oom;
  d["engine"] = r.engine;
  d["tasks"] = r.tasks;
  d["activities"] = r.activities;
  py::list ranks;
  for (const auto& rr : r.ranks) {
    py::dict x;
    x["global_rank"] = rr.global_rank;
    x["stage"] = rr.stage;
    x["data"] = rr.data;
    x["tensor"] = rr.tensor;
    x["compute_s"] = rr.compute_s;
    x["exposed_comm_s"] = rr.exposed_comm_s;
    x["bubble_s"] = rr.bubble_s;
    x["gpu_variability_wait_s"] = rr.variability_wait_s;
    x["bubble_fraction"] = rr.bubble_fraction;
    x["peak_bytes"] = rr.peak_bytes;
    x["peak_time_s"] = rr.peak_time_s;
    x["oom_event"] = rr.oom_event;
    x["memory_timeline"] = rr.memory_timeline;
    ranks.append(x);
  }
  d["ranks"] = ranks;
  py::list links;
  for (const auto& l : r.links) {
    py::dict x;
    x["name"] = l.name;
    x["bandwidth_Bps"] = l.bandwidth_Bps;
    x["bytes"] = l.bytes;
    x["busy_s"] = l.busy_s;
    x["peak_utilization"] = l.peak_utilization;
    links.append(x);
  }
  d["links"] = links;
  d["text"] = r.text;
  // The Chakra export's files are named "chakra/..." among the others: apart, without the folder.
  Files files, chakra;
  for (const auto& [name, content] : r.files) {
    if (name.rfind("chakra/", 0) == 0) chakra.emplace_back(name.substr(7), content);
    else files.emplace_back(name, content);
  }
  d["files"] = files_dict(files);
  d["chakra_files"] = files_dict(chakra);
  return d;
}

PlanRequest plan_request_of(const py::dict& kw, const std::string& command) {
  PlanRequest r;
  r.command = command;
  read_keys<Setter>(
      kw, command,
      {{"model", [&](const py::object& v) { r.model = name_of(v, command + ": model"); }},
       {"cluster", [&](const py::object& v) { r.cluster = name_of(v, command + ": cluster"); }},
       {"calibration",
        [&](const py::object& v) { r.calibration = v.is_none() ? "" : name_of(v, command + ": calibration"); }},
       {"stack", [&](const py::object& v) { r.stack = v.is_none() ? "" : path_string(v); }},
       {"global_batch_size", [&](const py::object& v) { r.global_batch_size = v.cast<int>(); }},
       {"memory_limit_bytes", [&](const py::object& v) { r.memory_limit_bytes = v.cast<double>(); }},
       {"tensor_parallel", [&](const py::object& v) { r.tensor_parallel = v.cast<int>(); }},
       {"planner", [&](const py::object& v) { r.planner = v.cast<std::string>(); }},
       {"top", [&](const py::object& v) { r.top = v.cast<int>(); }},
       {"network", [&](const py::object& v) { r.network = v.cast<std::string>(); }},
       {"precision", [&](const py::object& v) { r.precision = v.cast<std::string>(); }},
       {"seq_len", [&](const py::object& v) { r.seq_len = v.cast<int>(); }}});
  if (r.model.empty()) throw ConfigError(command + ": model is required (a preset name or a model JSON file)");
  if (r.cluster.empty()) throw ConfigError(command + ": cluster is required (e.g. dgx-a100:64)");
  if (r.global_batch_size <= 0) throw ConfigError(command + ": global_batch_size is required (a positive integer)");
  return r;
}

py::dict plan_result_dict(const PlanResult& r, int num_layers) {
  py::dict d;
  d["planner"] = r.planner;
  d["considered"] = r.considered;
  d["invalid"] = r.invalid;
  d["over_memory"] = r.over_memory;
  d["pruned"] = r.pruned;
  d["feasible"] = r.feasible;
  d["search_s"] = r.search_s;
  d["simulate_s"] = r.simulate_s;
  py::list cands;
  for (const auto& c : r.candidates) {
    py::dict x;
    x["plan"] = plan_dict(c.plan, num_layers);
    x["description"] = c.description;
    x["predicted_s"] = c.predicted_s;
    x["predicted_peak_bytes"] = c.predicted_peak_bytes;
    x["simulated_s"] = c.simulated_s;
    x["simulated_peak_bytes"] = c.simulated_peak_bytes;
    x["fits"] = c.fits;
    cands.append(x);
  }
  d["candidates"] = cands;
  d["chosen"] = r.chosen;
  d["text"] = r.text;
  d["files"] = files_dict(r.files);
  return d;
}

py::dict status_counts_dict(const SweepStatusCounts& c) {
  py::dict d;
  d["total"] = c.total;
  d["ok_fit"] = c.ok_fit;
  d["ok_over"] = c.ok_over;
  d["oom"] = c.oom;
  d["failed"] = c.failed;
  d["crashed"] = c.crashed;
  return d;
}

// ---- the bound functions ------------------------------------------------------------------------------------------

py::dict presets_py() {
  const Presets p = presets();
  py::dict d;
  d["models"] = p.models;
  d["gpus"] = p.gpus;
  d["clusters"] = p.clusters;
  d["text"] = p.text;
  return d;
}

py::object model_spec_py(const py::object& name) { return from_json_value(to_json(model_of(name))); }
py::object cluster_spec_py(const py::object& name) { return from_json_value(to_json(cluster_of(name))); }
py::object calibration_spec_py(const py::object& cal, const py::object& cluster) {
  return from_json_value(to_json(calibration_of(cal, cluster_of(cluster))));
}

py::dict simulate_py(const py::object& model, const py::object& cluster, const py::object& plan,
                     const py::object& calibration, const py::object& options) {
  Inputs in;
  in.model = model_of(model);
  in.cluster = cluster_of(cluster);
  if (plan.is_none()) throw ConfigError("simulate: plan is required (a plan JSON file or a dict)");
  in.plan = plan_of(plan, in.cluster);
  in.calibration = calibration_of(calibration, in.cluster);
  const SimulateOptions opt = simulate_options_of(options, "simulate");
  SimulateResult r;
  {
    py::gil_scoped_release nogil;
    r = simulate(in, opt);
  }
  return simulate_dict(r);
}

py::dict plan_py(const py::dict& kw) {
  const PlanRequest req = plan_request_of(kw, "plan");
  const int layers = load_model(req.model).num_layers;
  PlanResult r;
  {
    py::gil_scoped_release nogil;
    r = plan(req);
  }
  return plan_result_dict(r, layers);
}

py::dict bakeoff_py(const py::dict& kw) {
  const PlanRequest req = plan_request_of(kw, "bakeoff");
  const int layers = load_model(req.model).num_layers;
  BakeoffResult r;
  {
    py::gil_scoped_release nogil;
    r = bakeoff(req);
  }
  py::dict d;
  py::list planners;
  for (const auto& p : r.planners) planners.append(plan_result_dict(p, layers));
  d["planners"] = planners;
  d["text"] = r.text;
  d["files"] = files_dict(r.files);
  return d;
}

py::dict sweep_py(const py::object& spec, const py::object& out_dir, int jobs, bool prefilter, double timeout_s,
                  bool dry_run, bool verbose) {
  SweepRequest req;
  req.spec = path_string(spec);
  req.out_dir = path_string(out_dir);
  req.jobs = jobs;
  req.prefilter = prefilter;
  req.timeout_s = timeout_s;
  req.dry_run = dry_run;
  SweepResult r;
  {
    py::gil_scoped_release nogil;
    r = sweep(req, verbose ? &std::cout : nullptr, nullptr);
  }
  py::dict d;
  d["out_dir"] = req.out_dir;
  d["models"] = r.models;
  d["clusters"] = r.clusters;
  d["grid_points"] = r.grid_points;
  d["scenarios"] = r.scenarios;
  d["planner_scenarios"] = r.planner_scenarios;
  d["prefiltered"] = r.prefiltered;
  d["skipped"] = r.skipped;
  d["simulated"] = r.simulated;
  d["resumed"] = r.resumed;
  d["retried"] = r.retried;
  d["rows_total"] = r.rows;
  d["rows_ok"] = r.rows_ok;
  d["rows_oom"] = r.rows_oom;
  d["rows_failed"] = r.rows_failed;
  d["rows_crashed"] = r.rows_crashed;
  d["wall_s"] = r.wall_s;
  d["scenarios_per_min"] = r.scenarios_per_min;
  d["text"] = r.text;
  return d;
}

py::dict pareto_py(const py::object& results) {
  const ParetoResult r = pareto(ParetoRequest{path_string(results)});
  py::dict d;
  d["source"] = r.source;
  d["counts"] = status_counts_dict(r.counts);
  py::list fronts;
  for (const auto& f : r.fronts) {
    py::dict x;
    x["model"] = f.model;
    x["gpus"] = f.gpus;
    x["clusters"] = f.clusters;
    x["counts"] = status_counts_dict(f.counts);
    py::list points;
    for (const auto& p : f.points) {
      py::dict q;
      q["id"] = p.id;
      q["index"] = p.index;
      q["strategy"] = p.strategy;
      q["tokens_per_s"] = p.tokens_per_s;
      q["mfu"] = p.mfu;
      q["peak_memory_bytes"] = p.peak_memory_bytes;
      q["duplicates"] = p.duplicates;
      points.append(q);
    }
    x["points"] = points;
    fronts.append(x);
  }
  d["fronts"] = fronts;
  d["text"] = r.text;
  d["files"] = files_dict(r.files);
  return d;
}

py::dict validate_py(const py::object& data, const py::object& calibration, const std::string& split,
                     const std::string& network, int fit_max_gpus, int max_evals) {
  PublishedRequest req;
  if (fit_max_gpus < 0) throw ConfigError("validate: fit_max_gpus must be positive");
  req.fit_max_gpus = fit_max_gpus;
  req.fit_max_evaluations = max_evals;
  req.data = string_list(data, "validate: data");
  if (req.data.empty()) throw ConfigError("validate: data is required (measurement files)");
  req.calibration = calibration.is_none() ? "" : path_string(calibration);
  req.split = split;
  req.network = network;
  PublishedResult r;
  {
    py::gil_scoped_release nogil;
    r = validate_published(req);
  }
  py::dict d;
  d["rows"] = r.rows;
  d["failed"] = r.failed;
  d["mape"] = r.mape;
  d["max_abs_error"] = r.max_abs_error;
  d["mean_error"] = r.mean_error;
  d["spearman_min"] = r.spearman_min;
  d["memory_rows"] = r.memory_rows;
  d["memory_mape"] = r.memory_mape;
  d["memory_max_abs_error"] = r.memory_max_abs_error;
  d["memory_mean_error"] = r.memory_mean_error;
  d["measured_oom_rows"] = r.measured_oom_rows;
  d["measured_oom_predicted"] = r.measured_oom_predicted;
  py::list groups;
  for (const auto& g : r.groups) {
    py::dict x;
    x["group"] = g.group;
    x["rows"] = g.rows;
    x["mape"] = g.mape;
    x["max_abs_error"] = g.max_abs_error;
    x["spearman"] = g.spearman;
    x["memory_rows"] = g.memory_rows;
    x["memory_mape"] = g.memory_mape;
    groups.append(x);
  }
  d["groups"] = groups;
  d["mape_by_feature"] = r.mape_by_feature;
  py::list rows;
  for (const auto& row : r.results) {
    py::dict x;
    x["index"] = row.index;
    x["id"] = row.id;
    x["group"] = row.group;
    x["tp"] = row.plan.tp;
    x["pp"] = row.plan.pp;
    x["dp"] = row.plan.dp;
    x["cp"] = row.plan.cp;
    x["ep"] = row.plan.ep;
    x["micro_batch_size"] = row.plan.micro_batch_size;
    x["global_batch_size"] = row.plan.global_batch_size;
    x["measured_s"] = row.measured_s;
    x["predicted_s"] = row.predicted_s;
    x["error"] = row.error;
    x["compute_s"] = row.compute_s;
    x["exposed_comm_s"] = row.exposed_comm_s;
    x["bubble_s"] = row.bubble_s;
    x["oom"] = row.oom;
    x["failure"] = row.failure;
    x["measured_peak_memory_bytes"] = row.measured_peak_memory_bytes;
    x["predicted_peak_memory_bytes"] = row.predicted_peak_memory_bytes;
    x["memory_error"] = row.memory_error;
    x["measured_oom"] = row.measured_oom;
    x["precision"] = row.precision;
    x["notes"] = row.notes;
    rows.append(x);
  }
  d["results"] = rows;
  if (r.extrapolation) {
    const auto& x = *r.extrapolation;
    py::dict e;
    e["fit_max_gpus"] = x.fit_max_gpus;
    e["fit_rows"] = x.fit_rows;
    e["scored_rows"] = x.scored_rows;
    e["mape"] = x.mape;
    e["mean_error"] = x.mean_error;
    py::dict cals;
    for (const auto& [gpu, what] : x.calibrations) cals[py::str(gpu)] = what;
    e["calibrations"] = cals;
    d["extrapolation"] = e;
  } else {
    d["extrapolation"] = py::none();
  }
  d["text"] = r.text;
  d["files"] = files_dict(r.files);
  return d;
}

py::dict calibrate_compute_py(const py::object& traces, const py::object& gemm_csvs, const py::object& gpu,
                              const py::object& base) {
  CalibrateComputeRequest req;
  req.traces = string_list(traces, "calibrate_compute: traces");
  req.gemm_csvs = string_list(gemm_csvs, "calibrate_compute: gemm_csvs");
  if (req.traces.empty() && req.gemm_csvs.empty())
    throw ConfigError("calibrate_compute: give at least one trace or GEMM sweep CSV");
  req.gpu = gpu.is_none() ? "" : path_string(gpu);
  req.base = base.is_none() ? "" : path_string(base);
  CalibrateComputeResult r;
  {
    py::gil_scoped_release nogil;
    r = calibrate_compute(req);
  }
  py::dict d;
  d["calibration"] = from_json_value(to_json(r.calibration));
  d["gpu"] = r.gpu;
  d["samples"] = r.samples;
  d["median_rel_error"] = r.median_rel_error;
  d["mean_rel_error"] = r.mean_rel_error;
  d["max_rel_error"] = r.max_rel_error;
  d["host_issue_s"] = r.host_issue_s;
  d["notes"] = r.notes;
  d["text"] = r.text;
  d["files"] = files_dict(r.files);
  return d;
}

py::dict calibrate_runs_py(const py::object& data, const py::dict& kw) {
  CalibrateRunsRequest req;
  req.data = string_list(data, "calibrate_runs: data");
  if (req.data.empty()) throw ConfigError("calibrate_runs: give at least one file of measured runs");
  read_keys<Setter>(kw, "calibrate_runs",
                    {{"calibration", [&](const py::object& v) { req.calibration = v.is_none() ? "" : path_string(v); }},
                     {"stack", [&](const py::object& v) { req.stack = v.is_none() ? "" : path_string(v); }},
                     {"fit_max_gpus", [&](const py::object& v) { req.fit_max_gpus = v.cast<int>(); }},
                     {"fit_runs", [&](const py::object& v) { req.fit_runs = v.cast<int>(); }},
                     {"max_evals", [&](const py::object& v) { req.max_evaluations = v.cast<int>(); }},
                     {"noise", [&](const py::object& v) { req.noise = v.cast<double>(); }}});
  CalibrateRunsResult r;
  {
    py::gil_scoped_release nogil;
    r = calibrate_runs(req);
  }
  py::dict d;
  for (const auto& [name, content] : r.files) {
    const auto j = nlohmann::json::parse(content);
    if (name == "calibration.json") d["calibration"] = from_json_value(j);
    else if (name == "stack.json") d["stack"] = from_json_value(j);
    else if (name == "fit_report.json") d["report"] = from_json_value(j);
  }
  d["runs"] = r.runs;
  d["fitted_values"] = r.fitted_values;
  d["rms_before"] = r.rms_before;
  d["rms_after"] = r.rms_after;
  py::list held;
  for (const auto& h : r.held_out) {
    py::dict x;
    x["scale"] = h.scale;
    x["runs"] = h.runs;
    x["mape"] = h.mape;
    x["bias"] = h.bias;
    x["covered"] = h.covered;
    held.append(x);
  }
  d["held_out"] = held;
  d["text"] = r.text;
  d["files"] = files_dict(r.files);
  return d;
}

py::dict calibrate_device_model_py(const py::object& gpu, const py::object& reference, const py::object& base) {
  CalibrateDeviceModelRequest req;
  req.gpu = path_string(gpu);
  req.reference = reference.is_none() ? "" : path_string(reference);
  req.base = base.is_none() ? "" : path_string(base);
  const CalibrateDeviceModelResult r = calibrate_device_model(req);
  py::dict d;
  d["calibration"] = from_json_value(nlohmann::json::parse(r.files.at(0).second));
  d["text"] = r.text;
  d["files"] = files_dict(r.files);
  return d;
}

py::dict replay_py(const py::object& trace, const py::dict& kw) {
  ReplayRequest req;
  req.trace = path_string(trace);
  req.chrome_trace = false;
  read_keys<Setter>(
      kw, "replay",
      {{"member", [&](const py::object& v) { req.member = v.cast<std::string>(); }},
       {"scale_kernels", [&](const py::object& v) { req.scale_kernels = v.cast<std::vector<std::string>>(); }},
       {"collective_bw_scale", [&](const py::object& v) { req.collective_bw_scale = v.cast<double>(); }},
       {"collective_bw_GBps", [&](const py::object& v) { req.collective_bw_GBps = v.cast<double>(); }},
       {"collective_group", [&](const py::object& v) { req.collective_group = v.cast<int>(); }},
       {"collective_alpha_us", [&](const py::object& v) { req.collective_alpha_us = v.cast<double>(); }},
       {"collective_time_scale", [&](const py::object& v) { req.collective_time_scale = v.cast<double>(); }},
       {"cpu_scale", [&](const py::object& v) { req.cpu_scale = v.cast<double>(); }},
       {"runtime_scale", [&](const py::object& v) { req.runtime_scale = v.cast<double>(); }},
       {"launch_latency_us", [&](const py::object& v) { req.launch_latency_us = v.cast<double>(); }},
       {"keep_unexplained_gaps", [&](const py::object& v) { req.keep_unexplained_gaps = v.cast<bool>(); }},
       {"chrome_trace", [&](const py::object& v) { req.chrome_trace = v.cast<bool>(); }}});
  ReplayResult r;
  {
    py::gil_scoped_release nogil;
    r = replay(req);
  }
  py::dict d;
  py::list traces;
  for (const auto& t : r.traces) {
    py::dict x;
    x["source"] = t.source;
    x["rank"] = t.rank;
    x["world_size"] = t.world_size;
    x["measured_span_s"] = static_cast<double>(t.measured_span_ns) * 1e-9;
    x["replayed_span_s"] = static_cast<double>(t.replayed_span_ns) * 1e-9;
    x["error_pct"] = t.error_pct;
    x["edited"] = t.edited;
    x["edits"] = t.edits;
    x["predicted_span_s"] = static_cast<double>(t.predicted_span_ns) * 1e-9;
    x["change_pct"] = t.change_pct;
    traces.append(x);
  }
  d["traces"] = traces;
  d["text"] = r.text;
  d["files"] = files_dict(r.files);
  return d;
}

void write_files_py(const py::object& dir, const py::dict& files) {
  Files f;
  for (const auto& [k, v] : files) {
    const std::string name = py::str(k).cast<std::string>();
    f.emplace_back(name, py::isinstance<py::bytes>(v) ? v.cast<std::string>() : py::str(v).cast<std::string>());
  }
  write_files(path_string(dir), f);
}

}  // namespace
}  // namespace dtsim::python

PYBIND11_MODULE(_dtsim, m) {
  using namespace dtsim::python;
  m.doc() = "dtsim's C++ library (dtsim/dtsim.hpp); use the `dtsim` package, which wraps it.";

  // dtsim::Error and its subclasses become dtsim.errors' classes, with the message the CLI prints.
  static py::object error_type, config_error_type, format_error_type, internal_error_type;
  const py::module_ errors = py::module_::import("dtsim.errors");
  error_type = errors.attr("Error");
  config_error_type = errors.attr("ConfigError");
  format_error_type = errors.attr("FormatError");
  internal_error_type = errors.attr("InternalError");
  // pybind11's translator type is void (*)(std::exception_ptr): the parameter is taken by value.
  py::register_exception_translator([](std::exception_ptr p) {  // NOLINT(performance-unnecessary-value-param)
    try {
      if (p) std::rethrow_exception(p);
    } catch (const dtsim::ConfigError& e) {
      PyErr_SetString(config_error_type.ptr(), e.what());
    } catch (const dtsim::FormatError& e) {
      PyErr_SetString(format_error_type.ptr(), e.what());
    } catch (const dtsim::Error& e) {
      PyErr_SetString(error_type.ptr(), e.what());
    } catch (const dtsim::InternalError& e) {
      PyErr_SetString(internal_error_type.ptr(), e.what());
    } catch (const nlohmann::json::exception& e) {
      PyErr_SetString(format_error_type.ptr(), e.what());
    }
  });

  m.def("version", &dtsim::version);
  m.def("simgrid_version", &dtsim::simgrid_version);
  m.def("presets", &presets_py);
  m.def("model_spec", &model_spec_py);
  m.def("cluster_spec", &cluster_spec_py);
  m.def("calibration_spec", &calibration_spec_py);
  m.def("simulate", &simulate_py);
  m.def("plan", &plan_py);
  m.def("bakeoff", &bakeoff_py);
  m.def("sweep", &sweep_py);
  m.def("pareto", &pareto_py);
  m.def("validate", &validate_py);
  m.def("calibrate_compute", &calibrate_compute_py);
  m.def("calibrate_device_model", &calibrate_device_model_py);
  m.def("calibrate_runs", &calibrate_runs_py);
  m.def("replay", &replay_py);
  m.def("write_files", &write_files_py);
  m.def("default_max_memory_bytes", &dtsim::default_max_memory_bytes);
}
