// UniAP planner (Lin et al., arXiv 2307.16375 / CVPR'25), after seed-algorithms §3: for every pipeline degree p
// and micro-batch count m (and here every tensor-parallel degree, micro-batch size, recompute and ZeRO-1 choice),
// a mixed-integer program places layers on contiguous stages under the memory limit, minimising UniAP's
// GPipe-style time per iteration  sum_s P_s + sum_j O_j + (m - 1) max(P_s, O_j)  (P_s: stage time of one
// micro-batch, O_j: cross-stage transfer), solved with COIN-OR CBC (strategies/uniap_milp.*). The best solution
// of every (p, m) is a candidate; UniAP's own prediction is the MILP objective plus the slowest stage's gradient
// all-reduce (its data-parallel cost term).
//
// Intra-layer strategies: "uniap" offers the MILP K strategies per layer, recompute (none, full) x ZeRO stage (0, 1
// where dp > 1), with one strategy per stage (one_strategy_per_stage: dtsim's heterogeneous plans set a strategy
// per stage, ParallelPlan::stage_strategies, and re-shard only between stages), so a stage that keeps few
// micro-batches in flight may skip the recompute or the optimizer sharding the first stages need. ZeRO-1 costs
// each layer its exposed parameter all-gather, spread over the micro-batches. "uniap-k1" is the K = 1 form: one
// strategy for the whole model, chosen by an outer enumeration (the first of none/0, none/1, full/0, full/1 that
// fits), for measuring what the per-stage choice gains. The TP degree and micro-batch size stay outer choices (a
// plan has one TP degree). Memory counts min(m, p - s) micro-batches of activations in flight on stage s (1F1B,
// the schedule the plan is run with). Searches stop starting new solves once `kTimeBudget_s` has elapsed (UniAP's
// own time limit is per solve).
#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <optional>

#include "strategies/memory_model.hpp"
#include "strategies/planners/layer_chain.hpp"
#include "strategies/planners/registry.hpp"
#include "strategies/uniap_milp.hpp"

namespace dtsim::planning {
namespace {

// The budget is wall time. Sanitizer builds (ASan + UBSan, scripts/sanitize.sh) run this search about six times
// slower, and the test suite they run compares outputs across runs (tests/cli/determinism.sh's bake-off): their
// budget is scaled so that they search what a release build searches instead of stopping early under load.
#if defined(__SANITIZE_ADDRESS__)
constexpr double kTimeBudget_s = 45 * 8;
#else
constexpr double kTimeBudget_s = 45;
#endif

/// One intra-layer strategy of a layer (the MILP's k).
struct Strategy {
  Recompute rc;
  int zero;
};

class UniApPlanner final : public Planner {
public:
  explicit UniApPlanner(bool per_stage) : per_stage_(per_stage) {}
  std::string name() const override { return per_stage_ ? "uniap" : "uniap-k1"; }

  PlannerResult plan(const PlannerInput& in) const override {
    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    PlannerResult r;
    r.planner = name();
    const auto& model = in.model;
    const int n = in.cluster.total_gpus();
    const int L = model.num_layers;
    // Configurations are solved in order of a lower bound, sum_l A_l (1 + (m-1)/p) (perfect balance, free
    // transfers); once the bound reaches the kKeep-th best prediction the rest are pruned (exact for the best
    // kKeep). ZeRO-1 and full recompute only cost time in this model, so a configuration is tried with them only
    // where the plain one does not fit.
    struct Config {
      double lower;
      int tp, mbs, p, dp, m;
    };
    std::vector<Config> configs;
    std::map<std::pair<int, int>, std::pair<LayerChain, LayerChain>> chains;  // (tp, mbs) -> (plain, full)
    for (int tp = 1; tp <= in.cluster.gpus_per_node; tp *= 2) {
      if (in.cluster.gpus_per_node % tp != 0 || n % tp != 0) continue;
      for (int mbs : {1, 2, 4}) {
        auto& pc = chains
                       .emplace(std::make_pair(tp, mbs), std::make_pair(build_chain(in, tp, mbs, Recompute::NONE),
                                                                        build_chain(in, tp, mbs, Recompute::FULL)))
                       .first->second;
        const LayerChain& plain = pc.first;
        for (int p = 1; p <= std::min(L, plain.devices); ++p) {
          if (plain.devices % p != 0) continue;
          const int dp = plain.devices / p;
          if (in.global_batch_size % (mbs * dp) != 0) continue;
          const int m = in.global_batch_size / (mbs * dp);
          configs.push_back({mbs * plain.range_compute(0, L) * (1.0 + (m - 1.0) / p), tp, mbs, p, dp, m});
        }
      }
    }
    std::stable_sort(configs.begin(), configs.end(),
                     [](const Config& a, const Config& b) { return a.lower < b.lower; });
    constexpr std::size_t kKeep = 8;
    std::vector<double> best;  // predictions so far, ascending
    auto threshold = [&] { return best.size() < kKeep ? std::numeric_limits<double>::infinity() : best[kKeep - 1]; };
    auto keep = [&](Candidate&& cand) {
      best.insert(std::upper_bound(best.begin(), best.end(), cand.estimate.iteration_s), cand.estimate.iteration_s);
      r.ranked.push_back(std::move(cand));
    };
    for (const auto& cf : configs) {
      const auto& pc = chains.at({cf.tp, cf.mbs});
      std::vector<Strategy> all;
      for (Recompute rc : {Recompute::NONE, Recompute::FULL})
        for (int zero : {0, 1})
          if (zero == 0 || cf.dp > 1) all.push_back({rc, zero});
      if (per_stage_) {
        // One solve: the MILP picks each stage's strategy.
        ++r.considered;
        if (cf.lower >= threshold() || elapsed() > kTimeBudget_s) {
          ++r.pruned;  // not solved: dominated, or out of time
          continue;
        }
        auto cand = solve(in, pc.first, pc.second, all, cf.tp, cf.p, cf.dp, cf.mbs, cf.m);
        if (!cand) ++r.over_memory;
        else keep(std::move(*cand));
        continue;
      }
      bool found = false;
      for (const Strategy& st : all) {
        if (found) continue;
        const LayerChain& ch = st.rc == Recompute::NONE ? pc.first : pc.second;
        ++r.considered;
        const double lower = cf.mbs * ch.range_compute(0, L) * (1.0 + (cf.m - 1.0) / cf.p);
        if (lower >= threshold() || elapsed() > kTimeBudget_s) {
          ++r.pruned;  // not solved: dominated, or out of time
          continue;
        }
        auto cand = solve(in, pc.first, pc.second, {st}, cf.tp, cf.p, cf.dp, cf.mbs, cf.m);
        if (!cand) {
          ++r.over_memory;
          continue;
        }
        found = true;
        keep(std::move(*cand));
      }
    }
    finish(r, t0);
    return r;
  }

private:
  /// Solves one (tp, p, dp, mbs, m) configuration over the strategies `ks` (`plain` and `full`: the chains
  /// without and with full recompute). A candidate when a placement fits memory.
  static std::optional<Candidate> solve(const PlannerInput& in, const LayerChain& plain, const LayerChain& full,
                                        const std::vector<Strategy>& ks, int tp, int p, int dp, int mbs, int m) {
    const LayerChain& ch = plain;
    const int L = ch.num_layers, K = static_cast<int>(ks.size());
    uniap::Problem pr;
    pr.num_layers = L;
    pr.num_stages = p;
    pr.num_microbatches = m;
    pr.num_strategies = K;
    pr.one_strategy_per_stage = true;
    // Neighbouring stages are tp * dp GPUs apart (TP innermost, then DP, then PP); a stage's data-parallel group
    // is dp ranks tp apart, across nodes once tp * dp exceeds a node.
    const bool cross_node = static_cast<long>(tp) * dp >= in.cluster.gpus_per_node;
    const LinkCost& dp_link = static_cast<long>(tp) * dp > in.cluster.gpus_per_node ? ch.inter : ch.intra;
    const double e = dtype_bytes(in.model.dtype);
    for (int l = 0; l < L; ++l) {
      std::vector<double> a, mem, act;
      for (const Strategy& st : ks) {
        const LayerChain& c = st.rc == Recompute::NONE ? plain : full;
        // ZeRO-1: the layer's updated parameters are all-gathered after the step (half an all-reduce, exposed),
        // charged per micro-batch as 1/m of it.
        const double gather = st.zero == 1 ? 0.5 * ch.all_reduce_s(ch.params[l] * e, dp, dp_link) / m : 0.0;
        a.push_back(mbs * c.compute_s[l] + gather);
        mem.push_back(memory::static_memory_for_params(ch.params[l], in.model.dtype, st.zero, dp).total());
        act.push_back(mbs * c.act_stored_bytes[l]);
      }
      pr.fwd_bwd_s.push_back(std::move(a));
      pr.mem_bytes.push_back(std::move(mem));
      pr.act_bytes.push_back(std::move(act));
    }
    for (int s = 0; s < p; ++s) pr.stage_act_factor.push_back(std::min(m, p - s));  // 1F1B: in flight on stage s
    const double hop = 2.0 * (cross_node ? ch.inter : ch.intra).time_s(mbs * ch.boundary_bytes);
    pr.cross_stage_s.assign(L - 1, hop);
    pr.memory_limit_bytes = ch.memory_limit_bytes - ch.reserved_bytes;
    pr.time_limit_s = 10;
    const auto sol = uniap::solve_per_stage(pr);
    if (!sol.feasible) return std::nullopt;
    std::vector<int> layers(p, 0);
    std::vector<Strategy> of_stage(static_cast<std::size_t>(p), ks.front());
    for (int l = 0; l < L; ++l) {
      const int st = sol.stage_of_layer[static_cast<std::size_t>(l)];
      ++layers[st];
      of_stage[static_cast<std::size_t>(st)] =
          ks[static_cast<std::size_t>(sol.strategy_of_layer[static_cast<std::size_t>(l)])];
    }
    double ar = 0;
    for (int s = 0, first = 0; s < p; ++s) {
      const double bytes = ch.range_params(first, first + layers[s]) * e;
      ar = std::max(ar, ch.all_reduce_s(bytes, dp, dp_link));
      first += layers[s];
    }
    ParallelPlan plan;
    plan.tp = tp;
    plan.sequence_parallel = tp > 1;
    plan.pp = p;
    plan.dp = dp;
    plan.micro_batch_size = mbs;
    plan.global_batch_size = in.global_batch_size;
    plan.recompute = of_stage[0].rc;
    plan.zero_stage = of_stage[0].zero;
    bool uniform = true;
    for (const Strategy& st : of_stage) uniform = uniform && st.rc == of_stage[0].rc && st.zero == of_stage[0].zero;
    if (!uniform)
      for (const Strategy& st : of_stage) {
        StageStrategy ss;
        ss.sequence_parallel = plan.sequence_parallel;
        ss.zero_stage = st.zero;
        ss.recompute = st.rc;
        plan.stage_strategies.push_back(ss);
      }
    if (p > 1) plan.layers_per_stage = layers;
    plan.schedule = Schedule::ONE_F_ONE_B;
    auto cand = make_candidate(in, std::move(plan), sol.objective_s + ar, 0.0);
    if (!cand.estimate.fits) return std::nullopt;
    return cand;
  }

  bool per_stage_;
};

}  // namespace

std::unique_ptr<Planner> make_uniap_planner(bool per_stage) { return std::make_unique<UniApPlanner>(per_stage); }

}  // namespace dtsim::planning
