// Chakra execution-trace export (sim/report/chakra_export.hpp, traces/chakra_et_writer.hpp) and the replay of
// execution graphs (sim/replay/exec_replay.hpp): export -> parse the .et bytes with dtsim's reader -> replay gives
// dtsim's own iteration time within 1% (what the microsecond rounding of duration_micros allows); every lowered task
// is in the export with its kind; every send has its receive; what-if edits move the replayed time as they should.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include <unistd.h>

#include "dtsim/dtsim.hpp"
#include "sim/model/lowering.hpp"
#include "sim/replay/exec_replay.hpp"
#include "tests/support/error_of.hpp"
#include "traces/exec_graph.hpp"

using namespace dtsim;
using dtsim::testing::error_of;

namespace {

struct Exported {
  SimulateResult result;
  std::vector<ExecGraph> graphs;
};

Exported run(const std::string& network, int tp, int pp, int dp, const std::string& model = "gpt3-1.3b") {
  Inputs in = load_inputs({model, "dgx-a100:" + std::to_string(tp * pp * dp), "", ""});
  in.plan.tp = tp;
  in.plan.pp = pp;
  in.plan.dp = dp;
  in.plan.micro_batch_size = 1;
  in.plan.global_batch_size = 4 * dp;
  in.plan.sequence_parallel = tp > 1;
  SimulateOptions opt;
  opt.network = network;
  opt.engine = "maxmin";  // the flow model without SimGrid (one SimGrid engine per process)
  opt.trace = false;
  opt.export_chakra = true;
  Exported e;
  e.result = simulate(in, opt);
  for (const auto& [name, bytes] : e.result.chakra_files) e.graphs.push_back(parse_chakra_et(bytes, name));
  return e;
}

TEST(ChakraExport, RoundTripReplaysTheSimulatedIteration) {
  for (const char* network : {"flow", "analytic"}) {
    SCOPED_TRACE(network);
    const Exported e = run(network, 2, 2, 2);
    ASSERT_EQ(e.graphs.size(), 8u);
    for (std::size_t r = 0; r < e.graphs.size(); ++r) {
      EXPECT_EQ(e.graphs[r].rank, static_cast<int>(r));
      EXPECT_EQ(e.graphs[r].format, "chakra-et");
      EXPECT_EQ(e.graphs[r].schema, "0.0.4");
      topological_order(e.graphs[r]);  // every dependency resolves, no cycle
    }
    const sim::ExecReplay rep = sim::replay_exec_graphs(e.graphs);
    EXPECT_EQ(rep.unmatched_p2p, 0u);
    EXPECT_GT(rep.transfers, 0u);
    const double t = e.result.iteration_time_s, err = rep.span_s / t - 1;
    std::printf(
        "[chakra] %s: simulated %.6f s, replayed from the .et files %.6f s (%+.4f%%), %zu nodes, %zu transfers\n",
        network, t, rep.span_s, 100 * err, rep.nodes, rep.transfers);
    EXPECT_LT(std::abs(err), 0.01);
  }
}

TEST(ChakraExport, EveryTaskIsExportedWithItsKind) {
  const Exported e = run("flow", 2, 2, 2);
  // The same run lowered as the export lowers it: every rank, the host's issue as tasks.
  const Inputs in = [] {
    Inputs x = load_inputs({"gpt3-1.3b", "dgx-a100:8", "", ""});
    x.plan.tp = x.plan.pp = x.plan.dp = 2;
    x.plan.micro_batch_size = 1;
    x.plan.global_batch_size = 8;
    x.plan.sequence_parallel = true;
    return x;
  }();
  sim::SimOptions opt;
  opt.fold = sim::FoldMode::NONE;
  opt.host_issue_tasks = true;
  const sim::Lowered low = sim::lower(in.model, in.cluster, in.plan, in.calibration, opt);
  std::map<int, int> compute, cpu, flows_out, flows_in;
  for (const auto& t : low.graph.tasks()) {
    const int r = low.ranks[static_cast<std::size_t>(t.rank)].global_rank;
    if (t.kind == sim::TaskKind::COMPUTE) ++compute[r];
    if (t.kind == sim::TaskKind::DELAY || t.kind == sim::TaskKind::JOIN) ++cpu[r];
    if (t.kind == sim::TaskKind::FLOW) {
      ++flows_out[r];
      ++flows_in[low.ranks[static_cast<std::size_t>(t.peer)].global_rank];
    }
  }
  std::size_t sends = 0, recvs = 0;
  for (const ExecGraph& g : e.graphs) {
    int gpu_comp = 0, cpu_comp = 0, send = 0, recv = 0, zero_byte = 0;
    for (const ExecNode& n : g.nodes) {
      if (n.kind == ExecNodeKind::COMPUTE) (n.gpu ? gpu_comp : cpu_comp)++;
      if (n.kind == ExecNodeKind::COMMUNICATION && n.comm.op == "send") ++send;
      if (n.kind == ExecNodeKind::COMMUNICATION && n.comm.op == "recv") ++recv;
      if (n.kind == ExecNodeKind::COMMUNICATION && n.comm.bytes == 0) ++zero_byte;
      EXPECT_NE(n.kind, ExecNodeKind::OTHER);
    }
    SCOPED_TRACE("rank " + std::to_string(g.rank));
    EXPECT_EQ(gpu_comp, compute[g.rank]);
    EXPECT_EQ(cpu_comp, cpu[g.rank]);
    // Transfers, plus the zero-byte pairs standing for cross-rank rendezvous edges.
    EXPECT_GE(send, flows_out[g.rank]);
    EXPECT_GE(recv, flows_in[g.rank]);
    EXPECT_EQ(send + recv - flows_out[g.rank] - flows_in[g.rank], zero_byte);
    sends += static_cast<std::size_t>(send);
    recvs += static_cast<std::size_t>(recv);
  }
  EXPECT_EQ(sends, recvs);
}

TEST(ChakraExport, WhatIfEditsMoveTheReplay) {
  const Exported e = run("flow", 2, 2, 2);
  const double base = sim::replay_exec_graphs(e.graphs).span_s;
  sim::ExecReplayOptions fast_kernels;
  fast_kernels.kernel_scales.push_back(sim::parse_kernel_scale(".*=0.5"));
  const double half = sim::replay_exec_graphs(e.graphs, fast_kernels).span_s;
  EXPECT_LT(half, 0.75 * base);
  EXPECT_GT(half, 0.4 * base);
  sim::ExecReplayOptions slow_net;
  slow_net.comm_bandwidth_Bps = 1e9;  // 1 GB/s for every transfer
  EXPECT_GT(sim::replay_exec_graphs(e.graphs, slow_net).span_s, 1.5 * base);
  sim::ExecReplayOptions free_comm;
  free_comm.comm_time_scale = 0;
  EXPECT_LT(sim::replay_exec_graphs(e.graphs, free_comm).span_s, base);
}

TEST(ChakraExport, ReplayThroughTheApiAndItsErrors) {
  const Exported e = run("analytic", 1, 2, 2);
  const auto dir = std::filesystem::temp_directory_path() / ("dtsim_chakra_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  write_files(dir.string(), e.result.chakra_files);
  ReplayRequest req;
  req.trace = dir.string();
  const ReplayResult r = replay(req);
  ASSERT_EQ(r.traces.size(), 4u);
  double longest = 0;
  for (const auto& t : r.traces) longest = std::max(longest, static_cast<double>(t.replayed_span_ns) * 1e-9);
  EXPECT_NEAR(longest, e.result.iteration_time_s, 0.01 * e.result.iteration_time_s);
  EXPECT_NE(r.text.find("4 ranks"), std::string::npos) << r.text;
  req.collective_bw_GBps = 1.0;
  const ReplayResult slow = replay(req);
  EXPECT_GT(slow.traces[0].predicted_span_ns, slow.traces[0].replayed_span_ns);
  ReplayRequest bad = req;
  bad.runtime_scale = 2;
  EXPECT_EQ(error_of<ConfigError>([&] { replay(bad); }),
            "replay: --runtime-scale does not apply to Chakra execution traces (no runtime calls are recorded)");
  // A file cut in the middle of a node: one line naming it.
  const std::string& bytes = e.result.chakra_files.front().second;
  const std::string msg =
      error_of<FormatError>([&] { parse_chakra_et(bytes.substr(0, bytes.size() / 2), "cut.0.et"); });
  EXPECT_EQ(msg.rfind("cut.0.et: ", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace

// Chakra's own feeder test trace (../shared/traces/chakra, protobuf and JSON forms of one 3,664-node rank) replays:
// the numbers below are this replay's (recorded durations; the .et also carries control dependencies, which the
// JSON form lacks, so its program order makes it longer), kept so that a change of the rules shows.
TEST(ChakraReplay, ChakrasOwnFeederTraceReplays) {
  const std::string et = std::string(DTSIM_SHARED_DIR) + "/traces/chakra/tests/data/feeder_tests_trace.tar.gz";
  const std::string json = std::string(DTSIM_SHARED_DIR) + "/traces/chakra/tests/data/json_trace.tar.gz";
  if (!std::filesystem::exists(et) || !std::filesystem::exists(json)) GTEST_SKIP() << "shared traces absent";
  const ExecGraph g = import_exec_graph(et);
  const sim::ExecReplay r = sim::replay_exec_graphs({g});
  EXPECT_EQ(r.nodes, 3664u);
  EXPECT_EQ(r.collectives, 21u);
  EXPECT_EQ(r.transfers, 0u);
  EXPECT_EQ(r.dangling_deps, 1165u);      // control dependencies on the missing root node 3
  EXPECT_EQ(r.forward_ctrl_deps, 1049u);  // CPU operators naming their kernels (or themselves)
  EXPECT_NEAR(r.span_s, 0.082269, 1e-6);
  sim::ExecReplayOptions half;
  half.kernel_scales.push_back(sim::parse_kernel_scale(".*=0.5"));
  EXPECT_NEAR(sim::replay_exec_graphs({g}, half).span_s, 0.0635545, 1e-6);
  ReplayRequest req;
  req.trace = json;
  EXPECT_EQ(error_of<ConfigError>([&] { replay(req); }),
            "replay: " + json + ":jsonData/chakra.0.json and " + json +
                ":jsonData/small_chakra.0.json are both rank 0: replay one with --member");
  req.member = "jsonData/chakra.0.json";
  const ReplayResult j = replay(req);
  ASSERT_EQ(j.traces.size(), 1u);
  EXPECT_NEAR(static_cast<double>(j.traces[0].replayed_span_ns) * 1e-9, 0.046140, 1e-6);
}
