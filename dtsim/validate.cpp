// Public API, validation: see dtsim/validate.hpp. Each call checks its request (in the order the CLI always has,
// so that the first mistake named is the same), runs the validate/ or sim/replay/ code, and renders `text` and
// `files` exactly as the CLI prints and writes them.
#include "dtsim/validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "sim/model/run_config.hpp"
#include "sim/replay/et_replay.hpp"
#include "sim/replay/replay.hpp"
#include "traces/cluster.hpp"
#include "traces/device_model.hpp"
#include "traces/error.hpp"
#include "traces/kineto_import.hpp"
#include "traces/nccl_tests.hpp"
#include "traces/text.hpp"
#include "traces/units.hpp"
#include "validate/calibrate/compute_fit.hpp"
#include "validate/calibrate/host_issue.hpp"
#include "validate/calibrate/nccl_fit.hpp"
#include "validate/calibrate/runs_fit.hpp"
#include "validate/compare/compare.hpp"
#include "validate/compare/measured_timeline.hpp"
#include "validate/published/cross_validate.hpp"
#include "validate/published/published.hpp"

namespace dtsim {
namespace {

// ---- published measurements ----------------------------------------------------------------------------------

/// The rows of a request's split with the calibration of each row's GPU, as validate_published() and fit() read
/// them.
struct PublishedData {
  std::string data_names;               ///< the files, ", "-separated
  std::vector<sim::PublishedRow> rows;  ///< the split (taken per file: row parity within the file)
  std::map<std::string, Calibration> cal_of_gpu;
  std::string cal_names;  ///< 'name', 'name'
  sim::NetworkMode network = sim::NetworkMode::ANALYTIC;
};

PublishedData load_published_data(const PublishedRequest& req) {
  if (req.data.empty()) throw ConfigError("validate: --data is required");
  PublishedData d;
  std::vector<sim::PublishedRow> all;
  for (const auto& f : req.data) {
    auto part = sim::load_published(f);
    for (auto& r : sim::select_split(part, req.split)) d.rows.push_back(std::move(r));
    for (auto& r : part) all.push_back(std::move(r));
    d.data_names += (d.data_names.empty() ? "" : ", ") + f;
  }
  // One calibration per GPU kind: the request's for rows of its GPU, else each row's GPU's shipped calibration.
  // Rows that could not be expressed (failure set) run on no GPU and need none.
  if (!req.calibration.empty()) {
    Calibration c = load_calibration(req.calibration);
    for (const auto& r : all)
      if (r.failure.empty() && !c.gpu.empty() && r.gpu != c.gpu)
        throw ConfigError("validate: calibration '" + req.calibration + "' is for " + c.gpu + ", but row " +
                          std::to_string(r.index) + " (" + r.group + ") runs on " + r.gpu +
                          "; validate one GPU kind per calibration file");
    for (const auto& r : all)
      if (r.failure.empty()) d.cal_of_gpu.emplace(r.gpu, c);
  } else {
    for (const auto& r : all)
      if (r.failure.empty() && !d.cal_of_gpu.count(r.gpu)) d.cal_of_gpu.emplace(r.gpu, default_calibration(r.gpu));
  }
  for (const auto& [gpu, c] : d.cal_of_gpu) d.cal_names += (d.cal_names.empty() ? "'" : ", '") + c.name + "'";
  if (d.cal_names.empty()) d.cal_names = "(none: no row could be expressed)";
  if (req.network != "analytic" && req.network != "flow")
    throw ConfigError("validate: --network '" + req.network + "' is not known (known: flow, analytic)");
  d.network = req.network == "flow" ? sim::NetworkMode::FLOW : sim::NetworkMode::ANALYTIC;
  return d;
}

/// Whether the results come from a measurements document (rows with labels, memory or notes): the reports then
/// show the memory and per-row columns.
bool has_row_details(const std::vector<sim::RowResult>& results) {
  for (const auto& r : results)
    if (!r.row.id.empty() || !r.row.notes.empty() || r.row.measured_peak_memory_bytes > 0 || r.row.measured_oom)
      return true;
  return false;
}

std::vector<std::string> split_notes(const std::string& notes) {
  std::vector<std::string> out;
  for (std::size_t b = 0; b < notes.size();) {
    const std::size_t e = std::min(notes.find("; ", b), notes.size());
    out.push_back(notes.substr(b, e - b));
    b = e + 2;
  }
  return out;
}

/// The per-row table of a measurements document: time and memory, measured and predicted, with each row's notes
/// (those shared by every row printed once above the table) and failures.
std::string row_table(const std::vector<sim::RowResult>& results) {
  std::vector<std::string> common;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto n = split_notes(results[i].row.notes);
    if (i == 0) common = n;
    else std::erase_if(common, [&](const std::string& c) { return std::find(n.begin(), n.end(), c) == n.end(); });
  }
  std::size_t id_width = 2, group_width = 5;
  for (const auto& r : results) {
    id_width = std::max(id_width, r.row.id.size());
    group_width = std::max(group_width, std::min<std::size_t>(r.row.group.size(), 24));
  }
  const int gw = static_cast<int>(group_width);
  char line[512];
  std::string text = "\nrows (time in s, peak memory in GiB; error = predicted / measured - 1):\n";
  if (!common.empty() && results.size() > 1) {
    text += "notes on every row:";
    for (const auto& c : common) text += " " + c + ";";
    text.back() = '\n';
  }
  std::snprintf(line, sizeof line, "%5s  %-*s  %-*s %10s %10s %8s %9s %9s %8s\n", "row", static_cast<int>(id_width),
                "id", gw, "group", "measured", "predicted", "error", "meas mem", "pred mem", "mem err");
  text += line;
  for (const auto& r : results) {
    const auto& row = r.row;
    std::string meas = row.measured_oom ? "OOM" : "", pred, err, mmem = "-", pmem, merr = "-";
    char buf[64];
    if (!row.measured_oom) std::snprintf(buf, sizeof buf, "%.4g", row.measured_s), meas = buf;
    if (row.measured_peak_memory_bytes > 0)
      std::snprintf(buf, sizeof buf, "%.2f", row.measured_peak_memory_bytes / units::kGiB), mmem = buf;
    if (r.failure.empty()) {
      std::snprintf(buf, sizeof buf, "%.4g%s", r.predicted_s, r.oom ? " OOM" : ""), pred = buf;
      if (!row.measured_oom) std::snprintf(buf, sizeof buf, "%+.1f%%", 100 * r.error), err = buf;
      else err = r.oom ? "agrees" : "no OOM";
      std::snprintf(buf, sizeof buf, "%.2f", r.predicted_peak_memory_bytes / units::kGiB), pmem = buf;
      if (r.has_memory()) std::snprintf(buf, sizeof buf, "%+.1f%%", 100 * r.memory_error), merr = buf;
    } else {
      pred = "FAILED", err = "-", pmem = "-";
    }
    const std::string group = row.group.size() > group_width ? row.group.substr(0, group_width - 1) + "~" : row.group;
    std::snprintf(line, sizeof line, "%5d  %-*s  %-*s %10s %10s %8s %9s %9s %8s\n", row.index,
                  static_cast<int>(id_width), row.id.c_str(), gw, group.c_str(), meas.c_str(), pred.c_str(),
                  err.c_str(), mmem.c_str(), pmem.c_str(), merr.c_str());
    text += line;
    std::string own;
    for (const auto& n : split_notes(row.notes))
      if (results.size() == 1 || std::find(common.begin(), common.end(), n) == common.end())
        own += (own.empty() ? "" : "; ") + n;
    if (!own.empty()) text += "       notes: " + own + "\n";
    if (!r.failure.empty()) text += "       failed: " + r.failure + "\n";
  }
  return text;
}

std::string published_text(const PublishedData& d, const PublishedRequest& req,
                           const std::vector<sim::RowResult>& results, const sim::ValidationScore& sc) {
  char line[2048];
  std::snprintf(line, sizeof line,
                "dtsim %s | validate published | %s | %zu rows (%s split), calibration %s, %s network\n"
                "MAPE %.2f%%  max |error| %.2f%%  mean error %+.2f%%  min Spearman per model %.3f  (%d rows failed)\n",
                DTSIM_VERSION, d.data_names.c_str(), d.rows.size(), req.split.c_str(), d.cal_names.c_str(),
                req.network.c_str(), 100 * sc.mape, 100 * sc.max_abs_error, 100 * sc.mean_error, sc.spearman_min,
                sc.failed);
  std::string text = line;
  if (!sc.failed_by_reason.empty()) {
    text += "failed rows by reason:";
    for (const auto& [reason, n] : sc.failed_by_reason) text += " " + std::to_string(n) + " " + reason + ";";
    text.back() = '\n';
  }
  if (sc.memory_rows > 0) {
    std::snprintf(line, sizeof line,
                  "peak memory: MAPE %.2f%%  max |error| %.2f%%  mean error %+.2f%%  (%d rows with a measured peak)\n",
                  100 * sc.memory_mape, 100 * sc.memory_max_abs_error, 100 * sc.memory_mean_error, sc.memory_rows);
    text += line;
  }
  if (sc.measured_oom_rows > 0) {
    std::snprintf(line, sizeof line,
                  "measured out of memory (no time, not scored): %d rows, %d of them predicted out of memory\n",
                  sc.measured_oom_rows, sc.measured_oom_predicted);
    text += line;
  }
  int fp8 = 0;
  for (const auto& r : results) fp8 += r.row.plan.precision != Precision::BF16 ? 1 : 0;
  if (fp8 > 0) {
    std::snprintf(line, sizeof line, "%d rows ran FP8 linears (predicted with FP8 GEMMs: their recipe in the notes)\n",
                  fp8);
    text += line;
  }
  text += "\n";
  int width = 29;
  for (const auto& g : sc.groups) width = std::max(width, static_cast<int>(g.group.size()));
  const bool memory = sc.memory_rows > 0;
  std::snprintf(line, sizeof line, "%-*s rows   MAPE   max err  Spearman%s\n", width + 1, "model group",
                memory ? "  mem rows  mem MAPE" : "");
  text += line;
  for (const auto& g : sc.groups) {
    std::snprintf(line, sizeof line, "%-*s %5d  %5.2f%%  %6.2f%%  %8.3f", width, g.group.c_str(), g.rows, 100 * g.mape,
                  100 * g.max_abs_error, g.spearman);
    text += line;
    if (memory) {
      if (g.memory_rows > 0) std::snprintf(line, sizeof line, "  %8d  %7.2f%%", g.memory_rows, 100 * g.memory_mape);
      else std::snprintf(line, sizeof line, "  %8d  %8s", 0, "-");
      text += line;
    }
    text += "\n";
  }
  text += "\nMAPE by feature:\n";
  for (const auto& [f, v] : sc.by_feature) {
    std::snprintf(line, sizeof line, "  %-28s %6.2f%%\n", f.c_str(), 100 * v);
    text += line;
  }
  if (!sc.scale_trends.empty()) {
    // Does the error grow with scale? (issue Fidelity: |rho| <= 0.3 over a source spanning >= 8x in GPUs)
    text += "\nscale trend: Spearman of the signed error vs GPU count (rows spanning >= " +
            std::to_string(sim::kScaleTrendMinSpan) + "x in GPUs; |rho| <= 0.3: no trend):\n";
    for (const auto& t : sc.scale_trends) {
      std::snprintf(line, sizeof line,
                    "  %-24s %4d rows  %6d-%-6d GPUs  rho %+.2f  mean error %+.1f%% at %d, %+.1f%% at %d\n",
                    t.series.c_str(), t.rows, t.min_gpus, t.max_gpus, t.spearman, 100 * t.mean_error_small, t.min_gpus,
                    100 * t.mean_error_large, t.max_gpus);
      text += line;
    }
  }
  if (!sc.speedups.empty()) {
    // Pairs of rows differing in one switch: the speedup the source measured and the one predicted.
    text += "\nspeedups of one switch (base time / variant time), measured vs predicted:\n";
    for (const auto& sp : sc.speedups) {
      std::snprintf(line, sizeof line, "  %-12s %-40s -> %-44s %6.3f  %6.3f  %+6.1f points\n", sp.feature.c_str(),
                    sp.base_id.c_str(), sp.variant_id.c_str(), sp.measured, sp.predicted,
                    100 * (sp.predicted - sp.measured));
      text += line;
    }
  }
  if (has_row_details(results)) {
    text += row_table(results);
  } else if (sc.failed > 0) {
    text += "\nfailed rows:\n";
    for (const auto& r : results)
      if (!r.failure.empty()) text += "  row " + std::to_string(r.row.index) + ": " + r.failure + "\n";
  }
  return text;
}

/// A CSV field in double quotes (inner quotes doubled).
std::string csv_quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

nlohmann::json extrapolation_json(const PublishedExtrapolation& x);

Files published_files(const PublishedData& d, const PublishedRequest& req, const std::vector<sim::RowResult>& results,
                      const sim::ValidationScore& sc, const PublishedExtrapolation* extrapolation = nullptr) {
  char line[512];
  const bool details = has_row_details(results);
  nlohmann::json jrows = nlohmann::json::array();
  std::string csv =
      "index,group,gpus,tp,pp,dp,micro_batch,global_batch,measured_s,predicted_s,error,compute_s,exposed_comm_s,"
      "bubble_s,oom,failure";
  csv += details ? ",id,measured_peak_memory_bytes,predicted_peak_memory_bytes,memory_error,measured_oom,precision,"
                   "notes\n"
                 : "\n";
  for (const auto& r : results) {
    const auto& p = r.row.plan;
    nlohmann::json jr = {{"index", r.row.index},
                         {"group", r.row.group},
                         {"plan", to_json(p, r.row.model.num_layers)},
                         {"measured_s", r.row.measured_s},
                         {"predicted_s", r.predicted_s},
                         {"error", r.row.measured_oom ? nlohmann::json() : nlohmann::json(r.error)},
                         {"compute_s", r.compute_s},
                         {"exposed_comm_s", r.exposed_comm_s},
                         {"bubble_s", r.bubble_s},
                         {"oom", r.oom},
                         {"failure", r.failure}};
    // The inputs the row was simulated with, for `dtsim simulate --model M.json --plan P.json --cluster C` (with the
    // row's GPU calibration and the plan's stack, analytic network: its predicted_s).
    if (r.row.failure.empty()) jr["model"] = to_json(r.row.model);
    if (r.row.failure.empty() && !r.row.cluster.empty()) jr["cluster"] = r.row.cluster;
    if (details) {
      jr["predicted_peak_memory_bytes"] = r.predicted_peak_memory_bytes;
      jr["measured_peak_memory_bytes"] =
          r.row.measured_peak_memory_bytes > 0 ? nlohmann::json(r.row.measured_peak_memory_bytes) : nlohmann::json();
      jr["memory_error"] = r.has_memory() ? nlohmann::json(r.memory_error) : nlohmann::json();
      jr["id"] = r.row.id;
      jr["measured_oom"] = r.row.measured_oom;
      jr["precision"] = r.row.precision;
      jr["notes"] = r.row.notes;
    }
    jrows.push_back(std::move(jr));
    std::snprintf(line, sizeof line, "%d,%s,%d,%d,%d,%d,%d,%d,%.9g,%.9g,%.6g,%.9g,%.9g,%.9g,%d,", r.row.index,
                  r.row.group.c_str(), p.world_size(), p.tp, p.pp, p.dp, p.micro_batch_size, p.global_batch_size,
                  r.row.measured_s, r.predicted_s, r.error, r.compute_s, r.exposed_comm_s, r.bubble_s, r.oom ? 1 : 0);
    csv += line + csv_quoted(r.failure);
    if (details) {
      char mem_err[32] = "";
      if (r.has_memory()) std::snprintf(mem_err, sizeof mem_err, "%.6g", r.memory_error);
      std::snprintf(line, sizeof line, ",%.9g,%.9g,%s,%d,", r.row.measured_peak_memory_bytes,
                    r.predicted_peak_memory_bytes, mem_err, r.row.measured_oom ? 1 : 0);
      csv += "," + csv_quoted(r.row.id) + line + r.row.precision + "," + csv_quoted(r.row.notes);
    }
    csv += "\n";
  }
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : sc.groups) {
    nlohmann::json jg = {{"group", g.group},
                         {"rows", g.rows},
                         {"mape", g.mape},
                         {"max_abs_error", g.max_abs_error},
                         {"spearman", g.spearman}};
    if (details) jg["memory_rows"] = g.memory_rows, jg["memory_mape"] = g.memory_mape;
    groups.push_back(std::move(jg));
  }
  nlohmann::json feats = nlohmann::json::object();
  for (const auto& [f, v] : sc.by_feature) feats[f] = v;
  nlohmann::json j = {{"schema", "dtsim.validation"},
                      {"schema_version", 1},
                      {"data", req.data},
                      {"split", req.split},
                      {"calibration", d.cal_of_gpu.empty() ? nlohmann::json() : to_json(d.cal_of_gpu.begin()->second)},
                      {"network", req.network},
                      {"rows", sc.rows},
                      {"failed", sc.failed},
                      {"failed_by_reason",
                       [&] {
                         nlohmann::json a = nlohmann::json::object();
                         for (const auto& [reason, n] : sc.failed_by_reason) a[reason] = n;
                         return a;
                       }()},
                      {"mape", sc.mape},
                      {"max_abs_error", sc.max_abs_error},
                      {"mean_error", sc.mean_error},
                      {"spearman_min", sc.spearman_min},
                      {"groups", groups},
                      {"mape_by_feature", feats},
                      {"scale_trends", sim::scale_trends_json(sc.scale_trends)},
                      {"speedups",
                       [&] {
                         nlohmann::json a = nlohmann::json::array();
                         for (const auto& sp : sc.speedups)
                           a.push_back({{"feature", sp.feature},
                                        {"base", sp.base_id},
                                        {"variant", sp.variant_id},
                                        {"measured", sp.measured},
                                        {"predicted", sp.predicted}});
                         return a;
                       }()},
                      {"results", jrows}};
  if (details) {
    j["memory_rows"] = sc.memory_rows;
    j["memory_mape"] = sc.memory_mape;
    j["memory_max_abs_error"] = sc.memory_max_abs_error;
    j["memory_mean_error"] = sc.memory_mean_error;
    j["measured_oom_rows"] = sc.measured_oom_rows;
    j["measured_oom_predicted"] = sc.measured_oom_predicted;
  }
  if (extrapolation) j["extrapolation"] = extrapolation_json(*extrapolation);
  return {{"validation.json", j.dump(2) + "\n"},
          {"validation.csv", csv},
          {"predicted_vs_measured.svg", sim::scatter_svg(results, "dtsim vs measured: " + d.data_names)}};
}

CompareMetric metric_of(const validate::Metric& m) { return {m.predicted, m.measured, m.error}; }

PublishedRowResult row_result(const sim::RowResult& r) {
  return {r.row.index,
          r.row.group,
          r.row.plan,
          r.row.measured_s,
          r.predicted_s,
          r.error,
          r.compute_s,
          r.exposed_comm_s,
          r.bubble_s,
          r.oom,
          r.failure,
          r.row.id,
          r.row.measured_peak_memory_bytes,
          r.predicted_peak_memory_bytes,
          r.memory_error,
          r.row.measured_oom,
          r.row.precision,
          r.row.notes};
}

/// Scale extrapolation (PublishedRequest::fit_max_gpus): each GPU kind of the rows with more GPUs gets its calibration
/// refit (from the one the rows would otherwise use) on that GPU's timed rows with at most fit_max_gpus GPUs, and
/// the rows with more are scored with it. A GPU with fewer fit rows than twice the fit's parameters (the rule of the
/// leave-one-source-out refits), or whose fit rows do not all simulate, keeps its calibration, and the report says so.
PublishedExtrapolation extrapolate(const PublishedData& d, const PublishedRequest& req) {
  PublishedExtrapolation x;
  x.fit_max_gpus = req.fit_max_gpus;
  std::vector<sim::PublishedRow> scored;
  std::map<std::string, std::vector<sim::PublishedRow>> fit_rows;
  for (const auto& r : d.rows) {
    if (!r.failure.empty() || r.measured_oom) continue;
    if (r.plan.world_size() > req.fit_max_gpus) scored.push_back(r);
    else fit_rows[r.gpu].push_back(r);
  }
  if (scored.empty())
    throw ConfigError("validate published --fit-max-gpus " + std::to_string(req.fit_max_gpus) +
                      ": no row has more GPUs, so nothing is left to score");
  std::map<std::string, Calibration> cal = d.cal_of_gpu;
  const std::size_t need = 2 * sim::fitted_fields().size();
  for (auto& [gpu, c] : cal) {
    if (std::none_of(scored.begin(), scored.end(), [&](const sim::PublishedRow& r) { return r.gpu == gpu; })) continue;
    const auto& rows = fit_rows[gpu];
    char what[512];
    if (rows.size() < 3) {
      std::snprintf(what, sizeof what,
                    "not refit: %zu timed rows with at most %d GPUs (3 needed); its calibration as given", rows.size(),
                    req.fit_max_gpus);
    } else if (rows.size() < need) {
      // Too few rows for the full fit: the hardware values these rows identify (`calibrate runs`' fit), the
      // stack values as each row's stack gives them.
      sim::RunsFitOptions opt;
      opt.max_evaluations = req.fit_max_evaluations;
      opt.hardware_only = true;
      try {
        const auto fit = sim::fit_runs(rows, c, stack_profile(kDefaultStack), opt);
        c = sim::with_fitted_hardware(c, fit);
        x.fit_rows += static_cast<int>(rows.size());
        std::string fitted;
        for (const auto& v : fit.values)
          if (v.fitted) fitted += (fitted.empty() ? "" : ", ") + v.field;
        std::snprintf(what, sizeof what,
                      "%zu rows with at most %d GPUs, too few for the full fit (%zu): refit what they identify (%s), "
                      "rms %.2f%% -> %.2f%%",
                      rows.size(), req.fit_max_gpus, need, fitted.empty() ? "nothing" : fitted.c_str(),
                      100 * fit.rms_before, 100 * fit.rms_after);
      } catch (const ConfigError& e) {
        std::snprintf(what, sizeof what, "not refit (%s); its calibration as given", e.what());
      }
    } else {
      const auto fr = sim::fit_published(rows, c, req.fit_max_evaluations, req.fit_max_error_weight);
      if (!(fr.objective_before < 1e8)) {
        std::snprintf(what, sizeof what,
                      "not refit: a row with at most %d GPUs does not simulate; its calibration as "
                      "given",
                      req.fit_max_gpus);
      } else {
        c = fr.calibration;
        x.fit_rows += static_cast<int>(rows.size());
        std::snprintf(what, sizeof what,
                      "refit on %zu rows with at most %d GPUs: objective %.2f%% -> %.2f%% in %d "
                      "evaluations",
                      rows.size(), req.fit_max_gpus, 100 * fr.objective_before, 100 * fr.objective_after,
                      fr.evaluations);
      }
    }
    x.calibrations.emplace_back(gpu, what);
  }
  const auto results = sim::predict_rows(
      scored, [&](const sim::PublishedRow& r) -> const Calibration& { return cal.at(r.gpu); }, d.network);
  const auto sc = sim::score(results);
  x.scored_rows = sc.rows;
  x.mape = sc.mape;
  x.mean_error = sc.mean_error;
  for (const auto& r : results) x.results.push_back(row_result(r));
  return x;
}

std::string extrapolation_text(const PublishedExtrapolation& x) {
  char line[256];
  std::snprintf(line, sizeof line,
                "extrapolation: fit on %d rows with at most %d GPUs, scored %d rows with more: MAPE %.2f%%, bias "
                "%+.2f%%\n",
                x.fit_rows, x.fit_max_gpus, x.scored_rows, 100 * x.mape, 100 * x.mean_error);
  std::string t = line;
  for (const auto& [gpu, what] : x.calibrations) t += "  " + gpu + ": " + what + "\n";
  return t;
}

nlohmann::json extrapolation_json(const PublishedExtrapolation& x) {
  nlohmann::json cals = nlohmann::json::object(), rows = nlohmann::json::array();
  for (const auto& [gpu, what] : x.calibrations) cals[gpu] = what;
  for (const auto& r : x.results)
    rows.push_back({{"index", r.index},
                    {"id", r.id},
                    {"gpus", r.plan.world_size()},
                    {"measured_s", r.measured_s},
                    {"predicted_s", r.predicted_s},
                    {"error", r.error},
                    {"failure", r.failure}});
  return {{"fit_max_gpus", x.fit_max_gpus},
          {"fit_rows", x.fit_rows},
          {"scored_rows", x.scored_rows},
          {"mape_pct", 100 * x.mape},
          {"bias_pct", 100 * x.mean_error},
          {"calibrations", cals},
          {"results", rows}};
}

}  // namespace

PublishedResult validate_published(const PublishedRequest& req) {
  if (req.fit_max_gpus < 0) throw ConfigError("validate published: --fit-max-gpus must be positive");
  if (req.fit_max_gpus > 0 && req.fit_max_evaluations < 10)
    throw ConfigError("validate published --fit-max-gpus: --max-evals must be at least 10");
  if (req.fit_max_gpus > 0 && !(req.fit_max_error_weight >= 0))
    throw ConfigError("validate published --fit-max-gpus: --max-error-weight must be at least 0");
  const PublishedData d = load_published_data(req);
  const auto results = sim::predict_rows(
      d.rows, [&](const sim::PublishedRow& r) -> const Calibration& { return d.cal_of_gpu.at(r.gpu); }, d.network);
  const auto sc = sim::score(results);
  if (sc.rows == 0 && sc.measured_oom_rows == 0) {
    // Nothing to score: a MAPE of zero rows would read as a perfect prediction.
    std::string first;
    for (const auto& r : results)
      if (!r.failure.empty()) {
        first = r.failure;
        break;
      }
    throw ConfigError("validate published: no row could be scored (" + std::to_string(results.size()) + " rows, " +
                      std::to_string(sc.failed) + " failed" + (first.empty() ? "" : "; the first: " + first) + ")");
  }
  PublishedResult out;
  out.rows = sc.rows;
  out.failed = sc.failed;
  out.mape = sc.mape;
  out.max_abs_error = sc.max_abs_error;
  out.mean_error = sc.mean_error;
  out.spearman_min = sc.spearman_min;
  out.memory_rows = sc.memory_rows;
  out.memory_mape = sc.memory_mape;
  out.memory_max_abs_error = sc.memory_max_abs_error;
  out.memory_mean_error = sc.memory_mean_error;
  out.measured_oom_rows = sc.measured_oom_rows;
  out.measured_oom_predicted = sc.measured_oom_predicted;
  for (const auto& g : sc.groups)
    out.groups.push_back({g.group, g.rows, g.mape, g.max_abs_error, g.spearman, g.memory_rows, g.memory_mape});
  out.mape_by_feature = sc.by_feature;
  for (const auto& r : results) out.results.push_back(row_result(r));
  out.text = published_text(d, req, results, sc);
  if (req.fit_max_gpus > 0) {
    out.extrapolation = extrapolate(d, req);
    out.text += extrapolation_text(*out.extrapolation);
  }
  out.files = published_files(d, req, results, sc, out.extrapolation ? &*out.extrapolation : nullptr);
  return out;
}

CrossValidateResult cross_validate(const FitRequest& req) {
  if (req.data.size() < 2) throw ConfigError("validate published --cross-validate: give at least two --data sources");
  if (req.max_evaluations < 10)
    throw ConfigError("validate published --cross-validate: --max-evals must be at least 10");
  if (req.split != "all") throw ConfigError("validate published --cross-validate: the sources are whole (no --split)");
  std::vector<sim::CvSource> sources;
  for (const auto& path : req.data)
    sources.push_back({std::filesystem::path(path).filename().string(), sim::load_published(path)});
  const sim::CvReport rep = sim::cross_validate(sources, req.max_evaluations, req.max_error_weight);
  if (rep.rows == 0)
    throw ConfigError("validate published --cross-validate: no row of the " + std::to_string(sources.size()) +
                      " sources could be scored");
  CrossValidateResult out;
  out.rows = rep.rows;
  out.pooled_mape = rep.pooled_mape;
  out.covered = rep.covered;
  out.banded = rep.banded;
  out.text = "dtsim " DTSIM_VERSION " | validate published --cross-validate | " + std::to_string(sources.size()) +
             " sources, analytic network\n" + sim::cv_text(rep);
  const auto j = sim::cv_json(rep);
  out.files.push_back({"cross_validation.json", j.dump(2) + "\n"});
  out.files.push_back(
      {"bands.json",
       nlohmann::json{
           {"schema", "dtsim.error_bands"}, {"schema_version", 1}, {"sources", req.data}, {"bands", j.at("bands")}}
               .dump(2) +
           "\n"});
  return out;
}

FitResult fit(const FitRequest& req) {
  const PublishedData d = load_published_data(req);
  if (req.max_evaluations < 10) throw ConfigError("validate fit: --max-evals must be at least 10");
  if (d.cal_of_gpu.size() > 1)
    throw ConfigError("validate fit: the rows run on " + std::to_string(d.cal_of_gpu.size()) +
                      " GPU kinds; fit one GPU kind at a time");
  const double tail_weight = req.max_error_weight;
  if (!(tail_weight >= 0)) throw ConfigError("validate fit: --max-error-weight must be at least 0");
  auto fr = sim::fit_published(d.rows, d.cal_of_gpu.begin()->second, req.max_evaluations, tail_weight);
  // The objective is 1e9 while any row fails (validate/published/published.cpp): nothing was fitted.
  if (!(fr.objective_before < 1e8))
    throw ConfigError("validate fit: some of the " + std::to_string(d.rows.size()) +
                      " rows cannot be simulated, so nothing can be fitted (`dtsim validate published` names each "
                      "failure)");
  nlohmann::json prov = fr.calibration.provenance.is_object() ? fr.calibration.provenance : nlohmann::json::object();
  prov["fit"] = {{"sources", req.data},
                 {"split", req.split},
                 {"rows", d.rows.size()},
                 {"method",
                  "Nelder-Mead on log parameters minimising the mean over model groups of each group's "
                  "MAPE of predicted iteration times plus max_error_weight times the group's largest "
                  "|error| (analytic network engine); one value per parameter for all rows"},
                 {"max_error_weight", tail_weight},
                 {"fitted", sim::fitted_fields()},
                 {"objective_before", fr.objective_before},
                 {"objective_after", fr.objective_after},
                 {"evaluations", fr.evaluations}};
  fr.calibration.provenance = prov;
  const Calibration& c = fr.calibration;
  char line[512];
  std::snprintf(line, sizeof line,
                "dtsim %s | validate fit | %zu rows (%s split) | objective %.2f%% -> %.2f%% in %d evaluations\n"
                "gemm_efficiency_max %.4f  gemm_half_efficiency_flops %.4g  memory_bandwidth_efficiency %.4f  "
                "kernel_launch_s %.3g  intra_bandwidth_efficiency %.4f  host_issue_s %.3g  "
                "collective_step_overhead_s %.3g  p2p_overhead_s %.3g  gemm_misaligned_efficiency %.4f  "
                "host_collective_issue_s %.3g  gemm_efficiency_exponent %.3f\n",
                DTSIM_VERSION, d.rows.size(), req.split.c_str(), 100 * fr.objective_before, 100 * fr.objective_after,
                fr.evaluations, c.gemm_efficiency_max, c.gemm_half_efficiency_flops, c.memory_bandwidth_efficiency,
                c.kernel_launch_s, c.intra_bandwidth_efficiency, c.host_issue_s, c.collective_step_overhead_s,
                c.p2p_overhead_s, c.gemm_misaligned_efficiency, c.host_collective_issue_s, c.gemm_efficiency_exponent);
  FitResult out;
  out.calibration = fr.calibration;
  out.rows = d.rows.size();
  out.objective_before = fr.objective_before;
  out.objective_after = fr.objective_after;
  out.evaluations = fr.evaluations;
  out.text = line;
  out.files = {{"calibration.json", to_json(fr.calibration).dump(2) + "\n"}};
  return out;
}

MeasuredResult validate_measured(const MeasuredRequest& req) {
  const auto rc = sim::load_run_config(req.predicted_dir);
  const auto m = exec::load_measurements(req.measurements_file);
  const auto t = exec::measured_timeline(rc, m);
  MeasuredResult out;
  out.device = m.device_name;
  out.compute_tasks = t.compute_tasks;
  out.measured_tasks = t.measured_tasks;
  out.iteration_time_s = t.summary.at("results").at("iteration_time_s").get<double>();
  char line[256];
  std::snprintf(line, sizeof line, "measured on %s: %zu of %zu compute tasks; re-timed iteration %.6f s\n",
                m.device_name.c_str(), t.measured_tasks, t.compute_tasks, out.iteration_time_s);
  out.text = line;
  for (const auto& r : m.ranks)
    if (!r.ok) {
      out.failed_ranks.push_back({r.sim_rank, r.global_rank, r.error});
      out.text += "rank " + std::to_string(r.sim_rank) + " (global " + std::to_string(r.global_rank) +
                  ") failed: " + r.error + "\n";
    }
  out.files = {{"summary.json", t.summary.dump(2) + "\n"}, {"trace.json", t.trace}};
  return out;
}

CompareResult compare(const CompareRequest& req) {
  const validate::Timeline predicted = validate::load_timeline(req.predicted_dir);
  const validate::Timeline measured = validate::load_timeline(req.measured_dir);
  const validate::CompareReport report = validate::compare(predicted, measured);
  CompareResult out;
  out.iteration_time_s = metric_of(report.iteration_time_s);
  out.matched_tasks = report.tasks.size();
  out.only_predicted_tasks = report.only_predicted.count;
  out.only_measured_tasks = report.only_measured.count;
  for (const auto& [rank, r] : report.ranks)
    out.ranks.push_back({rank, metric_of(r.compute_s), metric_of(r.exposed_comm_s), metric_of(r.bubble_s)});
  for (const auto& [phase, m] : report.phase_compute_s) out.phase_compute_s.emplace(phase, metric_of(m));
  for (const auto& [rank, m] : report.peak_memory_bytes) out.peak_memory_bytes.emplace(rank, metric_of(m));
  out.compute_tasks = report.compute_tasks.count;
  out.compute_task_mape = report.compute_tasks.mape;
  out.compute_task_weighted_mape = report.compute_tasks.weighted_mape;
  out.compute_task_max_abs_error = report.compute_tasks.max_abs_error;
  out.text = validate::report_text(report);
  out.files = {{"compare.json", validate::report_json(report).dump(2) + "\n"},
               {"compare_trace.json", validate::compare_trace_json(predicted, measured)}};
  return out;
}

CalibrateNcclResult calibrate_nccl_tests(const CalibrateNcclRequest& req) {
  const ClusterSpec cluster = load_cluster(req.cluster);
  const Calibration base = calibration_or_default(req.calibration, cluster.gpu.name);
  const NcclTestsRun run = load_nccl_tests(req.log);
  auto fit = sim::fit_nccl_tests(run, cluster, base, req.op, req.ranks, req.log);
  fit.calibration.validate("fitted calibration");
  CalibrateNcclResult out;
  out.link = fit.link;
  out.sizes = run.rows.size();
  for (const auto& p : fit.points) out.points.push_back({p.bytes, p.measured_s, p.predicted_s});
  out.mean_rel_error = fit.mean_rel_error;
  out.max_rel_error = fit.max_rel_error;
  out.text =
      "fitted " + fit.link + " segments from " + std::to_string(run.rows.size()) + " sizes of " + req.log + ":\n";
  char line[160];
  for (const auto& g : fit.calibration.network_segments)
    if (g.link == fit.link) {
      std::snprintf(line, sizeof line, "  ring-step messages <= %-12.6g B: latency x %.3f, bandwidth x %.3f\n",
                    g.max_bytes, g.latency_factor, g.bandwidth_factor);
      out.text += line;
    }
  if (req.out_dir.empty())
    std::snprintf(line, sizeof line, "residuals: mean %.2f%%, max %.2f%%\n", 100 * fit.mean_rel_error,
                  100 * fit.max_rel_error);
  else
    std::snprintf(line, sizeof line, "residuals: mean %.2f%%, max %.2f%% | wrote %s\n", 100 * fit.mean_rel_error,
                  100 * fit.max_rel_error, (req.out_dir + "/calibration.json").c_str());
  out.text += line;
  out.files = {{"calibration.json", to_json(fit.calibration).dump(2) + "\n"}};
  out.calibration = std::move(fit.calibration);
  return out;
}

CalibrateComputeResult calibrate_compute(const CalibrateComputeRequest& req) {
  namespace fs = std::filesystem;
  if (req.traces.empty() && req.gemm_csvs.empty())
    throw ConfigError("calibrate compute: give at least one --trace FILE or --gemm-csv FILE");
  // Traces, one per rank for archives; sources are named by file name (no directory), so outputs do not depend
  // on where the inputs lie.
  if (!req.stack.empty() && req.traces.empty())
    throw ConfigError(
        "calibrate compute: --stack needs a --trace (stack.json carries the host issue time a trace measures)");
  const StackProfile base_stack = stack_profile(req.stack.empty() ? kDefaultStack : req.stack);
  std::vector<std::pair<ImportedTrace, std::string>> imported;
  for (const auto& path : req.traces) {
    const std::string name = fs::path(path).filename().string();
    auto ends = [&](const std::string& suffix) {
      return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends(".tar.gz") || ends(".tgz") || ends(".tar")) {
      for (auto& t : import_kineto_archive(path)) {
        const std::string member = t.source.substr(std::min(t.source.size(), path.size() + 1));
        imported.emplace_back(std::move(t), name + ":" + member);
      }
    } else {
      imported.emplace_back(import_kineto(path), name);
    }
  }
  GpuSpec gpu;
  if (!req.gpu.empty()) {
    gpu = sim::load_gpu(req.gpu);
  } else if (!imported.empty()) {
    gpu = sim::trace_gpu(imported.front().first, imported.front().second);
    for (const auto& [t, name] : imported) {
      const GpuSpec g = sim::trace_gpu(t, name);
      if (g.name != gpu.name)
        throw ConfigError("calibrate compute: " + name + " ran on " + g.name + " but " + imported.front().second +
                          " on " + gpu.name + "; fit one GPU at a time or pass --gpu");
    }
  } else {
    throw ConfigError("calibrate compute: --gpu is required when only GEMM CSVs are given");
  }
  Calibration base;
  const std::string base_name = !req.base.empty() ? req.base : gpu.name;
  if (!req.base.empty() && fs::is_regular_file(base_name)) {
    base = load_calibration(base_name);
  } else {
    try {
      base = default_calibration(base_name);
    } catch (const ConfigError&) {
      throw ConfigError("calibrate compute: no built-in calibration for '" + base_name + "'; pass --base FILE.json");
    }
  }
  sim::ComputeSamples samples;
  for (const auto& [t, name] : imported) samples.append(sim::samples_from_trace(t, gpu, name));
  for (const auto& path : req.gemm_csvs) samples.append(sim::load_gemm_csv(path, gpu));
  const auto fit = sim::fit_compute(std::move(samples), gpu, base);
  CalibrateComputeResult out;
  out.calibration = fit.calibration;
  out.gpu = fit.gpu.name;
  out.samples = fit.points.size();
  out.median_rel_error = fit.all_residuals.median;
  out.mean_rel_error = fit.all_residuals.mean;
  out.max_rel_error = fit.all_residuals.max;
  out.notes = fit.notes;
  out.text = sim::summary_text(fit);
  std::vector<sim::HostIssueMeasurement> host;
  for (const auto& [t, name] : imported) host.push_back(sim::measure_host_issue(t, name));
  out.host_issue_s = sim::median_host_issue_s(host);
  if (!host.empty()) {
    out.text += sim::host_issue_text(host);
    if (out.host_issue_s > 0)
      out.text += format_number("host issue: median %.1f us per launch", out.host_issue_s * 1e6) +
                  " (a stack value: in stack.json, not in calibration.json)\n";
    out.calibration.provenance["host_issue"] = sim::host_issue_json(host);
  }
  out.files = {{"calibration.json", to_json(out.calibration).dump(2) + "\n"}, {"points.csv", sim::points_csv(fit)}};
  if (out.host_issue_s > 0) {
    // The stack the user runs, with the host issue time their traces measure (a stack value, kept apart from the
    // hardware calibration as calibrate runs keeps it).
    StackProfile stack = base_stack;
    const double before = stack.host_issue_s;
    stack.host_issue_s = out.host_issue_s;
    stack.fitted_on.clear();
    for (const auto& m : host)
      if (m.usable) stack.fitted_on.push_back(m.source);
    stack.provenance["host_issue_s"] =
        "measured by dtsim calibrate compute: the median over " + std::to_string(stack.fitted_on.size()) +
        " traces of the issuing thread's CPU-operator time outside waits for the GPU, per launch "
        "(validate/calibrate/host_issue.hpp); the profile's own value was " +
        format_number("%.4g s", before);
    out.files.emplace_back("stack.json", to_json(stack).dump(2) + "\n");
  }
  if (!req.out_dir.empty()) {
    out.text += "wrote " + req.out_dir + "/calibration.json, " + req.out_dir + "/points.csv";
    out.text += out.host_issue_s > 0
                    ? " and " + req.out_dir + "/stack.json (the stack with the measured host issue time)\n"
                    : "\n";
  }
  return out;
}

CalibrateDeviceModelResult calibrate_device_model(const CalibrateDeviceModelRequest& req) {
  if (req.gpu.empty())
    throw ConfigError("calibrate device-model: --gpu is required (the GPU to derive a calibration for)");
  const GpuSpec target = sim::load_gpu(req.gpu);
  const GpuSpec reference_gpu = sim::load_gpu(req.reference.empty() ? "h100-sxm5-80gb" : req.reference);
  Calibration reference;
  std::string source;
  if (!req.base.empty()) {
    reference = load_calibration(req.base);
    source = req.base;
  } else {
    try {
      reference = default_calibration(reference_gpu.name);
    } catch (const ConfigError&) {
      throw ConfigError("calibrate device-model: no built-in calibration for '" + reference_gpu.name +
                        "'; pass --base FILE.json (its measured calibration)");
    }
    source = "traces/calibration/" + reference_gpu.name + ".json";
  }
  if (reference.gpu != reference_gpu.name)
    throw ConfigError("calibrate device-model: the base calibration is for '" + reference.gpu +
                      "', the reference is '" + reference_gpu.name + "'");
  CalibrateDeviceModelResult out;
  out.calibration = device_model_calibration(reference, reference_gpu, target, source);
  const DeviceModelScaling s = device_model_scaling(reference, reference_gpu, target);
  char line[512];
  std::snprintf(line, sizeof line,
                "device model: %s (%.0f W, BF16 peak %.0f TFLOP/s) from %s (%.0f W, measured sustained %.0f TFLOP/s)\n"
                "  power-limited BF16 throughput %.0f TFLOP/s -> gemm_efficiency_max %.4f (reference %.4f)%s\n"
                "  flash_attention_efficiency %.4f, gemm_half_efficiency_flops %.4g; other values copied\n",
                target.name.c_str(), target.board_power_w, target.peak_bf16_flops / 1e12, reference_gpu.name.c_str(),
                reference_gpu.board_power_w, s.reference_sustained_flops / 1e12, s.power_limited_flops / 1e12,
                s.gemm_efficiency_max, reference.gemm_efficiency_max,
                s.power_limited ? "" : " (capped at the reference's)", out.calibration.flash_attention_efficiency,
                out.calibration.gemm_half_efficiency_flops);
  out.text = line;
  // Software-stack values the reference does not pin stay unpinned (absent from the file), so a stack profile still
  // fills them in, as for the reference.
  nlohmann::json j = to_json(out.calibration);
  for (const auto& f : kSoftwareFields) {
    if (out.calibration.pinned(f)) continue;
    j["compute"].erase(f);
    j["network"].erase(f);
  }
  if (!req.out_dir.empty()) out.text += "wrote " + req.out_dir + "/calibration.json\n";
  out.files = {{"calibration.json", j.dump(2) + "\n"}};
  return out;
}

CalibrateRunsResult calibrate_runs(const CalibrateRunsRequest& req) {
  if (req.data.empty()) throw ConfigError("calibrate runs: --data FILE is required (measured runs)");
  if (req.fit_max_gpus < 0 || req.fit_runs < 0)
    throw ConfigError("calibrate runs: --fit-max-gpus and --fit-runs must not be negative");
  if (req.max_evaluations < 1 || req.max_evaluations > 100000)
    throw ConfigError("calibrate runs: --max-evals must be in [1, 100000]");
  if (!(req.noise > 0 && req.noise < 1)) throw ConfigError("calibrate runs: --noise must be in (0, 1)");
  std::vector<sim::PublishedRow> rows;
  std::vector<std::string> sources;
  for (const auto& f : req.data) {
    for (auto& r : sim::load_published(f)) rows.push_back(std::move(r));
    sources.push_back(std::filesystem::path(f).filename().string());
  }
  // The fit's runs: at most fit_max_gpus GPUs, then at most fit_runs of them evenly spaced; the rest are held out.
  std::vector<sim::PublishedRow> eligible, fit_rows, held;
  for (auto& r : rows)
    (req.fit_max_gpus == 0 || r.plan.world_size() <= req.fit_max_gpus ? eligible : held).push_back(r);
  if (req.fit_runs > 0 && static_cast<std::size_t>(req.fit_runs) < eligible.size()) {
    const double stride = static_cast<double>(eligible.size()) / req.fit_runs;
    std::vector<bool> pick(eligible.size(), false);
    for (int i = 0; i < req.fit_runs; ++i) pick[static_cast<std::size_t>(std::floor(i * stride))] = true;
    for (std::size_t i = 0; i < eligible.size(); ++i) (pick[i] ? fit_rows : held).push_back(eligible[i]);
  } else {
    fit_rows = eligible;
  }
  std::string gpu;
  for (const auto& r : fit_rows)
    if (r.failure.empty()) gpu = r.gpu;
  if (gpu.empty()) throw ConfigError("calibrate runs: no run to fit on (none expressible within the selection)");
  const Calibration hardware = calibration_or_default(req.calibration, gpu);
  std::string stack_name = req.stack;
  if (stack_name.empty()) {
    for (const auto& r : fit_rows) {
      if (!r.failure.empty()) continue;
      const std::string s = r.plan.stack.empty() ? kDefaultStack : r.plan.stack;
      if (stack_name.empty()) stack_name = s;
      else if (s != stack_name)
        throw ConfigError("calibrate runs: the runs name several stacks ('" + stack_name + "', '" + s +
                          "'); fit one stack's runs, or give --stack");
    }
  }
  const StackProfile stack = stack_profile(stack_name);
  sim::RunsFitOptions opt;
  opt.max_evaluations = req.max_evaluations;
  opt.noise = req.noise;
  opt.sources = sources;
  const sim::RunsFit fit = sim::fit_runs(fit_rows, hardware, stack, opt);

  CalibrateRunsResult out;
  out.calibration = fit.calibration;
  out.stack = fit.stack;
  out.runs = static_cast<int>(fit.runs.size());
  for (const auto& v : fit.values) out.fitted_values += v.fitted;
  out.rms_before = fit.rms_before;
  out.rms_after = fit.rms_after;
  out.text = sim::runs_fit_text(fit);
  nlohmann::json report = sim::runs_fit_json(fit);
  // Held-out runs, predicted with the fit (its stack's values for every run, pinned, as the fit ran them).
  std::vector<sim::PublishedRow> scored;
  for (const auto& r : held)
    if (r.failure.empty() && r.measure == "iteration" && r.measured_s > 0 && r.gpu == gpu) scored.push_back(r);
  if (!scored.empty()) {
    const auto results = sim::predict_rows(scored, fit.calibration, sim::NetworkMode::ANALYTIC);
    nlohmann::json hj = nlohmann::json::array();
    for (const char* scale : {"1-node", "multi-node"}) {
      CalibrateRunsResult::HeldOut h;
      h.scale = scale;
      const auto band =
          std::find_if(fit.bands.begin(), fit.bands.end(), [&](const AccuracyBand& b) { return b.key == scale; });
      std::vector<sim::RowResult> of_scale;
      for (const auto& r : results) {
        if (!r.failure.empty() || sim::scale_class(r.row) != scale) continue;
        of_scale.push_back(r);
        const double lr = std::log(r.row.measured_s / r.predicted_s);
        if (band != fit.bands.end() && lr >= band->q05 && lr <= band->q95) ++h.covered;
      }
      const sim::ValidationScore sc = sim::score(of_scale);
      if (sc.rows == 0) continue;
      h.runs = sc.rows;
      h.mape = sc.mape;
      h.bias = sc.mean_error;
      out.held_out.push_back(h);
      hj.push_back(
          {{"scale", h.scale},
           {"runs", h.runs},
           {"mape", h.mape},
           {"bias", h.bias},
           {"covered_by_fit_interval", band != fit.bands.end() ? nlohmann::json(h.covered) : nlohmann::json(nullptr)}});
      char line[256];
      std::snprintf(
          line, sizeof line, "held out (%s): %d runs predicted with the fit, MAPE %.2f%%, bias %+.2f%%%s\n", scale,
          h.runs, 100 * h.mape, 100 * h.bias,
          band != fit.bands.end() ? (", " + std::to_string(h.covered) + " inside the fit's 90% interval").c_str() : "");
      out.text += line;
    }
    report["held_out"] = hj;
  }
  out.files = {{"calibration.json", sim::runs_fit_calibration_json(fit, sources).dump(2) + "\n"},
               {"stack.json", sim::runs_fit_stack_json(fit).dump(2) + "\n"},
               {"fit_report.json", report.dump(2) + "\n"}};
  if (!req.out_dir.empty())
    out.text += "wrote " + req.out_dir + "/calibration.json, stack.json, fit_report.json; use them with\n  dtsim " +
                "simulate ... --calibration " + req.out_dir + "/calibration.json --stack " + req.out_dir +
                "/stack.json\n";
  return out;
}

namespace {

bool is_chakra_request(const ReplayRequest& req) {
  auto et = [](const std::string& p) {
    return (p.size() >= 3 && p.compare(p.size() - 3, 3, ".et") == 0) ||
           (p.size() >= 6 && p.compare(p.size() - 6, 6, ".et.gz") == 0);
  };
  if (!req.more_traces.empty() || std::filesystem::is_directory(req.trace) || et(req.trace)) {
    if (!req.member.empty()) throw ConfigError("replay: --member applies to Kineto archives, not to Chakra traces");
    return true;
  }
  return false;
}

ReplayResult replay_chakra(const ReplayRequest& req, const sim::ReplayOptions& opt) {
  std::vector<std::string> paths{req.trace};
  paths.insert(paths.end(), req.more_traces.begin(), req.more_traces.end());
  const sim::EtWorkload w = sim::load_et_workload(paths, req.comm_groups);
  const sim::EtReplayReport rep = sim::replay_et(w, opt);
  ReplayResult out;
  out.format = "chakra-et";
  out.span_ns = rep.span_ns;
  out.predicted_span_ns = rep.predicted_span_ns;
  for (const auto& r : rep.ranks)
    out.traces.push_back(
        {r.source, r.rank, static_cast<int>(rep.ranks.size()), 0, r.span_ns, 0.0, rep.edited, rep.edits,
         r.predicted_span_ns,
         r.span_ns > 0 ? 100.0 * static_cast<double>(r.predicted_span_ns - r.span_ns) / static_cast<double>(r.span_ns)
                       : 0.0});
  out.text = sim::et_replay_summary(rep);
  out.files.emplace_back("replay.json", sim::et_replay_json(rep, opt));
  return out;
}

}  // namespace

ReplayResult replay(const ReplayRequest& req) {
  sim::ReplayOptions opt;
  for (const auto& s : req.scale_kernels) opt.kernel_scales.push_back(sim::parse_kernel_scale(s));
  opt.collective_bw_scale = req.collective_bw_scale;
  if (req.collective_bw_GBps) {
    opt.collective_bandwidth_Bps = *req.collective_bw_GBps * units::kGB;
    if (!(opt.collective_bandwidth_Bps > 0)) throw ConfigError("replay: --collective-bw must be positive");
  }
  if (req.collective_group) {
    opt.collective_group_size = *req.collective_group;
    if (opt.collective_group_size < 2) throw ConfigError("replay: --collective-group must be at least 2");
  }
  opt.collective_alpha_s = req.collective_alpha_us * 1e-6;
  opt.collective_time_scale = req.collective_time_scale;
  opt.cpu_gap_scale = req.cpu_scale;
  opt.runtime_scale = req.runtime_scale;
  if (req.launch_latency_us) {
    const double us = *req.launch_latency_us;
    if (!(us >= 0) || !std::isfinite(us)) throw ConfigError("replay: --launch-latency-us must be a number >= 0");
    opt.launch_latency_ns = static_cast<std::int64_t>(std::llround(us * 1e3));
  }
  opt.keep_unexplained_gaps = req.keep_unexplained_gaps;
  opt.validate();
  if (is_chakra_request(req)) return replay_chakra(req, opt);
  if (!req.comm_groups.empty()) throw ConfigError("replay: --comm-groups applies to Chakra .et traces only");
  const std::vector<ImportedTrace> traces = sim::import_traces_for_replay(req.trace, req.member);
  std::vector<sim::Replay> replays;
  replays.reserve(traces.size());
  for (const auto& t : traces) replays.push_back(sim::replay_trace(t, opt));
  ReplayResult out;
  std::vector<sim::ReplayReport> reports;
  std::vector<const ImportedTrace*> tptr;
  std::vector<const sim::Replay*> rptr;
  for (std::size_t k = 0; k < replays.size(); ++k) {
    const sim::ReplayReport& r = replays[k].report;
    reports.push_back(r);
    tptr.push_back(&traces[k]);
    rptr.push_back(&replays[k]);
    out.traces.push_back({r.source, r.rank, r.world_size, r.measured_span_ns, r.replayed_span_ns, r.error_pct, r.edited,
                          r.edits, r.predicted_span_ns, r.change_pct});
    if (k) out.text += "\n";
    out.text += sim::replay_summary(r);
  }
  out.files.emplace_back("replay.json", sim::replay_json(reports, opt));
  if (req.chrome_trace) out.files.emplace_back("replay_trace.json", sim::replay_chrome_trace(tptr, rptr));
  return out;
}

}  // namespace dtsim
