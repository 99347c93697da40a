// trace.pftrace (traces/perfetto_trace, sim/report/trace_render): the writer's framing (a Trace of length-delimited
// packets), interning (each name sent once, then referred to by id) and sequence flags; and a simulated run written
// whole and decoded back with the generated classes of traces/perfetto_trace.proto: one process track per simulated
// rank, one slice per task that is not a join with the task's times, slices on every thread properly nested,
// counter values only on counter tracks.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "perfetto_trace.pb.h"
#include "sim/report/trace_render.hpp"
#include "sim/simulate.hpp"
#include "traces/perfetto_trace.hpp"
#include "traces/units.hpp"

using namespace dtsim;
namespace pp = perfetto::protos;

namespace {

pp::Trace decode(const std::string& bytes) {
  pp::Trace trace;
  EXPECT_TRUE(trace.ParseFromString(bytes));
  return trace;
}

// Reads a trace the way Perfetto's importer does: interned names per sequence, tracks by uuid, and per track a
// stack of open slices (packets in file order, which the writer keeps in time order per track).
struct Decoded {
  struct Slice {
    std::string name;
    std::int64_t start = 0, end = 0;
    std::uint64_t track = 0;
    std::vector<std::string> categories;
  };
  std::map<std::uint64_t, pp::TrackDescriptor> tracks;
  std::vector<Slice> slices;
  std::map<std::uint64_t, int> counter_values;  // per counter track
  std::vector<std::string> errors;

  explicit Decoded(const pp::Trace& trace) {
    std::map<std::uint64_t, std::string> names, categories;
    std::map<std::uint64_t, std::vector<Slice>> open;
    for (const auto& p : trace.packet()) {
      if (p.trusted_packet_sequence_id() != 1) errors.push_back("packet off sequence 1");
      for (const auto& n : p.interned_data().event_names())
        if (!names.emplace(n.iid(), n.name()).second) errors.push_back("name interned twice: " + n.name());
      for (const auto& c : p.interned_data().event_categories()) categories.emplace(c.iid(), c.name());
      if (p.has_track_descriptor()) {
        if (!tracks.emplace(p.track_descriptor().uuid(), p.track_descriptor()).second) errors.push_back("uuid reused");
        continue;
      }
      if (!p.has_track_event()) continue;
      const auto& ev = p.track_event();
      const auto it = tracks.find(ev.track_uuid());
      if (it == tracks.end()) {
        errors.push_back("event on an undeclared track");
        continue;
      }
      const auto ts = static_cast<std::int64_t>(p.timestamp());
      if (ev.type() == pp::TrackEvent::TYPE_COUNTER) {
        if (!it->second.has_counter()) errors.push_back("counter value on a slice track");
        ++counter_values[ev.track_uuid()];
      } else if (ev.type() == pp::TrackEvent::TYPE_SLICE_BEGIN) {
        if (!it->second.has_thread()) errors.push_back("slice on a track that is not a thread");
        if (!(p.sequence_flags() & pp::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE))
          errors.push_back("interned name without SEQ_NEEDS_INCREMENTAL_STATE");
        auto& stack = open[ev.track_uuid()];
        if (!stack.empty() && ts < stack.back().start) errors.push_back("slice begins before its parent");
        Slice s;
        s.name = names.count(ev.name_iid()) ? names[ev.name_iid()] : "?";
        s.start = ts;
        s.track = ev.track_uuid();
        for (auto c : ev.category_iids()) s.categories.push_back(categories[c]);
        stack.push_back(s);
      } else if (ev.type() == pp::TrackEvent::TYPE_SLICE_END) {
        auto& stack = open[ev.track_uuid()];
        if (stack.empty()) {
          errors.push_back("end without a begin");
          continue;
        }
        Slice s = stack.back();
        stack.pop_back();
        s.end = ts;
        if (s.end < s.start) errors.push_back("slice ends before it begins: " + s.name);
        if (!stack.empty() && stack.back().start > s.start) errors.push_back("child begins before its parent");
        slices.push_back(s);
      }
    }
    for (const auto& [uuid, stack] : open)
      if (!stack.empty()) errors.push_back("slice left open on track " + std::to_string(uuid));
    // A parent must end after its children: check on the closed slices, per track, in begin order.
    std::map<std::uint64_t, std::vector<const Slice*>> by_track;
    for (const auto& s : slices) by_track[s.track].push_back(&s);
    for (auto& [uuid, v] : by_track) {
      std::sort(v.begin(), v.end(), [](const Slice* a, const Slice* b) {
        return a->start != b->start ? a->start < b->start : a->end > b->end;
      });
      std::vector<std::int64_t> ends;
      for (const Slice* s : v) {
        while (!ends.empty() && ends.back() <= s->start) ends.pop_back();
        if (!ends.empty() && s->end > ends.back()) errors.push_back("slices overlap without nesting: " + s->name);
        ends.push_back(s->end);
      }
    }
  }
  int count(bool (pp::TrackDescriptor::*has)() const) const {
    int n = 0;
    for (const auto& [uuid, t] : tracks) n += (t.*has)() ? 1 : 0;
    return n;
  }
};

}  // namespace

TEST(PerfettoWriter, FramesInternsAndFlagsPackets) {
  PerfettoTraceWriter w;
  const auto proc = w.process_track(7, "rank 6", 6);
  const auto thread = w.thread_track(proc, 7, 100, "compute", 0);
  const auto mem = w.counter_track(proc, "memory total", PerfettoTraceWriter::CounterUnit::BYTES);
  const std::string long_name(300, 'x');  // a packet over 127 bytes: a two-byte length prefix
  w.slice_begin(thread, 10, long_name, {"compute", "forward"}, {TraceArg::integer("layer", 3)});
  w.slice_end(thread, 20);
  w.slice_begin(thread, 30, long_name, {"compute", "backward"}, {TraceArg::real("flops", 1.5e12)});
  w.slice_end(thread, 40);
  w.counter(mem, 15, std::int64_t{1} << 40);
  w.counter(mem, 25, 2.5);
  EXPECT_EQ(w.packet_count(), 9u);
  const std::string bytes = w.finish();
  ASSERT_EQ(static_cast<unsigned char>(bytes[0]), 0x0au);  // field 1, length-delimited
  const pp::Trace trace = decode(bytes);
  ASSERT_EQ(trace.packet_size(), 9);
  EXPECT_EQ(trace.packet(0).sequence_flags(),
            static_cast<std::uint32_t>(pp::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED));
  EXPECT_EQ(trace.packet(0).track_descriptor().process().pid(), 7);
  EXPECT_EQ(trace.packet(0).track_descriptor().process().process_name(), "rank 6");
  EXPECT_EQ(trace.packet(1).track_descriptor().parent_uuid(), proc);
  EXPECT_EQ(trace.packet(1).track_descriptor().thread().tid(), 100);
  EXPECT_EQ(trace.packet(2).track_descriptor().counter().unit(), pp::CounterDescriptor::UNIT_SIZE_BYTES);
  // The long name is interned once, in the first packet that uses it; "compute" likewise.
  const auto& first = trace.packet(3);
  ASSERT_EQ(first.interned_data().event_names_size(), 1);
  EXPECT_EQ(first.interned_data().event_names(0).name(), long_name);
  EXPECT_EQ(first.interned_data().event_categories_size(), 2);
  EXPECT_EQ(first.track_event().debug_annotations(0).int_value(), 3);
  const auto& second = trace.packet(5);
  EXPECT_EQ(second.interned_data().event_names_size(), 0);
  EXPECT_EQ(second.track_event().name_iid(), first.track_event().name_iid());
  ASSERT_EQ(second.interned_data().event_categories_size(), 1);  // only "backward" is new
  EXPECT_EQ(second.interned_data().event_categories(0).name(), "backward");
  EXPECT_EQ(second.track_event().category_iids(0), first.track_event().category_iids(0));
  EXPECT_EQ(second.track_event().debug_annotations(0).double_value(), 1.5e12);
  EXPECT_EQ(trace.packet(7).track_event().counter_value(), std::int64_t{1} << 40);
  EXPECT_EQ(trace.packet(8).track_event().double_counter_value(), 2.5);
  const Decoded d(trace);
  EXPECT_TRUE(d.errors.empty()) << d.errors.front();
  ASSERT_EQ(d.slices.size(), 2u);
  EXPECT_EQ(d.slices[1].categories, (std::vector<std::string>{"compute", "backward"}));
}

namespace {

// A simulated run decoded back: every simulated rank, every task but joins, with its times.
void check_run(const ParallelPlan& plan, const std::string& cluster_name, int channels, bool link_tracks,
               int* extra_lanes = nullptr) {
  TransformerSpec model = model_preset("gpt3-1.3b");
  model.num_layers = 4;
  ClusterSpec cluster = load_cluster(cluster_name);
  Calibration cal = default_calibration(cluster.gpu.name);
  sim::SimOptions opt;
  opt.fold = sim::FoldMode::NONE;
  opt.channels = channels;
  const sim::Inputs in{&model, &cluster, &plan, &cal, &opt};
  const sim::Simulation s = sim::simulate(in);
  const Decoded d(decode(sim::perfetto_trace(in, s.lowered, s.engine, s.report, link_tracks)));
  for (const auto& e : d.errors) ADD_FAILURE() << e;

  const int n = static_cast<int>(s.lowered.ranks.size());
  ASSERT_EQ(n, plan.world_size());
  EXPECT_EQ(d.count(&pp::TrackDescriptor::has_process), n + (link_tracks ? 1 : 0));
  // Tasks by (rank, stream): each stream with tasks has at least one thread; the slices are the tasks.
  std::multiset<std::tuple<std::string, std::int64_t, std::int64_t>> expected, got;
  std::set<std::pair<int, int>> streams;
  const auto& tasks = s.lowered.graph.tasks();
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].kind == sim::TaskKind::JOIN) continue;
    std::string name = s.lowered.graph.names()[tasks[i].name];
    if (tasks[i].kind == sim::TaskKind::DELAY) name += " (latency)";
    expected.emplace(name, units::s_to_ns(s.engine.start_s[i]), units::s_to_ns(s.engine.end_s[i]));
    streams.emplace(tasks[i].rank, static_cast<int>(tasks[i].stream));
  }
  // The host's issue spans (outside the graph): back to back per rank from t = 0, on the host track.
  std::vector<double> host_clock(s.lowered.ranks.size(), 0.0);
  for (const auto& h : s.lowered.graph.host_spans()) {
    expected.emplace(s.lowered.graph.names()[h.name], units::s_to_ns(host_clock[h.rank]), units::s_to_ns(h.end_s));
    host_clock[h.rank] = h.end_s;
    streams.emplace(h.rank, static_cast<int>(sim::Stream::HOST));
  }
  for (const auto& sl : d.slices) got.emplace(sl.name, sl.start, sl.end);
  EXPECT_EQ(d.slices.size(), expected.size());
  EXPECT_TRUE(got == expected);
  const int threads = d.count(&pp::TrackDescriptor::has_thread);
  EXPECT_GE(threads, static_cast<int>(streams.size()));
  if (extra_lanes) *extra_lanes = threads - static_cast<int>(streams.size());
  // Memory: a total per rank, with values; links: one counter track per used link.
  int memory_totals = 0, link_counters = 0;
  for (const auto& [uuid, t] : d.tracks) {
    if (!t.has_counter()) continue;
    if (t.name() == "memory total") {
      ++memory_totals;
      EXPECT_GT(d.counter_values.count(uuid), 0u);
    } else if (t.name().rfind("memory ", 0) != 0) {
      ++link_counters;
    }
  }
  EXPECT_EQ(memory_totals, n);
  int used = 0;
  for (const auto& l : s.engine.link_stats) used += l.bytes > 0 ? 1 : 0;
  if (link_tracks) EXPECT_EQ(link_counters, used);
  else EXPECT_EQ(link_counters, 0);
}

ParallelPlan plan_of(int tp, int pp, int dp, int gbs) {
  ParallelPlan plan;
  plan.tp = tp;
  plan.pp = pp;
  plan.dp = dp;
  plan.micro_batch_size = 1;
  plan.global_batch_size = gbs;
  return plan;
}

}  // namespace

TEST(PerfettoTrace, EveryTaskOfAnUnfoldedRunIsOneSlice) { check_run(plan_of(2, 2, 4, 8), "dgx-a100:16", 1, true); }

TEST(PerfettoTrace, OverlappingSlicesGoToExtraThreadsAndStillNest) {
  // One rank, tp stream: [0, 10] and [5, 15] overlap without nesting, so the second opens thread "tp-comm 2";
  // [2, 4] nests in [0, 10]; [12, 13] fits the first thread again after [0, 10] ended; [20, 20] has no
  // duration; the join is no slice.
  sim::Lowered low;
  low.ranks.resize(1);
  low.sim_index_of = {0};
  const std::vector<std::pair<double, double>> times = {{0, 10}, {5, 15}, {2, 4}, {12, 13}, {20, 20}, {1, 1}};
  sim::EngineResult res;
  for (std::size_t i = 0; i < times.size(); ++i) {
    sim::Task t;
    t.kind = i + 1 == times.size() ? sim::TaskKind::JOIN : sim::TaskKind::DELAY;
    t.stream = sim::Stream::TP;
    t.rank = 0;
    std::string name = "t";  // (not "t" + std::to_string(i): GCC 12's -Wrestrict false positive)
    name += std::to_string(i);
    t.name = low.graph.intern(name);
    low.graph.add(t);
    res.start_s.push_back(times[i].first * 1e-9);
    res.end_s.push_back(times[i].second * 1e-9);
  }
  sim::Report rep;
  rep.ranks.resize(1);
  const sim::Inputs in{nullptr, nullptr, nullptr, nullptr, nullptr};  // read only for link tracks
  const pp::Trace trace = decode(sim::perfetto_trace(in, low, res, rep, false));
  const Decoded d(trace);
  for (const auto& e : d.errors) ADD_FAILURE() << e;
  std::map<std::string, std::vector<std::string>> by_thread;  // thread name -> its slices
  for (const auto& sl : d.slices) by_thread[d.tracks.at(sl.track).thread().thread_name()].push_back(sl.name);
  for (auto& [name, v] : by_thread) std::sort(v.begin(), v.end());
  EXPECT_EQ(by_thread, (std::map<std::string, std::vector<std::string>>{
                           {"tp-comm", {"t0 (latency)", "t2 (latency)", "t3 (latency)", "t4 (latency)"}},
                           {"tp-comm 2", {"t1 (latency)"}}}));
  EXPECT_EQ(d.count(&pp::TrackDescriptor::has_process), 1);
  EXPECT_EQ(d.count(&pp::TrackDescriptor::has_thread), 2);
}
