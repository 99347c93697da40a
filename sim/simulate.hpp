// One simulation end to end: lower the plan, run it on SimGrid, analyse the result.
#pragma once
#include "sim/engine/simgrid_runtime.hpp"
#include "sim/model/lowering.hpp"
#include "sim/report/report.hpp"

namespace dtsim::sim {

struct Simulation {
  Lowered lowered;
  EngineResult engine;
  Report report;
};

/// Validates the inputs (ConfigError on inconsistency), then simulates. Once per process (SimGrid).
Simulation simulate(const Inputs& in);

}  // namespace dtsim::sim
