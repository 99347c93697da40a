// Replay of Chakra execution traces: one .et graph per rank (as dtsim simulate --export-chakra writes them, or as
// Chakra's converters and ASTRA-sim's examples do) run together as one multi-rank dependency graph, with the Kineto
// replay's duration edits (replay.hpp, ReplayOptions) that make sense without a timeline.
//
// Inputs: the ranks' ExecGraphs (exec_graph.hpp; rank from "<prefix>.<rank>.et") and optionally the communicator
// groups (chakra_et_writer.hpp: ASTRA-sim's JSON {"<id>": [ranks]}). A directory stands for every ".et" file in it
// and, when it holds exactly one file ending in "comm_group.json", that file.
//
// Semantics (per rank, a node starts when all its ctrl_deps and data_deps have ended; no other resource model: the
// graph's dependencies carry program order):
//  * COMPUTE / MEMORY / OTHER nodes and COMM_SEND take their recorded duration (duration_micros; -1 = 0);
//  * COMM_RECV ends at max(its own start + its duration, the end of the matching send): the send on rank comm_src
//    to this rank (comm_dst) with the same comm_tag, the k-th such receive matching the k-th such send;
//  * a collective (COMM_COLL) is matched across ranks by its group and order of issue: the k-th collective a rank
//    issues on group G (pg_name, ids ascending) is instance k of G. Its members are the group's ranks in the
//    communicator-group file; without the file, "" or "0" is every rank (ASTRA-sim's default group) and another
//    name is the set of ranks issuing collectives on it. An instance starts on every member when the last member
//    has reached it (its dependencies ended) and each member's node then takes its own recorded duration.
// Errors (FormatError, one line): a rank twice or unknown, a rank issuing a different number of collectives on a
// group than another member, or on a group it is not a member of, instances whose ops differ, a send or receive
// without its partner, and a deadlock (nodes that never become ready), naming the first stuck node.
//
// Edits (ReplayOptions): kernel_scales on GPU compute nodes (first matching regex on the node name);
// collective_time_scale, collective_bw_scale, collective_bandwidth_Bps and collective_alpha_s on collectives and
// sends as the Kineto replay's collective model defines them (edit_collective; group size = the group's member
// count, bytes = comm_size). Receives keep their duration. cpu_gap_scale, runtime_scale, launch latency, group-size
// edits and keep_unexplained_gaps describe Kineto timelines and are refused (ConfigError).
//
// Result: per rank the span (latest node end, from t = 0) and the overall span (the iteration time), base and
// edited; text and replay.json (schema "dtsim.replay.chakra").
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/replay/replay.hpp"
#include "traces/chakra_et_writer.hpp"
#include "traces/exec_graph.hpp"

namespace dtsim::sim {

/// The ranks of one Chakra workload and its communicator groups.
struct EtWorkload {
  std::vector<ExecGraph> ranks;  ///< sorted by rank
  ChakraCommGroups groups;       ///< empty when no file was given or found
  std::string groups_source;     ///< the communicator-group file read ("" when none)
  /// Dependencies load_et_workload dropped, as Chakra's converter output needs: on ids not in the file, and a node's
  /// dependency on itself or control dependency on a later id (a CPU operator naming its own GPU kernel), which
  /// make cycles. dtsim's own export has none.
  std::size_t dropped_missing_deps = 0, dropped_cyclic_deps = 0;
};

/// Reads `paths` (.et files, or one directory: its .et files and its one "*comm_group.json") and `comm_groups`
/// ("" = none, or found in the directory). ConfigError when nothing can be read; FormatError from the importers, and
/// when a file's rank is unknown (not "<prefix>.<rank>.et") or repeated.
EtWorkload load_et_workload(const std::vector<std::string>& paths, const std::string& comm_groups = "");

/// Counts of one replay.
struct EtReplayStats {
  std::size_t nodes = 0, compute_nodes = 0, collective_nodes = 0, sends = 0, recvs = 0;
  std::size_t collective_instances = 0;
  std::size_t compute_scaled = 0;        ///< GPU compute nodes a kernel_scales rule changed
  std::size_t collectives_modelled = 0;  ///< collectives and sends re-timed by the alpha-beta model
  std::size_t collectives_without_bytes = 0;
};

/// Replayed times: per rank (EtWorkload::ranks order), per node (the graph's node order), ns from t = 0.
struct EtTimeline {
  std::vector<std::vector<std::int64_t>> start_ns, end_ns;
  std::vector<std::int64_t> rank_span_ns;  ///< latest end per rank
  std::int64_t span_ns = 0;                ///< latest end over every rank
};

/// Runs the workload with the durations edited by `o` (validated first; see the header comment).
EtTimeline run_et_replay(const EtWorkload& w, const ReplayOptions& o, EtReplayStats* stats = nullptr);

struct EtReplayRank {
  int rank = -1;
  std::string source;
  std::size_t nodes = 0, compute_nodes = 0, collective_nodes = 0, sends = 0, recvs = 0;
  std::int64_t span_ns = 0, predicted_span_ns = 0;
};

struct EtReplayReport {
  std::vector<EtReplayRank> ranks;
  std::string groups_source;
  std::size_t groups = 0;
  std::size_t dropped_missing_deps = 0, dropped_cyclic_deps = 0;  ///< EtWorkload's
  EtReplayStats stats;  ///< of the base replay (edit counts from the edited one)
  std::int64_t span_ns = 0;
  bool edited = false;
  std::string edits;                   ///< ReplayOptions::describe()
  std::int64_t predicted_span_ns = 0;  ///< with the edits (= span_ns when not edited)
  double change_pct = 0;               ///< 100 (predicted - span) / span
};

/// The base replay and, with edits, the edited one.
EtReplayReport replay_et(const EtWorkload& w, const ReplayOptions& o);

/// Readable summary (several lines, ending in a newline).
std::string et_replay_summary(const EtReplayReport& r);
/// replay.json of a Chakra replay: schema "dtsim.replay.chakra", the options, per-rank and overall spans.
std::string et_replay_json(const EtReplayReport& r, const ReplayOptions& o);

}  // namespace dtsim::sim
