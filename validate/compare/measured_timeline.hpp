// The executor's measurements as a timeline in the simulator's own output format (summary.json + trace.json),
// so that `dtsim compare` aligns it with the prediction task by task.
//
// The predicted run's graph (re-lowered from its summary.json, identical by construction) is run again with
// every measured compute task's median duration in place of the model's; tasks the executor did not run keep
// their predicted durations (ex-situ: communication and host issue stay the simulator's, as in Echo). Each
// rank's peak memory is replaced by the measured peak of its simulated rank (its representative when folded).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "sim/model/run_config.hpp"
#include "validate/compare/measurements.hpp"

namespace dtsim::exec {

struct MeasuredTimeline {
  nlohmann::json summary;  ///< summary.json, with a "measured" block (device, samples, failures, coverage)
  std::string trace;       ///< trace.json
  std::size_t compute_tasks = 0, measured_tasks = 0;
};

/// FormatError when the measurements do not belong to this plan's graph (unknown or non-compute task ids).
/// Runs the simulator once (one per process, as simulate()).
MeasuredTimeline measured_timeline(const sim::RunConfig& config, const Measurements& m);

}  // namespace dtsim::exec
