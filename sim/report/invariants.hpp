// What a simulation's result must satisfy to be output (issue Guard: a result that cannot be true is an error, never
// a report). check_invariants() runs after every simulation (sim::simulate) and throws InternalError naming the
// first violation; dtsim::simulate turns it into exit 3 with a reproducer file of the run's inputs.
#pragma once
#include <string>

#include "sim/report/report.hpp"

namespace dtsim::sim {

/// Checks, in this order:
///  - every task ran: a finite start and end, end >= start >= 0, nothing after the iteration's end;
///  - the iteration time is finite and positive;
///  - no memory counter went below zero (every rank's timeline and peak are finite and >= 0);
///  - per rank, compute, exposed communication and bubble are finite, >= 0 and at most the iteration time;
///  - model and executed FLOP rates at most the GPU's peak at the fastest precision the plan uses (so MFU <= 1 for a
///    plan in the model's dtype);
///  - every link: bytes and busy time finite and >= 0, busy time at most the iteration, peak utilisation <= 1 (the
///    analytic engine's unshared demand, which may pass 1, is LinkStats::peak_demand);
///  - MoE routing loads finite, >= 0, with a positive sum.
/// Tolerances are relative 1e-6 (the engines' own rounding). Throws InternalError("result invariant violated: ...").
void check_invariants(const Inputs& in, const Lowered& low, const EngineResult& res, const Report& rep);

}  // namespace dtsim::sim
