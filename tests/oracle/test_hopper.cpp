// Oracle tests of the Hopper/Blackwell stack: low-precision GEMMs at their format's peak, the chunked TP
// communication overlap closed form, interference of a kernel and a collective on one GPU, and the overlap options'
// task-graph shape. Each TEST runs in its own process (SimGrid allows one engine per process).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/engine/analytic_runtime.hpp"
#include "sim/engine/simgrid_runtime.hpp"
#include "sim/simulate.hpp"
#include "strategies/estimator.hpp"
#include "strategies/memory_model.hpp"
#include "strategies/transformer_costs.hpp"
#include "tests/support/sim_fixture.hpp"

using namespace dtsim;
using namespace dtsim::sim;
using namespace dtsim::testing;

namespace {

double end_time(const EngineResult& r) { return *std::max_element(r.end_s.begin(), r.end_s.end()); }

const cost::Op* find_op(const std::vector<cost::Step>& steps, const std::string& name) {
  for (const auto& st : steps)
    for (const auto& op : st.ops)
      if (op.name == name) return &op;
  return nullptr;
}
bool has_step(const std::vector<cost::Step>& steps, const std::string& name) {
  return std::any_of(steps.begin(), steps.end(), [&](const cost::Step& s) { return s.name == name; });
}

// One Llama 3 8B layer (flash attention) at TP 4 with sequence parallelism, under the given precision.
cost::LayerPasses sp_layer(Precision precision) {
  TransformerSpec m = model_preset("llama3-8b");
  m.attention = AttentionKind::FLASH;
  ParallelPlan plan;
  plan.tp = 4;
  plan.sequence_parallel = true;
  plan.global_batch_size = 1;
  plan.precision = precision;
  return cost::layer_passes(m, cost::shape_of(plan, 1));
}

}  // namespace

// ---- Precision: a GEMM in FP8 runs at the FP8 tensor-core peak times the BF16 efficiency curve and the format's
// efficiency scale; NVFP4 at the FP4 peak.
TEST(Fp8Gemm, RunsAtTheFp8Peak) {
  const GpuSpec h100 = gpu_preset("h100-sxm5-80gb");
  Calibration cal = default_calibration("h100-sxm5-80gb");
  cal.sustained_tensor_ratio = 1;  // the burst curve alone (the sustained clock: test_sustained_clock.cpp)
  cost::Op op{"fc1", true, 2 * 8192.0 * 8192 * 28672, 0, false, 8192, 8192, 28672, 1};
  const double bf16 = cost::op_time_s(op, h100, DType::BF16, cal);
  op.precision = Precision::FP8_DELAYED;
  const double fp8 = cost::op_time_s(op, h100, DType::BF16, cal);
  const double eff = cost::gemm_efficiency(op.flops, cal);
  // The FP8 GEMM sits on the BF16 curve at the size of the BF16 GEMM of its duration (flops x bf16 / fp8 peak).
  const double eff8 = cost::gemm_efficiency(op.flops * h100.peak_bf16_flops / h100.peak_fp8_flops, cal);
  EXPECT_LT(eff8, eff);
  EXPECT_NEAR(fp8, op.flops / (h100.peak_fp8_flops * eff8 * cal.fp8_gemm_efficiency_scale) + cal.kernel_launch_s,
              1e-15);
  EXPECT_NEAR(bf16, op.flops / (h100.peak_bf16_flops * eff) + cal.kernel_launch_s, 1e-15);
  // The speed-up of the GEMM alone is the peak ratio times the efficiency scale and the curve's ratio.
  EXPECT_NEAR((bf16 - cal.kernel_launch_s) / (fp8 - cal.kernel_launch_s),
              h100.peak_fp8_flops / h100.peak_bf16_flops * cal.fp8_gemm_efficiency_scale * eff8 / eff, 1e-12);
  op.precision = Precision::FP8_ROWWISE;
  EXPECT_NEAR(cost::op_time_s(op, h100, DType::BF16, cal),
              op.flops / (h100.peak_fp8_flops * eff8 * cal.fp8_rowwise_gemm_efficiency_scale) + cal.kernel_launch_s,
              1e-15);
  const GpuSpec b200 = gpu_preset("b200-sxm-180gb");
  op.precision = Precision::NVFP4;
  const double eff4 = cost::gemm_efficiency(op.flops * b200.peak_bf16_flops / b200.peak_fp4_flops, cal);
  EXPECT_NEAR(cost::op_time_s(op, b200, DType::BF16, cal),
              op.flops / (b200.peak_fp4_flops * eff4 * cal.fp4_gemm_efficiency_scale) + cal.kernel_launch_s, 1e-15);
}

// The layer's linear GEMMs (fprop, dgrad, wgrad) run in the recipe's format; attention stays in the model's dtype;
// the recipe adds its quantization kernels (an amax pass for current scaling, none for delayed), the low-precision
// sequence-parallel all-gather, and (current scaling) the amax all-reduce before it.
TEST(Fp8Layer, RecipesConvertTheLinearsOnly) {
  TransformerSpec m = model_preset("llama3-8b");
  m.attention = AttentionKind::FLASH;
  const auto bf16 = sp_layer(Precision::BF16), cur = sp_layer(Precision::FP8_CURRENT),
             del = sp_layer(Precision::FP8_DELAYED);
  for (const char* name : {"qkv", "proj", "fc1", "fc2"}) {
    ASSERT_NE(find_op(cur.forward, name), nullptr) << name;
    EXPECT_EQ(find_op(cur.forward, name)->precision, Precision::FP8_CURRENT) << name;
    EXPECT_EQ(find_op(cur.backward, std::string(name) + "-dgrad")->precision, Precision::FP8_CURRENT) << name;
    EXPECT_EQ(find_op(cur.backward, std::string(name) + "-wgrad")->precision, Precision::FP8_CURRENT) << name;
    EXPECT_EQ(find_op(bf16.forward, name)->precision, Precision::BF16) << name;
    // Current scaling: amax pass + cast of the input and of the weight; delayed: the cast only.
    EXPECT_NE(find_op(cur.forward, std::string(name) + "-x-amax"), nullptr) << name;
    EXPECT_NE(find_op(cur.forward, std::string(name) + "-w-cast"), nullptr) << name;
    EXPECT_EQ(find_op(del.forward, std::string(name) + "-x-amax"), nullptr) << name;
    EXPECT_NE(find_op(del.forward, std::string(name) + "-x-cast"), nullptr) << name;
    EXPECT_NE(find_op(cur.backward, std::string(name) + "-dy-cast"), nullptr) << name;
  }
  EXPECT_EQ(find_op(cur.forward, "flash-attention")->precision, Precision::BF16);
  // The sequence-parallel all-gathers move one byte per element instead of two; current scaling all-reduces the
  // shards' amax first.
  auto ag_bytes = [](const cost::LayerPasses& p) {
    for (const auto& s : p.forward)
      if (s.name == "mlp-ag") return s.collective_bytes;
    return -1.0;
  };
  EXPECT_NEAR(ag_bytes(cur), ag_bytes(bf16) / 2, 1e-6);
  EXPECT_TRUE(has_step(cur.forward, "mlp-ag-amax"));
  EXPECT_FALSE(has_step(del.forward, "mlp-ag-amax"));
  // Transformer Engine caches the FP8 weights and their transposes: 2 bytes per linear parameter of the stage.
  ParallelPlan p2;
  p2.global_batch_size = 1;
  const auto base = memory::static_memory(m, p2, 0);
  p2.precision = Precision::FP8_DELAYED;
  const auto with = memory::static_memory(m, p2, 0);
  const double linear = base.params - cost::first_stage_extra_params(m, 1) - cost::last_stage_extra_params(m, 1, 1);
  EXPECT_NEAR(with.lowp_weight_bytes, 2 * linear, 1.0);
  EXPECT_EQ(base.lowp_weight_bytes, 0);
}

// torchao's rowwise recipe under tensor parallelism, as torchtitan ran it in 2025 (models/llama3/infra/
// parallelize.py: plain TP for rowwise): the sequence-parallel all-gather moves bf16 and every rank quantizes the
// whole gathered input (two directions: 2 n e amax, 2 n (e + q) cast); the backward GEMMs run the tensorwise kernel
// and rescale their output in a kernel of their own (2 e per output element: torchao float8_ops.py); async TP does
// not fuse those all-gathers (pytorch/pytorch issue 149990). Closed form against tensorwise (current scaling).
TEST(Fp8Layer, RowwiseGathersInHighPrecisionAndRescalesTheBackward) {
  const auto bf16 = sp_layer(Precision::BF16), cur = sp_layer(Precision::FP8_CURRENT),
             row = sp_layer(Precision::FP8_ROWWISE);
  const double e = 2, q = 1, t = 4;
  for (const std::string name : {"qkv", "fc1"}) {
    const cost::Op* g = find_op(row.forward, name);
    ASSERT_NE(g, nullptr) << name;
    const double n = g->m * g->k * g->batch;  // the gathered input, every row of the sequence
    EXPECT_NEAR(find_op(row.forward, name + "-x-amax")->bytes, 2 * n * e, 1e-6 * n) << name;
    EXPECT_NEAR(find_op(row.forward, name + "-x-cast")->bytes, 2 * n * (e + q), 1e-6 * n) << name;
    EXPECT_NEAR(find_op(cur.forward, name + "-x-amax")->bytes, n * e / t, 1e-6 * n) << name;  // the local shard
  }
  for (const std::string name : {"qkv", "proj", "fc1", "fc2"}) {
    EXPECT_EQ(find_op(row.forward, name)->precision, Precision::FP8_ROWWISE) << name;
    for (const char* pass : {"-dgrad", "-wgrad"}) {
      const cost::Op* g = find_op(row.backward, name + pass);
      ASSERT_NE(g, nullptr) << name << pass;
      EXPECT_EQ(g->precision, Precision::FP8_CURRENT) << name << pass;
      const cost::Op* r = find_op(row.backward, name + pass + "-rescale");
      ASSERT_NE(r, nullptr) << name << pass;
      EXPECT_NEAR(r->bytes, 2 * g->batch * g->m * g->n * e, 1e-6 * r->bytes) << name << pass;
      EXPECT_EQ(find_op(cur.backward, name + pass + "-rescale"), nullptr) << name << pass;
    }
  }
  for (const auto* passes : {&row.forward, &row.backward})
    for (const auto& s : *passes)
      if (s.kind == cost::Step::Kind::TP_COLLECTIVE && s.collective == cost::CollectiveKind::ALL_GATHER) {
        EXPECT_FALSE(cost::tp_overlappable(s, cost::CollectiveKind::ALL_GATHER)) << s.name;
        if (s.name == "mlp-ag") {
          for (const auto& b : bf16.forward) {
            if (b.name == "mlp-ag") {
              EXPECT_DOUBLE_EQ(s.collective_bytes, b.collective_bytes);
            }
          }
        }
      }
  for (const auto& s : cur.forward) {
    if (s.name == "mlp-ag") {
      EXPECT_TRUE(cost::tp_overlappable(s, cost::CollectiveKind::ALL_GATHER));
    }
  }
  EXPECT_FALSE(has_step(row.forward, "mlp-ag-amax"));
}

// A precision the GPU has no tensor cores for is refused up front.
TEST(Fp8Layer, RefusedWithoutTensorCores) {
  TransformerSpec m = model_preset("llama3-8b");
  ParallelPlan plan;
  plan.global_batch_size = 8;
  plan.dp = 8;
  plan.precision = Precision::FP8_DELAYED;
  EXPECT_THROW(plan.validate(m, load_cluster("dgx-a100:8")), ConfigError);
  EXPECT_NO_THROW(plan.validate(m, load_cluster("dgx-h100:8")));
  plan.precision = Precision::NVFP4;
  EXPECT_THROW(plan.validate(m, load_cluster("dgx-h100:8")), ConfigError);
  EXPECT_NO_THROW(plan.validate(m, load_cluster("dgx-b200:8")));
}

namespace {
// One TP-n layer whose forward is `forward` (no backward work), one micro-batch, on a uniform contention-free network
// (analytic engine), TP overlap on or off; returns the iteration time.
double tp_layer_iteration(int n, std::vector<cost::Step> forward, bool overlap, double B, double alpha) {
  TransformerSpec model = tiny_model(1);
  model.heads = n;
  ClusterSpec cluster = uniform_cluster(1, n, B, alpha);
  ParallelPlan plan = pipeline_plan(Schedule::GPIPE, 1, 1);
  plan.tp = n;
  plan.sequence_parallel = true;
  plan.tp_comm_overlap = overlap;
  Calibration cal = ideal_calibration();
  PassCosts pc;
  pc.layer.forward = std::move(forward);
  SimOptions opt;
  opt.network = NetworkMode::ANALYTIC;
  Lowered low = lower(model, cluster, plan, cal, opt, pc);
  std::vector<int> gpus;
  for (const auto& r : low.ranks) gpus.push_back(r.global_rank);
  return end_time(run_analytic(low.graph, cluster, cal, gpus));
}

cost::Step tp_collective(const char* name, cost::CollectiveKind kind, double bytes) {
  cost::Step st;
  st.kind = cost::Step::Kind::TP_COLLECTIVE;
  st.name = name;
  st.collective = kind;
  st.collective_bytes = bytes;
  return st;
}

// A compute step of `ops`, their FLOPs given in seconds at the uniform cluster's peak.
cost::Step mlp_step(std::vector<cost::Op> ops) {
  const double peak = uniform_cluster(1, 1, 1e9, 0).gpu.peak_bf16_flops;
  for (auto& op : ops) op.flops *= peak;
  cost::Step g;
  g.kind = cost::Step::Kind::COMPUTE;
  g.name = "mlp";
  g.ops = std::move(ops);
  return g;
}

// [all-gather of S bytes, one GEMM of G seconds].
double ag_gemm_iteration(int n, double S, double G, bool overlap, double B, double alpha) {
  return tp_layer_iteration(n,
                            {tp_collective("mlp-ag", cost::CollectiveKind::ALL_GATHER, S),
                             mlp_step({{"fc1", true, G, 0, false, 1024, 1024, 1024, 1}})},
                            overlap, B, alpha);
}

// [a compute step of `ops` (seconds), a reduce-scatter of S bytes], overlapped.
double gemm_rs_iteration(int n, double S, std::vector<cost::Op> ops, double B, double alpha) {
  return tp_layer_iteration(
      n, {mlp_step(std::move(ops)), tp_collective("mlp-rs", cost::CollectiveKind::REDUCE_SCATTER, S)}, true, B, alpha);
}
}  // namespace

// ---- Chunked TP overlap: the all-gather and the GEMM are cut into n pieces; GEMM piece j waits for all-gather
// piece j. With c the time of one all-gather piece and g of one GEMM piece, the pair takes
// c + (n-1) max(c, g) + g: exposed communication = the first piece + (n-1) max(0, c - g), what the GEMM cannot hide.
TEST(TpCommOverlap, ChunkedAllGatherClosedForm) {
  const int n = 4;
  const double B = 100e9, alpha = 2e-6, S = 64e6;
  // One all-gather of S / n over n ranks (ring): (n-1) alpha + (n-1)/n (S/n) / B.
  const double c = (n - 1) * alpha + (n - 1.0) / n * (S / n) / B;
  const double C = (n - 1) * alpha + (n - 1.0) / n * S / B;
  for (double G : {4 * c * n, 0.5 * c * n}) {  // GEMM hides the pieces / GEMM shorter than the pieces
    const double g = G / n;
    const double off = ag_gemm_iteration(n, S, G, false, B, alpha);
    const double on = ag_gemm_iteration(n, S, G, true, B, alpha);
    EXPECT_NEAR(off, C + G, 1e-12);
    EXPECT_NEAR(on, c + (n - 1) * std::max(c, g) + g, 1e-12);
    // Exposed communication: the first piece plus what the GEMM cannot hide.
    EXPECT_NEAR(on - G, c + (n - 1) * std::max(0.0, c - g), 1e-12);
  }
}

// The reduce-scatter after a GEMM: piece j starts after GEMM piece j; the last piece stays exposed.
TEST(TpCommOverlap, ChunkedReduceScatterClosedForm) {
  const int n = 4;
  const double B = 100e9, alpha = 2e-6, S = 64e6;
  const double c = (n - 1) * alpha + (n - 1.0) / n * (S / n) / B;
  for (double G : {4 * c * n, 0.5 * c * n}) {
    const double g1 = G / n;
    EXPECT_NEAR(gemm_rs_iteration(n, S, {{"fc2", true, G, 0, false, 1024, 1024, 1024, 1}}, B, alpha),
                g1 + (n - 1) * std::max(c, g1) + c, 1e-12);
  }
}

// Transformer Engine's default methods (cost::tp_overlap_pieces): at tp 8 a forward reduce-scatter is cut in 4
// pieces ("pipeline", num_splits 4), not 8; a reduce-scatter after a weight gradient ("bulk": qkv_dgrad / fc1_dgrad
// beside qkv_wgrad / fc1_wgrad) runs whole, starting when the data gradient before it ends: D + max(C, W).
TEST(TpCommOverlap, TransformerEnginesPipelineAndBulkReduceScatters) {
  const int n = 8;
  const double B = 100e9, alpha = 2e-6, S = 64e6;
  auto ring_s = [&](double bytes) { return (n - 1) * alpha + (n - 1.0) / n * bytes / B; };
  const double C = ring_s(S);
  for (double G : {2 * C, 0.25 * C}) {
    SCOPED_TRACE(G);
    // Pipeline: 4 pieces of S / 4.
    const double g4 = G / 4, c4 = ring_s(S / 4);
    EXPECT_NEAR(gemm_rs_iteration(n, S, {{"fc2", true, G, 0, false, 1024, 1024, 1024, 1}}, B, alpha),
                g4 + 3 * std::max(c4, g4) + c4, 1e-12);
    // Bulk: the data gradient D, then the reduce-scatter whole beside the weight gradient W = G.
    const double D = 0.5 * C;
    EXPECT_NEAR(gemm_rs_iteration(n, S,
                                  {{"fc1-dgrad", true, D, 0, false, 1024, 1024, 1024, 1},
                                   {"fc1-wgrad", true, G, 0, true, 1024, 1024, 1024, 1}},
                                  B, alpha),
                D + std::max(C, G), 1e-12);
  }
}

// The pieces of an overlapped GEMM run at the whole GEMM's efficiency (Transformer Engine issues them on up to three
// streams, Op::pieces): n pieces take the whole GEMM's time plus n - 1 more launches, on the A100's fitted curve (whose
// efficiency at 1/8 of the size is far lower) and for a weight gradient accumulated into fp32 (each piece adds into
// its own rows: 1/n of the epilogue's bytes).
TEST(TpCommOverlap, PiecesTakeTheWholeGemmsTime) {
  const GpuSpec gpu = gpu_preset("a100-sxm4-80gb");
  const Calibration cal = default_calibration("a100-sxm4-80gb");
  ASSERT_TRUE(cal.gemm_accumulate_epilogue);
  const cost::Op fwd{
      "qkv", true, 2.0 * 2048 * 12288 * 4608, 2.0 * (2048 * 12288 + 12288 * 4608 + 2048 * 4608), false, 2048, 12288,
      4608,  1};
  cost::Op wgrad{"qkv-wgrad",
                 true,
                 2.0 * 12288 * 2048 * 4608,
                 2.0 * (12288 * 2048 + 2048 * 4608 + 12288 * 4608),
                 true,
                 12288,
                 2048,
                 4608,
                 1};
  wgrad.accumulate_bytes = 8.0 * 12288 * 4608;
  for (const cost::Op& whole : {fwd, wgrad})
    for (int n : {2, 8}) {
      const cost::Op piece = cost::gemm_piece(whole, n);
      EXPECT_EQ(piece.pieces, n);
      EXPECT_NEAR(piece.accumulate_bytes, whole.accumulate_bytes / n, 1e-6);
      const double t_whole = cost::op_time_s(whole, gpu, DType::BF16, cal);
      const double t_pieces = n * cost::op_time_s(piece, gpu, DType::BF16, cal);
      EXPECT_NEAR(t_pieces, t_whole + (n - 1) * cal.kernel_launch_s, 1e-12 * t_whole) << whole.name << " n " << n;
      // A GEMM of the piece's own size is slower: what the pieces would cost one at a time on one stream.
      cost::Op alone = piece;
      alone.pieces = 1;
      EXPECT_GT(cost::op_time_s(alone, gpu, DType::BF16, cal), cost::op_time_s(piece, gpu, DType::BF16, cal));
    }
}

// Overlap needs sequence parallelism (Megatron-Core and async TP overlap its all-gathers and reduce-scatters).
TEST(TpCommOverlap, NeedsSequenceParallelism) {
  TransformerSpec m = model_preset("llama3-8b");
  ParallelPlan plan;
  plan.tp = 8;
  plan.global_batch_size = 1;
  plan.tp_comm_overlap = true;
  EXPECT_THROW(plan.validate(m, load_cluster("dgx-h100:8")), ConfigError);
  plan.sequence_parallel = true;
  EXPECT_NO_THROW(plan.validate(m, load_cluster("dgx-h100:8")));
}

// ---- Interference: a kernel of G seconds and a transfer of F seconds (alone) start together on one GPU. While both
// run, the kernel runs at 1/(1+s) and the transfer at 1/(1+c). If the transfer ends first, at t1 = F (1+c), the
// kernel has done t1/(1+s) and finishes at t1 + G - t1/(1+s). Off: G and F.
TEST(Interference, GemmAndAllGatherPair) {
  const double B = 100e9, bytes = 200e6, G = 5e-3, s = 0.5, cs = 0.25;
  ClusterSpec cluster = uniform_cluster(1, 2, B, 0.0);
  Calibration cal = ideal_calibration();
  const double F = bytes / B;
  const double t1 = F * (1 + cs);
  ASSERT_LT(t1, G * (1 + s));
  const double expect_kernel = t1 + G - t1 / (1 + s);
  // Each configuration and end time in a forked child (one SimGrid engine per process).
  auto run = [&](bool on, bool kernel) {
    return in_child([&] {
      TaskGraph g;
      Task k;
      k.kind = TaskKind::COMPUTE;
      k.stream = Stream::COMPUTE;
      k.rank = 0;
      k.name = g.intern("fc1");
      k.duration_s = G;
      k.interference = static_cast<float>(s);
      const auto kid = g.add(k);
      Task f;
      f.kind = TaskKind::FLOW;
      f.stream = Stream::TP;
      f.rank = 0;
      f.peer = 1;
      f.path = Path::INTRA_NODE;
      f.name = g.intern("param-gather");
      f.bytes = bytes;
      const auto fid = g.add(f);
      g.interference_on = on;
      g.collective_slowdown = on ? cs : 0;
      g.finalize();
      const EngineResult r = run_on_simgrid(g, cluster, cal, {0, 1});
      return r.end_s[static_cast<std::size_t>(kernel ? kid : fid)];
    });
  };
  EXPECT_NEAR(run(true, true), expect_kernel, 1e-9);
  EXPECT_NEAR(run(true, false), t1, 1e-9);
  EXPECT_NEAR(run(false, true), G, 1e-9);
  EXPECT_NEAR(run(false, false), F, 1e-9);
}

// ---- CUDA graphs: a captured layer pass costs one host launch instead of one per kernel. Host-bound layer (1 us
// kernels, 100 us issue): 4 layers x (forward, backward) = 8 passes of one launch each.
TEST(CudaGraphs, OneHostLaunchPerPass) {
  TransformerSpec model = tiny_model(4);
  ClusterSpec cluster = uniform_cluster(1, 1, 1e20, 0.0);
  Calibration cal = ideal_calibration();
  cal.host_issue_s = 100e-6;
  cal.pin("host_issue_s");
  const double peak = cluster.gpu.peak_flops(model.dtype);
  PassCosts pc = fixed_costs(1e-6, 1e-6, 0, peak, 0);
  // Three kernels in each pass's step.
  pc.layer.forward[0].ops = {pc.layer.forward[0].ops[0], pc.layer.forward[0].ops[0], pc.layer.forward[0].ops[0]};
  pc.layer.backward[0].ops = {pc.layer.backward[0].ops[0], pc.layer.backward[0].ops[0], pc.layer.backward[0].ops[0]};
  cost::split_backward(pc.layer);
  auto iteration = [&](bool graphs) {
    ParallelPlan plan = pipeline_plan(Schedule::GPIPE, 1, 1);
    plan.cuda_graphs = graphs;
    Lowered low = lower(model, cluster, plan, cal, SimOptions{}, pc);
    return end_time(run_analytic(low.graph, cluster, cal, {0}));
  };
  EXPECT_NEAR(iteration(false), 8 * 3 * 100e-6 + 3e-6, 1e-12);
  EXPECT_NEAR(iteration(true), 8 * 100e-6 + 3e-6, 1e-12);
}

namespace {
// The plan's estimate and its simulation on the analytic network, H100 calibration.
std::pair<double, double> estimated_and_simulated(const TransformerSpec& m, const ClusterSpec& c,
                                                  const ParallelPlan& plan) {
  const Calibration cal = default_calibration("h100-sxm5-80gb");
  SimOptions opt;
  opt.network = NetworkMode::ANALYTIC;
  Inputs in{&m, &c, &plan, &cal, &opt};
  return {estimate::estimate(m, c, cal, plan).iteration_s, simulate(in).report.iteration_time_s};
}
}  // namespace

// The estimator (planners, sweep pre-filters) times the chunked TP overlap with the same closed form: with the overlap
// its estimate drops, and it stays within 10% of the (analytic-network) simulation either way.
TEST(TpCommOverlap, EstimatorFollowsTheSimulator) {
  TransformerSpec m = model_preset("llama3-8b");
  m.attention = AttentionKind::FLASH;
  const ClusterSpec c = load_cluster("dgx-h100:8");
  ParallelPlan plan;
  plan.tp = 8;
  plan.sequence_parallel = true;
  plan.micro_batch_size = 1;
  plan.global_batch_size = 4;
  plan.recompute = Recompute::SELECTIVE;
  double est[2], sim_s[2];
  for (int on = 0; on < 2; ++on) {
    plan.tp_comm_overlap = on == 1;
    plan.validate(m, c);
    std::tie(est[on], sim_s[on]) = estimated_and_simulated(m, c, plan);
    EXPECT_NEAR(est[on] / sim_s[on], 1.0, 0.10) << "overlap " << on;
  }
  EXPECT_LT(est[1], est[0]);
  EXPECT_LT(sim_s[1], sim_s[0]);
}

namespace {
double data_parallel_iteration(int zero, bool overlap_param_gather, int fsdp_prefetch) {
  TransformerSpec m = tiny_model(4);
  ClusterSpec c = uniform_cluster(2, 1, 10e9, 5e-6);  // two nodes of one GPU: every DP transfer crosses the NICs
  ParallelPlan plan = pipeline_plan(Schedule::ONE_F_ONE_B, 1, 4);
  plan.dp = 2;
  plan.global_batch_size = 8;
  plan.zero_stage = zero;
  plan.overlap_param_gather = overlap_param_gather;
  plan.fsdp_prefetch = fsdp_prefetch;
  Calibration cal = ideal_calibration();
  SimOptions opt;
  opt.network = NetworkMode::ANALYTIC;
  Inputs in{&m, &c, &plan, &cal, &opt};
  return simulate(in).report.iteration_time_s;
}
}  // namespace

// The distributed optimizer's parameter all-gather: after the step it is exposed; with overlap-param-gather each
// layer's gather runs on the DP stream before its first forward, hidden behind the previous layers' forwards.
TEST(ParamGatherOverlap, HidesTheAllGatherBehindTheForward) {
  const double after_step = data_parallel_iteration(1, false, 1), overlapped = data_parallel_iteration(1, true, 1);
  EXPECT_LT(overlapped, after_step);
  // It saves at most the exposed all-gather: one ring of the rank's parameters over the two NICs (dp = 2).
  ParallelPlan plan = pipeline_plan(Schedule::ONE_F_ONE_B, 1, 4);
  plan.dp = 2;
  plan.zero_stage = 1;
  const double bytes = memory::static_memory(tiny_model(4), plan, 0).params * 2;
  EXPECT_LE(after_step - overlapped, 5e-6 + 0.5 * bytes / 10e9 + 1e-12);
}

// FSDP prefetch: gathering k layers ahead never slows the iteration, and no prefetch (k = 0) exposes every gather.
TEST(FsdpPrefetch, DeeperPrefetchIsNeverSlower) {
  const double none = data_parallel_iteration(3, false, 0), one = data_parallel_iteration(3, false, 1),
               two = data_parallel_iteration(3, false, 2);
  EXPECT_GT(none, one);
  EXPECT_LE(two, one + 1e-12);
}

// Megatron-FSDP's prefetch (param_and_grad_buffer.py all_gather_params): a unit's hook gathers the next units until
// 500 M parameters are on the way. Llama 3 8B's 218 M-parameter layers: each hook reaches three ahead (218, 436,
// 654 M: the third crosses the limit), so unit i >= 3 is gathered by the hook of unit i - 3; Llama 3 70B's 856 M
// layers: one ahead; with the double buffer never more than one.
TEST(MegatronFsdp, PrefetchFollowsTheSizeRule) {
  EXPECT_EQ(memory::megatron_fsdp_prefetch(std::vector<double>(6, 218e6), false), (std::vector<int>{0, 1, 2, 3, 3, 3}));
  EXPECT_EQ(memory::megatron_fsdp_prefetch(std::vector<double>(4, 856e6), false), (std::vector<int>{0, 1, 1, 1}));
  EXPECT_EQ(memory::megatron_fsdp_prefetch(std::vector<double>(4, 218e6), true), (std::vector<int>{0, 1, 1, 1}));
  // A large unit stops the reach of the hook before it: of 100 M, 600 M, 100 M and 100 M units, unit 0's hook gathers
  // unit 1 only (600 M are on the way), unit 1's hook units 2 and 3.
  EXPECT_EQ(memory::megatron_fsdp_prefetch({100e6, 600e6, 100e6, 100e6}, false), (std::vector<int>{0, 1, 1, 2}));
  EXPECT_TRUE(memory::megatron_fsdp_prefetch({}, false).empty());
}

namespace {
// Two ranks, one per node: data-parallel (dp 2, 4 micro-batches each) or, with cp 2, context-parallel (dp 1).
Simulation megatron_fsdp_run(int zero, bool megatron, bool double_buffer, FoldMode fold = FoldMode::AUTO, int cp = 1) {
  TransformerSpec m = tiny_model(4);
  m.attention = AttentionKind::FLASH;                       // context parallelism runs fused attention only
  const ClusterSpec c = uniform_cluster(2, 1, 10e9, 5e-6);  // every DP transfer crosses the NICs
  const Calibration cal = ideal_calibration();
  SimOptions opt;
  opt.network = NetworkMode::ANALYTIC;
  opt.fold = fold;
  ParallelPlan plan = pipeline_plan(Schedule::ONE_F_ONE_B, 1, 4);
  plan.cp = cp;
  plan.dp = 2 / cp;
  plan.global_batch_size = 8;  // 4 micro-batches per rank (8 with cp 2)
  plan.zero_stage = zero;
  plan.fp32_grads = true;
  plan.megatron_fsdp = megatron;
  plan.fsdp_double_buffer = double_buffer;
  plan.validate(m, c);
  Inputs in{&m, &c, &plan, &cal, &opt};
  return simulate(in);
}
// Bytes a rank's gradient synchronisation flows carry.
double grad_sync_bytes(const Simulation& sim) {
  double bytes = 0;
  for (const auto& t : sim.lowered.graph.tasks())
    if (t.kind == TaskKind::FLOW && t.phase == Phase::GRAD_SYNC && t.rank == 0) bytes += t.bytes;
  return bytes;
}
double category_max(const Simulation& sim, MemCategory cat, double* last = nullptr) {
  double most = 0;
  for (const auto& [t, bytes] : sim.report.ranks[0].memory_timeline) {
    most = std::max(most, bytes[static_cast<std::size_t>(cat)]);
    if (last) *last = bytes[static_cast<std::size_t>(cat)];
  }
  return most;
}
}  // namespace

// Megatron-FSDP at stage 2 (optim_grads) reduce-scatters every micro-batch's gradients (megatron_fsdp.py
// grad_reduce_every_bprop), the distributed optimizer only the last: with 4 micro-batches, 4x the bytes.
TEST(MegatronFsdp, Stage2ReduceScattersEveryMicroBatch) {
  const double optimizer = grad_sync_bytes(megatron_fsdp_run(2, false, false));
  const double fsdp = grad_sync_bytes(megatron_fsdp_run(2, true, false));
  ASSERT_GT(optimizer, 0);
  EXPECT_NEAR(fsdp / optimizer, 4.0, 1e-9);
  // ZeRO-3 reduce-scatters per micro-batch under both implementations.
  EXPECT_NEAR(grad_sync_bytes(megatron_fsdp_run(3, true, false)) / grad_sync_bytes(megatron_fsdp_run(3, false, false)),
              1.0, 1e-9);
}

// The double buffer holds two of the largest decoder layer's parameters (and two of its fp32 gradients) from the
// first gather on, to the end of the iteration; the embedding and head (not Megatron-FSDP units) allocate their own
// beside it. Without it a layer's gathered parameters are freed after its pass.
TEST(MegatronFsdp, DoubleBufferHoldsTwoOfTheLargestUnit) {
  const TransformerSpec m = tiny_model(4);
  const double e = dtype_bytes(m.dtype), layer = cost::layer_params_per_rank(m, 1, 1) * e,
               outer = std::max(cost::first_stage_extra_params(m, 1), cost::last_stage_extra_params(m, 1, 1)) * e;
  double last = -1;
  const Simulation db = megatron_fsdp_run(3, true, true);
  const double gathered = category_max(db, MemCategory::GATHERED_PARAMS, &last);
  EXPECT_NEAR(last, 2 * layer, 1e-6 * layer);
  EXPECT_GE(gathered, 2 * layer + outer * (1 - 1e-9));  // the embedding's gather beside the pool
  EXPECT_LE(gathered, 2 * layer + 2 * outer * (1 + 1e-9));
  const double grads = category_max(db, MemCategory::GRAD_BUFFERS, &last);
  EXPECT_NEAR(last, 2 * layer * 4 / e, 1e-6 * layer);
  EXPECT_LE(grads, (2 * layer + outer) * 4 / e * (1 + 1e-9));
  const Simulation dynamic = megatron_fsdp_run(3, true, false);
  category_max(dynamic, MemCategory::GATHERED_PARAMS, &last);
  EXPECT_NEAR(last, 0, 1e-6);
  // Without the double buffer the hooks gather further ahead: never slower.
  EXPECT_LE(dynamic.report.iteration_time_s, db.report.iteration_time_s * (1 + 1e-12));
  // Folded = unfolded.
  const Simulation unfolded = megatron_fsdp_run(3, true, true, FoldMode::NONE);
  EXPECT_NEAR(unfolded.report.iteration_time_s, db.report.iteration_time_s, 1e-9 * db.report.iteration_time_s);
}

// The estimator charges Megatron-FSDP's per-micro-batch reduce-scatters at stage 2 (each under its micro-batch's
// backward): never below the distributed optimizer's estimate, and within 10% of the simulation.
TEST(MegatronFsdp, EstimatorFollowsTheSimulator) {
  const TransformerSpec m = model_preset("llama3-8b");
  const ClusterSpec c = load_cluster("dgx-h100:16");
  ParallelPlan plan;
  plan.tp = 8;
  plan.dp = 2;
  plan.sequence_parallel = true;
  plan.micro_batch_size = 1;
  plan.global_batch_size = 16;
  plan.zero_stage = 2;
  plan.fp32_grads = true;
  double est[2], sim_s = 0;
  for (int on = 0; on < 2; ++on) {
    plan.megatron_fsdp = on == 1;
    plan.validate(m, c);
    std::tie(est[on], sim_s) = estimated_and_simulated(m, c, plan);
    EXPECT_NEAR(est[on] / sim_s, 1.0, 0.10) << "megatron-fsdp " << on;
  }
  EXPECT_GE(est[1], est[0]);
}

// ZeRO-3 over context parallelism alone (dp 1, cp 2): the dense gradients are reduced over dp x cp, so each layer's
// parameters are gathered there too, and every gather is freed after its pass (the backward's were kept before).
TEST(MegatronFsdp, GathersOverContextParallelismAreFreed) {
  for (const bool megatron : {false, true}) {
    const Simulation sim = megatron_fsdp_run(3, megatron, false, FoldMode::AUTO, 2);
    double last = -1;
    EXPECT_GT(category_max(sim, MemCategory::GATHERED_PARAMS, &last), 0) << "megatron " << megatron;
    EXPECT_NEAR(last, 0, 1e-6) << "megatron " << megatron;
  }
}
