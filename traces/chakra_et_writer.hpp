// Chakra protobuf execution traces (.et) out: the writer twin of parse_chakra_et (traces/exec_graph.hpp), for
// execution graphs dtsim produces (sim/report/chakra_export.hpp turns a lowered task graph into one per rank).
//
// The stream is what Chakra's own tools write and read (et_def.proto of mlcommons/chakra, traces/chakra_et.proto):
// a varint-length-prefixed GlobalMetadata (version "0.0.4") then one varint-length-prefixed Node per ExecNode, in
// the graph's order. Per node: id, name, ctrl_deps, data_deps, duration_micros (the duration rounded to whole
// microseconds, the schema's unit; omitted when unknown) and
//  - type: COMPUTE -> COMP_NODE, MEMORY -> MEM_LOAD_NODE, OTHER -> METADATA_NODE; COMMUNICATION -> COMM_SEND_NODE
//    (comm.op "send"), COMM_RECV_NODE ("recv") or COMM_COLL_NODE (any other op, with comm_type: Chakra's
//    CollectiveCommType: all-reduce 0, reduce 1, all-gather 2, broadcast 5, all-to-all 6, reduce-scatter 7);
//  - attributes, with the types Chakra's converters use: is_cpu_op (bool, = !gpu), num_ops (int64, flops when
//    > 0), comm_size (int64 bytes), comm_src / comm_dst (int32: the graph's rank and the node's peer, by direction),
//    comm_tag (int32; int64 for a value outside int32, which the reader takes alike), pg_name (string) and
//    comm_group_size (int64) for collectives that name them.
#pragma once
#include <string>

#include "traces/exec_graph.hpp"

namespace dtsim {

/// The .et bytes of `g` (g.rank is the rank of its sends and receives).
std::string chakra_et_bytes(const ExecGraph& g);

}  // namespace dtsim
