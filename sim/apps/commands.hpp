// Subcommands defined outside cli.cpp (each in its own file), dispatched by cli::run. Same contract as the others:
// argc/argv start at the subcommand's name, output goes to `out`, user errors are thrown as dtsim::Error.
#pragma once
#include <ostream>

namespace dtsim::cli {
int cmd_sweep(int argc, char** argv, std::ostream& out);              ///< sim/apps/cli_sweep.cpp
int cmd_pareto(int argc, char** argv, std::ostream& out);             ///< sim/apps/cli_report.cpp
int cmd_report(int argc, char** argv, std::ostream& out);             ///< sim/apps/cli_report.cpp
int cmd_capacity_deadline(int argc, char** argv, std::ostream& out);  ///< sim/apps/cli_capacity.cpp
}  // namespace dtsim::cli
