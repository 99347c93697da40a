// `dtsim sweep SPEC.json`: expand a spec into scenarios, filter them, simulate the rest in worker processes
// (sim/sweep.hpp, sim/sweep_run.hpp); under mpirun, shard them over the ranks (sim/sweep_mpi.hpp).
#include <unistd.h>
#include <boost/program_options.hpp>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "sim/apps/commands.hpp"
#include "sim/sweep.hpp"
#include "sim/sweep_mpi.hpp"
#include "sim/sweep_run.hpp"
#include "traces/error.hpp"

namespace po = boost::program_options;

namespace dtsim::cli {
namespace {

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

int run_sweep_cli(const po::variables_map& vm, std::ostream& out) {
  const std::string spec_path = vm["spec"].as<std::string>();
  sim::sweep::RunOptions opt;
  opt.out_dir = vm["out"].as<std::string>();
  opt.jobs = vm["jobs"].as<int>();
  if (opt.jobs < 1 || opt.jobs > 1024) throw ConfigError("sweep: -j must be between 1 and 1024");
  opt.prefilter = vm.count("no-prefilter") == 0;
  opt.timeout_s = vm["timeout"].as<double>();
  if (!(opt.timeout_s >= 0)) throw ConfigError("sweep: --timeout must be >= 0 seconds");
  const bool quiet = vm.count("quiet") > 0;

  // MPI only when an MPI launcher started us, before anything is forked.
  const int launched = sim::sweep::mpi::launched_size();
  if (launched > 1 && !sim::sweep::mpi::available() && sim::sweep::mpi::launched_rank() > 0)
    return 2;  // rank 0 says why, once
  if (launched > 1 && !sim::sweep::mpi::available())
    throw ConfigError("sweep: started by mpirun with " + std::to_string(launched) +
                      " ranks, but this dtsim was built without MPI: every rank would run the whole sweep "
                      "(install libopenmpi-dev, rebuild, or run without mpirun and use -j)");
  const auto spec = sim::sweep::load_spec(spec_path);
  const std::string spec_dir = std::filesystem::path(spec_path).parent_path().string();
  std::unique_ptr<sim::sweep::mpi::Session> mpi;
  if (launched >= 1 && sim::sweep::mpi::available()) mpi = std::make_unique<sim::sweep::mpi::Session>();
  if (mpi) opt.rank = mpi->rank(), opt.ranks = mpi->size();
  const bool talk = !quiet && opt.rank == 0;
  try {
    const auto ex = sim::sweep::expand(spec, spec_dir.empty() ? "." : spec_dir, opt.prefilter);
    if (vm.count("dry-run")) {
      if (talk) out << expansion_text(ex, opt.prefilter);
      return 0;
    }
    if (talk) {
      out << "dtsim " << DTSIM_VERSION << " | sweep " << spec_path << " -> " << opt.out_dir << " | " << opt.jobs
          << " worker" << (opt.jobs > 1 ? "s" : "")
          << (opt.ranks > 1 ? " per rank, " + std::to_string(opt.ranks) + " MPI ranks" : "") << "\n"
          << expansion_text(ex, opt.prefilter) << std::flush;
    }
    sim::sweep::Gather gather;
    if (mpi) gather = [&](const std::string& mine) { return mpi->gather(mine); };
    const auto summary = sim::sweep::run_sweep(ex, opt, talk ? &std::cerr : nullptr, gather);
    if (talk) {
      const auto& c = summary["counts"];
      const auto& st = c["status"];
      char line[400];
      std::snprintf(line, sizeof line,
                    "simulated %zu scenarios in %.1f s (%.0f scenarios/min); %zu already done (resumed), %zu retried\n"
                    "rows: %zu (%zu ok, %zu oom, %zu failed, %zu crashed)\n",
                    c["simulated_this_run"].get<std::size_t>(), summary["wall_s"].get<double>(),
                    summary["scenarios_per_min"].get<double>(), c["resumed"].get<std::size_t>(),
                    c["retried"].get<std::size_t>(), c["rows"].get<std::size_t>(), st["ok"].get<std::size_t>(),
                    st["oom"].get<std::size_t>(), st["failed"].get<std::size_t>(), st["crashed"].get<std::size_t>());
      out << line << "wrote " << opt.out_dir << "/results.jsonl, results.csv and sweep.json\n";
    }
  } catch (const std::exception& e) {
    if (!mpi || opt.ranks == 1) throw;
    // Another rank would wait for this one in the gather: report and end them all.
    std::cerr << "dtsim: error: rank " << opt.rank << ": " << e.what() << "\n" << std::flush;
    mpi->abort(2);
  }
  return 0;
}

}  // namespace

int cmd_sweep(int argc, char** argv, std::ostream& out) {
  po::options_description desc(
      "dtsim sweep SPEC.json: simulate every scenario of a sweep spec (models x clusters x strategy knobs, planners)\n"
      "in worker processes; resumable (rerun the same command); under 'mpirun -np N' the scenarios are sharded over\n"
      "the ranks and rank 0 gathers the results. The spec format is described in sim/sweep.hpp and examples/sweeps/.\n"
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
  po::positional_options_description pos;
  pos.add("spec", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw ConfigError(std::string("sweep: ") + e.what());
  }
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  if (!vm.count("spec")) throw ConfigError("sweep: give the spec file: dtsim sweep SPEC.json (see examples/sweeps/)");
  return run_sweep_cli(vm, out);
}

}  // namespace dtsim::cli
