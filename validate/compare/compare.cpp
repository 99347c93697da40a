#include "validate/compare/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <set>
#include <utility>

#include "traces/chrome_trace.hpp"
#include "traces/error.hpp"
#include "traces/json_util.hpp"

namespace dtsim::validate {
namespace {
using nlohmann::json;
namespace ju = json_util;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::size_t kNamedUnmatched = 10;  // unmatched tasks named per side
constexpr int kMeasuredPid = 10000;          // pid offset of the measured side in compare_trace.json

std::string stream_name(int tid) {
  static const char* const kNames[] = {"compute", "tp-comm", "pp-comm", "dp-comm", "host"};
  return tid >= 0 && tid < 5 ? kNames[tid] : std::string("stream ") + std::to_string(tid);
}

[[gnu::format(printf, 1, 2)]] std::string strf(const char* fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  std::string s(static_cast<std::size_t>(std::vsnprintf(nullptr, 0, fmt, ap)), '\0');
  va_end(ap);
  std::vsnprintf(s.data(), s.size() + 1, fmt, ap2);
  va_end(ap2);
  return s;
}

std::string percent(double error) { return std::isnan(error) ? "n/a" : strf("%+.2f%%", 100 * error); }

TimelineEvent parse_event(const json& e, const std::string& ctx) {
  TimelineEvent ev;
  ev.pid = ju::get<int>(e, ctx, "pid");
  ev.tid = ju::get<int>(e, ctx, "tid");
  ev.name = ju::get<std::string>(e, ctx, "name");
  ev.cat = ju::get_or<std::string>(e, ctx, "cat", "");
  ev.ts_us = ju::get<double>(e, ctx, "ts");
  ev.dur_us = ju::get<double>(e, ctx, "dur");
  if (ev.dur_us < 0) throw ConfigError(ctx + ": field 'dur' is negative");
  const json args = ju::get_or<json>(e, ctx, "args", json::object());
  ev.phase = ju::get_or<std::string>(args, ctx + ": args", "phase", "");
  ev.layer = ju::get_or<int>(args, ctx + ": args", "layer", -1);
  ev.microbatch = ju::get_or<int>(args, ctx + ": args", "microbatch", -1);
  return ev;
}

// Every event under its TaskKey: events sorted by ts (file order among equal ts), counted per key.
std::map<TaskKey, const TimelineEvent*> index(const Timeline& t) {
  std::vector<const TimelineEvent*> order;
  for (const auto& e : t.events) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) { return a->ts_us < b->ts_us; });
  std::map<TaskKey, const TimelineEvent*> out;
  std::map<TaskKey, int> seen;
  for (const auto* e : order) {
    TaskKey key{e->pid, e->tid, e->name, e->phase, e->layer, e->microbatch, 0};
    key.occurrence = seen[key]++;
    out.emplace(std::move(key), e);
  }
  return out;
}

// Sorted disjoint intervals (start, end) in microseconds.
using Intervals = std::vector<std::pair<double, double>>;

Intervals merged(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& iv : v)
    if (!out.empty() && iv.first <= out.back().second) out.back().second = std::max(out.back().second, iv.second);
    else out.push_back(iv);
  return out;
}

double length(const Intervals& v) {
  double s = 0;
  for (const auto& [a, b] : v) s += b - a;
  return s;
}

double overlap(const Intervals& x, const Intervals& y) {
  double s = 0;
  for (std::size_t i = 0, j = 0; i < x.size() && j < y.size();) {
    s += std::max(0.0, std::min(x[i].second, y[j].second) - std::max(x[i].first, y[j].first));
    x[i].second < y[j].second ? ++i : ++j;
  }
  return s;
}

struct Breakdown {
  double compute_s = kNaN, exposed_comm_s = kNaN, bubble_s = kNaN;
};

std::map<int, Breakdown> breakdown(const Timeline& t) {
  struct Rank {
    Intervals compute, comm;
    double first = std::numeric_limits<double>::infinity(), last = -first;
  };
  std::map<int, Rank> ranks;
  for (const auto& e : t.events) {
    Rank& r = ranks[e.pid];
    if (e.tid == 0) r.compute.emplace_back(e.ts_us, e.ts_us + e.dur_us);
    if (e.tid >= 1 && e.tid <= 3) r.comm.emplace_back(e.ts_us, e.ts_us + e.dur_us);
    r.first = std::min(r.first, e.ts_us);
    r.last = std::max(r.last, e.ts_us + e.dur_us);
  }
  std::map<int, Breakdown> out;
  for (const auto& [pid, r] : ranks) {
    const Intervals compute = merged(r.compute), comm = merged(r.comm);
    const double busy = length(compute), exposed = length(comm) - overlap(comm, compute);
    out[pid] = {busy * 1e-6, exposed * 1e-6, (r.last - r.first - busy - exposed) * 1e-6};
  }
  return out;
}

std::map<std::string, double> phase_compute(const Timeline& t) {
  std::map<std::string, double> out;
  for (const auto& e : t.events)
    if (e.tid == 0) out[e.phase] += e.dur_us * 1e-6;
  return out;
}

// Calls f(key, predicted value, measured value) for every key of either map, `missing` standing in for a side
// that lacks it.
template <typename K, typename V, typename F>
void for_union(const std::map<K, V>& p, const std::map<K, V>& m, const V& missing, F f) {
  std::set<K> keys;
  for (const auto& kv : p) keys.insert(kv.first);
  for (const auto& kv : m) keys.insert(kv.first);
  for (const K& k : keys) {
    const auto a = p.find(k), b = m.find(k);
    f(k, a == p.end() ? missing : a->second, b == m.end() ? missing : b->second);
  }
}

json metric_json(const Metric& m) { return {{"predicted", m.predicted}, {"measured", m.measured}, {"error", m.error}}; }

json unmatched_json(const Unmatched& u) { return {{"count", u.count}, {"first", u.first}}; }

}  // namespace

Timeline load_timeline(const std::string& dir) {
  if (!std::filesystem::is_directory(dir)) throw ConfigError(std::string("run directory '") + dir + "' does not exist");
  Timeline t;
  t.dir = dir;
  const std::string trace_path = dir + "/trace.json", summary_path = dir + "/summary.json";
  const json trace = ju::read_file(trace_path);
  const auto events = trace.is_object() ? trace.find("traceEvents") : trace.end();
  if (events == trace.end() || !events->is_array())
    throw ConfigError(trace_path + ": field 'traceEvents' is missing or not an array");
  double first = std::numeric_limits<double>::infinity(), last = -first;
  for (std::size_t i = 0; i < events->size(); ++i) {
    const std::string ctx = trace_path + ": traceEvents[" + std::to_string(i) + "]";
    if (ju::get<std::string>((*events)[i], ctx, "ph") != "X") continue;
    const TimelineEvent& e = t.events.emplace_back(parse_event((*events)[i], ctx));
    first = std::min(first, e.ts_us);
    last = std::max(last, e.ts_us + e.dur_us);
  }
  const double span_s = t.events.empty() ? 0 : (last - first) * 1e-6;

  const json summary = ju::read_file(summary_path);
  const json results = ju::get_or<json>(summary, summary_path, "results", json::object());
  t.iteration_time_s = ju::get_or<double>(results, summary_path + ": results", "iteration_time_s", span_s);
  const json ranks = ju::get_or<json>(summary, summary_path, "ranks", json::array());
  if (!ranks.is_array()) throw ConfigError(summary_path + ": field 'ranks' is not an array");
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const std::string ctx = summary_path + ": ranks[" + std::to_string(i) + "]";
    t.peak_memory_bytes[ju::get<int>(ranks[i], ctx, "rank")] = ju::get<double>(ranks[i], ctx, "peak_memory_bytes");
  }
  return t;
}

std::string describe(const TaskKey& key) {
  std::string s = std::string("rank ") + std::to_string(key.pid) + " " + stream_name(key.tid) + " " + key.name;
  if (!key.phase.empty()) s.append(" ").append(key.phase);
  if (key.layer >= 0) s.append(" layer ").append(std::to_string(key.layer));
  if (key.microbatch >= 0) s.append(" mb ").append(std::to_string(key.microbatch));
  if (key.occurrence > 0) s.append(" #").append(std::to_string(key.occurrence));
  return s;
}

Metric metric(double predicted, double measured) {
  if (predicted == measured) return {predicted, measured, 0.0};
  return {predicted, measured, predicted != 0 ? (measured - predicted) / predicted : kNaN};
}

CompareReport compare(const Timeline& predicted, const Timeline& measured) {
  CompareReport r;
  r.predicted_dir = predicted.dir;
  r.measured_dir = measured.dir;
  r.iteration_time_s = metric(predicted.iteration_time_s, measured.iteration_time_s);

  const auto pi = index(predicted), mi = index(measured);
  const auto note = [](Unmatched& u, const TaskKey& key) {
    if (u.count++ < kNamedUnmatched) u.first.push_back(describe(key));
  };
  for (const auto& [key, e] : pi) {
    const auto it = mi.find(key);
    if (it == mi.end()) note(r.only_predicted, key);
    else r.tasks.push_back({key, metric(e->dur_us * 1e-6, it->second->dur_us * 1e-6)});
  }
  for (const auto& [key, e] : mi)
    if (!pi.count(key)) note(r.only_measured, key);

  TaskStats& s = r.compute_tasks;
  double abs_diff = 0, total = 0;
  for (const auto& t : r.tasks) {
    if (t.key.tid != 0 || std::isnan(t.dur_s.error)) continue;
    const double e = std::abs(t.dur_s.error);
    ++s.count;
    s.mape += e;
    abs_diff += std::abs(t.dur_s.measured - t.dur_s.predicted);
    total += t.dur_s.predicted;
    if (e > s.max_abs_error) {
      s.max_abs_error = e;
      s.worst = describe(t.key);
    }
  }
  if (s.count) s.mape /= static_cast<double>(s.count);
  s.weighted_mape = total > 0 ? abs_diff / total : 0;

  for_union(breakdown(predicted), breakdown(measured), Breakdown{},
            [&](int pid, const Breakdown& p, const Breakdown& m) {
              r.ranks[pid] = {metric(p.compute_s, m.compute_s), metric(p.exposed_comm_s, m.exposed_comm_s),
                              metric(p.bubble_s, m.bubble_s)};
            });
  for_union(phase_compute(predicted), phase_compute(measured), 0.0,
            [&](const std::string& phase, double p, double m) { r.phase_compute_s[phase] = metric(p, m); });
  for_union(predicted.peak_memory_bytes, measured.peak_memory_bytes, kNaN,
            [&](int rank, double p, double m) { r.peak_memory_bytes[rank] = metric(p, m); });
  return r;
}

json report_json(const CompareReport& r) {
  json ranks = json::array(), memory = json::array(), phases = json::object(), tasks = json::array();
  for (const auto& [pid, d] : r.ranks)
    ranks.push_back({{"rank", pid},
                     {"compute_s", metric_json(d.compute_s)},
                     {"exposed_comm_s", metric_json(d.exposed_comm_s)},
                     {"bubble_s", metric_json(d.bubble_s)}});
  for (const auto& [rank, m] : r.peak_memory_bytes)
    memory.push_back({{"rank", rank}, {"peak_memory_bytes", metric_json(m)}});
  for (const auto& [phase, m] : r.phase_compute_s) phases[phase] = metric_json(m);
  for (const auto& t : r.tasks)
    tasks.push_back({{"rank", t.key.pid},
                     {"stream", t.key.tid},
                     {"name", t.key.name},
                     {"phase", t.key.phase},
                     {"layer", t.key.layer},
                     {"microbatch", t.key.microbatch},
                     {"occurrence", t.key.occurrence},
                     {"predicted_s", t.dur_s.predicted},
                     {"measured_s", t.dur_s.measured},
                     {"error", t.dur_s.error}});
  const TaskStats& s = r.compute_tasks;
  return {{"schema", "dtsim.compare"},
          {"schema_version", 1},
          {"predicted", r.predicted_dir},
          {"measured", r.measured_dir},
          {"error_definition", "measured / predicted - 1"},
          {"iteration_time_s", metric_json(r.iteration_time_s)},
          {"compute_tasks",
           {{"count", s.count},
            {"mape", s.mape},
            {"weighted_mape", s.weighted_mape},
            {"max_abs_error", s.max_abs_error},
            {"worst", s.worst}}},
          {"matched_tasks", r.tasks.size()},
          {"only_predicted", unmatched_json(r.only_predicted)},
          {"only_measured", unmatched_json(r.only_measured)},
          {"ranks", ranks},
          {"phase_compute_s", phases},
          {"peak_memory", memory},
          {"tasks", tasks}};
}

std::string report_text(const CompareReport& r, std::size_t worst_tasks) {
  const auto row = [](const Metric& m, const char* fmt, double scale) {
    const auto value = [&](double v) { return std::isnan(v) ? strf("%10s", "-") : strf(fmt, v * scale); };
    return value(m.predicted) + value(m.measured) + strf("%10s", percent(m.error).c_str());
  };
  const TaskStats& s = r.compute_tasks;
  std::string out = std::string("dtsim compare: predicted ") + r.predicted_dir + " vs measured " + r.measured_dir +
                    " (error = measured / predicted - 1)\n";
  out += strf("tasks: %zu matched, %zu only predicted, %zu only measured\n", r.tasks.size(), r.only_predicted.count,
              r.only_measured.count);
  for (const auto& name : r.only_predicted.first) out += strf("  only predicted: %s\n", name.c_str());
  for (const auto& name : r.only_measured.first) out += strf("  only measured:  %s\n", name.c_str());
  out += strf("compute tasks: %zu matched, MAPE %.2f%%, duration-weighted %.2f%%, max |error| %.2f%%", s.count,
              100 * s.mape, 100 * s.weighted_mape, 100 * s.max_abs_error);
  out += s.worst.empty() ? std::string("\n") : std::string(" (") + s.worst + ")\n";

  out += strf("\n%-18s%10s%10s%10s\n", "", "predicted", "measured", "error");
  out += strf("%-18s", "iteration time s") + row(r.iteration_time_s, "%10.6f", 1) + "\n";

  out += strf("\n%-6s%30s%30s%30s\n%-6s", "rank", "compute s", "exposed comm s", "bubble s", "");
  for (int i = 0; i < 3; ++i) out += strf("%10s%10s%10s", "predicted", "measured", "error");
  for (const auto& [pid, d] : r.ranks)
    out += strf("\n%4d  ", pid) + row(d.compute_s, "%10.6f", 1) + row(d.exposed_comm_s, "%10.6f", 1) +
           row(d.bubble_s, "%10.6f", 1);

  out += strf("\n\n%-18s%10s%10s%10s\n", "compute s, phase", "predicted", "measured", "error");
  for (const auto& [phase, m] : r.phase_compute_s) out += strf("  %-16s", phase.c_str()) + row(m, "%10.6f", 1) + "\n";

  out += strf("\n%-18s%10s%10s%10s\n", "peak memory GB", "predicted", "measured", "error");
  for (const auto& [rank, m] : r.peak_memory_bytes) out += strf("  rank %-11d", rank) + row(m, "%10.2f", 1e-9) + "\n";

  std::vector<const TaskDiff*> worst;
  for (const auto& t : r.tasks)
    if (t.dur_s.measured != t.dur_s.predicted) worst.push_back(&t);
  const auto diff = [](const TaskDiff* t) { return std::abs(t->dur_s.measured - t->dur_s.predicted); };
  std::stable_sort(worst.begin(), worst.end(), [&](const auto* a, const auto* b) { return diff(a) > diff(b); });
  worst.resize(std::min(worst.size(), worst_tasks));
  out += strf("\nworst tasks (largest |measured - predicted|)%s\n", worst.empty() ? ": none differ" : "");
  if (!worst.empty()) out += strf("%14s%14s%10s  %s\n", "predicted us", "measured us", "error", "task");
  for (const auto* t : worst)
    out += strf("%14.3f%14.3f%10s  %s\n", t->dur_s.predicted * 1e6, t->dur_s.measured * 1e6,
                percent(t->dur_s.error).c_str(), describe(t->key).c_str());
  return out;
}

std::string compare_trace_json(const Timeline& predicted, const Timeline& measured) {
  const auto pi = index(predicted), mi = index(measured);
  ChromeTraceWriter w;
  w.set_metadata_json(
      R"({"schema":"dtsim.compare_trace","schema_version":1,"note":"pid N: predicted rank N, pid 10000+N: measured rank N; each side starts at 0; error = measured / predicted - 1"})");
  // One side: process and thread names, then its events (in key order) with the other side's duration.
  const auto side = [&w](const std::map<TaskKey, const TimelineEvent*>& own,
                         const std::map<TaskKey, const TimelineEvent*>& other, bool is_predicted) {
    const int offset = is_predicted ? 0 : kMeasuredPid;
    const char* label = is_predicted ? "predicted rank " : "measured rank ";
    std::set<std::pair<int, int>> streams;
    double origin = std::numeric_limits<double>::infinity();
    for (const auto& [key, e] : own) {
      streams.emplace(e->pid, e->tid);
      origin = std::min(origin, e->ts_us);
    }
    int named = -1;
    for (const auto& [pid, tid] : streams) {
      if (pid != named)
        w.process_name(offset + pid, std::string(label) + std::to_string(pid), 2 * pid + (is_predicted ? 0 : 1));
      named = pid;
      w.thread_name(offset + pid, tid, stream_name(tid));
    }
    std::vector<TraceArg> args;
    for (const auto& [key, e] : own) {
      args.clear();
      if (!e->phase.empty()) args.push_back(TraceArg::text("phase", e->phase));
      if (e->layer >= 0) args.push_back(TraceArg::integer("layer", e->layer));
      if (e->microbatch >= 0) args.push_back(TraceArg::integer("microbatch", e->microbatch));
      if (const auto it = other.find(key); it != other.end()) {
        const double o = it->second->dur_us;
        args.push_back(TraceArg::real(is_predicted ? "measured_dur_us" : "predicted_dur_us", o));
        args.push_back(TraceArg::real("error", is_predicted ? metric(e->dur_us, o).error : metric(o, e->dur_us).error));
      } else {
        args.push_back(TraceArg::text("unmatched", is_predicted ? "not measured" : "not predicted"));
      }
      w.complete(offset + e->pid, e->tid, e->name, e->cat, std::llround((e->ts_us - origin) * 1e3),
                 std::llround(e->dur_us * 1e3), args);
    }
  };
  side(pi, mi, true);
  side(mi, pi, false);
  return w.finish();
}

}  // namespace dtsim::validate
