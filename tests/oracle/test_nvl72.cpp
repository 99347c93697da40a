// Oracle tests on the NVL72 rack presets (gb200-nvl72, gb300-nvl72): the whole 72-GPU NVLink domain is one node
// behind one non-blocking NVSwitch fabric, one NIC per GPU. Simulated with the flow engine (SimGrid) and the shipped
// (estimated) gb200 calibration, against the closed forms of tests/oracle/test_sim_oracle.cpp with the calibration's
// efficiencies and per-step software costs put in:
//   ring all-reduce over n ranks: max(2(n-1) (alpha + o), L_nccl) + 2(n-1)/n S / (B eff)
//   NVLS all-reduce:              o + alpha + S / (B eff)
// with alpha the hop's one-way latency, o the calibration's collective_step_overhead_s, B the link's nominal
// bandwidth per direction and eff its calibrated efficiency; L_nccl NCCL's modelled latency of the ring with the
// Simple protocol (these messages are large), from NCCL 2.30.7 src/graph/tuning.cc: 8.4 us of base latency plus
// 3.4 us per NVLink step, or 14 us per step between nodes for a ring with one GPU per node. Every simulation runs in a
// forked child (SimGrid allows one engine per process).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "sim/simulate.hpp"
#include "tests/support/sim_fixture.hpp"

using namespace dtsim;
using namespace dtsim::sim;
using namespace dtsim::testing;

namespace {

// The shipped GB200 calibration, as the CLI would use it; no message-size segments, so the closed forms hold.
Calibration gb200_calibration() {
  Calibration cal = default_calibration("gb200");
  cal.network_segments.clear();
  cal.collective_algorithms.clear();
  return cal;
}

// A model whose heads and hidden size divide by the TP degrees used here (72, 2); it only gives the dtype.
TransformerSpec collective_model() {
  TransformerSpec m = tiny_model(2);
  m.heads = 72;
  m.kv_heads = 72;
  m.hidden = 72 * 64;
  m.ffn_hidden = 4 * m.hidden;
  return m;
}

// One all-reduce of S bytes over every TP group of `plan` at once (lower_collective); the time at which every rank is
// done, simulated in a child process.
double all_reduce_time(const ClusterSpec& c, const ParallelPlan& plan, const Calibration& cal, double S,
                       CollectiveMode mode, FoldMode fold, CollectiveAlgorithm algo) {
  auto run = [&] {
    SimOptions opt;
    opt.collective_mode = mode;
    opt.fold = fold;
    opt.network = NetworkMode::FLOW;
    opt.collective_algorithm = algo;
    Lowered low = lower_collective(collective_model(), c, plan, cal, opt, cost::CollectiveKind::ALL_REDUCE, S);
    std::vector<int> gpus;
    for (const auto& r : low.ranks) gpus.push_back(r.global_rank);
    EngineResult res = run_on_simgrid(low.graph, c, cal, gpus);
    return *std::max_element(res.end_s.begin(), res.end_s.end());
  };
  return in_child(run);
}

double ring_closed_form(int n, double S, double B, double eff, double alpha, double o, double nccl_latency_s) {
  return std::max(2.0 * (n - 1) * (alpha + o), nccl_latency_s) + 2.0 * (n - 1) / n * S / (B * eff);
}
// NCCL's Simple-protocol latency of an all-reduce ring of n ranks inside one NVLink domain, and of one across n nodes
// with one rank on each (every step crosses nodes: NCCL's tree net latency, as it charges a ring at one GPU per node).
double nccl_nvlink_all_reduce_s(int n) { return (8.4 + 2 * (n - 1) * 3.4) * 1e-6; }
double nccl_net_all_reduce_s(int n) { return (8.4 + 2 * (n - 1) * 14.0) * 1e-6; }

// Tight, but above the rounding of SimGrid's clock over the 142 dependent steps of a 72-rank ring (~1e-13 s each).
constexpr double kRel = 1e-8;
void expect_rel(double actual, double expected) { EXPECT_NEAR(actual, expected, std::abs(expected) * kRel); }

ParallelPlan tp_plan(int tp, int dp) {
  ParallelPlan p;
  p.tp = tp;
  p.dp = dp;
  p.global_batch_size = dp;
  return p;
}

// Ranks simulated for the unfolded collective (lowering only: no engine runs).
std::size_t simulated_ranks(const ClusterSpec& c, const ParallelPlan& plan, const Calibration& cal) {
  SimOptions opt;
  opt.fold = FoldMode::NONE;
  opt.collective_algorithm = CollectiveAlgorithm::RING;
  return lower_collective(collective_model(), c, plan, cal, opt, cost::CollectiveKind::ALL_REDUCE, 1e6).ranks.size();
}

}  // namespace

TEST(Nvl72, PresetIsOneSeventyTwoGpuNvSwitchDomain) {
  const ClusterSpec c = load_cluster("gb200-nvl72:72");
  EXPECT_EQ(c.num_nodes, 1);
  EXPECT_EQ(c.gpus_per_node, 72);
  for (int g = 1; g < 72; ++g) EXPECT_EQ(path_between(c, 0, g), Path::INTRA_NODE);
  const ClusterSpec two = load_cluster("gb200-nvl72:144");
  EXPECT_EQ(path_between(two, 0, 71), Path::INTRA_NODE);
  EXPECT_EQ(path_between(two, 0, 72), Path::INTER_NODE);
  EXPECT_EQ(path_between(two, 71, 143), Path::INTER_NODE);
}

// ---- "NVL72 all-reduce inside one domain": a ring over all 72 GPUs of one rack, every hop through the NVSwitch.
TEST(Nvl72, AllReduceInsideOneDomainMatchesRingClosedForm) {
  const ClusterSpec c = load_cluster("gb200-nvl72:72");
  const Calibration cal = gb200_calibration();
  const int n = 72;
  const double S = 1e9;
  const double expected =
      ring_closed_form(n, S, c.intra.bandwidth_Bps, cal.intra_bandwidth_efficiency, c.intra.latency_s,
                       cal.collective_step_overhead_s, nccl_nvlink_all_reduce_s(n));
  // 900 GB/s x 0.6816 per direction: 3.22 ms of transfer; 142 steps at 1 us + 6.06 us (the A100 fit's in-situ cost,
  // above NCCL's 3.4 us): 1.00 ms of latency for 1 GB.
  EXPECT_GT(expected, 4.2e-3);
  EXPECT_LT(expected, 4.25e-3);
  for (auto mode : {CollectiveMode::STEPS, CollectiveMode::FLOW})
    for (auto fold : {FoldMode::NONE, FoldMode::AUTO}) {
      SCOPED_TRACE(std::string(mode == CollectiveMode::STEPS ? "steps" : "flow") +
                   (fold == FoldMode::NONE ? ", unfolded" : ", folded"));
      expect_rel(all_reduce_time(c, tp_plan(n, 1), cal, S, mode, fold, CollectiveAlgorithm::RING), expected);
    }
}

// NVSwitch in-network reduction (NVLS) over the 72 GPUs of the rack: every port carries S up and S down at once.
TEST(Nvl72, NvlsAllReduceInsideOneDomainMatchesClosedForm) {
  const ClusterSpec c = load_cluster("gb200-nvl72:72");
  const Calibration cal = gb200_calibration();
  const double S = 1e9;
  const double expected =
      cal.collective_step_overhead_s + c.intra.latency_s + S / (c.intra.bandwidth_Bps * cal.intra_bandwidth_efficiency);
  for (auto fold : {FoldMode::NONE, FoldMode::AUTO}) {
    SCOPED_TRACE(fold == FoldMode::NONE ? "unfolded" : "folded");
    expect_rel(all_reduce_time(c, tp_plan(72, 1), cal, S, CollectiveMode::FLOW, fold, CollectiveAlgorithm::NVLS),
               expected);
  }
}

// Two racks (144 GPUs), tp = 72, dp = 2: both racks all-reduce over their own 72 GPUs at the same time. Each rack has
// its own NVSwitch fabric, so neither slows the other: the one-domain closed form holds.
TEST(Nvl72, AllReduceInOneDomainIsNotSlowedByTheOtherDomain) {
  const ClusterSpec c = load_cluster("gb200-nvl72:144");
  ASSERT_EQ(c.num_nodes, 2);
  const Calibration cal = gb200_calibration();
  const int n = 72;
  const double S = 1e9;
  EXPECT_EQ(simulated_ranks(c, tp_plan(n, 2), cal), 144u);  // both racks' all-reduces run, at the same time
  const double expected =
      ring_closed_form(n, S, c.intra.bandwidth_Bps, cal.intra_bandwidth_efficiency, c.intra.latency_s,
                       cal.collective_step_overhead_s, nccl_nvlink_all_reduce_s(n));
  for (auto mode : {CollectiveMode::STEPS, CollectiveMode::FLOW}) {
    SCOPED_TRACE(mode == CollectiveMode::STEPS ? "steps" : "flow");
    expect_rel(all_reduce_time(c, tp_plan(n, 2), cal, S, mode, FoldMode::NONE, CollectiveAlgorithm::RING), expected);
  }
}

// The group across the two racks (the DP group of tp = 72, dp = 2: GPUs g and g + 72) goes over the NICs: 72 such
// pairs all-reduce at once, each pair over its own two ConnectX-7 NICs (one NIC per GPU), at the inter-node
// bandwidth and latency. Built as tp = 2 groups with DP innermost (rank r = dp + 72 tp, on GPU r), so that
// lower_collective, which runs the TP groups' collective, runs exactly these pairs.
TEST(Nvl72, CrossDomainGroupUsesTheNics) {
  const ClusterSpec c = load_cluster("gb200-nvl72:144");
  ASSERT_EQ(c.inter.nics_per_node, 72);
  const Calibration cal = gb200_calibration();
  ParallelPlan p = tp_plan(2, 72);
  p.rank_order = {Axis::DP, Axis::TP, Axis::PP};
  const RankCoord c0 = p.coord_of(0), c72 = p.coord_of(72);
  ASSERT_EQ(c0.dp, c72.dp);  // GPUs 0 and 72 are one TP pair
  ASSERT_NE(c0.tp, c72.tp);
  EXPECT_EQ(simulated_ranks(c, p, cal), 144u);  // all 72 pairs at once
  const int n = 2;
  const double S = 256e6;
  const double expected = ring_closed_form(n, S, c.inter.nic_bandwidth_Bps, cal.inter_bandwidth_efficiency,
                                           c.inter.latency_s, cal.collective_step_overhead_s, nccl_net_all_reduce_s(n));
  const double over_nvlink =
      ring_closed_form(n, S, c.intra.bandwidth_Bps, cal.intra_bandwidth_efficiency, c.intra.latency_s,
                       cal.collective_step_overhead_s, nccl_nvlink_all_reduce_s(n));
  EXPECT_GT(expected, 10 * over_nvlink);  // 400 Gb/s x 0.9 = 45 GB/s against 720 GB/s
  for (auto mode : {CollectiveMode::STEPS, CollectiveMode::FLOW})
    for (auto fold : {FoldMode::NONE, FoldMode::AUTO}) {
      SCOPED_TRACE(std::string(mode == CollectiveMode::STEPS ? "steps" : "flow") +
                   (fold == FoldMode::NONE ? ", unfolded" : ", folded"));
      expect_rel(all_reduce_time(c, p, cal, S, mode, fold, CollectiveAlgorithm::RING), expected);
    }
}

// GB300 NVL72: the same domain with ConnectX-8 800 Gb/s NICs: the cross-rack pair all-reduce runs at twice the NIC
// bandwidth of GB200's (same closed form with the gb300 preset's NIC).
TEST(Nvl72, Gb300CrossDomainGroupUsesItsEightHundredGigabitNics) {
  const ClusterSpec c = load_cluster("gb300-nvl72:144");
  ASSERT_EQ(c.inter.nic_bandwidth_Bps, 2 * load_cluster("gb200-nvl72:144").inter.nic_bandwidth_Bps);
  Calibration cal = default_calibration("gb300");
  cal.network_segments.clear();
  cal.collective_algorithms.clear();
  ParallelPlan p = tp_plan(2, 72);
  p.rank_order = {Axis::DP, Axis::TP, Axis::PP};
  const double S = 256e6;
  expect_rel(all_reduce_time(c, p, cal, S, CollectiveMode::FLOW, FoldMode::NONE, CollectiveAlgorithm::RING),
             ring_closed_form(2, S, c.inter.nic_bandwidth_Bps, cal.inter_bandwidth_efficiency, c.inter.latency_s,
                              cal.collective_step_overhead_s, nccl_net_all_reduce_s(2)));
}
