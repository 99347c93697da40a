// The SimGrid adapter: the only code in dtsim that includes <simgrid/...>.
// Builds the platform of the simulated ranks from the cluster spec and runs a TaskGraph on it with
// dependency tracking of our own (SimGrid's vetoed-activity dependencies do not scale; see
// ../shared/docs/simgrid-3.32-notes.md §3).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sim/model/platform.hpp"
#include "sim/model/task_graph.hpp"
#include "traces/calibration.hpp"
#include "traces/cluster.hpp"

namespace dtsim::sim {

/// Traffic of one network link over the iteration.
struct LinkStats {
  std::string name;             ///< e.g. "nic-up12.3" (node 12, NIC 3, towards the switch), "nvl-down5"
  double bandwidth_Bps = 0;     ///< effective (nominal x calibrated efficiency)
  double bytes = 0;             ///< bytes of all flows that crossed it
  double busy_s = 0;            ///< time with at least one flow on it
  double peak_utilization = 0;  ///< highest instantaneous load / bandwidth (flow fidelity; 1 = saturated)
  /// Folding with multiplicity (PlatformLink::multiplicity): each simulated flow stood for this many; bandwidth_Bps
  /// and bytes are the real link's (its capacity, every copy's bytes).
  int multiplicity = 1;
  /// Analytic engine only (0 elsewhere): the highest concurrent demand / bandwidth of its unshared flows, which may
  /// pass 1 where the flow engines would share the link; peak_utilization is then min(1, peak_demand).
  double peak_demand = 0;
};

struct EngineResult {
  std::vector<double> start_s;        ///< per task: simulated start time, seconds
  std::vector<double> end_s;          ///< per task: simulated end time, seconds
  std::uint64_t activities = 0;       ///< SimGrid activities (execs and comms) run
  std::uint64_t links = 0;            ///< links in the platform
  std::uint64_t hosts = 0;            ///< hosts in the platform (compute, timers, endpoints, mirrors)
  std::vector<LinkStats> link_stats;  ///< every link of the platform, in creation order
  std::string engine;                 ///< "simgrid-flow" or "analytic"
};

/// Every link of `pf` with its real capacity and multiplicity, nothing carried yet (engines start from this).
std::vector<LinkStats> initial_link_stats(const Platform& pf);
/// After a run: each link's bytes counted once per real flow (x its multiplicity).
void count_folded_copies(const Platform& pf, EngineResult* res);

/// Runs `g` on a platform made of the GPUs in `gpu_of_rank` (simulated rank -> global GPU id).
/// Flows use CM02 max-min sharing with latency/bandwidth factors 1 and no TCP window, so link bandwidths
/// (nominal x calibrated efficiency) and latencies are what the cluster and calibration files say.
/// May be called once per process (SimGrid's engine is a process-wide singleton).
/// `share`: per simulated rank, folding with multiplicity (describe_platform).
EngineResult run_on_simgrid(const TaskGraph& g, const ClusterSpec& cluster, const Calibration& cal,
                            const std::vector<int>& gpu_of_rank, const std::vector<RankShare>& share = {});

/// "3.32.0" for the SimGrid this binary was built with.
std::string simgrid_version();

}  // namespace dtsim::sim
