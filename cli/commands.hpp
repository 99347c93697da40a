// The subcommands, one file each, dispatched by cli::run (cli/cli.cpp). Same contract for all: argc/argv start at
// the subcommand's name, output goes to `out`, user errors are thrown as dtsim::Error (main turns them into one
// "dtsim: error: ..." line and exit code 2).
#pragma once
#include <ostream>

namespace dtsim::cli {
int cmd_simulate(int argc, char** argv, std::ostream& out);           ///< cli/simulate.cpp
int cmd_presets(int argc, char** argv, std::ostream& out);            ///< cli/presets.cpp
int cmd_collective(int argc, char** argv, std::ostream& out);         ///< cli/collective.cpp
int cmd_calibrate(int argc, char** argv, std::ostream& out);          ///< cli/calibrate.cpp
int cmd_plan(int argc, char** argv, std::ostream& out);               ///< cli/plan.cpp
int cmd_bakeoff(int argc, char** argv, std::ostream& out);            ///< cli/bakeoff.cpp
int cmd_capacity(int argc, char** argv, std::ostream& out);           ///< cli/capacity.cpp
int cmd_capacity_deadline(int argc, char** argv, std::ostream& out);  ///< cli/capacity_deadline.cpp
int cmd_validate(int argc, char** argv, std::ostream& out);           ///< cli/validate.cpp
int cmd_validate_run(int argc, char** argv, std::ostream& out);       ///< cli/validate_run.cpp
int cmd_validate_measured(int argc, char** argv, std::ostream& out);  ///< cli/validate_run.cpp
int cmd_replay(int argc, char** argv, std::ostream& out);             ///< cli/replay.cpp
int cmd_compare(int argc, char** argv, std::ostream& out);            ///< cli/compare.cpp
int cmd_sweep(int argc, char** argv, std::ostream& out);              ///< cli/sweep.cpp
int cmd_pareto(int argc, char** argv, std::ostream& out);             ///< cli/pareto.cpp
int cmd_report(int argc, char** argv, std::ostream& out);             ///< cli/report.cpp
}  // namespace dtsim::cli
