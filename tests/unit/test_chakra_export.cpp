// Chakra export (dtsim simulate --export-chakra: sim/report/chakra_export.hpp, traces/chakra_et_writer.hpp) and
// the multi-rank replay of Chakra execution traces (sim/replay/et_replay.hpp, dtsim::replay): the export replays
// to the simulated iteration time (exactly before the writer's 1 us rounding, within 1% through the files), its
// nodes are the lowered graph's, and bad input is one error line.
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "dtsim/dtsim.hpp"
#include "sim/replay/et_replay.hpp"
#include "sim/report/chakra_export.hpp"
#include "sim/simulate.hpp"
#include "traces/archive.hpp"
#include "traces/chakra_et_writer.hpp"

namespace {

using namespace dtsim;
namespace fs = std::filesystem;

/// GPT-3 1.3B on `gpus` A100s, TP 2 PP 2 and the rest data parallel, micro-batches of 2.
Inputs small_inputs(int gpus = 8, int tp = 2, int pp = 2) {
  Inputs in = load_inputs({"gpt3-1.3b", "dgx-a100:" + std::to_string(gpus), "", ""});
  in.plan.tp = tp;
  in.plan.pp = pp;
  in.plan.dp = gpus / (tp * pp);
  in.plan.micro_batch_size = 2;
  in.plan.global_batch_size = 8 * in.plan.dp;
  return in;
}

struct TempDir {
  std::string path;
  explicit TempDir(const std::string& tag)
      : path((fs::path(::testing::TempDir()) / ("dtsim_chakra_" + tag + "_" + std::to_string(getpid()))).string()) {
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

/// Simulates with sim::simulate (every rank, collectives recorded) and exports from the graph before it is freed.
struct Exported {
  double iteration_time_s = 0;
  sim::ChakraExport ex;
  /// Per simulated rank: COMPUTE tasks, collectives it takes part in, transfers it sends and receives.
  std::vector<std::size_t> compute, collectives, sends, recvs;
};
Exported simulate_and_export(const Inputs& in, sim::NetworkMode net,
                             sim::CollectiveAlgorithm algo = sim::CollectiveAlgorithm::AUTO) {
  sim::SimOptions opt;
  opt.network = net;
  opt.fold = sim::FoldMode::NONE;
  opt.record_collectives = true;
  opt.collective_algorithm = algo;
  const sim::Inputs si{&in.model, &in.cluster, &in.plan, &in.calibration, &opt};
  Exported out;
  const auto s = sim::simulate(si, {}, [&](const sim::Lowered& low, const sim::EngineResult& res) {
    out.ex = sim::chakra_export(low, res);
    const std::size_t nr = low.ranks.size();
    out.compute.assign(nr, 0);
    out.collectives.assign(nr, 0);
    out.sends.assign(nr, 0);
    out.recvs.assign(nr, 0);
    std::vector<bool> in_coll(low.graph.size(), false);
    for (const auto& c : low.collectives) {
      for (auto t = c.first_task; t < c.end_task; ++t) in_coll[static_cast<std::size_t>(t)] = true;
      for (int m : c.members) ++out.collectives[static_cast<std::size_t>(m)];
    }
    for (std::size_t t = 0; t < low.graph.size(); ++t) {
      const auto& k = low.graph.tasks()[t];
      if (k.kind == sim::TaskKind::COMPUTE) ++out.compute[static_cast<std::size_t>(k.rank)];
      if (k.kind == sim::TaskKind::FLOW && !in_coll[t]) {
        ++out.sends[static_cast<std::size_t>(k.rank)];
        ++out.recvs[static_cast<std::size_t>(k.peer)];
      }
    }
  });
  out.iteration_time_s = s.report.iteration_time_s;
  return out;
}

double replayed_span_s(const sim::ChakraExport& ex) {
  sim::EtWorkload w;
  w.ranks = ex.ranks;
  w.groups = ex.groups;
  w.groups_source = "(in memory)";
  return static_cast<double>(sim::run_et_replay(w, sim::ReplayOptions{}).span_ns) * 1e-9;
}

// Before the writer rounds durations to 1 us, the export replays to the simulated iteration time up to the
// nanosecond rounding of each node on the critical path (2e-6 of the span: < 1 us): durations are measured from the
// time each node's dependencies are met.
TEST(ChakraExport, InMemoryReplayIsTheSimulationAnalytic) {
  const Exported e = simulate_and_export(small_inputs(), sim::NetworkMode::ANALYTIC);
  ASSERT_EQ(e.ex.ranks.size(), 8u);
  EXPECT_NEAR(replayed_span_s(e.ex), e.iteration_time_s, 2e-6 * e.iteration_time_s);
}

TEST(ChakraExport, InMemoryReplayIsTheSimulationFlowEngine) {
  const Exported e = simulate_and_export(small_inputs(16), sim::NetworkMode::FLOW);
  ASSERT_EQ(e.ex.ranks.size(), 16u);
  EXPECT_NEAR(replayed_span_s(e.ex), e.iteration_time_s, 2e-6 * e.iteration_time_s);
}

// Collectives across nodes (hierarchical all-reduce: three instances per all-reduce) and trees.
TEST(ChakraExport, InMemoryReplayIsTheSimulationHierarchicalAndTree) {
  const Inputs in = small_inputs(16, 2, 1);
  const Exported h = simulate_and_export(in, sim::NetworkMode::ANALYTIC, sim::CollectiveAlgorithm::HIERARCHICAL);
  EXPECT_NEAR(replayed_span_s(h.ex), h.iteration_time_s, 2e-6 * h.iteration_time_s);
  const Exported t = simulate_and_export(in, sim::NetworkMode::ANALYTIC, sim::CollectiveAlgorithm::TREE);
  EXPECT_NEAR(replayed_span_s(t.ex), t.iteration_time_s, 2e-6 * t.iteration_time_s);
  // The DP all-reduce over 8 ranks on two nodes: hierarchical gives node-local and cross-node groups.
  bool local = false, cross = false;
  for (const auto& [id, ranks] : h.ex.groups) {
    if (ranks.size() == 4) local = true;
    if (ranks.size() == 2 && ranks[1] - ranks[0] == 8) cross = true;
  }
  EXPECT_TRUE(local && cross);
}

// Per rank, the exported nodes are the lowered graph's: one GPU COMP_NODE per COMPUTE task, one COMM_COLL_NODE per
// collective instance the rank is a member of, a COMM_SEND_NODE / COMM_RECV_NODE per transfer it sends / receives;
// read back from the written bytes.
TEST(ChakraExport, NodeCountsAndTypesAreTheLoweredGraphs) {
  const Exported e = simulate_and_export(small_inputs(), sim::NetworkMode::ANALYTIC);
  std::size_t total_sends = 0, total_colls = 0;
  for (std::size_t r = 0; r < e.ex.ranks.size(); ++r) {
    const ExecGraph g = parse_chakra_et(chakra_et_bytes(e.ex.ranks[r]), "dtsim." + std::to_string(r) + ".et");
    EXPECT_EQ(g.rank, static_cast<int>(r));
    EXPECT_EQ(g.schema, "0.0.4");
    std::size_t gpu_comp = 0, cpu_comp = 0, coll = 0, send = 0, recv = 0, other = 0;
    ASSERT_EQ(g.nodes.size(), e.ex.ranks[r].nodes.size());
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      const auto& n = g.nodes[i];
      // Execution order in data_deps, which Chakra's feeder (ASTRA-sim) waits on; no ctrl_deps.
      EXPECT_TRUE(n.ctrl_deps.empty()) << n.name;
      EXPECT_EQ(n.data_deps, e.ex.ranks[r].nodes[i].data_deps) << n.name;
      // comm_size as Chakra defines it: an all-gather's is each rank's input.
      const auto& x = e.ex.ranks[r].nodes[i].comm;
      if (n.comm.op == "all-gather") {
        EXPECT_NEAR(n.comm.bytes, x.bytes / x.group_size, 1.0) << n.name;
      } else if (n.kind == ExecNodeKind::COMMUNICATION) {
        EXPECT_NEAR(n.comm.bytes, x.bytes, 1.0) << n.name;
      }
      if (n.kind == ExecNodeKind::COMPUTE) (n.gpu ? gpu_comp : cpu_comp)++;
      else if (n.kind == ExecNodeKind::COMMUNICATION && n.comm.op == "send") ++send;
      else if (n.kind == ExecNodeKind::COMMUNICATION && n.comm.op == "recv") ++recv;
      else if (n.kind == ExecNodeKind::COMMUNICATION) ++coll;
      else ++other;
      if (n.kind == ExecNodeKind::COMMUNICATION && n.comm.op != "send" && n.comm.op != "recv") {
        EXPECT_FALSE(n.comm.process_group.empty()) << n.name;
        EXPECT_GT(n.comm.bytes, 0) << n.name;
      }
      if (n.comm.op == "send") {
        EXPECT_EQ(n.comm_src, static_cast<std::int64_t>(r));
      }
      if (n.comm.op == "recv") {
        EXPECT_EQ(n.comm_dst, static_cast<std::int64_t>(r));
      }
    }
    EXPECT_EQ(gpu_comp, e.compute[r]) << "rank " << r;
    EXPECT_EQ(coll, e.collectives[r]) << "rank " << r;
    EXPECT_EQ(send, e.sends[r]) << "rank " << r;
    EXPECT_EQ(recv, e.recvs[r]) << "rank " << r;
    EXPECT_GT(cpu_comp, 0u) << "host issue nodes";  // the A100 calibration issues kernels from the host
    EXPECT_EQ(other, 0u);
    EXPECT_NO_THROW(topological_order(g));
    total_sends += send;
    total_colls += coll;
  }
  EXPECT_GT(total_sends, 0u);  // pp 2: pipeline transfers
  EXPECT_GT(total_colls, 0u);  // tp 2, dp 2
}

/// dtsim::simulate with the export, its files written as the CLI writes them, replayed with dtsim::replay.
struct RoundTrip {
  double simulated_s = 0, replayed_s = 0;
};
RoundTrip round_trip(const Inputs& in, const std::string& network, const std::string& dir) {
  SimulateOptions o;
  o.network = network;
  o.trace = false;
  o.export_chakra = true;
  const SimulateResult r = simulate(in, o);
  Files chakra;
  for (const auto& [name, content] : r.files)
    if (name.rfind("chakra/", 0) == 0) chakra.emplace_back(name.substr(7), content);
  EXPECT_EQ(chakra.size(), static_cast<std::size_t>(in.plan.world_size()) + 1);
  write_files(dir, chakra);
  ReplayRequest req;
  req.trace = dir;
  const ReplayResult rep = replay(req);
  EXPECT_EQ(rep.format, "chakra-et");
  EXPECT_EQ(rep.traces.size(), static_cast<std::size_t>(in.plan.world_size()));
  return {r.iteration_time_s, static_cast<double>(rep.span_ns) * 1e-9};
}

TEST(ChakraExport, RoundTripThroughFilesWithinOnePercentAnalytic) {
  TempDir dir("rt_analytic");
  const RoundTrip rt = round_trip(small_inputs(16), "analytic", dir.path);
  const double err = 100 * (rt.replayed_s - rt.simulated_s) / rt.simulated_s;
  std::printf("round trip (analytic, 16 GPUs tp 2 pp 2 dp 4): simulated %.6f s, replayed %.6f s, error %+.4f%%\n",
              rt.simulated_s, rt.replayed_s, err);
  EXPECT_LT(std::abs(err), 1.0);
}

TEST(ChakraExport, RoundTripThroughFilesWithinOnePercentFlow) {
  TempDir dir("rt_flow");
  const RoundTrip rt = round_trip(small_inputs(16), "flow", dir.path);
  const double err = 100 * (rt.replayed_s - rt.simulated_s) / rt.simulated_s;
  std::printf("round trip (flow, 16 GPUs tp 2 pp 2 dp 4): simulated %.6f s, replayed %.6f s, error %+.4f%%\n",
              rt.simulated_s, rt.replayed_s, err);
  EXPECT_LT(std::abs(err), 1.0);
}

TEST(ChakraExport, ExportIsDeterministicAndUnfolded) {
  SimulateOptions o;
  o.network = "analytic";
  o.trace = false;
  o.export_chakra = true;
  const SimulateResult a = simulate(small_inputs(), o), b = simulate(small_inputs(), o);
  ASSERT_EQ(a.files.size(), b.files.size());
  for (std::size_t k = 0; k < a.files.size(); ++k) EXPECT_EQ(a.files[k], b.files[k]) << a.files[k].first;
  EXPECT_EQ(a.ranks.size(), 8u);  // folding would simulate fewer
}

/// Removes the nodes `drop` selects and every dependency on them.
template <class P>
void drop_nodes(ExecGraph& g, P drop) {
  std::vector<std::int64_t> gone;
  for (const auto& n : g.nodes)
    if (drop(n)) gone.push_back(n.id);
  std::erase_if(g.nodes, [&](const ExecNode& n) { return std::find(gone.begin(), gone.end(), n.id) != gone.end(); });
  for (auto& n : g.nodes)
    for (auto id : gone) {
      std::erase(n.ctrl_deps, id);
      std::erase(n.data_deps, id);
    }
}

template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ChakraExport, RefusesWhatItCannotExport) {
  SimulateOptions o;
  o.export_chakra = true;
  const std::string jobs = error_of<ConfigError>(
      [&] { simulate_jobs("dgx-a100:8", DTSIM_SOURCE_DIR "/examples/two-jobs-shared-nics.json", "", o, false); });
  EXPECT_NE(jobs.find("cannot be combined with --jobs"), std::string::npos) << jobs;
  EXPECT_EQ(jobs.find('\n'), std::string::npos);
  CollectiveRequest cr;
  cr.cluster = "dgx-a100:8";
  cr.sizes_bytes = {1e6};
  cr.options.export_chakra = true;
  EXPECT_NE(error_of<ConfigError>([&] { collective(cr); }).find("simulate() only"), std::string::npos);
  o.chakra_prefix = "a/b";
  const std::string prefix = error_of<ConfigError>([&] { simulate(small_inputs(), o); });
  EXPECT_NE(prefix.find("plain file-name prefix"), std::string::npos) << prefix;
}

TEST(ChakraReplay, TruncatedEtIsOneFormatErrorLine) {
  TempDir dir("truncated");
  const Exported e = simulate_and_export(small_inputs(), sim::NetworkMode::ANALYTIC);
  fs::create_directories(dir.path);
  for (const auto& [name, bytes] : sim::chakra_export_files(e.ex, "dtsim")) {
    std::ofstream f(dir.path + "/" + name, std::ios::binary);
    f << (name == "dtsim.3.et" ? bytes.substr(0, bytes.size() - 7) : bytes);
  }
  ReplayRequest req;
  req.trace = dir.path;
  const std::string msg = error_of<FormatError>([&] { replay(req); });
  EXPECT_NE(msg.find("dtsim.3.et"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(ChakraReplay, MissingRankAndMismatchedCollectivesAreFormatErrors) {
  const Exported e = simulate_and_export(small_inputs(), sim::NetworkMode::ANALYTIC);
  sim::EtWorkload w;
  w.ranks.assign(e.ex.ranks.begin() + 1, e.ex.ranks.end());  // rank 0 missing
  w.groups = e.ex.groups;
  w.groups_source = "groups.json";
  const std::string missing = error_of<FormatError>([&] { sim::run_et_replay(w, {}); });
  EXPECT_NE(missing.find("from rank 0"), std::string::npos) << missing;  // rank 1's receives from rank 0
  w.ranks.assign(e.ex.ranks.begin(), e.ex.ranks.begin() + 2);            // only ranks 0 and 1: the groups name rank 2
  const std::string group = error_of<FormatError>([&] {
    for (auto& g : w.ranks)  // no transfers in these two ranks' traces
      drop_nodes(g, [](const ExecNode& n) { return n.comm.op == "send" || n.comm.op == "recv"; });
    sim::run_et_replay(w, {});
  });
  EXPECT_NE(group.find("which has no trace"), std::string::npos) << group;
  // Without the group file a group is the ranks that use it: rank 1 lacks a collective its peers issue.
  sim::EtWorkload m;
  m.ranks = e.ex.ranks;
  bool first = true;
  drop_nodes(m.ranks[1], [&](const ExecNode& n) {
    const bool coll = n.kind == ExecNodeKind::COMMUNICATION && n.comm.op != "send" && n.comm.op != "recv";
    if (!coll || !first) return false;
    first = false;
    return true;
  });
  const std::string mismatch = error_of<FormatError>([&] { sim::run_et_replay(m, {}); });
  EXPECT_NE(mismatch.find("collectives on it"), std::string::npos) << mismatch;
}

TEST(ChakraReplay, WhatIfEditsChangeTheSpan) {
  const Exported e = simulate_and_export(small_inputs(), sim::NetworkMode::ANALYTIC);
  sim::EtWorkload w;
  w.ranks = e.ex.ranks;
  w.groups = e.ex.groups;
  sim::ReplayOptions faster_net;
  faster_net.collective_bw_scale = 4;
  const auto rep = sim::replay_et(w, faster_net);
  EXPECT_TRUE(rep.edited);
  EXPECT_GT(rep.stats.collectives_modelled, 0u);
  EXPECT_LT(rep.predicted_span_ns, rep.span_ns);
  sim::ReplayOptions half_kernels;
  half_kernels.kernel_scales.push_back(sim::parse_kernel_scale(".=0.5"));
  const auto k = sim::replay_et(w, half_kernels);
  EXPECT_GT(k.stats.compute_scaled, 0u);
  EXPECT_LT(k.predicted_span_ns, k.span_ns);
  EXPECT_GT(k.predicted_span_ns, k.span_ns / 3);
  sim::ReplayOptions kineto_only;
  kineto_only.cpu_gap_scale = 2;
  EXPECT_NE(error_of<ConfigError>([&] { sim::replay_et(w, kineto_only); }).find("apply to Kineto traces"),
            std::string::npos);
}

// The writer against the reader, node by node, for every node type it writes.
TEST(ChakraEtWriter, WritesWhatTheReaderReads) {
  ExecGraph g;
  g.source = "w.5.et";
  ExecNode c;
  c.id = 0;
  c.name = "gemm";
  c.kind = ExecNodeKind::COMPUTE;
  c.gpu = true;
  c.duration_ns = 12'499;  // 12.499 us -> 12 us
  c.flops = 1e12;
  ExecNode a = c;
  a.id = 1;
  a.name = "ar";
  a.kind = ExecNodeKind::COMMUNICATION;
  a.comm.op = "reduce-scatter";
  a.comm.bytes = 4096;
  a.comm.process_group = "7";
  a.duration_ns = 2'500;  // -> 3 us (round half away from zero)
  a.ctrl_deps = {0};
  ExecNode s = a;
  s.id = 2;
  s.name = "send";
  s.comm = {};
  s.comm.op = "send";
  s.comm.bytes = 100;
  s.comm_src = 5;
  s.comm_dst = 6;
  s.comm_tag = 3;
  s.ctrl_deps = {};
  s.data_deps = {0, 1};
  ExecNode h = c;
  h.id = 3;
  h.name = "host";
  h.gpu = false;
  h.flops = 0;
  ExecNode ag = a;
  ag.id = 4;
  ag.name = "ag";
  ag.comm.op = "all-gather";
  ag.comm.bytes = 16'777'216;  // the gathered output of 2 ranks
  ag.comm.group_size = 2;
  g.nodes = {c, a, s, h, ag};
  const ExecGraph back = parse_chakra_et(chakra_et_bytes(g), g.source);
  ASSERT_EQ(back.nodes.size(), 5u);
  EXPECT_EQ(back.nodes[4].comm.bytes, 8'388'608);  // Chakra's comm_size: each rank's input
  EXPECT_EQ(back.rank, 5);
  EXPECT_EQ(back.nodes[0].duration_ns, 12'000);
  EXPECT_EQ(back.nodes[0].kind, ExecNodeKind::COMPUTE);
  EXPECT_TRUE(back.nodes[0].gpu);
  EXPECT_EQ(back.nodes[1].comm.op, "reduce-scatter");
  EXPECT_EQ(back.nodes[1].comm.bytes, 4096);
  EXPECT_EQ(back.nodes[1].comm.process_group, "7");
  EXPECT_EQ(back.nodes[1].duration_ns, 3'000);
  EXPECT_EQ(back.nodes[1].ctrl_deps, std::vector<std::int64_t>{0});
  EXPECT_EQ(back.nodes[2].comm.op, "send");
  EXPECT_EQ(back.nodes[2].comm_src, 5);
  EXPECT_EQ(back.nodes[2].comm_dst, 6);
  EXPECT_EQ(back.nodes[2].comm_tag, 3);
  EXPECT_EQ(back.nodes[2].data_deps, (std::vector<std::int64_t>{0, 1}));
  EXPECT_FALSE(back.nodes[3].gpu);
  ExecNode bad = a;
  bad.comm.op = "scan";
  g.nodes = {bad};
  EXPECT_NE(error_of<ConfigError>([&] { chakra_et_bytes(g); }).find("no Chakra CollectiveCommType"), std::string::npos);
  // Communicator groups: ids in the given order (not sorted as strings), read back as written.
  const ChakraCommGroups groups = {{"2", {0, 1}}, {"10", {2, 3}}};
  const std::string json = chakra_comm_groups_json(groups);
  EXPECT_LT(json.find("\"2\""), json.find("\"10\""));
  TempDir dir("groups");
  fs::create_directories(dir.path);
  std::ofstream(dir.path + "/g.json") << json;
  EXPECT_EQ(read_chakra_comm_groups(dir.path + "/g.json"), groups);
  std::ofstream(dir.path + "/bad.json") << R"({"x": [0]})";
  EXPECT_NE(
      error_of<FormatError>([&] { read_chakra_comm_groups(dir.path + "/bad.json"); }).find("not a decimal integer"),
      std::string::npos);
}

// Chakra's own feeder test trace (../shared/traces/chakra: one 3,664-node rank converted from PyTorch) replays once
// the dependencies its converter got wrong are dropped: ids not in the file, and control dependencies on the node
// itself or on later nodes, which make cycles. The figures are this replay's (recorded durations); an earlier,
// independent implementation gave the same spans (0.082269 s, 0.063554 s with kernels halved).
TEST(ChakraReplay, ChakrasOwnFeederTraceReplaysWithItsBadDependenciesDropped) {
  const std::string archive = std::string(DTSIM_SHARED_DIR) + "/traces/chakra/tests/data/feeder_tests_trace.tar.gz";
  if (!fs::exists(archive)) GTEST_SKIP() << "shared trace absent: " << archive;
  const auto members = read_archive_members(archive);
  ASSERT_EQ(members.size(), 1u);
  const auto dir = fs::temp_directory_path() / ("dtsim_feeder_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string et = (dir / "chakra.0.et").string();
  std::ofstream(et, std::ios::binary) << members[0].content;
  const sim::EtWorkload w = sim::load_et_workload({et});
  EXPECT_EQ(w.dropped_missing_deps, 1277u);
  EXPECT_EQ(w.dropped_cyclic_deps, 937u);
  sim::ReplayOptions half;
  half.kernel_scales.push_back(sim::parse_kernel_scale(".*=0.5"));
  const sim::EtReplayReport r = sim::replay_et(w, half);
  EXPECT_EQ(r.stats.nodes, 3664u);
  EXPECT_EQ(r.stats.collective_instances, 21u);
  EXPECT_NEAR(static_cast<double>(r.span_ns) * 1e-9, 0.082269, 1e-6);
  EXPECT_NEAR(static_cast<double>(r.predicted_span_ns) * 1e-9, 0.063554, 1e-6);
  fs::remove_all(dir);
}

}  // namespace
