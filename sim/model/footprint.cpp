#include "sim/model/footprint.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "sim/model/groups.hpp"
#include "strategies/schedule.hpp"
#include "strategies/transformer_costs.hpp"
#include "traces/stack_profile.hpp"

namespace dtsim::sim {

namespace {

// ---- bytes per task, edge and rank: measured ---------------------------------------------------------------------
// Fitted (smallest worst-case relative error) to the peak RSS (/usr/bin/time -f %M) of 18 `dtsim simulate` runs, 4 k
// to 30 M tasks over 2 to 1,024 simulated ranks: folded and unfolded, flow and steps collectives, SimGrid, max-min and
// analytic engines, with and without --out / --perfetto; 2-core development machine, 2026-11-26, Release build after
// 162e36f (40-byte Task, predecessor counts not stored, dependency lists freed before the report). Worst error -8% /
// +6%; docs/benchmarks.md "Memory guard" has the table, bench/footprint.sh the runs. Re-measured the same day with the
// host's issue outside the graph (host spans and release times, sized below): the same constants, worst -8% / +5%. The
// lowered graph stays resident through the engine and the report; the flow engines cost alike per task (SimGrid creates
// and frees its activities as tasks run) except for SimGrid's full-zone routing table; the analytic engine keeps every
// flow's load changes per link. Re-measure when TaskGraph, the engines or the report change.
constexpr double kBytesBase = 44e6;   ///< process, SimGrid, presets and calibrations before the first task
constexpr double kBytesPerTask = 70;  ///< graph, engine state, start/end times, report, per task
/// The analytic engine's own structures per task: its pending counts and order (4 + 4 bytes) and, while it sweeps
/// the links, each flow's entry in its links' lists (4 bytes per link crossed). Was 30 while every link's load
/// changes were kept for the whole run (72 bytes per link crossed); sizes of the structures, checked against
/// bench/footprint.sh rows O, T and V (issue Guard, 2026-11-28).
constexpr double kBytesPerTaskAnalytic = 8;
/// An all-to-all piece beside the graph (Exchange, analytic network): its start in the engine (8), its two links'
/// entries in the engine's per-link lists (8); its payload and path in the graph's piece tables (9), which the
/// micro-batches share (the lowering interns them: a layer's all-to-all moves the same pieces in every micro-batch);
/// and per task, the graph's task-to-exchange map (8).
constexpr double kBytesPerExchangePiece = 16;
constexpr double kBytesPerExchangePieceTable = 9;
constexpr double kBytesPerTaskExchange = 8;
constexpr double kBytesPerEdge = 4;  ///< per dependency edge as counted here (before de-duplication)
/// Per host-issue span kept outside the graph (HostSpan, 24 bytes) and, with spans, each task's release time (8 bytes):
/// sizes of the structures, not fitted.
constexpr double kBytesPerHostSpan = 24;
constexpr double kBytesPerTaskRelease = 8;
constexpr double kBytesPerRankPairSimgrid = 620;  ///< SimGrid's full-zone routing table: quadratic in simulated ranks
constexpr double kBytesPerTracedTask = 200;   ///< trace.json, per task or host span of a traced rank (text, JSON tree)
constexpr double kBytesPerTaskPerfetto = 35;  ///< trace.pftrace, per task or host span (every rank)
/// --export-chakra: each rank's ExecGraph (a node per task with its name, dependencies and attributes), the encoded
/// .et bytes and the collectives' records, per task. Measured on three exports (2026-11-28, analytic network:
/// gpt3-1.3b on 64 A100s, 127 k tasks, +58 MB; megatron-18b on 128 A100s, 758 k tasks, +341 MB; Mixtral EP 2 on 16
/// H100s, 244 k tasks, +117 MB over the same runs' estimates without it): 450-480 bytes per task.
constexpr double kBytesPerTaskChakra = 460;
/// Flows in flight at once, per flow: dtsim's max-min engine keeps a Variable (112 bytes since 2026-12-07, its route's
/// links inside up to six; 88 bytes and a heap block for them before), its entry in each link's list and up to two
/// pending completion events (32 bytes each);
/// SimGrid keeps a CommImpl and its network action. Counted only where the estimate knows the concurrency (dtsim
/// collective: an all-to-all starts every flow at once). Measured 2026-11-28 on all-to-alls of 1 MiB on dgx-h100
/// (Release): max-min 256 ranks, 65 k flows, +13 MB and 1,024 ranks, 1.05 M flows, +218 MB over the per-task
/// estimate (200-210 bytes a flow; 1,024 ranks 347.8 -> 334.2 MB peak RSS with the routes inside, 2026-12-07); SimGrid
/// 128 ranks, 16 k flows, +39 MB (heaptrack: 2.4 kB a flow).
constexpr double kBytesPerConcurrentFlowMaxmin = 210;
constexpr double kBytesPerConcurrentFlowSimgrid = 2400;
/// trace.json's default selection (sim/report/trace_select.hpp, kTraceAllRanksUpTo): every rank up to this many.
constexpr int kTraceAllRanks = 64;

using cost::CollectiveKind;

/// `host`: host-issue spans kept outside the graph (TaskGraph::host_spans) when the host never waits for the device.
struct Count {
  double tasks = 0, edges = 0, host = 0;
  double pieces = 0;  ///< all-to-all pieces kept outside the graph's tasks (Exchange, analytic network)
  Count& operator+=(const Count& o) {
    tasks += o.tasks;
    edges += o.edges;
    host += o.host;
    pieces += o.pieces;
    return *this;
  }
};
Count operator*(Count c, double k) { return {c.tasks * k, c.edges * k, c.host * k, c.pieces * k}; }
Count operator+(Count a, const Count& b) { return a += b; }

/// One group seen from the representative rank of a stage: size, whether a folded axis crosses it, and the
/// node split of its hierarchical all-reduce (local members per node, nodes).
struct Group {
  int n = 1;
  bool folded = false;
  int local = 1, cross = 1;
  bool splits = false;  ///< every node holds the same number of members
};

class Estimator {
public:
  Estimator(const TransformerSpec& m, const ClusterSpec& c, const ParallelPlan& p, const Calibration& cal,
            const SimOptions& opt, const Lowered& probe)
      : m_(m),
        c_(c),
        p_(p),
        cal_(cal.stack == (p.stack.empty() ? kDefaultStack : p.stack) ? cal : with_stack(cal, p.stack)),
        opt_(opt),
        probe_(probe) {}

  /// Tasks and edges of every simulated rank.
  Count total() {
    const auto orders = sched::plan_orders(p_);
    std::vector<int> per_stage(static_cast<std::size_t>(p_.pp), 0), first(static_cast<std::size_t>(p_.pp), -1);
    for (const auto& r : probe_.ranks) {
      ++per_stage[static_cast<std::size_t>(r.coord.pp)];
      if (first[static_cast<std::size_t>(r.coord.pp)] < 0) first[static_cast<std::size_t>(r.coord.pp)] = r.global_rank;
    }
    Count all;
    for (int s = 0; s < p_.pp; ++s) {
      if (per_stage[static_cast<std::size_t>(s)] == 0) continue;
      const PassCosts pc = stage_pass_costs(m_, p_, s);
      all += rank(first[static_cast<std::size_t>(s)], orders[static_cast<std::size_t>(s)], pc) *
             per_stage[static_cast<std::size_t>(s)];
    }
    return all;
  }

  /// The tasks of one `kind` collective of `bytes` over the TP group (dtsim collective: tp = the group), summed over
  /// the simulated ranks.
  Count single_collective(CollectiveKind kind, double bytes) const {
    if (probe_.ranks.empty()) return {};
    // One group: every member's share is the same (the builders are symmetric).
    const Group g = group(probe_.ranks.front().global_rank, GroupAxis::TP);
    return collective(g, kind, bytes) * static_cast<double>(probe_.ranks.size());
  }
  /// Flows in flight at once in that collective: every flow of an all-to-all, a ring step's flows otherwise.
  double single_collective_concurrency(CollectiveKind kind) const {
    if (probe_.ranks.empty()) return 0;
    const double n = group(probe_.ranks.front().global_rank, GroupAxis::TP).n, ranks = probe_.ranks.size();
    return kind == CollectiveKind::ALL_TO_ALL ? (n - 1) * ranks : ranks * std::max(1, opt_.channels);
  }

private:
  int gpu(int rank) const { return opt_.first_gpu + p_.gpu_of_rank(rank); }
  bool simulated(int rank) const {
    return probe_.ranks[static_cast<std::size_t>(probe_.sim_index_of[static_cast<std::size_t>(rank)])].global_rank ==
           rank;
  }

  Group group(int rank, GroupAxis ax) const {
    const auto mem = group_members(p_, rank, ax);
    Group g;
    g.n = static_cast<int>(mem.size());
    int sim = 0;
    for (int r : mem)
      if (!simulated(r)) g.folded = true;
      else ++sim;
    // The EDP fold's data-parallel rings: one instance over several simulated members (Lowerer::ring_collective).
    if (probe_.fold_edp && sim > 1) g.folded = false;
    // Hierarchical split (Lowerer::split_hierarchical): members per node, if every node holds as many.
    std::vector<int> nodes;
    nodes.reserve(mem.size());
    for (int r : mem) nodes.push_back(c_.node_of(gpu(r)));
    std::sort(nodes.begin(), nodes.end());
    std::size_t per = 1;
    while (per < nodes.size() && nodes[per] == nodes[0]) ++per;
    g.splits = nodes.size() % per == 0;
    for (std::size_t i = 0; g.splits && i < nodes.size(); i += per)
      g.splits = nodes[i] == nodes[i + per - 1] && (i == 0 || nodes[i] != nodes[i - 1]);
    g.local = static_cast<int>(per);
    g.cross = static_cast<int>(nodes.size() / per);
    return g;
  }

  /// The flex dispatcher's all-to-all (Lowerer::direct_all_to_all with flex_): flows to the member's own domain's
  /// other members and to its position in every other domain.
  Count flex_all_to_all(int rank, const Group& g, const cost::FlexDispatch& f) const {
    const int dg = cost::flex_domain_gpus(f, c_.gpus_per_node);
    const int mine = gpu(rank) / dg;
    double local = 0;
    std::vector<int> domains;
    for (int r : group_members(p_, rank, GroupAxis::EP)) {
      domains.push_back(gpu(r) / dg);
      local += domains.back() == mine;
    }
    std::sort(domains.begin(), domains.end());
    const double peers =
        static_cast<double>(std::unique(domains.begin(), domains.end()) - domains.begin()) - 1 + (local - 1);
    if (!g.folded && compound_all_to_all())  // one task per member, its pieces beside the graph
      return {1 + 1 / static_cast<double>(g.n), 3, 0, peers};
    Count c{2 + peers, 2 * peers + 2};
    if (!g.folded) c += {1 / static_cast<double>(g.n), 1 + peers};
    return c;
  }

  // ---- collectives: this member's share of the tasks (Lowerer::collective and its builders)
  CollectiveAlgorithm algorithm(CollectiveKind kind, double bytes) const {
    if (kind != CollectiveKind::ALL_REDUCE) return CollectiveAlgorithm::RING;
    if (opt_.collective_algorithm != CollectiveAlgorithm::AUTO) return opt_.collective_algorithm;
    for (const auto& rule : cal_.collective_algorithms)
      if (rule.op == "all-reduce" && bytes <= rule.max_bytes)
        return rule.algorithm == "tree"           ? CollectiveAlgorithm::TREE
               : rule.algorithm == "hierarchical" ? CollectiveAlgorithm::HIERARCHICAL
               : rule.algorithm == "nvls"         ? CollectiveAlgorithm::NVLS
                                                  : CollectiveAlgorithm::RING;
    return CollectiveAlgorithm::AUTO;
  }
  /// Unfolded all-to-alls as one task per member (Lowerer::direct_all_to_all, Exchange).
  bool compound_all_to_all() const { return opt_.network == NetworkMode::ANALYTIC && opt_.compound_all_to_all; }
  bool step_delays() const { return cal_.collective_step_overhead_s > 0 || !cal_.network_segments.empty(); }
  static int chunks(double bytes) {
    return std::max(1, std::min(64, static_cast<int>(std::ceil(bytes / (512.0 * 1024)))));
  }

  /// One ring (ring_collective) over n members; `spread`: across nodes through every member's NIC
  /// (Lowerer::spread_ring: two flows and a join per step and channel, two predecessors).
  Count ring(int n, bool folded, CollectiveKind kind, double bytes, bool spread = false) const {
    if (n <= 1) return {};
    const double nn = n;
    if (kind == CollectiveKind::ALL_TO_ALL) {  // direct_all_to_all
      if (!folded && compound_all_to_all()) return {1 + 1 / nn, 3, 0, nn - 1};
      Count c{2 + (nn - 1), 2 * (nn - 1) + 2};
      if (!folded) c += {1 / nn, 1 + (nn - 1)};
      return c;
    }
    const double d = step_delays() ? 1 : 0;
    if (kind == CollectiveKind::BROADCAST || kind == CollectiveKind::REDUCE) {  // chain_collective (never folded)
      const double flows = (nn - 1) * chunks(bytes) / nn;
      return {1 + 1 / nn + flows * (1 + d), flows * (4 + d) + 2};
    }
    const double ch = std::max(1, opt_.channels), ch_join = ch > 1 ? 1 : 0;
    const double steps = kind == CollectiveKind::ALL_REDUCE ? 2 * (nn - 1) : nn - 1;
    const Count payload =
        spread ? Count{2 * ch + 1, 4 * ch} : Count{ch + ch_join, ch + ch_join * ch};  // one step's flows (after a task)
    const double preds = spread ? 2 : 1;
    Count c;
    if (opt_.collective_mode == CollectiveMode::FLOW) c = Count{1, 0} + payload;
    else c = Count{steps * d, (steps - 1) * d} + payload * steps;
    c.edges += 2;  // after the data it needs, and after its stream's previous task (attach / join_instance)
    if (!folded) {
      c += {1 + 1 / nn, 1 + 1 + preds};  // the rendezvous join (shared), this member's end join; its edges
      if (opt_.collective_mode == CollectiveMode::STEPS)
        c.edges += preds * (steps - 1);  // data of the predecessors' steps
    }
    return c;
  }

  Count collective(const Group& g, CollectiveKind kind, double bytes) const {
    if (g.n <= 1) return {};
    const CollectiveAlgorithm algo = algorithm(kind, bytes);
    const double nn = g.n;
    if (algo == CollectiveAlgorithm::NVLS) {
      Count c{2, 1 + 2};
      if (!g.folded) c += {1 + 1 / nn, 1 + nn};
      return c;
    }
    if (algo == CollectiveAlgorithm::TREE) {
      const double k = chunks(bytes / 2), d = step_delays() ? 1 : 0;
      const double flows = 2 * 2 * k * (nn - 1) / nn;  // two trees, up and down, k chunks, per member
      return Count{1 + 1 / nn + flows * (1 + d), flows * (3 + d) + 2 * (nn - 1) / nn + 2};
    }
    const bool forced = algo == CollectiveAlgorithm::HIERARCHICAL;
    const bool hier = kind == CollectiveKind::ALL_REDUCE && opt_.collective_algorithm != CollectiveAlgorithm::RING &&
                      algo != CollectiveAlgorithm::RING && g.splits &&
                      (forced || (algo == CollectiveAlgorithm::AUTO && g.local > 1 && g.cross > 1 &&
                                  (!opt_.spread_rings || c_.has_graph() ||
                                   hierarchical_all_reduce_is_faster(c_, cal_, g.local, g.cross, bytes))));
    if (!hier)
      return ring(g.n, g.folded, kind, bytes,
                  opt_.spread_rings && !c_.has_graph() && g.splits && g.local > 1 && g.cross > 1);
    return ring(g.local, g.folded, CollectiveKind::REDUCE_SCATTER, bytes) +
           ring(g.cross, g.folded, CollectiveKind::ALL_REDUCE, bytes / g.local) +
           ring(g.local, g.folded, CollectiveKind::ALL_GATHER, bytes);
  }

  /// One host issue (Lowerer::host_issue): a span outside the graph, or a HOST-stream task when the host syncs.
  Count host_issue() const {
    return host_issue_as_tasks(cal_, opt_, p_, m_.moe.enabled()) ? Count{1, 2} : Count{0, 0, 1};
  }

  // ---- compute (Lowerer::compute_task, run_steps, overlapped_compute, ring_attention)
  Count compute(double kernels, bool* issued) const {
    Count c{1, 2};
    if (cal_.host_issue_s > 0) {
      // A host issue per task with kernels to issue, else (CUDA graphs) one for the pass's first task.
      const bool host = (!p_.cuda_graphs && kernels > 0) || (issued && !*issued);
      if (host) c += host_issue();
    }
    if (issued) *issued = true;
    return c;
  }

  Count overlapped(const cost::Step& st, const cost::Step* ag, const cost::Step* rs, const Group& tp,
                   bool* issued) const {
    const int n = cost::tp_overlap_pieces(CollectiveKind::ALL_GATHER, tp.n, p_.tp_overlap_chunks);
    const int n_rs = cost::tp_overlap_pieces(CollectiveKind::REDUCE_SCATTER, tp.n, p_.tp_overlap_chunks);
    const int first = ag ? cost::gemm_index(st.ops, true) : -1;
    int last = rs ? cost::gemm_index(st.ops, false) : -1;
    if (last == first) last = -1;
    const int ops = static_cast<int>(st.ops.size());
    Count c;
    auto segment = [&](int from, int to) {
      if (from < to) c += compute(to - from, issued);
    };
    int next = 0;
    if (first >= 0) {
      segment(0, first);
      for (int j = 0; j < n; ++j) {
        c += collective(tp, ag->collective, ag->collective_bytes / n);
        c += compute(j == 0 ? 1 : 0, issued);
        c.edges += 1;
      }
      next = first + 1;
    }
    if (last >= 0) {
      segment(next, last);
      if (cost::tp_overlap_bulk(st.ops[static_cast<std::size_t>(last)])) {
        c += collective(tp, rs->collective, rs->collective_bytes);
        c += compute(1, issued);
      } else {
        for (int j = 0; j < n_rs; ++j) {
          c += compute(j == 0 ? 1 : 0, issued);
          c += collective(tp, rs->collective, rs->collective_bytes / n_rs);
        }
      }
      segment(last + 1, ops);
      return c + Count{1, 2};
    }
    segment(next, ops);
    return c;
  }

  Count ring_attention(const cost::Step& st) const {
    Count c;
    const bool host = cal_.host_issue_s > 0 && !p_.cuda_graphs;
    for (int i = 0; i < st.ring_steps; ++i) {
      if (i + 1 < st.ring_steps) c += {2, 2};  // KV send: delay and flow
      c += {1, 3};                             // the block
      if (host) c += host_issue();
    }
    if (st.ring_tail_bytes > 0 && st.ring_steps > 1) c += {3, 4};
    return c;
  }

  Count steps(const std::vector<cost::Step>& steps, int rank) const {
    Count c;
    bool issued = false;
    const Group tp = group(rank, GroupAxis::TP);
    const bool moe_waits = moe_dispatch_waits(cal_, p_, m_.moe.enabled());
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const auto& st = steps[i];
      if (st.host_sync && moe_waits) c += Count{1, 2};  // the host's wait: a JOIN, its edge and the host chain's
      if (st.kind == cost::Step::Kind::COMPUTE) {
        const bool rs = p_.tp_comm_overlap && i + 1 < steps.size() &&
                        cost::tp_overlappable(steps[i + 1], CollectiveKind::REDUCE_SCATTER) &&
                        cost::gemm_index(st.ops, false) >= 0;
        if (rs) {
          c += overlapped(st, nullptr, &steps[i + 1], tp, &issued);
          ++i;
        } else {
          c += compute(static_cast<double>(st.ops.size()), &issued);
        }
      } else if (st.kind == cost::Step::Kind::RING_ATTENTION) {
        c += ring_attention(st);
      } else if (p_.tp_comm_overlap && cost::tp_overlappable(st, CollectiveKind::ALL_GATHER) && i + 1 < steps.size() &&
                 steps[i + 1].kind == cost::Step::Kind::COMPUTE && cost::gemm_index(steps[i + 1].ops, true) >= 0) {
        const cost::Step* rs =
            i + 2 < steps.size() && cost::tp_overlappable(steps[i + 2], CollectiveKind::REDUCE_SCATTER) ? &steps[i + 2]
                                                                                                        : nullptr;
        c += overlapped(steps[i + 1], &st, rs, tp, &issued);
        i += rs && cost::gemm_index(steps[i + 1].ops, false) != cost::gemm_index(steps[i + 1].ops, true) ? 2 : 1;
      } else {
        Group g = st.group == cost::CommGroup::CP    ? group(rank, GroupAxis::CP)
                  : st.group == cost::CommGroup::EP  ? group(rank, GroupAxis::EP)
                  : st.group == cost::CommGroup::ETP ? group(rank, GroupAxis::ETP)
                                                     : tp;
        if (st.group == cost::CommGroup::TP && st.axis != cost::TpAxis::ALL) {
          const int stage = p_.coord_of(rank).pp;
          const StageStrategy ss = p_.stage_strategy(stage);
          g.n =
              static_cast<int>(cost::tp_axis_members(ss.tp_layout, p_.stage_tp(stage), ss.tp_depth, st.axis, 0).size());
          g.splits = false;
        }
        if (g.n <= 1) continue;
        if (st.flex.enabled()) c += flex_all_to_all(rank, g, st.flex);
        else c += collective(g, st.collective, st.collective_bytes);
        if (cal_.host_collective_issue_s > 0 && !p_.cuda_graphs) c += host_issue();
      }
    }
    return c;
  }

  /// Pipeline messages a rank at `rc` sends to stage `to`: its share of the micro-batch meets that many replicas
  /// there, its TP slice that many TP ranks (Lowerer::lower_rank's send_pieces; one between equal widths).
  int pieces(const RankCoord& rc, int to) const {
    auto overlapping = [](int i, int a, int b) {  // slices [j/b, (j+1)/b) meeting [i/a, (i+1)/a)
      int n = 0;
      for (int j = 0; j < b; ++j)
        n += std::min((i + 1.0) / a, (j + 1.0) / b) - std::max(static_cast<double>(i) / a, static_cast<double>(j) / b) >
             1e-12;
      return n;
    };
    return overlapping(rc.rep, p_.replicas(rc.pp), p_.replicas(to)) *
           overlapping(rc.tp, p_.stage_tp(rc.pp), p_.stage_tp(to));
  }

  /// Everything simulated rank `rank` (global) emits: Lowerer::lower_rank.
  Count rank(int rank, const std::vector<PipeOp>& order, const PassCosts& pc) const {
    const RankCoord rc = p_.coord_of(rank);
    const StageStrategy strategy = p_.stage_strategy(rc.pp);
    const int s = rc.pp, zero = strategy.zero_stage;
    const int tp_s = p_.stage_tp(s), weight_replicas = strategy.tp_layout == TpLayout::D2_5 ? strategy.tp_depth : 1;
    const double e = dtype_bytes(m_.dtype);
    const auto chunk_layers = p_.chunk_layers(m_.num_layers);
    const std::vector<int> chunk_start = p_.chunk_first_layers(m_.num_layers);
    const Group tp = group(rank, GroupAxis::TP), dp = group(rank, GroupAxis::DP);
    const bool moe = m_.moe.enabled();
    const Group edp = moe ? group(rank, GroupAxis::EDP) : Group{};
    const bool dense_dp = p_.dense_grad_ranks() * p_.replicas(s) > 1, expert_dp = moe && p_.expert_dp() > 1;
    const double grad_scale = p_.fp32_grads ? 4.0 / e : 1.0;
    const cost::MoeLayerParams moe_params =
        moe ? cost::moe_layer_params_per_rank(m_, tp_s, p_.ep, p_.expert_tp()) : cost::MoeLayerParams{};
    const std::size_t moe_idx =
        pc.moe_layer.size() > 1 ? static_cast<std::size_t>((block_index(p_, rc) / p_.expert_tp()) % p_.ep) : 0;

    struct Unit {
      const cost::LayerPasses* passes;
      double param_bytes, expert_bytes;
    };
    auto units_of = [&](int k) {
      std::vector<Unit> u;
      const auto kk = static_cast<std::size_t>(k);
      if (!p_.has_prev_chunk(k)) u.push_back({&pc.embedding, cost::first_stage_extra_params(m_, tp_s) * e, 0});
      for (int l = chunk_start[kk]; l < chunk_start[kk] + chunk_layers[kk]; ++l) {
        const LayerKind kind = m_.layer_kind(l);
        const PassCosts& lc = pc.for_layer(l - chunk_start[kk]);  // partial recompute: this layer's costs
        if (l == chunk_start[kk] && p_.cut_atoms(s - 1) > 0) {
          u.push_back({&pc.front, pc.front_params * e, 0});
        } else if (!cost::base_kind(kind)) {
          const auto& kc = lc.kind_costs(kind);
          const auto kp = cost::kind_params_per_rank(m_, kind, tp_s, p_.ep, p_.expert_tp(), weight_replicas);
          u.push_back({&kc.passes[kc.passes.size() > 1 ? moe_idx : 0], (kp.dense + kp.expert) * e, kp.expert * e});
        } else if (m_.is_moe_layer(l) && moe_idx < lc.moe_layer.size())
          u.push_back({&lc.moe_layer[moe_idx], (moe_params.dense + moe_params.expert) * e, moe_params.expert * e});
        else u.push_back({&lc.layer, cost::layer_params_per_rank(m_, tp_s, weight_replicas) * e, 0});
      }
      if (!p_.has_next_chunk(k)) {
        u.push_back({&pc.head, cost::last_stage_extra_params(m_, tp_s, p_.head_stage() > 0 ? p_.pp : 1) * e, 0});
        if (m_.mtp_layers > 0 && !pc.mtp.empty()) {
          const auto kp = cost::mtp_params_per_rank(m_, tp_s, p_.ep, p_.expert_tp());
          for (int dpt = 0; dpt < m_.mtp_layers; ++dpt)
            u.push_back({&pc.mtp[pc.mtp.size() > 1 ? moe_idx : 0], (kp.dense + kp.expert) * e, kp.expert * e});
        }
      }
      if (p_.cut_atoms(s) > 0) u.push_back({&pc.back, pc.back_params * e, 0});
      return u;
    };
    // The passes of one unit are the same for every micro-batch: count them once per (chunk, kind).
    const int chunks = p_.virtual_stages;
    std::vector<Count> f_units(static_cast<std::size_t>(chunks)), b_units(static_cast<std::size_t>(chunks)),
        w_units(static_cast<std::size_t>(chunks));
    std::vector<int> unit_count(static_cast<std::size_t>(chunks), 0);
    const bool split = p_.split_backward();
    const bool overlap_pg = p_.overlap_param_gather && (zero == 1 || zero == 2);
    auto gather = [&](const Unit& u) {
      Count c;
      if (zero < 3 || !(dense_dp || (expert_dp && u.expert_bytes > 0))) return c;
      if (dense_dp) c += collective(dp, CollectiveKind::ALL_GATHER, u.param_bytes - u.expert_bytes);
      if (expert_dp && u.expert_bytes > 0) c += collective(edp, CollectiveKind::ALL_GATHER, u.expert_bytes);
      return c;
    };
    const bool each_microbatch = p_.grads_reduced_each_microbatch(s);
    auto fsdp_grads = [&](const Unit& u) {  // zero 3, Megatron-FSDP 2: every micro-batch's gradients reduce-scattered
      Count c;
      if (!each_microbatch || !(dense_dp || (expert_dp && u.expert_bytes > 0))) return c;
      if (dense_dp) c += collective(dp, CollectiveKind::REDUCE_SCATTER, (u.param_bytes - u.expert_bytes) * grad_scale);
      if (expert_dp && u.expert_bytes > 0)
        c += collective(edp, CollectiveKind::REDUCE_SCATTER, u.expert_bytes * grad_scale);
      return c;
    };
    double dense_grads = 0, expert_grads = 0, first_use = 0;
    for (int ch = 0; ch < chunks; ++ch) {
      const int k = p_.model_chunk(s, ch);
      const auto units = units_of(k);
      unit_count[static_cast<std::size_t>(ch)] = static_cast<int>(units.size());
      Count f, b, w;
      for (const auto& u : units) {
        f += gather(u) + steps(u.passes->forward, rank);
        b += gather(u) + steps(u.passes->recompute, rank) +
             steps(split ? u.passes->backward_input : u.passes->backward, rank);
        if (!split || u.passes->backward_weight.empty()) b += fsdp_grads(u);
        else w += steps(u.passes->backward_weight, rank) + fsdp_grads(u);
        if (dense_dp) dense_grads += (u.param_bytes - u.expert_bytes) * grad_scale;
        if (expert_dp) expert_grads += u.expert_bytes * grad_scale;
        if (overlap_pg) {
          if (dense_dp && u.param_bytes > u.expert_bytes)
            first_use += collective(dp, CollectiveKind::ALL_GATHER, u.param_bytes - u.expert_bytes).tasks;
          if (expert_dp && u.expert_bytes > 0)
            first_use += collective(edp, CollectiveKind::ALL_GATHER, u.expert_bytes).tasks;
        }
      }
      // Activation offloading: each offloaded layer's copy to the host (forward) and back (backward).
      if (const double off = std::min(p_.offload_activation_layers, chunk_layers[static_cast<std::size_t>(k)]);
          off > 0) {
        f += Count{off, 3 * off, 0};
        b += Count{off, 4 * off, 0};
      }
      // Pipeline: receive point, pp-gather (TP all-gather of the 1/t piece where the stack scatters), send (delay +
      // flow).
      const double act_msg =
          static_cast<double>(p_.micro_batch_size) / p_.replicas(s) * m_.seq_len / p_.cp * m_.hidden * e;
      // Heterogeneous plans: an all-to-all re-shards what comes from a stage of another TP layout.
      const Count reshard = collective(tp, CollectiveKind::ALL_TO_ALL, act_msg / tp_s);
      // Blocking exchanges (p2p_sync): a JOIN after the sends on the compute stream, an edge from each flow to it
      // and, in GPipe / 1F1B, one from the receiver's posting task to each flow.
      const P2pWait p2p = p2p_wait(cal_, p_);
      const int rendezvous = p2p.receiver ? 1 : 0;
      auto wait = [&](int n) { return p2p.sender ? Count{1, 1.0 + (1 + rendezvous) * n, 0} : Count{}; };
      // DualPipeV's turn on the last stage: a chunk's neighbour on the same rank (a receive point, no transfer).
      if (p_.has_prev_chunk(k) && p_.stage_of_chunk(k - 1) == s) {
        f += Count{1, 1};
      } else if (p_.has_prev_chunk(k)) {
        const int from = p_.stage_of_chunk(k - 1);
        const bool gathered = tp_s > 1 && pp_scatter_gather(cal_, p_.stage_strategy(s).sequence_parallel);
        f += Count{1, 1} + (gathered ? collective(tp, CollectiveKind::ALL_GATHER, act_msg) : Count{});
        if (tp_s > 1 && p_.stage_layouts_differ(from, s)) f += reshard;
        b += Count{2, 3} * pieces(rc, from) + wait(pieces(rc, from));
      }
      if (p_.has_next_chunk(k) && p_.stage_of_chunk(k + 1) == s) {
        b += {1, 1};
      } else if (p_.has_next_chunk(k)) {
        const int to = p_.stage_of_chunk(k + 1);
        f += Count{2, 3} * pieces(rc, to) + wait(pieces(rc, to));
        b += {1, 1};
        if (tp_s > 1 && p_.stage_layouts_differ(to, s)) b += reshard;
      }
      if (p_.precision == Precision::FP8_DELAYED) {
        const double amax = static_cast<double>(units.size()) * 32;
        f += collective(tp, CollectiveKind::ALL_REDUCE, amax) + collective(dp, CollectiveKind::ALL_REDUCE, amax);
      }
      if (cal_.host_sync_each_pass && cal_.host_issue_s > 0) {
        f += {1, 4};
        b += {1, 4};
      }
      // BF16_Optimizer: the gradient-accumulation pass after the chunk's backward (B, or W when split).
      if (bf16_optimizer_active(cal_, m_.dtype == DType::BF16, zero)) (split ? w : b) += {1, 1};
      f_units[static_cast<std::size_t>(ch)] = f;
      b_units[static_cast<std::size_t>(ch)] = b;
      w_units[static_cast<std::size_t>(ch)] = w;
    }
    Count c;
    for (const auto& op : order) {
      const auto ch = static_cast<std::size_t>(op.chunk);
      c += op.kind == PipeOp::Kind::F ? f_units[ch] : op.kind == PipeOp::Kind::B ? b_units[ch] : w_units[ch];
    }
    c.tasks += first_use;
    c.edges += first_use * 2;
    // Gradient buckets (zero < 3): filled unit by unit as gradients become final, closed once they hold the chunk's
    // dp_bucket_bytes (a unit larger than that closes its own), at each chunk's end where the stack keeps a buffer
    // per chunk, then the last one; dense and expert.
    if (!each_microbatch) {
      const auto kind = zero >= 1 && !bf16_optimizer_active(cal_, m_.dtype == DType::BF16, zero)
                            ? CollectiveKind::REDUCE_SCATTER
                            : CollectiveKind::ALL_REDUCE;
      double dense = 0, expert = 0;
      // Each bucket's end is waited for by the optimizer step (and the gradient norm where the stack clips).
      const Count waited{0, cal_.grad_clip ? 2.0 : 1.0};
      auto close = [&] {
        if (dense > 0) c += collective(dp, kind, dense) + waited;
        if (expert > 0) c += collective(edp, kind, expert) + waited;
        dense = expert = 0;
      };
      for (int ch = chunks - 1; ch >= 0; --ch) {
        const auto units = units_of(p_.model_chunk(s, ch));
        const double limit = dp_bucket_bytes(cal_, p_, s, ch, e * grad_scale);
        for (auto u = units.rbegin(); u != units.rend(); ++u) {
          if (dense_dp) dense += (u->param_bytes - u->expert_bytes) * grad_scale;
          if (expert_dp) expert += u->expert_bytes * grad_scale;
          if (dense + expert >= limit) close();
        }
        if (cal_.dp_buckets_first_chunk_only) close();  // Megatron: a buffer per chunk
      }
      close();
      if ((zero == 1 || zero == 2) && !overlap_pg) {
        if (dense_dp) c += collective(dp, CollectiveKind::ALL_GATHER, dense_grads / grad_scale);
        if (expert_dp) c += collective(edp, CollectiveKind::ALL_GATHER, expert_grads / grad_scale);
      }
    }
    if (m_.tied_embeddings && p_.head_stage() != 0 && (s == 0 || s == p_.head_stage()))
      c += collective(group(rank, GroupAxis::EMB), CollectiveKind::ALL_REDUCE,
                      static_cast<double>(m_.vocab) * m_.hidden);
    if (p_.bidirectional())  // DualPipe: the gradients summed with the mirror stage's copy
      c += collective(group(rank, GroupAxis::EMB), CollectiveKind::ALL_REDUCE, dense_grads + expert_grads + 1);
    if (cal_.grad_clip) {
      c += {1, 3};
      c += collective(tp, CollectiveKind::ALL_REDUCE, 4) + collective(dp, CollectiveKind::ALL_REDUCE, 4);
    }
    c += {1, 3};                                     // the optimizer step
    if (cal_.per_iteration_s > 0) c += Count{1, 2};  // iteration overhead
    return c;
  }

  const TransformerSpec& m_;
  const ClusterSpec& c_;
  const ParallelPlan& p_;
  const Calibration cal_;
  const SimOptions& opt_;
  const Lowered& probe_;
};

std::string with_commas(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f", v);
  std::string s = b, out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

void add_bytes(Footprint& f, const ParallelPlan& plan, const SimOptions& opt, const FootprintOutputs& outputs);

/// The folding decision and simulated ranks of the probe.
Footprint from_probe(const Lowered& probe, const ParallelPlan& plan) {
  Footprint f;
  f.world = plan.world_size();
  f.simulated_ranks = static_cast<int>(probe.ranks.size());
  f.fold_tp = probe.fold_tp;
  f.fold_dp = probe.fold_dp;
  f.fold_edp = probe.fold_edp;
  f.fold_reason = probe.fold_reason;
  return f;
}
}  // namespace

Footprint estimate_footprint(const TransformerSpec& model, const ClusterSpec& cluster, const ParallelPlan& plan,
                             const Calibration& cal, const SimOptions& opt, const FootprintOutputs& outputs) {
  // The lowering's own folding decision and simulated ranks (lower_ranks: no tasks).
  const Lowered probe = lower_ranks(model, cluster, plan, cal, opt);
  Footprint f = from_probe(probe, plan);
  const Count c = Estimator(model, cluster, plan, cal, opt, probe).total();
  f.tasks = c.tasks;
  f.edges = c.edges;
  f.host_spans = c.host;
  f.exchange_pieces = c.pieces;
  add_bytes(f, plan, opt, outputs);
  return f;
}

Footprint estimate_collective_footprint(const TransformerSpec& model, const ClusterSpec& cluster,
                                        const ParallelPlan& plan, const Calibration& cal, const SimOptions& opt,
                                        cost::CollectiveKind kind, double bytes) {
  const Lowered probe = lower_ranks(model, cluster, plan, cal, opt);
  Footprint f = from_probe(probe, plan);
  const Estimator est(model, cluster, plan, cal, opt, probe);
  const Count c = est.single_collective(kind, bytes);
  f.tasks = c.tasks;
  f.edges = c.edges;
  f.exchange_pieces = c.pieces;
  f.concurrent_flows = est.single_collective_concurrency(kind);
  add_bytes(f, plan, opt, {});
  return f;
}

namespace {
void add_bytes(Footprint& f, const ParallelPlan& plan, const SimOptions& opt, const FootprintOutputs& outputs) {
  const double ranks = f.simulated_ranks;
  f.bytes = kBytesBase + kBytesPerTask * f.tasks + kBytesPerEdge * f.edges;
  if (f.host_spans > 0) f.bytes += kBytesPerHostSpan * f.host_spans + kBytesPerTaskRelease * f.tasks;
  if (opt.network == NetworkMode::ANALYTIC) {
    f.engine = "analytic";
    f.bytes += kBytesPerTaskAnalytic * f.tasks;
    if (f.exchange_pieces > 0) {
      // One piece table per micro-batch's worth of exchanges (a lone collective's plan has no batch: one each).
      const int shared_by = plan.micro_batch_size > 0 && plan.dp > 0 ? std::max(1, plan.num_microbatches()) : 1;
      f.bytes += (kBytesPerExchangePiece + kBytesPerExchangePieceTable / shared_by) * f.exchange_pieces +
                 kBytesPerTaskExchange * f.tasks;
    }
  } else if (opt.engine == FlowEngine::MAXMIN ||
             (opt.engine == FlowEngine::AUTO && f.simulated_ranks > kSimgridUpToRanks)) {
    f.engine = "dtsim-maxmin";
    f.bytes += kBytesPerConcurrentFlowMaxmin * f.concurrent_flows;
  } else {
    f.engine = "simgrid-flow";
    f.bytes += kBytesPerRankPairSimgrid * ranks * ranks + kBytesPerConcurrentFlowSimgrid * f.concurrent_flows;
  }
  if (outputs.trace) {
    // trace.json holds every simulated rank up to kTraceAllRanks by default, else up to three per stage.
    const double traced = outputs.trace_ranks < 0               ? ranks
                          : outputs.trace_ranks > 0             ? std::min<double>(outputs.trace_ranks, ranks)
                          : f.simulated_ranks <= kTraceAllRanks ? ranks
                                                                : std::min<double>(ranks, 3.0 * plan.pp);
    f.bytes += kBytesPerTracedTask * (f.tasks + f.host_spans) * traced / std::max(1.0, ranks);
  }
  // trace.pftrace: a slice per task and per host span (and each span's start while rendering).
  if (outputs.perfetto) f.bytes += kBytesPerTaskPerfetto * (f.tasks + f.host_spans) + 8 * f.host_spans;
  if (outputs.chakra) f.bytes += kBytesPerTaskChakra * f.tasks;
}
}  // namespace

std::string bytes_text(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f %s", bytes / (bytes < 1e9 ? 1e6 : 1e9), bytes < 1e9 ? "MB" : "GB");
  return b;
}

std::string describe(const Footprint& f, const std::string& note) {
  char b[160];
  const double t = f.tasks;
  char tasks[32];
  if (t >= 1e6) std::snprintf(tasks, sizeof tasks, "%.1f M", t / 1e6);
  else if (t >= 1e3) std::snprintf(tasks, sizeof tasks, "%.0f k", t / 1e3);
  else std::snprintf(tasks, sizeof tasks, "%.0f", t);
  std::snprintf(b, sizeof b, "%s (%s tasks over %s simulated rank%s", bytes_text(f.bytes).c_str(), tasks,
                with_commas(f.simulated_ranks).c_str(), f.simulated_ranks == 1 ? "" : "s");
  return b + (note.empty() ? "" : "; " + note) + ")";
}

}  // namespace dtsim::sim
