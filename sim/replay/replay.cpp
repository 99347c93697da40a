#include "sim/replay/replay.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "sim/engine/analytic_runtime.hpp"
#include "traces/archive.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/error.hpp"
#include "traces/kineto_import.hpp"
#include "traces/text.hpp"
#include "traces/units.hpp"

namespace dtsim::sim {
namespace {

using Kind = TraceEventKind;

/// Timestamps of Kineto traces are rounded to 1 us: "A ended before B started" is tested with this slack.
constexpr std::int64_t kClockSlackNs = 1000;
/// Gaps between queued tasks longer than this are waits, not dispatch overhead (the fit ignores them).
constexpr std::int64_t kDispatchGapCapNs = 10'000;

bool is_cpu_kind(Kind k) { return k == Kind::CPU_OP || k == Kind::USER_ANNOTATION || k == Kind::RUNTIME; }
bool is_gpu_work(Kind k) { return k == Kind::KERNEL || k == Kind::MEMCPY || k == Kind::MEMSET; }

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

/// Total length of the union of [start, end) intervals (sorts them).
std::int64_t union_length(std::vector<std::pair<std::int64_t, std::int64_t>>& iv) {
  std::sort(iv.begin(), iv.end());
  std::int64_t total = 0, cur_s = 0, cur_e = std::numeric_limits<std::int64_t>::min();
  for (const auto& [s, e] : iv) {
    if (s > cur_e) {
      if (cur_e > cur_s) total += cur_e - cur_s;
      cur_s = s;
      cur_e = e;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  if (cur_e > cur_s) total += cur_e - cur_s;
  return total;
}

/// How a runtime call synchronises, from its name (CUDA runtime, CUDA driver and HIP spellings).
enum class SyncKind : std::uint8_t { NONE, DEVICE, STREAM, EVENT, WAIT_EVENT, RECORD, MEMCPY };

SyncKind classify_call(std::string_view name) {
  std::string_view base = name;
  for (std::string_view prefix : {"cuda", "hip", "cu"})
    if (starts_with(base, prefix)) {
      base.remove_prefix(prefix.size());
      break;
    }
  if (starts_with(base, "DeviceSynchronize") || starts_with(base, "CtxSynchronize")) return SyncKind::DEVICE;
  if (starts_with(base, "StreamSynchronize")) return SyncKind::STREAM;
  if (starts_with(base, "EventSynchronize")) return SyncKind::EVENT;
  if (starts_with(base, "StreamWaitEvent")) return SyncKind::WAIT_EVENT;
  if (starts_with(base, "EventRecord")) return SyncKind::RECORD;
  if (contains(base, "Memcpy") || contains(base, "memcpy")) return SyncKind::MEMCPY;
  return SyncKind::NONE;
}

std::int64_t scaled_ns(std::int64_t ns, double factor) {
  if (factor == 1.0) return ns;
  return static_cast<std::int64_t>(std::llround(static_cast<double>(ns) * factor));
}

/// Ring factors of the alpha-beta model: time = k * S / B + m * alpha for a group of n ranks.
struct RingFactors {
  double k = 1, m = 0;
  bool group_dependent = false;
};

RingFactors ring_factors(const std::string& op, int n) {
  const double nn = n;
  if (op == "all-reduce") return {2.0 * (nn - 1) / nn, 2.0 * (nn - 1), true};
  if (op == "all-gather" || op == "reduce-scatter" || op == "all-to-all") return {(nn - 1) / nn, nn - 1, true};
  if (op == "broadcast" || op == "reduce") return {1.0, nn - 1, true};
  if (op == "send" || op == "recv") return {1.0, 1.0, false};
  return {1.0, 0.0, false};
}

}  // namespace

CollectiveEdit edit_collective(const std::string& op, double bytes, int n, std::int64_t dur_ns,
                               const ReplayOptions& o) {
  CollectiveEdit out;
  out.dur_ns = dur_ns;
  const bool model = o.collective_bw_scale != 1.0 || o.collective_bandwidth_Bps > 0 || o.collective_group_size > 0;
  double t_s = static_cast<double>(dur_ns) * 1e-9;
  if (model) {
    out.modelled = true;
    int n_new = o.collective_group_size > 0 ? o.collective_group_size : n;
    RingFactors f = ring_factors(op, std::max(n, 2)), f_new = ring_factors(op, std::max(n_new, 2));
    if (f.group_dependent && n < 2) f = f_new = RingFactors{1.0, 0.0, false};  // group unknown: no group model
    // A group-size edit needs a known group and an op whose time depends on it (not send/recv or unknown ops).
    if (o.collective_group_size > 0 && !f.group_dependent) out.without_group = true;
    const double alpha = o.collective_alpha_s;
    const double beta_s = std::max(0.0, t_s - f.m * alpha);
    if (bytes <= 0) out.without_bytes = true;
    double new_beta_s;
    if (o.collective_bandwidth_Bps > 0 && bytes > 0) {
      new_beta_s = f_new.k * bytes / o.collective_bandwidth_Bps;
    } else if (bytes > 0 && beta_s > 0 && f.k > 0) {
      const double achieved_Bps = f.k * bytes / beta_s;  // the kernel's bus bandwidth
      new_beta_s = f_new.k * bytes / (achieved_Bps * o.collective_bw_scale);
    } else {
      new_beta_s = (f.k > 0 ? beta_s * f_new.k / f.k : beta_s) / o.collective_bw_scale;
    }
    t_s = new_beta_s + f_new.m * alpha;
  } else if (o.collective_time_scale == 1.0) {
    return out;
  }
  t_s *= o.collective_time_scale;
  out.dur_ns = static_cast<std::int64_t>(std::llround(t_s * 1e9));
  return out;
}

namespace {

/// Edited durations of GPU tasks (regex rules cached per name, the collective model).
class DurationEditor {
public:
  DurationEditor(const ImportedTrace& trace, const ReplayOptions& o) : trace_(trace), o_(o) {
    for (const auto& r : o.kernel_scales) regexes_.emplace_back(r.pattern, std::regex::ECMAScript);
  }

  std::int64_t gpu_ns(const TraceEvent& e, ReplayBuildStats& st) {
    if (e.kind == Kind::KERNEL && e.collective) {
      ++st.collectives;
      return collective_ns(e, st);
    }
    if (regexes_.empty()) return e.dur_ns;
    auto it = factor_by_name_.find(e.name);
    if (it == factor_by_name_.end()) {
      double f = 1.0;
      for (std::size_t r = 0; r < regexes_.size(); ++r)
        if (std::regex_search(e.name, regexes_[r])) {
          f = o_.kernel_scales[r].factor;
          break;
        }
      it = factor_by_name_.emplace(e.name, f).first;
    }
    if (it->second != 1.0) ++st.gpu_tasks_scaled;
    return scaled_ns(e.dur_ns, it->second);
  }

private:
  std::int64_t collective_ns(const TraceEvent& e, ReplayBuildStats& st) const {
    const int n = e.comm.group_size > 0 ? e.comm.group_size : trace_.world_size;
    const CollectiveEdit ed = edit_collective(e.comm.op, e.comm.bytes, n, e.dur_ns, o_);
    st.collectives_modelled += ed.modelled;
    st.collectives_without_bytes += ed.without_bytes;
    st.collectives_without_group += ed.without_group;
    return ed.dur_ns;
  }

  const ImportedTrace& trace_;
  const ReplayOptions& o_;
  std::vector<std::regex> regexes_;
  std::unordered_map<std::string, double> factor_by_name_;
};

struct Thread {
  std::int64_t first_start = std::numeric_limits<std::int64_t>::max();
  std::int64_t last_end = std::numeric_limits<std::int64_t>::min();
  std::vector<std::int32_t> runtime;  // RUNTIME event indices in time order
};

struct Call {
  std::int32_t event = -1;
  std::int32_t lane = -1;
  std::int64_t start = 0, end = 0;
  std::int32_t gap_node = -1;  // the node whose end is the call's start
};

struct GpuTask {
  std::int32_t event = -1;
  std::int32_t lane = -1;
  std::int32_t call = -1;       // launching top-level call, -1 if none
  std::int64_t offset = 0;      // launch offset inside the call (nested runtime calls)
  std::int64_t launch = 0;      // call start + offset, or the measured start when unlinked
  std::int64_t launch_max = 0;  // running max of `launch` along the stream (for "launched before t" searches)
  std::int64_t start = 0, end = 0;
  std::int32_t node = -1;
};

/// Graph under construction: nodes, edges (with whether they were inferred from sync calls) and the TaskGraph.
struct Builder {
  ReplayGraph g;
  std::vector<char> inferred;  // per edge

  std::int32_t add(ReplayNodeKind kind, std::int32_t lane, std::int32_t event, std::int64_t measured_ns,
                   std::int64_t dur_ns) {
    Task t;
    t.kind = (kind == ReplayNodeKind::RUNTIME || kind == ReplayNodeKind::GPU || kind == ReplayNodeKind::GPU_GAP)
                 ? TaskKind::COMPUTE
                 : TaskKind::DELAY;
    t.rank = lane;
    t.duration_s = static_cast<double>(dur_ns) * 1e-9;
    const std::int32_t id = g.graph.add(t);
    ReplayNode n;
    n.kind = kind;
    n.lane = lane;
    n.event = event;
    n.measured_dur_ns = measured_ns;
    n.dur_ns = dur_ns;
    g.nodes.push_back(n);
    return id;
  }
  void depend(std::int32_t before, std::int32_t after, bool is_inferred = false) {
    g.edges.emplace_back(before, after);
    inferred.push_back(is_inferred ? 1 : 0);
  }
};

/// Removes inferred edges inside any cycle (Kahn's leftovers) until the graph is acyclic; returns the count.
std::size_t break_cycles(Builder& b) {
  std::size_t dropped = 0;
  const std::size_t n = b.g.nodes.size();
  for (;;) {
    std::vector<std::int32_t> indeg(n, 0), begin(n + 1, 0), succ(b.g.edges.size());
    for (const auto& [u, v] : b.g.edges) {
      ++indeg[v];
      ++begin[u + 1];
    }
    for (std::size_t i = 0; i < n; ++i) begin[i + 1] += begin[i];
    std::vector<std::int32_t> fill(begin.begin(), begin.end() - 1);
    for (const auto& [u, v] : b.g.edges) succ[fill[u]++] = v;
    std::vector<std::int32_t> queue;
    for (std::size_t i = 0; i < n; ++i)
      if (indeg[i] == 0) queue.push_back(static_cast<std::int32_t>(i));
    std::vector<char> done(n, 0);
    for (std::size_t k = 0; k < queue.size(); ++k) {
      const auto u = queue[k];
      done[u] = 1;
      for (auto s = begin[u]; s < begin[u + 1]; ++s)
        if (--indeg[succ[s]] == 0) queue.push_back(succ[s]);
    }
    if (queue.size() == n) return dropped;
    std::size_t before = dropped;
    std::vector<std::pair<std::int32_t, std::int32_t>> edges;
    std::vector<char> inferred;
    for (std::size_t e = 0; e < b.g.edges.size(); ++e) {
      const auto [u, v] = b.g.edges[e];
      if (b.inferred[e] && !done[u] && !done[v]) {
        ++dropped;
        continue;
      }
      edges.push_back(b.g.edges[e]);
      inferred.push_back(b.inferred[e]);
    }
    DTSIM_ASSERT(dropped > before, "replay graph has a cycle without inferred edges");
    b.g.edges = std::move(edges);
    b.inferred = std::move(inferred);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------------------------

const char* to_string(ReplayNodeKind kind) {
  switch (kind) {
    case ReplayNodeKind::ANCHOR: return "anchor";
    case ReplayNodeKind::GAP: return "gap";
    case ReplayNodeKind::RUNTIME: return "runtime";
    case ReplayNodeKind::LAUNCH: return "launch";
    case ReplayNodeKind::GPU: return "gpu";
    case ReplayNodeKind::GPU_GAP: return "gpu-gap";
  }
  return "?";
}

KernelScale parse_kernel_scale(const std::string& spec) {
  const auto eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    throw ConfigError("--scale-kernels '" + spec + "' must be REGEX=FACTOR (e.g. 'gemm|cutlass=0.5')");
  KernelScale k;
  k.pattern = spec.substr(0, eq);
  const std::string f = spec.substr(eq + 1);
  char* end = nullptr;
  k.factor = std::strtod(f.c_str(), &end);
  if (*end != '\0' || !std::isfinite(k.factor) || k.factor < 0)
    throw ConfigError("--scale-kernels '" + spec + "': factor '" + f + "' is not a number >= 0");
  try {
    std::regex check(k.pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw ConfigError("--scale-kernels '" + spec + "': invalid regular expression (" + e.what() + ")");
  }
  return k;
}

bool ReplayOptions::has_edits() const {
  return !kernel_scales.empty() || collective_time_scale != 1.0 || collective_bw_scale != 1.0 ||
         collective_bandwidth_Bps > 0 || collective_group_size > 0 || cpu_gap_scale != 1.0 || runtime_scale != 1.0;
}

void ReplayOptions::validate() const {
  auto factor = [](double v, const char* what, bool allow_zero) {
    if (!std::isfinite(v) || v < 0 || (!allow_zero && v == 0))
      throw ConfigError(std::string("replay: ") + what + " must be a finite number " + (allow_zero ? ">= 0" : "> 0"));
  };
  for (const auto& k : kernel_scales) {
    factor(k.factor, "a kernel scale factor", true);
    try {
      std::regex check(k.pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw ConfigError("replay: invalid kernel regex '" + k.pattern + "' (" + e.what() + ")");
    }
  }
  factor(collective_time_scale, "the collective time scale", true);
  factor(collective_bw_scale, "the collective bandwidth scale", false);
  factor(collective_bandwidth_Bps, "the collective bandwidth", true);
  factor(collective_alpha_s, "the collective alpha", true);
  factor(cpu_gap_scale, "the CPU gap scale", true);
  factor(runtime_scale, "the runtime-call scale", true);
  if (collective_group_size < 0 || collective_group_size == 1)
    throw ConfigError("replay: the collective group size must be at least 2 (0 keeps the measured one)");
}

std::string ReplayOptions::describe() const {
  std::vector<std::string> parts;
  for (const auto& k : kernel_scales) parts.push_back("kernels /" + k.pattern + "/ x" + format_number("%g", k.factor));
  if (collective_bandwidth_Bps > 0)
    parts.push_back("collective bandwidth " + format_number("%g", collective_bandwidth_Bps / 1e9) + " GB/s");
  if (collective_bw_scale != 1.0) parts.push_back("collective bandwidth x" + format_number("%g", collective_bw_scale));
  if (collective_group_size > 0) parts.push_back("collective group " + std::to_string(collective_group_size));
  if ((collective_bandwidth_Bps > 0 || collective_bw_scale != 1.0 || collective_group_size > 0) &&
      collective_alpha_s > 0)
    parts.push_back("alpha " + format_number("%g", collective_alpha_s * 1e6) + " us");
  if (collective_time_scale != 1.0) parts.push_back("collective time x" + format_number("%g", collective_time_scale));
  if (cpu_gap_scale != 1.0) parts.push_back("cpu gaps x" + format_number("%g", cpu_gap_scale));
  if (runtime_scale != 1.0) parts.push_back("runtime calls x" + format_number("%g", runtime_scale));
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : ", ") + p;
  return s;
}

std::vector<ImportedTrace> import_traces_for_replay(const std::string& path, const std::string& member) {
  auto ends_with = [](const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (!(ends_with(path, ".tar.gz") || ends_with(path, ".tgz") || ends_with(path, ".tar"))) {
    if (!member.empty()) throw ConfigError("replay: a member ('" + member + "') needs a .tar.gz archive of traces");
    return {import_kineto(path)};
  }
  std::vector<ArchiveMember> members = read_archive_members(path);
  std::sort(members.begin(), members.end(),
            [](const ArchiveMember& a, const ArchiveMember& b) { return a.name < b.name; });
  std::vector<ImportedTrace> traces;
  std::string names;
  for (const ArchiveMember& m : members) {
    if (!ends_with(m.name, ".json")) continue;
    names += (names.empty() ? "" : ", ") + m.name;
    if (!member.empty() && m.name != member && !ends_with(m.name, "/" + member)) continue;
    traces.push_back(parse_kineto(m.content, path + ":" + m.name));
  }
  if (names.empty()) throw FormatError(path + ": no '.json' member in the archive");
  if (traces.empty())
    throw ConfigError("replay: member '" + member + "' is not in " + path + " (members: " + names + ")");
  return traces;
}

// ---------------------------------------------------------------------------------------------------------------
// Graph
// ---------------------------------------------------------------------------------------------------------------

ReplayGraph build_replay(const ImportedTrace& trace, const ReplayOptions& o) {
  o.validate();
  const std::vector<TraceEvent>& ev = trace.events;
  Builder b;
  ReplayGraph& g = b.g;
  ReplayBuildStats& st = g.stats;

  // 1. Lanes: CPU threads by (pid, tid), GPU streams by (device, stream).
  std::map<std::pair<std::int64_t, std::int64_t>, Thread> threads;
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::int32_t>> streams;
  g.measured_begin_ns = std::numeric_limits<std::int64_t>::max();
  g.measured_end_ns = std::numeric_limits<std::int64_t>::min();
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const TraceEvent& e = ev[i];
    const bool cpu = is_cpu_kind(e.kind), gpu = is_gpu_work(e.kind);
    if (!cpu && !gpu) continue;
    g.measured_begin_ns = std::min(g.measured_begin_ns, e.start_ns);
    g.measured_end_ns = std::max(g.measured_end_ns, e.start_ns + e.dur_ns);
    if (cpu) {
      Thread& t = threads[{e.pid, e.tid}];
      t.first_start = std::min(t.first_start, e.start_ns);
      t.last_end = std::max(t.last_end, e.start_ns + e.dur_ns);
      if (e.kind == Kind::RUNTIME) t.runtime.push_back(static_cast<std::int32_t>(i));
    } else {
      streams[{e.device, e.tid}].push_back(static_cast<std::int32_t>(i));
    }
  }
  if (threads.empty() && streams.empty())
    throw FormatError(trace.source + ": nothing to replay (no CPU operator, runtime or GPU events)");
  DTSIM_ASSERT(ev.size() < static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()), "trace too large");
  std::vector<const Thread*> thread_of_lane;
  for (const auto& [key, t] : threads) {
    ReplayLane l;
    l.name = "thread " + std::to_string(key.first) + "/" + std::to_string(key.second);
    l.pid = key.first;
    l.tid = key.second;
    g.lanes.push_back(l);
    thread_of_lane.push_back(&t);
  }
  const std::size_t first_gpu_lane = g.lanes.size();
  for (const auto& [key, list] : streams) {
    ReplayLane l;
    l.name = "gpu " + std::to_string(key.first) + " stream " + std::to_string(key.second);
    l.gpu = true;
    l.pid = key.first;
    l.tid = key.second;
    l.device = static_cast<int>(key.first);
    g.lanes.push_back(l);
  }
  for (std::size_t l = 0; l < first_gpu_lane; ++l) {
    ReplayLane& lane = g.lanes[l];
    const Thread& th = *thread_of_lane[l];
    lane.measured_end_ns = th.last_end;
  }
  {
    std::size_t l = first_gpu_lane;
    std::vector<std::pair<std::int64_t, std::int64_t>> iv;
    for (const auto& [key, list] : streams) {
      ReplayLane& lane = g.lanes[l++];
      iv.clear();
      for (std::int32_t i : list) {
        iv.emplace_back(ev[i].start_ns, ev[i].start_ns + ev[i].dur_ns);
        lane.measured_end_ns = std::max(lane.measured_end_ns, ev[i].start_ns + ev[i].dur_ns);
      }
      lane.tasks = list.size();
      lane.measured_busy_ns = union_length(iv);
    }
  }
  st.cpu_threads = threads.size();
  st.gpu_streams = streams.size();

  // 2. Top-level runtime calls per thread; nested calls fold into their enclosing call.
  std::vector<Call> calls;
  std::vector<std::int32_t> lane_calls_begin(first_gpu_lane + 1, 0);
  std::unordered_map<std::int64_t, std::pair<std::int32_t, std::int64_t>> call_of_corr;  // -> (call, offset)
  for (std::size_t lane = 0; lane < first_gpu_lane; ++lane) {
    lane_calls_begin[lane] = static_cast<std::int32_t>(calls.size());
    std::int64_t top_end = std::numeric_limits<std::int64_t>::min();
    const std::int32_t first_call = static_cast<std::int32_t>(calls.size());
    for (std::int32_t i : thread_of_lane[lane]->runtime) {
      const TraceEvent& e = ev[i];
      const bool nested = static_cast<std::int32_t>(calls.size()) > first_call && e.start_ns < top_end;
      if (!nested) {
        Call c;
        c.event = i;
        c.lane = static_cast<std::int32_t>(lane);
        c.start = e.start_ns;
        c.end = e.start_ns + e.dur_ns;
        calls.push_back(c);
        top_end = c.end;
        ++g.lanes[lane].tasks;
        g.lanes[lane].measured_busy_ns += e.dur_ns;
      } else {
        ++st.nested_calls;
        top_end = std::max(top_end, e.start_ns + e.dur_ns);
      }
      if (e.correlation >= 0) {
        const std::int32_t c = static_cast<std::int32_t>(calls.size()) - 1;
        call_of_corr.try_emplace(e.correlation, c, e.start_ns - calls[c].start);
      }
    }
  }
  lane_calls_begin[first_gpu_lane] = static_cast<std::int32_t>(calls.size());
  st.runtime_calls = calls.size();

  // 3. GPU tasks per stream, linked to their launching call.
  std::vector<GpuTask> gpu;
  std::vector<std::int32_t> lane_gpu_begin(g.lanes.size() + 1, 0);
  {
    std::size_t lane = first_gpu_lane;
    for (const auto& [key, list] : streams) {
      lane_gpu_begin[lane] = static_cast<std::int32_t>(gpu.size());
      std::int64_t running = std::numeric_limits<std::int64_t>::min();
      for (std::int32_t i : list) {
        const TraceEvent& e = ev[i];
        GpuTask t;
        t.event = i;
        t.lane = static_cast<std::int32_t>(lane);
        t.start = e.start_ns;
        t.end = e.start_ns + e.dur_ns;
        t.launch = t.start;
        if (e.correlation >= 0)
          if (auto it = call_of_corr.find(e.correlation); it != call_of_corr.end()) {
            t.call = it->second.first;
            t.offset = it->second.second;
            t.launch = calls[t.call].start + t.offset;
            ++st.linked_gpu_tasks;
          }
        running = std::max(running, t.launch);
        t.launch_max = running;
        gpu.push_back(t);
      }
      ++lane;
    }
    for (std::size_t l = 0; l < first_gpu_lane; ++l) lane_gpu_begin[l] = 0;
    lane_gpu_begin[g.lanes.size()] = static_cast<std::int32_t>(gpu.size());
  }
  st.gpu_tasks = gpu.size();
  // GPU tasks of each call, in stream-then-order sequence (CSR).
  std::vector<std::int32_t> call_gpu_begin(calls.size() + 1, 0), call_gpu(st.linked_gpu_tasks);
  for (const GpuTask& t : gpu)
    if (t.call >= 0) ++call_gpu_begin[t.call + 1];
  for (std::size_t c = 0; c < calls.size(); ++c) call_gpu_begin[c + 1] += call_gpu_begin[c];
  {
    std::vector<std::int32_t> fill(call_gpu_begin.begin(), call_gpu_begin.end() - 1);
    for (std::size_t k = 0; k < gpu.size(); ++k)
      if (gpu[k].call >= 0) call_gpu[fill[gpu[k].call]++] = static_cast<std::int32_t>(k);
  }
  // Within a call, launch order = (launch, stream, order).
  for (std::size_t c = 0; c < calls.size(); ++c)
    std::sort(call_gpu.begin() + call_gpu_begin[c], call_gpu.begin() + call_gpu_begin[c + 1],
              [&](std::int32_t a, std::int32_t bb) {
                return std::tie(gpu[a].launch, gpu[a].start, a) < std::tie(gpu[bb].launch, gpu[bb].start, bb);
              });

  // Last task of a GPU lane launched strictly before t (index into gpu), -1 if none.
  auto last_before = [&](std::int32_t lane, std::int64_t t) -> std::int32_t {
    auto first = gpu.begin() + lane_gpu_begin[lane], last = gpu.begin() + lane_gpu_begin[lane + 1];
    auto it = std::partition_point(first, last, [&](const GpuTask& x) { return x.launch_max < t; });
    if (it == first) return -1;
    return static_cast<std::int32_t>((it - gpu.begin()) - 1);
  };

  // 4. Launch latency: lower median over linked tasks whose stream was idle when the call began.
  if (o.launch_latency_ns >= 0) {
    g.launch_latency_ns = o.launch_latency_ns;
  } else {
    std::vector<std::int64_t> samples;
    for (std::size_t l = first_gpu_lane; l < g.lanes.size(); ++l) {
      std::int64_t prev_end = std::numeric_limits<std::int64_t>::min();
      for (auto k = lane_gpu_begin[l]; k < lane_gpu_begin[l + 1]; ++k) {
        const GpuTask& t = gpu[k];
        if (t.call >= 0 && prev_end <= t.launch) samples.push_back(std::max<std::int64_t>(0, t.start - t.launch));
        prev_end = std::max(prev_end, t.end);
      }
    }
    st.launch_latency_samples = samples.size();
    if (!samples.empty()) {
      auto mid = samples.begin() + static_cast<std::ptrdiff_t>((samples.size() - 1) / 2);
      std::nth_element(samples.begin(), mid, samples.end());
      g.launch_latency_ns = *mid;
    }
  }

  // 4b. Dispatch gap: the idle time a stream shows between two tasks when the second was already queued (launched
  // at least a launch latency before the first started): the mean of those gaps up to 10 us (longer ones are
  // waits, handled in step 7).
  const std::int64_t delay_threshold = std::max<std::int64_t>(10'000, g.launch_latency_ns);
  if (o.dispatch_gap_ns >= 0) {
    g.dispatch_gap_ns = o.dispatch_gap_ns;
  } else {
    std::int64_t sum = 0;
    std::size_t n = 0;
    for (std::size_t l = first_gpu_lane; l < g.lanes.size(); ++l)
      for (auto k = lane_gpu_begin[l] + 1; k < lane_gpu_begin[l + 1]; ++k) {
        const GpuTask &p = gpu[k - 1], &t = gpu[k];
        if (t.call < 0 || t.call == p.call || t.launch + g.launch_latency_ns > p.start) continue;
        const std::int64_t gap = std::max<std::int64_t>(0, t.start - p.end);
        if (gap > kDispatchGapCapNs) continue;
        sum += gap;
        ++n;
      }
    st.dispatch_gap_samples = n;
    g.dispatch_gap_ns = n > 0 ? (sum + static_cast<std::int64_t>(n) / 2) / static_cast<std::int64_t>(n) : 0;
  }

  // 5. GPU nodes: stream order (with the dispatch gap), launch latency or measured-start anchor.
  DurationEditor editor(trace, o);
  std::vector<std::int32_t> launch_node(gpu.size(), -1);
  for (std::size_t l = first_gpu_lane; l < g.lanes.size(); ++l) {
    std::int32_t prev = -1;
    for (auto k = lane_gpu_begin[l]; k < lane_gpu_begin[l + 1]; ++k) {
      GpuTask& t = gpu[k];
      const TraceEvent& e = ev[t.event];
      t.node = b.add(ReplayNodeKind::GPU, t.lane, t.event, e.dur_ns, editor.gpu_ns(e, st));
      if (prev >= 0 && t.call >= 0 && gpu[k - 1].call == t.call && t.start > gpu[k - 1].end) {
        // Same launch (CUDA graph): the idle time between them is untraced graph work.
        const std::int64_t gap = t.start - gpu[k - 1].end;
        const auto gap_node = b.add(ReplayNodeKind::GPU_GAP, t.lane, t.event, gap, gap);
        b.depend(prev, gap_node);
        b.depend(gap_node, t.node);
        ++st.graph_gaps;
      } else if (prev >= 0 && g.dispatch_gap_ns > 0) {
        const auto gap_node = b.add(ReplayNodeKind::GPU_GAP, t.lane, t.event, g.dispatch_gap_ns, g.dispatch_gap_ns);
        b.depend(prev, gap_node);
        b.depend(gap_node, t.node);
      } else if (prev >= 0) {
        b.depend(prev, t.node);
      }
      if (t.call >= 0) {
        const std::int64_t lat = g.launch_latency_ns + t.offset;
        launch_node[k] = b.add(ReplayNodeKind::LAUNCH, t.lane, t.event, lat, lat);
        b.depend(launch_node[k], t.node);
      } else {
        const auto anchor = b.add(ReplayNodeKind::ANCHOR, t.lane, t.event, t.start, t.start);
        b.depend(anchor, t.node);
      }
      prev = t.node;
    }
  }

  // 6. CPU threads: anchor, gaps and calls; synchronisation inferred from call names.
  std::vector<std::int32_t> thread_anchor(first_gpu_lane, -1), call_node(calls.size(), -1);
  auto measured_lane_ok = [&](std::int32_t k, std::int64_t limit) {
    return k >= 0 && gpu[k].end <= limit + kClockSlackNs;
  };
  std::vector<std::int64_t> explained_until(gpu.size(), std::numeric_limits<std::int64_t>::min());
  std::vector<std::int32_t> explained_by(gpu.size(), -1);  // the stream-wait source setting explained_until
  // Walks back along the stream of task k to the latest task (launched no later than k) ended by `limit`; -1 if
  // none within a bounded search.
  auto consistent_before = [&](std::int32_t k, std::int64_t limit) -> std::int32_t {
    if (k < 0) return -1;
    const std::int32_t first = lane_gpu_begin[gpu[k].lane];
    for (int steps = 0; k >= first && steps < 4096; --k, ++steps)
      if (gpu[k].end <= limit + kClockSlackNs) return k;
    return -1;
  };
  for (std::size_t lane = 0; lane < first_gpu_lane; ++lane) {
    const Thread& th = *thread_of_lane[lane];
    const auto c0 = lane_calls_begin[lane], c1 = lane_calls_begin[lane + 1];
    // Stream of the next GPU task launched by a later call of this thread.
    std::vector<std::int32_t> next_lane(static_cast<std::size_t>(c1 - c0), -1);
    for (std::int32_t c = c1 - 1, next = -1; c >= c0; --c) {
      next_lane[c - c0] = next;
      if (call_gpu_begin[c] < call_gpu_begin[c + 1]) next = gpu[call_gpu[call_gpu_begin[c]]].lane;
    }
    std::int32_t prev =
        b.add(ReplayNodeKind::ANCHOR, static_cast<std::int32_t>(lane), -1, th.first_start, th.first_start);
    thread_anchor[lane] = prev;
    std::int64_t prev_end = th.first_start;
    std::int32_t last_lane = -1;    // GPU lane this thread launched to last
    std::int32_t record_task = -1;  // task captured by this thread's latest event record
    std::vector<std::int32_t> awaited;
    for (std::int32_t c = c0; c < c1; ++c) {
      Call& call = calls[c];
      const TraceEvent& e = ev[call.event];
      const std::int64_t gap = call.start - prev_end;
      const auto gap_node =
          b.add(ReplayNodeKind::GAP, static_cast<std::int32_t>(lane), call.event, gap, scaled_ns(gap, o.cpu_gap_scale));
      b.depend(prev, gap_node);
      call.gap_node = gap_node;
      const int device = last_lane >= 0 ? g.lanes[last_lane].device : -2;
      auto device_lanes = [&](auto&& fn) {
        for (std::size_t l = first_gpu_lane; l < g.lanes.size(); ++l)
          if (device == -2 || g.lanes[l].device == device) fn(static_cast<std::int32_t>(l));
      };
      // The awaited tasks of a stream synchronisation: the last task launched on the thread's stream, else the
      // stream whose last launched task ended latest before the call ended.
      auto stream_sync = [&]() {
        const std::int32_t k = last_lane >= 0 ? last_before(last_lane, call.start) : -1;
        if (measured_lane_ok(k, call.end)) {
          awaited.push_back(k);
          return;
        }
        std::int32_t best = -1;
        device_lanes([&](std::int32_t l) {
          const std::int32_t x = last_before(l, call.start);
          if (measured_lane_ok(x, call.end) && (best < 0 || gpu[x].end > gpu[best].end)) best = x;
        });
        if (best >= 0) awaited.push_back(best);
        else if (k >= 0) ++st.sync_waits_dropped;
      };
      awaited.clear();
      switch (classify_call(e.name)) {
        case SyncKind::DEVICE:
          device_lanes([&](std::int32_t l) {
            const std::int32_t k = last_before(l, call.start);
            if (k < 0) return;
            if (measured_lane_ok(k, call.end)) awaited.push_back(k);
            else ++st.sync_waits_dropped;
          });
          break;
        case SyncKind::STREAM: stream_sync(); break;
        case SyncKind::EVENT:
          if (record_task >= 0) {
            if (measured_lane_ok(record_task, call.end)) awaited.push_back(record_task);
            else ++st.sync_waits_dropped;
          } else {
            stream_sync();
          }
          break;
        case SyncKind::MEMCPY: {
          const bool named_sync = !contains(e.name, "Async");
          bool pageable = false, inside = call_gpu_begin[c] < call_gpu_begin[c + 1];
          for (auto k = call_gpu_begin[c]; k < call_gpu_begin[c + 1]; ++k) {
            const GpuTask& t = gpu[call_gpu[k]];
            if (contains(ev[t.event].name, "Pageable")) pageable = true;
            if (t.end > call.end) inside = false;
          }
          if (named_sync || (pageable && inside))
            for (auto k = call_gpu_begin[c]; k < call_gpu_begin[c + 1]; ++k) {
              if (measured_lane_ok(call_gpu[k], call.end)) awaited.push_back(call_gpu[k]);
              else ++st.sync_waits_dropped;
            }
          break;
        }
        case SyncKind::RECORD: record_task = last_lane >= 0 ? last_before(last_lane, call.start) : -1; break;
        case SyncKind::WAIT_EVENT: {
          const std::int32_t wait_lane = next_lane[c - c0];
          if (wait_lane < 0) break;
          const std::int32_t before = last_before(wait_lane, call.start);
          const std::int32_t target = before >= 0 ? before + 1 : lane_gpu_begin[wait_lane];
          if (target >= lane_gpu_begin[wait_lane + 1]) break;
          const std::int64_t limit = gpu[target].start;
          // The recorded event: this thread's latest record when it was on another stream, else on each other
          // stream of the device the last task launched before the wait; walked back to the latest task that
          // had ended when the waiting task started (the event was recorded no later than that), and of those the
          // one ending last (the tightest explanation of the waiting task's start).
          std::int32_t src = -1;
          bool candidate = false;
          if (record_task >= 0 && gpu[record_task].lane != wait_lane) {
            candidate = true;
            src = consistent_before(record_task, limit);
          }
          if (src < 0)
            for (std::size_t l = first_gpu_lane; l < g.lanes.size(); ++l) {
              if (static_cast<std::int32_t>(l) == wait_lane || g.lanes[l].device != g.lanes[wait_lane].device) continue;
              const std::int32_t last = last_before(static_cast<std::int32_t>(l), call.start);
              candidate = candidate || last >= 0;
              const std::int32_t x = consistent_before(last, limit);
              if (x >= 0 && (src < 0 || gpu[x].end > gpu[src].end)) src = x;
            }
          if (src >= 0) {
            b.depend(gpu[src].node, gpu[target].node, true);
            if (gpu[src].end > explained_until[target]) {
              explained_until[target] = gpu[src].end;
              explained_by[target] = src;
            }
            ++st.stream_waits;
          } else if (candidate) {
            ++st.stream_waits_dropped;
          }
          break;
        }
        case SyncKind::NONE: break;
      }
      std::int32_t node;
      if (awaited.empty()) {
        node = b.add(ReplayNodeKind::RUNTIME, static_cast<std::int32_t>(lane), call.event, e.dur_ns,
                     scaled_ns(e.dur_ns, o.runtime_scale));
      } else {
        std::int64_t wait_end = call.start;
        for (auto k : awaited) wait_end = std::max(wait_end, gpu[k].end);
        const std::int64_t tail = call.end - wait_end;
        node = b.add(ReplayNodeKind::RUNTIME, static_cast<std::int32_t>(lane), call.event, tail,
                     scaled_ns(tail, o.runtime_scale));
        g.nodes[node].blocking = true;
        ++st.blocking_calls;
        st.sync_waits += awaited.size();
        for (auto k : awaited) b.depend(gpu[k].node, node, true);
      }
      g.nodes[node].call_start = gap_node;
      b.depend(gap_node, node);
      prev = node;
      call_node[c] = node;
      prev_end = call.end;
      if (call_gpu_begin[c] < call_gpu_begin[c + 1]) last_lane = gpu[call_gpu[call_gpu_begin[c + 1] - 1]].lane;
    }
    if (th.last_end > prev_end || c0 == c1) {
      const std::int64_t tail = std::max<std::int64_t>(0, th.last_end - prev_end);
      const auto node =
          b.add(ReplayNodeKind::GAP, static_cast<std::int32_t>(lane), -1, tail, scaled_ns(tail, o.cpu_gap_scale));
      b.depend(prev, node);
    }
  }
  // 6b. Thread starts. A thread whose first event comes after the trace began was woken by another thread (the
  // autograd thread by loss.backward(), a data-loader by the main loop): its start follows the runtime call of
  // another thread that ended last before it, by the measured delay, instead of a fixed time from the origin.
  for (std::size_t lane = 0; lane < first_gpu_lane; ++lane) {
    const Thread& th = *thread_of_lane[lane];
    if (th.first_start <= g.measured_begin_ns + kClockSlackNs) continue;
    std::int32_t trigger = -1;
    for (std::size_t other = 0; other < first_gpu_lane; ++other) {
      if (other == lane) continue;
      const auto first = calls.begin() + lane_calls_begin[other], last = calls.begin() + lane_calls_begin[other + 1];
      // Top-level calls of a thread do not overlap: their ends are sorted like their starts.
      auto it = std::partition_point(first, last, [&](const Call& c) { return c.end <= th.first_start; });
      if (it == first) continue;
      const auto c = static_cast<std::int32_t>(std::prev(it) - calls.begin());
      if (trigger < 0 || calls[c].end > calls[trigger].end) trigger = c;
    }
    if (trigger < 0) continue;
    const std::int64_t delay = th.first_start - calls[trigger].end;
    const std::int32_t anchor = thread_anchor[lane];
    g.nodes[anchor].measured_dur_ns = g.nodes[anchor].dur_ns = delay;
    g.graph.tasks()[anchor].duration_s = static_cast<double>(delay) * 1e-9;
    b.depend(call_node[trigger], anchor, true);
    ++st.thread_starts_linked;
  }

  // 7. Late starts. A linked GPU task that started later than its stream predecessor, its launch and its known
  // waits allow waited for something the trace does not name: an event recorded where we cannot see it, a
  // hardware queue shared with another stream, SMs held by another kernel, or a launch the correlation ids do not
  // give (traces with reused ids). Two explanations are considered and the later one is used: the task of another
  // stream of the device that ended last before it started, and the last runtime call of the launching thread
  // that began at least a launch latency before it started (the task is then launched by that call). An
  // explanation must fall inside the unexplained delay.
  for (std::size_t l = first_gpu_lane; l < g.lanes.size(); ++l) {
    for (auto k = lane_gpu_begin[l]; k < lane_gpu_begin[l + 1]; ++k) {
      const GpuTask& t = gpu[k];
      if (t.call < 0) continue;                                          // unlinked tasks keep their measured start
      if (k > lane_gpu_begin[l] && gpu[k - 1].call == t.call) continue;  // graph gap: start kept by the gap
      std::int64_t earliest = std::max(t.launch + g.launch_latency_ns, explained_until[k]);
      if (k > lane_gpu_begin[l]) earliest = std::max(earliest, gpu[k - 1].end + g.dispatch_gap_ns);
      if (t.start - earliest <= delay_threshold) continue;
      std::int32_t best_gpu = -1;
      for (std::size_t o2 = first_gpu_lane; o2 < g.lanes.size(); ++o2) {
        if (o2 == l || g.lanes[o2].device != g.lanes[l].device) continue;
        const auto first = gpu.begin() + lane_gpu_begin[o2], last = gpu.begin() + lane_gpu_begin[o2 + 1];
        // Last task of the other stream that started before t; walk back to one that had also ended.
        auto it = std::partition_point(first, last, [&](const GpuTask& x) { return x.start < t.start; });
        for (int steps = 0; it != first && steps < 64; ++steps) {
          --it;
          if (it->end <= t.start + kClockSlackNs) {
            const auto x = static_cast<std::int32_t>(it - gpu.begin());
            if (it->end > earliest && (best_gpu < 0 || it->end > gpu[best_gpu].end)) best_gpu = x;
            break;
          }
        }
      }
      std::int32_t best_call = -1;
      {
        const std::int32_t lane = calls[t.call].lane;
        const auto first = calls.begin() + lane_calls_begin[lane], last = calls.begin() + lane_calls_begin[lane + 1];
        auto it = std::partition_point(
            first, last, [&](const Call& c) { return c.start + g.launch_latency_ns <= t.start + kClockSlackNs; });
        if (it != first && std::prev(it)->start + g.launch_latency_ns > earliest)
          best_call = static_cast<std::int32_t>(std::prev(it) - calls.begin());
      }
      // The explanation is kept with the residual delay the trace shows after it, so the task starts as measured.
      if (best_call >= 0 && (best_gpu < 0 || calls[best_call].start + g.launch_latency_ns > gpu[best_gpu].end)) {
        const std::int64_t lag = o.keep_unexplained_gaps
                                     ? std::max(g.launch_latency_ns, t.start - calls[best_call].start)
                                     : g.launch_latency_ns;
        const auto launch = b.add(ReplayNodeKind::LAUNCH, t.lane, t.event, lag, lag);
        b.depend(calls[best_call].gap_node, launch, true);
        b.depend(launch, t.node);
        ++st.late_starts_relaunched;
      } else if (best_gpu >= 0) {
        const std::int64_t residual = t.start - gpu[best_gpu].end;
        if (residual > 0 && o.keep_unexplained_gaps) {
          const auto gap_node = b.add(ReplayNodeKind::GPU_GAP, t.lane, t.event, residual, residual);
          b.depend(gpu[best_gpu].node, gap_node, true);
          b.depend(gap_node, t.node);
        } else {
          b.depend(gpu[best_gpu].node, t.node, true);
        }
        ++st.gpu_waits_inferred;
      } else if (o.keep_unexplained_gaps) {
        // Nothing in the trace explains the wait: the constraint that bound the task (its launch, its stream
        // predecessor or its stream-wait source) is kept with the measured delay after it.
        const std::int64_t by_launch = t.launch + g.launch_latency_ns;
        const std::int64_t by_prev =
            k > lane_gpu_begin[l] ? gpu[k - 1].end + g.dispatch_gap_ns : std::numeric_limits<std::int64_t>::min();
        if (by_launch >= by_prev && by_launch >= explained_until[k]) {
          const std::int64_t lag = t.start - calls[t.call].start;
          g.nodes[launch_node[k]].dur_ns = g.nodes[launch_node[k]].measured_dur_ns = lag;
          g.graph.tasks()[launch_node[k]].duration_s = static_cast<double>(lag) * 1e-9;
        } else {
          const std::int32_t from = by_prev >= explained_until[k] ? k - 1 : explained_by[k];
          const std::int64_t gap = t.start - gpu[from].end;
          const auto gap_node = b.add(ReplayNodeKind::GPU_GAP, t.lane, t.event, gap, gap);
          b.depend(gpu[from].node, gap_node, from != k - 1);
          b.depend(gap_node, t.node);
        }
        ++st.unexplained_gaps;
        st.unexplained_gap_ns += t.start - earliest;
      }
    }
  }

  // Launch edges: a GPU task's launch delay starts with its call.
  for (std::size_t k = 0; k < gpu.size(); ++k)
    if (gpu[k].call >= 0) b.depend(calls[gpu[k].call].gap_node, launch_node[k]);

  st.cycle_edges_dropped = break_cycles(b);
  for (const auto& [u, v] : g.edges) g.graph.depend(u, v);
  g.graph.finalize();
  return std::move(b.g);
}

// ---------------------------------------------------------------------------------------------------------------
// Replay and report
// ---------------------------------------------------------------------------------------------------------------

ReplayTimeline run_replay(const ReplayGraph& g) {
  const EngineResult res = run_analytic(g.graph, ClusterSpec{}, Calibration{}, {});
  ReplayTimeline t;
  t.engine = res.engine;
  t.start_ns.resize(res.start_s.size());
  t.end_ns.resize(res.end_s.size());
  t.last_end_ns = 0;
  for (std::size_t i = 0; i < res.start_s.size(); ++i) {
    t.start_ns[i] = units::s_to_ns(res.start_s[i]);
    t.end_ns[i] = units::s_to_ns(res.end_s[i]);
    t.last_end_ns = std::max(t.last_end_ns, t.end_ns[i]);
  }
  return t;
}

namespace {

const char* category(const ImportedTrace& trace, const ReplayNode& n) {
  switch (n.kind) {
    case ReplayNodeKind::ANCHOR: return "anchor";
    case ReplayNodeKind::GAP: return "cpu gap";
    case ReplayNodeKind::LAUNCH: return "launch latency";
    case ReplayNodeKind::GPU_GAP: return "gpu gap";
    case ReplayNodeKind::RUNTIME: return n.blocking ? "sync tail" : "runtime call";
    case ReplayNodeKind::GPU: {
      const TraceEvent& e = trace.events[n.event];
      if (e.kind == Kind::MEMCPY) return "gpu memcpy";
      if (e.kind == Kind::MEMSET) return "gpu memset";
      return e.collective ? "gpu collective" : "gpu kernel";
    }
  }
  return "?";
}

double pct(std::int64_t a, std::int64_t b) {
  return b > 0 ? 100.0 * static_cast<double>(a - b) / static_cast<double>(b) : 0.0;
}

std::vector<std::pair<std::string, std::int64_t>> sorted_desc(const std::map<std::string, std::int64_t>& m,
                                                              std::size_t limit) {
  std::vector<std::pair<std::string, std::int64_t>> v(m.begin(), m.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (v.size() > limit) v.resize(limit);
  return v;
}

}  // namespace

std::vector<LaneReport> lane_reports(const ImportedTrace& trace, const ReplayGraph& g, const ReplayTimeline& t) {
  (void)trace;
  std::vector<LaneReport> out(g.lanes.size());
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> replayed(g.lanes.size());
  for (std::size_t l = 0; l < g.lanes.size(); ++l) {
    const ReplayLane& lane = g.lanes[l];
    out[l].name = lane.name;
    out[l].gpu = lane.gpu;
    out[l].tasks = lane.tasks;
    out[l].measured_busy_ns = lane.measured_busy_ns;
    out[l].measured_end_ns = lane.measured_end_ns;
  }
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const ReplayNode& n = g.nodes[i];
    LaneReport& r = out[n.lane];
    if (n.kind == ReplayNodeKind::GPU) {
      replayed[n.lane].emplace_back(t.start_ns[i], t.end_ns[i]);
      r.replayed_end_ns = std::max(r.replayed_end_ns, t.end_ns[i]);
    } else if (!g.lanes[n.lane].gpu) {
      r.replayed_end_ns = std::max(r.replayed_end_ns, t.end_ns[i]);
      if (n.kind == ReplayNodeKind::RUNTIME) r.replayed_busy_ns += t.end_ns[i] - t.end_ns[n.call_start];
    }
  }
  for (std::size_t l = 0; l < g.lanes.size(); ++l)
    if (g.lanes[l].gpu) out[l].replayed_busy_ns = union_length(replayed[l]);
  return out;
}

CriticalPath critical_path(const ImportedTrace& trace, const ReplayGraph& g, const ReplayTimeline& t) {
  CriticalPath cp;
  const std::size_t n = g.nodes.size();
  if (n == 0) return cp;
  std::vector<std::int32_t> begin(n + 1, 0), pred(g.edges.size());
  for (const auto& [u, v] : g.edges) ++begin[v + 1];
  for (std::size_t i = 0; i < n; ++i) begin[i + 1] += begin[i];
  {
    std::vector<std::int32_t> fill(begin.begin(), begin.end() - 1);
    for (const auto& [u, v] : g.edges) pred[fill[v]++] = u;
  }
  std::int32_t cur = 0;
  for (std::size_t i = 1; i < n; ++i)
    if (t.end_ns[i] > t.end_ns[cur]) cur = static_cast<std::int32_t>(i);
  cp.length_ns = t.end_ns[cur];
  std::map<std::string, std::int64_t> cats, names;
  while (cur >= 0) {
    const ReplayNode& node = g.nodes[cur];
    const std::int64_t d = t.end_ns[cur] - t.start_ns[cur];
    cats[category(trace, node)] += d;
    if (node.kind == ReplayNodeKind::GPU) names[trace.events[node.event].name] += d;
    ++cp.tasks;
    std::int32_t next = -1;
    for (auto k = begin[cur]; k < begin[cur + 1]; ++k) {
      const auto p = pred[k];
      if (t.end_ns[p] == t.start_ns[cur] && (next < 0 || p < next)) next = p;
    }
    if (next < 0 && t.start_ns[cur] > 0) {
      // Rounding could only make the link inexact by a nanosecond: take the latest-ending predecessor.
      for (auto k = begin[cur]; k < begin[cur + 1]; ++k)
        if (next < 0 || t.end_ns[pred[k]] > t.end_ns[next]) next = pred[k];
      if (next >= 0) cats["anchor"] += t.start_ns[cur] - t.end_ns[next];
    }
    cur = next;
  }
  for (auto it = cats.begin(); it != cats.end();) it = it->second == 0 ? cats.erase(it) : std::next(it);
  cp.by_category = sorted_desc(cats, cats.size());
  cp.top_gpu = sorted_desc(names, 5);
  return cp;
}

Replay replay_trace(const ImportedTrace& trace, const ReplayOptions& options) {
  options.validate();
  Replay r;
  ReplayOptions base_opt;
  base_opt.launch_latency_ns = options.launch_latency_ns;
  base_opt.keep_unexplained_gaps = options.keep_unexplained_gaps;
  base_opt.dispatch_gap_ns = options.dispatch_gap_ns;
  r.base = build_replay(trace, base_opt);
  r.base_times = run_replay(r.base);
  ReplayReport& rep = r.report;
  rep.source = trace.source;
  rep.rank = trace.rank;
  rep.world_size = trace.world_size;
  rep.vendor = trace.vendor;
  rep.launch_latency_ns = r.base.launch_latency_ns;
  rep.dispatch_gap_ns = r.base.dispatch_gap_ns;
  rep.stats = r.base.stats;
  rep.measured_span_ns = r.base.measured_end_ns - r.base.measured_begin_ns;
  rep.replayed_span_ns = r.base_times.last_end_ns - r.base.measured_begin_ns;
  rep.error_pct = pct(rep.replayed_span_ns, rep.measured_span_ns);
  rep.lanes = lane_reports(trace, r.base, r.base_times);
  rep.critical_path = critical_path(trace, r.base, r.base_times);
  rep.predicted_span_ns = rep.replayed_span_ns;
  if (options.has_edits()) {
    r.edited = rep.edited = true;
    rep.edits = options.describe();
    r.what_if = build_replay(trace, options);
    r.what_if_times = run_replay(r.what_if);
    const auto& s = r.what_if.stats;
    rep.stats.gpu_tasks_scaled = s.gpu_tasks_scaled;
    rep.stats.collectives_modelled = s.collectives_modelled;
    rep.stats.collectives_without_bytes = s.collectives_without_bytes;
    rep.stats.collectives_without_group = s.collectives_without_group;
    rep.predicted_span_ns = r.what_if_times.last_end_ns - r.what_if.measured_begin_ns;
    rep.change_pct = pct(rep.predicted_span_ns, rep.replayed_span_ns);
    rep.predicted_lanes = lane_reports(trace, r.what_if, r.what_if_times);
    rep.predicted_critical_path = critical_path(trace, r.what_if, r.what_if_times);
  }
  return r;
}

// ---------------------------------------------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------------------------------------------

namespace {

nlohmann::json lanes_json(const std::vector<LaneReport>& lanes) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& l : lanes)
    a.push_back({{"lane", l.name},
                 {"gpu", l.gpu},
                 {"tasks", l.tasks},
                 {"measured_busy_ns", l.measured_busy_ns},
                 {"replayed_busy_ns", l.replayed_busy_ns},
                 {"measured_end_ns", l.measured_end_ns},
                 {"replayed_end_ns", l.replayed_end_ns}});
  return a;
}

nlohmann::json critical_json(const CriticalPath& cp) {
  nlohmann::json cats = nlohmann::json::array(), top = nlohmann::json::array();
  for (const auto& [k, v] : cp.by_category) cats.push_back({{"category", k}, {"ns", v}});
  for (const auto& [k, v] : cp.top_gpu) top.push_back({{"name", k}, {"ns", v}});
  return {{"length_ns", cp.length_ns}, {"tasks", cp.tasks}, {"by_category", cats}, {"top_gpu_tasks", top}};
}

std::string ms(std::int64_t ns) { return format_number("%.3f", static_cast<double>(ns) / 1e6); }

}  // namespace

std::string replay_json(const std::vector<ReplayReport>& reports, const ReplayOptions& o) {
  nlohmann::json scales = nlohmann::json::array();
  for (const auto& k : o.kernel_scales) scales.push_back({{"pattern", k.pattern}, {"factor", k.factor}});
  nlohmann::json opts = {{"kernel_scales", scales},
                         {"collective_time_scale", o.collective_time_scale},
                         {"collective_bw_scale", o.collective_bw_scale},
                         {"collective_bandwidth_Bps", o.collective_bandwidth_Bps},
                         {"collective_group_size", o.collective_group_size},
                         {"collective_alpha_s", o.collective_alpha_s},
                         {"cpu_gap_scale", o.cpu_gap_scale},
                         {"runtime_scale", o.runtime_scale},
                         {"launch_latency_ns", o.launch_latency_ns},
                         {"dispatch_gap_ns", o.dispatch_gap_ns},
                         {"keep_unexplained_gaps", o.keep_unexplained_gaps}};
  nlohmann::json traces = nlohmann::json::array();
  for (const auto& r : reports) {
    const auto& s = r.stats;
    nlohmann::json j = {{"source", r.source},
                        {"rank", r.rank},
                        {"world_size", r.world_size},
                        {"vendor", r.vendor},
                        {"engine", "analytic"},
                        {"graph",
                         {{"cpu_threads", s.cpu_threads},
                          {"gpu_streams", s.gpu_streams},
                          {"runtime_calls", s.runtime_calls},
                          {"nested_runtime_calls", s.nested_calls},
                          {"gpu_tasks", s.gpu_tasks},
                          {"linked_gpu_tasks", s.linked_gpu_tasks},
                          {"launch_latency_ns", r.launch_latency_ns},
                          {"launch_latency_samples", s.launch_latency_samples},
                          {"dispatch_gap_ns", r.dispatch_gap_ns},
                          {"dispatch_gap_samples", s.dispatch_gap_samples},
                          {"graph_gaps", s.graph_gaps},
                          {"late_starts_on_other_streams", s.gpu_waits_inferred},
                          {"late_starts_relaunched", s.late_starts_relaunched},
                          {"thread_starts_linked", s.thread_starts_linked},
                          {"unexplained_gaps", s.unexplained_gaps},
                          {"unexplained_gap_ns", s.unexplained_gap_ns},
                          {"blocking_calls", s.blocking_calls},
                          {"sync_waits", s.sync_waits},
                          {"sync_waits_dropped", s.sync_waits_dropped},
                          {"stream_waits", s.stream_waits},
                          {"stream_waits_dropped", s.stream_waits_dropped},
                          {"cycle_edges_dropped", s.cycle_edges_dropped},
                          {"collective_kernels", s.collectives}}},
                        {"measured_span_ns", r.measured_span_ns},
                        {"replayed_span_ns", r.replayed_span_ns},
                        {"error_pct", r.error_pct},
                        {"lanes", lanes_json(r.lanes)},
                        {"critical_path", critical_json(r.critical_path)}};
    if (r.edited)
      j["what_if"] = {{"edits", r.edits},
                      {"predicted_span_ns", r.predicted_span_ns},
                      {"change_pct", r.change_pct},
                      {"gpu_tasks_scaled", s.gpu_tasks_scaled},
                      {"collectives_modelled", s.collectives_modelled},
                      {"collectives_without_bytes", s.collectives_without_bytes},
                      {"collectives_without_group", s.collectives_without_group},
                      {"lanes", lanes_json(r.predicted_lanes)},
                      {"critical_path", critical_json(r.predicted_critical_path)}};
    traces.push_back(std::move(j));
  }
  nlohmann::json doc = {{"schema", "dtsim.replay"},
                        {"schema_version", 1},
                        {"dtsim_version", DTSIM_VERSION},
                        {"options", opts},
                        {"traces", traces}};
  return doc.dump(2) + "\n";
}

std::string replay_chrome_trace(const std::vector<const ImportedTrace*>& traces,
                                const std::vector<const Replay*>& replays) {
  DTSIM_ASSERT(traces.size() == replays.size(), "one replay per trace");
  ChromeTraceWriter w;
  std::vector<TraceArg> args;
  bool any_edited = false;
  for (std::size_t k = 0; k < replays.size(); ++k) {
    const ImportedTrace& tr = *traces[k];
    const Replay& r = *replays[k];
    any_edited = any_edited || r.edited;
    const ReplayGraph& g = r.edited ? r.what_if : r.base;
    const ReplayTimeline& t = r.edited ? r.what_if_times : r.base_times;
    const std::string label = tr.rank >= 0 ? "rank " + std::to_string(tr.rank) : "trace " + std::to_string(k);
    // Processes: host, then one per device, numbered inside a block of 1000 per trace.
    std::map<int, int> pid_of_device;
    const int host_pid = static_cast<int>(k) * 1000;
    w.process_name(host_pid, label + " host", host_pid);
    for (const auto& l : g.lanes)
      if (l.gpu && !pid_of_device.count(l.device)) {
        const int pid = host_pid + 1 + static_cast<int>(pid_of_device.size());
        pid_of_device[l.device] = pid;
        w.process_name(pid, label + " gpu " + std::to_string(l.device), pid);
      }
    auto pid_of = [&](const ReplayLane& l) { return l.gpu ? pid_of_device.at(l.device) : host_pid; };
    for (std::size_t l = 0; l < g.lanes.size(); ++l)
      w.thread_name(pid_of(g.lanes[l]), static_cast<int>(l), g.lanes[l].name);
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      const ReplayNode& n = g.nodes[i];
      const ReplayLane& lane = g.lanes[n.lane];
      args.clear();
      if (n.kind == ReplayNodeKind::GPU) {
        const TraceEvent& e = tr.events[n.event];
        args.push_back(TraceArg::integer("measured_start_ns", e.start_ns));
        args.push_back(TraceArg::integer("measured_dur_ns", e.dur_ns));
        if (e.correlation >= 0) args.push_back(TraceArg::integer("correlation", e.correlation));
        w.complete(pid_of(lane), n.lane, e.name, category(tr, n), t.start_ns[i], t.end_ns[i] - t.start_ns[i], args);
      } else if (n.kind == ReplayNodeKind::RUNTIME) {
        const TraceEvent& e = tr.events[n.event];
        const std::int64_t s = t.end_ns[n.call_start];
        args.push_back(TraceArg::integer("measured_start_ns", e.start_ns));
        args.push_back(TraceArg::integer("measured_dur_ns", e.dur_ns));
        if (e.correlation >= 0) args.push_back(TraceArg::integer("correlation", e.correlation));
        w.complete(pid_of(lane), n.lane, e.name, n.blocking ? "runtime (blocking)" : "runtime", s, t.end_ns[i] - s,
                   args);
      } else if (n.kind == ReplayNodeKind::GAP && t.end_ns[i] > t.start_ns[i]) {
        w.complete(pid_of(lane), n.lane, "cpu", "gap", t.start_ns[i], t.end_ns[i] - t.start_ns[i], args);
      }
    }
  }
  nlohmann::json meta = {{"schema", "dtsim.replay_trace"},
                         {"schema_version", 1},
                         {"dtsim_version", DTSIM_VERSION},
                         {"timeline", any_edited ? "what-if (edited durations)" : "replay (measured durations)"}};
  w.set_metadata_json(meta.dump());
  return w.finish();
}

std::string replay_summary(const ReplayReport& r) {
  std::ostringstream o;
  const auto& s = r.stats;
  o << "replay of " << r.source;
  if (r.rank >= 0) o << " (rank " << r.rank << " of " << r.world_size << ")";
  if (!r.vendor.empty()) o << " [" << r.vendor << "]";
  o << "\n";
  o << "  graph: " << s.cpu_threads << " CPU threads, " << s.gpu_streams << " GPU streams, " << s.runtime_calls
    << " runtime calls, " << s.gpu_tasks << " GPU tasks (" << s.linked_gpu_tasks << " linked to their launch, "
    << s.collectives << " collective)\n";
  o << "  launch latency " << format_number("%.2f", static_cast<double>(r.launch_latency_ns) / 1e3) << " us (median of "
    << s.launch_latency_samples << " launches on idle streams), dispatch gap "
    << format_number("%.2f", static_cast<double>(r.dispatch_gap_ns) / 1e3) << " us (mean of " << s.dispatch_gap_samples
    << " queued tasks)\n";
  o << "  waits: " << s.blocking_calls << " blocking calls (" << s.sync_waits << " GPU waits, " << s.sync_waits_dropped
    << " contradicted), " << s.stream_waits << " stream-wait-event edges (" << s.stream_waits_dropped
    << " contradicted); late GPU starts: " << s.gpu_waits_inferred << " after another stream, "
    << s.late_starts_relaunched << " re-launched, " << s.unexplained_gaps << " unexplained ("
    << ms(s.unexplained_gap_ns) << " ms kept); " << s.thread_starts_linked << " thread starts after another thread\n";
  o << "  span: measured " << ms(r.measured_span_ns) << " ms, replayed " << ms(r.replayed_span_ns) << " ms, error "
    << format_number("%+.3f", r.error_pct) << " %\n";
  auto lane_table = [&](const std::vector<LaneReport>& lanes, const char* second) {
    char line[256];
    std::snprintf(line, sizeof line, "  %-26s %8s %12s %12s %12s %12s\n", "lane", "tasks", "busy meas ms",
                  (std::string("busy ") + second).c_str(), "end meas ms", (std::string("end ") + second).c_str());
    o << line;
    for (const auto& l : lanes) {
      std::snprintf(line, sizeof line, "  %-26s %8zu %12.3f %12.3f %12.3f %12.3f\n", l.name.c_str(), l.tasks,
                    static_cast<double>(l.measured_busy_ns) / 1e6, static_cast<double>(l.replayed_busy_ns) / 1e6,
                    static_cast<double>(l.measured_end_ns) / 1e6, static_cast<double>(l.replayed_end_ns) / 1e6);
      o << line;
    }
  };
  auto path = [&](const CriticalPath& cp) {
    o << "  critical path (" << cp.tasks << " tasks):";
    bool first = true;
    for (const auto& [k, v] : cp.by_category) {
      if (v <= 0) continue;
      o << (first ? " " : ", ") << k << " " << format_number("%.1f", cp.length_ns > 0 ? 100.0 * v / cp.length_ns : 0.0)
        << "%";
      first = false;
    }
    o << "\n";
    if (!cp.top_gpu.empty()) {
      o << "    top GPU tasks on it:";
      for (const auto& [k, v] : cp.top_gpu)
        o << "\n      " << ms(v) << " ms  " << (k.size() > 90 ? k.substr(0, 87) + "..." : k);
      o << "\n";
    }
  };
  lane_table(r.lanes, "repl ms");
  path(r.critical_path);
  if (r.edited) {
    o << "  what-if: " << r.edits << "\n";
    if (s.gpu_tasks_scaled > 0 || s.collectives_modelled > 0)
      o << "    " << s.gpu_tasks_scaled << " GPU tasks scaled, " << s.collectives_modelled << " collectives re-timed ("
        << s.collectives_without_bytes << " without message size, " << s.collectives_without_group
        << " without group size)\n";
    o << "  predicted span " << ms(r.predicted_span_ns) << " ms (" << format_number("%+.2f", r.change_pct)
      << " % vs the replay)\n";
    lane_table(r.predicted_lanes, "pred ms");
    path(r.predicted_critical_path);
  }
  return o.str();
}

}  // namespace dtsim::sim
