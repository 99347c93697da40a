// `dtsim sweep SPEC.json`: expand a spec into scenarios, filter them, simulate the rest in worker processes; under
// mpirun, shard them over the ranks. A thin layer over dtsim::sweep() (dtsim/sweep.hpp).
#include <iostream>
#include <string>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "dtsim/dtsim.hpp"
#include "traces/error.hpp"

namespace dtsim::cli {

int cmd_sweep(int argc, char** argv, std::ostream& out) {
  po::options_description desc(
      "dtsim sweep SPEC.json: simulate every scenario of a sweep spec (models x clusters x strategy knobs, planners)\n"
      "in worker processes; resumable (rerun the same command); under 'mpirun -np N' the scenarios are sharded over\n"
      "the ranks and rank 0 gathers the results. The spec format is described in studies/sweep/sweep.hpp and "
      "examples/sweeps/.\n"
      "example: dtsim sweep examples/sweeps/default.json -j 2 --out sweep-out\n"
      "writes DIR/results.jsonl (one row per scenario), DIR/results.csv and DIR/sweep.json (counts, "
      "timings)\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("spec", po::value<std::string>(), "the sweep spec (JSON)")
    ("out", po::value<std::string>()->default_value("sweep-out"), "output directory (also what a rerun resumes)")
    ("jobs,j", po::value<int>()->default_value(1), "worker processes (per MPI rank)")
    ("no-prefilter", "simulate plans the analytic memory model says do not fit (they report status oom)")
    ("timeout", po::value<double>()->default_value(0), "seconds per scenario before it is killed and recorded as failed (0: none)")
    ("dry-run", "expand and filter the spec, print the counts, simulate nothing")
    ("quiet,q", "no progress and no summary on success");
  // clang-format on
  const auto vm = parse_positional(desc, "spec", argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  if (!vm.count("spec")) throw ConfigError("sweep: give the spec file: dtsim sweep SPEC.json (see examples/sweeps/)");
  SweepRequest req;
  req.spec = vm["spec"].as<std::string>();
  req.out_dir = vm["out"].as<std::string>();
  req.jobs = vm["jobs"].as<int>();
  req.prefilter = vm.count("no-prefilter") == 0;
  req.timeout_s = vm["timeout"].as<double>();
  req.dry_run = vm.count("dry-run") > 0;
  const bool quiet = vm.count("quiet") > 0;
  // The text is streamed as the sweep goes (header before the first simulation), the progress bar to stderr.
  return sweep(req, quiet ? nullptr : &out, quiet ? nullptr : &std::cerr).exit_code;
}

}  // namespace dtsim::cli
