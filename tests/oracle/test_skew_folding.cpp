// Folding under skewed routing (issue Speed: "the expert-data-parallel copies of an EP group are alike"). Skewed
// routing gives each EP rank its own expert load, so the EP group's ranks are simulated; its expert-data-parallel
// copies (the same EP indices on other data-parallel ranks) carry the same loads and fold onto it. The data-parallel
// rings then hold several simulated members and their copies: lowered as one instance over the simulated members,
// each copy's steps taken as its representative's. Exactness: folded = unfolded to 1e-9 on the analytic engine and on
// the flow engines (SimGrid and dtsim's max-min), node-local and across nodes (spread rings), pipelined and not.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <string>

#include "sim/simulate.hpp"
#include "tests/support/sim_fixture.hpp"

namespace dtsim {
namespace {
using namespace dtsim::testing;

struct Case {
  int nodes, gpus_per_node, pp, dp, ep;
  int zero = 1;
};

struct Outcome {
  double iteration_s = 0;
  int simulated = 0;
  bool edp = false;
  std::string reason;
  std::map<int, std::array<double, 3>> per_rank;  ///< global rank -> compute, exposed communication, bubble (s)
};

Outcome simulate_case(const Case& k, sim::FoldMode fold, sim::NetworkMode network,
                      sim::CollectiveMode mode = sim::CollectiveMode::FLOW) {
  const TransformerSpec m = tiny_moe(4, 16, 2);
  const ClusterSpec c = uniform_cluster(k.nodes, k.gpus_per_node, 100e9, 2e-6);
  ParallelPlan p;
  p.pp = k.pp;
  p.dp = k.dp;
  p.ep = k.ep;
  p.micro_batch_size = 1;
  p.global_batch_size = 4 * k.dp;
  p.zero_stage = k.zero;
  p.routing = routing_from_string("skew:1.2", "test");
  const Calibration cal = default_calibration("h100-sxm5-80gb");
  sim::SimOptions opt;
  opt.fold = fold;
  opt.network = network;
  opt.collective_mode = mode;
  sim::Inputs in{&m, &c, &p, &cal, &opt};
  const sim::Simulation s = sim::simulate(in);
  Outcome o{s.report.iteration_time_s,
            static_cast<int>(s.lowered.ranks.size()),
            s.lowered.fold_edp,
            s.lowered.fold_reason,
            {}};
  for (const auto& r : s.report.ranks) o.per_rank[r.global_rank] = {r.compute_s, r.exposed_comm_s, r.bubble_s};
  return o;
}

// Every simulated rank of the folded run spends its time as the same rank of the unfolded run does: a copy-aware
// ring must not let a lightly loaded EP rank run ahead of the rendezvous the unfolded ring makes it wait at.
void expect_same_ranks(const Outcome& folded, const Outcome& unfolded) {
  for (const auto& [g, t] : folded.per_rank) {
    ASSERT_TRUE(unfolded.per_rank.count(g)) << g;
    for (int i = 0; i < 3; ++i)
      EXPECT_NEAR(t[i], unfolded.per_rank.at(g)[i], 1e-9 * unfolded.iteration_s) << "rank " << g << " part " << i;
  }
}

// Runs `fn` in a child (SimGrid initialises once per process) and returns its outcome's iteration time and
// simulated ranks as one number each.
std::pair<double, int> in_child_run(const Case& k, sim::FoldMode fold, sim::NetworkMode network,
                                    sim::CollectiveMode mode = sim::CollectiveMode::FLOW) {
  const double t = in_child([&] { return simulate_case(k, fold, network, mode).iteration_s; });
  const double n = in_child([&] { return static_cast<double>(simulate_case(k, fold, network, mode).simulated); });
  return {t, static_cast<int>(n)};
}

// One node of 8, EP 4 over DP 8: two expert-data-parallel copies; the copies fold, the EP group's four ranks stay.
TEST(SkewFolding, ExpertDataParallelCopiesFoldOnOneNode) {
  const Case k{1, 8, 1, 8, 4};
  const Outcome folded = simulate_case(k, sim::FoldMode::AUTO, sim::NetworkMode::ANALYTIC);
  const Outcome unfolded = simulate_case(k, sim::FoldMode::NONE, sim::NetworkMode::ANALYTIC);
  EXPECT_TRUE(folded.edp) << folded.reason;
  EXPECT_EQ(folded.simulated, 4) << folded.reason;
  EXPECT_EQ(unfolded.simulated, 8);
  EXPECT_NE(folded.reason.find("expert-data-parallel copies"), std::string::npos) << folded.reason;
  EXPECT_NEAR(folded.iteration_s, unfolded.iteration_s, 1e-9 * unfolded.iteration_s) << folded.reason;
  expect_same_ranks(folded, unfolded);
}

// Two nodes of 4: the data-parallel ring of 8 crosses nodes through every member's NIC (spread rings) and the
// copies sit on the other node; pipelined over two stages on four nodes too, with four copies of an EP group of 2;
// and FSDP (ZeRO-3), whose per-layer parameter all-gathers over the data-parallel group make every EP rank wait for
// the most loaded one layer by layer (a ring lowered per member, without the rendezvous, would not).
TEST(SkewFolding, FoldedEqualsUnfoldedAcrossNodesAndStages) {
  for (const Case& k : {Case{2, 4, 1, 8, 4}, Case{4, 4, 2, 8, 2}, Case{2, 4, 1, 8, 4, 3}}) {
    for (auto mode : {sim::CollectiveMode::FLOW, sim::CollectiveMode::STEPS}) {
      const Outcome folded = simulate_case(k, sim::FoldMode::AUTO, sim::NetworkMode::ANALYTIC, mode);
      const Outcome unfolded = simulate_case(k, sim::FoldMode::NONE, sim::NetworkMode::ANALYTIC, mode);
      EXPECT_TRUE(folded.edp) << folded.reason;
      EXPECT_EQ(folded.simulated * (k.dp / k.ep), unfolded.simulated) << folded.reason;
      EXPECT_NEAR(folded.iteration_s, unfolded.iteration_s, 1e-9 * unfolded.iteration_s)
          << "nodes " << k.nodes << " pp " << k.pp << " ep " << k.ep << ": " << folded.reason;
      expect_same_ranks(folded, unfolded);
    }
  }
}

// The flow engines share links between concurrent flows: a flow to a folded copy must land on its representative's
// links (the representative's predecessor is that copy's), or a link would carry two flows where it carries one.
TEST(SkewFolding, FoldedEqualsUnfoldedOnTheFlowNetwork) {
  const Case k{2, 4, 1, 8, 4};
  const auto folded = in_child_run(k, sim::FoldMode::AUTO, sim::NetworkMode::FLOW);
  const auto unfolded = in_child_run(k, sim::FoldMode::NONE, sim::NetworkMode::FLOW);
  EXPECT_EQ(folded.second, 4);
  EXPECT_EQ(unfolded.second, 8);
  ASSERT_GT(unfolded.first, 0);
  EXPECT_NEAR(folded.first, unfolded.first, 1e-9 * unfolded.first);
}

// One EP group of all the data-parallel ranks has no copies: nothing to fold, every rank simulated.
TEST(SkewFolding, NoCopiesNothingToFold) {
  const Case k{1, 8, 1, 8, 8};
  const Outcome r = simulate_case(k, sim::FoldMode::AUTO, sim::NetworkMode::ANALYTIC);
  EXPECT_FALSE(r.edp) << r.reason;
  EXPECT_EQ(r.simulated, 8) << r.reason;
}

}  // namespace
}  // namespace dtsim
