// Grid search (Megatron-style baseline): every (tp, pp, dp, micro-batch, schedule, recompute, ZeRO, tensor-parallel
// layout) that divides the cluster, pruned by the analytic memory model and ranked by the analytic estimator. A
// pipeline depth that does not divide the layers (DeepSeek-V3's 61, Llama 3 405B's 126) gets uneven stages (1F1B
// only: interleaving needs whole chunks, as Megatron-Core without a layout). MoE: every EP degree that divides the
// experts (up to 64), DeepEP's dispatcher beside the all-to-all where the EP group spans nodes, and DeepSeek's
// DualPipeV and DualPipe beside 1F1B and interleaving. Layouts: 1-D
// Megatron with and without sequence parallelism for tp up to a node; 2-D (tp = q^2), 2.5-D (tp = 2 q^2, 4 q^2) and 3-D
// (tp = q^3) for tp up to 64 GPUs, inside or across nodes.
#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>

#include "strategies/planners/registry.hpp"
#include "traces/error.hpp"
#include "traces/parallel.hpp"

namespace dtsim::planning {

namespace {
std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

/// Layers per stage for `pp` stages of `layers` when pp does not divide them (empty when it does: the even split):
/// as even as possible, the remainder on the middle stages first, so the first stage (the embedding, and the most
/// activations in flight under 1F1B) and the last (the output layer and the loss) keep the fewer layers. Llama 3
/// 405B trained its 126 layers on 16 stages so, one layer fewer on the first and the last (Dubey et al., "The
/// Llama 3 Herd of Models", 2024, section 3.3.2); Megatron-Core expresses it with
/// --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers.
std::vector<int> uneven_stage_layers(int layers, int pp) {
  if (pp <= 1 || layers % pp == 0) return {};
  std::vector<int> out(static_cast<std::size_t>(pp), layers / pp);
  // The remainder is at most pp - 1: stages 1 .. remainder, the last only when every middle stage has one.
  for (int s = 1; s <= layers % pp; ++s) out[static_cast<std::size_t>(s)] += 1;
  return out;
}

class GridPlanner final : public Planner {
public:
  std::string name() const override { return "grid"; }

  PlannerResult plan(const PlannerInput& in) const override {
    const auto t0 = std::chrono::steady_clock::now();
    PlannerResult r;
    r.planner = name();
    const auto& m = in.model;
    const auto& c = in.cluster;
    const int n = c.total_gpus();
    const double limit = in.memory_limit_bytes > 0 ? in.memory_limit_bytes : c.gpu.memory_bytes;
    // Every pipeline depth that divides the GPUs, up to a layer per stage.
    std::vector<int> pp_depths;
    for (int pp : divisors(n))
      if (pp <= m.num_layers) pp_depths.push_back(pp);
    // Every candidate in the order the loops below generate it; judged afterwards on worker_threads() threads
    // (traces/parallel.hpp), each into its own slot, and merged in that order, so the ranking is the same on any
    // thread count (the estimator reads the model, cluster and calibration, never writes them).
    std::vector<ParallelPlan> candidates;
    auto consider = [&](const ParallelPlan& v) { candidates.push_back(v); };
    // A candidate's verdict: invalid, over the memory limit, or ranked -- and, for full recompute that fits where
    // keeping every activation does not, also the fewest recomputed layers per chunk that fit (Megatron's
    // --recompute-method block --recompute-num-layers N, by bisection: the peak falls as N grows), counted as one
    // more plan considered.
    struct Verdict {
      bool invalid = false, over_memory = false;
      std::vector<Candidate> ranked;
    };
    auto judge = [&](const ParallelPlan& v) {
      Verdict out;
      try {
        v.validate(m, c);
      } catch (const ConfigError&) {
        out.invalid = true;
        return out;
      }
      auto e = estimate::estimate(m, c, in.calibration, v);
      if (e.peak_bytes > limit) {
        out.over_memory = true;
        return out;
      }
      out.ranked.push_back({v, e});
      if (v.recompute != Recompute::FULL || v.recompute_num_layers > 0) return out;
      ParallelPlan keep = v;
      keep.recompute = Recompute::NONE;
      if (estimate::estimate(m, c, in.calibration, keep).peak_bytes <= limit) return out;  // ranked without recompute
      const auto chunks = v.chunk_layers(m.num_layers);
      int lo = 1, hi = *std::max_element(chunks.begin(), chunks.end()) - 1;  // N = hi + 1 is v itself
      std::optional<Candidate> best;
      while (lo <= hi) {
        ParallelPlan part = v;
        part.recompute_num_layers = (lo + hi) / 2;
        const auto pe = estimate::estimate(m, c, in.calibration, part);
        if (pe.peak_bytes <= limit) {
          hi = part.recompute_num_layers - 1;
          best = Candidate{part, pe};
        } else {
          lo = part.recompute_num_layers + 1;
        }
      }
      if (best) out.ranked.push_back(*best);
      return out;
    };
    struct LayoutOption {
      TpLayout layout;
      int depth;
      bool sp;
    };
    for (int tp : divisors(std::min(n, 64))) {
      std::vector<LayoutOption> layouts;
      if (tp <= c.gpus_per_node) layouts = {{TpLayout::D1, 1, false}, {TpLayout::D1, 1, true}};
      if (tp >= 4 && tp_grid_side(TpLayout::D2, tp, 1) > 0) layouts.push_back({TpLayout::D2, 1, false});
      if (tp >= 8 && tp_grid_side(TpLayout::D3, tp, 1) > 0) layouts.push_back({TpLayout::D3, 1, false});
      for (int depth : {2, 4})
        if (tp_grid_side(TpLayout::D2_5, tp, depth) > 1) layouts.push_back({TpLayout::D2_5, depth, false});
      if (layouts.empty()) continue;
      // Context parallelism for long sequences (flash attention only), expert parallelism for MoE models.
      std::vector<int> cps = {1}, eps = {1};
      if (m.attention == AttentionKind::FLASH && m.seq_len >= 16384)
        for (int cp : {2, 4, 8, 16}) cps.push_back(cp);
      if (m.moe.enabled())
        for (int ep : divisors(std::min(m.moe.experts, 64)))
          if (ep > 1 && m.moe.experts % ep == 0) eps.push_back(ep);
      for (int pp : pp_depths)
        for (int cp : cps)
          for (int ep : eps) {
            if (n % (tp * cp * pp) != 0) continue;
            const int dp = n / (tp * cp * pp);
            for (int mbs : {1, 2, 4, 8})
              for (const char* sched :
                   {"1f1b", "interleaved:2", "interleaved:3", "interleaved:4", "dualpipev", "dualpipe"})
                for (Recompute rc : {Recompute::NONE, Recompute::SELECTIVE, Recompute::FULL})
                  for (int zero : {0, 1})
                    for (const LayoutOption& lo : layouts) {
                      const bool sp = lo.sp;
                      ParallelPlan p;
                      p.tp = tp;
                      p.pp = pp;
                      p.dp = dp;
                      p.micro_batch_size = mbs;
                      p.global_batch_size = in.global_batch_size;
                      p.recompute = rc;
                      p.zero_stage = zero;
                      p.sequence_parallel = sp;
                      p.tp_layout = lo.layout;
                      p.tp_depth = lo.depth;
                      p.cp = cp;
                      p.ep = ep;
                      p.precision = in.precision;
                      p.layers_per_stage = uneven_stage_layers(m.num_layers, pp);
                      // No-ops (duplicates): SP without TP, ZeRO without data parallelism, selective recompute of flash
                      // attention (it stores no scores to drop).
                      if ((sp && tp == 1) || (zero > 0 && dp * cp == 1) ||
                          (rc == Recompute::SELECTIVE && m.attention == AttentionKind::FLASH))
                        continue;
                      set_schedule(p, sched, "grid");
                      if (p.schedule == Schedule::INTERLEAVED &&
                          (pp == 1 || m.num_layers % (pp * p.virtual_stages) != 0))
                        continue;
                      // DeepSeek's DualPipeV and DualPipe, whose overlapped pairs hide expert-parallel all-to-alls:
                      // for MoE plans with EP (the uniform split; DualPipe's layers_per_stage is one copy's stages).
                      if (p.dual_pipe() && (ep == 1 || pp == 1)) continue;
                      if (p.schedule == Schedule::DUALPIPEV) p.layers_per_stage.clear();
                      // Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm) where it runs: expert
                      // parallelism, interleaved or unpipelined 1F1B; each steady-state forward with a backward,
                      // their all-to-alls under each other's compute (the estimator credits it as the simulator).
                      const bool overlappable = ep > 1 && (p.schedule == Schedule::INTERLEAVED ||
                                                           (pp == 1 && p.schedule == Schedule::ONE_F_ONE_B));
                      auto with_overlap = [&](ParallelPlan v) {
                        consider(v);
                        if (!overlappable) return;
                        v.overlap_moe_comm = true;
                        consider(v);
                      };
                      with_overlap(p);
                      // An expert-parallel group wider than a node: DeepEP's two-hop dispatch as well (it is the
                      // all-to-all inside one node), which dtsim models without expert tensor parallelism.
                      if (m.moe.enabled() && ep > c.gpus_per_node) {
                        p.dispatcher = Dispatcher::DEEPEP;
                        p.etp = 1;
                        with_overlap(p);
                      }
                    }
          }
    }
    std::vector<Verdict> verdicts(candidates.size());
    parallel_for(candidates.size(), worker_threads(), [&](std::size_t i) { verdicts[i] = judge(candidates[i]); });
    for (auto& v : verdicts) {
      r.considered += v.ranked.size() > 1 ? 2 : 1;
      r.invalid += v.invalid ? 1 : 0;
      r.over_memory += v.over_memory ? 1 : 0;
      for (auto& cand : v.ranked) r.ranked.push_back(std::move(cand));
    }
    finish(r, t0);
    return r;
  }
};
}  // namespace

std::unique_ptr<Planner> make_grid_planner() { return std::make_unique<GridPlanner>(); }

}  // namespace dtsim::planning
