// Schedule oracles: bubbles and in-flight activations of every schedule against closed forms, with layers of
// fixed pass times and free communication (tests/support/sim_fixture.hpp). One simulation per test process.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "sim/model/groups.hpp"
#include "strategies/estimator.hpp"
#include "strategies/schedule.hpp"
#include "tests/support/sim_fixture.hpp"

using namespace dtsim;
using namespace dtsim::sim;
using namespace dtsim::testing;

namespace {
constexpr double kEps = 1e-9;

// Idle time of a stage between its first and its last compute pass (Qi et al.'s per-stage bubble; with their
// optimizer post-validation the next iteration overlaps the staggered ends).
double span_idle(const PipelineRun& r, int stage) {
  double first = 1e300, last = 0, busy = 0;
  const auto& tasks = r.low.graph.tasks();
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const Task& t = tasks[i];
    if (t.kind != TaskKind::COMPUTE || t.duration_s <= 0 || r.low.ranks[t.rank].coord.pp != stage) continue;
    first = std::min(first, r.res.start_s[i]);
    last = std::max(last, r.res.end_s[i]);
    busy += r.res.end_s[i] - r.res.start_s[i];
  }
  return last - first - busy;
}

// A stage's timeline in unit cells (pass times 1): F forward, B backward (input), W weight gradients drawn apart
// (a zero-bubble W), '.' idle; the W of a full backward (right after its own B) is drawn as B, as DeepSeek draws it.
std::string cells(const PipelineRun& r, int stage) {
  const auto& tasks = r.low.graph.tasks();
  std::map<long, std::pair<char, std::pair<int, int>>> at;  // unit -> kind, (micro-batch, layer)
  double end = 0;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const Task& t = tasks[i];
    if (t.kind != TaskKind::COMPUTE || t.duration_s <= 0 || t.layer < 0 || r.low.ranks[t.rank].coord.pp != stage)
      continue;
    const bool w = r.low.graph.names()[t.name] == "weight-grad";
    const char k = t.phase == Phase::FORWARD ? 'F' : w ? 'W' : 'B';
    for (long u = std::lround(r.res.start_s[i]); u < std::lround(r.res.end_s[i]); ++u)
      at[u] = {k, {t.microbatch, t.layer}};
    end = std::max(end, r.res.end_s[i]);
  }
  std::string s;
  for (long u = 0; u < std::lround(end); ++u) {
    auto it = at.find(u);
    if (it == at.end()) {
      s += '.';
      continue;
    }
    char k = it->second.first;
    auto prev = at.find(u - 1);
    if (k == 'W' && prev != at.end() && prev->second.first == 'B' && prev->second.second == it->second.second) k = 'B';
    s += k;
  }
  return s;
}

const RankReport& stage_report(const PipelineRun& r, int stage) {
  for (const auto& rr : r.rep.ranks)
    if (rr.coord.pp == stage) return rr;
  throw std::runtime_error("no stage");
}
}  // namespace

// ---- Bubble fractions: (p-1)/m for GPipe and 1F1B, (p-1)/(v m) for interleaved 1F1B (Narayanan et al. SC'21).

TEST(ScheduleBubble, GPipeIsPMinusOneOverM) {
  const int p = 8, m = 32;
  auto r = run_fixed_pipeline(pipeline_plan(Schedule::GPIPE, p, m), p, 1e-3, 2e-3, 0, 1e6);
  for (int s = 0; s < p; ++s) EXPECT_NEAR(stage_report(r, s).bubble_fraction, 7.0 / 32.0, kEps) << "stage " << s;
}

TEST(ScheduleBubble, OneFOneBIsPMinusOneOverM) {
  const int p = 8, m = 32;
  auto r = run_fixed_pipeline(pipeline_plan(Schedule::ONE_F_ONE_B, p, m), p, 1e-3, 2e-3, 0, 1e6);
  EXPECT_NEAR(r.rep.max_bubble_fraction, 7.0 / 32.0, kEps);
}

TEST(ScheduleBubble, InterleavedTwoChunksIsPMinusOneOverVM) {
  const int p = 8, m = 32, v = 2;
  // 16 layers: one per model chunk, so every chunk pass takes tf (forward) and tb (backward).
  auto r = run_fixed_pipeline(pipeline_plan(Schedule::INTERLEAVED, p, m, v), p * v, 1e-3, 2e-3, 0, 1e6);
  EXPECT_NEAR(r.rep.max_bubble_fraction, 7.0 / 64.0, kEps);
  for (const auto& rr : r.rep.ranks) EXPECT_NEAR(rr.compute_s, m * v * 3e-3, kEps);
}

TEST(ScheduleBubble, InterleavedThreeChunks) {
  const int p = 4, m = 8, v = 3;
  auto r = run_fixed_pipeline(pipeline_plan(Schedule::INTERLEAVED, p, m, v), p * v, 1e-3, 2e-3, 0, 1e6);
  EXPECT_NEAR(r.rep.max_bubble_fraction, (p - 1.0) / (v * m), kEps);
}

// ---- Zero bubble (Qi et al. 2024, Table 2): T_F = T_B = T_W = 1, p = 4 -> bubbles 9, 3, 0.

TEST(ZeroBubble, OneFOneBBubbleIsNine) {
  auto r = run_fixed_pipeline(pipeline_plan(Schedule::ONE_F_ONE_B, 4, 12), 4, 1, 1, 1, 1e6);
  EXPECT_NEAR(span_idle(r, 0), 9.0, kEps);
}

TEST(ZeroBubble, ZbH1BubbleIsThree) {
  auto r = run_fixed_pipeline(pipeline_plan(Schedule::ZB_H1, 4, 12), 4, 1, 1, 1, 1e6);
  EXPECT_NEAR(span_idle(r, 0), 3.0, kEps);  // (p-1)(T_F + T_B - T_W)
}

TEST(ZeroBubble, ZbH2BubbleIsZero) {
  auto r = run_fixed_pipeline(pipeline_plan(Schedule::ZB_H2, 4, 12), 4, 1, 1, 1, 1e6);
  for (int s = 0; s < 4; ++s) EXPECT_NEAR(span_idle(r, s), 0.0, kEps) << "stage " << s;  // (p-1)(T_F+T_B-2T_W)
}

// ---- In-flight activations: m (GPipe), p - s (1F1B), p (ZB-H1), 2p - 1 (ZB-H2, first stage).

TEST(InFlight, ZbH1HoldsPMicrobatchesOnEveryStage) {
  const int p = 4, m = 12;
  const double act = 1e9;
  auto r = run_fixed_pipeline(pipeline_plan(Schedule::ZB_H1, p, m), p, 1, 1, 1, act);
  for (int s = 0; s < p; ++s) EXPECT_DOUBLE_EQ(stage_report(r, s).peak_activation_bytes, p * act) << "stage " << s;
}

TEST(InFlight, ZbH2FirstStageHoldsTwoPMinusOne) {
  const int p = 4, m = 12;
  const double act = 1e9;
  auto r = run_fixed_pipeline(pipeline_plan(Schedule::ZB_H2, p, m), p, 1, 1, 1, act);
  EXPECT_DOUBLE_EQ(stage_report(r, 0).peak_activation_bytes, (2 * p - 1) * act);
}

TEST(InFlight, InterleavedMultiplierIsOnePlusPMinusOneOverPV) {
  // Korthikanti et al.: interleaving multiplies the first stage's activation memory by 1 + (p-1)/(p v).
  const int p = 4, m = 8, v = 2;
  const double act = 1e9;  // per layer and micro-batch; one layer per chunk, so a stage holds v*act per micro-batch
  auto r = run_fixed_pipeline(pipeline_plan(Schedule::INTERLEAVED, p, m, v), p * v, 1e-3, 2e-3, 0, act);
  const double one_f_one_b = p * v * act;  // p micro-batches of the whole stage
  EXPECT_DOUBLE_EQ(stage_report(r, 0).peak_activation_bytes / one_f_one_b, 1.0 + (p - 1.0) / (p * v));
}

// ---- DAPPLE's event recurrence (seed-algorithms.md §4, from the released planner) equals the simulated
// timeline for uneven stages when communication is free.

TEST(Dapple, RecurrenceEqualsSimulatedTimeline) {
  const int p = 4, m = 6;
  const std::vector<int> layers = {1, 3, 2, 1};
  const double tf = 1e-3, tb = 2e-3;
  ParallelPlan plan = pipeline_plan(Schedule::ONE_F_ONE_B, p, m);
  plan.dapple_warmup = true;
  plan.layers_per_stage = layers;
  auto r = run_fixed_pipeline(plan, 7, tf, tb, 0, 1e6);

  // Recurrence: f[i][x].start = max(b[i-Phi][x].end, f[i-1][x].end, f[i][x-1].end),
  //             b[i][x].start = max(b[i][x+1].end, b[i-1][x].end, f[i+Phi-1][x].end), Phi_x = p - x.
  std::vector<std::vector<double>> fe(m, std::vector<double>(p, 0)), be(m, std::vector<double>(p, 0));
  std::vector<std::vector<bool>> fd(m, std::vector<bool>(p, false)), bd(m, std::vector<bool>(p, false));
  // Evaluate in an order that respects the recurrence's dependencies (iterate to a fixed point).
  for (int round = 0; round < 4 * m * p; ++round)
    for (int x = 0; x < p; ++x)
      for (int i = 0; i < m; ++i) {
        const int phi = p - x;
        if (!fd[i][x]) {
          bool ok = true;
          double st = 0;
          auto need = [&](bool cond, bool done, double end) {
            if (!cond) return;
            if (!done) ok = false;
            st = std::max(st, end);
          };
          need(i - phi >= 0, i - phi >= 0 && bd[i - phi][x], i - phi >= 0 ? be[i - phi][x] : 0);
          need(i > 0, i > 0 && fd[i - 1][x], i > 0 ? fe[i - 1][x] : 0);
          need(x > 0, x > 0 && fd[i][x - 1], x > 0 ? fe[i][x - 1] : 0);
          if (ok) fe[i][x] = st + layers[x] * tf, fd[i][x] = true;
        }
        if (!bd[i][x]) {
          bool ok = true;
          double st = 0;
          auto need = [&](bool cond, bool done, double end) {
            if (!cond) return;
            if (!done) ok = false;
            st = std::max(st, end);
          };
          const int fi = std::min(i + phi - 1, m - 1);
          need(x < p - 1, x < p - 1 && bd[i][x + 1], x < p - 1 ? be[i][x + 1] : 0);
          need(i > 0, i > 0 && bd[i - 1][x], i > 0 ? be[i - 1][x] : 0);
          need(true, fd[fi][x], fe[fi][x]);
          if (ok) be[i][x] = st + layers[x] * tb, bd[i][x] = true;
        }
      }
  // Simulated end of each pass = end of its last compute task.
  std::map<std::tuple<int, int, int>, double> sim_end;  // (stage, mb, 0=F / 1=B)
  const auto& tasks = r.low.graph.tasks();
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const Task& t = tasks[i];
    if (t.kind != TaskKind::COMPUTE || t.microbatch < 0) continue;
    auto key = std::make_tuple(r.low.ranks[t.rank].coord.pp, t.microbatch, t.phase == Phase::FORWARD ? 0 : 1);
    sim_end[key] = std::max(sim_end[key], r.res.end_s[i]);
  }
  double L = 0;
  for (int x = 0; x < p; ++x)
    for (int i = 0; i < m; ++i) {
      ASSERT_TRUE(fd[i][x] && bd[i][x]) << "recurrence did not converge";
      EXPECT_NEAR((sim_end[{x, i, 0}]), fe[i][x], kEps) << "F " << i << " stage " << x;
      EXPECT_NEAR((sim_end[{x, i, 1}]), be[i][x], kEps) << "B " << i << " stage " << x;
      L = std::max(L, be[i][x]);
    }
  EXPECT_NEAR(r.rep.iteration_time_s, L, kEps);
}

// ---- DualPipeV against DeepSeek's hand-drawn timeline (DualPipe README, "Example DualPipeV scheduling for 4 PP
// ranks (8 PP stages) and 10 micro-batches", images/dualpipev.png): with a forward, a backward for input and a
// backward for weights one cell each (a full backward two, an overlapped F&B three) every device's row is 66 cells,
// device d starts after d idle cells, and 60 are busy: idle 6 = (PP/2 - 1)(F&B + B - 3W) = 3 (3 + 2 - 3), the
// report's Table 2. The cells were read off the figure's pixels (49 px each): device 0
// FFFFFFFFBWFBWFBWFFBB...FBBFBBFBBFBBFBB.BBFBB.BBFBB.BBFBBBBBWBWBWBW, devices 1-3 alike with 1-3 idle cells first.
// Where a device idles inside its row depends on when its exchanges complete (the simulation waits for each
// batch as dualpipev.py's _commit_and_wait_comm does; the figure places some waits one pass later), not the total.

TEST(DualPipeV, MatchesDeepSeeksFourDeviceTimeline) {
  const int p = 4, m = 10;
  auto r = run_fixed_pipeline(pipeline_plan(Schedule::DUALPIPEV, p, m, 2), 2 * p, 1, 1, 1, 1e6);
  EXPECT_NEAR(r.rep.iteration_time_s, 66.0, kEps);
  for (int s = 0; s < p; ++s) {
    const std::string row = cells(r, s);
    EXPECT_EQ(row.size(), 66u) << "device " << s << ": " << row;
    EXPECT_EQ(row.find_first_not_of('.'), static_cast<std::size_t>(s)) << row;
    EXPECT_EQ(std::count(row.begin(), row.end(), '.'), 6) << row;
    EXPECT_NEAR(span_idle(r, s), 6.0 - s, kEps) << row;
    EXPECT_NEAR(stage_report(r, s).compute_s, m * 2 * 3.0, kEps);
  }
}

// The README's table: DualPipeV holds PP + 1 chunk activations per device (PP = 2p model chunks).
TEST(DualPipeV, HoldsPPPlusOneChunkActivations) {
  const int p = 4, m = 10;
  const double act = 1e9;  // one layer per chunk
  auto r = run_fixed_pipeline(pipeline_plan(Schedule::DUALPIPEV, p, m, 2), 2 * p, 1, 1, 1, act);
  const auto orders = sched::plan_orders(r.plan);
  for (int s = 0; s < p; ++s) {
    EXPECT_DOUBLE_EQ(stage_report(r, s).peak_activation_bytes, (2 * p + 1) * act) << "stage " << s;
    EXPECT_EQ(sched::max_in_flight(orders[s], true), 2 * p + 1) << "stage " << s;
  }
}

// ---- Bidirectional DualPipe against DeepSeek's figure (DualPipe README, "Example DualPipe scheduling for 8 PP ranks
// and 20 micro-batches in two directions", images/dualpipe.png): the same cells as DualPipeV's figure -- every
// device's row 66 cells, 60 busy (20 micro-batches x F + B + W), 6 idle = (PP/2 - 1)(F&B + B - 3W) with PP = 8 --
// and device d starts after min(d, 7 - d) idle cells (devices 0 and 7 start the two directions at once).

TEST(DualPipe, MatchesDeepSeeksEightDeviceTimeline) {
  const int p = 8, m = 20;
  auto r = run_fixed_pipeline(pipeline_plan(Schedule::DUALPIPE, p, m, 2), p, 1, 1, 1, 1e6);
  EXPECT_NEAR(r.rep.iteration_time_s, 66.0, kEps);
  for (int s = 0; s < p; ++s) {
    const std::string row = cells(r, s);
    EXPECT_EQ(row.size(), 66u) << "device " << s << ": " << row;
    EXPECT_EQ(row.find_first_not_of('.'), static_cast<std::size_t>(std::min(s, p - 1 - s))) << row;
    EXPECT_EQ(std::count(row.begin(), row.end(), '.'), 6) << row;
    EXPECT_NEAR(stage_report(r, s).compute_s, m * 3.0, kEps);
  }
}

// The README's table: DualPipe holds PP + 1 chunk activations per device (PP = p stages, a chunk one stage of a
// copy) and two copies of the parameters (below, DualPipe.HoldsTwoCopiesOfEveryStage).
TEST(DualPipe, HoldsPPPlusOneChunkActivations) {
  const int p = 4, m = 10;
  const double act = 1e9;  // one layer per chunk
  auto r = run_fixed_pipeline(pipeline_plan(Schedule::DUALPIPE, p, m, 2), p, 1, 1, 1, act);
  const auto orders = sched::plan_orders(r.plan);
  for (int s = 0; s < p; ++s) {
    EXPECT_DOUBLE_EQ(stage_report(r, s).peak_activation_bytes, (p + 1) * act) << "stage " << s;
    EXPECT_EQ(sched::max_in_flight(orders[s], true), p + 1) << "stage " << s;
  }
}

// The two copies' gradients are summed between mirror stages (example_dualpipe.py: p0.grad += p1all[pp-1-rank]):
// one all-reduce per rank over {s, pp-1-s} of the gradient shard its optimizer steps, in the model's dtype.
TEST(DualPipe, SumsTheCopiesGradientsWithTheMirrorStage) {
  const int p = 4, m = 8;
  auto r = run_fixed_pipeline(pipeline_plan(Schedule::DUALPIPE, p, m, 2), p, 1, 1, 1, 1e6);
  const auto& tasks = r.low.graph.tasks();
  std::map<int, int> syncs;  // stage -> tasks of its copy-grad-sync all-reduce
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const Task& t = tasks[i];
    if (r.low.graph.names()[t.name].rfind("copy-grad-sync", 0) != 0 || t.rank < 0) continue;
    ++syncs[r.low.ranks[t.rank].coord.pp];
  }
  for (int s = 0; s < p; ++s) EXPECT_GT(syncs[s], 0) << "stage " << s;
  ParallelPlan plan = pipeline_plan(Schedule::DUALPIPE, p, m, 2);
  for (int s = 0; s < p; ++s) {
    const auto members = group_members(plan, plan.rank_of(RankCoord{0, 0, s, 0}), GroupAxis::EMB);
    EXPECT_EQ(members, (std::vector<int>{std::min(s, p - 1 - s), std::max(s, p - 1 - s)})) << "stage " << s;
  }
}

// ---- Overlapped pairs and DualPipeV's exchanges on a MoE model: folded = unfolded, and the pairs hide all-to-alls.

namespace {
ParallelPlan moe_plan(const std::string& schedule, bool overlap, const std::string& routing) {
  ParallelPlan plan;
  plan.tp = 2;
  plan.sequence_parallel = true;
  plan.pp = 4;
  plan.ep = 4;
  plan.dp = 4;
  plan.micro_batch_size = 1;
  plan.global_batch_size = 32;
  set_schedule(plan, schedule, "test");
  plan.overlap_moe_comm = overlap;
  plan.routing = routing_from_string(routing, "test");
  return plan;
}
Simulation run_moe(const std::string& schedule, bool overlap, FoldMode fold, const std::string& routing) {
  static const TransformerSpec m = model_preset("mixtral-8x7b");
  static const ClusterSpec cluster = load_cluster("dgx-h100:32");
  static const Calibration cal = default_calibration("h100-sxm5-80gb");
  const ParallelPlan plan = moe_plan(schedule, overlap, routing);
  SimOptions opt;
  opt.fold = fold;
  opt.engine = FlowEngine::MAXMIN;
  Inputs in{&m, &cluster, &plan, &cal, &opt};
  return simulate(in);
}
}  // namespace

TEST(OverlappedPairs, FoldedEqualsUnfolded) {
  for (const auto& [schedule, overlap] :
       {std::pair<std::string, bool>{"dualpipev", false}, {"dualpipe", false}, {"interleaved:2", true}}) {
    const Simulation folded = run_moe(schedule, overlap, FoldMode::AUTO, "balanced"),
                     unfolded = run_moe(schedule, overlap, FoldMode::NONE, "balanced");
    EXPECT_LT(folded.lowered.ranks.size(), unfolded.lowered.ranks.size()) << schedule;
    EXPECT_NEAR(folded.report.iteration_time_s, unfolded.report.iteration_time_s,
                1e-9 * unfolded.report.iteration_time_s)
        << schedule;
  }
}

TEST(OverlappedPairs, HideAllToAllsWithoutChangingCompute) {
  // Capacity with padding: no host synchronisation in the dispatcher, so nothing but the pairing differs.
  const Simulation plain = run_moe("interleaved:2", false, FoldMode::AUTO, "balanced,cf:1.0:pad"),
                   paired = run_moe("interleaved:2", true, FoldMode::AUTO, "balanced,cf:1.0:pad");
  EXPECT_LT(paired.report.iteration_time_s, plain.report.iteration_time_s);
  // The same kernels: compute differs only by the interference of the collectives now running beside it; the
  // expert-parallel communication (kind 2, comm_kind_name) exposed falls (only the steady state pairs).
  double plain_compute = 0, paired_compute = 0, plain_exposed = 0, paired_exposed = 0;
  for (const auto& r : plain.report.ranks) {
    plain_compute += r.compute_s - r.interference_s;
    plain_exposed += r.exposed_by_kind_s[2];
  }
  for (const auto& r : paired.report.ranks) {
    paired_compute += r.compute_s - r.interference_s;
    paired_exposed += r.exposed_by_kind_s[2];
  }
  EXPECT_NEAR(paired_compute, plain_compute, 1e-9 * plain_compute);
  EXPECT_LT(paired_exposed, 0.8 * plain_exposed);  // 0.119 s against 0.184 s summed over the ranks (2026-12-03)
}

TEST(OverlappedPairs, EstimatorFollowsTheSimulator) {
  // The planners' estimator credits what the overlapped pairs hide (since 2026-12-03: the two passes' compute and
  // communication segments run as the lowering's link_pair interleaves them, estimator.cpp paired_time_s) and times
  // DualPipeV's bubble by the report's formula with F&B as the pair. Here, with only m = 2p = 8 micro-batches:
  // interleaved:2 with --overlap-moe-comm -3.4% (+2.1% before the credit), dualpipev -7.0% (-4.6% before: the
  // missing credit had offset an under-estimate of DualPipeV's short pipeline, which the formula's bubble leaves
  // out at m = 2p). With 32 micro-batches (PlannerContract.EstimatorCreditsOverlappedMoePairs) both are within 4%.
  const TransformerSpec m = model_preset("mixtral-8x7b");
  const ClusterSpec cluster = load_cluster("dgx-h100:32");
  const Calibration cal = default_calibration("h100-sxm5-80gb");
  const std::string routing = "balanced,cf:1.0:pad";
  for (const std::string& schedule : {std::string("interleaved:2"), std::string("dualpipev")}) {
    const bool overlap = schedule != "dualpipev";
    const double est = estimate::estimate(m, cluster, cal, moe_plan(schedule, overlap, routing)).iteration_s;
    const double sim = run_moe(schedule, overlap, FoldMode::AUTO, routing).report.iteration_time_s;
    EXPECT_NEAR(est, sim, (overlap ? 0.05 : 0.08) * sim) << schedule;
  }
}
