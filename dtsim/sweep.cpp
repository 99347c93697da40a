// Public API, sweep section: see dtsim/sweep.hpp.
#include "dtsim/dtsim.hpp"

#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <ostream>
#include <string>

#include "studies/report/pareto.hpp"
#include "studies/report/sweep_html.hpp"
#include "studies/sweep/sweep.hpp"
#include "studies/sweep/sweep_mpi.hpp"
#include "studies/sweep/sweep_results.hpp"
#include "studies/sweep/sweep_run.hpp"
#include "traces/error.hpp"

namespace dtsim {
namespace {

// ---- sweep --------------------------------------------------------------------------------------------------------

std::string expansion_text(const sim::sweep::Expansion& ex, bool prefilter) {
  std::size_t skipped = 0, planners = 0;
  for (const auto& [reason, n] : ex.skipped) skipped += n;
  for (const auto& s : ex.scenarios) planners += !s.planner.empty();
  char line[300];
  std::string t;
  std::snprintf(line, sizeof line,
                "expansion: %zu models x %zu clusters, %zu grid points -> %zu scenarios (%zu skipped", ex.models.size(),
                ex.clusters.size(), ex.grid_points, ex.scenarios.size(), skipped);
  t += line;
  if (planners > 0) t += ", " + std::to_string(planners) + " of them planner scenarios";
  t += ")\n";
  for (const auto& [reason, n] : ex.skipped) {
    std::snprintf(line, sizeof line, "  %8zu  %s\n", n, reason.c_str());
    t += line;
  }
  if (prefilter) {
    std::snprintf(line, sizeof line, "pre-filter: %zu of %zu scenarios do not fit (analytic memory estimate)%s\n",
                  ex.prefiltered, ex.scenarios.size(), ex.prefiltered ? "; --no-prefilter simulates them" : "");
    t += line;
  } else {
    t += "pre-filter: off (out-of-memory plans are simulated and reported as status oom)\n";
  }
  return t;
}

void count_expansion(const sim::sweep::Expansion& ex, SweepResult& r) {
  r.models = ex.models.size();
  r.clusters = ex.clusters.size();
  r.grid_points = ex.grid_points;
  r.scenarios = ex.scenarios.size();
  for (const auto& s : ex.scenarios) r.planner_scenarios += !s.planner.empty();
  r.prefiltered = ex.prefiltered;
  r.skipped.assign(ex.skipped.begin(), ex.skipped.end());
}

/// The run's counts from sweep.json's content (rank 0) and the closing lines `dtsim sweep` prints.
std::string count_run(const nlohmann::json& summary, const std::string& out_dir, SweepResult& r) {
  const auto& c = summary["counts"];
  const auto& st = c["status"];
  r.simulated = c["simulated_this_run"].get<std::size_t>();
  r.resumed = c["resumed"].get<std::size_t>();
  r.retried = c["retried"].get<std::size_t>();
  r.rows = c["rows"].get<std::size_t>();
  r.rows_ok = st["ok"].get<std::size_t>();
  r.rows_oom = st["oom"].get<std::size_t>();
  r.rows_failed = st["failed"].get<std::size_t>();
  r.rows_crashed = st["crashed"].get<std::size_t>();
  r.wall_s = summary["wall_s"].get<double>();
  r.scenarios_per_min = summary["scenarios_per_min"].get<double>();
  char line[400];
  std::snprintf(line, sizeof line,
                "simulated %zu scenarios in %.1f s (%.0f scenarios/min); %zu already done (resumed), %zu retried\n"
                "rows: %zu (%zu ok, %zu oom, %zu failed, %zu crashed)\n",
                r.simulated, r.wall_s, r.scenarios_per_min, r.resumed, r.retried, r.rows, r.rows_ok, r.rows_oom,
                r.rows_failed, r.rows_crashed);
  return line + ("wrote " + out_dir + "/results.jsonl, results.csv and sweep.json\n");
}

/// Appends `s` to the result's text and, when given, streams it.
void say(SweepResult& r, std::ostream* log, const std::string& s) {
  r.text += s;
  if (log) *log << s << std::flush;
}

// ---- results ------------------------------------------------------------------------------------------------------

sim::SweepResults load_nonempty(const std::string& path, const std::string& cmd) {
  if (path.empty())
    throw ConfigError(cmd + ": give the sweep's results.jsonl or its output directory (dtsim " + cmd + " RESULTS)");
  sim::SweepResults res = sim::load_sweep_results(path);
  if (res.rows.empty()) throw ConfigError(cmd + ": '" + res.path + "' holds no scenario yet (empty results)");
  return res;
}

SweepStatusCounts counts_of(const sim::StatusCounts& n) {
  return {n.total, n.ok_fit, n.ok_over, n.oom, n.failed, n.crashed};
}

std::string counts_line(const sim::SweepResults& res) {
  const sim::StatusCounts n = sim::count_status(res.rows);
  return std::to_string(n.total) + " scenarios in " + res.path + ": " + std::to_string(n.ok_fit) + " ran and fit, " +
         std::to_string(n.ok_over) + " over capacity, " + std::to_string(n.oom) + " oom, " + std::to_string(n.failed) +
         " failed, " + std::to_string(n.crashed) + " crashed\n";
}

ParetoFront front_of(const sim::ParetoGroup& g) {
  ParetoFront f{g.model, g.gpus, g.clusters, counts_of(g.counts), {}};
  for (const sim::ParetoPoint& p : g.front) {
    ParetoFrontPoint pt{
        p.row->id, p.row->index, p.row->strategy(), p.row->tokens_per_s, p.row->mfu, p.row->peak_memory_bytes, {}};
    for (const sim::SweepRow* d : p.duplicates) pt.duplicates.push_back(d->id);
    f.points.push_back(std::move(pt));
  }
  return f;
}

}  // namespace

SweepResult sweep(const SweepRequest& req, std::ostream* log, std::ostream* progress) {
  sim::sweep::RunOptions opt;
  opt.out_dir = req.out_dir;
  opt.jobs = req.jobs;
  if (opt.jobs < 1 || opt.jobs > 1024) throw ConfigError("sweep: -j must be between 1 and 1024");
  opt.prefilter = req.prefilter;
  opt.timeout_s = req.timeout_s;
  if (!(opt.timeout_s >= 0)) throw ConfigError("sweep: --timeout must be >= 0 seconds");

  SweepResult r;
  // MPI only when an MPI launcher started us, before anything is forked.
  const int launched = sim::sweep::mpi::launched_size();
  if (launched > 1 && !sim::sweep::mpi::available() && sim::sweep::mpi::launched_rank() > 0) {
    r.exit_code = 2;  // rank 0 says why, once
    return r;
  }
  if (launched > 1 && !sim::sweep::mpi::available())
    throw ConfigError("sweep: started by mpirun with " + std::to_string(launched) +
                      " ranks, but this dtsim was built without MPI: every rank would run the whole sweep "
                      "(install libopenmpi-dev, rebuild, or run without mpirun and use -j)");
  const auto spec = sim::sweep::load_spec(req.spec);
  const std::string spec_dir = std::filesystem::path(req.spec).parent_path().string();
  std::unique_ptr<sim::sweep::mpi::Session> mpi;
  if (launched >= 1 && sim::sweep::mpi::available()) mpi = std::make_unique<sim::sweep::mpi::Session>();
  if (mpi) opt.rank = mpi->rank(), opt.ranks = mpi->size();
  r.rank = opt.rank;
  r.ranks = opt.ranks;
  const bool talk = opt.rank == 0;
  if (!talk) log = progress = nullptr;
  try {
    const auto ex = sim::sweep::expand(spec, spec_dir.empty() ? "." : spec_dir, opt.prefilter);
    if (talk) count_expansion(ex, r);
    if (req.dry_run) {
      if (talk) say(r, log, expansion_text(ex, opt.prefilter));
      return r;
    }
    if (talk)
      say(r, log,
          "dtsim " + std::string(DTSIM_VERSION) + " | sweep " + req.spec + " -> " + opt.out_dir + " | " +
              std::to_string(opt.jobs) + " worker" + (opt.jobs > 1 ? "s" : "") +
              (opt.ranks > 1 ? " per rank, " + std::to_string(opt.ranks) + " MPI ranks" : "") + "\n" +
              expansion_text(ex, opt.prefilter));
    sim::sweep::Gather gather;
    if (mpi) gather = [&](const std::string& mine) { return mpi->gather(mine); };
    const auto summary = sim::sweep::run_sweep(ex, opt, progress, gather);
    if (talk) say(r, log, count_run(summary, opt.out_dir, r));
  } catch (const std::exception& e) {
    if (!mpi || opt.ranks == 1) throw;
    // Another rank would wait for this one in the gather: report and end them all.
    std::cerr << "dtsim: error: rank " << opt.rank << ": " << e.what() << "\n" << std::flush;
    mpi->abort(2);
  }
  return r;
}

ParetoResult pareto(const ParetoRequest& req) {
  const sim::SweepResults res = load_nonempty(req.results, "pareto");
  const auto groups = sim::pareto_fronts(res.rows);
  ParetoResult r;
  r.source = res.path;
  r.counts = counts_of(sim::count_status(res.rows));
  for (const sim::ParetoGroup& g : groups) r.fronts.push_back(front_of(g));
  r.text = counts_line(res) + "\n" + sim::pareto_table(groups);
  r.files = {{"pareto.json", sim::pareto_json(groups, res.path).dump(2) + "\n"},
             {"pareto.csv", sim::pareto_csv(groups)}};
  return r;
}

ReportResult report(const ReportRequest& req) {
  if (req.top < 1 || req.top > 100) throw ConfigError("report: --top must be between 1 and 100");
  const std::filesystem::path html = req.html_path;
  if (html.filename().empty() || html.filename() == "." || html.filename() == "..")
    throw ConfigError("report: --html '" + html.string() + "' does not name a file");
  const sim::SweepResults res = load_nonempty(req.results, "report");
  ReportResult r;
  r.source = res.path;
  r.counts = counts_of(sim::count_status(res.rows));
  r.html = sim::sweep_html(res, req.top);
  r.out_dir = html.has_parent_path() ? html.parent_path().string() : ".";
  r.text = counts_line(res);
  r.files = {{html.filename().string(), r.html}};
  return r;
}

}  // namespace dtsim
