// The simulated iteration as Chakra execution traces: one ExecGraph per rank (written as <prefix>.<rank>.et by
// traces/chakra_et_writer.hpp, the naming ASTRA-sim reads) and the communicator groups its collectives name.
//
// What becomes a node (per rank, from the lowered TaskGraph and the engine's times):
//  * a COMPUTE task -> COMP_NODE (gpu), num_ops = its FLOPs; a DELAY task that is no part of a collective or a
//    transfer -> COMP_NODE (on the HOST stream: a CPU node, is_cpu_op);
//  * a collective instance (Lowered::collectives: its rendezvous join, every member's delays and flows and end
//    joins, whatever the algorithm: ring, hierarchical part, tree, NVLS, chain, all-to-all) -> one COMM_COLL_NODE
//    per member, comm_type from the kind, comm_size as Chakra defines it (traces/chakra_et_writer.hpp: an
//    all-gather's is each rank's input, the gathered bytes / members), pg_name = the id of its member set in
//    the communicator-group list (ids 1, 2, ... in order of first use). A hierarchical all-reduce is three nodes
//    (reduce-scatter in the node, all-reduce across nodes, all-gather), as the lowering runs it;
//  * a point-to-point transfer (a pipeline send or a ring-attention KV transfer: a FLOW to a peer outside any
//    collective, with the DELAY before it) -> COMM_SEND_NODE on the sender and COMM_RECV_NODE on the receiver,
//    comm_src / comm_dst = global ranks, comm_tag = the transfer's index among the transfers from src to dst;
//  * the host's kernel issue, when the lowering made it release times (TaskGraph::release_at_least) -> a chain of
//    CPU COMP_NODEs ("host issue: <task>"), one per released task outside collectives, each ending at the task's
//    release; the task depends on it;
//  * zero-time JOINs outside collectives -> no node: their dependencies pass through.
// Dependencies: every graph edge between tasks of two nodes of a rank, through the joins; an edge into a collective's
// rendezvous becomes a dependency of the predecessor rank's member node; an edge from a transfer's flow to a task of
// the receiver becomes a dependency on the COMM_RECV_NODE. Every dependency is a data_dep, program order on a stream
// included (Chakra's feeder, which ASTRA-sim runs, waits on data_deps only); ctrl_deps stay empty.
// Durations (duration_micros, rounded to 1 us by the writer) are the simulated ones, measured from the time the
// node's dependencies are met: COMP / CPU / SEND nodes end - max(dependency ends); a collective member's node
// end - max over the members of their dependency ends (the rendezvous); a RECV node 0 (it completes when its send
// does). Replaying the export (sim/replay/et_replay.hpp) therefore reproduces the simulated iteration up to that
// rounding. Nodes are numbered per rank in a topological order (dependencies first, then by ready time), so a
// group's collectives appear in the same order on every member.
//
// Requirements: every rank simulated (SimOptions::fold NONE), collectives recorded (SimOptions::record_collectives)
// and the graph's dependencies and release times still there (sim::simulate's `inspect` hook). A dependency between
// ranks that is neither a collective nor a transfer, or a flow to a folded mirror, is refused (ConfigError).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "sim/engine/simgrid_runtime.hpp"
#include "sim/model/lowering.hpp"
#include "traces/chakra_et_writer.hpp"
#include "traces/exec_graph.hpp"

namespace dtsim::sim {

struct ChakraExport {
  std::vector<ExecGraph> ranks;  ///< by global rank; ExecGraph::rank set, format "chakra-et"
  ChakraCommGroups groups;       ///< id -> global ranks (sorted)
};

/// Converts the simulated graph (see the header comment). ConfigError when it cannot be exported.
ChakraExport chakra_export(const Lowered& low, const EngineResult& res);

/// The files of an export: "<prefix>.<rank>.et" per rank and "<prefix>.comm_group.json".
std::vector<std::pair<std::string, std::string>> chakra_export_files(const ChakraExport& ex, const std::string& prefix);

}  // namespace dtsim::sim
