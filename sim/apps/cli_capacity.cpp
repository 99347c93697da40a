#include "sim/apps/commands.hpp"
#include "traces/error.hpp"
namespace dtsim::cli {
int cmd_capacity_deadline(int, char**, std::ostream&) { throw ConfigError("cmd_capacity_deadline: under construction"); }
}  // namespace dtsim::cli
