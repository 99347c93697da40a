#include "sim/apps/commands.hpp"
#include "traces/error.hpp"
namespace dtsim::cli {
int cmd_pareto(int, char**, std::ostream&) { throw ConfigError("cmd_pareto: under construction"); }
int cmd_report(int, char**, std::ostream&) { throw ConfigError("cmd_report: under construction"); }
}  // namespace dtsim::cli
