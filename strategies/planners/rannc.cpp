// RaNNC planner (Tanaka et al., IPDPS'21), after its released partitioner (seed-algorithms §1 [C]):
//  A. atomic subcomponents: the cost model's kernels grouped into kLayerAtoms atoms per layer (first norm + QKV,
//     attention core, output projection, second norm + FC1 + activation, FC2; build_atom_chain), the embedding
//     joining the first and the head the last; stages may end between any two atoms (ParallelPlan::stage_cut_atoms),
//     and a cut costs the hidden state plus what crosses it (q, k, v; the core's output; the activation's output).
//     Models whose layers cannot be cut (MoE, MLA) and "rannc-layers" use whole layers as atoms. RaNNC's replication
//     of batch-independent operators has nothing to act on here: every kernel of a transformer layer reads the
//     batch (the weights are parameters, not operators), so no atom is duplicated.
//  B. coarsening into blocks: passes over the blocks in ascending cost, each merging a block with its unmatched
//     successor when the merged block fits memory and costs at most mu + 2 sigma (the profiling rule), until the
//     count stops changing or reaches min_partition_num = 5; then the cheapest block is merged into the
//     neighbour giving the cheaper result, memory permitting, until at most max_partition_num = 32 blocks remain. Costs
//     are sums of the layers' (RaNNC's "profile_by_acc" mode).
//  C. stage DP with replication: for nodes per pipeline k (divisors of the node count, ascending; R = nodes / k
//     pipeline copies, Dg devices per pipeline) and micro-batch counts m = 1, 2, 4, ... <= 32, a DP over
//     (stages s, blocks b, devices d) with power-of-two replicas r per stage, r <= B / (R m), minimising
//     max_s(F_s + c_s) + max_s(B_s + c_s) under memory; the fewest stages that fit win for each m, the first k
//     with any plan stops the search, and the m with the smallest fill-drain estimate
//       T_est = sum_{t=0}^{m+S-2} [max_{g active}(F_g + c_g) + max_{g active}(B_g + c_g)] + max_g AR_g
//     is chosen. Activation checkpointing (full recompute) is on whenever m > 1, as in RaNNC.
// Two modes: "rannc" costs transfers and all-reduces on the cluster's calibrated links; "rannc-paper" uses the
// released code's constants (P2P 20 GiB/s, all-reduce 10 GiB/s, no latency) to reproduce RaNNC's decisions.
// dtsim runs the plan with the GPipe schedule. The memory check uses 1 - 0.1 (RaNNC's mem_margin) of the device.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "strategies/memory_model.hpp"
#include "strategies/planners/layer_chain.hpp"
#include "strategies/planners/registry.hpp"
#include "traces/error.hpp"

namespace dtsim::planning {
namespace {

constexpr int kMinPartitions = 5, kMaxPartitions = 32, kMaxPipeline = 32;
constexpr double kMemMargin = 0.1;

struct Block {
  int begin, end;  // layers [begin, end)
};

class RanncPlanner final : public Planner {
public:
  RanncPlanner(bool paper_constants, bool op_atoms) : paper_(paper_constants), ops_(op_atoms) {}
  std::string name() const override { return paper_ ? "rannc-paper" : ops_ ? "rannc" : "rannc-layers"; }

  PlannerResult plan(const PlannerInput& in) const override {
    const auto t0 = std::chrono::steady_clock::now();
    PlannerResult r;
    r.planner = name();
    const bool atoms = ops_ && !in.model.moe.enabled() && !in.model.mla.enabled() && in.model.layer_pattern.empty();
    const auto chain = atoms ? build_atom_chain : build_chain;
    const LayerChain plain = chain(in, in.tensor_parallel, 1, Recompute::NONE);
    const LayerChain ckpt = chain(in, in.tensor_parallel, 1, Recompute::FULL);
    const double limit = plain.memory_limit_bytes * (1 - kMemMargin) - plain.reserved_bytes;
    const auto blocks = coarsen(plain, limit);
    const int N = static_cast<int>(blocks.size());
    const int B = in.global_batch_size;
    const int units_per_node = plain.devices_per_node;
    const int nodes = plain.devices / units_per_node;
    for (int k = 1; k <= nodes && r.ranked.empty(); ++k) {
      if (nodes % k != 0) continue;
      const int R = nodes / k, Dg = units_per_node * k;
      for (int m = 1; m <= std::min(B, kMaxPipeline); m *= 2) {
        if (B % (R * m) != 0) continue;
        const int mbs = B / (R * m);
        ++r.considered;
        auto cand = search(in, m == 1 ? plain : ckpt, blocks, N, R, Dg, m, mbs, limit);
        if (cand) r.ranked.push_back(std::move(*cand));
        else ++r.over_memory;
      }
    }
    finish(r, t0);
    return r;
  }

private:
  bool paper_, ops_;

  LinkCost p2p(const LayerChain& ch, bool cross) const {
    if (paper_) return {0.0, 20.0 * 1073741824.0};
    return cross ? ch.inter : ch.intra;
  }
  double all_reduce_s(const LayerChain& ch, double bytes, int n, bool cross) const {
    if (paper_) return bytes / (10.0 * 1073741824.0);
    return ch.all_reduce_s(bytes, n, cross ? ch.inter : ch.intra);
  }

  static std::vector<Block> coarsen(const LayerChain& ch, double limit) {
    std::vector<Block> blocks;
    blocks.reserve(ch.num_layers);
    for (int l = 0; l < ch.num_layers; ++l) blocks.push_back({l, l + 1});
    auto eval = [&](const Block& b) { return ch.range_compute(b.begin, b.end); };
    auto fits = [&](const Block& b) { return ch.range_static(b.begin, b.end) + ch.range_act(b.begin, b.end) <= limit; };
    while (static_cast<int>(blocks.size()) > kMinPartitions) {
      const int n = static_cast<int>(blocks.size());
      double mu = 0, var = 0;
      for (const auto& b : blocks) mu += eval(b);
      mu /= n;
      for (const auto& b : blocks) var += (eval(b) - mu) * (eval(b) - mu);
      const double cap = mu + 2 * std::sqrt(var / n);
      std::vector<int> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return eval(blocks[a]) < eval(blocks[b]); });
      std::vector<int> merged_with(n, -1);  // v -> v+1 merged
      std::vector<bool> matched(n, false);
      for (int v : order) {
        if (matched[v] || v + 1 >= n || matched[v + 1]) continue;
        const Block m{blocks[v].begin, blocks[v + 1].end};
        if (!fits(m) || eval(m) > cap) continue;  // gain = cut transfer >= 0 with additive costs
        matched[v] = matched[v + 1] = true;
        merged_with[v] = v + 1;
      }
      std::vector<Block> next;
      for (int v = 0; v < n; ++v) {
        if (merged_with[v] >= 0) next.push_back({blocks[v].begin, blocks[v + 1].end}), ++v;
        else next.push_back(blocks[v]);
      }
      if (next.size() == blocks.size()) break;
      blocks = std::move(next);
    }
    // mergeSmall: the block of smallest cost merges into its predecessor or successor, whichever gives the smaller
    // merged cost, memory permitting (the next smallest is tried when neither fits), until at most
    // max_partition_num blocks remain or no merge fits.
    while (static_cast<int>(blocks.size()) > kMaxPartitions) {
      const int n = static_cast<int>(blocks.size());
      std::vector<int> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return eval(blocks[a]) < eval(blocks[b]); });
      int into = -1;  // merge blocks[into] and blocks[into + 1]
      for (int s : order) {
        const Block prev{s > 0 ? blocks[s - 1].begin : 0, blocks[s].end};
        const Block next{blocks[s].begin, s + 1 < n ? blocks[s + 1].end : 0};
        const double with_prev = s > 0 && fits(prev) ? eval(prev) : kInf;
        const double with_next = s + 1 < n && fits(next) ? eval(next) : kInf;
        if (with_prev == kInf && with_next == kInf) continue;
        into = with_prev <= with_next ? s - 1 : s;
        break;
      }
      if (into < 0) break;
      blocks[into].end = blocks[into + 1].end;
      blocks.erase(blocks.begin() + into + 1);
    }
    return blocks;
  }

  std::optional<Candidate> search(const PlannerInput& in, const LayerChain& ch, const std::vector<Block>& blocks, int N,
                                  int R, int Dg, int m, int mbs, double limit) const {
    const int Smax = std::min(N, Dg);
    // V[s][b][d] with running maxima of F + c and B + c.
    struct Cell {
      double f = kInf, b = kInf;
      int prev_b = -1, prev_d = -1;
      double value() const { return f + b; }
    };
    const auto at = [&](int s, int b, int d) { return (static_cast<std::size_t>(s) * (N + 1) + b) * (Dg + 1) + d; };
    std::vector<Cell> V(static_cast<std::size_t>(Smax + 1) * (N + 1) * (Dg + 1));
    V[at(0, 0, 0)] = {0.0, 0.0, -1, -1};
    const double eb = dtype_bytes(in.model.dtype);
    const int A = ch.atoms_per_layer;
    // A stage must hold some layer's last atom (a plan counts a cut layer in the later stage).
    auto holds_a_layer = [&](int b0, int b1) { return blocks[b1 - 1].end / A > blocks[b0].begin / A; };
    auto stage_cost = [&](int b0, int b1, int r, double& f, double& bw, double& mem) {
      const int lo = blocks[b0].begin, hi = blocks[b1 - 1].end;
      const double per_replica = static_cast<double>(mbs) / r;
      f = per_replica * ch.range_forward(lo, hi);
      bw = per_replica * ch.range_compute(lo, hi) - f;
      const bool cross = r * ch.tp > in.cluster.gpus_per_node;
      const double ct = (lo > 0 ? p2p(ch, cross).time_s(per_replica * ch.bytes_at(lo)) : 0.0) +
                        (hi < ch.num_layers ? p2p(ch, cross).time_s(per_replica * ch.bytes_at(hi)) : 0.0);
      f += ct;
      bw += ct;
      const int in_flight = m;  // fill-drain: every micro-batch's (checkpointed) inputs are held
      mem = ch.range_static(lo, hi) + per_replica * ch.range_act(lo, hi) * in_flight;
      // Checkpointing a stage that starts inside a layer keeps what crosses its first cut.
      if (m > 1 && lo % A != 0) mem += per_replica * ch.bytes_at(lo) * in_flight;
    };
    for (int s = 1; s <= Smax; ++s)
      for (int b = s; b <= N; ++b)
        for (int d = s; d <= Dg; ++d) {
          Cell best;
          for (int r = 1; r <= d - (s - 1) && r <= mbs; r *= 2) {
            if (mbs % r != 0) continue;
            const int dp = d - r;
            for (int bp = b - 1; bp >= s - 1; --bp) {
              const Cell& prev = V[at(s - 1, bp, dp)];
              if (prev.f == kInf || !holds_a_layer(bp, b)) continue;
              double f, bw, mem;
              stage_cost(bp, b, r, f, bw, mem);
              if (mem > limit) break;  // a longer stage only needs more memory
              Cell c{std::max(prev.f, f), std::max(prev.b, bw), bp, dp};
              if (c.value() < best.value()) best = c;
            }
          }
          V[at(s, b, d)] = best;
        }
    // The fewest stages that fit (RaNNC's rule).
    int S = -1;
    for (int s = 1; s <= Smax; ++s)
      if (V[at(s, N, Dg)].f != kInf) {
        S = s;
        break;
      }
    if (S < 0) return std::nullopt;
    std::vector<int> b_end, d_end;
    for (int s = S, b = N, d = Dg; s > 0; --s) {
      b_end.push_back(b);
      d_end.push_back(d);
      const Cell& c = V[at(s, b, d)];
      b = c.prev_b;
      d = c.prev_d;
    }
    std::reverse(b_end.begin(), b_end.end());
    std::reverse(d_end.begin(), d_end.end());
    std::vector<int> ends, reps;
    std::vector<double> F, Bw, AR;
    for (int s = 0, b0 = 0, d0 = 0; s < S; ++s) {
      const int r = d_end[s] - d0;
      double f, bw, mem;
      stage_cost(b0, b_end[s], r, f, bw, mem);
      const int lo = blocks[b0].begin, hi = blocks[b_end[s] - 1].end;
      ends.push_back(hi);
      reps.push_back(r);
      F.push_back(f);
      Bw.push_back(bw);
      AR.push_back(
          all_reduce_s(ch, ch.range_params(lo, hi) * eb, r * R, R > 1 || r * ch.tp > in.cluster.gpus_per_node));
      b0 = b_end[s];
      d0 = d_end[s];
    }
    double t_est = 0;
    for (int t = 0; t <= m + S - 2; ++t) {
      double fm = 0, bm = 0;
      for (int g = std::max(0, t - m + 1); g <= std::min(t, S - 1); ++g)
        fm = std::max(fm, F[g]), bm = std::max(bm, Bw[g]);
      t_est += fm + bm;
    }
    t_est += *std::max_element(AR.begin(), AR.end());
    std::vector<int> layers, cuts;
    const bool whole = atom_stages(ch, ends, &layers, &cuts);
    DTSIM_ASSERT(whole, "a RaNNC stage holds no layer");
    ParallelPlan plan = pipeline_plan(in, ch, layers, reps, R, mbs, Schedule::GPIPE);
    if (std::any_of(cuts.begin(), cuts.end(), [](int a) { return a != 0; })) plan.stage_cut_atoms = cuts;
    plan.recompute = m > 1 ? Recompute::FULL : Recompute::NONE;
    auto cand = make_candidate(in, std::move(plan), t_est, 0.0);
    if (!cand.estimate.fits) return std::nullopt;
    return cand;
  }
};

}  // namespace

std::unique_ptr<Planner> make_rannc_planner(bool paper_constants, bool op_atoms) {
  return std::make_unique<RanncPlanner>(paper_constants, op_atoms);
}

}  // namespace dtsim::planning
