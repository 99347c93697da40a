// Shared by the API's own sources (dtsim/*.cpp), not installed as API: the option strings of SimulateOptions turned
// into the simulator's options, with the CLI's error messages.
#pragma once
#include <string>

#include "dtsim/dtsim.hpp"
#include "sim/model/footprint.hpp"
#include "sim/model/lowering.hpp"

namespace dtsim::detail {
/// ConfigError naming options.command and the option for an unknown value.
sim::SimOptions sim_options(const SimulateOptions& options);
/// "flow" | "analytic"; ConfigError "CMD: --network 'X' is not known (known: flow, analytic)".
sim::NetworkMode network_mode(const std::string& network, const std::string& command);
/// The memory limit a run is held to: options.max_memory_bytes, or default_max_memory_bytes() when it is 0
/// (negative: no limit).
double memory_limit_bytes(const SimulateOptions& options);
/// ConfigError (one line: the estimate, the limit, what to change) when the run's estimated peak memory
/// (sim::estimate_footprint) is above options.max_memory_bytes (0: default_max_memory_bytes(); negative: no limit).
/// The inputs must be validated.
void check_memory(const Inputs& in, const sim::SimOptions& opt, const SimulateOptions& options,
                  const sim::FootprintOutputs& outputs = {});
/// Writes the inputs and options of a run that broke an invariant to a reproducer file (dtsim.reproducer JSON in the
/// temporary directory, named by its content) and returns the sentence that names it, for the InternalError.
std::string write_reproducer(const Inputs& in, const SimulateOptions& options);
}  // namespace dtsim::detail
