// Oracle tests of partial full recompute (issue "Calibrate": torchtitan's layer AC rows; Megatron's
// --recompute-granularity full --recompute-method block --recompute-num-layers N,
// megatron/core/transformer/transformer_block.py _checkpointed_forward): the first N decoder layers of every model
// chunk recompute their forward in the backward and the others keep their activations -- the work and the stored
// activations against their closed forms, the time between no and full recompute in the simulator and the
// estimator, folded = unfolded, the plan file and the checks of the option.
#include <gtest/gtest.h>

#include <cmath>

#include "strategies/estimator.hpp"
#include "strategies/memory_model.hpp"
#include "strategies/transformer_costs.hpp"
#include "tests/support/sim_fixture.hpp"
#include "traces/error.hpp"

using namespace dtsim;
using namespace dtsim::testing;

namespace {
const Calibration& calibration() {
  static const Calibration cal = default_calibration("h100-sxm5-80gb");
  return cal;
}
Simulation simulate_plan(const TransformerSpec& m, const ClusterSpec& c, const ParallelPlan& p,
                         FoldMode fold = FoldMode::AUTO) {
  SimOptions opt;
  opt.engine = FlowEngine::MAXMIN;
  opt.fold = fold;
  Inputs in{&m, &c, &p, &calibration(), &opt};
  return simulate(in);
}
// Llama 3 8B (32 layers) at TP 2, PP 2 interleaved over 2 chunks per rank (8 layers per chunk), DP 2.
ParallelPlan block_plan(Recompute rc, int n) {
  ParallelPlan p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 2;
  p.sequence_parallel = true;
  p.global_batch_size = 8;
  set_schedule(p, "interleaved:2", "test");
  p.recompute = rc;
  p.recompute_num_layers = n;
  return p;
}
}  // namespace

// The layers a plan recomputes: the first N of each chunk of 8 (chunks start at layers 0, 8, 16, 24).
TEST(RecomputeLayers, TheFirstNLayersOfEveryChunkRecompute) {
  const TransformerSpec m = model_preset("llama3-8b");
  const ParallelPlan p = block_plan(Recompute::FULL, 3);
  std::vector<int> recomputed;
  for (int l = 0; l < m.num_layers; ++l)
    if (p.recomputes_layer(l, m.num_layers)) recomputed.push_back(l);
  EXPECT_EQ(recomputed, (std::vector<int>{0, 1, 2, 8, 9, 10, 16, 17, 18, 24, 25, 26}));
  EXPECT_TRUE(block_plan(Recompute::FULL, 0).recomputes_layer(31, m.num_layers));  // 0: every layer
}

// Hardware FLOPs of an iteration: the recomputed forwards add (full - none) x N / 8, the share of every chunk's
// layers that recompute (embedding and head never recompute).
TEST(RecomputeLayers, RecomputedWorkIsTheClosedFormShareOfFullRecompute) {
  const TransformerSpec m = model_preset("llama3-8b");
  const ClusterSpec c = load_cluster("dgx-h100:8");
  const double none = simulate_plan(m, c, block_plan(Recompute::NONE, 0)).lowered.hardware_flops_per_iteration;
  const double full = simulate_plan(m, c, block_plan(Recompute::FULL, 0)).lowered.hardware_flops_per_iteration;
  ASSERT_GT(full, none);
  for (int n : {1, 3, 7}) {
    const double block = simulate_plan(m, c, block_plan(Recompute::FULL, n)).lowered.hardware_flops_per_iteration;
    EXPECT_NEAR(block - none, (full - none) * n / 8.0, 1e-9 * full) << n;
  }
}

// Stored activations per micro-batch on a stage: 2 chunks x N layers store the layer input only, the other 16 - 2N
// store everything; the peak memory lies between full and no recompute.
TEST(RecomputeLayers, StoredActivationsAreTheClosedForm) {
  const TransformerSpec m = model_preset("llama3-8b");
  const ParallelPlan p = block_plan(Recompute::FULL, 3);
  const double full = cost::layer_activation_bytes(m, cost::shape_of(p, 1)).stored;
  const double kept = cost::layer_activation_bytes(m, cost::shape_of(block_plan(Recompute::NONE, 0), 1)).stored;
  ASSERT_LT(full, kept);
  const double emb = cost::embedding_activation_bytes(m, cost::shape_of(p, 1)).stored;
  const double head = cost::head_activation_bytes(m, cost::shape_of(p, 1)).stored;
  EXPECT_NEAR(memory::stage_activation_bytes_per_microbatch(m, p, 0), 6 * full + 10 * kept + emb, 1e-6 * kept);
  EXPECT_NEAR(memory::stage_activation_bytes_per_microbatch(m, p, 1), 6 * full + 10 * kept + head, 1e-6 * kept);
  for (int s = 0; s < 2; ++s) {
    const double peak = memory::analytic_peak_bytes(m, p, s, 0);
    EXPECT_GT(peak, memory::analytic_peak_bytes(m, block_plan(Recompute::FULL, 0), s, 0)) << s;
    EXPECT_LT(peak, memory::analytic_peak_bytes(m, block_plan(Recompute::NONE, 0), s, 0)) << s;
  }
}

// Iteration time: more recomputed layers, more time, from no recompute to full, in the simulator and the planners'
// estimator alike; folding the TP and DP copies does not change it.
TEST(RecomputeLayers, TimeGrowsWithTheRecomputedLayersAndFoldsExactly) {
  const TransformerSpec m = model_preset("llama3-8b");
  const ClusterSpec c = load_cluster("dgx-h100:8");
  double sim_prev = simulate_plan(m, c, block_plan(Recompute::NONE, 0)).report.iteration_time_s;
  double est_prev = estimate::estimate(m, c, calibration(), block_plan(Recompute::NONE, 0)).iteration_s;
  for (int n : {2, 5, 0}) {  // 0 last: every layer
    const ParallelPlan p = block_plan(Recompute::FULL, n);
    const Simulation sim = simulate_plan(m, c, p);
    const double est = estimate::estimate(m, c, calibration(), p).iteration_s;
    EXPECT_GT(sim.report.iteration_time_s, sim_prev) << n;
    EXPECT_GT(est, est_prev) << n;
    EXPECT_NEAR(est, sim.report.iteration_time_s, 0.15 * sim.report.iteration_time_s) << n;
    sim_prev = sim.report.iteration_time_s;
    est_prev = est;
  }
  const ParallelPlan p = block_plan(Recompute::FULL, 3);
  EXPECT_NEAR(simulate_plan(m, c, p, FoldMode::NONE).report.iteration_time_s,
              simulate_plan(m, c, p, FoldMode::AUTO).report.iteration_time_s, 1e-9);
}

TEST(RecomputeLayers, PlanFileAndChecks) {
  const TransformerSpec m = model_preset("llama3-8b");
  const ClusterSpec c = load_cluster("dgx-h100:8");
  const ParallelPlan p = block_plan(Recompute::FULL, 3);
  EXPECT_NO_THROW(p.validate(m, c));
  const ParallelPlan back = plan_from_json(to_json(p, m.num_layers), "t");
  EXPECT_EQ(back.recompute_num_layers, 3);
  EXPECT_FALSE(to_json(block_plan(Recompute::FULL, 0), m.num_layers).contains("recompute_num_layers"));
  auto refused = [&](const ParallelPlan& q, const std::string& what) {
    try {
      q.validate(m, c);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refused(block_plan(Recompute::SELECTIVE, 3), "needs recompute full (this plan has selective)");
  refused(block_plan(Recompute::FULL, 8), "recomputes every layer of every model chunk (the largest has 8)");
  refused(block_plan(Recompute::FULL, -1), "recompute num layers must be 0 (every layer) or more, got -1");
}
