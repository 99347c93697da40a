// Trace replay and what-if (Daydream / Lumos style) for real PyTorch-profiler (Kineto) traces.
//
// An ImportedTrace is turned into a dependency graph (a sim::TaskGraph with fixed durations) that reproduces
// the measured run when replayed, and whose durations can then be edited to predict the effect of a change
// (faster GEMMs, a faster network or a different group size for the collectives, a faster host).
//
// The graph, per rank (one ImportedTrace):
//  * CPU side, one lane per (pid, tid) thread that has CPU events. The thread is an ANCHOR (its first CPU
//    event's measured start, a fixed offset from the trace origin) followed by its top-level runtime calls
//    (cudaLaunchKernel, cudaMemcpyAsync, ...) in time order, separated by GAP tasks: the measured time between
//    the end of one call and the start of the next (Python / framework work), and a trailing gap up to the
//    thread's last CPU event. Runtime calls nested inside another runtime call on the same thread are folded
//    into the enclosing call (their GPU work is launched at the call start + their offset inside it).
//    CPU_OP / USER_ANNOTATION events only delimit the thread's extent; the replayed timeline is calls + gaps.
//  * GPU side, one lane per (device, stream): kernels, memcpys and memsets in measured order; each depends on
//    its predecessor on the stream. A GPU task whose launching runtime call is in the trace (same correlation
//    id) also depends on a LAUNCH delay that starts with the call: it cannot start before call start + the
//    launch latency (see fit below). A GPU task without a runtime partner keeps its measured start as a lower
//    bound (an ANCHOR).
//  * Dispatch gap: a stream does not start a queued task the instant the previous one ends (a few us on the traces
//    at hand, 1-4 us, summing to tens of ms over 10k kernels). Each stream edge carries a GPU_GAP of the trace's
//    mean gap between consecutive tasks whose second task was already queued (launched at least a launch latency
//    before the first started), over gaps up to 10 us (longer ones are waits, see late starts).
//    Consecutive tasks of one stream launched by the same call (a CUDA graph: cudaGraphLaunch) keep their measured
//    idle time between them as a GPU_GAP: it stands for graph nodes the profiler did not record.
//  * Launch latency: one value per trace, the lower median of max(0, gpu start - launch call start) over the
//    linked pairs whose stream was idle when the call began (the previous task on the stream had ended), so
//    queueing behind earlier work does not inflate it; 0 when no pair qualifies. ReplayOptions can override it.
//  * Synchronisation. A blocking call ends only after the GPU work it waits for; it is replayed as
//    "start = max(call start, awaited GPU ends), duration = measured tail" where the tail is
//    call end - max(call start, latest measured end of the awaited work). Kineto's events carry no stream or
//    event handle for sync calls in our TraceEvent, so the awaited work is inferred:
//      - cudaDeviceSynchronize / hipDeviceSynchronize / cuCtxSynchronize: on every stream of the device the
//        thread last launched to (every device if none), the last task launched before the call began;
//      - cudaStreamSynchronize (hip/cu alike): the last task launched before the call on the stream this thread
//        last launched to; if that task ended after the call (so it was not the awaited one), the stream whose
//        last launched task ended latest before the call's end;
//      - cudaEventSynchronize: the work captured by this thread's latest cudaEventRecord (the last task on the
//        stream the thread last launched to before the record), else as cudaStreamSynchronize;
//      - synchronous copies: cudaMemcpy / hipMemcpy / hipMemcpyWithStream / cuMemcpy* without "Async", and any
//        memcpy call whose copy is "Pageable" and finished inside the call (pageable copies are synchronous in
//        CUDA): the call waits for its own copy;
//      - cudaStreamWaitEvent (GPU-side): the waiting stream is the stream of the next GPU task this thread
//        launches, and the first task on it launched after the call is the one that waits. The awaited work is
//        the task captured by the thread's latest cudaEventRecord when that was on another stream, else (traces
//        without record events) on each other stream of the device the last task launched before the call; in
//        both cases walked back along its stream to the latest task that had ended when the waiting task started
//        (the event cannot have been recorded later), and of the streams the one ending last.
//    Every inferred wait is checked against the measurement (with 1 us of slack: Kineto rounds to 1 us) and
//    dropped when the trace contradicts it (awaited task ending after the blocking call ended, or after the
//    waiting GPU task started), so inferences only add constraints the measured run satisfied.
//    cudaEventQuery / cudaStreamQuery do not block.
//  * Late starts. A linked GPU task that started more than max(10 us, launch latency) later than its stream
//    predecessor, its launch and its known waits allow waited for something the trace does not name (an event
//    recorded where we cannot see it, a hardware queue shared with another stream, SMs held by another kernel, or
//    a launch the correlation ids hide, e.g. CUDA-graph nodes). Two explanations are tried and the later one is
//    used: the task of another stream of the device that ended last before it started, and the last runtime
//    call of the launching thread that began at least one launch latency before it (the task is then launched by
//    that call). An explanation must fall inside the unexplained delay; the measured delay left after it is kept
//    (a GPU_GAP after the other stream's task, or the re-launch delay). When nothing explains the wait, the
//    constraint that bound the task (its launch, its stream predecessor or its stream-wait source) is kept with
//    the measured delay after it (counted as "unexplained"). ReplayOptions::keep_unexplained_gaps = false keeps
//    none of these measured residuals, to measure the dependency model alone.
//  * Cross-thread dependencies are not in the trace. A thread whose first event comes after the trace began was
//    woken by another thread (the autograd thread by loss.backward(), a data loader by the main loop): its anchor
//    then follows the runtime call of another thread that ended last before its first event, by the measured
//    delay. Later idle periods inside a thread stay part of its fixed gaps (the trace cannot tell a blocked thread
//    from Python work that records no event), so e.g. the main thread waiting in backward() does not shrink when
//    the autograd thread gets faster: a limitation for what-if, exact for replay.
//  * Collective (NCCL/RCCL) kernels keep their measured duration by default (the other ranks are not in a
//    single-rank trace; their waits for peers are in that duration).
//
// Replay uses the analytic engine (run_analytic): the graph has only fixed-duration tasks (COMPUTE, DELAY) and
// no network flows, so a longest-path pass is exact; SimGrid would add nothing but cost.
//
// What-if edits (ReplayOptions) change durations only, never the graph:
//  * kernel_scales: the first rule whose regex (std::regex, ECMAScript, regex_search) matches the name of a
//    non-collective GPU task (kernel, memcpy or memset) multiplies its duration;
//  * collectives: a measured collective kernel time T with op-dependent ring factors k_n (bandwidth) and m_n
//    (latency steps) is split into a latency part m_n alpha and a bandwidth part T - m_n alpha (clamped at 0);
//    the edited time is  k_n' S / B' + m_n' alpha  with B = k_n S / (T - m_n alpha) the kernel's achieved bus
//    bandwidth, B' = B * collective_bw_scale (or collective_bandwidth_Bps when given and S is known), n' the
//    new group size; then * collective_time_scale. Ring factors: all-reduce k = 2(n-1)/n, m = 2(n-1);
//    all-gather, reduce-scatter, all-to-all k = (n-1)/n, m = n-1; broadcast, reduce k = 1, m = n-1;
//    send/recv and unknown ops k = 1, m = 1 and 0 (no group dependence). S = CollectiveInfo::bytes; without S
//    the bandwidth part is scaled by the bandwidth ratio (same result for scale edits). The measured group size
//    is CollectiveInfo::group_size, else the trace's world size; when unknown a group-size edit is not applied.
//  * cpu_gap_scale multiplies CPU gaps (not the thread anchors), runtime_scale the runtime calls' own time
//    (non-blocking calls' durations and blocking calls' tails). Launch latency is never scaled.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/model/task_graph.hpp"
#include "traces/trace_events.hpp"

namespace dtsim::sim {

/// Multiply the duration of GPU tasks whose name matches `pattern` (std::regex, searched) by `factor`.
struct KernelScale {
  std::string pattern;
  double factor = 1.0;
};

/// Parses "REGEX=FACTOR" (split at the last '='); ConfigError when malformed, the regex is invalid or the
/// factor is not a finite number >= 0.
KernelScale parse_kernel_scale(const std::string& spec);

struct ReplayOptions {
  std::vector<KernelScale> kernel_scales;  ///< first matching rule applies; non-collective GPU tasks only
  double collective_time_scale = 1.0;      ///< multiplies every collective kernel's (possibly re-modelled) time
  double collective_bw_scale = 1.0;        ///< new bandwidth = achieved bandwidth * this
  double collective_bandwidth_Bps = 0;     ///< absolute new bus bandwidth for collectives with known bytes; 0: unset
  int collective_group_size = 0;           ///< new group size n'; 0 keeps the measured one
  double collective_alpha_s = 0;           ///< per-step latency alpha of the alpha-beta model, seconds
  double cpu_gap_scale = 1.0;              ///< multiplies CPU gaps (faster or slower host)
  double runtime_scale = 1.0;              ///< multiplies runtime calls' own time
  std::int64_t launch_latency_ns = -1;     ///< launch latency; < 0: fitted from the trace
  std::int64_t dispatch_gap_ns = -1;       ///< idle time between queued tasks of a stream; < 0: fitted
  /// Keep GPU idle time that no dependency explains (see "Late starts" above) as fixed gaps. Off: such tasks
  /// start as early as their known dependencies allow (the replay error then measures the dependency model alone).
  bool keep_unexplained_gaps = true;

  /// True when any duration edit is requested (launch_latency_ns is a model choice, not an edit).
  bool has_edits() const;
  /// ConfigError on a bad value (negative or non-finite factors, invalid regex, group size < 0 or 1).
  void validate() const;
  /// One line describing the edits, e.g. "kernels /gemm/ x0.5, collective bandwidth x2"; "" when none.
  std::string describe() const;
};

/// One collective's time after the collective edits of `o` (the "collectives" rule above): op and bytes as in
/// CollectiveInfo, `n` the measured group size (< 2: unknown), `dur_ns` the measured time. Also what happened.
struct CollectiveEdit {
  std::int64_t dur_ns = 0;
  bool modelled = false;       ///< re-timed by the alpha-beta model
  bool without_bytes = false;  ///< modelled by the bandwidth ratio (no message size)
  bool without_group = false;  ///< a group-size edit was not applied
};
CollectiveEdit edit_collective(const std::string& op, double bytes, int n, std::int64_t dur_ns, const ReplayOptions& o);

/// What a replay node stands for.
enum class ReplayNodeKind : std::uint8_t {
  ANCHOR,   ///< fixed offset from the trace origin: a thread's first CPU event, an unlinked GPU task's start
  GAP,      ///< CPU time between two runtime calls of a thread (or after the last one)
  RUNTIME,  ///< a top-level runtime call (for a blocking call: its tail after the awaited GPU work)
  LAUNCH,   ///< launch latency between a runtime call's start and its GPU task
  GPU,      ///< a kernel, memcpy or memset on its stream
  GPU_GAP   ///< fixed idle time on a stream: dispatch gap, CUDA-graph gap, or a late start's kept delay
};
const char* to_string(ReplayNodeKind kind);

/// A CPU thread or a GPU stream of the trace.
struct ReplayLane {
  std::string name;  ///< "thread 4515/25556", "gpu 0 stream 7"
  bool gpu = false;
  std::int64_t pid = 0;               ///< CPU: process id; GPU: device index
  std::int64_t tid = 0;               ///< CPU: thread id; GPU: stream id
  int device = -1;                    ///< GPU lanes
  std::size_t tasks = 0;              ///< GPU tasks, or top-level runtime calls of a thread
  std::int64_t measured_busy_ns = 0;  ///< GPU: union of task intervals; CPU: time in top-level runtime calls
  std::int64_t measured_end_ns = 0;   ///< last end of a replayed event on the lane (from the trace origin)
};

/// One task of the replay graph (parallel to ReplayGraph::graph.tasks()).
struct ReplayNode {
  ReplayNodeKind kind = ReplayNodeKind::GAP;
  bool blocking = false;             ///< RUNTIME: waits for GPU work (its start is the max of its inputs)
  std::int32_t lane = -1;            ///< index into ReplayGraph::lanes (LAUNCH: the GPU task's lane)
  std::int32_t event = -1;           ///< index into ImportedTrace::events (RUNTIME, GPU; GAP: the call it precedes)
  std::int32_t call_start = -1;      ///< RUNTIME: the node whose end is the call's start (the gap before it)
  std::int64_t measured_dur_ns = 0;  ///< as measured (blocking RUNTIME: the measured tail)
  std::int64_t dur_ns = 0;           ///< replayed duration, after edits
};

/// Counts describing how the graph was built.
struct ReplayBuildStats {
  std::size_t cpu_threads = 0, gpu_streams = 0;
  std::size_t runtime_calls = 0;  ///< top-level calls
  std::size_t nested_calls = 0;   ///< runtime calls folded into an enclosing call
  std::size_t gpu_tasks = 0, linked_gpu_tasks = 0;
  std::size_t launch_latency_samples = 0;
  std::size_t dispatch_gap_samples = 0;
  std::size_t blocking_calls = 0;                          ///< calls given at least one GPU wait
  std::size_t sync_waits = 0, sync_waits_dropped = 0;      ///< GPU -> blocking call edges kept / contradicted
  std::size_t stream_waits = 0, stream_waits_dropped = 0;  ///< cudaStreamWaitEvent edges kept / contradicted
  std::size_t gpu_waits_inferred = 0;                      ///< late GPU starts explained by another stream's task
  std::size_t thread_starts_linked = 0;                    ///< threads whose start follows another thread's call
  std::size_t graph_gaps = 0;                              ///< GPU_GAP nodes (idle time inside one launch's GPU work)
  std::size_t late_starts_relaunched = 0;  ///< late GPU starts explained by a later runtime call of their thread
  std::size_t unexplained_gaps = 0;        ///< late GPU starts nothing explains (stream idle time kept as measured)
  std::int64_t unexplained_gap_ns = 0;     ///< their total delay beyond what the graph would otherwise allow
  std::size_t cycle_edges_dropped = 0;     ///< inferred edges removed because they closed a cycle (never expected)
  // Edits.
  std::size_t gpu_tasks_scaled = 0;           ///< matched a kernel_scales rule with factor != 1
  std::size_t collectives = 0;                ///< collective kernels
  std::size_t collectives_modelled = 0;       ///< re-timed by the alpha-beta model
  std::size_t collectives_without_bytes = 0;  ///< modelled by the bandwidth ratio (no message size)
  std::size_t collectives_without_group = 0;  ///< a group-size edit was not applied (group or op unknown, p2p)
};

/// The dependency graph of one trace with the durations of one set of options.
struct ReplayGraph {
  TaskGraph graph;                ///< finalized; COMPUTE/DELAY tasks with duration_s = dur_ns / 1e9
  std::vector<ReplayNode> nodes;  ///< per task
  std::vector<std::pair<std::int32_t, std::int32_t>> edges;  ///< (before, after), as given to the graph
  std::vector<ReplayLane> lanes;       ///< CPU threads by (pid, tid), then GPU streams by (device, stream)
  std::int64_t launch_latency_ns = 0;  ///< used (fitted unless overridden)
  std::int64_t dispatch_gap_ns = 0;    ///< used (fitted unless overridden)
  std::int64_t measured_begin_ns = 0;  ///< earliest start of a replayed event (relative to the trace origin)
  std::int64_t measured_end_ns = 0;    ///< latest end of a replayed event
  ReplayBuildStats stats;
};

/// The traces `dtsim replay` reads: a Kineto .json / .json.gz (one trace), or every ".json" member of a .tar.gz /
/// .tgz / .tar archive in member-name order, or only `member` (its name, or its name after the last '/').
/// ConfigError when `member` is given for a plain file or matches no member; the importers' errors otherwise.
std::vector<ImportedTrace> import_traces_for_replay(const std::string& path, const std::string& member = "");

/// Builds the replay graph of `trace` with the durations edited by `options` (validated first).
/// FormatError when the trace has nothing to replay (no CPU or GPU events of the replayed kinds).
ReplayGraph build_replay(const ImportedTrace& trace, const ReplayOptions& options);

/// Replayed times of every node, nanoseconds from the trace origin.
struct ReplayTimeline {
  std::vector<std::int64_t> start_ns, end_ns;
  std::int64_t last_end_ns = 0;  ///< latest node end
  std::string engine;            ///< the engine that ran it ("analytic")
};

/// Runs the graph on the analytic engine (exact for fixed-duration DAGs).
ReplayTimeline run_replay(const ReplayGraph& g);

/// Busy time and extent of one lane, measured vs replayed.
struct LaneReport {
  std::string name;
  bool gpu = false;
  std::size_t tasks = 0;              ///< GPU tasks or runtime calls
  std::int64_t measured_busy_ns = 0;  ///< GPU: union of task intervals; CPU: time in runtime calls
  std::int64_t replayed_busy_ns = 0;
  std::int64_t measured_end_ns = 0;  ///< last end on the lane (relative to the trace origin)
  std::int64_t replayed_end_ns = 0;
};

/// The chain of tasks that sets the replayed end, its time split by category.
struct CriticalPath {
  std::int64_t length_ns = 0;  ///< = the latest replayed end (from the trace origin)
  std::size_t tasks = 0;
  /// Time per category ("gpu kernel", "gpu collective", "gpu memcpy", "gpu memset", "runtime call",
  /// "sync tail", "cpu gap", "launch latency", "gpu gap", "anchor"), largest first; sums to length_ns.
  std::vector<std::pair<std::string, std::int64_t>> by_category;
  std::vector<std::pair<std::string, std::int64_t>> top_gpu;  ///< up to 5 GPU task names by time on the path
};

/// Everything `dtsim replay` reports for one trace.
struct ReplayReport {
  std::string source;
  int rank = -1, world_size = 0;
  std::string vendor;
  std::int64_t launch_latency_ns = 0;
  std::int64_t dispatch_gap_ns = 0;
  ReplayBuildStats stats;             ///< of the base graph (edit counts from the edited one when edited)
  std::int64_t measured_span_ns = 0;  ///< measured_end - measured_begin
  std::int64_t replayed_span_ns = 0;  ///< replayed last end - measured_begin
  double error_pct = 0;               ///< 100 (replayed - measured) / measured
  std::vector<LaneReport> lanes;      ///< base replay
  CriticalPath critical_path;         ///< base replay
  bool edited = false;
  std::string edits;                   ///< ReplayOptions::describe()
  std::int64_t predicted_span_ns = 0;  ///< edited replay (= replayed_span_ns when not edited)
  double change_pct = 0;               ///< 100 (predicted - replayed) / replayed
  std::vector<LaneReport> predicted_lanes;
  CriticalPath predicted_critical_path;
};

/// The replays of one trace: the base (measured durations) and, with edits, the edited one.
struct Replay {
  ReplayGraph base;
  ReplayTimeline base_times;
  bool edited = false;
  ReplayGraph what_if;  ///< meaningful when edited
  ReplayTimeline what_if_times;
  ReplayReport report;
};

/// Builds and runs the base replay and, when `options` has edits, the edited one; fills the report.
Replay replay_trace(const ImportedTrace& trace, const ReplayOptions& options);

/// Per-lane measured/replayed statistics and the critical path of one run (used by replay_trace).
std::vector<LaneReport> lane_reports(const ImportedTrace& trace, const ReplayGraph& g, const ReplayTimeline& t);
CriticalPath critical_path(const ImportedTrace& trace, const ReplayGraph& g, const ReplayTimeline& t);

/// replay.json: schema "dtsim.replay", the options and one entry per report. Deterministic (no wall times).
std::string replay_json(const std::vector<ReplayReport>& reports, const ReplayOptions& options);

/// Chrome trace of the replayed timelines (the edited one when edited): per trace, one process for the CPU
/// threads and one per GPU device, one track per lane; runtime calls, CPU gaps and GPU tasks.
std::string replay_chrome_trace(const std::vector<const ImportedTrace*>& traces,
                                const std::vector<const Replay*>& replays);

/// Readable summary of one report (several lines, ending in a newline).
std::string replay_summary(const ReplayReport& report);

}  // namespace dtsim::sim
