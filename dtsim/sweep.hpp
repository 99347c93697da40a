// Public API, sweeps (included by dtsim/dtsim.hpp): run a sweep spec (models x clusters x strategy knobs, planners)
// in worker processes, sharded over MPI ranks under mpirun; read its results back as Pareto fronts or as an HTML
// report. Same conventions as dtsim.hpp: plain structs, `text` and `files`, ConfigError with the CLI's message.
// The spec format is described in studies/sweep/sweep.hpp and examples/sweeps/; the results rows (results.jsonl) in
// studies/sweep/sweep_results.hpp.
#pragma once
#include <cstddef>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "dtsim/common.hpp"

namespace dtsim {

// ---- sweep --------------------------------------------------------------------------------------------------------

/// What `dtsim sweep SPEC.json` takes.
struct SweepRequest {
  std::string spec;                   ///< the sweep spec (JSON file); its relative paths are next to it
  std::string out_dir = "sweep-out";  ///< results.jsonl, results.csv, sweep.json; also what a rerun resumes
  int jobs = 1;                       ///< worker processes (per MPI rank), 1..1024
  bool prefilter = true;              ///< skip plans the analytic memory model says do not fit
  double timeout_s = 0;               ///< per scenario before it is killed and recorded as failed; 0 = none
  bool dry_run = false;               ///< expand and filter the spec, simulate nothing
};

/// Counts of the expansion and, unless dry_run, of the run. Under MPI with several ranks only rank 0 has them
/// (and its text); the other ranks return zeros.
struct SweepResult {
  // The expansion.
  std::size_t models = 0, clusters = 0;
  std::size_t grid_points = 0;        ///< size of the knob grid (all combinations)
  std::size_t scenarios = 0;          ///< numbered scenarios, pre-filtered ones included
  std::size_t planner_scenarios = 0;  ///< of them, those a planner chooses the plan of
  std::size_t prefiltered = 0;        ///< scenarios the memory pre-filter marks (0 with prefilter off)
  std::vector<std::pair<std::string, std::size_t>> skipped;  ///< (reason, grid points dropped), by reason
  // The run (zeros with dry_run).
  int rank = 0, ranks = 1;  ///< this process's MPI rank and the number of ranks (1 without mpirun)
  std::size_t simulated = 0, resumed = 0, retried = 0;  ///< this run; rows already there; worker deaths retried
  std::size_t rows = 0, rows_ok = 0, rows_oom = 0, rows_failed = 0, rows_crashed = 0;  ///< results.jsonl, by status
  double wall_s = 0, scenarios_per_min = 0;
  /// 2 on the ranks above 0 of an mpirun launch this build cannot shard (rank 0 throws the ConfigError saying
  /// why; the others stay silent): the caller's exit code. 0 otherwise.
  int exit_code = 0;
  std::string text;  ///< what `dtsim sweep` prints on stdout (also streamed to `log`, see sweep())
};

/// Expands `req.spec`, filters it and simulates every scenario without a row in req.out_dir yet, each in a worker
/// process (fork; sweep() may be called repeatedly). The sweep writes req.out_dir itself as it goes (append-only,
/// crash-safe, resumable: studies/sweep/sweep_run.hpp), so the result has no `files`. When an MPI launcher started
/// the process and dtsim was built with MPI, the scenarios are sharded over the ranks and rank 0 gathers them.
/// A sweep runs long, so it streams: rank 0 writes its text to `log` (null = not streamed) as it happens, the
/// header and expansion counts before the first simulation, and the progress bar to `progress` (null = silent).
/// Under MPI with several ranks, an error on one rank is written to std::cerr ("dtsim: error: rank R: ...") and
/// ends every rank (MPI_Abort with code 2), since the others would wait for it forever.
SweepResult sweep(const SweepRequest& req, std::ostream* log = nullptr, std::ostream* progress = nullptr);

// ---- results: Pareto fronts and the HTML report -------------------------------------------------------------------

/// How a sweep's rows ended.
struct SweepStatusCounts {
  int total = 0;
  int ok_fit = 0;   ///< ran and fit in memory
  int ok_over = 0;  ///< ran, peak over the device's capacity
  int oom = 0, failed = 0, crashed = 0;
};

/// What `dtsim pareto RESULTS` takes.
struct ParetoRequest {
  std::string results;  ///< results.jsonl, or the sweep's output directory ("" = not given: ConfigError)
};

/// One point of a front: a scenario no other beats on both throughput and peak memory.
struct ParetoFrontPoint {
  std::string id;  ///< the scenario's id (16 hex digits)
  int index = 0;
  std::string strategy;  ///< "tp2 pp4 dp1 ..." or "planner NAME: ..."
  double tokens_per_s = 0, mfu = 0, peak_memory_bytes = 0;
  std::vector<std::string> duplicates;  ///< ids of the rows with the same throughput and memory
};

/// The front of one model at one GPU count, by increasing memory (so increasing throughput).
struct ParetoFront {
  std::string model;
  int gpus = 0;
  std::vector<std::string> clusters;     ///< distinct, sorted
  SweepStatusCounts counts;              ///< of all the group's rows
  std::vector<ParetoFrontPoint> points;  ///< empty when no row of the group ran and fit
};

struct ParetoResult {
  std::string source;               ///< the results.jsonl that was read
  SweepStatusCounts counts;         ///< of every row
  std::vector<ParetoFront> fronts;  ///< by model, then GPU count
  std::string text;                 ///< the counts line and one table per front (without the "wrote" line of --out)
  Files files;                      ///< pareto.json, pareto.csv
};
/// The Pareto fronts of throughput (higher is better) against peak memory (lower is better) of the scenarios that
/// ran and fit (studies/report/pareto.hpp). ConfigError when no results are given or they hold no row.
ParetoResult pareto(const ParetoRequest& req);

/// What `dtsim report RESULTS --html OUT.html` takes.
struct ReportRequest {
  std::string results;    ///< results.jsonl, or the sweep's output directory ("" = not given: ConfigError)
  std::string html_path;  ///< the page to write; must name a file
  int top = 5;            ///< strategies per model and GPU count in the table and the bar charts, 1..100
};

struct ReportResult {
  std::string source;        ///< the results.jsonl that was read
  SweepStatusCounts counts;  ///< of every row
  std::string html;          ///< the self-contained page (inline SVG; the same bytes for the same input)
  std::string out_dir;       ///< the folder of html_path ("." when it has none): where `files` go
  std::string text;          ///< the counts line (without the "wrote" line)
  Files files;               ///< {html_path's file name, html}: write_files(out_dir, files)
};
/// One self-contained HTML page of a sweep's results (studies/report/sweep_html.hpp). ConfigError for a `top` out
/// of range, an html_path that names no file, or results not given or holding no row.
ReportResult report(const ReportRequest& req);

}  // namespace dtsim
