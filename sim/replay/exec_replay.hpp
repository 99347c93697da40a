// Replay of execution graphs (Chakra .et / JSON, PyTorch ET): the dependency graphs of one or several ranks run with
// their recorded durations, point-to-point transfers paired across ranks and collectives synchronised across the
// ranks that issue them, with what-if edits. Where the Kineto replay (replay.hpp) knows *when* things ran and
// re-times a measured timeline, this one knows only *what depends on what* and how long each node took.
//
// Semantics (a list schedule without resource limits: streams and program order are dependencies in these files):
//  - A node starts when every node it depends on (data and control dependencies, within its rank) has ended; a
//    dependency on an id that is not in the file is dropped and counted (Chakra's own test traces have some), and
//    so is a dependency of a node on itself or a control dependency on a later id (Chakra's PyTorch converter
//    records a CPU operator's GPU kernel, and sometimes the node itself, among its control dependencies, which makes
//    cycles; data dependencies and program order point backwards).
//  - A COMM_SEND on rank a with peer b and tag t and the COMM_RECV on b with peer a and tag t are one transfer: it
//    starts when both are ready and both end together, after the send's duration (the receive's when the send has
//    none). A send or receive without its partner runs alone.
//  - Collectives (COMMUNICATION nodes with another op) are matched across ranks by (process group, op, occurrence
//    on the rank): an instance starts when every rank that issues it is ready and lasts the longest recorded
//    duration among them.
//  - Durations: the recorded one; a communication node without one takes alpha + bytes / bandwidth when a
//    bandwidth is given, else 0; a compute node without one takes 0 (counted in ExecReplay::untimed).
//  - Edits: kernel_scales (first matching regex, GPU compute nodes), comm_time_scale (every communication node),
//    comm_bandwidth_Bps (replaces the time of every communication node with bytes > 0 by alpha + bytes / bw).
// A dependency cycle, or transfers and collectives that wait on each other forever, is a FormatError naming a node
// left unscheduled.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sim/replay/replay.hpp"
#include "traces/exec_graph.hpp"

namespace dtsim::sim {

struct ExecReplayOptions {
  std::vector<KernelScale> kernel_scales;
  double comm_time_scale = 1.0;
  double comm_bandwidth_Bps = 0;  ///< > 0: communication time = comm_alpha_s + bytes / this
  double comm_alpha_s = 0;
  bool edited() const { return !kernel_scales.empty() || comm_time_scale != 1.0 || comm_bandwidth_Bps > 0; }
};

struct ExecReplay {
  std::vector<double> rank_span_s;  ///< per graph (in the order given): when its last node ends, from t = 0
  double span_s = 0;                ///< the longest rank
  std::size_t nodes = 0;
  std::size_t transfers = 0;          ///< send/receive pairs matched across ranks
  std::size_t unmatched_p2p = 0;      ///< sends or receives without their partner (run alone)
  std::size_t collectives = 0;        ///< collective instances (each counted once)
  std::size_t untimed = 0;            ///< nodes without a duration that took 0
  std::size_t dangling_deps = 0;      ///< dependencies on ids not in their file (dropped, as Chakra's feeder does)
  std::size_t forward_ctrl_deps = 0;  ///< dependencies on the node itself and control dependencies on later ids
};

/// Replays the graphs together (one per rank; ranks are ExecGraph::rank, or the position when it is -1).
ExecReplay replay_exec_graphs(const std::vector<ExecGraph>& graphs, const ExecReplayOptions& options = {});

}  // namespace dtsim::sim
