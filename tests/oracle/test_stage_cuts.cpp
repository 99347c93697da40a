// Stage boundaries inside layers (issue "Seeds", RaNNC's operator-level partitioning): ParallelPlan::stage_cut_atoms
// moves the first atoms of a stage's first layer to the stage before. Oracles:
//  - cuts of 0 atoms are the plan without cuts (same graph, same times);
//  - a cut moves work and weights, nothing is lost: the iteration's FLOPs and the parameters summed over the stages
//    equal the uncut plan's, the stage before gains exactly the moved atoms' parameters, and the two stages' compute
//    adds up to the uncut pair's;
//  - the transfer at a cut carries the hidden state and the tensors that cross it (q, k, v after atom 0), forward
//    and backward;
//  - the footprint and the estimator follow; JSON round trip and one-line errors.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "sim/model/footprint.hpp"
#include "sim/simulate.hpp"
#include "strategies/estimator.hpp"
#include "strategies/transformer_costs.hpp"
#include "tests/support/error_of.hpp"
#include "traces/json_util.hpp"

namespace dtsim {
namespace {
using namespace dtsim::sim;
using dtsim::testing::error_of;

const TransformerSpec& model() {
  static const TransformerSpec m = [] {
    TransformerSpec x = model_preset("gpt3-1.3b");
    x.num_layers = 8;
    return x;
  }();
  return m;
}

const Calibration& cal() {
  static const Calibration c = default_calibration("a100-sxm4-80gb");
  return c;
}

ParallelPlan plan(std::vector<int> cuts) {
  ParallelPlan p;
  p.tp = 2;
  p.pp = 4;
  p.dp = 1;
  p.micro_batch_size = 1;
  p.global_batch_size = 8;
  p.sequence_parallel = true;
  p.stage_cut_atoms = std::move(cuts);
  return p;
}

Simulation run(const ParallelPlan& p, NetworkMode network = NetworkMode::ANALYTIC) {
  const ClusterSpec cluster = load_cluster("dgx-a100:8");
  SimOptions opt;
  opt.network = network;
  opt.engine = FlowEngine::MAXMIN;  // SimGrid runs once per process
  Inputs in{&model(), &cluster, &p, &cal(), &opt};
  return simulate(in);
}

const RankReport& stage_rank(const Simulation& sim, int s) {
  for (const auto& r : sim.report.ranks)
    if (r.coord.pp == s && r.coord.tp == 0) return r;
  throw std::logic_error("no simulated rank of stage " + std::to_string(s));
}

TEST(StageCuts, ZeroAtomsIsThePlanWithoutCuts) {
  for (NetworkMode network : {NetworkMode::ANALYTIC, NetworkMode::FLOW}) {
    const Simulation a = run(plan({}), network), b = run(plan({0, 0, 0}), network);
    EXPECT_EQ(a.lowered.graph.size(), b.lowered.graph.size());
    EXPECT_EQ(a.report.iteration_time_s, b.report.iteration_time_s);
  }
}

TEST(StageCuts, WorkAndWeightsMoveAndNothingIsLost) {
  const Simulation whole = run(plan({})), cut = run(plan({2, 4, 1}));
  EXPECT_NEAR(cut.lowered.hardware_flops_per_iteration, whole.lowered.hardware_flops_per_iteration,
              1e-9 * whole.lowered.hardware_flops_per_iteration);
  double params_whole = 0, params_cut = 0;
  for (int s = 0; s < 4; ++s) {
    params_whole += whole.lowered.ranks[stage_rank(whole, s).sim_index].static_mem.params;
    params_cut += cut.lowered.ranks[stage_rank(cut, s).sim_index].static_mem.params;
  }
  EXPECT_NEAR(params_cut, params_whole, 1e-9 * params_whole);
  // Stage 0 takes atoms 0-1 (QKV and the core) of stage 1's first layer; stage 2 gives atoms 0-3 of its first layer
  // to stage 1 and takes atom 0 of stage 3's.
  auto params = [](const Simulation& sim, int s) {
    return sim.lowered.ranks[stage_rank(sim, s).sim_index].static_mem.params;
  };
  EXPECT_DOUBLE_EQ(params(cut, 0) - params(whole, 0), cost::layer_params_per_rank_atoms(model(), 2, 0, 2));
  EXPECT_NEAR(params(cut, 2) - params(whole, 2),
              cost::layer_params_per_rank_atoms(model(), 2, 0, 1) - cost::layer_params_per_rank_atoms(model(), 2, 0, 4),
              1e-6 * params(whole, 2));
  // Compute moves between neighbours and adds up: over all stages, and over the pair a single cut joins.
  double all_whole = 0, all_cut = 0;
  for (int s = 0; s < 4; ++s) all_whole += stage_rank(whole, s).compute_s, all_cut += stage_rank(cut, s).compute_s;
  EXPECT_NEAR(all_cut, all_whole, 1e-9 * all_whole);
  const Simulation one = run(plan({2, 0, 0}));
  const double pair_whole = stage_rank(whole, 0).compute_s + stage_rank(whole, 1).compute_s;
  const double pair_cut = stage_rank(one, 0).compute_s + stage_rank(one, 1).compute_s;
  EXPECT_NEAR(pair_cut, pair_whole, 1e-9 * pair_whole);
  EXPECT_GT(stage_rank(one, 0).compute_s, stage_rank(whole, 0).compute_s);
  EXPECT_LT(stage_rank(one, 1).compute_s, stage_rank(whole, 1).compute_s);
  // The summary says where the boundaries are.
  const ClusterSpec cluster = load_cluster("dgx-a100:8");
  SimOptions opt;
  const ParallelPlan p = plan({2, 4, 1});
  const std::string text = human_summary({&model(), &cluster, &p, &cal(), &opt}, cut.lowered, cut.engine, cut.report);
  EXPECT_NE(text.find("boundaries inside layers (atoms before the cut) 2,4,1"), std::string::npos) << text;
}

TEST(StageCuts, ReplicatedStagesCutToo) {
  // Stage replication (RaNNC's plans): stage 1 on two replicas, each computing half of every micro-batch.
  ParallelPlan whole = plan({});
  whole.tp = 1;
  whole.sequence_parallel = false;
  whole.micro_batch_size = 2;
  whole.global_batch_size = 16;
  whole.stage_replicas = {1, 2, 1, 1};
  ParallelPlan cut = whole;
  cut.stage_cut_atoms = {3, 1, 0};
  const ClusterSpec c5 = load_cluster("dgx-a100:5");
  cut.validate(model(), c5);
  SimOptions opt;
  opt.network = NetworkMode::FLOW;
  opt.engine = FlowEngine::MAXMIN;
  Inputs a{&model(), &c5, &whole, &cal(), &opt}, b{&model(), &c5, &cut, &cal(), &opt};
  const Simulation sw = simulate(a), sc = simulate(b);
  EXPECT_NEAR(sc.lowered.hardware_flops_per_iteration, sw.lowered.hardware_flops_per_iteration,
              1e-9 * sw.lowered.hardware_flops_per_iteration);
  // (Compute times do not add up exactly here: moved atoms run at the other stage's per-replica micro-batch.)
  // Both replicas of stage 1 send their halves, with the cut's tensors, to stage 2.
  double to2 = 0;
  const auto& g = sc.lowered.graph;
  for (const auto& t : g.tasks())
    if (t.kind == TaskKind::FLOW && t.peer >= 0 && g.names()[static_cast<std::size_t>(t.name)] == "send-activation" &&
        sc.lowered.ranks[static_cast<std::size_t>(t.peer)].coord.pp == 2 && t.microbatch == 0)
      to2 += t.bytes;
  const double hidden = 2.0 * model().seq_len * model().hidden * dtype_bytes(model().dtype);
  EXPECT_NEAR(to2, hidden * 4, 1e-9 * to2);  // cut before atom 1: q, k, v (3 hidden) and the hidden state
}

TEST(StageCuts, TheCutCarriesWhatCrossesIt) {
  // One cut after the QKV projection (atom 0 on stage 0): q, k and v cross with the hidden state.
  ParallelPlan p = plan({1, 0, 0});
  const Simulation s = run(p, NetworkMode::FLOW);
  const auto& g = s.lowered.graph;
  const double e = dtype_bytes(model().dtype);
  const double hidden = p.micro_batch_size * static_cast<double>(model().seq_len) * model().hidden * e;
  const double qkv_per_rank = cost::cut_extra_bytes(model(), cost::shape_of(p, p.micro_batch_size), 1);
  EXPECT_DOUBLE_EQ(qkv_per_rank, 3 * hidden / p.tp);  // GPT: q, k, v of the hidden width, split over TP
  // Stage 0 -> 1 forward and 1 -> 0 backward, per micro-batch, summed over the TP ranks (all simulated).
  std::map<std::pair<int, std::string>, double> bytes;
  for (const auto& t : g.tasks()) {
    if (t.kind != TaskKind::FLOW || t.peer < 0) continue;
    const std::string& name = g.names()[static_cast<std::size_t>(t.name)];
    const int from = s.lowered.ranks[static_cast<std::size_t>(t.rank)].coord.pp;
    const int to = s.lowered.ranks[static_cast<std::size_t>(t.peer)].coord.pp;
    if ((name == "send-activation" && from == 0 && to == 1) || (name == "send-gradient" && from == 1 && to == 0))
      bytes[{t.microbatch, name}] += t.bytes;
  }
  // Folded TP: the representative rank's messages stand for its TP group's.
  const double ranks = s.lowered.fold_tp ? 1.0 : p.tp;
  ASSERT_EQ(bytes.size(), 2u * p.num_microbatches());
  for (const auto& [key, b] : bytes)
    EXPECT_NEAR(b, (hidden / p.tp + qkv_per_rank) * ranks, 1e-9 * b) << key.second << " " << key.first;
}

TEST(StageCuts, FootprintEstimatorAndMemoryFollow) {
  const ClusterSpec c8 = load_cluster("dgx-a100:8");
  SimOptions opt;
  for (const ParallelPlan& p : {plan({2, 4, 1}), plan({0, 3, 0})}) {
    p.validate(model(), c8);
    const Footprint f = estimate_footprint(model(), c8, p, cal(), opt, {});
    const Lowered low = lower(model(), c8, p, cal(), opt);
    EXPECT_NEAR(f.tasks, static_cast<double>(low.graph.size()), 0.02 * static_cast<double>(low.graph.size()));
  }
  // The estimator moves the same work: the cut stage before is slower, the cut stage after faster.
  const auto whole = estimate::estimate(model(), c8, cal(), plan({})),
             cut = estimate::estimate(model(), c8, cal(), plan({4, 0, 0}));
  EXPECT_GT(cut.stage_peak_bytes[0], whole.stage_peak_bytes[0]);
  EXPECT_LT(cut.stage_peak_bytes[1], whole.stage_peak_bytes[1]);
  const Simulation sw = run(plan({})), sc = run(plan({4, 0, 0}));
  for (int s : {0, 1})
    EXPECT_NEAR(cut.stage_peak_bytes[static_cast<std::size_t>(s)] - whole.stage_peak_bytes[static_cast<std::size_t>(s)],
                stage_rank(sc, s).peak_bytes - stage_rank(sw, s).peak_bytes,
                0.05 * std::abs(stage_rank(sc, s).peak_bytes - stage_rank(sw, s).peak_bytes) + 1e6)
        << "stage " << s;
}

TEST(StageCuts, JsonRoundTripAndErrors) {
  const ClusterSpec c8 = load_cluster("dgx-a100:8");
  ParallelPlan p = plan({2, 0, 3});
  p.validate(model(), c8);
  const ParallelPlan back = plan_from_json(to_json(p, model().num_layers), "round trip");
  EXPECT_EQ(back.stage_cut_atoms, p.stage_cut_atoms);
  EXPECT_EQ(error_of<Error>([&] {
              plan({2, 0}).validate(model(), c8);
            }),
            "plan: stage_cut_atoms has 2 entries for 3 stage boundaries (one per boundary: pp - 1)");
  EXPECT_EQ(error_of<Error>([&] {
              plan({2, 5, 0}).validate(model(), c8);
            }),
            "plan: stage_cut_atoms entries must be in 0..4, got 5");
  ParallelPlan interleaved = plan({1, 0, 0});
  set_schedule(interleaved, "interleaved:2", "test");
  EXPECT_EQ(error_of<Error>([&] { interleaved.validate(model(), c8); }),
            "plan: stage boundaries inside layers (stage_cut_atoms) do not support several model chunks per stage");
  const TransformerSpec moe = model_preset("mixtral-8x7b");
  ParallelPlan mp = plan({1, 0, 0});
  mp.tp = 1;
  mp.pp = 4;
  mp.dp = 2;
  mp.sequence_parallel = false;
  mp.global_batch_size = 16;
  EXPECT_EQ(error_of<Error>([&] { mp.validate(moe, c8); }),
            "plan: stage boundaries inside layers (stage_cut_atoms) do not support mixture-of-experts layers");
}

}  // namespace
}  // namespace dtsim
