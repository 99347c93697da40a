// Contract tests: every schedule x several (p, m, v) simulated with fixed pass times and free communication
// must run every forward before its backward (and W after B), conserve work, respect every dependency of the
// task graph, keep memory non-negative and release all activations by the end of the iteration.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "tests/support/sim_fixture.hpp"

using namespace dtsim;
using namespace dtsim::sim;
using namespace dtsim::testing;

namespace {
struct Case {
  std::string schedule;
  int p, m;
};
std::string name_of(const ::testing::TestParamInfo<Case>& info) {
  std::string s = info.param.schedule + "_p" + std::to_string(info.param.p) + "_m" + std::to_string(info.param.m);
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}
}  // namespace

class ScheduleContract : public ::testing::TestWithParam<Case> {};

TEST_P(ScheduleContract, RunsCorrectly) {
  const Case c = GetParam();
  ParallelPlan plan = pipeline_plan(Schedule::ONE_F_ONE_B, c.p, c.m);
  set_schedule(plan, c.schedule, "test");
  const int v = plan.virtual_stages;
  const double tf = 1e-3, tb = 1.5e-3, tw = plan.split_backward() ? 0.5e-3 : 0.0;
  auto r = run_fixed_pipeline(plan, c.p * v, tf, plan.split_backward() ? tb : tb + 0.5e-3, tw, 1e6);
  const auto& g = r.low.graph;
  const auto& tasks = g.tasks();

  // Dependencies respected.
  for (std::size_t i = 0; i < tasks.size(); ++i)
    for (auto* s = g.succ_begin(static_cast<std::int32_t>(i)); s != g.succ_end(static_cast<std::int32_t>(i)); ++s)
      ASSERT_LE(r.res.end_s[i], r.res.start_s[*s] + 1e-12) << "task " << i << " -> " << *s;

  // Per (stage, micro-batch, layer): forward ends before backward starts; W after B.
  std::map<std::tuple<int, int, int>, double> f_end, b_start, b_end, w_start;
  std::map<int, double> work;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const Task& t = tasks[i];
    if (t.kind != TaskKind::COMPUTE || t.layer < 0) continue;
    const int stage = r.low.ranks[t.rank].coord.pp;
    auto key = std::make_tuple(stage, t.microbatch, t.layer);
    work[stage] += r.res.end_s[i] - r.res.start_s[i];
    if (t.phase == Phase::FORWARD) f_end[key] = std::max(f_end[key], r.res.end_s[i]);
    if (t.phase == Phase::BACKWARD) {
      const bool is_w = g.names()[t.name] == "weight-grad";
      auto& start = is_w ? w_start : b_start;
      start[key] = start.count(key) ? std::min(start[key], r.res.start_s[i]) : r.res.start_s[i];
      if (!is_w) b_end[key] = std::max(b_end[key], r.res.end_s[i]);
    }
  }
  ASSERT_EQ(f_end.size(), static_cast<std::size_t>(c.p * v * c.m));
  for (const auto& [key, fe] : f_end) {
    ASSERT_TRUE(b_start.count(key));
    EXPECT_LE(fe, b_start[key] + 1e-12);
    if (plan.split_backward()) {
      ASSERT_TRUE(w_start.count(key));
      EXPECT_LE(b_end[key], w_start[key] + 1e-12);
    }
  }
  // Work conserved: every stage computes v chunks x m micro-batches x (tf + tb + tw).
  for (int s = 0; s < c.p; ++s) EXPECT_NEAR(work[s], v * c.m * (tf + tb + 0.5e-3), 1e-9) << "stage " << s;
  // Memory: never negative (checked while analysing) and back to the static level at the end.
  for (const auto& rr : r.rep.ranks) {
    const auto& last = rr.memory_timeline.back().second;
    EXPECT_NEAR(last[static_cast<int>(MemCategory::ACTIVATIONS)], 0.0, 1e-3);
    EXPECT_NEAR(last[static_cast<int>(MemCategory::RECOMPUTE)], 0.0, 1e-3);
  }
}

INSTANTIATE_TEST_SUITE_P(AllSchedules, ScheduleContract,
                         ::testing::Values(Case{"gpipe", 1, 3}, Case{"gpipe", 4, 6}, Case{"1f1b", 2, 1},
                                           Case{"1f1b", 4, 3}, Case{"1f1b", 4, 9}, Case{"1f1b:dapple", 3, 5},
                                           Case{"1f1b:dapple", 4, 8}, Case{"interleaved:2", 2, 4},
                                           Case{"interleaved:2", 4, 8}, Case{"interleaved:3", 4, 12},
                                           Case{"interleaved:4", 2, 2}, Case{"zb-h1", 2, 5}, Case{"zb-h1", 4, 3},
                                           Case{"zb-h1", 4, 10}, Case{"zb-h2", 3, 7}, Case{"zb-h2", 4, 4},
                                           Case{"zb-h2", 4, 12}, Case{"dualpipev", 2, 4}, Case{"dualpipev", 3, 7},
                                           Case{"dualpipev", 4, 8}, Case{"dualpipev", 4, 13}, Case{"dualpipe", 2, 4},
                                           Case{"dualpipe", 4, 8}, Case{"dualpipe", 4, 14}, Case{"dualpipe", 6, 12}),
                         name_of);
