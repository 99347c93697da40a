// Per-rank task graph: compute kernels, delays, network flows and joins with explicit dependencies.
// The backend-neutral form of a lowered plan; the SimGrid engine runs it, the report reads it back.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "traces/error.hpp"

namespace dtsim::sim {

/// HOST: the CPU thread that issues the rank's kernels (calibration host_issue_s > 0 only).
/// TO_HOST, FROM_HOST: the rank's copy streams to and from host memory (activation offloading; the host link is
/// full duplex, as Megatron-Core's d2h and h2d streams).
enum class Stream : std::uint8_t { COMPUTE = 0, TP = 1, PP = 2, DP = 3, HOST = 4, TO_HOST = 5, FROM_HOST = 6 };
inline constexpr int kNumStreams = 7;
inline bool is_host_copy(Stream s) { return s == Stream::TO_HOST || s == Stream::FROM_HOST; }
const char* stream_name(Stream s);

enum class TaskKind : std::uint8_t {
  COMPUTE,  ///< kernels on the rank's compute stream, duration_s
  DELAY,    ///< fixed latency on a communication stream (collective start-up, per-step software cost)
  FLOW,     ///< a transfer of `bytes` from `rank` to `peer` (or to the rank's mirror) over the network
  JOIN      ///< zero-time synchronisation point (collective rendezvous, completion of a group)
};

enum class Phase : std::uint8_t { FORWARD, BACKWARD, RECOMPUTE, GRAD_SYNC, OPTIMIZER, OTHER };
const char* phase_name(Phase p);

/// What a memory allocation holds (summary.json and the trace's memory counters break memory down by these).
enum class MemCategory : std::uint8_t {
  WEIGHTS,
  GRADIENTS,
  OPTIMIZER,
  RESERVED,         // static, present from t = 0
  ACTIVATIONS,      ///< stored activations of in-flight micro-batches
  RECOMPUTE,        ///< activations re-created for a layer's backward (recompute) and freed after it
  GATHERED_PARAMS,  ///< ZeRO-3 / FSDP: full parameters of a layer gathered for its forward or backward
  GRAD_BUFFERS      ///< ZeRO-3 / FSDP: a layer's full gradient until its reduce-scatter completes
};
inline constexpr int kNumMemCategories = 8;
const char* mem_category_name(MemCategory c);

/// A memory change of one simulated rank when a task starts or ends.
struct MemEvent {
  double bytes = 0;  ///< positive: allocation; negative: free
  std::int32_t task = -1;
  bool at_end = false;
  MemCategory category = MemCategory::ACTIVATIONS;
};
static_assert(sizeof(MemEvent) <= 16, "MemEvent grew: a large run holds millions");

/// Which part of the network a flow crosses.
enum class Path : std::uint8_t {
  INTRA_NODE = 0,  ///< through the node's NVSwitch
  INTER_NODE = 1,  ///< through NICs and one leaf (or the only) switch
  CROSS_LEAF = 2,  ///< through NICs, two leaf switches and the spine (fat-tree, rail) or a pod switch
  CROSS_POD = 3    ///< three-level fat-tree: leaf, pod and core switches
};

/// Largest global layer index a Task can hold (Task::layer is 16 bits; the lowering refuses deeper models).
inline constexpr int kMaxTaskLayer = 32767;

struct Task {
  // Laid out largest first, small fields packed (40 bytes): a large run holds tens of millions of tasks.
  double duration_s = 0;  ///< COMPUTE, DELAY
  /// One slot, read as `flops` for COMPUTE tasks and as `bytes` for FLOW tasks (a task has only one of them).
  union {
    double flops = 0;  ///< COMPUTE: FLOPs (MFU, trace annotation)
    double bytes;      ///< FLOW: payload
  };
  std::int32_t rank = -1;        ///< simulated rank owning the task (the sender of a flow)
  std::int32_t peer = -1;        ///< FLOW: receiving simulated rank (-1 with mirror)
  std::int32_t name = -1;        ///< index into TaskGraph::names
  std::int32_t microbatch = -1;  ///< -1 for none
  /// COMPUTE: fractional slowdown while a collective of the rank moves data (interference; 0 = none).
  float interference = 0;
  std::int16_t layer = -1;  ///< global layer index (<= kMaxTaskLayer), -1 for none
  TaskKind kind : 2 = TaskKind::JOIN;
  Stream stream : 3 = Stream::COMPUTE;
  Phase phase : 3 = Phase::OTHER;
  Path path : 2 = Path::INTRA_NODE;
  bool mirror : 1 = false;  ///< FLOW to the symmetric peer of a folded axis (see lowering.hpp)
};
static_assert(sizeof(Task) <= 40, "Task grew: it is stored once per task of every simulated rank");

/// One kernel of a COMPUTE task, as the cost model sized it (recorded when SimOptions::record_kernels is set):
/// a GEMM batch x (m x k) * (k x n), or a memory-bound kernel moving `bytes` through HBM. The executor
/// (validate/) runs these; the simulator only needs the task's duration.
struct KernelSpec {
  std::string name;
  bool gemm = false;
  double m = 0, k = 0, n = 0, batch = 1;
  double flops = 0, bytes = 0;
};

/// The rank's CPU issuing work for one gated task (a step's kernels, a collective call), kept outside the task graph
/// when the host never waits for the device (calibration host_sync_each_pass off): the host then runs ahead through
/// its issue work back to back from t = 0, so each span ends at a time known while lowering and the gated task gets
/// that time as its release (TaskGraph::release_at_least). A rank's spans are stored in program order; each starts
/// where the rank's previous one ended (the first at 0). For the trace's host track.
struct HostSpan {
  double end_s = 0;
  std::int32_t rank = -1;        ///< simulated rank
  std::int32_t name = -1;        ///< index into TaskGraph::names
  std::int32_t microbatch = -1;  ///< -1 for none
  std::int16_t layer = -1;
  Phase phase = Phase::OTHER;
};
static_assert(sizeof(HostSpan) <= 24, "HostSpan grew: a large unfolded run holds millions");

/// An all-to-all as one task per member (Lowerer::direct_all_to_all on the analytic network, unfolded): each member's
/// task is a DELAY whose `duration_s` is the start-up latency; the analytic engine (and only it) times the member's
/// pieces one after another on each of its lanes (in NCCL's p2p order, Pieces::order)
/// from the member's own start (the rendezvous, or its host's late issue of the call), and ends the task when its own
/// pieces are sent and every piece addressed to it has arrived: a closed form of the members' starts and the pieces'
/// route latencies and bandwidths (sim/model/exchange_timing.hpp), the same times as one FLOW task per piece without
/// the n (n + 1) tasks and 3 n^2 edges (issue Speed: 16.8 of the 18.3 million tasks of DeepSeek-V3 on 2,048 H100s
/// under skew).
struct Exchange {
  static constexpr std::uint8_t kNoPiece = 0xff;
  /// The pieces' payloads and paths, [from * n + to]. Exchanges that move the same pieces (an MoE layer's dispatch in
  /// every micro-batch) share one table: the lowering interns them (a skewed DeepSeek-V3 on 2,048 H100s has 4,200
  /// exchanges of 64 x 64 pieces; 135 MB of tables when each kept its own).
  struct Pieces {
    std::vector<double> bytes;        ///< the piece's payload
    std::vector<std::uint8_t> piece;  ///< kNoPiece, or the path (bits 0-1) and the lane (bit 2)
    /// Per member j, the n - 1 others in the order it sends to them: [j * (n - 1) + k] (the lowering's send order,
    /// NCCL's p2p schedule); empty: the pairwise-exchange order (step k: member j to member j + k + 1)
    std::vector<std::int32_t> order;
    bool operator==(const Pieces&) const = default;
  };
  std::vector<std::int32_t> tasks;  ///< per member: its task
  std::vector<std::int32_t> ranks;  ///< per member: simulated rank
  std::shared_ptr<const Pieces> pieces;
  int n() const { return static_cast<int>(tasks.size()); }
  /// The index of piece (from, to) in the tables.
  std::size_t at(int from, int to) const {
    return static_cast<std::size_t>(from) * tasks.size() + static_cast<std::size_t>(to);
  }
  double bytes(int from, int to) const { return pieces->bytes[at(from, to)]; }
  Path path(int from, int to) const { return static_cast<Path>(pieces->piece[at(from, to)] & 3); }
  int lane(int from, int to) const { return (pieces->piece[at(from, to)] >> 2) & 1; }
  bool has_piece(int from, int to) const { return pieces->piece[at(from, to)] != kNoPiece; }
  /// The member `from` sends its k-th piece to (k = 0 .. n - 2; whether there is a piece: has_piece).
  int target(int from, int k) const { return send_target(pieces->order, n(), from, k); }
  /// Member `from`'s k-th target under `order` (Pieces::order's layout; empty: the pairwise-exchange order).
  static int send_target(const std::vector<std::int32_t>& order, int n, std::ptrdiff_t from, int k) {
    if (order.empty()) return static_cast<int>((from + k + 1) % n);
    return order[static_cast<std::size_t>(from) * static_cast<std::size_t>(n - 1) + static_cast<std::size_t>(k)];
  }
};

/// A DAG of tasks. Dependencies are kept as an edge list while building and as CSR after finalize().
class TaskGraph {
public:
  std::int32_t add(const Task& t);
  void depend(std::int32_t before, std::int32_t after);
  /// Task `task` starts no earlier than `t_s` (the latest of its releases and its predecessors' ends). Equivalent to
  /// a dependency on a task that ends at t_s, without one: engines start the task at max(ready, release).
  void release_at_least(std::int32_t task, double t_s);
  /// The task's release time (0: none).
  double release_s(std::int32_t task) const {
    DTSIM_ASSERT(!released_, "release_s after release_edges");
    return static_cast<std::size_t>(task) < release_.size() ? release_[static_cast<std::size_t>(task)] : 0.0;
  }
  bool has_releases() const { return !release_.empty(); }
  /// Whether some task runs on a copy stream to or from host memory (activation offloading).
  bool uses_host_copies() const;
  void add_host_span(const HostSpan& span) { host_.push_back(span); }
  const std::vector<HostSpan>& host_spans() const { return host_; }
  std::int32_t intern(const std::string& name);
  /// Adds an all-to-all whose members' tasks are already added (see Exchange).
  void add_exchange(Exchange x);
  const std::vector<Exchange>& exchanges() const { return exchanges_; }
  /// The exchange task `task` is a member of: (exchange, member), or (-1, -1).
  std::pair<std::int32_t, std::int32_t> exchange_of(std::int32_t task) const {
    const auto i = static_cast<std::size_t>(task);
    if (i >= exchange_of_.size() || exchange_of_[i].first < 0) return {-1, -1};
    return exchange_of_[i];
  }
  /// Records a memory change of the task's rank when the task starts (at_end = false) or ends.
  void memory(std::int32_t task, bool at_end, MemCategory category, double bytes);
  const std::vector<MemEvent>& memory_events() const { return mem_; }
  /// The kernels of COMPUTE task `task` (see KernelSpec); empty when they were not recorded.
  void set_kernels(std::int32_t task, std::vector<KernelSpec> kernels);
  const std::vector<KernelSpec>& kernels(std::int32_t task) const;
  /// Capacity for `tasks` tasks and `edges` dependencies (large graphs: no reallocation while building).
  void reserve(std::size_t tasks, std::size_t edges, std::size_t host_spans = 0) {
    tasks_.reserve(tasks);
    edges_.reserve(edges);
    if (host_spans > 0) {
      release_.reserve(tasks);
      host_.reserve(host_spans);
    }
  }
  /// Builds successor lists and predecessor counts; checks acyclicity. Call once, after the last add.
  void finalize();

  const std::vector<Task>& tasks() const { return tasks_; }
  std::vector<Task>& tasks() { return tasks_; }
  std::size_t size() const { return tasks_.size(); }
  /// Predecessors per task (computed from the successor lists: engines copy it anyway, the graph does not keep it).
  std::vector<std::int32_t> pred_count() const;
  /// Successors of task i: succ_[succ_begin_[i] .. succ_begin_[i+1]).
  const std::int32_t* succ_begin(std::int32_t i) const { return succ_.data() + succ_begin_[i]; }
  const std::int32_t* succ_end(std::int32_t i) const { return succ_.data() + succ_begin_[i + 1]; }
  const std::vector<std::string>& names() const { return names_; }
  std::size_t edge_count() const { return finalized_ ? edge_count_ : edges_.size(); }
  /// Frees what only the engines read, the successor lists and the release times, once no engine will run the graph
  /// again (a simulation's reports do not need them); succ_begin, succ_end, pred_count and release_s must not be
  /// called afterwards.
  void release_edges();
  bool edges_released() const { return released_; }
  /// Interference: while a COMPUTE task of a rank runs, that rank's outgoing flows move at 1 / (1 + this) of their
  /// rate; and a COMPUTE task runs at 1 / (1 + Task::interference) while the rank has a flow in flight. 0 and
  /// interference_on() false: no interference (the engines then skip the bookkeeping).
  double collective_slowdown = 0;
  bool interference_on = false;
  /// An all-to-all as one task per member (Exchange) ends no earlier than its members' down-links could take the
  /// pieces addressed to them (time_exchange, exchange_timing.hpp); false: only the sends are serialised.
  bool exchange_receive_bound = true;

private:
  std::vector<Task> tasks_;
  std::vector<std::pair<std::int32_t, std::int32_t>> edges_;
  std::vector<std::int32_t> succ_begin_, succ_;
  std::vector<std::string> names_;
  std::vector<MemEvent> mem_;
  std::vector<double> release_;  ///< by task; sized on the first release_at_least (tasks added later: 0)
  std::vector<HostSpan> host_;
  std::vector<Exchange> exchanges_;
  std::vector<std::pair<std::int32_t, std::int32_t>> exchange_of_;  ///< by task; sized on the first add_exchange
  std::vector<std::vector<KernelSpec>> kernels_;                    ///< by task; sized on the first set_kernels
  std::map<std::string, std::int32_t> name_ids_;
  std::size_t edge_count_ = 0;
  bool finalized_ = false, released_ = false;
};

}  // namespace dtsim::sim
