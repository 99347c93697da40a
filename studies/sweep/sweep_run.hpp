// Running a sweep: worker processes, the results files (append-only, crash-safe, resumable), progress, and the
// final sorted files.
//
// Processes. The driver never simulates: it forks up to `jobs` workers and hands them scenario numbers over a pipe;
// each worker runs the scenario (studies/sweep/sweep.hpp run_scenario) and sends its row back as one length-prefixed
// JSON text. A worker that ran a flow-network scenario (SimGrid: one engine per process) exits afterwards and the next
// scenario gets a fresh fork; analytic scenarios reuse the worker. A worker that dies with a scenario in flight
// (signal or abnormal exit) costs a retry on a fresh worker; the second death records status "crashed". Workers
// die with the driver (PR_SET_PDEATHSIG) and never touch MPI.
//
// Files in the output directory. The driver is the only writer: every row is appended to its results file
// (results.jsonl; under MPI with several ranks results.rank-R.jsonl) with one write() of the whole line followed
// by fsync(), so a kill -9 at any moment loses at most the row in flight and never leaves half a row except as
// an unterminated last line, which the next start truncates. On start, the rows of results.jsonl and of every
// results.rank-*.jsonl are read and their ids skipped (resume); rows whose id is not a scenario of the spec are
// refused (another sweep's directory). When the sweep completes, results.jsonl and results.csv are rewritten
// sorted by index (temporary file + rename) and sweep.json summarises the run, so a finished sweep's files are
// byte-identical across runs apart from sim_wall_s (and sweep.json's timings). Rows whose scenario the memory
// pre-filter skips but that an earlier --no-prefilter run simulated are kept.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "studies/sweep/sweep.hpp"

namespace dtsim::sim::sweep {

struct RunOptions {
  std::string out_dir = "sweep-out";
  int jobs = 1;             ///< worker processes
  bool prefilter = true;    ///< the expansion's pre-filter marks are honoured (recorded in sweep.json)
  double timeout_s = 0;     ///< per scenario; 0 = none. A scenario over it is killed and recorded as failed.
  int rank = 0, ranks = 1;  ///< shard: scenario i runs on rank i % ranks
};

/// Every rank's rows and counters as text, at rank 0 (in rank order); empty elsewhere. For a local run, null.
using Gather = std::function<std::vector<std::string>(const std::string& mine)>;

/// Runs this rank's scenarios that have no row yet; on rank 0 (after `gather`, when given) writes the sorted
/// results.jsonl, results.csv and sweep.json. `progress` (null = silent) gets the progress bar or log lines.
/// Returns sweep.json's content (on rank 0; counters of this rank elsewhere).
nlohmann::json run_sweep(const Expansion& ex, const RunOptions& opt, std::ostream* progress, const Gather& gather = {});

}  // namespace dtsim::sim::sweep
