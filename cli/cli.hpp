// The dtsim command line as a function: dispatches argv to the subcommand (cli/commands.hpp); throws dtsim::Error on
// bad input.
#pragma once
#include <ostream>

namespace dtsim::cli {
/// Runs the command line; returns the process exit code (0 ok). User errors propagate as dtsim::Error.
int run(int argc, char** argv, std::ostream& out);
}  // namespace dtsim::cli
