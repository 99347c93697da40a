#include "strategies/estimator.hpp"

#include <algorithm>
#include <optional>

#include "strategies/memory_model.hpp"
#include "strategies/schedule.hpp"
#include "strategies/straggler_model.hpp"
#include "strategies/transformer_costs.hpp"
#include "traces/stack_profile.hpp"

namespace dtsim::estimate {

NcclContext nccl_context(const ClusterSpec& c, const Calibration& cal) {
  return {nccl::parse_setting(cal.nccl_protocol, "calibration network.nccl_protocol"), nccl::compute_capability(c.gpu),
          nccl::nvlink_nodes(c)};
}

nccl::Choice nccl_choice(const NcclContext& nc, bool all_reduce, int n, int nodes, double bytes, double bus_Bps,
                         bool ring_only) {
  nccl::Ring r;
  r.all_reduce = all_reduce;
  r.ranks = n;
  r.nodes = nodes;
  r.nvlink = nc.nvlink;
  r.compute_capability = nc.compute_capability;
  r.bytes = bytes;
  r.bus_Bps = bus_Bps;
  r.ring_only = ring_only;
  return nccl::ring_choice(nc.setting, r);
}

namespace {
// What NCCL's model changes in a ring whose own latency is `simulated_s`, as the lowering does (its floor, or the
// latency of the tree / PAT the ring stands in for: nccl::latency_adjust_s).
double nccl_extra_s(const NcclContext& nc, bool all_reduce, int n, int nodes, double bytes, double bus_Bps,
                    double simulated_s) {
  if (nc.setting == nccl::Setting::OFF || n <= 1) return 0;
  return nccl::latency_adjust_s(nccl_choice(nc, all_reduce, n, nodes, bytes, bus_Bps), simulated_s);
}
}  // namespace

double ring_time_s(bool all_reduce, int n, double bytes, double alpha_s, double bw_Bps, double step_overhead_s,
                   const NcclContext& nc, bool across_nodes) {
  if (n <= 1) return 0;
  const double steps = all_reduce ? 2.0 * (n - 1) : n - 1.0;
  const double latency_s = steps * (alpha_s + step_overhead_s);
  return latency_s + steps * bytes / n / bw_Bps +
         nccl_extra_s(nc, all_reduce, n, across_nodes ? n : 1, bytes, bw_Bps, latency_s);
}

double spread_ring_time_s(bool all_reduce, int per_node, int nodes, double bytes, double intra_alpha_s,
                          double intra_Bps, double inter_alpha_s, double inter_Bps, double step_overhead_s,
                          const NcclContext& nc) {
  const int n = per_node * nodes;
  if (n <= 1) return 0;
  if (per_node <= 1 || nodes <= 1) {
    return nodes <= 1 ? ring_time_s(all_reduce, n, bytes, intra_alpha_s, intra_Bps, step_overhead_s, nc, false)
                      : ring_time_s(all_reduce, n, bytes, inter_alpha_s, inter_Bps, step_overhead_s, nc, true);
  }
  const double steps = all_reduce ? 2.0 * (n - 1) : n - 1.0;
  const double inter_steps = (all_reduce ? 2.0 : 1.0) * (nodes - 1);
  const double chunk = bytes / n, g = per_node;
  const double step_s = std::max(chunk * (g - 1) / g / intra_Bps, chunk / g / inter_Bps);
  const double latency_s =
      inter_steps * inter_alpha_s + (steps - inter_steps) * intra_alpha_s + steps * step_overhead_s;
  return latency_s + steps * step_s + nccl_extra_s(nc, all_reduce, n, nodes, bytes, chunk / step_s, latency_s);
}

double hierarchical_all_reduce_time_s(int per_node, int nodes, double bytes, double intra_alpha_s, double intra_Bps,
                                      double inter_alpha_s, double inter_Bps, double step_overhead_s,
                                      const NcclContext& nc) {
  return 2 * ring_time_s(false, per_node, bytes, intra_alpha_s, intra_Bps, step_overhead_s, nc, false) +
         ring_time_s(true, nodes, bytes / per_node, inter_alpha_s, inter_Bps, step_overhead_s, nc, true);
}

namespace {
struct Link {
  double alpha, bw;
  bool across = false;  ///< the ring's hops cross node boundaries
};

// Ring hop of a group of `n` ranks `stride` apart in rank order (GPU = rank): inside a node or across nodes.
Link hop(const ClusterSpec& c, const Calibration& cal, int n, int stride) {
  const bool intra = static_cast<long>(n) * stride <= c.gpus_per_node && !c.has_graph();
  if (intra) return {c.intra.latency_s, c.intra.bandwidth_Bps * cal.intra_bandwidth_efficiency, false};
  return {c.inter.latency_s + (c.inter.topology != "switch" ? c.inter.spine_latency_s : 0.0),
          c.inter.nic_bandwidth_Bps * cal.inter_bandwidth_efficiency /
              (c.inter.topology != "switch" ? c.inter.oversubscription : 1.0),
          true};
}

// Links of a TP group's collectives: the whole group, or one axis of a 2-D/2.5-D/3-D layout (index = TpAxis).
struct TpLinks {
  int tp = 1;
  Link axis[7];
  int size[7] = {1, 1, 1, 1, 1, 1, 1};
  // Context-parallel, expert-parallel and expert-tensor-parallel groups (index = cost::CommGroup - 1).
  Link group[3] = {};
  int group_size[3] = {1, 1, 1};
  /// Members of each group that share one node (1 when the members are a node or more apart).
  int group_per_node[3] = {1, 1, 1};
  Link node;                  ///< the in-node link (hop() of a group inside one node)
  int overlap_chunks = 0;     ///< TP communication overlap: pieces per overlapped all-gather (0 = no overlap)
  int overlap_rs_chunks = 0;  ///< and per chunked reduce-scatter (cost::tp_overlap_pieces)
  NcclContext nc;             ///< NCCL's protocol model of the rings (nccl_context)
};

TpLinks tp_links(const ClusterSpec& c, const Calibration& cal, const NcclContext& nc, int tp, int stride_tp,
                 TpLayout layout, int depth) {
  TpLinks l;
  l.tp = tp;
  l.nc = nc;
  const int q = layout == TpLayout::D1 ? tp : std::max(1, tp_grid_side(layout, tp, depth));
  // (members, stride in tp index) of each axis; see cost::tp_axis_members for the layout of t.
  const std::pair<int, int> axes[7] = {{tp, 1}, {q, 1},     {q, q}, {tp / std::max(1, q * q), q * q},
                                       {q, q},  {q, q * q}, {q, 1}};
  for (int a = 0; a < 7; ++a) {
    l.size[a] = std::max(1, axes[a].first);
    l.axis[a] = hop(c, cal, l.size[a], axes[a].second * stride_tp);
  }
  return l;
}

/// A pass's time, its kernels' time alone and its host's issue time, scaled and summed together.
struct PassTime {
  double s = 0, kernels_s = 0, host_s = 0;
  /// The pass's device timeline in program order: (compute, then the communication after it) segments, as the
  /// lowering's link_pair cuts a pass to interleave it with another. Recorded by steps_time, joined by then(); a
  /// sum, a difference or a scaled PassTime has none.
  std::vector<std::pair<double, double>> segments;
  PassTime& operator+=(const PassTime& o) {
    s += o.s;
    kernels_s += o.kernels_s;
    host_s += o.host_s;
    segments.clear();
    return *this;
  }
  /// This pass, then `o`: the sum, with both timelines one after the other.
  PassTime then(const PassTime& o) const {
    PassTime r = *this;
    r += o;
    r.segments = segments;
    r.segments.insert(r.segments.end(), o.segments.begin(), o.segments.end());
    return r;
  }
  friend PassTime operator+(PassTime a, const PassTime& b) { return a += b; }
  friend PassTime operator-(PassTime a, const PassTime& b) {
    a.s -= b.s;
    a.kernels_s -= b.kernels_s;
    a.host_s -= b.host_s;
    a.segments.clear();
    return a;
  }
  friend PassTime operator*(double k, PassTime a) {
    a.s *= k;
    a.kernels_s *= k;
    a.host_s *= k;
    a.segments.clear();  // k passes in a row are not one pass's timeline
    return a;
  }
};

/// `detail` (optional): adds the pass's kernel time alone (no communication, no host), as the simulator's compute
/// stream is busy with it, and its host issue time; records its segments.
double steps_time(const std::vector<cost::Step>& steps, const ClusterSpec& c, const Calibration& cal, DType dt,
                  const TpLinks& tl, PassTime* detail = nullptr, bool segments = false) {
  double t = 0, host = 0, kernels = 0;
  const NcclContext& nc = tl.nc;
  // TP communication overlap (as Lowerer::overlapped_compute): an all-gather into the step's first GEMM and a
  // reduce-scatter out of its last, each in pieces pipelined with the GEMM's pieces (k for the all-gather, k_rs for
  // the reduce-scatter: Transformer Engine's defaults, cost::tp_overlap_pieces): c + (k-1) max(c, g) + g; a
  // reduce-scatter after a weight gradient whole beside it (TE's bulk overlap): max(c, g).
  const int k = tl.overlap_chunks, k_rs = tl.overlap_rs_chunks;
  auto op_s = [&](const cost::Op& op) { return cost::op_time_s(op, c.gpu, dt, cal); };
  auto piece_s = [&](const cost::Op& op, int pieces) { return op_s(cost::gemm_piece(op, pieces)); };
  auto coll_s = [&](double bytes) {
    // Transformer Engine's userbuffers, not NCCL: neither NCCL's protocol latency nor its per-step software cost
    // (Calibration::collective_step_overhead_s, fitted on NCCL rings), as Lowerer::overlapped_compute.
    return ring_time_s(false, tl.size[0], bytes, tl.axis[0].alpha, tl.axis[0].bw, 0.0);
  };
  auto overlapped = [&](const cost::Step& st, const cost::Step* ag, const cost::Step* rs) {
    const int first = ag ? cost::gemm_index(st.ops, true) : -1;
    int last = rs ? cost::gemm_index(st.ops, false) : -1;
    if (last == first) last = -1;
    double sum = 0;
    for (std::size_t i = 0; i < st.ops.size(); ++i)
      if (static_cast<int>(i) != first && static_cast<int>(i) != last) sum += op_s(st.ops[i]);
    kernels += sum;
    if (first >= 0) {
      const double g = piece_s(st.ops[static_cast<std::size_t>(first)], k), cc = coll_s(ag->collective_bytes / k);
      sum += cc + (k - 1) * std::max(cc, g) + g;
      kernels += k * g;
    }
    if (last >= 0 && cost::tp_overlap_bulk(st.ops[static_cast<std::size_t>(last)])) {
      const double g = op_s(st.ops[static_cast<std::size_t>(last)]), cc = coll_s(rs->collective_bytes);
      sum += std::max(cc, g);
      kernels += g;
    } else if (last >= 0) {
      const double g = piece_s(st.ops[static_cast<std::size_t>(last)], k_rs), cc = coll_s(rs->collective_bytes / k_rs);
      sum += g + (k_rs - 1) * std::max(cc, g) + cc;
      kernels += k_rs * g;
    }
    host += static_cast<double>(st.ops.size()) * cal.host_issue_s;
    return std::pair{sum, last >= 0};
  };
  // A step after which the host waits for the device (a dropless MoE dispatcher's token counts,
  // Calibration::moe_dispatch_sync): the host cannot have run ahead of it, and the device waits for the host to
  // issue the next kernel. Both clocks meet there, then the first issue after it is exposed.
  const bool waits = cal.moe_dispatch_sync && cal.host_issue_s > 0;
  // The segments (detail->segments): each step's time as compute or as communication.
  auto record = [&](bool comm, double dur) {
    if (!segments || !detail || dur <= 0) return;
    auto& sg = detail->segments;
    if (comm) {
      if (sg.empty()) sg.emplace_back(0.0, 0.0);
      sg.back().second += dur;
    } else {
      if (sg.empty() || sg.back().second > 0) sg.emplace_back(0.0, 0.0);
      sg.back().first += dur;
    }
  };
  auto host_wait = [&](std::size_t i) {
    if (!waits || i >= steps.size() || !steps[i].host_sync) return;
    t = host = std::max(t, host);
    t += cal.host_issue_s;
  };
  double mark = 0;  // the time at the start of the step being recorded
  bool mark_comm = false;
  for (std::size_t si = 0; si < steps.size(); ++si) {
    record(mark_comm, t - mark);
    mark = t;
    mark_comm = false;
    if (si > 0) host_wait(si - 1);
    const auto& s = steps[si];
    if (k > 1 && tl.size[0] > 1) {
      const cost::Step* next = si + 1 < steps.size() ? &steps[si + 1] : nullptr;
      if (s.kind == cost::Step::Kind::COMPUTE && next &&
          cost::tp_overlappable(*next, cost::CollectiveKind::REDUCE_SCATTER) && cost::gemm_index(s.ops, false) >= 0) {
        t += overlapped(s, nullptr, next).first;
        ++si;
        continue;
      }
      if (cost::tp_overlappable(s, cost::CollectiveKind::ALL_GATHER) && next &&
          next->kind == cost::Step::Kind::COMPUTE && cost::gemm_index(next->ops, true) >= 0) {
        const cost::Step* rs =
            si + 2 < steps.size() && cost::tp_overlappable(steps[si + 2], cost::CollectiveKind::REDUCE_SCATTER)
                ? &steps[si + 2]
                : nullptr;
        const auto [time, used_rs] = overlapped(*next, &s, rs);
        t += time;
        si += used_rs ? 2 : 1;
        continue;
      }
    }
    if (s.kind == cost::Step::Kind::COMPUTE) {
      const double st = cost::step_time_s(s, c.gpu, dt, cal);
      t += st;
      kernels += st;
      host += (s.host_issues > 0 ? s.host_issues : static_cast<double>(s.ops.size())) * cal.host_issue_s;
    } else if (s.kind == cost::Step::Kind::RING_ATTENTION) {
      // Ring attention: each of the cp blocks after its KV transfer, transfers overlapped with the previous block.
      const Link& l = tl.group[0];
      cost::Step block = s;
      block.kind = cost::Step::Kind::COMPUTE;
      const double t_block = cost::step_time_s(block, c.gpu, dt, cal);
      kernels += s.ring_steps * t_block;
      const double t_xfer = l.alpha + cal.p2p_overhead_s + s.collective_bytes / l.bw;
      t += t_block + (s.ring_steps - 1) * std::max(t_block, t_xfer) +
           (s.ring_tail_bytes > 0 ? l.alpha + s.ring_tail_bytes / l.bw : 0.0);
      host += static_cast<double>(s.ops.size() * s.ring_steps) * cal.host_issue_s;
    } else if (s.group != cost::CommGroup::TP) {
      mark_comm = true;
      const int gi = static_cast<int>(s.group) - 1;
      const int n = tl.group_size[gi];
      if (n <= 1) continue;
      const Link& l = tl.group[gi];
      if (s.collective == cost::CollectiveKind::ALL_TO_ALL && s.flex.enabled()) {
        // The flex dispatcher (strategies/flex_dispatch.hpp): its RDMA pieces (one per other domain) and NVLink
        // pieces (one per other member of its domain) at once. Members per domain from members per node: the node
        // for HybridEP and on nodes of up to 8 GPUs; DeepEP on a larger NVLink domain (NVL72) splits it into blocks
        // of 8 GPUs, here taken to hold the node's members evenly (the lowering counts them).
        const int local = tl.group_per_node[gi], dg = cost::flex_domain_gpus(s.flex, c.gpus_per_node);
        int per = dg >= c.gpus_per_node ? local : std::max(1, local * dg / c.gpus_per_node);
        while (n % per != 0) --per;
        const cost::FlexPieces fp = cost::flex_pieces(s.flex, n, per, s.collective_bytes);
        const Link& in = local < n ? tl.node : l;
        const double remote_bw = dg >= c.gpus_per_node ? l.bw : in.bw;
        const double rdma = (fp.domains - 1) * fp.rdma_piece_bytes / remote_bw;
        const double nvlink = (fp.per_domain - 1) * fp.nvlink_piece_bytes / in.bw;
        t += l.alpha + cal.collective_step_overhead_s + std::max(rdma, nvlink);
      } else if (s.collective == cost::CollectiveKind::ALL_TO_ALL) {
        // Pairwise all-to-all: the most loaded member's share sets the pace. Its pieces to members on its node go
        // over NVLink while those to other nodes go over its NIC, at the same time (the flow engines' result; the
        // analytic engine, which cannot share a port, sends them one after the other and adds the shorter tier).
        double share = 1.0 / n;
        for (double x : s.a2a_loads) share = std::max(share, x);
        const double piece = s.collective_bytes * share;
        const int local = tl.group_per_node[gi];
        const Link& in = tl.node;
        const double off_node = local < n ? (n - local) * piece / l.bw : 0.0;
        const double on_node = (local - 1) * piece / (local < n ? in.bw : l.bw);
        t += l.alpha + cal.collective_step_overhead_s + std::max(on_node, off_node);
      } else {
        t += ring_time_s(s.collective == cost::CollectiveKind::ALL_REDUCE, n, s.collective_bytes, l.alpha, l.bw,
                         cal.collective_step_overhead_s, nc, l.across);
      }
      host += cal.host_collective_issue_s;
    } else {
      mark_comm = true;
      const int a = static_cast<int>(s.axis);
      const int n = s.group_size > 0 ? s.group_size : tl.size[a];
      if (n <= 1) continue;
      t += ring_time_s(s.collective == cost::CollectiveKind::ALL_REDUCE, n, s.collective_bytes, tl.axis[a].alpha,
                       tl.axis[a].bw, cal.collective_step_overhead_s, nc, tl.axis[a].across);
      host += cal.host_collective_issue_s;
    }
  }
  record(mark_comm, t - mark);
  if (!steps.empty()) host_wait(steps.size() - 1);
  // The host issues the kernels and collectives of the pass while the GPU runs (the simulator's HOST stream runs
  // ahead): the pass takes at least their issue time.
  if (detail) detail->kernels_s += kernels, detail->host_s += host;
  return std::max(t, host);
}
}  // namespace

/// An overlapped forward-backward pair (PipeOp::with_next) as the lowering's link_pair runs it: the compute stream
/// takes the passes' compute segments alternately (forward 1, backward 1, forward 2, ...), the communication stream
/// their communication in the same order; within a pass each segment's compute waits for the previous segment's
/// communication. Returns the pair's time on the device.
double paired_time_s(const std::vector<std::pair<double, double>>& f, const std::vector<std::pair<double, double>>& b) {
  double compute = 0, comm = 0;
  double ready[2] = {0, 0};  // when each pass's next compute may start
  const std::vector<std::pair<double, double>>* passes[2] = {&f, &b};
  for (std::size_t i = 0; i < std::max(f.size(), b.size()); ++i)
    for (int k = 0; k < 2; ++k) {
      if (i >= passes[k]->size()) continue;
      const auto [c, x] = (*passes[k])[i];
      double done = ready[k];
      if (c > 0) done = compute = std::max(compute, done) + c;
      if (x > 0) done = comm = std::max(comm, done) + x;
      ready[k] = done;
    }
  return std::max(compute, comm);
}

double steps_time_s(const std::vector<cost::Step>& steps, const ClusterSpec& c, const Calibration& cal, DType dt,
                    int tp) {
  return steps_time(steps, c, cal, dt, tp_links(c, cal, nccl_context(c, cal), tp, 1, TpLayout::D1, 1));
}

Estimate estimate(const TransformerSpec& m, const ClusterSpec& c, const Calibration& hw, const ParallelPlan& plan) {
  // The plan's software stack fills in the calibration's software values (a planner may have done so already).
  const std::string stack = plan.stack.empty() ? kDefaultStack : plan.stack;
  std::optional<Calibration> filled;
  if (hw.stack != stack) filled = with_stack(hw, stack);
  // The sustained tensor-core ratio at the run's tensor-core share, as the lowering takes it.
  if (hw.sustained_tensor_ratio < 1) {
    if (!filled) filled = hw;
    filled = cost::at_tensor_share(std::move(*filled), m, c.gpu);
  }
  const Calibration& cal = filled ? *filled : hw;
  const NcclContext nc = nccl_context(c, cal);
  Estimate e;
  const int p = plan.pp, mb = plan.num_microbatches();
  // Strides of the axes in rank order (the lowering's layout without stage replication).
  int stride_tp = 1, stride_dp = 1, stride = 1;
  for (Axis a : plan.rank_order) {
    if (a == Axis::TP) stride_tp = stride;
    if (a == Axis::DP) stride_dp = stride;
    stride *= plan.degree(a);
  }
  // The TP links of a stage (heterogeneous plans: its own layout and degree).
  auto stage_tp_link = [&](int s) {
    const StageStrategy st = plan.stage_strategy(s);
    const int tp = plan.stage_tp(s);
    TpLinks l = tp_links(c, cal, nc, tp, stride_tp, st.tp_layout, st.tp_depth);
    if (plan.tp_comm_overlap) {
      l.overlap_chunks = cost::tp_overlap_pieces(cost::CollectiveKind::ALL_GATHER, tp, plan.tp_overlap_chunks);
      l.overlap_rs_chunks = cost::tp_overlap_pieces(cost::CollectiveKind::REDUCE_SCATTER, tp, plan.tp_overlap_chunks);
    }
    // CP ranks sit next to the TP ranks; EP groups span etp-strided ranks of the tp x cp x dp block (dp beyond cp).
    l.group_size[0] = plan.cp;
    l.group[0] = hop(c, cal, plan.cp, plan.tp * stride_tp);
    l.group_size[1] = plan.ep;
    l.group[1] = hop(c, cal, plan.ep, plan.expert_tp() * stride_tp);
    l.group_size[2] = plan.expert_tp();
    l.group[2] = hop(c, cal, plan.expert_tp(), stride_tp);
    l.node = hop(c, cal, 1, 1);
    const int strides[3] = {plan.tp * stride_tp, plan.expert_tp() * stride_tp, stride_tp};
    for (int g = 0; g < 3; ++g) {
      if (!c.has_graph() && strides[g] <= c.gpus_per_node)
        l.group_per_node[g] = std::max(1, std::min(l.group_size[g], c.gpus_per_node / strides[g]));
    }
    return l;
  };
  // The dense gradients' group is dp x cp (Megatron's data-parallel-with-cp): with DP right after the TP slot (tp x cp
  // ranks, cp next to tp), its members are tp ranks apart; otherwise the DP stride sets how they spread over nodes.
  const bool grad_group_contiguous = plan.cp > 1 && stride_dp == plan.tp * plan.cp * stride_tp;
  const int stride_grad = grad_group_contiguous ? plan.tp * stride_tp : stride_dp;
  const Link dp_link_ordered =
      grad_group_contiguous ? hop(c, cal, plan.dp * plan.cp, stride_grad) : hop(c, cal, plan.dp, stride_dp);
  const Link pp_link = hop(c, cal, 2, stride);
  const auto layers = plan.stage_layers(m.num_layers);
  std::vector<double> stage_time(p, 0.0), last_backward(p, 0.0), stage_compute(p, 0.0);
  // Per stage, the share of its forwards that run as an overlapped pair with a backward (the schedule's pass orders).
  std::vector<double> paired_share(static_cast<std::size_t>(p), 0.0);
  if (plan.overlap_moe_comm || plan.dual_pipe()) {
    const auto orders = sched::plan_orders(plan);
    for (int s = 0; s < p && s < static_cast<int>(orders.size()); ++s) {
      int forwards = 0, pairs = 0;
      for (const auto& op : orders[static_cast<std::size_t>(s)]) {
        forwards += op.kind == PipeOp::Kind::F ? 1 : 0;
        pairs += op.with_next ? 1 : 0;
      }
      paired_share[static_cast<std::size_t>(s)] = forwards > 0 ? static_cast<double>(pairs) / forwards : 0.0;
    }
  }
  double forward_sum_s = 0;  // the stages' forward times (DualPipeV's bubble)
  const Link intra{c.intra.latency_s, c.intra.bandwidth_Bps * cal.intra_bandwidth_efficiency};
  const double act_bytes =
      static_cast<double>(plan.micro_batch_size) * m.seq_len / plan.cp * m.hidden * dtype_bytes(m.dtype);
  for (int s = 0; s < p; ++s) {
    const ParallelPlan sv = plan.stage_view(s);
    const TpLinks tp_link = stage_tp_link(s);
    const int tp_s = plan.stage_tp(s);
    cost::Shape sh = cost::shape_of(sv, plan.micro_batch_size / plan.replicas(s));
    const auto layer = cost::layer_passes(m, sh);
    // The most loaded EP rank sets the pace of every MoE layer (the dense layers, embedding and head ignore the loads).
    if (m.moe.enabled() && (!plan.routing.balanced() || plan.routing.capacity_factor > 0))
      sh.ep_loads = cost::ep_rank_loads(plan.routing, m.moe.experts, plan.ep);
    // Partial full recompute (recompute_num_layers): the stage's layers that keep their activations run as without
    // recompute (kept_*: how many of them, dense and MoE).
    cost::Shape sh_keep = sh;
    sh_keep.recompute = Recompute::NONE;
    int moe_layers = 0, kept_dense = 0, kept_moe = 0;
    if (m.moe.enabled() || plan.recompute_num_layers > 0)
      for (int l : memory::stage_layer_indexes(m, plan, s)) {
        const bool moe_l = m.moe.enabled() && m.is_moe_layer(l);
        moe_layers += moe_l ? 1 : 0;
        if (!plan.recomputes_layer(l, m.num_layers)) ++(moe_l ? kept_moe : kept_dense);
      }
    // A pass's time and its kernels' time alone (the share the per-GPU speed variability charges), scaled and summed
    // alike.
    PassTime f, b;
    const bool paired = paired_share[static_cast<std::size_t>(s)] > 0;
    auto pass_time = [&](const std::vector<cost::Step>& v) {
      PassTime pt;
      pt.s = steps_time(v, c, cal, m.dtype, tp_link, &pt, paired);
      return pt;
    };
    // Overlapped forward-backward pairs (Megatron-Core's combined 1F1B, DualPipeV's steady state): per micro-batch,
    // what the stage's layers would hide if every forward ran paired -- each pass's all-to-alls and TP collectives
    // under the other's compute, as paired_time_s runs them, bounded by both host issues and either pass alone. (A
    // dropless dispatcher's host wait for the token counts is in its pass's segments as the time it adds.)
    double pair_saving_s = 0;
    auto saving = [&](const PassTime& fw, const PassTime& bw) {
      if (!paired) return 0.0;
      const double pair = std::max({paired_time_s(fw.segments, bw.segments), fw.host_s + bw.host_s, fw.s, bw.s});
      return std::max(0.0, fw.s + bw.s - pair);
    };
    // `count` layers of passes `lp`: their forward, their recompute and backward, and what their pairs hide.
    auto add_layers = [&](int count, const cost::LayerPasses& lp) {
      if (count == 0) return;
      const PassTime lf = pass_time(lp.forward), lb = pass_time(lp.recompute).then(pass_time(lp.backward));
      f += count * lf;
      b += count * lb;
      pair_saving_s += count * saving(lf, lb);
    };
    if (!m.layer_pattern.empty()) {
      // Per layer kind (hybrid and sliding-window models): each kind's passes timed once.
      struct Timed {
        LayerKind kind;
        bool recomputed;
        PassTime f, b;
        double saving_s;
      };
      std::vector<Timed> timed;
      for (int l : memory::stage_layer_indexes(m, plan, s)) {
        const LayerKind k = m.layer_kind(l);
        const bool rc = plan.recomputes_layer(l, m.num_layers);
        auto it = std::find_if(timed.begin(), timed.end(),
                               [&](const Timed& entry) { return entry.kind == k && entry.recomputed == rc; });
        if (it == timed.end()) {
          const auto kp = cost::layer_passes(m, rc ? sh : sh_keep, k);
          const PassTime kf = pass_time(kp.forward), kb = pass_time(kp.recompute).then(pass_time(kp.backward));
          timed.push_back({k, rc, kf, kb, saving(kf, kb)});
          it = timed.end() - 1;
        }
        f += it->f;
        b += it->b;
        pair_saving_s += it->saving_s;
      }
    } else {
      add_layers(layers[s] - moe_layers - kept_dense, layer);
      if (kept_dense > 0) add_layers(kept_dense, cost::layer_passes(m, sh_keep));
    }
    if (moe_layers > 0 && m.layer_pattern.empty()) {
      add_layers(moe_layers - kept_moe, cost::layer_passes(m, sh, true));
      if (kept_moe > 0) add_layers(kept_moe, cost::layer_passes(m, sh_keep, true));
    }
    // Boundaries inside layers: the first layer from atom a on (instead of whole), the next stage's first atoms.
    if (const int a = plan.cut_atoms(s - 1); a > 0) {
      const auto part = cost::slice_atoms(layer, a, kLayerAtoms);
      f += pass_time(part.forward) - pass_time(layer.forward);
      b +=
          pass_time(part.recompute) + pass_time(part.backward) - pass_time(layer.recompute) - pass_time(layer.backward);
    }
    if (const int a = plan.cut_atoms(s); a > 0) {
      const auto part = cost::slice_atoms(layer, 0, a);
      f += pass_time(part.forward);
      b += pass_time(part.recompute) + pass_time(part.backward);
    }
    if (plan.is_embedding_stage(s)) {
      const auto emb = cost::embedding_passes(m, sh);
      f += pass_time(emb.forward);
      b += pass_time(emb.backward);
    }
    if (plan.is_head_stage(s)) {
      const auto head = cost::head_passes(m, sh);
      f += pass_time(head.forward);
      b += pass_time(head.backward);
      if (m.mtp_layers > 0) {  // multi-token prediction after the head
        const auto mtp = cost::mtp_passes(m, sh);
        f += m.mtp_layers * pass_time(mtp.forward);
        b += m.mtp_layers * (pass_time(mtp.recompute) + pass_time(mtp.backward));
      }
    }
    if (plan.bidirectional()) {
      // DualPipe: a micro-batch runs one of the stage's two chunks (each a copy of a whole stage), the end stages'
      // embedding or head: per micro-batch, half of what the stage holds.
      f = 0.5 * f;
      b = 0.5 * b;
      pair_saving_s *= 0.5;
    }
    stage_compute[s] = f.kernels_s + b.kernels_s;
    // Heterogeneous plans: the activation from a stage of another TP layout (and its gradient going back) is
    // re-sharded over this stage's TP group (an all-to-all of its shard).
    const double reshard = ring_time_s(false, tp_s, act_bytes / plan.replicas(s) / tp_s, intra.alpha, intra.bw,
                                       cal.collective_step_overhead_s, nc, intra.across);
    if (s > 0 && plan.stage_layouts_differ(s - 1, s)) f.s += reshard;
    if (plan.offload_activation_layers > 0) {
      // Activation offloading (as lowered): each offloaded layer's copy to the host has the next layer's forward to
      // hide behind (double buffering), its copy back the next layer's backward; what they cannot hide is exposed.
      const auto off = memory::offloaded_activations(m, sv, s);
      const double n_off = static_cast<double>(plan.offload_activation_layers) * plan.virtual_stages;
      const double copy = off.bytes / n_off / c.host.link_Bps, per_layer = std::max(1, layers[s]);
      f.s += n_off * std::max(0.0, copy - f.s / per_layer);
      b.s += n_off * std::max(0.0, copy - b.s / per_layer);
    }
    if (s + 1 < p && plan.stage_layouts_differ(s + 1, s)) b.s += reshard;
    // DeepSpeed's BF16_Optimizer: after each micro-batch's backward, a pass adds the bf16 gradients of every chunk of
    // the stage into their fp32 copies (as lowered: one task per chunk).
    if (bf16_optimizer_active(cal, m.dtype == DType::BF16, plan.stage_strategy(s).zero_stage)) {
      const double acc = memory::static_memory(m, plan.stage_view(s), s).params *
                             kBf16OptimizerAccumulateBytesPerParam / (c.gpu.hbm_Bps * cal.memory_bandwidth_efficiency) +
                         plan.virtual_stages * cal.kernel_launch_s;
      b.s += acc;
      b.kernels_s += acc;
    }
    stage_time[s] = f.s + b.s - paired_share[static_cast<std::size_t>(s)] * pair_saving_s;
    last_backward[s] = b.s;
    forward_sum_s += f.s;
  }
  // Pipeline: the bottleneck stage sets the pace; fill and drain cost the other stages once (GPipe/1F1B),
  // 1/v of that with v interleaved chunks; ZB-H2 fills its bubble with weight-gradient passes.
  const double bottleneck = *std::max_element(stage_time.begin(), stage_time.end());
  double fill = 0;
  for (double t : stage_time) fill += t;
  fill -= bottleneck;
  // A TP rank sends 1/t of the activation (its sequence-parallel shard, or the stack's scatter-gather), else its
  // whole copy (Calibration::pp_scatter_gather; the lowering's send_pieces).
  const bool sp_first = plan.stage_strategy(0).sequence_parallel;
  const int p2p_split = pp_transfer_sliced(cal, sp_first) ? std::max(plan.stage_tp(0), plan.stage_tp(p - 1)) : 1;
  const double p2p = p > 1 ? pp_link.alpha + cal.p2p_overhead_s +
                                 static_cast<double>(plan.micro_batch_size) * m.seq_len / plan.cp * m.hidden *
                                     dtype_bytes(m.dtype) / p2p_split / pp_link.bw
                           : 0;
  double bubble = fill + 2.0 * (p - 1) * p2p;
  if (plan.schedule == Schedule::INTERLEAVED) bubble /= plan.virtual_stages;
  if (plan.schedule == Schedule::ZB_H1) bubble /= 3;
  if (plan.schedule == Schedule::ZB_H2) bubble = 2.0 * (p - 1) * p2p;
  if (plan.dual_pipe() && p > 1) {
    // DeepSeek-V3 report, Table 2: DualPipe's bubble is (p/2 - 1)(F&B + B - 3W) in chunk passes (B the full
    // backward, F&B the overlapped pair taken as F + B), DualPipeV's the same. With a chunk's share c of the
    // stage's per-micro-batch forward F and backward B, and W half of a backward, (p/2 - 1) c (F + B + B - 3B/2) =
    // (p/2 - 1) c (F + B/2), against 1F1B's (p - 1)(F + B) = fill. DualPipeV's chunk is half a stage (c = 1/2);
    // DualPipe's is the whole of what a micro-batch runs on the stage (c = 1).
    double total = 0;
    for (double t : stage_time) total += t;
    const double f_share = total > 0 ? forward_sum_s / total : 1.0 / 3;
    const double chunk_share = plan.bidirectional() ? 1.0 : 0.5;
    bubble = (p / 2.0 - 1) / (p - 1) * fill * chunk_share * (f_share + (1 - f_share) / 2) + 2.0 * (p - 1) * p2p;
  }
  // Blocking exchanges (the stack's p2p_sync): every pass of a stage waits for its send (2 per micro-batch and chunk).
  const double blocked = p2p_wait(cal, plan).sender ? 2.0 * plan.virtual_stages * p2p : 0.0;
  e.bottleneck_stage_s = bottleneck + blocked;
  e.pipeline_s = mb * (bottleneck + blocked) + bubble;
  // Gradient synchronisation, overlapped with the last micro-batch's backward; ZeRO's parameter all-gather after
  // the optimizer step is exposed. Rings across nodes with several members per node cross every node through each
  // member's NIC (NCCL's channels; the simulator's Lowerer::spread_ring), other rings are limited by their slowest
  // hop.
  double dp_time = 0, opt_time = 0;
  for (int s = 0; s < p; ++s) {
    const int zero = plan.stage_strategy(s).zero_stage;
    const auto sm = memory::static_memory(m, plan.stage_view(s), s);
    const int n = plan.dp * plan.cp * plan.replicas(s), tp_s = plan.stage_tp(s);
    // Stage layout (replicas or per-stage TP degrees): the stage's replicas are tp_s apart, its copies further.
    const Link dp_link = plan.uses_stage_layout() ? hop(c, cal, n, tp_s) : dp_link_ordered;
    // Dense gradients over dp x cp; the routed experts' over their expert-data-parallel group (etp x ep slots apart
    // in the tp x cp x dp block, as sim/model/groups.cpp), one collective after the other on the DP stream (the
    // lowering's close_bucket: the dense bucket, then the experts'). Each group's ring crosses nodes through every
    // member's NIC where several members share a node (NCCL's channels; the simulator's Lowerer::spread_ring), other
    // rings are limited by their slowest hop.
    const double grad_bytes = plan.fp32_grads ? 4.0 : dtype_bytes(m.dtype);
    const double dense_grads = (sm.params - sm.expert_params) * grad_bytes;
    const double expert_grads = plan.expert_dp() > 1 ? sm.expert_params * grad_bytes : 0.0;
    const int n_e = plan.expert_dp(), stride_e = plan.expert_tp() * plan.ep * stride_tp;
    struct Group {
      int n, per_node;
      Link link;
      bool two_level;
    };
    auto group_of = [&](int members, int member_stride, const Link& link) {
      const int per =
          std::max(1, std::min(members, c.gpus_per_node / std::max(1, std::min(member_stride, c.gpus_per_node))));
      return Group{members, per, link, !c.has_graph() && members > per && per > 1 && members % per == 0};
    };
    const Group dense_group = group_of(n, stride_grad, dp_link);
    const Group expert_group = group_of(n_e, stride_e, plan.uses_stage_layout() ? dp_link : hop(c, cal, n_e, stride_e));
    auto group_ring = [&](const Group& g, bool all_reduce, double bytes) {
      if (bytes <= 0 || g.n <= 1) return 0.0;
      if (!g.two_level)
        return ring_time_s(all_reduce, g.n, bytes, g.link.alpha, g.link.bw, cal.collective_step_overhead_s, nc,
                           g.link.across);
      return spread_ring_time_s(all_reduce, g.per_node, g.n / g.per_node, bytes, intra.alpha, intra.bw, g.link.alpha,
                                g.link.bw, cal.collective_step_overhead_s, nc);
    };
    // All-reduce: the faster of the spread ring and the two-level form, as the simulator's automatic choice.
    auto group_all_reduce = [&](const Group& g, double bytes) {
      if (!g.two_level) return group_ring(g, true, bytes);
      return std::min(group_ring(g, true, bytes),
                      hierarchical_all_reduce_time_s(g.per_node, g.n / g.per_node, bytes, intra.alpha, intra.bw,
                                                     g.link.alpha, g.link.bw, cal.collective_step_overhead_s, nc));
    };
    auto dp_ring = [&](bool all_reduce) {
      return group_ring(dense_group, all_reduce, dense_grads) + group_ring(expert_group, all_reduce, expert_grads);
    };
    auto all_reduce = [&] {
      return group_all_reduce(dense_group, dense_grads) + group_all_reduce(expert_group, expert_grads);
    };
    const double ring = dp_ring(false);
    double hidden_part = 0, exposed_part = 0;
    if (zero == 0) hidden_part = all_reduce();
    if (zero == 1 || zero == 2) {  // RS (BF16_Optimizer at ZeRO-1: AR), then AG
      hidden_part = bf16_optimizer_active(cal, m.dtype == DType::BF16, zero) ? all_reduce() : ring;
      exposed_part = ring;
    }
    if (zero == 3) exposed_part = 3.0 * mb * ring;  // FSDP: gather twice, reduce-scatter, per micro-batch
    double overlap = plan.dp_overlap ? last_backward[s] : 0.0;
    if (zero == 2 && plan.megatron_fsdp) {  // every micro-batch's reduce-scatter under its backward; AG after the step
      hidden_part = mb * ring;
      overlap = mb * last_backward[s];  // launched after each unit's backward, dp_overlap or not
    }
    // Interference (as the flow engine): the gradient collectives run at 1 / (1 + c) beside the backward's kernels,
    // which run at 1 / (1 + g) for the length w of the overlap and so end w g / (1 + g) later.
    const double sg = cal.interference_gemm_slowdown, sc = cal.interference_collective_slowdown;
    const double hidden = overlap > 0 ? hidden_part * (1 + sc) : hidden_part;
    const double w = std::min(hidden, overlap * (1 + sg));
    const double stretch = w * sg / (1 + sg);
    if (plan.bidirectional()) {
      // DualPipe: the gradient shard summed with the mirror stage's copy (pp - 1 - s), after the DP reductions.
      const Link mirror = hop(c, cal, 2, std::max(1, std::abs(p - 1 - 2 * s)) * stride);
      exposed_part += ring_time_s(true, 2, sm.step_params * grad_bytes, mirror.alpha, mirror.bw,
                                  cal.collective_step_overhead_s, nc, mirror.across);
    }
    dp_time = std::max(dp_time, std::max(stretch, hidden - overlap) + exposed_part);
    const double shard = sm.step_params;
    double step = memory::optimizer_step_s(plan, c.host, shard, cal.optimizer_bytes_per_param,
                                           c.gpu.hbm_Bps * cal.memory_bandwidth_efficiency);
    if (cal.grad_clip) {
      // Gradient clipping: a pass over the gradient shard, then the norm's all-reduce over TP and DP (as lowered).
      step += shard * grad_bytes / (c.gpu.hbm_Bps * cal.memory_bandwidth_efficiency);
      if (tp_s > 1)
        step += ring_time_s(true, tp_s, 4, intra.alpha, intra.bw, cal.collective_step_overhead_s, nc, intra.across);
      if (n > 1)
        step += ring_time_s(true, n, 4, dp_link.alpha, dp_link.bw, cal.collective_step_overhead_s, nc, dp_link.across);
    }
    opt_time = std::max(opt_time, step);
  }
  opt_time += cal.per_iteration_s;
  e.dp_exposed_s = dp_time;
  e.optimizer_s = opt_time;
  // Per-GPU speed variability (strategies/straggler_model.hpp): each rank waits this share of its kernels' time (as
  // the simulator's compute stream: no communication, no host costs); the bottleneck stage's sets the pace.
  e.variability_wait_s = straggler::pace_fraction(cal, plan.world_size()) * mb *
                         *std::max_element(stage_compute.begin(), stage_compute.end());
  e.iteration_s = e.pipeline_s + e.dp_exposed_s + e.optimizer_s + e.variability_wait_s;
  for (int s = 0; s < p; ++s) {
    const double peak = memory::analytic_peak_bytes(m, plan.stage_view(s), s, cal.reserved_memory_bytes) +
                        memory::bf16_optimizer_grad_copy_bytes(m, plan, s, cal);
    e.stage_peak_bytes.push_back(peak);
    e.peak_bytes = std::max(e.peak_bytes, peak);
  }
  e.fits = e.peak_bytes <= c.gpu.memory_bytes;
  return e;
}

}  // namespace dtsim::estimate
