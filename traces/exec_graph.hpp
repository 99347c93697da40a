// Execution graphs: the operator-level dependency graph of one rank's training step, imported from a PyTorch
// execution trace (ET, the ExecutionTraceObserver JSON) or a Chakra execution trace (JSON or protobuf .et). Where the
// Kineto importer (trace_events.hpp) says *when* things ran, an ExecGraph says *what depends on what*.
//
// Semantics, PyTorch ET ("pytorch-et"; schemas "1.0.1", "1.0.3-chakra.0.0.4", "1.1.0-chakra.0.0.4", ...):
//  * Every node of the file becomes one ExecNode with the same id; `parent` is the node's "ctrl_deps" field (newer
//    schemas) or "parent" field (1.0.1), i.e. the enclosing record_function scope; the root (its own parent) gets -1.
//  * Operators are nodes with a non-empty "op_schema" (aten::, c10d::, fbgemm::, ...) and the communication
//    records (record_param_comms, nccl:*, gloo:*, c10d::*). Everything else is structure, kind OTHER: the
//    "[pytorch|profiler|execution_trace|process/thread]" roots, user annotations ("## forward ##", "ProfilerStep#4"),
//    autograd wrappers ("autograd::engine::evaluate_function: ...", "AddmmBackward0"). A node without an
//    "op_schema" field at all counts as an operator when its name starts with "aten::".
//  * An operator or annotation with an operator among its ancestors is `nested` (e.g. aten::addmm inside
//    aten::linear, nccl:all_reduce inside record_param_comms inside c10d::allreduce_). Nested nodes carry no
//    dependencies: they run as part of their outermost operator ancestor. The non-nested operators ("top-level
//    operators") form the dependency graph:
//      - data_deps: for each tensor a top-level operator reads (inputs whose type mentions "Tensor"; undefined
//        "Tensor(nullptr ...)" values and tensors without a device are ignored), the last top-level operator with a
//        smaller id that wrote it (listed it among its outputs; in-place ops list their result as output).
//        Tensors are identified by the tensor id (first element of the [tensor_id, storage_id, offset, numel,
//        elem_bytes, device] tuple). Deps across threads are kept (backward reads forward activations).
//      - ctrl_deps: the previous top-level operator of the same thread ("tid"), i.e. program order.
//    Both only point to smaller ids, so an imported ET is acyclic by construction.
//  * kind: COMMUNICATION for the communication records above; MEMORY for aten::copy_ / _to_copy / to /
//    _copy_from(_and_resize) whose tensors live on two or more devices (host<->device or device<->device copies);
//    COMPUTE for the other operators; OTHER for structure.
//  * comm (COMMUNICATION): from the record_param_comms record (the node itself, its nearest record_param_comms
//    ancestor, or else its first record_param_comms descendant): op from "collective_name" (or the String input),
//    normalised; bytes = max(in_msg_nelems, out_msg_nelems) x dtype size (schemas >= 1.0.3), else the larger of the
//    record's first (input) argument and its outputs: the whole buffer, as nccl-tests and the Kineto importer count
//    it (input for all-reduce / broadcast / reduce-scatter, output for all-gather); group_size = "pg_size", else the
//    length of the first non-empty split-size list (all_to_allv), else 0; process_group = "pg_name", else
//    "pg_desc". A node's own name overrides op when it names a collective (nccl:all_reduce). "wait" records get
//    op "".
//  * ExecGraph::rank: the rank argument (the Int just before the collective name) of the first record_param_comms
//    of an all-reduce / all-gather / reduce-scatter / all-to-all / barrier; -1 when there is none (for broadcast,
//    reduce, send and recv that argument is the root/peer, not the caller).
//  * gpu: the operator touches a tensor on a non-CPU device (it launches device work). thread: "tid" attribute.
//    rf_id: "rf_id" attribute. duration_ns: -1 (ETs do not time nodes).
//  * flops: for aten::mm / addmm / bmm / baddbmm / linear / matmul 2*M*N*K (times the broadcast batch) from the input
//    shapes; for convolutions (aten::conv1d/2d/3d, convolution, _convolution, cudnn_convolution[_transpose]) 2 x
//    output elements x (Cin/groups x kernel elements), and for aten::convolution_backward that per computed gradient
//    (grad_input, grad_weight from output_mask). Another operator gets the sum over its nearest descendants that
//    have a formula, so summing flops over top-level operators counts every GEMM/convolution once; structure is 0.
//  * tensor_bytes: sum of numel x elem_bytes over the distinct tensors among the node's inputs and outputs.
//
// Semantics, Chakra JSON ("chakra-json"):
//  * The feeder form {"workload_graph": [{"Id", "Name", "NodeType", "data_deps", "ctrlDeps", "runtime",
//    "is_cpu_op", "comm_type", "comm_size", ...}]} (Chakra's JSON feeder input) and the chakra_jsonizer form (a
//    GlobalMetadata object followed by one protobuf-JSON Node object per node: "id", "name", "type", "ctrlDeps",
//    "dataDeps", "durationMicros", "attr"). Every node is kept, deps exactly as recorded (dangling or cyclic
//    deps are reported by topological_order, not at import).
//  * kind from the node type: COMP_NODE(4) COMPUTE; COMM_SEND(5) / COMM_RECV(6) / COMM_COLL(7) COMMUNICATION;
//    MEM_LOAD(2) / MEM_STORE(3) MEMORY; others OTHER. duration_ns = runtime / duration_micros x 1000.
//    gpu = !is_cpu_op. comm.op from comm_type (CollectiveCommType; GATHER and SCATTER give ""), send/recv from the
//    node type, else from the name ("ncclKernel_AllReduce_...", "c10d::broadcast_(0)"); comm.bytes from comm_size
//    (else tensor_size), 0 when absent; comm_src / comm_dst / comm_tag into the fields of those names (-1 when
//    absent). Chakra JSON has no nesting: parent = -1, nested = false.
//  * schema: GlobalMetadata "version" (jsonizer form), "" for the feeder form. rank: from the file name
//    convention "<prefix>.<rank>.json" (chakra.0.json -> 0), else -1.
//
// Semantics, Chakra protobuf ("chakra-et"): the binary form of the jsonizer's, with the same rules: Node id, name,
// type, ctrl_deps, data_deps, duration_micros and the same attributes (an integer attribute may have any integer
// kind of AttributeProto's oneof). schema: GlobalMetadata.version (may be empty); rank: "<prefix>.<rank>.et".
//
// Errors: every failure is a dtsim::FormatError (syntax, structure, wrong types of structural fields, duplicate
// ids, unknown parent) or ConfigError (cannot open) whose one-line message starts with the source (the path, or
// "path:member" inside an archive). Descriptive metadata of a wrong type (attrs, tensor tuples, shapes) is ignored.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "traces/trace_events.hpp"

namespace dtsim {

/// What a node does, as far as a simulator cares.
enum class ExecNodeKind {
  COMPUTE,        ///< an operator / compute kernel
  COMMUNICATION,  ///< a collective or point-to-point operation (`comm` describes it)
  MEMORY,         ///< a data movement: ET host<->device copy, Chakra MEM_LOAD / MEM_STORE node
  OTHER,          ///< structure: roots, annotations, autograd wrappers, Chakra metadata nodes
};
const char* to_string(ExecNodeKind kind);

/// One node of an execution graph.
struct ExecNode {
  std::int64_t id = 0;  ///< node id as recorded in the trace (unique, >= 0)
  std::string name;     ///< operator / node name as recorded
  ExecNodeKind kind = ExecNodeKind::OTHER;
  std::int64_t parent = -1;             ///< enclosing node (PyTorch ET scope), -1 for roots and in Chakra JSON
  bool nested = false;                  ///< PyTorch ET: an operator is among its ancestors (runs inside it; no deps)
  std::vector<std::int64_t> data_deps;  ///< ids of nodes whose output this node consumes (it waits for them)
  std::vector<std::int64_t> ctrl_deps;  ///< ids of nodes that must finish before this node starts (program order)
  std::int64_t duration_ns = -1;        ///< recorded duration (Chakra runtime / duration_micros), else -1
  std::int64_t thread = 0;              ///< recording thread ("tid"), 0 when not recorded
  bool gpu = false;                     ///< runs on / launches work on a GPU (see the header comment)
  CollectiveInfo comm;                  ///< meaningful when kind == COMMUNICATION
  std::int64_t rf_id = -1;              ///< record-function id, links to Kineto's "Record function id"; -1 if none
  double flops = 0;                     ///< floating-point operations when derivable from shapes, else 0
  double tensor_bytes = 0;              ///< bytes of the distinct tensors the node reads or writes, 0 if unknown
  /// Chakra point-to-point (COMM_SEND / COMM_RECV): the "comm_src", "comm_dst" and "comm_tag" attributes (sending
  /// rank, receiving rank, tag matching a send with its receive); -1 when absent.
  std::int64_t comm_src = -1, comm_dst = -1, comm_tag = -1;
};

/// The execution graph of one trace file (one rank).
struct ExecGraph {
  std::string source;           ///< path (or "path:member") it was read from; prefixes error messages
  std::string format;           ///< "pytorch-et", "chakra-json" or "chakra-et"
  std::string schema;           ///< ET "schema" / Chakra GlobalMetadata "version"; "" when not recorded
  int rank = -1;                ///< distributed rank when derivable (see the header comment), else -1
  std::vector<ExecNode> nodes;  ///< sorted by id
};

/// Reads a PyTorch execution trace: plain or compressed JSON, or an archive with exactly one .json member.
/// Throws ConfigError when the file cannot be opened, FormatError for anything unreadable.
ExecGraph import_pytorch_et(const std::string& path);
/// Parses the JSON text of a PyTorch execution trace; `source` names it in errors and in ExecGraph::source.
ExecGraph parse_pytorch_et(const std::string& text, const std::string& source);

/// Reads a Chakra trace in JSON (feeder or chakra_jsonizer form) or protobuf (.et, see parse_chakra_et): plain or
/// compressed, or an archive with exactly one .json or .et member.
ExecGraph import_chakra_json(const std::string& path);
/// Parses the text of a Chakra JSON trace (binary protobuf input is read as parse_chakra_et); `source` names it in
/// errors and in ExecGraph::source.
ExecGraph parse_chakra_json(const std::string& text, const std::string& source);

/// Reads a Chakra protobuf execution trace (.et; plain, .gz, or an archive with exactly one .et member).
ExecGraph import_chakra_et(const std::string& path);
/// Parses the bytes of a Chakra .et trace (format "chakra-et"): varint-length-prefixed messages of Chakra's
/// et_def.proto (traces/chakra_et.proto), a GlobalMetadata then one Node per node, read into the same ExecNode
/// fields and attributes as Chakra JSON. FormatError, naming the message and its byte offset, on a truncated
/// stream, a message that does not parse, ids beyond int64, or a GlobalMetadata version other than 0.0.x.
ExecGraph parse_chakra_et(const std::string& bytes, const std::string& source);

/// Every member whose name ends in ".json" or ".et" (or whose content is a Chakra protobuf stream) of a (compressed)
/// tar archive, each detected as PyTorch ET, Chakra JSON or Chakra protobuf, in archive order; sources are
/// "path:member". A file that is not an archive gives one graph. FormatError when there is no such member.
std::vector<ExecGraph> import_exec_graph_archive(const std::string& path);

/// Reads one execution graph, detecting the container (plain, .gz, tar archive with exactly one .json or .et member)
/// and the format (PyTorch ET, Chakra JSON, Chakra protobuf). Kineto traces are refused with a FormatError.
ExecGraph import_exec_graph(const std::string& path);

/// Validates the graph: every dependency id (data and ctrl) names a node, no node depends on itself, ids are
/// unique, and the dependency graph is acyclic (Kahn's algorithm). Returns the indexes into g.nodes in a
/// topological order (dependencies first; among ready nodes the smallest index first, so it is deterministic).
/// Throws FormatError naming g.source and the first offending node (for a cycle: a node on the cycle and the cycle).
std::vector<std::size_t> topological_order(const ExecGraph& g);

}  // namespace dtsim
