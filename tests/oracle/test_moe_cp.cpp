// Oracle tests of mixture-of-experts, expert parallelism, context parallelism and FlashAttention against closed
// forms: all-to-all bytes per rank (balanced and skewed routing), the skewed run's slowdown, ring attention's
// per-step form (compute-bound cp t_block, bandwidth-bound t_block + (cp - 1) t_transfer), MoE parameter memory,
// flash vs unfused attention FLOPs and stored bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>

#include "sim/engine/analytic_runtime.hpp"
#include "strategies/memory_model.hpp"
#include "tests/support/sim_fixture.hpp"

namespace dtsim {
namespace {
using namespace dtsim::testing;

struct SimRun {
  sim::Lowered low;
  sim::EngineResult res;
};

SimRun run(const TransformerSpec& m, const ClusterSpec& c, const ParallelPlan& p, const Calibration& cal,
           sim::FoldMode fold = sim::FoldMode::NONE) {
  sim::SimOptions opt;
  opt.fold = fold;
  opt.network = sim::NetworkMode::ANALYTIC;
  p.validate(m, c);
  SimRun r;
  r.low = sim::lower(m, c, p, cal, opt);
  std::vector<int> gpus;
  for (const auto& rank : r.low.ranks) gpus.push_back(rank.global_rank);
  r.res = sim::run_analytic(r.low.graph, c, cal, gpus);
  return r;
}

double makespan(const SimRun& r) { return *std::max_element(r.res.end_s.begin(), r.res.end_s.end()); }

// Bytes of the FLOW tasks whose name starts with `prefix`, sent by global rank `g`, per destination rank.
std::map<int, double> flows_from(const SimRun& r, int g, const std::string& prefix, int layer, int mb) {
  std::map<int, double> out;
  const auto& names = r.low.graph.names();
  for (const auto& t : flows_and_pieces(r.low.graph)) {
    if (t.layer != layer || t.microbatch != mb) continue;
    if (r.low.ranks[t.rank].global_rank != g || names[t.name].rfind(prefix, 0) != 0) continue;
    out[r.low.ranks[t.peer].global_rank] += t.bytes;
  }
  return out;
}

ParallelPlan ep_plan(int ep, int dp, const Routing& routing = {}) {
  ParallelPlan p;
  p.dp = dp;
  p.ep = ep;
  p.micro_batch_size = 2;
  p.global_batch_size = 2 * dp;
  p.routing = routing;
  return p;
}

// Dropless dispatch (Calibration::moe_dispatch_sync, Megatron-Core's token dispatcher reading the token counts on the
// host): once per MoE layer forward the host waits for the device. Host-bound (1 s of host per kernel, so the device
// has always finished what it was given before the next kernel is issued), each wait delays everything after it by
// exactly the device work the host waits for: the router step (one GPU), plus the count all-gather (EP 2: a ring of
// two, one step of alpha + (ep E 8 / 2) / bw). Experts padded to capacity have static sizes: no wait.
double moe_host_run(int ep, bool sync, bool padded, double alpha, double bw) {
  const TransformerSpec m = tiny_moe(2, 8, 2);
  const ClusterSpec c = uniform_cluster(1, ep, bw, alpha);
  ParallelPlan p = ep_plan(ep, ep);
  p.global_batch_size = 3 * p.micro_batch_size * ep;  // 3 micro-batches
  if (padded) {
    p.routing.capacity_factor = 1;
    p.routing.pad_to_capacity = true;
  }
  Calibration cal = ideal_calibration();
  cal.host_issue_s = 1.0;
  cal.moe_dispatch_sync = sync;
  return makespan(run(m, c, p, cal));
}

double router_step_s(int ep) {
  const TransformerSpec m = tiny_moe(2, 8, 2);
  ParallelPlan p = ep_plan(ep, ep);
  p.global_batch_size = 3 * p.micro_batch_size * ep;
  const auto pc = sim::default_pass_costs(m, p);
  Calibration cal = ideal_calibration();
  for (const auto& st : pc.moe_layer.at(0).forward)
    if (st.name == "moe-router") return cost::step_time_s(st, uniform_cluster(1, ep, 1e11, 0).gpu, m.dtype, cal);
  ADD_FAILURE() << "no moe-router step";
  return 0;
}

TEST(MoeOracle, DispatcherHostWaitHostBound) {
  const double alpha = 1e-5, bw = 1e11;
  const int syncs = 2 * 3;  // MoE layers x micro-batches (forwards only; no recompute)
  const double r = router_step_s(1);
  ASSERT_GT(r, 0);
  const double one_gpu = moe_host_run(1, true, false, alpha, bw) - moe_host_run(1, false, false, alpha, bw);
  EXPECT_NEAR(one_gpu, syncs * r, 1e-9 * syncs * r);
  const double counts_s = alpha + (2.0 * 8 * 8 / 2) / bw;
  const double two_gpus = moe_host_run(2, true, false, alpha, bw) - moe_host_run(2, false, false, alpha, bw);
  EXPECT_NEAR(two_gpus, syncs * (router_step_s(2) + counts_s), 1e-9 * two_gpus);
  EXPECT_EQ(moe_host_run(2, true, true, alpha, bw), moe_host_run(2, false, true, alpha, bw));
}

// Megatron's SequentialMLP (plan moe_grouped_gemm false, --sequential-experts): the host issues each local expert's
// kernels itself. Host-bound (1 s of host per kernel), the run takes exactly the extra issues longer: per MoE layer and
// micro-batch, (E_local - 1) x the ops of the forward and backward expert steps, E_local = 8 experts on one GPU. The
// dispatcher's host wait is off here, so only the issue count differs.
double sequential_run(bool grouped) {
  const TransformerSpec m = tiny_moe(2, 8, 2);
  const ClusterSpec c = uniform_cluster(1, 1, 1e11, 1e-5);
  ParallelPlan p = ep_plan(1, 1);
  p.global_batch_size = 3 * p.micro_batch_size;  // 3 micro-batches
  p.moe_grouped_gemm = grouped;
  Calibration cal = ideal_calibration();
  cal.host_issue_s = 1.0;
  return makespan(run(m, c, p, cal));
}

TEST(MoeOracle, SequentialExpertsIssueEachExpertsKernels) {
  const TransformerSpec m = tiny_moe(2, 8, 2);
  ParallelPlan p = ep_plan(1, 1);
  p.global_batch_size = 3 * p.micro_batch_size;
  const auto pc = sim::default_pass_costs(m, p);
  double ops = 0;
  for (const auto* steps : {&pc.moe_layer.at(0).forward, &pc.moe_layer.at(0).backward})
    for (const auto& st : *steps)
      if (st.name == "moe-experts" || st.name == "moe-experts-bwd") ops += static_cast<double>(st.ops.size());
  ASSERT_GT(ops, 0);
  const double extra_s = 2 * 3 * (8 - 1) * ops * 1.0;  // MoE layers x micro-batches x (E_local - 1) x ops x 1 s
  EXPECT_NEAR(sequential_run(false) - sequential_run(true), extra_s, 1e-9 * extra_s);
  // A dense model has no experts: the option is refused rather than ignored.
  TransformerSpec dense = m;
  dense.moe = {};
  ParallelPlan q = ep_plan(1, 1);
  q.moe_grouped_gemm = false;
  EXPECT_THROW(q.validate(dense, uniform_cluster(1, 1, 1e11, 1e-5)), ConfigError);
}

TEST(MoeOracle, DispatchBytesBalanced) {
  const TransformerSpec m = tiny_moe(2, 8, 2);
  const ClusterSpec c = uniform_cluster(1, 4, 100e9, 1e-6);
  // Exact routing: every expert gets exactly its share.
  const ParallelPlan p = ep_plan(4, 4, routing_from_string("exact", "test"));
  // tokens x top_k x hidden x bytes: 2 x 1024 tokens, top-2, 1024 wide, bf16.
  const double S = 2.0 * 1024 * 2 * 1024 * 2;
  EXPECT_DOUBLE_EQ(cost::moe_dispatch_bytes(m, cost::shape_of(p, 2)), S);
  const SimRun r = run(m, c, p, ideal_calibration());
  for (int g = 0; g < 4; ++g) {
    const auto out = flows_from(r, g, "moe-dispatch all-to-all", 1, 0);
    ASSERT_EQ(out.size(), 3u) << "rank " << g;
    for (const auto& [to, bytes] : out) EXPECT_DOUBLE_EQ(bytes, S / 4) << g << " -> " << to;
  }
  // Random balanced routing (the default): every rank's all-to-all is sized by the most loaded EP rank's expected
  // count, the mean + sqrt(m (E - k) / (E - 1)) E[max of 4 normals] with m = 2048 x 2 slots.
  const ParallelPlan q = ep_plan(4, 4);
  const double factor = 1 + 1.0293753730039641 * std::sqrt((8.0 - 2) / (7 * 2048.0 * 2));
  EXPECT_NEAR(cost::sampling_load_factor(m.moe, cost::shape_of(q, 2), 2048.0 * 2), factor, 1e-9);
  const SimRun rq = run(m, c, q, ideal_calibration());
  for (int g = 0; g < 4; ++g)
    for (const auto& [to, bytes] : flows_from(rq, g, "moe-dispatch all-to-all", 1, 0))
      EXPECT_NEAR(bytes, S / 4 * factor, 1e-9 * S) << g << " -> " << to;
}

// Permutation 2 of the all-to-all dispatcher (Megatron-Core MoEAlltoAllTokenDispatcher sort_chunks_by_idxs): with
// more than one local expert, the received tokens are copied into expert order before the experts and back before
// the combine, and each copy's inverse runs in the backward: four copies reading and writing the N routed tokens the
// rank's experts process, 2 N h e bytes each. Exact routing, 2 x 1024 tokens, top-2, 1024 wide, bf16: N = 4096.
TEST(MoeOracle, ReceivedTokensSortIntoExpertOrderWithSeveralLocalExperts) {
  const TransformerSpec m = tiny_moe(2, 8, 2);
  auto sorts = [&](int ep, Dispatcher dispatcher) {
    ParallelPlan p = ep_plan(ep, ep, routing_from_string("exact", "test"));
    p.dispatcher = dispatcher;
    const auto pc = sim::default_pass_costs(m, p);
    std::map<std::string, double> bytes;
    for (const auto* steps : {&pc.moe_layer.at(0).forward, &pc.moe_layer.at(0).backward})
      for (const auto& st : *steps)
        if (st.name.find("sort-chunks") != std::string::npos) {
          EXPECT_EQ(st.ops.size(), 1u) << st.name;
          bytes[st.name] += st.ops.at(0).bytes;
        }
    return bytes;
  };
  const double copy = 2.0 * (2 * 1024 * 2) * 1024 * 2;
  for (int ep : {1, 4}) {  // 8 and 2 local experts
    const auto b = sorts(ep, Dispatcher::ALL_TO_ALL);
    ASSERT_EQ(b.size(), 4u) << "ep " << ep;
    for (const char* name : {"moe-sort-chunks", "moe-unsort-chunks", "moe-unsort-chunks-bwd", "moe-sort-chunks-bwd"})
      EXPECT_DOUBLE_EQ(b.at(name), copy) << name << " ep " << ep;
  }
  EXPECT_TRUE(sorts(8, Dispatcher::ALL_TO_ALL).empty());  // one local expert: tokens arrive in its order
  EXPECT_TRUE(sorts(4, Dispatcher::ALL_GATHER).empty());  // the all-gather dispatcher permutes once (moe-permute)
}

TEST(MoeOracle, DispatchBytesSkewed) {
  const TransformerSpec m = tiny_moe(2, 8, 2);
  const ClusterSpec c = uniform_cluster(1, 4, 100e9, 1e-6);
  Routing skew = routing_from_string("loads:4,2,1,1,1,1,2,4", "test");
  const ParallelPlan p = ep_plan(4, 4, skew);
  // EP rank k holds experts 2k, 2k+1: loads (4+2, 1+1, 1+1, 2+4) / 16.
  const std::vector<double> L = {6.0 / 16, 2.0 / 16, 2.0 / 16, 6.0 / 16};
  const auto got = cost::ep_rank_loads(p.routing, 8, 4);
  for (int k = 0; k < 4; ++k) EXPECT_DOUBLE_EQ(got[k], L[k]);
  const double S = 2.0 * 1024 * 2 * 1024 * 2;
  const SimRun r = run(m, c, p, ideal_calibration());
  for (int g = 0; g < 4; ++g) {
    // Dispatch: rank g sends S x L_j to EP rank j; combine: EP rank g returns S x L_g to every j.
    const auto dispatch = flows_from(r, g, "moe-dispatch all-to-all", 1, 0);
    const auto combine = flows_from(r, g, "moe-combine all-to-all", 1, 0);
    ASSERT_EQ(dispatch.size(), 3u);
    ASSERT_EQ(combine.size(), 3u);
    for (const auto& [to, bytes] : dispatch) EXPECT_DOUBLE_EQ(bytes, S * L[to]);
    for (const auto& [to, bytes] : combine) EXPECT_DOUBLE_EQ(bytes, S * L[g]);
  }
}

TEST(MoeOracle, SkewSlowsTheRunAsTheHotRanksExpertsSay) {
  // Free network: the run is the compute of the slowest EP rank; skew makes its expert GEMMs, and the copies that sort
  // their tokens into expert order and back, L_max x ep slower.
  const TransformerSpec m = tiny_moe(4, 8, 2);
  const ClusterSpec c = uniform_cluster(1, 4, 1e18, 0);
  Calibration cal = ideal_calibration();
  const ParallelPlan bal = ep_plan(4, 4, routing_from_string("exact", "test"));
  const ParallelPlan skw = ep_plan(4, 4, routing_from_string("loads:4,2,1,1,1,1,2,4", "test"));
  const double t_bal = makespan(run(m, c, bal, cal)), t_skw = makespan(run(m, c, skw, cal));
  // Closed form: extra = layers x (f - 1) x (expert forward + backward time), f = 4 x 6/16 = 1.5.
  cost::Shape sh = cost::shape_of(bal, 2);
  const auto passes = cost::layer_passes(m, sh, true);
  double t_exp = 0;
  for (const auto* steps : {&passes.forward, &passes.backward})
    for (const auto& st : *steps)
      if (st.kind == cost::Step::Kind::COMPUTE &&
          (st.name.rfind("moe-experts", 0) == 0 || st.name.find("sort-chunks") != std::string::npos))
        t_exp += cost::step_time_s(st, c.gpu, m.dtype, cal);
  const double f = 1.5;
  EXPECT_NEAR(t_skw - t_bal, 4 * (f - 1) * t_exp, 1e-6 * t_bal);
  EXPECT_GT(t_skw, t_bal);
}

TEST(MoeOracle, ParameterMemoryShardsExpertsOverEpAndEdp) {
  TransformerSpec m = tiny_moe(4, 8, 2);
  m.moe.dense_layers = 1;
  ParallelPlan p = ep_plan(4, 8);
  p.zero_stage = 1;
  const auto sm = memory::static_memory(m, p, 0);
  const double expert = 3.0 * 1024 * 2048;                // one SwiGLU expert
  const double routed_per_rank = 3 * (8.0 / 4) * expert;  // 3 MoE layers x 2 local experts
  EXPECT_DOUBLE_EQ(sm.expert_params, routed_per_rank);
  const double dense = sm.params - sm.expert_params;
  // Mixed-precision Adam: 2 + 2 bytes per parameter plus 12 sharded over the group that reduces the gradient:
  // dp (8) for dense parameters, the expert-data-parallel group (8 / 4 = 2) for the experts.
  EXPECT_DOUBLE_EQ(sm.total(), dense * (4 + 12.0 / 8) + routed_per_rank * (4 + 12.0 / 2));
  // Total over ranks: one copy of every parameter (dense params held by all 8 ranks).
  const double attention_and_router = static_cast<double>(m.moe_layer_params()) - 8 * expert;
  EXPECT_NEAR(
      dense,
      3 * attention_and_router + m.layer_params() + m.embedding_params() + m.head_params() + m.final_norm_params(),
      1.0);
}

TEST(FlashOracle, FlopsAndStoredBytes) {
  TransformerSpec m = tiny_moe(1, 0, 0);
  m.moe = {};
  const double b = 2, s = 1024, a = 8, d = 128;
  cost::Shape sh;
  sh.micro_batch = 2;
  auto core_flops = [&](const cost::LayerPasses& p, const std::string& name) {
    double f = 0;
    for (const auto& st : p.forward)
      for (const auto& op : st.ops)
        if (op.name == name || (op.name == "av" && name == "qk")) f += op.flops;
    return f;
  };
  m.attention = AttentionKind::FLASH;
  const auto flash = cost::layer_passes(m, sh);
  const double flash_stored = cost::layer_activation_bytes(m, sh).stored;
  m.attention = AttentionKind::UNFUSED;
  const auto unfused = cost::layer_passes(m, sh);
  const double unfused_stored = cost::layer_activation_bytes(m, sh).stored;
  // Unfused: QK^T and AV, 2 b a s^2 d each; flash skips the masked half (causal).
  EXPECT_DOUBLE_EQ(core_flops(unfused, "qk"), 4 * b * a * s * s * d);
  EXPECT_DOUBLE_EQ(core_flops(flash, "flash-attention"), 2 * b * a * s * s * d);
  double flash_bwd = 0;
  for (const auto& st : flash.backward)
    for (const auto& op : st.ops)
      if (op.name == "flash-attention-bwd") flash_bwd += op.flops;
  EXPECT_DOUBLE_EQ(flash_bwd, 2.5 * 2 * b * a * s * s * d);
  // Stored: unfused keeps softmax output, dropout mask and output (5 a s^2 b bytes in bf16); flash only the
  // fp32 log-sum-exp (4 a s b). The rest of the layer is the same.
  EXPECT_DOUBLE_EQ(unfused_stored - flash_stored, 5 * a * s * s * b - 4 * a * s * b);
}

TEST(RingAttentionOracle, ComputeAndBandwidthBound) {
  TransformerSpec m = tiny_moe(1, 0, 0);
  m.moe = {};
  m.seq_len = 8192;
  ParallelPlan p;
  p.cp = 4;
  p.micro_batch_size = 1;
  p.global_batch_size = 1;
  const Calibration cal = ideal_calibration();
  const cost::Shape sh = cost::shape_of(p, 1);
  const auto passes = cost::layer_passes(m, sh);
  const cost::Step* ring = nullptr;
  for (const auto& st : passes.forward)
    if (st.kind == cost::Step::Kind::RING_ATTENTION) ring = &st;
  ASSERT_NE(ring, nullptr);
  cost::Step block = *ring;
  block.kind = cost::Step::Kind::COMPUTE;
  const ClusterSpec probe = uniform_cluster(1, 4, 1e9, 0);
  const double t_block = cost::step_time_s(block, probe.gpu, m.dtype, cal);
  // KV block: 1 x 2048 tokens x (k + v: 2 x 1024) x 2 bytes.
  EXPECT_DOUBLE_EQ(ring->collective_bytes, 2048.0 * 2 * 1024 * 2);
  auto ring_span = [&](double bw) {
    const ClusterSpec c = uniform_cluster(1, 4, bw, 0);
    const SimRun r = run(m, c, p, cal);
    double lo = 1e30, hi = 0;
    const auto& names = r.low.graph.names();
    const auto& tasks = r.low.graph.tasks();
    for (std::size_t i = 0; i < tasks.size(); ++i)
      if (tasks[i].kind == sim::TaskKind::COMPUTE && names[tasks[i].name] == "attention-ring" &&
          r.low.ranks[tasks[i].rank].global_rank == 0) {
        lo = std::min(lo, r.res.start_s[i]);
        hi = std::max(hi, r.res.end_s[i]);
      }
    return hi - lo;
  };
  // Compute-bound (fast links): cp blocks back to back.
  EXPECT_NEAR(ring_span(1e15), 4 * t_block, 1e-9 * t_block);
  // Bandwidth-bound: each of the cp - 1 later blocks waits for its transfer.
  const double bw = 1e9, t_xfer = ring->collective_bytes / bw;
  ASSERT_GT(t_xfer, t_block);
  // Span from the first block's start to the last block's end: (cp - 1) t_transfer + t_block.
  EXPECT_NEAR(ring_span(bw), 3 * t_xfer + t_block, 1e-6 * t_xfer);
}

// Folded and unfolded runs agree: balanced routing keeps the EP ranks symmetric (the EP all-to-all runs against
// the representative's mirror), and context-parallel ranks stay simulated while dp folds around them.
TEST(MoeFolding, FoldedEqualsUnfolded) {
  const TransformerSpec moe = tiny_moe(2, 8, 2);
  TransformerSpec dense = tiny_moe(2, 0, 0);
  dense.moe = {};
  const ClusterSpec c = uniform_cluster(1, 8, 100e9, 2e-6);
  const Calibration cal = default_calibration("a100-sxm4-80gb");
  ParallelPlan ep = ep_plan(4, 8);  // EP groups of 4, 2 expert-data-parallel copies
  ep.zero_stage = 1;
  ParallelPlan cp;
  cp.cp = 2;
  cp.dp = 4;
  cp.micro_batch_size = 1;
  cp.global_batch_size = 8;
  for (const auto& [m, p] : {std::pair{moe, ep}, std::pair{dense, cp}}) {
    const SimRun folded = run(m, c, p, cal, sim::FoldMode::AUTO), unfolded = run(m, c, p, cal, sim::FoldMode::NONE);
    EXPECT_LT(folded.low.ranks.size(), unfolded.low.ranks.size()) << folded.low.fold_reason;
    EXPECT_NEAR(makespan(folded), makespan(unfolded), 1e-9 * makespan(unfolded)) << folded.low.fold_reason;
  }
}

TEST(MoeFolding, SkewUnfoldsTheExpertParallelAxis) {
  const TransformerSpec m = tiny_moe(2, 8, 2);
  const ClusterSpec c = uniform_cluster(1, 8, 100e9, 2e-6);
  const SimRun r =
      run(m, c, ep_plan(8, 8, routing_from_string("skew:1", "test")), ideal_calibration(), sim::FoldMode::AUTO);
  EXPECT_EQ(r.low.ranks.size(), 8u);
  EXPECT_NE(r.low.fold_reason.find("skewed routing"), std::string::npos) << r.low.fold_reason;
}

}  // namespace
}  // namespace dtsim
