// Device mapping (ParallelPlan::device_map) and pairwise link queries (traces/routing.hpp).
#include <gtest/gtest.h>

#include "tests/support/sim_fixture.hpp"
#include "traces/routing.hpp"

using namespace dtsim;
using namespace dtsim::testing;

namespace {
ParallelPlan pp2_dp8() {
  ParallelPlan p;
  p.pp = 2;
  p.dp = 8;
  p.micro_batch_size = 2;
  p.global_batch_size = 64;
  return p;
}
}  // namespace

TEST(DeviceMap, ValidationNamesTheProblem) {
  const auto model = model_preset("gpt3-1.3b");
  const auto cluster = load_cluster("dgx-a100:16");
  ParallelPlan p = pp2_dp8();
  p.device_map = {0, 1, 2};
  EXPECT_THROW(p.validate(model, cluster), ConfigError);
  p.device_map.clear();
  for (int r = 0; r < 16; ++r) p.device_map.push_back(r);
  p.device_map[3] = 2;
  try {
    p.validate(model, cluster);
    FAIL() << "duplicate GPU accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("GPU 2 to two ranks"), std::string::npos) << e.what();
  }
  p.device_map[3] = 16;
  EXPECT_THROW(p.validate(model, cluster), ConfigError);
  p.device_map[3] = 3;
  EXPECT_NO_THROW(p.validate(model, cluster));
  EXPECT_FALSE(p.has_device_map());  // identity
  std::swap(p.device_map[0], p.device_map[9]);
  EXPECT_TRUE(p.has_device_map());
  EXPECT_EQ(p.gpu_of_rank(0), 9);
}

TEST(DeviceMap, JsonRoundTrip) {
  ParallelPlan p = pp2_dp8();
  for (int r = 0; r < 16; ++r) p.device_map.push_back((r * 5) % 16);
  const auto j = to_json(p, 24);
  const ParallelPlan q = plan_from_json(j, "plan");
  EXPECT_EQ(q.device_map, p.device_map);
  EXPECT_EQ(to_json(q, 24), j);
}

// Mapping rank (stage s, dp d) of the default tp,dp,pp layout onto GPU 2d + s places the ranks exactly where
// rank order "pp,dp,tp" puts them: the two plans must simulate to the same iteration time (the mapped one
// unfolded, the rank-ordered one folded; both exact on GPU-private links).
TEST(DeviceMap, MappingEqualsTheEquivalentRankOrder) {
  auto run = [](bool use_map) {
    return in_child([use_map] {
      TransformerSpec model = model_preset("gpt3-1.3b");
      ClusterSpec cluster = load_cluster("dgx-a100:16");
      ParallelPlan plan = pp2_dp8();
      if (use_map) {
        for (int r = 0; r < 16; ++r) {
          const RankCoord c = plan.coord_of(r);
          plan.device_map.push_back(2 * c.dp + c.pp);
        }
      } else {
        plan.rank_order = {Axis::PP, Axis::DP, Axis::TP};
      }
      Calibration cal = default_calibration("a100-sxm4-80gb");
      SimOptions opt;
      Inputs in{&model, &cluster, &plan, &cal, &opt};
      Simulation s = simulate(in);
      if (use_map && s.lowered.fold_tp) return -1.0;
      return s.report.iteration_time_s;
    });
  };
  const double mapped = run(true), ordered = run(false), plain = in_child([] {
                                                           TransformerSpec model = model_preset("gpt3-1.3b");
                                                           ClusterSpec cluster = load_cluster("dgx-a100:16");
                                                           ParallelPlan plan = pp2_dp8();
                                                           Calibration cal = default_calibration("a100-sxm4-80gb");
                                                           SimOptions opt;
                                                           Inputs in{&model, &cluster, &plan, &cal, &opt};
                                                           return simulate(in).report.iteration_time_s;
                                                         });
  ASSERT_GT(mapped, 0);
  EXPECT_NEAR(mapped, ordered, ordered * 1e-9);
  // And the mapping matters: with the default layout the DP rings stay in a node, mapped they cross nodes.
  EXPECT_GT(std::abs(mapped - plain), plain * 1e-3);
}

TEST(PairLinks, TwoLevelClusterUsesNvswitchInsideANodeAndTheNicAcross) {
  const auto c = load_cluster("dgx-a100:16");
  Calibration cal = ideal_calibration();
  PairLinks links(c, cal);
  EXPECT_DOUBLE_EQ(links.get(0, 7).bandwidth_Bps, c.intra.bandwidth_Bps);
  EXPECT_DOUBLE_EQ(links.get(0, 7).latency_s, c.intra.latency_s);
  EXPECT_DOUBLE_EQ(links.get(0, 8).bandwidth_Bps, c.inter.nic_bandwidth_Bps);
  EXPECT_DOUBLE_EQ(links.get(0, 8).latency_s, c.inter.latency_s);
  EXPECT_DOUBLE_EQ(links.get(3, 12).bandwidth_Bps, links.get(12, 3).bandwidth_Bps);
}

TEST(PairLinks, GraphClusterTakesTheRoutesNarrowestLinkAndSummedLatency) {
  const auto c = dgx1_v100(2);
  Calibration cal = ideal_calibration();
  PairLinks links(c, cal);
  GraphRouting r(c.graph);
  for (auto [a, b] : std::vector<std::pair<int, int>>{{0, 1}, {0, 5}, {0, 9}, {3, 14}}) {
    double lat = 0, bw = 1e300;
    for (int d : r.route(a, b)) {
      lat += c.graph.links[d / 2].latency_s;
      bw = std::min(bw, c.graph.links[d / 2].bandwidth_Bps);
    }
    EXPECT_DOUBLE_EQ(links.get(a, b).latency_s, lat) << a << "->" << b;
    EXPECT_DOUBLE_EQ(links.get(a, b).bandwidth_Bps, bw) << a << "->" << b;
  }
  // NVLink neighbours are faster than GPUs in different nodes.
  EXPECT_GT(links.get(0, 1).bandwidth_Bps, links.get(0, 9).bandwidth_Bps);
}

// place_ranks stores nothing for the identity, a rank order when the placement is one, a device map otherwise.
TEST(DeviceMap, PlaceRanksPrefersRankOrders) {
  ParallelPlan p = pp2_dp8();
  std::vector<int> identity(16);
  for (int r = 0; r < 16; ++r) identity[r] = r;
  p.place_ranks(identity);
  EXPECT_TRUE(p.device_map.empty());
  std::vector<int> pipelines_inner(16);
  for (int r = 0; r < 16; ++r) pipelines_inner[r] = 2 * p.coord_of(r).dp + p.coord_of(r).pp;
  p.place_ranks(pipelines_inner);
  EXPECT_TRUE(p.device_map.empty());
  EXPECT_EQ(rank_order_string(p.rank_order), "tp,pp,dp");  // the first order (permutation order) that matches
  for (int r = 0; r < 16; ++r) {
    ParallelPlan d = pp2_dp8();
    EXPECT_EQ(p.rank_of(d.coord_of(r)), pipelines_inner[r]);
  }
  ParallelPlan q = pp2_dp8();
  std::vector<int> swapped = identity;
  std::swap(swapped[0], swapped[5]);
  q.place_ranks(swapped);
  EXPECT_EQ(q.device_map, swapped);
}
