// UniAP planner (Lin et al., arXiv 2307.16375 / CVPR'25), after seed-algorithms §3: for every pipeline degree p
// and micro-batch count m (and here every tensor-parallel degree, micro-batch size, recompute and ZeRO-1 choice),
// a mixed-integer program places layers on contiguous stages under the memory limit, minimising UniAP's
// GPipe-style time per iteration  sum_s P_s + sum_j O_j + (m - 1) max(P_s, O_j)  (P_s: stage time of one
// micro-batch, O_j: cross-stage transfer), solved with COIN-OR CBC (strategies/uniap_milp.*). The best solution
// of every (p, m) is a candidate; UniAP's own prediction is the MILP objective plus the slowest stage's gradient
// all-reduce (its data-parallel cost term).
//
// Intra-layer strategies: "uniap" offers the program K strategies per layer, with one strategy per stage
// (one_strategy_per_stage: dtsim's heterogeneous plans set a strategy per stage, ParallelPlan::stage_strategies, and
// re-shard only between stages): how the stage spends its G GPUs per pipeline copy (G TP ranks, or G/r TP ranks in r
// replicas that split each micro-batch, r = 2, 4, 8 dividing G and the micro-batch: UniAP's TP/DP split of a layer)
// x recompute (none, full) x ZeRO stage (0, 1 where the stage's data-parallel group has more than one rank). A stage
// that keeps few micro-batches in flight may so skip the recompute, the optimizer sharding or the wide TP group the
// first stages need. ZeRO-1 costs each layer its exposed parameter all-gather, spread over the micro-batches. Tied
// embeddings keep the first and last stages at one TP degree (one solve per common degree). "uniap-k1" is the K = 1
// form: one strategy for the whole model (TP over all G GPUs), chosen by an outer enumeration (the first of none/0,
// none/1, full/0, full/1 that fits), for measuring what the per-stage choice gains. G and the micro-batch size stay
// outer choices. Memory counts min(m, p - s) micro-batches of activations in flight on stage s (1F1B, the schedule
// the plan is run with). Searches stop starting new solves once `kTimeBudget_s` has elapsed (UniAP's own time limit
// is per solve).
#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

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

/// One intra-layer strategy of a stage (the MILP's k): its recompute and ZeRO stage, and how it spends the G GPUs a
/// stage has in each pipeline copy: G / replicas TP ranks, replicas of them each computing micro_batch / replicas
/// samples (data parallel inside the stage, as RaNNC's and DAPPLE's stage replication).
struct Strategy {
  Recompute rc;
  int zero;
  int replicas = 1;
};

/// Replica counts a stage of `g` GPUs per copy may use at micro-batch `mbs`: 1, and (per-stage planner) 2, 4, 8
/// where they divide both (the TP degree g / r then divides whatever g divides).
std::vector<int> replica_options(int g, int mbs, bool per_stage) {
  std::vector<int> out{1};
  if (per_stage)
    for (int r = 2; r <= 8; r *= 2)
      if (g % r == 0 && mbs % r == 0) out.push_back(r);
  return out;
}

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
    ChainCache chains(in);
    // Configurations are solved in order of a lower bound, min over the replica options of the model's compute
    // (1 + (m-1)/p) (perfect balance, free transfers); once the bound reaches the kKeep-th best prediction the rest
    // are pruned (exact for the best kKeep). ZeRO-1 and full recompute only cost time in this model, so the K = 1
    // search tries a configuration with them only where the plain one does not fit.
    struct Config {
      double lower;
      int tp, mbs, p, dp, m;  // tp: the G GPUs of a stage per pipeline copy
    };
    std::vector<Config> configs;
    for (int tp = 1; tp <= in.cluster.gpus_per_node; tp *= 2) {
      if (in.cluster.gpus_per_node % tp != 0 || n % tp != 0) continue;
      for (int mbs : {1, 2, 4}) {
        const LayerChain& plain = chains.get(tp, mbs, Recompute::NONE);
        double per_batch = mbs * plain.range_compute(0, L);
        for (int rp : replica_options(tp, mbs, per_stage_))
          per_batch = std::min(per_batch, static_cast<double>(mbs) / rp *
                                              chains.get(tp / rp, mbs / rp, Recompute::NONE).range_compute(0, L));
        for (int p = 1; p <= std::min(L, plain.devices); ++p) {
          if (plain.devices % p != 0) continue;
          const int dp = plain.devices / p;
          if (in.global_batch_size % (mbs * dp) != 0) continue;
          const int m = in.global_batch_size / (mbs * dp);
          configs.push_back({per_batch * (1.0 + (m - 1.0) / p), tp, mbs, p, dp, m});
        }
      }
    }
    std::stable_sort(configs.begin(), configs.end(),
                     [](const Config& a, const Config& b) { return a.lower < b.lower; });
    constexpr std::size_t kKeep = 8;
    std::vector<double> best;  // predictions so far, ascending
    auto threshold = [&] { return best.size() < kKeep ? std::numeric_limits<double>::infinity() : best[kKeep - 1]; };
    std::set<std::string> seen;  // plans already ranked (different G and replica splits can give the same plan)
    auto keep = [&](Candidate&& cand) {
      if (!seen.insert(to_json(cand.plan, L).dump()).second) {
        ++r.pruned;  // the same plan as an earlier candidate (dominated by it)
        return;
      }
      best.insert(std::upper_bound(best.begin(), best.end(), cand.estimate.iteration_s), cand.estimate.iteration_s);
      r.ranked.push_back(std::move(cand));
    };
    for (const auto& cf : configs) {
      std::vector<Strategy> all;
      for (int rp : replica_options(cf.tp, cf.mbs, per_stage_))
        for (Recompute rc : {Recompute::NONE, Recompute::FULL})
          for (int zero : {0, 1})
            if (zero == 0 || cf.dp * rp > 1) all.push_back({rc, zero, rp});
      if (per_stage_) {
        // One solve: the program picks each stage's strategy.
        ++r.considered;
        if (cf.lower >= threshold() || elapsed() > kTimeBudget_s) {
          ++r.pruned;  // not solved: dominated, or out of time
          continue;
        }
        auto cand = solve(in, chains, all, cf.tp, cf.p, cf.dp, cf.mbs, cf.m);
        if (!cand) ++r.over_memory;
        else keep(std::move(*cand));
        continue;
      }
      bool found = false;
      for (const Strategy& st : all) {
        if (found) continue;
        const LayerChain& ch = chains.get(cf.tp, cf.mbs, st.rc);
        ++r.considered;
        const double lower = cf.mbs * ch.range_compute(0, L) * (1.0 + (cf.m - 1.0) / cf.p);
        if (lower >= threshold() || elapsed() > kTimeBudget_s) {
          ++r.pruned;  // not solved: dominated, or out of time
          continue;
        }
        auto cand = solve(in, chains, {st}, cf.tp, cf.p, cf.dp, cf.mbs, cf.m);
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
  /// Solves one (G = tp, p, dp, mbs, m) configuration over the strategies `ks`. A candidate when a placement fits
  /// memory.
  static std::optional<Candidate> solve(const PlannerInput& in, ChainCache& chains, const std::vector<Strategy>& ks,
                                        int tp, int p, int dp, int mbs, int m) {
    const LayerChain& ch = chains.get(tp, mbs, Recompute::NONE);
    const int L = ch.num_layers, K = static_cast<int>(ks.size());
    uniap::Problem pr;
    pr.num_layers = L;
    pr.num_stages = p;
    pr.num_microbatches = m;
    pr.num_strategies = K;
    pr.one_strategy_per_stage = true;
    // Neighbouring stages are tp * dp GPUs apart (TP innermost, then DP, then PP); a stage's data-parallel group
    // is dp ranks tp apart, across nodes once tp * dp exceeds a node. With replicas (the stage layout) the group is
    // the stage's replicas, tp / replicas apart, and the copies, a whole pipeline (tp p GPUs) apart.
    const int node = in.cluster.gpus_per_node;
    const bool cross_node = static_cast<long>(tp) * dp >= node;
    auto dp_link = [&](const Strategy& st) -> const LinkCost& {
      const long span = st.replicas == 1 ? static_cast<long>(tp) * dp : static_cast<long>(tp) * (dp > 1 ? p * dp : 1);
      return span > node ? ch.inter : ch.intra;
    };
    const double e = dtype_bytes(in.model.dtype);
    // The chain a strategy runs: its TP degree at its replica's share of the micro-batch.
    auto chain_of = [&](const Strategy& st) -> const LayerChain& {
      return chains.get(tp / st.replicas, mbs / st.replicas, st.rc);
    };
    for (int l = 0; l < L; ++l) {
      std::vector<double> a, mem, act;
      for (const Strategy& st : ks) {
        const LayerChain& c = chain_of(st);
        const int share = mbs / st.replicas, group = dp * st.replicas;
        // ZeRO-1: the layer's updated parameters are all-gathered after the step (half an all-reduce, exposed),
        // charged per micro-batch as 1/m of it.
        const double gather = st.zero == 1 ? 0.5 * c.all_reduce_s(c.params[l] * e, group, dp_link(st)) / m : 0.0;
        a.push_back(share * c.compute_s[l] + gather);
        mem.push_back(memory::static_memory_for_params(c.params[l], in.model.dtype, st.zero, group).total());
        act.push_back(share * c.act_stored_bytes[l]);
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
    // Tied embeddings: the first and last stages sum their embedding gradients shard by shard, so they need the same
    // TP degree (ParallelPlan::validate). One solve per common replica count of the two, the best kept.
    std::vector<int> end_options{0};  // 0 = unconstrained
    if (in.model.tied_embeddings && p > 1) {
      end_options.clear();
      for (const Strategy& st : ks)
        if (std::find(end_options.begin(), end_options.end(), st.replicas) == end_options.end())
          end_options.push_back(st.replicas);
    }
    uniap::Solution sol;
    for (int ends : end_options) {
      if (ends > 0) {
        pr.allowed.assign(static_cast<std::size_t>(p), std::vector<char>(static_cast<std::size_t>(K), 1));
        for (int k = 0; k < K; ++k) {
          const char ok = ks[static_cast<std::size_t>(k)].replicas == ends;
          pr.allowed.front()[static_cast<std::size_t>(k)] = ok;
          pr.allowed.back()[static_cast<std::size_t>(k)] = ok;
        }
      }
      auto s = uniap::solve_per_stage(pr);
      if (s.feasible && (!sol.feasible || s.objective_s < sol.objective_s)) sol = std::move(s);
    }
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
      const Strategy& st = of_stage[static_cast<std::size_t>(s)];
      const LayerChain& c = chain_of(st);
      const double bytes = c.range_params(first, first + layers[s]) * e;
      ar = std::max(ar, c.all_reduce_s(bytes, dp * st.replicas, dp_link(st)));
      first += layers[s];
    }
    // With the replicas of every stage alike, the plan is the uniform one of tp / replicas over dp x replicas copies.
    bool same_replicas = true;
    for (const Strategy& st : of_stage) same_replicas = same_replicas && st.replicas == of_stage[0].replicas;
    const int common = same_replicas ? of_stage[0].replicas : 1;
    ParallelPlan plan;
    plan.tp = tp / common;
    plan.sequence_parallel = plan.tp > 1;
    plan.pp = p;
    plan.dp = dp * common;
    plan.micro_batch_size = mbs / common;
    plan.global_batch_size = in.global_batch_size;
    plan.recompute = of_stage[0].rc;
    plan.zero_stage = of_stage[0].zero;
    bool uniform = same_replicas;
    for (const Strategy& st : of_stage) uniform = uniform && st.rc == of_stage[0].rc && st.zero == of_stage[0].zero;
    if (!same_replicas) {
      for (const Strategy& st : of_stage) plan.stage_replicas.push_back(st.replicas);
    }
    if (!uniform)
      for (const Strategy& st : of_stage) {
        StageStrategy ss;
        ss.tp = plan.tp / st.replicas * common;
        if (ss.tp == plan.tp) ss.tp = 0;
        ss.sequence_parallel = plan.tp / st.replicas * common > 1;
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
