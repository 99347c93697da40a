// Chakra execution-trace writer: an ExecGraph (exec_graph.hpp) as the bytes of a Chakra protobuf .et file, and the
// communicator-group file ASTRA-sim reads beside a set of .et files. The inverse of parse_chakra_et for what the
// simulator's export (sim/report/chakra_export.hpp) produces.
//
// The .et stream (traces/chakra_et.proto, MLCommons Chakra's et_def.proto): varint-length-prefixed messages, one
// GlobalMetadata with version "0.0.4" (the version ASTRA-sim's examples write and parse_chakra_et reads), then one
// Node per ExecNode in the graph's order. Node fields:
//  * id, name, ctrl_deps, data_deps as in the ExecNode; duration_micros = duration_ns / 1000 rounded to the nearest
//    microsecond (Chakra's unit; 0 when duration_ns < 0).
//  * type: COMPUTE -> COMP_NODE (4); COMMUNICATION with comm.op "send" -> COMM_SEND_NODE (5), "recv" ->
//    COMM_RECV_NODE (6), any other op -> COMM_COLL_NODE (7); MEMORY -> MEM_LOAD_NODE (2); OTHER -> METADATA_NODE
//    (1).
//  * attributes, with the value kinds Chakra's own generators use: "is_cpu_op" (bool_val, = !gpu) on every node;
//    COMP_NODE: "num_ops" (int64_val, the flops) and "tensor_size" (uint64_val, tensor_bytes) when known (> 0);
//    COMM_COLL_NODE: "comm_type" (int64_val, CollectiveCommType: ALL_REDUCE 0, REDUCE 1, ALL_GATHER 2, BROADCAST 5,
//    ALL_TO_ALL 6, REDUCE_SCATTER 7, BARRIER 9), "comm_size" (int64_val: comm.bytes, the collective's larger buffer
//    as nccl-tests counts it, except an all-gather's, which Chakra and ASTRA-sim read as each rank's input:
//    comm.bytes / comm.group_size; the Chakra replay multiplies it back by its group's size) and "pg_name" (string_val,
//    comm.process_group, when not empty); COMM_SEND_NODE / COMM_RECV_NODE: "comm_size", and "comm_src", "comm_dst",
//    "comm_tag" (int32_val) when >= 0.
// A collective whose op has no CollectiveCommType ("" or unknown) is refused (ConfigError naming the node).
//
// Communicator groups (ASTRA-sim's --comm-group-configuration, read by its Workload::initialize_comm_groups,
// github.com/astra-sim/astra-sim astra-sim/workload/Workload.cc, read at commit 0383c20): one JSON object mapping a
// group id to the list of its ranks, {"1": [0, 1], "2": [0, 2]}; the id is a decimal integer (ASTRA-sim converts it
// with std::stoi) and a collective node names its group by that id in its "pg_name" attribute. Ids "0" and "" mean
// every rank in ASTRA-sim, so written groups start at 1.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "traces/exec_graph.hpp"

namespace dtsim {

/// The bytes of a Chakra .et file holding `g` (see the header comment). Deterministic.
std::string chakra_et_bytes(const ExecGraph& g);

/// A communicator group: id (a decimal integer >= 1 when written) and its ranks.
using ChakraCommGroups = std::vector<std::pair<std::string, std::vector<int>>>;

/// The JSON text of a communicator-group file, groups in the given order, ranks as given.
std::string chakra_comm_groups_json(const ChakraCommGroups& groups);

/// Reads a communicator-group file (groups in numeric order of their ids); FormatError (one line, naming the file) when
/// it is not a JSON object of lists of non-negative integers, or a key is not a decimal integer. ConfigError when it
/// cannot be opened.
ChakraCommGroups read_chakra_comm_groups(const std::string& path);

}  // namespace dtsim
