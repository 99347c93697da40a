// A simulated run as Chakra execution traces (`dtsim simulate --export-chakra DIR`): the lowered per-rank task graph
// with the durations the engine gave each task, one ExecGraph per rank, written as Chakra protobuf .et files
// (traces/chakra_et_writer.hpp) named as ASTRA-sim names them, <prefix>.<rank>.et.
//
// Mapping (every rank must be lowered: an unfolded run; the API runs export with --fold none and the host's issue as
// tasks, so that nothing is left to symmetry or to release times):
//  - COMPUTE task -> COMP_NODE on its rank (GPU op, num_ops = its FLOPs), duration = its simulated duration;
//  - DELAY task (collective start-up, per-step software cost, the host's kernel issue) -> COMP_NODE marked as a CPU
//    op (is_cpu_op), with its duration; JOIN (zero-time rendezvous) -> a CPU COMP_NODE of duration 0;
//  - FLOW task (a transfer of `bytes` from rank a to rank b) -> COMM_SEND_NODE on a and COMM_RECV_NODE on b with
//    comm_size, comm_src, comm_dst and comm_tag (the same tag on both); both take the flow's simulated duration.
//    Collectives therefore appear as the point-to-point transfers dtsim lowered them into (ring or tree steps),
//    named after the collective ("grad-bucket all-reduce"); COMM_COLL nodes are not emitted.
//  - Dependencies: every edge of the task graph becomes a data dependency. An edge whose two tasks sit on different
//    ranks follows the transfer when it is one (the receiver depends on the COMM_RECV node); any other cross-rank
//    edge (a collective's rendezvous) becomes a zero-byte send/receive pair between the two ranks.
// Durations come from the engine (contention and interference included), so replaying the files with their
// durations (sim/replay/exec_replay.hpp) reproduces the simulated iteration up to the microsecond rounding of the
// schema's duration_micros.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "sim/engine/simgrid_runtime.hpp"
#include "sim/model/lowering.hpp"
#include "traces/exec_graph.hpp"

namespace dtsim::sim {

/// One execution graph per global rank (ExecGraph::rank), from a lowered graph that still has its dependency lists
/// and the engine's task times. DTSIM_ASSERT when the run is folded (a simulated rank standing for several).
std::vector<ExecGraph> chakra_graphs(const Lowered& low, const EngineResult& res);

/// The .et files of chakra_graphs(): ("<prefix>.<rank>.et", bytes) for every rank.
std::vector<std::pair<std::string, std::string>> chakra_files(const Lowered& low, const EngineResult& res,
                                                              const std::string& prefix = "dtsim");

}  // namespace dtsim::sim
