// Flags shared by the commands that simulate: the simulation options (simulate, collective) and the planner
// request (plan, bakeoff, capacity), turned into the API's request structs.
#pragma once
#include <boost/program_options.hpp>
#include <string>

#include "dtsim/dtsim.hpp"

namespace dtsim::cli {
/// --collectives, --fold (where the command has it), the algorithm option `algo_option` (collective-algo, or algo
/// for `collective`), --network, --channels. Their values are checked by the API, naming `command`.
SimulateOptions simulate_options(const boost::program_options::variables_map& vm, const std::string& command,
                                 const std::string& algo_option = "collective-algo");
/// Adds --model, --cluster, --gbs, --memory-limit, --tp, --top, --calibration, --network, --precision, --seq-len (plan
/// and bakeoff).
void add_planner_options(boost::program_options::options_description& desc);
/// The planner request of plan and bakeoff; ConfigError naming `command` for a missing flag or a non-positive
/// --memory-limit (the API checks the values).
PlanRequest plan_request(const boost::program_options::variables_map& vm, const std::string& command);
}  // namespace dtsim::cli
