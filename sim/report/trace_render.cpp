#include "sim/report/trace_render.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "sim/model/exchange_timing.hpp"
#include "sim/model/platform.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/perfetto_trace.hpp"
#include "traces/units.hpp"

namespace dtsim::sim {

namespace {

std::string process_label(const SimRank& sr) {
  std::string name = "rank " + std::to_string(sr.global_rank) + " (tp " + std::to_string(sr.coord.tp) + ", dp " +
                     std::to_string(sr.coord.dp) + ", pp " + std::to_string(sr.coord.pp) + ")";
  if (sr.class_size > 1) name += " x" + std::to_string(sr.class_size);
  return name;
}

const char* path_name(Path p) {
  return p == Path::INTRA_NODE   ? "nvswitch"
         : p == Path::INTER_NODE ? "nic"
         : p == Path::CROSS_LEAF ? "nic+spine"
                                 : "nic+pod+core";
}

std::string task_name(const TaskGraph& g, std::int32_t id) {
  const Task& t = g.tasks()[static_cast<std::size_t>(id)];
  std::string name = g.names()[t.name];
  // A start-up latency; an all-to-all member's task (Exchange) is the whole all-to-all of that member.
  if (t.kind == TaskKind::DELAY && g.exchange_of(id).first < 0) name += " (latency)";
  return name;
}

/// The layer and micro-batch arguments every slice carries (when set).
void add_position_args(std::vector<TraceArg>& args, int layer, int microbatch) {
  if (layer >= 0) args.push_back(TraceArg::integer("layer", layer));
  if (microbatch >= 0) args.push_back(TraceArg::integer("microbatch", microbatch));
}

/// Calls f(span, start_s) for every host span (TaskGraph::host_spans) in order: each starts where its rank's
/// previous span ended, the first at 0.
template <class F>
void for_each_host_span(const TaskGraph& g, std::size_t ranks, F&& f) {
  std::vector<double> clock(ranks, 0.0);
  for (const HostSpan& h : g.host_spans()) {
    auto& c = clock[static_cast<std::size_t>(h.rank)];
    f(h, c);
    c = h.end_s;
  }
}

constexpr const char* kLinksProcess = "links (load in GB/s, flows at their average rate)";

/// The load of each link in `links` over time: (time ns, GB/s) at every instant it changes, each flow counted at
/// its average rate (bytes / duration) from its start to its end. Links no flow of positive duration crossed get
/// no samples.
std::vector<std::vector<std::pair<std::int64_t, double>>> link_loads(const Inputs& in, const Lowered& low,
                                                                     const EngineResult& res,
                                                                     const std::vector<int>& links) {
  std::vector<std::vector<std::pair<std::int64_t, double>>> out(links.size());
  if (links.empty()) return out;
  const auto [gpus, share] = platform_ranks(low, *in.plan, in.options->first_gpu);
  const Platform pf = describe_platform(*in.cluster, *in.calibration, gpus, share);
  std::vector<int> slot(pf.links.size(), -1);  // platform link -> position in `links`
  for (std::size_t k = 0; k < links.size(); ++k) slot[links[k]] = static_cast<int>(k);
  struct Change {
    std::int64_t t_ns;
    double rate;
  };
  std::vector<std::vector<Change>> changes(links.size());
  const auto& tasks = low.graph.tasks();
  auto add = [&](const Task& t, double start_s, double end_s, const std::vector<int>& route) {
    if (end_s <= start_s) return;
    const double rate = t.bytes / (end_s - start_s);
    for (int l : route) {
      if (slot[l] < 0) continue;
      const double load = rate * pf.links[l].multiplicity;  // the folded copies' too
      changes[slot[l]].push_back({units::s_to_ns(start_s), load});
      changes[slot[l]].push_back({units::s_to_ns(end_s), -load});
    }
  };
  for (std::size_t i = 0; i < tasks.size(); ++i)
    if (tasks[i].kind == TaskKind::FLOW) add(tasks[i], res.start_s[i], res.end_s[i], pf.route(tasks[i]));
  // The pieces of the all-to-alls lowered as one task per member, timed as the analytic engine times them.
  std::vector<int> route;
  std::vector<double> starts;
  for (const Exchange& x : low.graph.exchanges()) {
    starts.clear();
    for (auto m : x.tasks) starts.push_back(res.start_s[static_cast<std::size_t>(m)]);
    time_exchange(
        x, tasks, pf, starts,
        [&](int, int, const Task& f, double start, double end, const std::vector<int>& r) { add(f, start, end, r); },
        &route, low.graph.exchange_receive_bound);
  }
  for (std::size_t k = 0; k < links.size(); ++k) {
    auto& ch = changes[k];
    std::stable_sort(ch.begin(), ch.end(), [](const Change& a, const Change& b) { return a.t_ns < b.t_ns; });
    double load = 0;
    for (std::size_t j = 0; j < ch.size(); ++j) {
      load += ch[j].rate;
      if (j + 1 < ch.size() && ch[j + 1].t_ns == ch[j].t_ns) continue;  // one sample per instant
      out[k].emplace_back(ch[j].t_ns, std::max(0.0, load) / units::kGB);
    }
    std::vector<Change>().swap(ch);
  }
  return out;
}

}  // namespace

std::string trace_json(const Inputs& in, const Lowered& low, const EngineResult& res, const Report& rep,
                       const TraceSelection& sel) {
  ChromeTraceWriter w;
  std::vector<char> keep(low.ranks.size(), 0);
  for (int i : sel.sim_ranks) keep[i] = 1;
  const bool copies = low.graph.uses_host_copies();
  for (const auto& rr : rep.ranks) {
    if (!keep[rr.sim_index]) continue;
    const int pid = rr.global_rank;
    w.process_name(pid, process_label(low.ranks[rr.sim_index]), pid);
    for (int s = 0; s < kNumStreams; ++s)
      if (copies || !is_host_copy(static_cast<Stream>(s))) w.thread_name(pid, s, stream_name(static_cast<Stream>(s)));
  }
  const auto& tasks = low.graph.tasks();
  std::vector<TraceArg> args;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const Task& t = tasks[i];
    if (t.kind == TaskKind::JOIN || !keep[t.rank]) continue;
    const int pid = low.ranks[t.rank].global_rank;
    args.clear();
    args.push_back(TraceArg::text("phase", phase_name(t.phase)));
    add_position_args(args, t.layer, t.microbatch);
    if (t.kind == TaskKind::COMPUTE) args.push_back(TraceArg::real("flops", t.flops));
    if (t.kind == TaskKind::FLOW) {
      args.push_back(TraceArg::real("bytes", t.bytes));
      args.push_back(TraceArg::text("path", path_name(t.path)));
      args.push_back(TraceArg::integer("to_rank", t.mirror ? -1 : low.ranks[t.peer].global_rank));
    }
    const auto s_ns = units::s_to_ns(res.start_s[i]);
    w.complete(pid, static_cast<int>(t.stream), task_name(low.graph, static_cast<std::int32_t>(i)),
               stream_name(t.stream), s_ns, units::s_to_ns(res.end_s[i]) - s_ns, args);
  }
  for_each_host_span(low.graph, low.ranks.size(), [&](const HostSpan& h, double start_s) {
    if (!keep[h.rank]) return;
    args.clear();
    args.push_back(TraceArg::text("phase", phase_name(h.phase)));
    add_position_args(args, h.layer, h.microbatch);
    const auto s_ns = units::s_to_ns(start_s);
    w.complete(low.ranks[h.rank].global_rank, static_cast<int>(Stream::HOST), low.graph.names()[h.name],
               stream_name(Stream::HOST), s_ns, units::s_to_ns(h.end_s) - s_ns, args);
  });
  std::vector<std::pair<std::string, double>> series;
  for (const auto& rr : rep.ranks) {
    if (!keep[rr.sim_index]) continue;
    for (const auto& [t, cats] : rr.memory_timeline) {
      series.clear();
      for (int c = 0; c < kNumMemCategories; ++c)
        series.emplace_back(mem_category_name(static_cast<MemCategory>(c)), cats[c] / units::kGB);
      w.counter(rr.global_rank, "memory (GB)", units::s_to_ns(t), series);
    }
  }
  if (sel.link_tracks && !res.link_stats.empty()) {
    const auto loads = link_loads(in, low, res, sel.links);
    const int links_pid = 1 << 30;  // one process holding every link's track
    w.process_name(links_pid, kLinksProcess, links_pid);
    for (std::size_t k = 0; k < sel.links.size(); ++k)
      for (const auto& [t_ns, gbps] : loads[k])
        w.counter(links_pid, res.link_stats[sel.links[k]].name, t_ns, "GB/s", gbps);
  }
  nlohmann::json meta = {{"schema", "dtsim.trace"},
                         {"schema_version", 1},
                         {"dtsim_version", DTSIM_VERSION},
                         {"model", in.model->name},
                         {"cluster", in.cluster->name},
                         {"iteration_time_s", rep.iteration_time_s},
                         {"note", "one process per simulated rank; 'xN' = stands for N symmetric ranks"},
                         {"selection", trace_selection_json(sel, low, res)}};
  w.set_metadata_json(meta.dump());
  return w.finish();
}

std::string perfetto_trace(const Inputs& in, const Lowered& low, const EngineResult& res, const Report& rep,
                           bool link_tracks) {
  PerfettoTraceWriter w;
  // About 60 bytes per slice (begin with interned name, categories and arguments; end), counters aside.
  w.reserve((low.graph.size() + low.graph.host_spans().size()) * 60);
  const int n = static_cast<int>(low.ranks.size());
  const int world = static_cast<int>(low.sim_index_of.size());
  // pid = global rank + 1 (Perfetto reserves pid 0); the links process next; thread ids after every pid.
  std::vector<std::uint64_t> process(n);
  for (int r = 0; r < n; ++r)
    process[r] = w.process_track(low.ranks[r].global_rank + 1, process_label(low.ranks[r]), low.ranks[r].global_rank);
  int next_tid = world + 2;

  // Tasks per (rank, stream), each track's slices in time order (longer first at equal starts, so that a slice
  // inside another comes after it), on the first lane where they nest; a slice that would overlap the open slice
  // of every lane without nesting opens a new lane (a thread of its own).
  const auto& tasks = low.graph.tasks();
  // Host spans kept outside the graph (TaskGraph::host_spans) join their rank's host track.
  std::vector<std::vector<std::int32_t>> per_track(static_cast<std::size_t>(n) * kNumStreams);
  for (std::size_t i = 0; i < tasks.size(); ++i)
    if (tasks[i].kind != TaskKind::JOIN)
      per_track[static_cast<std::size_t>(tasks[i].rank) * kNumStreams + static_cast<int>(tasks[i].stream)].push_back(
          static_cast<std::int32_t>(i));
  const auto& host = low.graph.host_spans();
  std::vector<std::int64_t> host_start_ns(host.size());
  {
    std::size_t k = 0;
    for_each_host_span(low.graph, low.ranks.size(), [&](const HostSpan& h, double start_s) {
      host_start_ns[k] = units::s_to_ns(start_s);
      per_track[static_cast<std::size_t>(h.rank) * kNumStreams + static_cast<int>(Stream::HOST)].push_back(
          -static_cast<std::int32_t>(++k));
    });
  }
  struct Slice {
    std::int64_t start, end;
    std::int32_t task;  ///< a task, or host span -task - 1
  };
  struct Lane {
    std::uint64_t uuid;
    std::vector<std::int64_t> open;  // ends of the open slices, innermost last
  };
  std::vector<Slice> slices;
  std::vector<Lane> lanes;
  std::vector<std::string> cats;
  std::vector<TraceArg> args;
  for (int r = 0; r < n; ++r) {
    const int pid = low.ranks[r].global_rank + 1;
    for (int s = 0; s < kNumStreams; ++s) {
      auto& ids = per_track[static_cast<std::size_t>(r) * kNumStreams + s];
      if (ids.empty()) continue;
      slices.clear();
      for (std::int32_t i : ids)
        slices.push_back(i >= 0 ? Slice{units::s_to_ns(res.start_s[i]), units::s_to_ns(res.end_s[i]), i}
                                : Slice{host_start_ns[-i - 1], units::s_to_ns(host[-i - 1].end_s), i});
      std::vector<std::int32_t>().swap(ids);
      std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
        return a.start != b.start ? a.start < b.start : a.end != b.end ? a.end > b.end : a.task < b.task;
      });
      lanes.clear();
      const std::string stream = stream_name(static_cast<Stream>(s));
      for (const Slice& sl : slices) {
        std::size_t k = 0;
        for (; k < lanes.size(); ++k) {
          auto& open = lanes[k].open;
          while (!open.empty() && open.back() <= sl.start) {
            w.slice_end(lanes[k].uuid, open.back());
            open.pop_back();
          }
          if (open.empty() || open.back() >= sl.end) break;
        }
        if (k == lanes.size())
          lanes.push_back(
              {w.thread_track(process[r], pid, next_tid++, k == 0 ? stream : stream + " " + std::to_string(k + 1),
                              s * 1000 + static_cast<int>(k)),
               {}});
        args.clear();
        if (sl.task < 0) {  // a host span: name, phase and position only
          const HostSpan& h = host[-sl.task - 1];
          cats.assign({stream, phase_name(h.phase)});
          add_position_args(args, h.layer, h.microbatch);
          w.slice_begin(lanes[k].uuid, sl.start, low.graph.names()[h.name], cats, args);
          lanes[k].open.push_back(sl.end);
          continue;
        }
        const Task& t = tasks[sl.task];
        cats.assign({stream, phase_name(t.phase)});
        add_position_args(args, t.layer, t.microbatch);
        // FLOPs and bytes as integers: a varint is shorter than a double.
        if (t.kind == TaskKind::COMPUTE) args.push_back(TraceArg::integer("flops", std::llround(t.flops)));
        if (t.kind == TaskKind::FLOW) {
          cats.emplace_back(path_name(t.path));
          args.push_back(TraceArg::integer("bytes", std::llround(t.bytes)));
          args.push_back(TraceArg::integer("to_rank", t.mirror ? -1 : low.ranks[t.peer].global_rank));
        }
        w.slice_begin(lanes[k].uuid, sl.start, task_name(low.graph, sl.task), cats, args);
        lanes[k].open.push_back(sl.end);
      }
      for (auto& lane : lanes)
        while (!lane.open.empty()) {
          w.slice_end(lane.uuid, lane.open.back());
          lane.open.pop_back();
        }
    }
  }

  // Memory: per rank, one counter track (bytes) per category it ever uses and the total; a value on every change.
  for (const auto& rr : rep.ranks) {
    std::array<bool, kNumMemCategories> used{};
    for (const auto& [t, cats_bytes] : rr.memory_timeline)
      for (int c = 0; c < kNumMemCategories; ++c) used[c] = used[c] || cats_bytes[c] != 0;
    std::array<std::uint64_t, kNumMemCategories + 1> track{};
    for (int c = 0; c < kNumMemCategories; ++c)
      if (used[c])
        track[c] = w.counter_track(process[rr.sim_index],
                                   std::string("memory ") + mem_category_name(static_cast<MemCategory>(c)),
                                   PerfettoTraceWriter::CounterUnit::BYTES);
    track[kNumMemCategories] =
        w.counter_track(process[rr.sim_index], "memory total", PerfettoTraceWriter::CounterUnit::BYTES);
    std::array<std::int64_t, kNumMemCategories + 1> last;
    last.fill(-1);
    for (const auto& [t, cats_bytes] : rr.memory_timeline) {
      const std::int64_t ts = units::s_to_ns(t);
      std::int64_t total = 0;
      for (int c = 0; c <= kNumMemCategories; ++c) {
        std::int64_t v = 0;
        if (c < kNumMemCategories) {
          v = std::llround(cats_bytes[c]);
          total += v;
          if (!used[c]) continue;
        } else {
          v = total;
        }
        if (v != last[c]) w.counter(track[c], ts, v);
        last[c] = v;
      }
    }
  }

  if (link_tracks && !res.link_stats.empty()) {
    const TraceSelection all = select_all(low, res, true);
    const auto loads = link_loads(in, low, res, all.links);
    const std::uint64_t links_process = w.process_track(world + 1, kLinksProcess, world + 1);
    for (std::size_t k = 0; k < all.links.size(); ++k) {
      if (loads[k].empty()) continue;
      const std::uint64_t track =
          w.counter_track(links_process, res.link_stats[all.links[k]].name, PerfettoTraceWriter::CounterUnit::NONE);
      for (const auto& [t_ns, gbps] : loads[k]) w.counter(track, t_ns, gbps);
    }
  }
  return w.finish();
}

}  // namespace dtsim::sim
