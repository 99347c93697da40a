#include "sim/apps/commands.hpp"
#include "traces/error.hpp"
namespace dtsim::cli {
int cmd_sweep(int, char**, std::ostream&) { throw ConfigError("cmd_sweep: under construction"); }
}  // namespace dtsim::cli
