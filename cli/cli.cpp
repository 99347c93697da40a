// The dispatcher: `dtsim <command> ...` to the subcommand's file (cli/commands.hpp), usage and version.
#include "cli/cli.hpp"

#include <string>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "dtsim/dtsim.hpp"
#include "traces/error.hpp"

namespace dtsim::cli {
namespace {

const char* kUsage =
    "usage: dtsim <command> [options]\n"
    "\n"
    "commands:\n"
    "  simulate   simulate one training iteration of a model, cluster and parallel plan\n"
    "  collective simulate one collective (or a sweep of sizes) and report nccl-tests algbw/busbw\n"
    "  calibrate  fit calibration inputs to measurements: 'calibrate runs --data FILE... --out DIR' (your cluster\n"
    "             and stack from a few measured runs), 'calibrate nccl-tests LOG --cluster C --out DIR',\n"
    "             'calibrate compute --trace FILE | --gemm-csv FILE ... --out DIR',\n"
    "             'calibrate device-model --gpu GPU --out DIR'\n"
    "  plan       search a parallel plan with a planner, simulate the best candidates, write the chosen plan\n"
    "  bakeoff    run every planner on the same model and cluster and compare their plans in the simulator\n"
    "  capacity   the largest model of a ladder each planner fits on a cluster (vs Megatron-style TP + DP)\n"
    "  replay     replay a PyTorch-profiler (Kineto) trace on the simulator and predict what-if edits\n"
    "  validate   score predictions against published measurements (validate published), fit a calibration (validate "
    "fit),\n"
    "             run a plan on this GPU and compare (validate run; validate measured: an executor run as a timeline)\n"
    "  compare    compare a predicted run directory (simulate --out) with a measured one: per task, rank, phase, "
    "memory\n"
    "  sweep      simulate a grid/random space of scenarios (-j N workers, resumable; under mpirun: sharded)\n"
    "  pareto     the throughput-vs-memory Pareto front of sweep results, per GPU count\n"
    "  report     a self-contained HTML page of sweep results (plots as inline SVG, top strategies)\n"
    "  presets    list model, GPU and cluster presets\n"
    "  version    print versions\n"
    "\n"
    "'dtsim <command> --help' describes a command's options.\n";

}  // namespace

int run(int argc, char** argv, std::ostream& out) {
  if (argc < 2) {
    out << kUsage;
    return 0;
  }
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    out << kUsage;
    return 0;
  }
  if (cmd == "simulate") return cmd_simulate(argc - 1, argv + 1, out);
  if (cmd == "presets") return cmd_presets(argc - 1, argv + 1, out);
  if (cmd == "collective") return cmd_collective(argc - 1, argv + 1, out);
  if (cmd == "calibrate") return cmd_calibrate(argc - 1, argv + 1, out);
  if (cmd == "plan") return cmd_plan(argc - 1, argv + 1, out);
  if (cmd == "bakeoff") return cmd_bakeoff(argc - 1, argv + 1, out);
  if (cmd == "capacity") return cmd_capacity(argc - 1, argv + 1, out);
  if (cmd == "replay") return cmd_replay(argc - 1, argv + 1, out);
  if (cmd == "validate") return cmd_validate(argc - 1, argv + 1, out);
  if (cmd == "compare") return cmd_compare(argc - 1, argv + 1, out);
  if (cmd == "sweep") return cmd_sweep(argc - 1, argv + 1, out);
  if (cmd == "pareto") return cmd_pareto(argc - 1, argv + 1, out);
  if (cmd == "report") return cmd_report(argc - 1, argv + 1, out);
  if (cmd == "version" || cmd == "--version") {
    po::options_description desc("dtsim version: print versions");
    desc.add_options()("help,h", "this help");
    parse(desc, argc - 1, argv + 1);
    out << "dtsim " << version() << " (SimGrid " << simgrid_version() << ")\n";
    return 0;
  }
  throw ConfigError("unknown command '" + cmd +
                    "' (known: simulate, collective, calibrate, plan, bakeoff, capacity, validate, compare, replay, "
                    "sweep, pareto, report, presets, version)");
}

}  // namespace dtsim::cli
