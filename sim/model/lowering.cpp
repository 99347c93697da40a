#include "sim/model/lowering.hpp"

#include "traces/stack_profile.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <tuple>
#include <unordered_map>

#include "sim/model/groups.hpp"
#include "strategies/estimator.hpp"
#include "strategies/nccl_model.hpp"
#include "strategies/schedule.hpp"
#include "strategies/straggler_model.hpp"
#include "strategies/transformer_costs.hpp"
#include "traces/routing.hpp"
#include "traces/text.hpp"
#include "traces/units.hpp"

namespace dtsim::sim {

std::string to_string(CollectiveMode m) { return m == CollectiveMode::FLOW ? "flow" : "steps"; }
std::string to_string(FoldMode m) { return m == FoldMode::AUTO ? "auto" : "none"; }
std::string to_string(NetworkMode m) { return m == NetworkMode::FLOW ? "flow" : "analytic"; }
std::string to_string(FlowEngine e) {
  return e == FlowEngine::AUTO ? "auto" : e == FlowEngine::SIMGRID ? "simgrid" : "maxmin";
}
std::string to_string(CollectiveAlgorithm a) {
  switch (a) {
    case CollectiveAlgorithm::AUTO: return "auto";
    case CollectiveAlgorithm::RING: return "ring";
    case CollectiveAlgorithm::HIERARCHICAL: return "hierarchical";
    case CollectiveAlgorithm::TREE: return "tree";
    case CollectiveAlgorithm::NVLS: return "nvls";
  }
  return "?";
}

Path path_between(const ClusterSpec& c, int gpu_a, int gpu_b) {
  if (c.node_of(gpu_a) == c.node_of(gpu_b)) return Path::INTRA_NODE;
  if (c.leaf_of(gpu_a) == c.leaf_of(gpu_b)) return Path::INTER_NODE;
  return c.pod_of(gpu_a) == c.pod_of(gpu_b) ? Path::CROSS_LEAF : Path::CROSS_POD;
}

namespace {

using cost::CollectiveKind;

struct FoldDecision {
  bool tp = false, dp = false;
  /// Under skewed routing: the expert-data-parallel copies of each EP group folded onto the copy with the lowest
  /// data-parallel coordinates (Lowerer::fold_rep); the EP groups' own ranks stay simulated.
  bool edp = false;
  std::string reason;
  /// Folding with multiplicity: per global rank (filled for the representatives only), how many ranks of its fold
  /// class load its NIC's links and its leaf/pod uplinks alike. Empty when every shared link carries one flow per
  /// simulated flow.
  std::vector<std::array<int, 2>> share;
};

class Lowerer {
public:
  Lowerer(const TransformerSpec& m, const ClusterSpec& c, const ParallelPlan& p, const Calibration& cal,
          const SimOptions& opt, const PassCosts& costs)
      : m_(m),
        c_(c),
        p_(p),
        // the sustained tensor-core ratio at this run's tensor-core share (power capping, transformer_costs.hpp)
        cal_(cost::at_tensor_share(
            cal.stack == (p.stack.empty() ? kDefaultStack : p.stack) ? cal : with_stack(cal, p.stack), m, c.gpu)),
        opt_(opt),
        costs_(costs) {}

  Lowered run();
  Lowered run_collective(CollectiveKind kind, double bytes);
  /// The simulated ranks and the folding decision only (no tasks): what the footprint estimate needs.
  Lowered run_ranks() {
    setup_ranks();
    return std::move(out_);
  }
  void set_stage_costs(std::vector<PassCosts> c) { stage_costs_ = std::move(c); }

private:
  // --- topology helpers
  /// The members of `rank`'s group over `ax` (sim::group_members), remembered: a rank's collectives ask for the same
  /// groups once per layer and micro-batch, and each answer costs a rank-coordinate round trip per member (5% of the
  /// skewed DeepSeek-V3 run on 2,048 H100s, bench/speed2026.sh dsv3-skew, before).
  const std::vector<int>& group_members(int rank, GroupAxis ax) const {
    const auto key = static_cast<std::int64_t>(rank) * kNumGroupAxes + static_cast<std::int64_t>(ax);
    auto it = members_cache_.find(key);
    if (it == members_cache_.end()) it = members_cache_.emplace(key, sim::group_members(p_, rank, ax)).first;
    return it->second;
  }
  bool uniform_replicas() const {
    for (int s = 0; s < p_.pp; ++s)
      if (p_.replicas(s) != p_.replicas(0)) return false;
    return true;
  }
  /// True when every stage has the plan's TP degree.
  bool uniform_tp() const { return !p_.has_stage_tp(); }
  const PassCosts& stage_costs(int stage) const { return stage_costs_.empty() ? costs_ : stage_costs_[stage]; }
  /// Bottleneck bandwidth of the hop from GPU a to GPU b (after calibrated efficiencies).
  double hop_bandwidth(Path path, int a, int b) const {
    if (routing_) return route_bandwidth_Bps(*routing_, c_.graph, cal_, gpu(a), gpu(b));
    return path == Path::INTRA_NODE ? c_.intra.bandwidth_Bps * cal_.intra_bandwidth_efficiency
                                    : c_.inter.nic_bandwidth_Bps * cal_.inter_bandwidth_efficiency;
  }
  /// Extra time of one message of `bytes` from the calibration's message-size segments:
  /// alpha (lf - 1) + bytes / B (1 / bf - 1).
  double segment_extra_s(Path path, int a, int b, double alpha, double bytes) const {
    if (cal_.network_segments.empty()) return 0;
    const auto [lf, bf] = cal_.segment_factors(path == Path::INTRA_NODE ? "intra" : "inter", bytes);
    return alpha * (lf - 1) + bytes / hop_bandwidth(path, a, b) * (1 / bf - 1);
  }
  /// Path kind between two ranks of this plan (GPU = rank + the job's first GPU).
  Path path(int a, int b) const { return path_between(c_, gpu(a), gpu(b)); }
  double hop_latency(Path path) const {
    if (path == Path::INTRA_NODE) return c_.intra.latency_s;
    return c_.inter.latency_s + (path == Path::CROSS_LEAF  ? c_.inter.spine_latency_s
                                 : path == Path::CROSS_POD ? 2 * c_.inter.spine_latency_s
                                                           : 0.0);
  }
  FoldDecision decide_folding() const;
  bool fold_shares(const std::vector<int>& rep, std::vector<std::array<int, 2>>* share) const;
  /// Whether folding tp and/or dp (or the expert-data-parallel copies, `edp`) is exact; with `share`, the
  /// multiplicities of shared links (FoldDecision::share).
  bool fold_ok(bool tp, bool dp, std::vector<std::array<int, 2>>* share, bool edp = false) const;
  /// The rank that stands for `rank` when tp, dp or the expert-data-parallel copies (edp) are folded.
  int fold_rep(int rank, bool tp, bool dp, bool edp) const { return fold_rep(p_.coord_of(rank), tp, dp, edp); }
  int fold_rep(RankCoord c, bool tp, bool dp, bool edp) const;
  /// Ranks per expert-data-parallel copy set: EP groups whose ranks differ in block index by a multiple of etp x ep
  /// are copies of each other (the block index's dp part modulo edp_period()).
  int edp_period() const { return p_.expert_tp() * p_.ep; }
  /// With the EDP fold: every ring of `members` (their sorted ring, and the node-local and next-node successors of
  /// the spread and hierarchical rings) commutes with fold_rep: a copy's successor is a copy of its representative's
  /// successor, so a folded member's steps are its representative's.
  bool edp_rings_periodic(const std::vector<int>& members) const;
  /// Whether some member of `members` is folded away (simulated by another rank).
  bool any_folded(const std::vector<int>& members) const {
    for (int m : members)
      if (out_.ranks[out_.sim_index_of[m]].global_rank != m) return true;
    return false;
  }
  /// Per member index of a group laid out node by node (node_blocks: `by_node`, g members per node): its successor on
  /// its node's ring and the member at its position on the next node (the spread and hierarchical rings).
  static void node_ring_successors(const std::vector<std::pair<int, int>>& by_node, std::size_t g,
                                   std::vector<int>* local, std::vector<int>* next) {
    const std::size_t nodes = by_node.size() / g;
    local->assign(by_node.size(), -1);
    next->assign(by_node.size(), -1);
    for (std::size_t nd = 0; nd < nodes; ++nd)
      for (std::size_t j = 0; j < g; ++j) {
        const auto m = static_cast<std::size_t>(by_node[nd * g + j].second);
        (*local)[m] = by_node[nd * g + (j + 1) % g].second;
        (*next)[m] = by_node[(nd + 1) % nodes * g + j].second;
      }
  }
  /// A collective group with folded-away members and several simulated ones (the EDP fold's data-parallel rings).
  bool partially_folded(const std::vector<int>& members) const;

  // --- task creation
  std::int32_t add_free(Task t) { return g_.add(t); }
  std::int32_t add_on_stream(int si, Task t) {
    t.rank = si;
    if (t.kind == TaskKind::COMPUTE && t.stream == Stream::COMPUTE)
      compute_busy_s_[static_cast<std::size_t>(si)] += t.duration_s;
    auto id = g_.add(t);
    chain(si, t.stream, id, id);
    return id;
  }
  /// The CPU issuing work for `gated` (a step's kernels, a collective call): duration_s of the rank's host, in
  /// program order, that `gated` cannot start before; it keeps `like`'s phase, name, layer and micro-batch.
  /// When the host never waits for the device (no host-sync JOIN on the HOST stream), the host's work is a chain
  /// from t = 0 that nothing else delays: its ends are known now, so `gated` gets its end as a release time and the
  /// span is kept for the trace (HostSpan), with no task, edges or engine event (a large unfolded run has one such
  /// span for every compute step). Otherwise a DELAY task on the rank's HOST stream.
  void host_issue(int si, Task like, double duration_s, std::int32_t gated) {
    if (host_runs_ahead_) {
      double& clock = host_clock_[static_cast<std::size_t>(si)];
      clock += duration_s;
      g_.release_at_least(gated, clock);
      g_.add_host_span({clock, si, like.name, like.microbatch, like.layer, like.phase});
      return;
    }
    like.kind = TaskKind::DELAY;
    like.stream = Stream::HOST;
    like.flops = 0;
    like.duration_s = duration_s;
    g_.depend(add_on_stream(si, like), gated);
  }
  /// A JOIN on rank si's HOST stream (the host waiting for the device; the caller adds what it waits for): every
  /// later host issue of the rank starts after it.
  std::int32_t host_join(int si, Phase phase, int layer, int mb, std::int32_t name) {
    Task sync;
    sync.kind = TaskKind::JOIN;
    sync.stream = Stream::HOST;
    sync.phase = phase;
    sync.layer = layer;
    sync.microbatch = mb;
    sync.name = name;
    return add_on_stream(si, sync);
  }
  void chain(int si, Stream s, std::int32_t first, std::int32_t last) {
    if (si == pair_rank_) {  // an overlapped pair's pass: linked in link_pair
      pair_log_[pair_pass_].push_back({s, first, last});
      return;
    }
    auto& prev = last_[si][static_cast<int>(s)];
    if (prev >= 0) g_.depend(prev, first);
    prev = last;
  }
  /// Overlapped forward and backward (PipeOp::with_next; DualPipe's overlapped_forward_backward, Megatron-Core's
  /// combined 1F1B): the two passes are lowered one after the other with their stream pieces logged instead of
  /// chained; link_pair then chains them per stream in one program order that alternates between the passes at
  /// each of their communication steps (a compute piece after a TP-stream piece starts a new segment): forward
  /// segment 1, backward segment 1, forward segment 2, ..., so that each pass's all-to-alls (and TP collectives)
  /// run while the other computes. Each pass keeps its own order; the two do not depend on each other.
  struct PairPiece {
    Stream stream;
    std::int32_t first, last;
  };
  int pair_rank_ = -1, pair_pass_ = 0;
  std::array<std::vector<PairPiece>, 2> pair_log_;
  void link_pair(int si) {
    std::array<std::vector<std::vector<PairPiece>>, 2> segs;
    for (int pass = 0; pass < 2; ++pass) {
      bool comm_since = true;
      for (const auto& pc : pair_log_[static_cast<std::size_t>(pass)]) {
        if (pc.stream == Stream::COMPUTE && comm_since) {
          segs[static_cast<std::size_t>(pass)].emplace_back();
          comm_since = false;
        }
        if (segs[static_cast<std::size_t>(pass)].empty()) segs[static_cast<std::size_t>(pass)].emplace_back();
        segs[static_cast<std::size_t>(pass)].back().push_back(pc);
        if (pc.stream == Stream::TP) comm_since = true;
      }
    }
    pair_rank_ = -1;
    for (std::size_t i = 0; i < std::max(segs[0].size(), segs[1].size()); ++i)
      for (const auto& pass : segs)
        if (i < pass.size())
          for (const auto& pc : pass[i]) chain(si, pc.stream, pc.first, pc.last);
    pair_log_[0].clear();
    pair_log_[1].clear();
  }
  /// A rank's own part [first .. done] of a collective (folded forms): after `pred` and the stream's previous
  /// task; reports `first` and returns `done`.
  std::int32_t attach(int si, Stream s, std::int32_t pred, std::int32_t first, std::int32_t done,
                      std::int32_t* first_out) {
    if (first_out) *first_out = first;
    if (pred >= 0) g_.depend(pred, first);
    chain(si, s, first, done);
    return done;
  }
  /// `tp_axis`: for the TP group, the layout axis the collective runs over (the whole group by default).
  std::int32_t collective(int si, GroupAxis ax, Stream stream, CollectiveKind kind, double bytes, Phase phase,
                          const std::string& name, int layer, int mb, std::int32_t pred,
                          std::int32_t* first_out = nullptr, cost::TpAxis tp_axis = cost::TpAxis::ALL);
  /// One ring over explicit `members` (sorted global ranks), instance `key_code` of sequence number `seq`.
  std::int32_t ring_collective(int si, const std::vector<int>& members, bool folded, int key_code, int seq,
                               Stream stream, CollectiveKind kind, double bytes, Phase phase, std::int32_t name_id,
                               int layer, int mb, std::int32_t pred, std::int32_t* first_out);
  /// `members` grouped by node: `by_node` = (node, member index) sorted; returns the members per node, 0 when the
  /// nodes they occupy do not hold the same number each.
  std::size_t node_blocks(const std::vector<int>& members, std::vector<std::pair<int, int>>* by_node) const;
  /// Whether a ring of `members` with `per_node` on each node spreads over every member's NIC (spread_ring).
  bool spreads(std::size_t per_node, std::size_t members) const;
  /// Hierarchical form of `members`: node-local sub-group and the same-local-index group across nodes; empty
  /// when the members do not have the same number on every node they occupy.
  bool split_hierarchical(int grank, const std::vector<int>& members, std::vector<int>* local,
                          std::vector<int>* cross) const;
  /// `bytes`: the all-reduce's size, for the automatic choice between the hierarchical form and the spread ring
  /// (hierarchical_all_reduce_is_faster); negative: whether any size may use the hierarchical form.
  bool use_hierarchical(CollectiveKind kind, int grank, const std::vector<int>& members, double bytes) const;
  /// NCCL's ring across nodes with g > 1 members on each (one channel per NIC): per member index its node-local
  /// successor and its same-position successor on the next node; false where the ring crosses each node once.
  bool spread_ring(const std::vector<int>& members, std::vector<int>* local_succ, std::vector<int>* node_succ,
                   int* per_node) const;
  /// NCCL's protocol for a ring collective of `bytes` over `members` (strategies/nccl_model.hpp).
  nccl::Choice nccl_ring(CollectiveKind kind, const std::vector<int>& members, double bytes) const;
  /// The calibration's size rule or the forced algorithm; AUTO = decide by group shape.
  CollectiveAlgorithm algorithm_for(CollectiveKind kind, double bytes) const;
  bool may_use_trees() const;
  std::int32_t nvls_all_reduce(int si, const std::vector<int>& members, bool folded, int key_code, int seq,
                               Stream stream, double bytes, Phase phase, std::int32_t name_id, int layer, int mb,
                               std::int32_t pred, std::int32_t* first_out);
  std::int32_t tree_all_reduce(int si, const std::vector<int>& members, int key_code, int seq, Stream stream,
                               double bytes, Phase phase, std::int32_t name_id, int layer, int mb, std::int32_t pred,
                               std::int32_t* first_out);
  /// Broadcast from / reduce to members[0] along the chain members[0] -> members[1] -> ..., pipelined in k
  /// chunks of at most 512 KiB: (n - 1 + k - 1) (alpha + S / (k B)) on uniform links.
  std::int32_t chain_collective(int si, const std::vector<int>& members, bool folded, int key_code, int seq,
                                Stream stream, CollectiveKind kind, double bytes, Phase phase, std::int32_t name_id,
                                int layer, int mb, std::int32_t pred, std::int32_t* first_out);
  /// The order in which each member of an all-to-all sends to the others, [j * (n - 1) + k]: member indices. NCCL's
  /// p2p schedule (src/init.cc, comm->p2pSchedule, NCCL 2.19 on): the members grouped by node, round by node delta,
  /// then by local delta, member (node g, local l) sends to (node g + dg, local l + dl); so at every step each member
  /// receives from exactly one other, on each of its lanes. NCCL steps the node deltas quadratically ((x^2 + x) / 2
  /// mod a power of two) where this steps them in turn: the same pairs at each step, in another order of steps.
  /// Members not spread evenly over nodes: empty, the pairwise-exchange order (Exchange::send_target).
  std::vector<std::int32_t> send_order(const std::vector<int>& members) const;
  /// Direct (pairwise, all at once) all-to-all: after one start-up latency every member sends S/n to every
  /// other member; it is done when its own sends and everything addressed to it have arrived.
  std::int32_t direct_all_to_all(int si, const std::vector<int>& members, bool folded, int key_code, int seq,
                                 Stream stream, double bytes, Phase phase, std::int32_t name_id, int layer, int mb,
                                 std::int32_t pred, std::int32_t* first_out);
  std::int32_t p2p(int si_from, int si_to, double bytes, Phase phase, const std::string& name, int mb,
                   std::int32_t pred);
  std::int32_t run_steps(int si, const std::vector<cost::Step>& steps, Phase phase, int layer, int mb,
                         std::int32_t pred, std::int32_t* first_task, const std::string& prefix);
  void lower_rank(int si);
  void setup_ranks();
  Lowered finish();

  const TransformerSpec& m_;
  const ClusterSpec& c_;
  const ParallelPlan& p_;
  mutable std::unordered_map<std::int64_t, std::vector<int>> members_cache_;  ///< group_members
  const Calibration cal_;  ///< the hardware calibration with the plan's software stack filled in
  const SimOptions& opt_;
  const PassCosts& costs_;
  std::vector<PassCosts> stage_costs_;  ///< per stage when stage replicas change the micro-batch size
  const int off_ = opt_.first_gpu;      ///< GPU of rank 0 (several jobs on one cluster)
  /// Global GPU of plan rank `rank`: the job's first GPU + the plan's device mapping.
  int gpu(int rank) const { return off_ + p_.gpu_of_rank(rank); }
  std::unique_ptr<GraphRouting> routing_ = c_.has_graph() ? std::make_unique<GraphRouting>(c_.graph) : nullptr;
  const estimate::NcclContext nccl_ = estimate::nccl_context(c_, cal_);  ///< NCCL's protocol model of the rings
  /// Set while the pieces of a TP-overlapped collective are lowered: Transformer Engine's userbuffers move them with
  /// copy-engine / SM point-to-point exchanges, not NCCL kernels, so NCCL's protocol latencies do not apply.
  bool userbuffers_ = false;
  /// NCCL's software cost per ring step (Calibration::collective_step_overhead_s, fitted on NCCL rings); none for the
  /// pieces of Transformer Engine's userbuffers overlap, which are not NCCL's (each pays its hop's latency).
  double step_overhead_s() const { return userbuffers_ ? 0.0 : cal_.collective_step_overhead_s; }

  TaskGraph g_;
  Lowered out_;
  std::vector<std::array<std::int32_t, kNumStreams>> last_;
  /// host_issue as release times (the host never syncs with the device); each rank's host clock so far.
  bool host_runs_ahead_ = true;
  bool moe_waits_ = false;  ///< moe_dispatch_waits: a step marked host_sync makes the host wait for it
  std::vector<double> host_clock_;
  std::vector<double> compute_busy_s_;  ///< per simulated rank: its compute tasks' nominal time so far
  /// Per-GPU speed variability (strategies/straggler_model.hpp): the fraction of its compute a rank waits for the
  /// job's slowest GPU.
  const double variability_pace_ = straggler::pace_fraction(cal_, p_.world_size());
  std::vector<std::array<int, kNumGroupAxes>> seq_;  // per simulated rank, per GroupAxis: collectives issued so far
  int block_index(const RankCoord& c) const { return sim::block_index(p_, c); }
  RankCoord block_coord(int j, int pp) const { return sim::block_coord(p_, j, pp); }
  /// Expert-parallel index of a rank (which block of experts it holds).
  int ep_index(int rank) const { return (block_index(p_.coord_of(rank)) / p_.expert_tp()) % p_.ep; }
  /// A rank's part of ring attention (RING_ATTENTION step): blocks on the compute stream, KV transfers to the CP
  /// ring successor.
  /// A COMPUTE task running `ops` after `pred` (host issue, interference weight, recorded kernels). `issued`: the
  /// pass's CUDA-graph launch (set once the first task of the pass is issued).
  /// `host_kernels`: framework-level kernels the host issues for the task (-1 = one per op; the pieces of an
  /// overlapped GEMM are one framework call).
  std::int32_t compute_task(int si, const std::vector<cost::Op>& ops, Phase phase, const std::string& name, int layer,
                            int mb, std::int32_t pred, bool* issued, int host_kernels = -1);
  /// A compute step with its TP all-gather (`ag`) and/or reduce-scatter (`rs`) overlapped in pieces.
  std::int32_t overlapped_compute(int si, const cost::Step& st, const cost::Step* ag, const cost::Step* rs, Phase phase,
                                  int layer, int mb, std::int32_t pred, const std::string& prefix, bool* issued);
  std::int32_t ring_attention(int si, const cost::Step& st, Phase phase, int layer, int mb, std::int32_t pred,
                              const std::string& prefix);

  struct Instance {
    std::int32_t join = -1;
    std::vector<std::int32_t> first, done;  // per member (ring order)
    std::vector<int> members_si;
    int joined = 0;  ///< members whose lowering has reached it; forgotten once all have
  };
  using Instances = std::map<std::tuple<int, int, int>, Instance>;
  /// The fields every task of one collective shares.
  static Task collective_base(Stream stream, Phase phase, std::int32_t name_id, int layer, int mb) {
    Task t;
    t.stream = stream;
    t.phase = phase;
    t.name = name_id;
    t.layer = layer;
    t.microbatch = mb;
    return t;
  }
  /// A new instance with its rendezvous join (owned by simulated rank `si` for bookkeeping only).
  Instance new_instance(const Task& base, int si) {
    Instance inst;
    Task j = base;
    j.kind = TaskKind::JOIN;
    j.rank = si;
    inst.join = add_free(j);
    return inst;
  }
  /// Stores a new instance, with its CollectiveRecord when SimOptions::record_collectives asks (its tasks are those
  /// added since its join).
  Instances::iterator store_instance(const std::tuple<int, int, int>& key, Instance inst, CollectiveKind kind,
                                     double bytes) {
    if (opt_.record_collectives)
      out_.collectives.push_back(
          {kind, bytes, inst.join, static_cast<std::int32_t>(g_.size()), inst.members_si, inst.done});
    return instances_.emplace(key, std::move(inst)).first;
  }
  /// Rendezvous (as NCCL): the collective starts on every member once each member's data is ready and each
  /// member's stream has reached it, so no member moves data before its peers have joined. Returns the
  /// member's done task.
  std::int32_t join_instance(Instances::iterator it, int si, Stream stream, std::int32_t pred,
                             std::int32_t* first_out) {
    Instance& inst = it->second;
    const auto pos = std::find(inst.members_si.begin(), inst.members_si.end(), si) - inst.members_si.begin();
    DTSIM_ASSERT(pos < static_cast<long>(inst.members_si.size()), "rank not in its own collective");
    if (first_out) *first_out = inst.first[pos];
    if (pred >= 0) g_.depend(pred, inst.join);
    const std::int32_t done = inst.done[pos];
    chain(si, stream, inst.join, done);
    if (++inst.joined == static_cast<int>(inst.members_si.size())) instances_.erase(it);  // memory of large runs
    return done;
  }
  Instances instances_;  // (group leader, axis, sequence): instances some members have not reached yet
  /// The all-to-all piece tables given to exchanges so far, by a hash of their contents: an exchange moving the same
  /// pieces as an earlier one shares its table (Exchange::Pieces).
  std::unordered_map<std::uint64_t, std::vector<std::shared_ptr<const Exchange::Pieces>>> exchange_pieces_;
  Exchange::Pieces pieces_scratch_;  ///< the table being built, before it is looked up
  std::shared_ptr<const Exchange::Pieces> intern_pieces() {
    // FNV-1a over the payloads' bits and the paths.
    std::uint64_t h = 1469598103934665603ULL;
    auto mix = [&h](std::uint64_t v) { h = (h ^ v) * 1099511628211ULL; };
    for (double b : pieces_scratch_.bytes) mix(std::bit_cast<std::uint64_t>(b));
    for (std::uint8_t p : pieces_scratch_.piece) mix(p);
    for (std::int32_t t : pieces_scratch_.order) mix(static_cast<std::uint64_t>(t));
    auto& same_hash = exchange_pieces_[h];
    for (const auto& t : same_hash)
      if (*t == pieces_scratch_) return t;
    same_hash.push_back(std::make_shared<const Exchange::Pieces>(pieces_scratch_));
    return same_hash.back();
  }
  /// The EP all-to-all being lowered under skewed routing: per-EP-rank loads and its shape (see cost::Step).
  const std::vector<double>* a2a_loads_ = nullptr;
  bool a2a_combine_ = false;
  /// The EP all-to-all being lowered is the flex dispatcher's (cost::Step::flex); nullptr otherwise.
  const cost::FlexDispatch* flex_ = nullptr;

  // Pipeline transfers: (receiving simulated rank, micro-batch, model chunk, 0 = activation / 1 = gradient) -> flow.
  std::map<std::tuple<int, int, int, int>, std::vector<std::int32_t>> sent_;
  struct Waiting {
    std::int32_t task;
    int si, mb, chunk, dir;
    std::int32_t ready = -1;  ///< blocking transfers (p2p_sync): the receiver has posted its receive after this task
  };
  std::vector<Waiting> waiting_;
  std::vector<std::vector<PipeOp>> orders_;  // per stage
};

int Lowerer::fold_rep(RankCoord c, bool tp, bool dp, bool edp) const {
  if (edp) {
    // The copy of the rank's expert grid position with the lowest block index: the dp part of the block index
    // modulo the EP grid's span (decide_folding keeps etp x ep a multiple of tp x cp, so tp and cp stay).
    const int pp = c.pp;
    c = sim::block_coord(p_, sim::block_index(p_, c) % edp_period(), pp);
  }
  if (tp) c.tp = 0;
  if (dp) c.dp = c.rep = 0;
  return p_.rank_of(c);
}

bool Lowerer::partially_folded(const std::vector<int>& members) const {
  if (out_.sim_index_of.empty()) return false;
  int simulated = 0;
  bool folded = false;
  for (int m : members) {
    if (out_.ranks[out_.sim_index_of[m]].global_rank == m) ++simulated;
    else folded = true;
  }
  return folded && simulated > 1;
}

bool Lowerer::edp_rings_periodic(const std::vector<int>& members) const {
  // rep(succ(m)) == rep(succ(rep(m))) for every member and every successor relation its rings use: a copy's ring
  // neighbours are copies of its representative's.
  const std::size_t n = members.size();
  std::map<int, std::size_t> at;
  for (std::size_t i = 0; i < n; ++i) at[members[i]] = i;
  auto rep_at = [&](std::size_t i) -> long {
    const auto it = at.find(fold_rep(members[i], false, false, true));
    return it == at.end() ? -1 : static_cast<long>(it->second);
  };
  std::vector<long> rep(n);
  for (std::size_t i = 0; i < n; ++i)
    if ((rep[i] = rep_at(i)) < 0) return false;  // a representative outside the group
  auto commutes = [&](const std::vector<int>& succ) {
    for (std::size_t i = 0; i < n; ++i)
      if (rep[static_cast<std::size_t>(succ[i])] !=
          rep[static_cast<std::size_t>(succ[static_cast<std::size_t>(rep[i])])])
        return false;
    return true;
  };
  std::vector<int> ring(n);
  for (std::size_t i = 0; i < n; ++i) ring[i] = static_cast<int>((i + 1) % n);
  if (!commutes(ring)) return false;
  std::vector<std::pair<int, int>> by_node;
  const std::size_t g = node_blocks(members, &by_node);
  if (g == 0 || g == n) return true;
  std::vector<int> local, next;
  node_ring_successors(by_node, g, &local, &next);
  return commutes(local) && commutes(next);
}

bool Lowerer::fold_ok(bool tp, bool dp, std::vector<std::array<int, 2>>* share, bool edp) const {
  share->clear();  // filled only when the folding is exact and needs multiplicities
  const int world = p_.world_size();
  if ((dp || edp) && !uniform_replicas()) return false;  // uneven stage widths: pipeline traffic is not symmetric
  // Each rank's representative and pipeline stage, computed once (a million ranks: coord_of is the hot spot).
  std::vector<int> rep(world), stage_of(world);
  for (int r = 0; r < world; ++r) {
    const RankCoord c = p_.coord_of(r);
    stage_of[r] = c.pp;
    rep[r] = fold_rep(c, tp, dp, edp);
  }
  if (edp) {
    // The data-parallel rings hold several simulated members and their copies: each must be periodic under the
    // fold (a folded member's predecessor is then a copy of its representative's predecessor).
    std::vector<char> done(world);
    for (int r = 0; r < world; ++r) {
      if (done[r]) continue;
      const auto members = sim::group_members(p_, r, GroupAxis::DP);  // every group once: not remembered
      for (int m : members) done[m] = 1;
      if (!edp_rings_periodic(members)) return false;
    }
  }
  // A rank's signature: per group axis, the kind of path to every ring neighbour it sends to (the whole ring's
  // successor, and the successors in the node-local and cross-node rings of the hierarchical all-reduce where it
  // applies), or for the EP all-to-all how many members it reaches over each kind of path. Built group by group,
  // so the cost is linear in the world size (a rank-by-rank build is quadratic in the group size).
  constexpr int kSlots = 4;  // per axis
  constexpr std::int16_t kUnset = -1, kNotEnd = -2;
  std::vector<std::array<std::int16_t, kSlots>> sig(world);  // this axis's entries, per rank
  std::vector<char> seen(world);
  bool crosses_leaf = false;
  auto kind = [&](int a, int b) {
    const Path k = path(a, b);
    if (k == Path::CROSS_LEAF || k == Path::CROSS_POD) crosses_leaf = true;
    return static_cast<std::int16_t>(k);
  };
  std::vector<std::pair<int, int>> by_node;  // (node, member index)
  for (GroupAxis ax : {GroupAxis::TP, GroupAxis::DP, GroupAxis::PP, GroupAxis::EMB, GroupAxis::CP, GroupAxis::EP,
                       GroupAxis::ETP, GroupAxis::EDP}) {
    if ((ax == GroupAxis::CP && p_.cp == 1) || (ax >= GroupAxis::EP && !m_.moe.enabled())) continue;
    std::fill(seen.begin(), seen.end(), 0);
    for (auto& s : sig) s.fill(kUnset);
    for (int r0 = 0; r0 < world; ++r0) {
      if (seen[r0]) continue;
      const int stage = stage_of[r0];
      if (ax == GroupAxis::EMB && stage != 0 && stage != p_.head_stage() && !p_.bidirectional()) {
        sig[r0][0] = kNotEnd;
        seen[r0] = 1;
        continue;
      }
      const auto members = sim::group_members(p_, r0, ax);  // every rank's group once: not remembered
      // PP and EMB groups overlap (a rank's group depends on its replica index), and a rank may stand outside the
      // group it uses: then only that rank's own entry is written.
      const bool overlapping =
          ax == GroupAxis::PP || ax == GroupAxis::EMB || !std::binary_search(members.begin(), members.end(), r0);
      const std::vector<int> own{r0};
      for (int r : overlapping ? own : members) {
        seen[r] = 1;
        auto& s = sig[r];
        if (ax == GroupAxis::EP) {  // all-to-all: how many members over each kind of path
          s.fill(0);
          for (int o : members) ++s[kind(r, o)];
          continue;
        }
        const auto it = std::lower_bound(members.begin(), members.end(), r);
        if (it == members.end() || *it != r) continue;  // not in the ring it uses: no successor
        s[0] = kind(r, std::next(it) == members.end() ? members.front() : *std::next(it));
      }
      // The hierarchical all-reduce and the spread rings (spread_ring) both use the node-local rings and the rings
      // of same-position members across nodes.
      const std::size_t per_node = node_blocks(members, &by_node);
      const bool spread =
          ax != GroupAxis::PP && ax != GroupAxis::EMB && ax != GroupAxis::EP && spreads(per_node, members.size());
      if (spread && (ax == GroupAxis::DP || ax == GroupAxis::EDP))
        for (int r : members) sig[r][0] = kUnset;  // only rings run over dp and edp: none goes member to member
      if (((ax == GroupAxis::TP || ax == GroupAxis::DP) &&
           use_hierarchical(CollectiveKind::ALL_REDUCE, members.front(), members, -1)) ||
          spread) {
        // The node-local rings, and the rings of the members at the same position on every node (every node
        // holds the same number of members, or use_hierarchical is false).
        const std::size_t nodes = by_node.size() / per_node;
        for (std::size_t n = 0; n < nodes; ++n)
          for (std::size_t i = 0; i < per_node; ++i) {
            const int r = members[by_node[n * per_node + i].second];
            sig[r][1] = kind(r, members[by_node[n * per_node + (i + 1) % per_node].second]);
            sig[r][2] = kind(r, members[by_node[(n + 1) % nodes * per_node + i].second]);
          }
      }
    }
    for (int r = 0; r < world; ++r)
      if (sig[r] != sig[rep[r]]) return false;
  }
  const bool shared_nics = c_.num_nodes > 1 && c_.inter.nics_per_node != c_.gpus_per_node;
  if (!crosses_leaf && !shared_nics) return true;
  if (opt_.fold_shared_links && fold_shares(rep, share)) return true;
  share->clear();  // a failed check leaves counts behind
  return false;
}

// Folding with multiplicity. A leaf uplink (or a NIC shared by several GPUs) carries the flows of every rank under
// it, folded-away ranks included. When a representative's whole fold class sits under its leaf (and pod), each of
// its flows stands for k identical flows on those links, where k is the number of class members using the link;
// under max-min sharing k identical flows on a link of capacity C each get what one flow gets on a link of
// capacity C / k. This is exact when every simulated flow on a link stands for the same k: checked here per NIC
// and per leaf (every representative's class must spread evenly over its NICs).
bool Lowerer::fold_shares(const std::vector<int>& rep, std::vector<std::array<int, 2>>* share) const {
  const int world = p_.world_size();
  share->assign(world, {0, 0});
  auto nic_key = [&](int r) { return static_cast<std::int64_t>(c_.node_of(gpu(r))) * 4096 + c_.nic_of(gpu(r)); };
  // Members per (representative, NIC): counted in one pass over the ranks sorted by (representative, NIC).
  std::vector<std::pair<int, std::int64_t>> by_rep(world);
  for (int r = 0; r < world; ++r) {
    const int g = gpu(r), gr = gpu(rep[r]);
    if (c_.leaf_of(g) != c_.leaf_of(gr) || c_.pod_of(g) != c_.pod_of(gr)) return false;  // class spans leaves
    by_rep[r] = {rep[r], nic_key(r)};
    ++(*share)[rep[r]][1];
  }
  std::sort(by_rep.begin(), by_rep.end());
  for (std::size_t i = 0; i < by_rep.size();) {
    std::size_t j = i;
    while (j < by_rep.size() && by_rep[j] == by_rep[i]) ++j;
    const int n = static_cast<int>(j - i), r = by_rep[i].first;
    auto& k = (*share)[r][0];
    if (k != 0 && k != n) return false;  // the class is spread unevenly over its NICs
    k = n;
    i = j;
  }
  // Every simulated flow on a NIC's links (or a leaf's uplinks) must stand for the same number of real flows.
  std::map<std::int64_t, int> nic_k, leaf_k;
  for (int r = 0; r < world; ++r) {
    if (rep[r] != r) continue;
    for (auto [m, key, k] : {std::tuple{&nic_k, nic_key(r), (*share)[r][0]},
                             std::tuple{&leaf_k, static_cast<std::int64_t>(c_.leaf_of(gpu(r))), (*share)[r][1]}}) {
      const auto [it, fresh] = m->emplace(key, k);
      if (!fresh && it->second != k) return false;
    }
  }
  return true;
}

FoldDecision Lowerer::decide_folding() const {
  FoldDecision d;
  if (opt_.fold == FoldMode::NONE) {
    d.reason = "folding disabled (--fold none): every rank simulated";
    return d;
  }
  if (c_.has_graph()) {
    d.reason = "not folded: explicit network graph (links may be shared between ranks)";
    return d;
  }
  if (p_.has_device_map()) {
    d.reason = "not folded: the plan maps ranks onto GPUs (device_map), so symmetric ranks need not see alike links";
    return d;
  }
  if (may_use_trees()) {
    d.reason = "not folded: tree collectives give ranks different roles";
    return d;
  }
  int widest = 1;
  for (int st = 0; st < p_.pp; ++st) widest = std::max(widest, p_.replicas(st));
  // 2-D/2.5-D/3-D layouts run collectives over sub-groups of the TP group (and broadcasts/reduces give the root
  // a different role): the TP axis is simulated unfolded.
  bool all_d1 = true;
  for (int st = 0; st < p_.pp; ++st) all_d1 = all_d1 && p_.stage_strategy(st).tp_layout == TpLayout::D1;
  // Stages of different TP degrees send their pipeline pieces to TP ranks of other indices: TP is simulated unfolded.
  bool want_tp = p_.tp > 1 && all_d1 && uniform_tp(), want_dp = p_.dp * widest > 1;
  // Skewed routing gives the members of an EP group different work: the axes the EP group spans are simulated
  // unfolded (the EP group spans dp; it spans tp unless etp = tp).
  const bool skew = m_.moe.enabled() && p_.ep > 1 && !p_.routing.balanced();
  std::string skew_note, tp_note;
  // Under skew the expert-data-parallel copies of an EP group still run alike (a rank's loads are its EP index's):
  // they fold when the EP grid spans whole TP x CP blocks (a representative then differs from its copies in the dp
  // coordinate only) and there is more than one copy.
  bool want_edp = false;
  if (skew) {
    const int block = p_.tp * p_.cp, span = edp_period();
    bool nvls = opt_.collective_algorithm == CollectiveAlgorithm::NVLS;
    for (const auto& rule : cal_.collective_algorithms) nvls = nvls || rule.algorithm == "nvls";
    want_edp =
        want_dp && span % block == 0 && block * p_.dp > span && uniform_replicas() && p_.replicas(0) == 1 && !nvls;
    if (want_dp) skew_note = "; dp not folded: skewed routing gives EP ranks different loads";
    want_dp = false;
    if (p_.expert_tp() != p_.tp && want_tp) {
      want_tp = false;
      tp_note = "; tp not folded: the EP groups span tp ranks with different loads";
    }
  }
  if (want_edp) {
    for (bool tp : {want_tp, false}) {
      if (!fold_ok(tp, false, &d.share, true)) continue;
      d.tp = tp;
      d.edp = true;
      d.reason = std::string("folded ") + (tp ? "tp and " : "") + "the expert-data-parallel copies: symmetric ranks" +
                 (d.share.empty() ? " on GPU-private links (exact)"
                                  : "; each simulated flow stands for k identical flows on links that folded-away "
                                    "ranks share, which run at capacity / k (multiplicity, exact)") +
                 "; data-parallel rings run over the simulated ranks with each copy's steps taken as its "
                 "representative's; the rest of dp not folded: skewed routing gives EP ranks different loads" +
                 (want_tp && !tp ? "; tp not folded: its ring mixes hop kinds" : "") + tp_note;
      return d;
    }
    skew_note += "; the expert-data-parallel copies not folded: their rings mix hop kinds or are not periodic";
  }
  skew_note += tp_note;
  for (auto [tp, dp] : {std::pair{want_tp, want_dp}, std::pair{want_tp, false}, std::pair{false, want_dp}}) {
    if (!tp && !dp) continue;
    if (fold_ok(tp, dp, &d.share)) {
      d.tp = tp;
      d.dp = dp;
      d.reason = std::string("folded ") + (tp && dp ? "tp and dp" : tp ? "tp" : "dp");
      if (d.share.empty()) {
        d.reason += ": symmetric ranks on GPU-private links (exact)";
      } else {
        int nic = 1, fabric = 1;
        for (const auto& k : d.share) nic = std::max(nic, k[0]), fabric = std::max(fabric, k[1]);
        d.reason +=
            ": symmetric ranks; each simulated flow stands for k identical flows on links that folded-away "
            "ranks share (" +
            (c_.num_leaves() > 1 ? "leaf/pod uplinks: k = " + std::to_string(fabric) + (nic > 1 ? ", " : "")
                                 : std::string()) +
            (nic > 1 ? "shared NICs: k = " + std::to_string(nic) : "") +
            "), which run at capacity / k (multiplicity, exact)";
      }
      if (want_tp != tp || want_dp != dp)
        d.reason += std::string("; ") + (tp ? "dp" : "tp") + " not folded: " +
                    (tp && !uniform_replicas() ? "stages have different widths"
                     : c_.num_leaves() > 1     ? "its ranks sit under different leaves, or its ring mixes hop kinds"
                                               : "its ring mixes intra- and inter-node hops");
      d.reason += skew_note;
      return d;
    }
  }
  const bool uneven = !uniform_tp() || !uniform_replicas();
  d.reason = !(want_tp || want_dp) ? (skew     ? "not folded: skewed routing gives EP ranks different loads"
                                      : uneven ? "not folded: stages have different widths"
                                               : "nothing to fold (tp = dp = 1)")
             : c_.num_leaves() > 1 || (c_.num_nodes > 1 && c_.inter.nics_per_node != c_.gpus_per_node)
                 ? "not folded: symmetric ranks sit under different leaf (rail) switches or share links unevenly, or "
                   "rings mix hop kinds"
             : !uniform_replicas() ? "not folded: stages have different widths and rings mix hop kinds"
                                   : "not folded: rings mix intra- and inter-node hops";
  return d;
}

std::int32_t Lowerer::p2p(int si_from, int si_to, double bytes, Phase phase, const std::string& name, int mb,
                          std::int32_t pred) {
  const int ga = out_.ranks[si_from].global_rank, gb = out_.ranks[si_to].global_rank;
  Task d;
  d.kind = TaskKind::DELAY;
  d.stream = Stream::PP;
  d.phase = phase;
  d.name = g_.intern(name);
  d.microbatch = mb;
  const Path p2p_path = path(ga, gb);
  const double p2p_alpha = routing_ ? routing_->latency_s(gpu(ga), gpu(gb)) : hop_latency(p2p_path);
  d.duration_s = std::max(0.0, cal_.p2p_overhead_s + segment_extra_s(p2p_path, ga, gb, p2p_alpha, bytes));
  auto delay = add_on_stream(si_from, d);
  if (pred >= 0) g_.depend(pred, delay);
  Task f = d;
  f.kind = TaskKind::FLOW;
  f.duration_s = 0;
  f.path = p2p_path;
  f.peer = si_to;
  f.bytes = bytes;
  auto flow = add_on_stream(si_from, f);
  return flow;
}

std::size_t Lowerer::node_blocks(const std::vector<int>& members, std::vector<std::pair<int, int>>* by_node) const {
  by_node->clear();
  by_node->reserve(members.size());
  for (std::size_t i = 0; i < members.size(); ++i)
    by_node->emplace_back(c_.node_of(gpu(members[i])), static_cast<int>(i));
  std::sort(by_node->begin(), by_node->end());
  const auto& b = *by_node;
  std::size_t g = 1;  // members per node
  while (g < b.size() && b[g].first == b[0].first) ++g;
  if (b.size() % g != 0) return 0;
  for (std::size_t i = 0; i < b.size(); ++i)
    if (b[i].first != b[i - i % g].first || (i % g == 0 && i > 0 && b[i].first == b[i - 1].first)) return 0;
  return g;
}

bool Lowerer::split_hierarchical(int grank, const std::vector<int>& members, std::vector<int>* local,
                                 std::vector<int>* cross) const {
  std::vector<std::pair<int, int>> by_node;
  const std::size_t g = node_blocks(members, &by_node);
  if (g == 0) return false;
  const auto me =
      std::find_if(by_node.begin(), by_node.end(), [&](const auto& x) { return members[x.second] == grank; });
  DTSIM_ASSERT(me != by_node.end(), "rank " << grank << " not in its own group");
  const std::size_t at = me - by_node.begin(), node_begin = at - at % g, pos = at % g;
  local->clear();
  for (std::size_t i = node_begin; i < node_begin + g; ++i) local->push_back(members[by_node[i].second]);
  cross->clear();
  for (std::size_t i = pos; i < by_node.size(); i += g) cross->push_back(members[by_node[i].second]);
  return true;
}

bool Lowerer::spreads(std::size_t per_node, std::size_t members) const {
  return opt_.spread_rings && !c_.has_graph() && per_node >= 2 && per_node < members;
}

bool Lowerer::spread_ring(const std::vector<int>& members, std::vector<int>* local_succ, std::vector<int>* node_succ,
                          int* per_node) const {
  // NCCL builds a ring over GPUs on several nodes as several channels, each entering and leaving a node through a
  // different NIC (src/graph/search.cc: one ring graph per NIC, rails kept), so an inter-node ring uses the NICs of
  // all g members on a node, not one: nccl-tests' all-gather and reduce-scatter bus bandwidth across DGX H100 nodes
  // is about 8 NICs' worth, not one NIC's. Lowered as every member sending (g-1)/g of each step to the next member
  // on its node and 1/g to the member at its position on the next node (the same rail): the bytes each NVLink
  // and NIC carries in those g channels. Off (SimOptions::spread_rings) the ring crosses a node once.
  if (!opt_.spread_rings || c_.has_graph() || members.size() < 4) return false;
  std::vector<std::pair<int, int>> by_node;  // (node, member index)
  const std::size_t g = node_blocks(members, &by_node);
  if (!spreads(g, members.size())) return false;
  node_ring_successors(by_node, g, local_succ, node_succ);
  *per_node = static_cast<int>(g);
  return true;
}

std::int32_t Lowerer::chain_collective(int si, const std::vector<int>& members, bool folded, int key_code, int seq,
                                       Stream stream, CollectiveKind kind, double bytes, Phase phase,
                                       std::int32_t name_id, int layer, int mb, std::int32_t pred,
                                       std::int32_t* first_out) {
  const int n = static_cast<int>(members.size());
  if (first_out) *first_out = pred;
  if (n <= 1) return pred;
  if (folded) throw ConfigError("broadcast and reduce give the root a different role: simulate them with --fold none");
  auto key = std::make_tuple(members[0], key_code + 300, seq);
  auto it = instances_.find(key);
  if (it == instances_.end()) {
    const Task base = collective_base(stream, phase, name_id, layer, mb);
    Instance inst = new_instance(base, si);
    for (int m : members) {
      const int msi = out_.sim_index_of[m];
      inst.members_si.push_back(msi);
      inst.first.push_back(inst.join);
      Task e = base;
      e.kind = TaskKind::JOIN;
      e.rank = msi;
      inst.done.push_back(add_free(e));
    }
    constexpr double kChunk = 512.0 * 1024;
    const int k = std::max(1, std::min(64, static_cast<int>(std::ceil(bytes / kChunk))));
    // Chain order: broadcast flows from position 0 outwards, reduce flows towards position 0.
    const bool bcast = kind == CollectiveKind::BROADCAST;
    std::vector<std::int32_t> prev_hop(k, -1);  // chunk c's flow on the previous hop
    for (int hop = 0; hop < n - 1; ++hop) {
      const int from = bcast ? hop : n - 1 - hop, to = bcast ? hop + 1 : n - 2 - hop;
      std::int32_t prev_chunk = -1;
      for (int c = 0; c < k; ++c) {
        Task f = base;
        f.kind = TaskKind::FLOW;
        f.rank = inst.members_si[from];
        f.peer = inst.members_si[to];
        f.path = path(members[from], members[to]);
        f.bytes = bytes / k;
        auto id = add_free(f);
        std::int32_t head = id;
        if (cal_.collective_step_overhead_s > 0) {
          Task d = base;
          d.kind = TaskKind::DELAY;
          d.rank = f.rank;
          d.duration_s = step_overhead_s();
          head = add_free(d);
          g_.depend(head, id);
        }
        g_.depend(inst.join, head);
        if (prev_hop[c] >= 0) g_.depend(prev_hop[c], head);  // the chunk has reached this member
        if (prev_chunk >= 0) g_.depend(prev_chunk, head);    // chunks in order on this hop
        g_.depend(id, inst.done[from]);
        g_.depend(id, inst.done[to]);
        prev_hop[c] = id;
        prev_chunk = id;
      }
    }
    it = store_instance(key, std::move(inst), kind, bytes);
  }
  return join_instance(it, si, stream, pred, first_out);
}

std::vector<std::int32_t> Lowerer::send_order(const std::vector<int>& members) const {
  const int n = static_cast<int>(members.size());
  std::vector<std::int32_t> order;
  // Each member's node among the members' nodes (ascending) and its place among that node's members.
  std::map<int, std::vector<int>> by_node;
  for (int j = 0; j < n; ++j) by_node[gpu(members[static_cast<std::size_t>(j)]) / c_.gpus_per_node].push_back(j);
  const int groups = static_cast<int>(by_node.size());
  const int per = static_cast<int>(by_node.begin()->second.size());
  bool even = groups * per == n;
  for (const auto& [node, js] : by_node) even = even && static_cast<int>(js.size()) == per;
  if (!even) return order;  // empty: the pairwise-exchange order (Exchange::send_target)
  order.reserve(static_cast<std::size_t>(n) * static_cast<std::size_t>(n - 1));
  std::vector<const std::vector<int>*> group_members;
  std::vector<int> group_of(static_cast<std::size_t>(n)), local_of(static_cast<std::size_t>(n));
  for (const auto& [node, js] : by_node) {
    for (std::size_t l = 0; l < js.size(); ++l) {
      group_of[static_cast<std::size_t>(js[l])] = static_cast<int>(group_members.size());
      local_of[static_cast<std::size_t>(js[l])] = static_cast<int>(l);
    }
    group_members.push_back(&js);
  }
  for (int j = 0; j < n; ++j) {
    const int g = group_of[static_cast<std::size_t>(j)], l = local_of[static_cast<std::size_t>(j)];
    for (int dg = 0; dg < groups; ++dg) {
      const std::vector<int>& to = *group_members[static_cast<std::size_t>((g + dg) % groups)];
      for (int dl = 0; dl < per; ++dl)
        if (dg != 0 || dl != 0) order.push_back(to[static_cast<std::size_t>((l + dl) % per)]);
    }
  }
  return order;
}

std::int32_t Lowerer::direct_all_to_all(int si, const std::vector<int>& members, bool folded, int key_code, int seq,
                                        Stream stream, double bytes, Phase phase, std::int32_t name_id, int layer,
                                        int mb, std::int32_t pred, std::int32_t* first_out) {
  const int n = static_cast<int>(members.size());
  const double piece = bytes / n;
  DTSIM_ASSERT(!(folded && a2a_loads_), "a skewed all-to-all on a folded axis");
  // Bytes from member `from` to member `to`: S / n, or under skewed routing S x the load of the receiving EP rank
  // (dispatch) or of the sending one (combine).
  // The flex dispatcher (deepep, hybridep; strategies/flex_dispatch.hpp): `bytes` are the member's tokens counted
  // once. A member sends to the member at its position in every other domain (RDMA) and to every other member of
  // its own domain (NVLink: its tokens routed there and those it forwards); both kinds of pieces go at once, the
  // kernels' RDMA and NVLink channels running side by side (DeepEP pipelines the forwarding in chunks behind the
  // RDMA arrivals; this is that pipeline's limit).
  std::unordered_map<int, std::pair<int, int>> domain_pos;  // member -> (domain, position in it)
  cost::FlexPieces flex;
  if (flex_) {
    const int dg = cost::flex_domain_gpus(*flex_, c_.gpus_per_node);
    std::map<int, int> filled;
    for (int m : members) {
      const int dom = gpu(m) / dg;
      domain_pos[m] = {dom, filled[dom]++};
    }
    const int per = filled.begin()->second;
    for (const auto& [dom, count] : filled)
      if (count != per)
        throw ConfigError("the " + std::string(flex_->hybrid ? "hybridep" : "deepep") +
                          " dispatcher needs the same number of EP ranks in every NVLink domain its group spans (" +
                          std::to_string(count) + " in one, " + std::to_string(per) + " in another)");
    flex = cost::flex_pieces(*flex_, n, per, bytes);
  }
  auto piece_of = [&](int from, int to) {
    if (flex_) {
      const auto& a = domain_pos.at(from);
      const auto& b = domain_pos.at(to);
      if (a.first == b.first) return flex.nvlink_piece_bytes;
      return a.second == b.second ? flex.rdma_piece_bytes : 0.0;
    }
    if (!a2a_loads_) return piece;
    return bytes * (*a2a_loads_)[static_cast<std::size_t>(ep_index(a2a_combine_ ? from : to))];
  };
  // A member's two lanes, each sending its pieces one after another: the flex kernels' NVLink and RDMA pieces, and
  // otherwise the pieces to its own node (NVLink) and those to other nodes (its NIC), which NCCL moves at once on
  // different transports (P2P and NET).
  auto remote_lane = [&](int from, int to) {
    if (flex_) return domain_pos.at(to).first != domain_pos.at(from).first;
    return path(from, to) != Path::INTRA_NODE;
  };
  const Task base = collective_base(stream, phase, name_id, layer, mb);
  // One member's tasks: a start-up delay, then a flow to each other member (to the mirror when folded: by
  // symmetry every member sends and receives n-1 pieces through its own links).
  // The analytic engine gives every flow its route's bandwidth as if it were alone: a member's n-1 concurrent flows
  // would each get the whole port (a 16-GPU all-to-all across two DGX H100s: 0.28 ms for 201 MB, where the flow
  // engines give 2.2 ms, the off-node half over each GPU's 50 GB/s NIC). There a member sends its pieces one after
  // the other in NCCL's p2p order (send_order) on each of its two lanes (remote_lane: NVLink and NIC), so that each
  // port carries one flow per direction at a time; a lane's time is then the sum over
  // its peers of piece / route bandwidth, what the flow engines give. (Until 2026-12-07 both kinds of pieces went on
  // one lane, the NVLink pieces' time added to the NIC's: 2.50 ms against the flow engines' 2.24 ms above.)
  const bool sequential = opt_.network == NetworkMode::ANALYTIC;
  // The order matters only where a member's pieces go one after another to other simulated members; the flow engines'
  // lowering (all at once) and folded members (mirrored pieces) keep the pairwise-exchange order.
  std::vector<std::int32_t> order;  // once per all-to-all, by whichever member creates it (send_order is O(n^2))
  auto member = [&](int msi, int mglobal, std::vector<std::int32_t>* inbox) -> std::pair<std::int32_t, std::int32_t> {
    Task d = base;
    d.rank = msi;
    d.kind = TaskKind::DELAY;
    d.duration_s = std::max(0.0, step_overhead_s());  // each flow then pays its own route latency
    auto delay = add_free(d);
    Task done = base;
    done.rank = msi;
    done.kind = TaskKind::JOIN;
    auto end = add_free(done);
    const auto self = std::find(members.begin(), members.end(), mglobal) - members.begin();
    std::int32_t prev_local = delay, prev_remote = delay;  // flex: the NVLink and the RDMA pieces, each in turn
    for (int k = 0; k + 1 < n; ++k) {
      const int other = members[static_cast<std::size_t>(Exchange::send_target(order, n, self, k))];
      Task f = base;
      f.rank = msi;
      f.kind = TaskKind::FLOW;
      f.path = path(mglobal, other);
      f.mirror = folded;
      f.peer = folded ? -1 : out_.sim_index_of[other];
      f.bytes = piece_of(mglobal, other);
      if (f.bytes <= 0 && flex_) continue;  // not a peer of the flex kernels
      auto flow = add_free(f);
      std::int32_t& prev = remote_lane(mglobal, other) ? prev_remote : prev_local;
      g_.depend(sequential ? prev : delay, flow);
      prev = flow;
      g_.depend(flow, end);
      if (inbox) inbox[out_.sim_index_of[other]].push_back(flow);
    }
    return {delay, end};
  };
  const int grank = out_.ranks[si].global_rank;
  if (first_out) *first_out = pred;
  if (n <= 1) return pred;
  if (folded) {
    auto [first, done] = member(si, grank, nullptr);  // mirrored pieces: the order does not change a lane's sum
    return attach(si, stream, pred, first, done, first_out);
  }
  auto key = std::make_tuple(members[0], key_code, seq);
  auto it = instances_.find(key);
  if (it == instances_.end() && sequential) order = send_order(members);
  if (it == instances_.end() && sequential && opt_.compound_all_to_all) {
    // One task per member (Exchange): the analytic engine times the pieces above in closed form from each member's
    // start, the same times without a task per piece.
    Instance inst = new_instance(base, si);
    Exchange x;
    Exchange::Pieces& table = pieces_scratch_;
    table.bytes.assign(static_cast<std::size_t>(n) * static_cast<std::size_t>(n), 0.0);
    table.piece.assign(table.bytes.size(), Exchange::kNoPiece);
    table.order = order;
    for (int j = 0; j < n; ++j) {
      const int m = members[static_cast<std::size_t>(j)];
      const int msi = out_.sim_index_of[m];
      DTSIM_ASSERT(out_.ranks[msi].global_rank == m, "member " << m << " of an all-to-all is not simulated");
      Task d = base;
      d.rank = msi;
      d.kind = TaskKind::DELAY;
      d.duration_s = std::max(0.0, step_overhead_s());
      const auto id = add_free(d);
      g_.depend(inst.join, id);
      inst.first.push_back(id);
      inst.done.push_back(id);
      inst.members_si.push_back(msi);
      x.tasks.push_back(id);
      x.ranks.push_back(msi);
      for (int i = 0; i < n; ++i) {
        const int other = members[static_cast<std::size_t>(i)];
        if (i == j) continue;
        const double b = piece_of(m, other);
        if (b <= 0 && flex_) continue;  // not a peer of the flex kernels
        const bool remote = remote_lane(m, other);
        const std::size_t at = static_cast<std::size_t>(j) * static_cast<std::size_t>(n) + static_cast<std::size_t>(i);
        table.bytes[at] = b;  // Exchange::at once every member is in
        table.piece[at] = static_cast<std::uint8_t>(static_cast<int>(path(m, other)) | (remote ? 4 : 0));
      }
    }
    x.pieces = intern_pieces();
    g_.add_exchange(std::move(x));
    it = store_instance(key, std::move(inst), CollectiveKind::ALL_TO_ALL, bytes);
  }
  if (it == instances_.end()) {
    Instance inst = new_instance(base, si);
    std::vector<std::vector<std::int32_t>> inbox(out_.ranks.size());
    for (int m : members) {
      const int msi = out_.sim_index_of[m];
      DTSIM_ASSERT(out_.ranks[msi].global_rank == m, "member " << m << " of an all-to-all is not simulated");
      auto [first, done] = member(msi, m, inbox.data());
      g_.depend(inst.join, first);
      inst.first.push_back(first);
      inst.done.push_back(done);
      inst.members_si.push_back(msi);
    }
    for (std::size_t i = 0; i < inst.members_si.size(); ++i)
      for (auto flow : inbox[inst.members_si[i]]) g_.depend(flow, inst.done[i]);
    it = store_instance(key, std::move(inst), CollectiveKind::ALL_TO_ALL, bytes);
  }
  return join_instance(it, si, stream, pred, first_out);
}

std::int32_t Lowerer::tree_all_reduce(int si, const std::vector<int>& members, int key_code, int seq, Stream stream,
                                      double bytes, Phase phase, std::int32_t name_id, int layer, int mb,
                                      std::int32_t pred, std::int32_t* first_out) {
  const int n = static_cast<int>(members.size());
  if (first_out) *first_out = pred;
  if (n <= 1) return pred;
  auto key = std::make_tuple(members[0], key_code + 100, seq);
  auto it = instances_.find(key);
  if (it == instances_.end()) {
    const Task base = collective_base(stream, phase, name_id, layer, mb);
    Instance inst = new_instance(base, si);
    for (int m : members) {
      const int msi = out_.sim_index_of[m];
      DTSIM_ASSERT(out_.ranks[msi].global_rank == m, "member " << m << " of a tree all-reduce is not simulated");
      inst.members_si.push_back(msi);
      Task e = base;
      e.kind = TaskKind::JOIN;
      e.rank = msi;
      inst.done.push_back(add_free(e));
      inst.first.push_back(inst.join);
    }
    // Two binary trees (heap order on member positions, the second mirrored), each carrying half the data in
    // chunks of at most 512 KiB: reduce towards the root, then broadcast back.
    constexpr double kChunk = 512.0 * 1024;
    const double half = bytes / 2;
    const int k = std::max(1, std::min(64, static_cast<int>(std::ceil(half / kChunk))));
    const double chunk = half / k;
    for (int tree = 0; tree < 2; ++tree) {
      auto member_at = [&](int pos) { return tree == 0 ? pos : n - 1 - pos; };  // heap position -> member index
      auto flow = [&](int from_pos, int to_pos) {
        const int a = member_at(from_pos), b = member_at(to_pos);
        Task f = base;
        f.kind = TaskKind::FLOW;
        f.rank = inst.members_si[a];
        f.peer = inst.members_si[b];
        f.path = path(members[a], members[b]);
        f.bytes = chunk;
        auto id = add_free(f);
        if (cal_.collective_step_overhead_s > 0) {
          Task d = base;
          d.kind = TaskKind::DELAY;
          d.rank = f.rank;
          d.duration_s = step_overhead_s();
          auto delay = add_free(d);
          g_.depend(delay, id);
          return std::make_pair(delay, id);
        }
        return std::make_pair(id, id);
      };
      std::vector<std::vector<std::int32_t>> up(n), down(n);  // per position, per chunk: the flow's last task
      for (int c = 0; c < k; ++c)
        for (int pos = n - 1; pos >= 1; --pos) {  // children before parents
          auto [first, last] = flow(pos, (pos - 1) / 2);
          g_.depend(inst.join, first);
          for (int child : {2 * pos + 1, 2 * pos + 2})
            if (child < n) g_.depend(up[child][c], first);  // reduced the children's chunk first
          if (c > 0) g_.depend(up[pos][c - 1], first);      // one chunk after the other on this link
          up[pos].push_back(last);
        }
      for (int c = 0; c < k; ++c)
        for (int pos = 1; pos < n; ++pos) {  // parents before children
          const int parent = (pos - 1) / 2;
          auto [first, last] = flow(parent, pos);
          if (parent == 0) {
            for (int child : {1, 2})
              if (child < n) g_.depend(up[child][c], first);  // the root has the whole chunk
          } else {
            g_.depend(down[parent][c], first);
          }
          if (c > 0) g_.depend(down[pos][c - 1], first);
          down[pos].push_back(last);
        }
      // A member is done with this tree when its last chunk came down (the root: when it sent its last chunk).
      for (int pos = 0; pos < n; ++pos) {
        const int idx = member_at(pos);
        if (pos > 0) g_.depend(down[pos][k - 1], inst.done[idx]);
        for (int child : {2 * pos + 1, 2 * pos + 2})
          if (child < n) g_.depend(down[child][k - 1], inst.done[idx]);
      }
    }
    it = store_instance(key, std::move(inst), CollectiveKind::ALL_REDUCE, bytes);
  }
  return join_instance(it, si, stream, pred, first_out);
}

std::int32_t Lowerer::nvls_all_reduce(int si, const std::vector<int>& members, bool folded, int key_code, int seq,
                                      Stream stream, double bytes, Phase phase, std::int32_t name_id, int layer, int mb,
                                      std::int32_t pred, std::int32_t* first_out) {
  if (first_out) *first_out = pred;
  if (members.size() <= 1) return pred;
  const Task base = collective_base(stream, phase, name_id, layer, mb);
  // Each GPU's port carries S up (its contribution) and S down (the reduced result) at once: one flow of S
  // from the GPU to its own port's mirror uses exactly those two links. The switch reduces in flight.
  auto member = [&](int msi) -> std::pair<std::int32_t, std::int32_t> {
    Task d = base;
    d.kind = TaskKind::DELAY;
    d.rank = msi;
    d.duration_s = std::max(0.0, step_overhead_s());
    auto delay = add_free(d);
    Task f = base;
    f.kind = TaskKind::FLOW;
    f.rank = msi;
    f.mirror = true;
    f.path = Path::INTRA_NODE;
    f.bytes = bytes;
    auto flow = add_free(f);
    g_.depend(delay, flow);
    return {delay, flow};
  };
  if (folded) {
    auto [first, done] = member(si);
    return attach(si, stream, pred, first, done, first_out);
  }
  auto key = std::make_tuple(members[0], key_code + 200, seq);
  auto it = instances_.find(key);
  if (it == instances_.end()) {
    Instance inst = new_instance(base, si);
    std::vector<std::int32_t> flows;
    for (int m : members) {
      const int msi = out_.sim_index_of[m];
      auto [first, flow] = member(msi);
      g_.depend(inst.join, first);
      inst.first.push_back(first);
      inst.members_si.push_back(msi);
      flows.push_back(flow);
    }
    for (int msi : inst.members_si) {  // the result is complete when every contribution has arrived
      Task e = base;
      e.kind = TaskKind::JOIN;
      e.rank = msi;
      auto end = add_free(e);
      for (auto f : flows) g_.depend(f, end);
      inst.done.push_back(end);
    }
    it = store_instance(key, std::move(inst), CollectiveKind::ALL_REDUCE, bytes);
  }
  return join_instance(it, si, stream, pred, first_out);
}

nccl::Choice Lowerer::nccl_ring(CollectiveKind kind, const std::vector<int>& members, double bytes) const {
  if (userbuffers_) return {};
  std::vector<int> node_ids;
  node_ids.reserve(members.size());
  for (int m : members) node_ids.push_back(c_.node_of(gpu(m)));
  std::sort(node_ids.begin(), node_ids.end());
  const int ranks = static_cast<int>(members.size());
  const int nodes = static_cast<int>(std::unique(node_ids.begin(), node_ids.end()) - node_ids.begin());
  // The Simple protocol's bus bandwidth, as the estimator's closed forms have it: the NVLink port; across nodes the
  // NIC at one GPU per node or where the ring crosses each node once, and where it spreads over its g members' NICs
  // the slower of the NVLink share (g-1)/g and the NIC share 1/g of each step (estimate::spread_ring_time_s).
  const double intra_Bps = c_.intra.bandwidth_Bps * cal_.intra_bandwidth_efficiency;
  const double inter_Bps = c_.inter.nic_bandwidth_Bps * cal_.inter_bandwidth_efficiency;
  double bus_Bps = intra_Bps;
  if (nodes > 1) {
    const int g = ranks / nodes;
    bus_Bps = nodes == ranks ? inter_Bps
              : spreads(static_cast<std::size_t>(g), members.size())
                  ? std::min(intra_Bps * g / (g - 1.0), inter_Bps * g)
                  : std::min(intra_Bps, inter_Bps);
  }
  // NCCL's alternatives to a ring count unless the ring is forced (NCCL_ALGO=Ring).
  return estimate::nccl_choice(nccl_, kind == CollectiveKind::ALL_REDUCE, ranks, nodes, bytes, bus_Bps,
                               opt_.collective_algorithm == CollectiveAlgorithm::RING);
}

CollectiveAlgorithm Lowerer::algorithm_for(CollectiveKind kind, double bytes) const {
  if (kind != CollectiveKind::ALL_REDUCE) return CollectiveAlgorithm::RING;
  if (opt_.collective_algorithm != CollectiveAlgorithm::AUTO) return opt_.collective_algorithm;
  for (const auto& rule : cal_.collective_algorithms)
    if (rule.op == "all-reduce" && bytes <= rule.max_bytes)
      return rule.algorithm == "tree"           ? CollectiveAlgorithm::TREE
             : rule.algorithm == "hierarchical" ? CollectiveAlgorithm::HIERARCHICAL
             : rule.algorithm == "nvls"         ? CollectiveAlgorithm::NVLS
                                                : CollectiveAlgorithm::RING;
  return CollectiveAlgorithm::AUTO;  // by group shape
}

bool Lowerer::may_use_trees() const {
  if (opt_.collective_algorithm == CollectiveAlgorithm::TREE) return true;
  if (opt_.collective_algorithm != CollectiveAlgorithm::AUTO) return false;
  for (const auto& rule : cal_.collective_algorithms)
    if (rule.algorithm == "tree") return true;
  return false;
}

bool Lowerer::use_hierarchical(CollectiveKind kind, int grank, const std::vector<int>& members, double bytes) const {
  if (kind != CollectiveKind::ALL_REDUCE || opt_.collective_algorithm == CollectiveAlgorithm::RING ||
      opt_.collective_algorithm == CollectiveAlgorithm::TREE)
    return false;
  std::vector<int> local, cross;
  if (!split_hierarchical(grank, members, &local, &cross)) return false;
  // AUTO: only where both levels exist (several nodes, several members per node); with rings spread over every
  // member's NIC (spread_ring), only where its closed form beats the spread ring's at this size, as NCCL picks the
  // algorithm its tuning model times fastest; HIERARCHICAL forces it wherever the shape allows.
  if (opt_.collective_algorithm == CollectiveAlgorithm::HIERARCHICAL) return true;
  if (local.size() <= 1 || cross.size() <= 1) return false;
  if (!opt_.spread_rings || c_.has_graph() || bytes < 0) return true;
  return hierarchical_all_reduce_is_faster(c_, cal_, static_cast<int>(local.size()), static_cast<int>(cross.size()),
                                           bytes, &nccl_);
}

std::int32_t Lowerer::collective(int si, GroupAxis ax, Stream stream, CollectiveKind kind, double bytes, Phase phase,
                                 const std::string& name, int layer, int mb, std::int32_t pred, std::int32_t* first_out,
                                 cost::TpAxis tp_axis) {
  const int grank = out_.ranks[si].global_rank;
  std::vector<int> members = group_members(grank, ax);
  if (ax == GroupAxis::TP && tp_axis != cost::TpAxis::ALL) {
    // The ranks of this rank's row / column / depth (2-D, 2.5-D) or cube axis (3-D) inside its TP group.
    RankCoord c = p_.coord_of(grank);
    const StageStrategy st = p_.stage_strategy(c.pp);
    members.clear();
    for (int t : cost::tp_axis_members(st.tp_layout, p_.stage_tp(c.pp), st.tp_depth, tp_axis, c.tp)) {
      c.tp = t;
      members.push_back(p_.rank_of(c));
    }
    std::sort(members.begin(), members.end());
  }
  if (first_out) *first_out = pred;
  if (members.size() <= 1) return pred;
  // Folded when some member is represented by another simulated rank (a folded axis): by symmetry every member
  // then loads its own links as this one does, and the collective runs against this rank's mirror.
  const bool folded = any_folded(members);
  // The EDP fold's data-parallel rings: several simulated members and their copies, lowered as one instance over the
  // simulated members (ring_collective), numbered as unfolded groups are.
  const bool partial = folded && out_.fold_edp && partially_folded(members);
  const int axis_code = static_cast<int>(ax);
  const int seq = folded && !partial ? 0 : seq_[si][axis_code]++;
  const std::int32_t name_id = g_.intern(name + " " + cost::to_string(kind));
  const CollectiveAlgorithm algo = algorithm_for(kind, bytes);
  // decide_folding keeps the EDP fold off where NVLS or a tree may run; rings only over the partly folded groups.
  DTSIM_ASSERT(!partial || ((algo != CollectiveAlgorithm::NVLS && algo != CollectiveAlgorithm::TREE) &&
                            (kind == CollectiveKind::ALL_REDUCE || kind == CollectiveKind::ALL_GATHER ||
                             kind == CollectiveKind::REDUCE_SCATTER)),
               "a " << cost::to_string(kind) << " over a partly folded group");
  if (algo == CollectiveAlgorithm::NVLS) {
    for (int m : members)
      if (c_.has_graph() || c_.node_of(gpu(m)) != c_.node_of(gpu(grank)))
        throw ConfigError("the nvls all-reduce needs every member in one NVSwitch node; use another algorithm");
    return nvls_all_reduce(si, members, folded, axis_code * 4, seq, stream, bytes, phase, name_id, layer, mb, pred,
                           first_out);
  }
  if (algo == CollectiveAlgorithm::TREE) {
    DTSIM_ASSERT(!folded, "tree collective on a folded axis");
    return tree_all_reduce(si, members, axis_code * 4, seq, stream, bytes, phase, name_id, layer, mb, pred, first_out);
  }
  if (algo == CollectiveAlgorithm::RING ||
      (algo == CollectiveAlgorithm::AUTO && !use_hierarchical(kind, grank, members, bytes)) ||
      (algo == CollectiveAlgorithm::HIERARCHICAL && !use_hierarchical(kind, grank, members, bytes)))
    return ring_collective(si, members, folded, axis_code * 4, seq, stream, kind, bytes, phase, name_id, layer, mb,
                           pred, first_out);
  // Hierarchical all-reduce: reduce-scatter inside the node, all-reduce of the 1/g shard across nodes between
  // the GPUs of the same local index (each over its own NIC), all-gather inside the node.
  std::vector<int> local, cross;
  split_hierarchical(grank, members, &local, &cross);
  const double g = static_cast<double>(local.size());
  // Under the EDP fold each sub-ring is folded, partly folded or whole on its own.
  auto sub_folded = [&](const std::vector<int>& sub) { return partial ? any_folded(sub) : folded; };
  std::int32_t first = -1, cur = pred;
  if (local.size() > 1)
    cur = ring_collective(si, local, sub_folded(local), axis_code * 4 + 1, seq, stream, CollectiveKind::REDUCE_SCATTER,
                          bytes, phase, name_id, layer, mb, cur, &first);
  if (cross.size() > 1) {
    std::int32_t f = -1;
    cur = ring_collective(si, cross, sub_folded(cross), axis_code * 4 + 2, seq, stream, CollectiveKind::ALL_REDUCE,
                          bytes / g, phase, name_id, layer, mb, cur, &f);
    if (first < 0) first = f;
  }
  if (local.size() > 1)
    cur = ring_collective(si, local, sub_folded(local), axis_code * 4 + 3, seq, stream, CollectiveKind::ALL_GATHER,
                          bytes, phase, name_id, layer, mb, cur, nullptr);
  if (first_out) *first_out = first;
  return cur;
}

std::int32_t Lowerer::ring_collective(int si, const std::vector<int>& members, bool folded, int key_code, int seq,
                                      Stream stream, CollectiveKind kind, double bytes, Phase phase,
                                      std::int32_t name_id, int layer, int mb, std::int32_t pred,
                                      std::int32_t* first_out) {
  const int grank = out_.ranks[si].global_rank;
  const int n = static_cast<int>(members.size());
  if (first_out) *first_out = pred;
  if (n <= 1) return pred;
  const std::string name = g_.names()[name_id];
  if (kind == CollectiveKind::BROADCAST || kind == CollectiveKind::REDUCE)
    return chain_collective(si, members, folded, key_code, seq, stream, kind, bytes, phase, name_id, layer, mb, pred,
                            first_out);
  if (kind == CollectiveKind::ALL_TO_ALL)
    return direct_all_to_all(si, members, folded, key_code, seq, stream, bytes, phase, name_id, layer, mb, pred,
                             first_out);
  const int steps = kind == CollectiveKind::ALL_REDUCE ? 2 * (n - 1) : n - 1;
  const double chunk = bytes / n;
  // NCCL's protocol, worked out where the tasks are built (not for members joining an instance).
  nccl::Choice proto;
  auto choose_protocol = [&] { proto = nccl_ring(kind, members, bytes); };

  const Task base = collective_base(stream, phase, name_id, layer, mb);
  // Across nodes with several members on each, NCCL's rings cross every node through each member's NIC (one
  // channel per NIC): per member the node-local successor and the same-position member of the next node, by member
  // index; empty for a ring through one NIC per node (spread_ring).
  // Worked out once per instance (by its first member; the others join it), not per member.
  std::vector<int> local_succ, node_succ;
  int per_node = 1;
  bool spread = false;
  double node_share = 0;  // of each step's bytes: over the NIC
  auto find_spread = [&] {
    spread = spread_ring(members, &local_succ, &node_succ, &per_node);
    node_share = spread ? 1.0 / per_node : 0.0;
  };

  // Builds the tasks of one member; returns (first, done). `succ_si` < 0 means the mirror; `next_global` >= 0 is
  // the spread ring's successor on the next node (then `succ_global` is the node-local one).
  auto member_tasks = [&](int member_si, int member_global, int succ_si, int succ_global, int next_si, int next_global,
                          std::vector<std::int32_t>* step_flows) -> std::pair<std::int32_t, std::int32_t> {
    const Path hop = path(member_global, succ_global);
    const Path next_hop = next_global >= 0 ? path(member_global, next_global) : hop;
    auto hop_alpha = [&](int to) {
      return routing_ ? routing_->latency_s(gpu(member_global), gpu(to)) : hop_latency(path(member_global, to));
    };
    // Latency: (steps - 1) hops (the payload flow carries the last); a spread ring's channel crosses nodes in
    // (nodes - 1) of its steps (twice for an all-reduce) and runs the others over NVLink, as NCCL's tuning model
    // counts a ring's latency (src/graph/tuning.cc: nInterSteps x the network's latency + the rest x NVLink's).
    const int slow_to = next_global >= 0 ? next_global : succ_global;
    const double alpha = hop_alpha(succ_global);
    double latency_s = (steps - 1) * alpha;
    if (next_global >= 0) {
      const int inter_steps = (kind == CollectiveKind::ALL_REDUCE ? 2 : 1) * (n / per_node - 1);
      latency_s = (steps - inter_steps) * alpha + (inter_steps - 1) * hop_alpha(next_global);
    }
    // Message-size factors of the calibration (per ring step of `chunk` bytes), applied as extra latency.
    const double extra = segment_extra_s(next_hop, member_global, slow_to, hop_alpha(slow_to), chunk);
    double per_step = std::max(0.0, step_overhead_s() + extra);
    // NCCL's estimate of the ring's time as a floor on dtsim's (strategies/nccl_model.hpp): what it exceeds it by,
    // spread evenly over the steps. Where NCCL would run a tree or PAT that it times faster, the ring stands in for
    // it: its latency (one delay task: the flow mode) becomes that algorithm's (nccl::latency_adjust_s < 0). The
    // steps mode keeps a ring's own per-step latencies (its flows' route latencies cannot be shortened).
    const double adjust_s = nccl::latency_adjust_s(proto, latency_s + hop_alpha(slow_to) + steps * per_step);
    const double floor_s = std::max(adjust_s, 0.0);
    const double stand_in_s = std::min(adjust_s, 0.0);
    per_step += floor_s / steps;
    if (floor_s > 0 && static_cast<std::size_t>(member_si) < out_.nccl_floor_s.size())
      out_.nccl_floor_s[static_cast<std::size_t>(member_si)][name_id] += floor_s;
    Task t = base;
    t.rank = member_si;
    // The payload of a step, split over opt_.channels parallel flows (NCCL channels) that all start after the
    // step's delay, each in two where the ring is spread (node-local share and next-node share); with more than one
    // flow a zero-time join marks the step's end.
    auto payload = [&](double step_bytes, std::int32_t after) -> std::int32_t {
      const int ch = std::max(1, opt_.channels);
      std::int32_t end = -1;
      if (ch > 1 || next_global >= 0) {
        Task j = base;
        j.kind = TaskKind::JOIN;
        j.rank = member_si;
        end = add_free(j);
      }
      auto flow_to = [&](Path p, int peer, double flow_bytes) {
        Task f = base;
        f.rank = member_si;
        f.kind = TaskKind::FLOW;
        f.path = p;
        f.peer = peer;
        f.mirror = succ_si < 0;
        f.bytes = flow_bytes;
        auto flow = add_free(f);
        if (after >= 0) g_.depend(after, flow);
        return flow;
      };
      for (int c = 0; c < ch; ++c) {
        if (next_global < 0) {
          auto flow = flow_to(hop, succ_si, step_bytes / ch);
          if (end < 0) return flow;
          g_.depend(flow, end);
          continue;
        }
        g_.depend(flow_to(hop, succ_si, step_bytes * (1 - node_share) / ch), end);
        g_.depend(flow_to(next_hop, next_si, step_bytes * node_share / ch), end);
      }
      return end;
    };
    if (opt_.collective_mode == CollectiveMode::FLOW) {
      t.kind = TaskKind::DELAY;
      t.duration_s = std::max(0.0, latency_s + steps * per_step + stand_in_s);
      t.bytes = bytes;
      auto delay = add_free(t);
      auto flow = payload(steps * chunk, delay);
      if (step_flows) step_flows->push_back(flow);
      return {delay, flow};
    }
    std::int32_t first = -1, prev = -1;
    for (int k = 0; k < steps; ++k) {
      std::int32_t head = -1;
      if (per_step > 0) {
        t.kind = TaskKind::DELAY;
        t.duration_s = per_step;
        head = add_free(t);
        if (prev >= 0) g_.depend(prev, head);
      }
      auto flow = payload(chunk, head >= 0 ? head : prev);
      if (first < 0) first = head >= 0 ? head : flow;
      if (step_flows) step_flows->push_back(flow);
      prev = flow;
    }
    return {first, prev};
  };

  // The EDP fold's rings with several simulated members (partially_folded): one instance over those members;
  // a copy's steps are its representative's (edp_rings_periodic: the copy's ring neighbours are copies of the
  // representative's), so a member whose predecessor is a copy waits for the steps of that copy's representative.
  const bool partial = folded && out_.fold_edp && partially_folded(members);
  if (folded && !partial) {
    // One simulated member: flows to its mirror over the paths to its ring successors.
    find_spread();
    choose_protocol();
    const auto me = std::find(members.begin(), members.end(), grank);
    DTSIM_ASSERT(me != members.end(), "rank " << grank << " not in its own group");
    const auto i = static_cast<std::size_t>(me - members.begin());
    const int succ = spread                           ? members[local_succ[i]]
                     : std::next(me) == members.end() ? members.front()
                                                      : *std::next(me);
    const int next = spread ? members[node_succ[i]] : -1;
    auto [first, done] = member_tasks(si, grank, -1, succ, -1, next, nullptr);
    return attach(si, stream, pred, first, done, first_out);
  }

  auto key = std::make_tuple(members[0], key_code, seq);
  auto it = instances_.find(key);
  if (it == instances_.end()) {
    Instance inst = new_instance(base, si);
    find_spread();
    choose_protocol();
    std::vector<std::vector<std::int32_t>> flows(n);
    // Each member's predecessors: the ring's previous member, or (spread) the node-local and next-node ones.
    std::vector<std::array<int, 2>> preds(n, {-1, -1});
    // Per member: the member whose tasks stand for it (itself, or under the EDP fold its representative), and its
    // position among the instance's simulated members.
    std::vector<int> stands(n), slot(n, -1);
    std::iota(stands.begin(), stands.end(), 0);
    if (partial) {
      std::map<int, int> at;
      for (int i = 0; i < n; ++i) at[members[i]] = i;
      for (int i = 0; i < n; ++i) {
        const auto found = at.find(out_.ranks[out_.sim_index_of[members[i]]].global_rank);
        DTSIM_ASSERT(found != at.end(), "member " << members[i] << " of a " << name << " collective stands outside it");
        stands[i] = found->second;
      }
    }
    for (int i = 0; i < n; ++i)
      DTSIM_ASSERT(out_.ranks[out_.sim_index_of[members[stands[i]]]].global_rank == members[stands[i]],
                   "member " << members[i] << " of a " << name << " collective is not simulated");
    for (int i = 0; i < n; ++i) {
      const int s = spread ? local_succ[i] : (i + 1) % n;
      const int nx = spread ? node_succ[i] : -1;
      preds[s][0] = i;
      if (nx >= 0) preds[nx][1] = i;
      if (stands[i] != i) continue;  // a folded copy: its representative's tasks stand for it
      const int msi = out_.sim_index_of[members[i]];
      // A flow to a folded copy arrives at its representative's links (sim_index_of): by the ring's periodicity
      // the representative's predecessor is a copy of this member, whose flow is this one.
      const int next_si = nx >= 0 ? out_.sim_index_of[members[nx]] : -1;
      auto [first, done] = member_tasks(msi, members[i], out_.sim_index_of[members[s]], members[s], next_si,
                                        nx >= 0 ? members[nx] : -1, &flows[i]);
      g_.depend(inst.join, first);
      slot[i] = static_cast<int>(inst.members_si.size());
      inst.first.push_back(first);
      inst.done.push_back(done);
      inst.members_si.push_back(msi);
    }
    // Data dependencies around the ring: step k of member i needs step k-1 of its predecessors (STEPS), and a
    // member is done when its own last flow and its predecessors' last flows have arrived.
    for (int i = 0; i < n; ++i) {
      if (slot[i] < 0) continue;
      const auto& mine = flows[i];
      Task e = base;
      e.kind = TaskKind::JOIN;
      e.rank = inst.members_si[slot[i]];
      auto end = add_free(e);
      g_.depend(inst.done[slot[i]], end);
      for (int p : preds[i]) {
        if (p < 0) continue;
        const auto& pred_flows = flows[stands[p]];
        for (std::size_t k = 1; k < mine.size(); ++k) g_.depend(pred_flows[k - 1], mine[k]);
        g_.depend(pred_flows.back(), end);
      }
      inst.done[slot[i]] = end;
    }
    it = store_instance(key, std::move(inst), kind, bytes);
  }
  return join_instance(it, si, stream, pred, first_out);
}

std::int32_t Lowerer::compute_task(int si, const std::vector<cost::Op>& ops, Phase phase, const std::string& name,
                                   int layer, int mb, std::int32_t pred, bool* issued, int host_kernels) {
  Task t;
  t.kind = TaskKind::COMPUTE;
  t.stream = Stream::COMPUTE;
  t.phase = phase;
  t.name = g_.intern(name);
  t.layer = layer;
  t.microbatch = mb;
  // Duration, FLOPs and the slowdown under a concurrent collective (the kernels' classes weighted by their time;
  // 0 with interference off).
  double dur = 0, flops = 0, slow = 0;
  for (const auto& op : ops) {
    const double ti = cost::op_time_s(op, c_.gpu, m_.dtype, cal_);
    dur += ti;
    flops += op.flops;
    slow += ti * (op.flash  ? cal_.interference_flash_slowdown
                  : op.gemm ? cal_.interference_gemm_slowdown
                            : cal_.interference_memory_slowdown);
  }
  t.duration_s = dur;
  t.flops = flops;
  t.interference = opt_.interference && dur > 0 ? static_cast<float>(slow / dur) : 0.0F;
  const auto id = add_on_stream(si, t);
  if (opt_.record_kernels) {
    std::vector<KernelSpec> ks;
    ks.reserve(ops.size());
    for (const auto& op : ops) ks.push_back({op.name, op.gemm, op.m, op.k, op.n, op.batch, op.flops, op.bytes});
    g_.set_kernels(id, std::move(ks));
  }
  if (pred >= 0) g_.depend(pred, id);
  // The host issues the step's kernels in program order, running ahead of the GPU: the step cannot start before
  // they are issued (it is host-bound when its kernels are shorter than their issue time). Under CUDA graphs the
  // whole layer pass is one graph launch.
  if (cal_.host_issue_s > 0) {
    const double kernels = host_kernels >= 0 ? host_kernels : static_cast<double>(ops.size());
    if (!p_.cuda_graphs && kernels > 0) host_issue(si, t, kernels * cal_.host_issue_s, id);
    else if (issued && !*issued) host_issue(si, t, cal_.host_issue_s, id);
  }
  if (issued) *issued = true;
  return id;
}

std::int32_t Lowerer::overlapped_compute(int si, const cost::Step& st, const cost::Step* ag, const cost::Step* rs,
                                         Phase phase, int layer, int mb, std::int32_t pred, const std::string& prefix,
                                         bool* issued) {
  // Megatron-Core's TP communication overlap / PyTorch async TP: the all-gather feeding the step's first GEMM and the
  // reduce-scatter of its last GEMM's output are cut into n pieces, each pipelined with the matching GEMM piece
  // (piece j of the GEMM waits for piece j of the all-gather; piece j of the reduce-scatter starts after GEMM piece
  // j). Exposed: the first all-gather piece (the last reduce-scatter piece) plus what the GEMM pieces cannot hide.
  // Pieces as Transformer Engine's default methods cut them (cost::tp_overlap_pieces): the all-gather in tp, a
  // forward reduce-scatter in 4; a reduce-scatter after a weight gradient whole beside it (cost::tp_overlap_bulk).
  const int tp = p_.stage_tp(out_.ranks[si].coord.pp);
  const int n = cost::tp_overlap_pieces(CollectiveKind::ALL_GATHER, tp, p_.tp_overlap_chunks);
  const int n_rs = cost::tp_overlap_pieces(CollectiveKind::REDUCE_SCATTER, tp, p_.tp_overlap_chunks);
  const auto& ops = st.ops;
  const int first = ag ? cost::gemm_index(ops, true) : -1;
  int last = rs ? cost::gemm_index(ops, false) : -1;
  if (last == first) last = -1;                               // a single GEMM is pipelined with its all-gather only
  auto segment = [&](int from, int to, std::int32_t after) {  // ops [from, to) as one task
    if (from >= to) return after;
    std::vector<cost::Op> seg(ops.begin() + from, ops.begin() + to);
    return compute_task(si, seg, phase, prefix + st.name, layer, mb, after, issued);
  };
  std::int32_t cur = pred;
  int next_op = 0;
  struct Userbuffers {  // the pieces' collectives are not NCCL's (nccl_ring)
    bool& flag;
    explicit Userbuffers(bool& f) : flag(f) { flag = true; }
    ~Userbuffers() { flag = false; }
    Userbuffers(const Userbuffers&) = delete;
    Userbuffers& operator=(const Userbuffers&) = delete;
  } userbuffers(userbuffers_);
  if (first >= 0) {
    cur = segment(0, first, cur);
    std::int32_t coll_pred = cur;
    for (int j = 0; j < n; ++j) {
      const auto a = collective(si, GroupAxis::TP, Stream::TP, ag->collective, ag->collective_bytes / n, phase,
                                prefix + ag->name, layer, mb, coll_pred);
      coll_pred = -1;  // later pieces follow on the TP stream
      cur = compute_task(si, {cost::gemm_piece(ops[static_cast<std::size_t>(first)], n)}, phase, prefix + st.name,
                         layer, mb, cur, issued, j == 0 ? 1 : 0);
      g_.depend(a, cur);
    }
    next_op = first + 1;
  }
  if (last >= 0) {
    cur = segment(next_op, last, cur);
    std::int32_t r = -1;
    if (cost::tp_overlap_bulk(ops[static_cast<std::size_t>(last)])) {
      // Bulk: the whole reduce-scatter of the data gradient (computed before the weight gradient) beside the
      // weight-gradient GEMM.
      r = collective(si, GroupAxis::TP, Stream::TP, rs->collective, rs->collective_bytes, phase, prefix + rs->name,
                     layer, mb, cur);
      cur = compute_task(si, {ops[static_cast<std::size_t>(last)]}, phase, prefix + st.name, layer, mb, cur, issued, 1);
    } else {
      for (int j = 0; j < n_rs; ++j) {
        cur = compute_task(si, {cost::gemm_piece(ops[static_cast<std::size_t>(last)], n_rs)}, phase, prefix + st.name,
                           layer, mb, cur, issued, j == 0 ? 1 : 0);
        r = collective(si, GroupAxis::TP, Stream::TP, rs->collective, rs->collective_bytes / n_rs, phase,
                       prefix + rs->name, layer, mb, cur);
      }
    }
    cur = segment(last + 1, static_cast<int>(ops.size()), cur);
    Task j;
    j.kind = TaskKind::JOIN;
    j.rank = si;
    j.phase = phase;
    j.name = g_.intern(prefix + rs->name);
    j.layer = layer;
    j.microbatch = mb;
    const auto end = add_free(j);
    g_.depend(cur, end);
    g_.depend(r, end);
    return end;
  }
  return segment(next_op, static_cast<int>(ops.size()), cur);
}

std::int32_t Lowerer::run_steps(int si, const std::vector<cost::Step>& steps, Phase phase, int layer, int mb,
                                std::int32_t pred, std::int32_t* first_task, const std::string& prefix) {
  std::int32_t last = pred;
  bool issued = false;  // CUDA graphs: the pass's one launch is issued
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const auto& st = steps[i];
    std::int32_t id;
    if (st.kind == cost::Step::Kind::COMPUTE) {
      const cost::Step* rs = p_.tp_comm_overlap && i + 1 < steps.size() &&
                                     cost::tp_overlappable(steps[i + 1], CollectiveKind::REDUCE_SCATTER) &&
                                     cost::gemm_index(st.ops, false) >= 0
                                 ? &steps[i + 1]
                                 : nullptr;
      if (rs) {
        id = overlapped_compute(si, st, nullptr, rs, phase, layer, mb, last, prefix, &issued);
        ++i;
      } else {
        id = compute_task(si, st.ops, phase, prefix + st.name, layer, mb, last, &issued,
                          st.host_issues > 0 ? static_cast<int>(st.host_issues) : -1);
      }
    } else if (st.kind == cost::Step::Kind::RING_ATTENTION) {
      id = ring_attention(si, st, phase, layer, mb, last, prefix);
    } else if (p_.tp_comm_overlap && cost::tp_overlappable(st, CollectiveKind::ALL_GATHER) && i + 1 < steps.size() &&
               steps[i + 1].kind == cost::Step::Kind::COMPUTE && cost::gemm_index(steps[i + 1].ops, true) >= 0) {
      const cost::Step* rs = i + 2 < steps.size() && cost::tp_overlappable(steps[i + 2], CollectiveKind::REDUCE_SCATTER)
                                 ? &steps[i + 2]
                                 : nullptr;
      id = overlapped_compute(si, steps[i + 1], &st, rs, phase, layer, mb, last, prefix, &issued);
      i += rs && cost::gemm_index(steps[i + 1].ops, false) != cost::gemm_index(steps[i + 1].ops, true) ? 2 : 1;
    } else {
      std::int32_t coll_first = -1;
      const GroupAxis ax = st.group == cost::CommGroup::CP    ? GroupAxis::CP
                           : st.group == cost::CommGroup::EP  ? GroupAxis::EP
                           : st.group == cost::CommGroup::ETP ? GroupAxis::ETP
                                                              : GroupAxis::TP;
      a2a_loads_ = st.a2a_loads.empty() ? nullptr : &st.a2a_loads;
      a2a_combine_ = st.a2a_combine;
      flex_ = st.flex.enabled() ? &st.flex : nullptr;
      id = collective(si, ax, Stream::TP, st.collective, st.collective_bytes, phase, prefix + st.name, layer, mb, last,
                      &coll_first, st.axis);
      a2a_loads_ = nullptr;
      flex_ = nullptr;
      if (id != last && cal_.host_collective_issue_s > 0 && coll_first >= 0 && !p_.cuda_graphs) {
        // The host issues the collective (framework call + NCCL enqueue) between the kernels around it: later
        // kernels are issued after it, and this member's part of the collective starts once it is issued.
        Task like;
        like.phase = phase;
        like.name = g_.intern(prefix + st.name + "-issue");
        like.layer = layer;
        like.microbatch = mb;
        host_issue(si, like, cal_.host_collective_issue_s, coll_first);
      }
    }
    if (st.host_sync && moe_waits_) {
      // The host waits for the step (Calibration::moe_dispatch_sync): a JOIN on the HOST stream after it, so every
      // later host issue of the rank starts once the device has got here.
      const auto wait = host_join(si, phase, layer, mb, g_.intern(prefix + st.name + "-host-wait"));
      if (id >= 0) g_.depend(id, wait);
    }
    if (id == last) continue;  // a group of one
    if (first_task && *first_task < 0) *first_task = id;
    last = id;
  }
  return last;
}

std::int32_t Lowerer::ring_attention(int si, const cost::Step& st, Phase phase, int layer, int mb, std::int32_t pred,
                                     const std::string& prefix) {
  const int grank = out_.ranks[si].global_rank;
  const auto& members = group_members(grank, GroupAxis::CP);
  const auto me = std::find(members.begin(), members.end(), grank);
  DTSIM_ASSERT(me != members.end(), "rank " << grank << " not in its own CP group");
  const int succ = std::next(me) == members.end() ? members.front() : *std::next(me);
  const int succ_si = out_.sim_index_of[succ];
  const bool mirror = out_.ranks[succ_si].global_rank != succ;
  cost::Step block = st;
  block.kind = cost::Step::Kind::COMPUTE;
  const double t_block = cost::step_time_s(block, c_.gpu, m_.dtype, cal_);
  const Path hop = path(grank, succ);
  const double alpha = routing_ ? routing_->latency_s(gpu(grank), gpu(succ)) : hop_latency(hop);
  const std::int32_t name = g_.intern(prefix + st.name), kv_name = g_.intern(prefix + st.name + "-kv");
  // One KV transfer to the ring successor (the matching receive from the predecessor is, by the ring's symmetry,
  // taken as arriving with this rank's own send of the same step).
  auto send = [&](double bytes, std::int32_t after_a, std::int32_t after_b) {
    Task d = collective_base(Stream::TP, phase, kv_name, layer, mb);
    d.rank = si;
    d.kind = TaskKind::DELAY;
    d.duration_s = std::max(0.0, cal_.p2p_overhead_s + segment_extra_s(hop, grank, succ, alpha, bytes));
    const auto delay = add_free(d);
    if (after_a >= 0) g_.depend(after_a, delay);
    if (after_b >= 0) g_.depend(after_b, delay);
    Task f = d;
    f.kind = TaskKind::FLOW;
    f.duration_s = 0;
    f.path = hop;
    f.mirror = mirror;
    f.peer = mirror ? -1 : succ_si;
    f.bytes = bytes;
    const auto flow = add_free(f);
    g_.depend(delay, flow);
    return flow;
  };
  std::int32_t cur = pred, arrived = -1;
  for (int i = 0; i < st.ring_steps; ++i) {
    // Block i+1 travels on while block i is computed; block i arrived with the previous step's transfer.
    const std::int32_t next = i + 1 < st.ring_steps ? send(st.collective_bytes, i == 0 ? pred : arrived, -1) : -1;
    Task t;
    t.kind = TaskKind::COMPUTE;
    t.stream = Stream::COMPUTE;
    t.phase = phase;
    t.name = name;
    t.layer = layer;
    t.microbatch = mb;
    t.duration_s = t_block;
    t.flops = block.flops();
    const auto id = add_on_stream(si, t);
    if (cur >= 0) g_.depend(cur, id);
    if (arrived >= 0) g_.depend(arrived, id);
    if (opt_.record_kernels) {
      std::vector<KernelSpec> ks;
      for (const auto& op : block.ops) ks.push_back({op.name, op.gemm, op.m, op.k, op.n, op.batch, op.flops, op.bytes});
      g_.set_kernels(id, std::move(ks));
    }
    // Under CUDA graphs the ring blocks are part of the pass's one graph launch.
    if (cal_.host_issue_s > 0 && !p_.cuda_graphs)
      host_issue(si, t, static_cast<double>(block.ops.size()) * cal_.host_issue_s, id);
    cur = id;
    arrived = next;
  }
  if (st.ring_tail_bytes > 0 && st.ring_steps > 1) {
    // The finished dK, dV go home: the layer's backward continues once they have arrived.
    const auto tail = send(st.ring_tail_bytes, cur, -1);
    Task j = collective_base(Stream::TP, phase, kv_name, layer, mb);
    j.kind = TaskKind::JOIN;
    j.rank = si;
    const auto end = add_free(j);
    g_.depend(cur, end);
    g_.depend(tail, end);
    return end;
  }
  return cur;
}

void Lowerer::lower_rank(int si) {
  const SimRank& r = out_.ranks[si];
  const int s = r.coord.pp, p = p_.pp, v = p_.virtual_stages;
  const PassCosts& pc = stage_costs(s);
  const cost::LayerPasses &emb_ = pc.embedding, &head_ = pc.head;
  const cost::ActivationBytes &emb_act_ = pc.embedding_act, &head_act_ = pc.head_act;
  const auto chunk_layers = p_.chunk_layers(m_.num_layers);
  // Model chunk k holds decoder layers [chunk_start[k], chunk_end[k]).
  const std::vector<int> chunk_start = p_.chunk_first_layers(m_.num_layers);
  std::vector<int> chunk_end(chunk_layers.size());
  for (std::size_t k = 0; k < chunk_layers.size(); ++k) chunk_end[k] = chunk_start[k] + chunk_layers[k];
  const double e = dtype_bytes(m_.dtype);
  // One sample's hidden states on this rank (context parallelism: its seq_len / cp tokens).
  const double sample_bytes = static_cast<double>(m_.seq_len) / p_.cp * m_.hidden * e;
  const double act_msg = static_cast<double>(p_.micro_batch_size) / p_.replicas(s) * sample_bytes;
  // This stage's TP degree and weight copies inside its TP group (heterogeneous plans: its own).
  const StageStrategy strategy = p_.stage_strategy(s);
  const int tp_s = p_.stage_tp(s), weight_replicas = strategy.tp_layout == TpLayout::D2_5 ? strategy.tp_depth : 1;
  // What a TP rank sends to the next stage (the stack's pp_scatter_gather): 1/t of the activation, all-gathered over
  // TP after the receive (Megatron-LM's scatter-gather without sequence parallelism, DeepSpeed's partitioned
  // activations); its own (seq / t) shard under sequence parallelism, nothing gathered; otherwise its own whole copy
  // (Megatron-Core: megatron/core/pipeline_parallel/schedules.py get_tensor_shapes).
  const bool scatter_gather = tp_s > 1 && pp_scatter_gather(cal_, strategy.sequence_parallel);
  const bool whole_copy = tp_s > 1 && !pp_transfer_sliced(cal_, strategy.sequence_parallel);
  const bool split = p_.split_backward();
  const int zero = strategy.zero_stage;
  // Stage boundaries inside layers: the stage's first layer from atom a_in on, and the next stage's first layer up
  // to atom a_out (one model chunk per stage, one TP degree, no replicas). Besides the hidden state, a cut sends
  // what else crosses it (q, k, v; the core's output; the activation's output), each TP rank its own shard, and the
  // gradients of the same back.
  const int a_in = p_.cut_atoms(s - 1), a_out = p_.cut_atoms(s);
  const cost::Shape cut_shape = a_in + a_out > 0 ? cost::shape_of(p_, p_.micro_batch_size) : cost::Shape{};
  const double cut_fwd_bytes = a_out > 0 ? cost::cut_extra_bytes(m_, cut_shape, a_out) : 0.0,
               cut_bwd_bytes = a_in > 0 ? cost::cut_extra_bytes(m_, cut_shape, a_in) : 0.0;
  // Heterogeneous plans: a transfer from a stage whose TP layout differs is re-sharded over this rank's TP group.
  auto reshard = [&](int from_stage, Phase phase, int mb, std::int32_t pred) {
    if (tp_s == 1 || !p_.stage_layouts_differ(from_stage, s)) return pred;
    return collective(si, GroupAxis::TP, Stream::TP, CollectiveKind::ALL_TO_ALL, act_msg / tp_s, phase,
                      phase == Phase::FORWARD ? "reshard-activation" : "reshard-gradient", -1, mb, pred);
  };
  // Pipeline transfers to model chunk k: this replica's share of the micro-batch goes to every replica of the
  // receiving stage whose share overlaps it (split/concat between stages of different widths). Inside a share,
  // TP rank i of a stage of degree t sends the slice [i/t, (i+1)/t) of it (scatter-gather or its sequence-parallel
  // shard; the whole share without TP) to each receiving TP rank whose slice overlaps it: rank i to rank i between
  // equal degrees, which is also where a whole copy goes (whole_copy).
  // Blocking exchanges (calibration p2p_sync): after its sends, the rank computes nothing more until they have ended.
  // ... and, in GPipe and 1F1B, a transfer starts once its receiver has posted the receive: Megatron exchanges after
  // each pass what that pass sent with what the rank's next pass needs, which is this pass order. The interleaved
  // schedule pairs a forward's and a backward's exchanges in one batch (send_forward_backward_recv_forward_backward),
  // which a per-pass order cannot express; there, and in schedules Megatron-LM does not run, the sender still waits
  // for its transfer but nothing waits for the receiver (p2p_wait).
  const P2pWait exchange = p2p_wait(cal_, p_);
  const bool blocking = exchange.sender, rendezvous = exchange.receiver;
  // `exchanged`: flows only, waited for by the caller (DualPipeV's exchanges), not by a blocking JOIN here.
  auto send_pieces = [&](int k, int dir, int mb, std::int32_t pred, std::vector<std::int32_t>* exchanged = nullptr) {
    std::vector<std::int32_t> flows;
    const int to_stage = p_.stage_of_chunk(k);
    if (to_stage == s) {  // DualPipeV's turn on the last stage: the next chunk is this rank's own
      sent_[{si, mb, k, dir}].push_back(pred);
      return pred;
    }
    const int my_r = p_.replicas(s), to_r = p_.replicas(to_stage), to_t = p_.stage_tp(to_stage);
    const double b = p_.micro_batch_size, lo = r.coord.rep * b / my_r, hi = (r.coord.rep + 1) * b / my_r;
    const double t_lo = static_cast<double>(r.coord.tp) / tp_s, t_hi = (r.coord.tp + 1.0) / tp_s;
    for (int j = 0; j < to_r; ++j) {
      const double overlap = std::min(hi, (j + 1) * b / to_r) - std::max(lo, j * b / to_r);
      if (overlap <= 0) continue;
      for (int u = 0; u < to_t; ++u) {
        const double slice = whole_copy && to_t == tp_s
                                 ? (u == r.coord.tp ? 1.0 : 0.0)
                                 : std::min(t_hi, (u + 1.0) / to_t) - std::max(t_lo, static_cast<double>(u) / to_t);
        if (slice <= 1e-12) continue;
        RankCoord c = r.coord;
        c.pp = to_stage;
        c.rep = j;
        c.tp = u;
        const int to_si = out_.sim_index_of[p_.rank_of(c)];
        if (out_.ranks[to_si].global_rank != p_.rank_of(c)) continue;  // folded away (uniform widths: same piece)
        const double extra = u == r.coord.tp ? (dir == 0 ? cut_fwd_bytes : cut_bwd_bytes) * overlap / b : 0.0;
        const double bytes = overlap * sample_bytes * slice + extra;
        flows.push_back(p2p(si, to_si, bytes, dir == 0 ? Phase::FORWARD : Phase::BACKWARD,
                            dir == 0 ? "send-activation" : "send-gradient", mb, pred));
        sent_[{to_si, mb, k, dir}].push_back(flows.back());
      }
    }
    if (exchanged) exchanged->insert(exchanged->end(), flows.begin(), flows.end());
    if (exchanged || !blocking || flows.empty()) return pred;
    Task wait;
    wait.kind = TaskKind::JOIN;
    wait.stream = Stream::COMPUTE;
    wait.phase = dir == 0 ? Phase::FORWARD : Phase::BACKWARD;
    wait.microbatch = mb;
    wait.name = g_.intern(dir == 0 ? "wait-send-activation" : "wait-send-gradient");
    const auto id = add_on_stream(si, wait);
    for (auto f : flows) g_.depend(f, id);
    return id;
  };

  // The units of work of a model chunk: embedding (first chunk), its layers, head (last chunk).
  struct Unit {
    const cost::LayerPasses* passes;
    double stored, transient;  // activation bytes per micro-batch
    double param_bytes;        // full parameters of the unit on this TP rank
    int layer;
    double expert_bytes = 0;   // of param_bytes, the routed experts' (reduced over the expert-data-parallel group)
    double gather_bytes = -1;  // ZeRO-3 gathers (and holds) this many, FP8 linear weights counted (-1: param_bytes)
    double gathered() const { return gather_bytes >= 0 ? gather_bytes : param_bytes; }
  };
  // MoE layers: this rank's EP index picks its passes under skewed routing.
  const std::size_t moe_idx = pc.moe_layer.size() > 1 ? static_cast<std::size_t>(ep_index(r.global_rank)) : 0;
  const cost::MoeLayerParams moe_params =
      m_.moe.enabled() ? cost::moe_layer_params_per_rank(m_, tp_s, p_.ep, p_.expert_tp()) : cost::MoeLayerParams{};
  auto partial = [&](const cost::LayerPasses& passes, const cost::ActivationBytes& act, double params, int l) {
    return Unit{&passes, act.stored, passes.recompute.empty() ? 0 : act.transient, params * e, l};
  };
  auto units_of = [&](int k) {
    std::vector<Unit> u;
    if (!p_.has_prev_chunk(k))
      u.push_back({&emb_, emb_act_.stored, 0, cost::first_stage_extra_params(m_, tp_s) * e, -1});
    for (int l = chunk_start[k]; l < chunk_end[k]; ++l) {
      const LayerKind kind = m_.layer_kind(l);
      const PassCosts& lc = pc.for_layer(l - chunk_start[k]);  // partial recompute: this layer's costs
      if (l == chunk_start[k] && a_in > 0) {
        u.push_back(partial(pc.front, pc.front_act, pc.front_params, l));
      } else if (!cost::base_kind(kind)) {
        const auto& kc = lc.kind_costs(kind);
        const std::size_t variant = kc.passes.size() > 1 ? moe_idx : 0;
        const auto& lp = kc.passes[variant];
        const auto& la = kc.act[variant];
        const auto kp = cost::kind_params_per_rank(m_, kind, tp_s, p_.ep, p_.expert_tp(), weight_replicas);
        u.push_back(
            {&lp, la.stored, lp.recompute.empty() ? 0 : la.transient, (kp.dense + kp.expert) * e, l, kp.expert * e});
      } else if (kind.ffn == FfnKind::MOE) {
        DTSIM_ASSERT(moe_idx < lc.moe_layer.size(), "no MoE layer costs for layer " << l);
        const auto& lp = lc.moe_layer[moe_idx];
        const auto& la = lc.moe_layer_act[moe_idx];
        u.push_back({&lp, la.stored, lp.recompute.empty() ? 0 : la.transient,
                     (moe_params.dense + moe_params.expert) * e, l, moe_params.expert * e});
      } else {
        const double params = cost::layer_params_per_rank(m_, tp_s, weight_replicas);
        u.push_back(
            {&lc.layer, lc.layer_act.stored, lc.layer.recompute.empty() ? 0 : lc.layer_act.transient, params * e, l});
        if (p_.fsdp_float8_all_gather) {
          // torchao's float8 all-gather: the TP-split linear weights in FP8 (1 byte), the norms (and a GELU MLP's
          // row-parallel biases) in dtype.
          const double replicated = cost::layer_replicated_params(m_);
          u.back().gather_bytes = (params - replicated) * 1.0 + replicated * e;
        }
      }
    }
    if (!p_.has_next_chunk(k)) {
      u.push_back({&head_, head_act_.stored, 0,
                   cost::last_stage_extra_params(m_, tp_s, p_.head_stage() > 0 ? p_.pp : 1) * e, -1});
      // Multi-token prediction: its depths after the head (Megatron-Core's MTP block on the last stage).
      if (m_.mtp_layers > 0) {
        DTSIM_ASSERT(!pc.mtp.empty(), "no multi-token-prediction costs");
        const std::size_t variant = pc.mtp.size() > 1 ? moe_idx : 0;
        const auto& mp = pc.mtp[variant];
        const auto& ma = pc.mtp_act[variant];
        const auto kp = cost::mtp_params_per_rank(m_, tp_s, p_.ep, p_.expert_tp());
        for (int dpt = 0; dpt < m_.mtp_layers; ++dpt)
          u.push_back(
              {&mp, ma.stored, mp.recompute.empty() ? 0 : ma.transient, (kp.dense + kp.expert) * e, -1, kp.expert * e});
      }
    }
    if (a_out > 0) u.push_back(partial(pc.back, pc.back_act, pc.back_params, chunk_end[k]));
    return u;
  };
  const bool dense_dp = p_.dense_grad_ranks() * p_.replicas(s) > 1, expert_dp = p_.expert_dp() > 1;
  // Gradients are reduced in fp32 where the plan keeps them in fp32 (Megatron's main_grad buffers).
  const double grad_scale = p_.fp32_grads ? 4.0 / e : 1.0;

  // Activation offloading (ParallelPlan::offload_activation_layers; Megatron-Core's cpu_offload.py): the first N
  // decoder layers of each chunk copy their stored activations over the host link on the rank's copy stream, after
  // `after`; the device frees them when the copy to the host ends and holds them again from the copy back's start.
  const int offload_n = p_.offload_activation_layers;
  auto offloaded = [&](const Unit& u, int k) {
    return offload_n > 0 && u.layer >= chunk_start[k] && u.layer < chunk_start[k] + offload_n;
  };
  auto host_copy = [&](bool to_host, const Unit& u, int mb, std::int32_t after) {
    Task t;
    t.kind = TaskKind::DELAY;
    t.stream = to_host ? Stream::TO_HOST : Stream::FROM_HOST;
    t.phase = to_host ? Phase::FORWARD : Phase::BACKWARD;
    t.name = g_.intern(to_host ? "activation-offload" : "activation-reload");
    t.microbatch = mb;
    t.layer = static_cast<std::int16_t>(u.layer);
    t.duration_s = u.stored / c_.host.link_Bps;
    const auto id = add_on_stream(si, t);
    if (after >= 0) g_.depend(after, id);
    if (to_host) g_.memory(id, true, MemCategory::ACTIVATIONS, -u.stored);
    else g_.memory(id, false, MemCategory::ACTIVATIONS, u.stored);
    return id;
  };
  std::map<std::tuple<int, int, int>, std::int32_t> offload_done;  // (micro-batch, chunk, layer) -> its copy to host

  // Where a pipeline transfer from a neighbour stage lands; connected to the sending flow after all ranks are lowered.
  auto receive_point = [&](Phase phase, int mb, const char* name) {
    Task j;
    j.kind = TaskKind::JOIN;
    j.rank = si;
    j.phase = phase;
    j.microbatch = mb;
    j.name = g_.intern(name);
    return add_free(j);
  };

  // ZeRO-3 / FSDP: all-gather a unit's parameters on the DP stream before it runs. The gather of the n-th unit
  // pass waits for the end of pass n-1-k (k = fsdp_prefetch; 1 by default: one gather runs while a unit computes).
  // Megatron-FSDP: k = `ahead`, the units between the hook that gathers it and the unit
  // (memory::megatron_fsdp_prefetch). Its double buffer: two persistent buffers of the largest decoder layer's
  // parameters (and two of its gradients) are held from the first gather (reduce-scatter) on, instead of each layer's
  // own while it is gathered (unsharded); the embedding, head and MTP blocks, not Megatron-FSDP units, allocate their
  // own (its backup allocator).
  std::vector<std::int32_t> unit_pass_ends;
  const bool double_buffer = p_.megatron_fsdp && p_.fsdp_double_buffer;
  auto pooled = [&](const Unit& u) { return double_buffer && u.layer >= 0; };
  // Per model chunk of the stage (its units' order) and direction, how far ahead Megatron-FSDP's hooks gather each
  // unit, once per chunk (the backward runs the units in reverse); empty unless Megatron-FSDP runs ZeRO-3 here.
  const bool megatron_gathers = p_.megatron_fsdp && zero >= 3;
  std::vector<std::vector<int>> ahead_fwd, ahead_bwd;
  double largest_unit_bytes = 0;
  for (int ch = 0; (double_buffer || megatron_gathers) && ch < v; ++ch) {
    const auto units = units_of(p_.model_chunk(s, ch));
    std::vector<double> params;
    params.reserve(units.size());
    for (const Unit& u : units) {
      if (u.layer >= 0) largest_unit_bytes = std::max(largest_unit_bytes, u.param_bytes);
      params.push_back(u.param_bytes / e);
    }
    if (!megatron_gathers) continue;
    ahead_fwd.push_back(memory::megatron_fsdp_prefetch(params, double_buffer));
    std::reverse(params.begin(), params.end());
    ahead_bwd.push_back(memory::megatron_fsdp_prefetch(params, double_buffer));
    std::reverse(ahead_bwd.back().begin(), ahead_bwd.back().end());
  }
  auto ahead_of = [](const std::vector<std::vector<int>>& ahead, int chunk, std::size_t unit) {
    return ahead.empty() ? 0 : ahead[static_cast<std::size_t>(chunk)][unit];
  };
  bool param_buffers_held = false, grad_buffers_held = false;
  auto gather = [&](const Unit& u, Phase phase, int mb, int ahead) -> std::int32_t {
    if (zero < 3 || !(dense_dp || (expert_dp && u.expert_bytes > 0))) return -1;
    // FSDP prefetch: the gather of the n-th unit pass may start once pass n - 1 - fsdp_prefetch has ended.
    const std::size_t behind = static_cast<std::size_t>(p_.megatron_fsdp ? ahead : p_.fsdp_prefetch) + 1;
    const std::int32_t pred = unit_pass_ends.size() >= behind ? unit_pass_ends[unit_pass_ends.size() - behind] : -1;
    std::int32_t first = -1, done = pred;
    if (dense_dp)
      done = collective(si, GroupAxis::DP, Stream::DP, CollectiveKind::ALL_GATHER, u.gathered() - u.expert_bytes, phase,
                        "param-gather", u.layer, mb, done, &first);
    if (expert_dp && u.expert_bytes > 0) {
      std::int32_t f = -1;
      done = collective(si, GroupAxis::EDP, Stream::DP, CollectiveKind::ALL_GATHER, u.expert_bytes, phase,
                        "expert-param-gather", u.layer, mb, done, &f);
      if (first < 0) first = f;
    }
    if (!pooled(u)) g_.memory(first, false, MemCategory::GATHERED_PARAMS, u.gathered());
    else if (!param_buffers_held) g_.memory(first, false, MemCategory::GATHERED_PARAMS, 2 * largest_unit_bytes);
    param_buffers_held = param_buffers_held || pooled(u);
    return done;
  };

  // Gradient buckets (PyTorch DDP style): filled as the final weight gradients of each unit become ready. Dense
  // gradients are reduced over the dp x cp ranks, the routed experts' over their expert-data-parallel group (own
  // buckets).
  double bucket_bytes = 0, expert_bucket_bytes = 0;
  std::vector<std::int32_t> dp_done;
  // (ready after task, its local model chunk, dense, expert bytes)
  std::vector<std::tuple<std::int32_t, int, double, double>> ready_grads;
  // Bucket size per local model chunk (dp_bucket_bytes: the plan's, else the stack's); Megatron's chunks keep their own
  // buffers, so a bucket closes at the end of its chunk's gradients (Calibration::dp_buckets_first_chunk_only).
  std::vector<double> bucket_limit(static_cast<std::size_t>(v));
  for (int ch = 0; ch < v; ++ch)
    bucket_limit[static_cast<std::size_t>(ch)] = dp_bucket_bytes(cal_, p_, s, ch, e * grad_scale);
  const bool buckets_per_chunk = cal_.dp_buckets_first_chunk_only;
  // DeepSpeed's BF16_Optimizer (Calibration::bf16_optimizer): fp32 gradient copies filled by a pass after every
  // micro-batch's backward, and under ZeRO-1 the whole gradient all-reduced (then the step's all-gather, below).
  const bool bf16_opt = bf16_optimizer_active(cal_, m_.dtype == DType::BF16, zero);
  auto close_bucket = [&](std::int32_t ready_task) {
    auto kind = zero >= 1 && !bf16_opt ? CollectiveKind::REDUCE_SCATTER : CollectiveKind::ALL_REDUCE;
    if (bucket_bytes > 0)
      dp_done.push_back(collective(si, GroupAxis::DP, Stream::DP, kind, bucket_bytes, Phase::GRAD_SYNC, "grad-bucket",
                                   -1, -1, ready_task));
    if (expert_bucket_bytes > 0)
      dp_done.push_back(collective(si, GroupAxis::EDP, Stream::DP, kind, expert_bucket_bytes, Phase::GRAD_SYNC,
                                   "expert-grad-bucket", -1, -1, ready_task));
    bucket_bytes = expert_bucket_bytes = 0;
  };
  const bool each_microbatch = p_.grads_reduced_each_microbatch(s);
  auto grads_ready = [&](const Unit& u, std::int32_t task, int mb, int chunk, bool final_pass) {
    if (each_microbatch) {  // FSDP, Megatron-FSDP: reduce-scatter every micro-batch's gradients of the unit
      if (!(dense_dp || (expert_dp && u.expert_bytes > 0))) return;
      if (!pooled(u)) g_.memory(task, true, MemCategory::GRAD_BUFFERS, u.param_bytes * grad_scale);
      else if (!grad_buffers_held)
        g_.memory(task, true, MemCategory::GRAD_BUFFERS, 2 * largest_unit_bytes * grad_scale);
      grad_buffers_held = grad_buffers_held || pooled(u);
      std::int32_t done = task;
      if (dense_dp)
        done = collective(si, GroupAxis::DP, Stream::DP, CollectiveKind::REDUCE_SCATTER,
                          (u.param_bytes - u.expert_bytes) * grad_scale, Phase::GRAD_SYNC, "grad-reduce-scatter",
                          u.layer, mb, done);
      if (expert_dp && u.expert_bytes > 0)
        done = collective(si, GroupAxis::EDP, Stream::DP, CollectiveKind::REDUCE_SCATTER, u.expert_bytes * grad_scale,
                          Phase::GRAD_SYNC, "expert-grad-reduce-scatter", u.layer, mb, done);
      if (!pooled(u)) g_.memory(done, true, MemCategory::GRAD_BUFFERS, -u.param_bytes * grad_scale);
      if (final_pass) dp_done.push_back(done);
      return;
    }
    if (!final_pass) return;
    const double dense_bytes = dense_dp ? (u.param_bytes - u.expert_bytes) * grad_scale : 0,
                 expert_bytes = expert_dp ? u.expert_bytes * grad_scale : 0;
    if (!p_.dp_overlap) {
      ready_grads.emplace_back(task, chunk, dense_bytes, expert_bytes);
      return;
    }
    bucket_bytes += dense_bytes;
    expert_bucket_bytes += expert_bytes;
    if (bucket_bytes + expert_bucket_bytes >= bucket_limit[static_cast<std::size_t>(chunk)]) close_bucket(task);
  };

  // Distributed optimizer with overlap-param-gather (Megatron-Core): the parameters the previous iteration's step
  // updated are all-gathered unit by unit on the DP stream, each before the unit's first forward, instead of all at
  // once after the step. The steady-state iteration starts them at its beginning.
  const bool overlap_pg = p_.overlap_param_gather && (zero == 1 || zero == 2);
  std::vector<bool> param_gathered(static_cast<std::size_t>(v), false);
  auto next_iteration_gather = [&](const Unit& u) -> std::int32_t {
    std::int32_t done = -1;
    if (dense_dp && u.param_bytes > u.expert_bytes)
      done = collective(si, GroupAxis::DP, Stream::DP, CollectiveKind::ALL_GATHER, u.param_bytes - u.expert_bytes,
                        Phase::FORWARD, "param-gather", u.layer, -1, -1);
    if (expert_dp && u.expert_bytes > 0)
      done = collective(si, GroupAxis::EDP, Stream::DP, CollectiveKind::ALL_GATHER, u.expert_bytes, Phase::FORWARD,
                        "expert-param-gather", u.layer, -1, done);
    return done;
  };

  // BF16_Optimizer's update_hp_grads after a (micro-batch, chunk)'s backward: the chunk's bf16 gradients cast and
  // added into their fp32 copies, a memory-bound pass on the compute stream before the pass's sends (the pipeline
  // engine's next instruction).
  auto hp_accumulate = [&](const std::vector<Unit>& units, int mb, std::int32_t after) {
    if (!bf16_opt) return after;
    double params = 0;
    for (const auto& u : units) params += u.param_bytes / e;
    Task acc;
    acc.kind = TaskKind::COMPUTE;
    acc.stream = Stream::COMPUTE;
    acc.phase = Phase::BACKWARD;
    acc.microbatch = mb;
    acc.name = g_.intern("hp-grad-accumulate");
    const double bytes = params * kBf16OptimizerAccumulateBytesPerParam;
    acc.duration_s = bytes / (c_.gpu.hbm_Bps * cal_.memory_bandwidth_efficiency) + cal_.kernel_launch_s;
    const auto id = add_on_stream(si, acc);
    if (opt_.record_kernels) g_.set_kernels(id, {{"hp-grad-accumulate", false, 0, 0, 0, 1, 0, bytes}});
    if (after >= 0) g_.depend(after, id);
    return id;
  };

  const auto& order = orders_[s];
  // Index of the last B and the last W pass of every chunk: gradients are final after them.
  std::vector<int> final_b(v, -1), final_w(v, -1);
  for (int i = 0; i < static_cast<int>(order.size()); ++i) {
    if (order[i].kind == PipeOp::Kind::B) final_b[order[i].chunk] = i;
    if (order[i].kind == PipeOp::Kind::W) final_w[order[i].chunk] = i;
  }
  // Split backward: B-pass end of each unit, kept for the W pass of the same (micro-batch, chunk).
  std::map<std::pair<int, int>, std::vector<std::int32_t>> b_ends;

  std::int32_t last_compute = -1;
  // The end of the previous pass before its blocking sends: Megatron posts a pass's sends together with the next
  // pass's receives (send_forward_recv_backward, ...), so that is where this rank's receive is posted.
  // DualPipeV and DualPipe (sched::dualpipe_exchanges): before pass i the rank posts batch i of sends and receives and
  // waits for it, as dualpipev.py's _commit_and_wait_comm does: a batch starts once the previous one has ended and the
  // compute before it has (its NCCL stream: in order, after the compute stream's event); a transfer moves once both
  // ends' batches have started (NCCL's send and receive meet); a batch ends when its transfers have; the next compute
  // waits for that. A receive posted ahead of its pass (prefetched) is waited for there too.
  const bool exchanges = p_.dual_pipe();
  const sched::Exchanges ex =
      exchanges ? sched::dualpipe_exchanges(p, p_.num_microbatches(), s, p_.bidirectional()) : sched::Exchanges{};
  std::map<std::tuple<int, int, int>, std::int32_t> received;  // (micro-batch, model chunk, dir) -> receive point
  std::int32_t batch_end = -1;
  auto commit = [&](std::size_t at) {
    if (at >= ex.sends.size() || (ex.sends[at].empty() && ex.recvs[at].empty())) return;
    Task j;
    j.kind = TaskKind::JOIN;
    j.rank = si;
    j.name = g_.intern("p2p-batch");
    const std::int32_t start = add_free(j);
    if (batch_end >= 0) g_.depend(batch_end, start);
    if (last_compute >= 0) g_.depend(last_compute, start);
    if (const auto tail = last_[si][static_cast<int>(Stream::COMPUTE)]; tail >= 0) g_.depend(tail, start);
    std::vector<std::int32_t> parts;
    for (const PipeOp& op : ex.sends[at]) {
      const int k = p_.model_chunk(s, op.chunk), dir = op.kind == PipeOp::Kind::F ? 0 : 1;
      send_pieces(dir == 0 ? k + 1 : k - 1, dir, op.microbatch, start, &parts);
    }
    for (const PipeOp& op : ex.recvs[at]) {
      const int k = p_.model_chunk(s, op.chunk), dir = op.kind == PipeOp::Kind::F ? 0 : 1;
      const std::int32_t rp = receive_point(dir == 0 ? Phase::FORWARD : Phase::BACKWARD, op.microbatch,
                                            dir == 0 ? "recv-activation" : "recv-gradient");
      received[{op.microbatch, k, dir}] = rp;
      waiting_.push_back({rp, si, op.microbatch, k, dir, start});
      parts.push_back(rp);
    }
    j.name = g_.intern("p2p-batch-wait");
    j.kind = TaskKind::JOIN;
    j.stream = Stream::COMPUTE;
    batch_end = add_on_stream(si, j);
    g_.depend(start, batch_end);
    for (auto t : parts) g_.depend(t, batch_end);
    last_compute = batch_end;
  };
  // The receive point of a pass's input: the exchange's (DualPipeV) or a new one.
  auto take_received = [&](Phase phase, int mb, int k, int dir, const char* name, bool* listed) {
    const auto it = received.find({mb, k, dir});
    *listed = it != received.end();
    if (!*listed) return receive_point(phase, mb, name);
    const auto rp = it->second;
    received.erase(it);
    return rp;
  };
  std::int32_t posted = -1, pair_posted = -1;
  struct PendingSend {
    int k, dir, mb;
    std::int32_t after;
  };
  std::vector<PendingSend> pending_sends;
  for (int oi = 0; oi < static_cast<int>(order.size()); ++oi) {
    const PipeOp& op = order[oi];
    const int mb = op.microbatch, k = p_.model_chunk(s, op.chunk);
    if (exchanges) commit(static_cast<std::size_t>(oi));
    if (pair_rank_ == si) {
      pair_pass_ = 1;
      posted = pair_posted;  // both receives of a pair are posted before either computes (_forward_backward_chunk)
    } else if (op.with_next && oi + 1 < static_cast<int>(order.size())) {
      DTSIM_ASSERT(op.kind == PipeOp::Kind::F && order[oi + 1].kind == PipeOp::Kind::B,
                   "an overlapped pair is a forward and a backward");
      pair_rank_ = si;
      pair_pass_ = 0;
      pair_posted = posted;
    }
    // A pass that runs as one step with the next (an overlapped pair; under DualPipeV a full backward, B and its W)
    // sends after the whole step, as DualPipe does (_send_forward / _send_backward after the compute).
    const bool own_w_follows = op.kind == PipeOp::Kind::B && oi + 1 < static_cast<int>(order.size()) &&
                               order[oi + 1].kind == PipeOp::Kind::W && order[oi + 1].microbatch == mb &&
                               order[oi + 1].chunk == op.chunk;
    const bool step_continues =
        (pair_rank_ == si && pair_pass_ == 0) || (own_w_follows && (pair_rank_ == si || exchanges));
    const bool defer_sends = step_continues || !pending_sends.empty();
    const auto units = units_of(k);
    std::int32_t first = -1, cur = -1, pass_end = -1;
    if (cal_.host_sync_each_pass && cal_.host_issue_s > 0) {
      // The host synchronizes with the device before issuing this pass: it waits for everything this rank has
      // enqueued so far, on every stream.
      const auto before = last_[si];
      const auto id =
          host_join(si, op.kind == PipeOp::Kind::F ? Phase::FORWARD : Phase::BACKWARD, -1, mb, g_.intern("host-sync"));
      for (int st = 0; st < kNumStreams; ++st)
        if (st != static_cast<int>(Stream::HOST) && before[st] >= 0) g_.depend(before[st], id);
    }
    if (op.kind == PipeOp::Kind::F) {
      const bool local_in = p_.has_prev_chunk(k) && p_.stage_of_chunk(k - 1) == s;
      bool listed = false;
      if (p_.has_prev_chunk(k)) {
        first = cur = take_received(Phase::FORWARD, mb, k, 0, "recv-activation", &listed);
        if (scatter_gather && !local_in)
          cur = collective(si, GroupAxis::TP, Stream::TP, CollectiveKind::ALL_GATHER, act_msg, Phase::FORWARD,
                           "pp-gather", -1, mb, cur);
        cur = reshard(p_.stage_of_chunk(k - 1), Phase::FORWARD, mb, cur);
      }
      const bool first_use = !param_gathered[static_cast<std::size_t>(op.chunk)];
      param_gathered[static_cast<std::size_t>(op.chunk)] = true;
      std::vector<std::int32_t> to_host(units.size(), -1);
      for (std::size_t ui = 0; ui < units.size(); ++ui) {
        const Unit& u = units[ui];
        std::int32_t g = gather(u, Phase::FORWARD, mb, ahead_of(ahead_fwd, op.chunk, ui)), f = -1;
        const std::int32_t pg = first_use && overlap_pg ? next_iteration_gather(u) : -1;
        cur = run_steps(si, u.passes->forward, Phase::FORWARD, u.layer, mb, cur, &f, "");
        if (pg >= 0 && f >= 0) g_.depend(pg, f);
        if (g >= 0 && f >= 0) g_.depend(g, f);
        // Double buffering: a layer's forward waits for the copy to the host of the layer two before it.
        if (ui >= 2 && to_host[ui - 2] >= 0 && f >= 0) g_.depend(to_host[ui - 2], f);
        if (first < 0) first = f;
        if (f >= 0) g_.memory(f, false, MemCategory::ACTIVATIONS, u.stored);
        if (g >= 0 && !pooled(u)) g_.memory(cur, true, MemCategory::GATHERED_PARAMS, -u.gathered());
        if (offloaded(u, k)) offload_done[{mb, k, u.layer}] = to_host[ui] = host_copy(true, u, mb, cur);
        unit_pass_ends.push_back(cur);
      }
      if (p_.precision == Precision::FP8_DELAYED) {
        // Transformer Engine's delayed scaling all-reduces the amaxes of the chunk's FP8 tensors (input and weight
        // of each of a layer's four linears, fp32) over its amax group (tensor x data parallel) when the forward's
        // fp8_autocast region exits.
        const double amax_bytes = static_cast<double>(units.size()) * 4 * 2 * 4;
        cur = collective(si, GroupAxis::TP, Stream::TP, CollectiveKind::ALL_REDUCE, amax_bytes, Phase::FORWARD,
                         "fp8-amax-reduce", -1, mb, cur);
        cur = collective(si, GroupAxis::DP, Stream::TP, CollectiveKind::ALL_REDUCE, amax_bytes, Phase::FORWARD,
                         "fp8-amax-reduce", -1, mb, cur);
      }
      if (p_.has_prev_chunk(k) && !listed)
        waiting_.push_back({first, si, mb, k, 0, rendezvous && !local_in ? posted : -1});
      pass_end = cur;
      if (p_.has_next_chunk(k) && (!exchanges || p_.stage_of_chunk(k + 1) == s)) {  // exchanges: at a later batch
        if (defer_sends) pending_sends.push_back({k + 1, 0, mb, cur});
        else cur = send_pieces(k + 1, 0, mb, cur);
      }
    } else if (op.kind == PipeOp::Kind::B) {
      bool listed = false;
      if (p_.has_next_chunk(k)) {
        first = cur = take_received(Phase::BACKWARD, mb, k, 1, "recv-gradient", &listed);
        cur = reshard(p_.stage_of_chunk(k + 1), Phase::BACKWARD, mb, cur);
      }
      auto& ends = b_ends[{mb, k}];
      // Offloaded activations come back one layer ahead: a layer's copy back starts with the next layer's backward
      // (the last unit's at once), after its copy to the host; its backward waits for it.
      std::vector<std::int32_t> reload(units.size(), -1);
      auto start_reload = [&](std::size_t ui) {
        const Unit& u = units[ui];
        if (!offloaded(u, k)) return;
        const auto done = offload_done.find({mb, k, u.layer});
        DTSIM_ASSERT(done != offload_done.end(), "layer " << u.layer << " reloaded before it was offloaded");
        reload[ui] = host_copy(false, u, mb, cur);
        g_.depend(done->second, reload[ui]);
        offload_done.erase(done);
      };
      if (!units.empty()) start_reload(units.size() - 1);
      for (std::size_t ui = units.size(); ui-- > 0;) {
        const Unit& u = units[ui];
        if (ui > 0) start_reload(ui - 1);
        std::int32_t g = gather(u, Phase::BACKWARD, mb, ahead_of(ahead_bwd, op.chunk, ui)), f = -1, unit_first = -1;
        const bool gathered = g >= 0;
        if (!u.passes->recompute.empty()) {
          cur = run_steps(si, u.passes->recompute, Phase::RECOMPUTE, u.layer, mb, cur, &f, "");
          if (first < 0) first = f;
          unit_first = f;
          g_.memory(f, false, MemCategory::RECOMPUTE, u.transient);
          if (g >= 0) g_.depend(g, f);
          g = -1;
          f = -1;
        }
        cur = run_steps(si, split ? u.passes->backward_input : u.passes->backward, Phase::BACKWARD, u.layer, mb, cur,
                        &f, "");
        if (g >= 0 && f >= 0) g_.depend(g, f);
        if (unit_first < 0) unit_first = f;
        if (reload[ui] >= 0 && unit_first >= 0) g_.depend(reload[ui], unit_first);
        if (first < 0) first = f;
        if (gathered && !pooled(u)) g_.memory(cur, true, MemCategory::GATHERED_PARAMS, -u.gathered());
        unit_pass_ends.push_back(cur);
        const bool releases_here = !split || u.passes->backward_weight.empty();
        if (releases_here) {
          g_.memory(cur, true, MemCategory::ACTIVATIONS, -u.stored);
          g_.memory(cur, true, MemCategory::RECOMPUTE, -u.transient);
          grads_ready(u, cur, mb, op.chunk, oi == final_b[op.chunk]);
        }
        ends.push_back(cur);
      }
      if (buckets_per_chunk && p_.dp_overlap && !split && oi == final_b[op.chunk]) close_bucket(cur);
      if (!split) cur = hp_accumulate(units, mb, cur);
      const bool local_in = p_.has_next_chunk(k) && p_.stage_of_chunk(k + 1) == s;
      if (p_.has_next_chunk(k) && !listed)
        waiting_.push_back({first, si, mb, k, 1, rendezvous && !local_in ? posted : -1});
      pass_end = cur;
      if (p_.has_prev_chunk(k) && (!exchanges || p_.stage_of_chunk(k - 1) == s)) {
        if (defer_sends) pending_sends.push_back({k - 1, 1, mb, cur});
        else cur = send_pieces(k - 1, 1, mb, cur);
      }
    } else {  // W: weight gradients of the (micro-batch, chunk), after its B pass on the same compute stream
      for (auto it = units.rbegin(); it != units.rend(); ++it) {
        const Unit& u = *it;
        if (u.passes->backward_weight.empty()) continue;
        std::int32_t f = -1;
        cur = run_steps(si, u.passes->backward_weight, Phase::BACKWARD, u.layer, mb, cur, &f, "");
        g_.memory(cur, true, MemCategory::ACTIVATIONS, -u.stored);
        g_.memory(cur, true, MemCategory::RECOMPUTE, -u.transient);
        grads_ready(u, cur, mb, op.chunk, oi == final_w[op.chunk]);
      }
      if (buckets_per_chunk && p_.dp_overlap && oi == final_w[op.chunk]) close_bucket(cur);
      cur = hp_accumulate(units, mb, cur);
    }
    if (cur >= 0) last_compute = cur;
    if (pass_end >= 0 || cur >= 0) posted = pass_end >= 0 ? pass_end : cur;
    if (pair_rank_ == si && pair_pass_ == 1 && !own_w_follows) link_pair(si);  // after the backward or its W
    if (!step_continues && !pending_sends.empty()) {
      // The step's sends, in the order of its passes; the next compute waits for them where sends block.
      for (const auto& ps : pending_sends)
        if (const auto wait = send_pieces(ps.k, ps.dir, ps.mb, ps.after); wait != ps.after) cur = wait;
      pending_sends.clear();
      if (cur >= 0) last_compute = cur;
    }
  }
  DTSIM_ASSERT(pair_rank_ < 0, "an overlapped pair was left open on rank " << si);
  if (exchanges) commit(order.size());  // the last pass's sends
  DTSIM_ASSERT(received.empty(), "a received pipeline transfer was never used on rank " << si);
  // Per-GPU speed variability (strategies/straggler_model.hpp): the job's slowest GPU finishes its passes later by
  // its share of this rank's compute; its last gradients, and so this rank's last bucket and step, wait for it.
  if (variability_pace_ > 0 && last_compute >= 0) {
    Task wait;
    wait.kind = TaskKind::COMPUTE;
    wait.stream = Stream::COMPUTE;
    wait.phase = Phase::BACKWARD;
    wait.name = g_.intern(kVariabilityWaitName);
    wait.duration_s = variability_pace_ * compute_busy_s_[static_cast<std::size_t>(si)];
    last_compute = add_on_stream(si, wait);
  }
  if (!p_.dp_overlap) {
    int prev_chunk = -1;
    for (const auto& [task, chunk, dense_bytes, expert_bytes] : ready_grads) {
      (void)task;
      if (buckets_per_chunk && chunk != prev_chunk) close_bucket(last_compute);
      prev_chunk = chunk;
      bucket_bytes += dense_bytes;
      expert_bucket_bytes += expert_bytes;
      if (bucket_bytes + expert_bucket_bytes >= bucket_limit[static_cast<std::size_t>(chunk)])
        close_bucket(last_compute);
    }
  }
  close_bucket(last_compute);

  // Tied embeddings split over the first and last stages: their gradients are summed before the step (under
  // BF16_Optimizer their fp32 copies: DeepSpeed's pipe/engine.py _exec_reduce_tied_grads all-reduces weight._hp_grad).
  if (m_.tied_embeddings && p_.head_stage() != 0 && (s == 0 || s == p_.head_stage())) {
    double bytes = static_cast<double>(m_.vocab) * m_.hidden / tp_s * (bf16_opt ? 4.0 : e);
    dp_done.push_back(collective(si, GroupAxis::EMB, Stream::DP, CollectiveKind::ALL_REDUCE, bytes, Phase::GRAD_SYNC,
                                 "embedding-grad", -1, -1, last_compute));
  }

  // DualPipe: stage s and its mirror pp-1-s hold copies of each other's layers; their gradients are summed before
  // the step (example_dualpipe.py adds each rank's chunk gradients to its mirror's: p0.grad += p1all[pp-1-rank]),
  // here as an all-reduce of the rank's shard of its gradients (what its optimizer steps) with its mirror's, after
  // the data-parallel reductions on the same stream.
  if (p_.bidirectional()) {
    const double bytes = r.static_mem.step_params * (p_.fp32_grads ? 4.0 : e);
    dp_done.push_back(collective(si, GroupAxis::EMB, Stream::DP, CollectiveKind::ALL_REDUCE, bytes, Phase::GRAD_SYNC,
                                 "copy-grad-sync", -1, -1, last_compute));
  }

  // Gradient clipping by global norm (the stack's grad_clip): a pass over this rank's gradient shard, after its
  // gradient collectives, then the norm's all-reduce over the tensor- and data-parallel groups; the step waits.
  if (cal_.grad_clip) {
    Task norm;
    norm.kind = TaskKind::COMPUTE;
    norm.stream = Stream::COMPUTE;
    norm.phase = Phase::OPTIMIZER;
    norm.name = g_.intern("grad-norm");
    const double grad_bytes = r.static_mem.step_params * (p_.fp32_grads ? 4.0 : e);
    norm.duration_s = grad_bytes / (c_.gpu.hbm_Bps * cal_.memory_bandwidth_efficiency) + cal_.kernel_launch_s;
    auto norm_id = add_on_stream(si, norm);
    if (opt_.record_kernels) g_.set_kernels(norm_id, {{"grad-norm", false, 0, 0, 0, 1, 0, grad_bytes}});
    if (last_compute >= 0) g_.depend(last_compute, norm_id);
    for (auto d : dp_done)
      if (d >= 0) g_.depend(d, norm_id);
    std::int32_t reduced = norm_id;
    if (tp_s > 1)
      reduced = collective(si, GroupAxis::TP, Stream::DP, CollectiveKind::ALL_REDUCE, 4, Phase::OPTIMIZER, "grad-norm",
                           -1, -1, reduced);
    if (p_.dp > 1)
      reduced = collective(si, GroupAxis::DP, Stream::DP, CollectiveKind::ALL_REDUCE, 4, Phase::OPTIMIZER, "grad-norm",
                           -1, -1, reduced);
    last_compute = norm_id;
    dp_done.push_back(reduced);
  }

  // Optimizer step (memory bound) on this rank's shard, after every gradient collective of this rank.
  Task opt;
  opt.kind = TaskKind::COMPUTE;
  opt.stream = Stream::COMPUTE;
  opt.phase = Phase::OPTIMIZER;
  opt.name = g_.intern("adam-step");
  const double shard = r.static_mem.step_params;
  opt.duration_s = memory::optimizer_step_s(p_, c_.host, shard, cal_.optimizer_bytes_per_param,
                                            c_.gpu.hbm_Bps * cal_.memory_bandwidth_efficiency) +
                   cal_.kernel_launch_s;
  auto opt_id = add_on_stream(si, opt);
  if (opt_.record_kernels)
    g_.set_kernels(opt_id, {{"adam-step", false, 0, 0, 0, 1, 0, shard * cal_.optimizer_bytes_per_param}});
  if (last_compute >= 0) g_.depend(last_compute, opt_id);
  for (auto d : dp_done)
    if (d >= 0) g_.depend(d, opt_id);
  // The stack's per-iteration host work outside the passes (data loader, logging, timers).
  if (cal_.per_iteration_s > 0) {
    Task it;
    it.kind = TaskKind::COMPUTE;
    it.stream = Stream::COMPUTE;
    it.phase = Phase::OPTIMIZER;
    it.name = g_.intern("iteration-overhead");
    it.duration_s = cal_.per_iteration_s;
    g_.depend(opt_id, add_on_stream(si, it));
  }
  if ((zero == 1 || zero == 2) && !overlap_pg) {
    auto done = collective(si, GroupAxis::DP, Stream::DP, CollectiveKind::ALL_GATHER,
                           (r.static_mem.params - r.static_mem.expert_params) * e, Phase::OPTIMIZER, "param-gather", -1,
                           -1, opt_id);
    if (r.static_mem.expert_params > 0)
      collective(si, GroupAxis::EDP, Stream::DP, CollectiveKind::ALL_GATHER, r.static_mem.expert_params * e,
                 Phase::OPTIMIZER, "expert-param-gather", -1, -1, done);
  }
}

void Lowerer::setup_ranks() {
  std::vector<double> offloaded_host_bytes(static_cast<std::size_t>(p_.pp), -1.0);  // per stage, once
  FoldDecision fd = decide_folding();
  out_.fold_tp = fd.tp;
  out_.fold_dp = fd.dp;
  out_.fold_edp = fd.edp;
  out_.fold_reason = fd.reason;
  const int world = p_.world_size();
  out_.sim_index_of.assign(world, -1);
  std::vector<int> rep(world);
  for (int r = 0; r < world; ++r) rep[r] = fold_rep(r, fd.tp, fd.dp, fd.edp);
  for (int r = 0; r < world; ++r) {
    if (rep[r] != r) continue;
    const RankCoord c = p_.coord_of(r);
    SimRank sr;
    sr.global_rank = r;
    sr.coord = c;
    sr.class_size = (fd.tp ? p_.stage_tp(c.pp) : 1) * (fd.dp    ? p_.dp * p_.replicas(c.pp)
                                                       : fd.edp ? p_.tp * p_.cp * p_.dp / edp_period()
                                                                : 1);
    if (!fd.share.empty()) {
      sr.nic_multiplicity = fd.share[r][0];
      sr.fabric_multiplicity = fd.share[r][1];
    }
    sr.static_mem = memory::static_memory(m_, p_.stage_view(c.pp), c.pp);
    sr.static_mem.gradient_bytes += memory::bf16_optimizer_grad_copy_bytes(m_, p_, c.pp, cal_);
    double& act_host = offloaded_host_bytes[static_cast<std::size_t>(c.pp)];
    if (act_host < 0)
      act_host = p_.offload_activation_layers > 0
                     ? memory::offloaded_activations(m_, p_.stage_view(c.pp), c.pp).host_bytes
                     : 0.0;
    const double host_bytes = sr.static_mem.host_bytes + act_host;
    if (host_bytes > c_.host.memory_bytes)  // refused before anything runs
      throw ConfigError("plan: the offloaded optimizer states and activations of stage " + std::to_string(c.pp) +
                        " need " + format_number("%.1f", host_bytes / units::kGiB) +
                        " GiB of host memory per GPU; cluster '" + c_.name + "' gives each GPU " +
                        format_number("%.1f", c_.host.memory_bytes / units::kGiB) + " GiB");
    sr.reserved_bytes = cal_.reserved_memory_bytes;
    out_.sim_index_of[r] = static_cast<int>(out_.ranks.size());
    out_.ranks.push_back(sr);
  }
  for (int r = 0; r < world; ++r) out_.sim_index_of[r] = out_.sim_index_of[rep[r]];
  {
    std::array<std::int32_t, kNumStreams> none;
    none.fill(-1);
    last_.assign(out_.ranks.size(), none);
  }
  // With host_sync_each_pass the host stream holds JOINs that wait for the device: its tasks stay in the graph.
  host_runs_ahead_ = !host_issue_as_tasks(cal_, opt_, p_, m_.moe.enabled());
  moe_waits_ = moe_dispatch_waits(cal_, p_, m_.moe.enabled());
  host_clock_.assign(out_.ranks.size(), 0.0);
  compute_busy_s_.assign(out_.ranks.size(), 0.0);
  out_.nccl_floor_s.assign(out_.ranks.size(), {});
  seq_.assign(out_.ranks.size(), std::array<int, kNumGroupAxes>{});
}

Lowered Lowerer::finish() {
  double hw = 0;
  for (const auto& t : g_.tasks())
    if (t.kind == TaskKind::COMPUTE) hw += t.flops * out_.ranks[t.rank].class_size;
  out_.hardware_flops_per_iteration = hw;
  g_.interference_on = opt_.interference;
  g_.exchange_receive_bound = opt_.receive_bound;
  g_.collective_slowdown = opt_.interference ? cal_.interference_collective_slowdown : 0;
  g_.finalize();
  out_.collectives_recorded = opt_.record_collectives;
  out_.graph = std::move(g_);
  return std::move(out_);
}

Lowered Lowerer::run() {
  if (m_.num_layers > kMaxTaskLayer - 2)
    throw ConfigError("model '" + m_.name + "': " + std::to_string(m_.num_layers) + " layers; the simulator handles " +
                      "at most " + std::to_string(kMaxTaskLayer - 2));
  orders_ = sched::plan_orders(p_);
  sched::validate_orders(orders_, p_);
  setup_ranks();
  const int nsim = static_cast<int>(out_.ranks.size());
  // Once the first tensor-parallel group is lowered (its collectives hold every member's tasks), the graph's final
  // size is about nsim / group times the tasks so far: reserve it, so that a large unfolded graph is not copied
  // while it grows (and its peak memory is not twice its size).
  const int first_group = std::min(nsim, out_.fold_tp ? 1 : p_.stage_tp(0));
  for (int si = 0; si < nsim; ++si) {
    lower_rank(si);
    if (si + 1 == first_group && nsim > 4 * first_group) {
      // Only the first group's own tasks scale with the ranks: a collective over a wider group (EP, DP) lowered with
      // its first member already holds the other members' tasks, and counting those nsim times over reserved
      // terabytes for DeepSeek-V3 at EP 64 (issue Guard). Edges and host spans scale as the own share of the tasks.
      std::size_t own = 0;
      for (const auto& t : g_.tasks()) own += t.rank >= 0 && t.rank < first_group ? 1 : 0;
      const double share = g_.size() > 0 ? static_cast<double>(own) / static_cast<double>(g_.size()) : 0.0;
      const double scale = 1.1 * nsim / first_group;
      g_.reserve(static_cast<std::size_t>(scale * static_cast<double>(own)),
                 static_cast<std::size_t>(scale * share * static_cast<double>(g_.edge_count())),
                 static_cast<std::size_t>(scale * share * static_cast<double>(g_.host_spans().size())));
    }
  }
  for (const auto& w : waiting_) {
    auto it = sent_.find({w.si, w.mb, w.chunk, w.dir});
    DTSIM_ASSERT(it != sent_.end(),
                 "no pipeline transfer for rank " << w.si << " micro-batch " << w.mb << " chunk " << w.chunk);
    for (auto flow : it->second) {
      g_.depend(flow, w.task);
      // Rendezvous: a blocking transfer moves once the receiver has posted its receive.
      if (w.ready >= 0) g_.depend(w.ready, flow);
    }
  }
  out_.model_flops_per_iteration =
      3.0 *
      cost::model_forward_flops_per_sample(m_, m_.moe.enabled() ? p_.routing.kept_fraction(m_.moe.experts) : 1.0) *
      p_.global_batch_size;
  return finish();
}

Lowered Lowerer::run_collective(CollectiveKind kind, double bytes) {
  setup_ranks();
  for (int si = 0; si < static_cast<int>(out_.ranks.size()); ++si) {
    Task start;
    start.kind = TaskKind::JOIN;
    start.rank = si;
    start.name = g_.intern("start");
    auto s = add_free(start);
    collective(si, GroupAxis::TP, Stream::TP, kind, bytes, Phase::OTHER, "benchmark", -1, -1, s);
  }
  return finish();
}

}  // namespace

bool hierarchical_all_reduce_is_faster(const ClusterSpec& c, const Calibration& cal, int per_node, int nodes,
                                       double bytes, const estimate::NcclContext* nc) {
  const double a_intra = c.intra.latency_s, b_intra = c.intra.bandwidth_Bps * cal.intra_bandwidth_efficiency;
  const bool fabric = c.inter.topology != "switch";
  const double a_inter = c.inter.latency_s + (fabric ? c.inter.spine_latency_s : 0.0);
  const double b_inter = c.inter.nic_bandwidth_Bps * cal.inter_bandwidth_efficiency;
  const double step = cal.collective_step_overhead_s;
  const estimate::NcclContext ctx = nc ? *nc : estimate::nccl_context(c, cal);
  const double hier =
      estimate::hierarchical_all_reduce_time_s(per_node, nodes, bytes, a_intra, b_intra, a_inter, b_inter, step, ctx);
  const double ring =
      estimate::spread_ring_time_s(true, per_node, nodes, bytes, a_intra, b_intra, a_inter, b_inter, step, ctx);
  return hier < ring;
}

PassCosts default_pass_costs(const TransformerSpec& model, const ParallelPlan& plan) {
  const cost::Shape sh = cost::shape_of(plan, plan.micro_batch_size);
  PassCosts pc;
  pc.layer = cost::layer_passes(model, sh);
  pc.embedding = cost::embedding_passes(model, sh);
  pc.head = cost::head_passes(model, sh);
  pc.layer_act = cost::layer_activation_bytes(model, sh);
  pc.embedding_act = cost::embedding_activation_bytes(model, sh);
  pc.head_act = cost::head_activation_bytes(model, sh);
  cost::Shape msh = sh;
  int variants = 1;
  if (model.moe.enabled()) {
    const bool skew = !plan.routing.balanced() || plan.routing.capacity_factor > 0;
    if (skew) msh.ep_loads = cost::ep_rank_loads(plan.routing, model.moe.experts, plan.ep);
    // Balanced routing: every EP rank alike; skewed (or capped) routing: one variant per EP rank.
    variants = skew && !plan.routing.balanced() ? plan.ep : 1;
  }
  // The shapes a unit is costed at: one per EP rank variant when it has experts, else the plain one.
  auto shapes = [&](bool moe) {
    std::vector<cost::Shape> out;
    for (int k = 0; k < (moe ? variants : 1); ++k) {
      out.push_back(moe ? msh : sh);
      if (moe) out.back().ep_rank = variants > 1 ? k : -1;
    }
    return out;
  };
  if (model.moe.enabled())
    for (const auto& ksh : shapes(true)) {
      pc.moe_layer.push_back(cost::layer_passes(model, ksh, true));
      pc.moe_layer_act.push_back(cost::layer_activation_bytes(model, ksh, true));
    }
  for (const LayerKind kind : cost::other_kinds(model)) {
    PassCosts::KindCosts kc{kind, {}, {}};
    for (const auto& ksh : shapes(kind.ffn == FfnKind::MOE)) {
      kc.passes.push_back(cost::layer_passes(model, ksh, kind));
      kc.act.push_back(cost::layer_activation_bytes(model, ksh, kind));
    }
    pc.kinds.push_back(std::move(kc));
  }
  if (model.mtp_layers > 0)
    for (const auto& ksh : shapes(model.mtp_kind().ffn == FfnKind::MOE)) {
      pc.mtp.push_back(cost::mtp_passes(model, ksh));
      pc.mtp_act.push_back(cost::mtp_activation_bytes(model, ksh));
    }
  if (plan.recompute == Recompute::FULL && plan.recompute_num_layers > 0) {
    // Megatron's block method: the layers after the first N of a chunk run as without recompute.
    ParallelPlan keep = plan;
    keep.recompute = Recompute::NONE;
    keep.recompute_num_layers = 0;
    pc.kept = std::make_shared<const PassCosts>(default_pass_costs(model, keep));
    pc.recompute_layers = plan.recompute_num_layers;
  }
  return pc;
}

const PassCosts::KindCosts& PassCosts::kind_costs(LayerKind k) const {
  for (const auto& kc : kinds)
    if (kc.kind == k) return kc;
  DTSIM_ASSERT(false, "no costs for layer kind " << to_string(k));
  return kinds.front();
}

Lowered lower(const TransformerSpec& model, const ClusterSpec& cluster, const ParallelPlan& plan,
              const Calibration& cal, const SimOptions& opt, const PassCosts& costs) {
  return Lowerer(model, cluster, plan, cal, opt, costs).run();
}

Lowered lower(const TransformerSpec& model, const ClusterSpec& cluster, const ParallelPlan& plan,
              const Calibration& cal, const SimOptions& opt) {
  const PassCosts base = default_pass_costs(model, plan);
  Lowerer lw(model, cluster, plan, cal, opt, base);
  if (needs_stage_costs(plan)) {
    std::vector<PassCosts> per_stage;
    per_stage.reserve(static_cast<std::size_t>(plan.pp));
    for (int s = 0; s < plan.pp; ++s) per_stage.push_back(stage_pass_costs(model, plan, s));
    lw.set_stage_costs(std::move(per_stage));
  }
  return lw.run();
}

bool needs_stage_costs(const ParallelPlan& plan) {
  return plan.has_stage_replicas() || plan.has_stage_strategies() || plan.has_stage_cuts();
}

PassCosts stage_pass_costs(const TransformerSpec& model, const ParallelPlan& plan, int stage) {
  // Each replica of the stage computes micro_batch_size / replicas samples of every micro-batch, with the stage's
  // own intra-layer strategy (heterogeneous plans).
  ParallelPlan share = plan.stage_view(stage);
  share.micro_batch_size = plan.micro_batch_size / plan.replicas(stage);
  PassCosts pc = default_pass_costs(model, share);
  const int a_in = plan.cut_atoms(stage - 1), a_out = plan.cut_atoms(stage);
  if (a_in == 0 && a_out == 0) return pc;
  const cost::Shape sh = cost::shape_of(share, share.micro_batch_size);
  if (a_in > 0) {
    pc.front = cost::slice_atoms(pc.layer, a_in, kLayerAtoms);
    pc.front_act = cost::layer_activation_bytes_atoms(model, sh, a_in, kLayerAtoms);
    pc.front_params = cost::layer_params_per_rank_atoms(model, share.tp, a_in, kLayerAtoms);
  }
  if (a_out > 0) {
    pc.back = cost::slice_atoms(pc.layer, 0, a_out);
    pc.back_act = cost::layer_activation_bytes_atoms(model, sh, 0, a_out);
    pc.back_params = cost::layer_params_per_rank_atoms(model, share.tp, 0, a_out);
  }
  return pc;
}

Lowered lower_collective(const TransformerSpec& model, const ClusterSpec& cluster, const ParallelPlan& plan,
                         const Calibration& cal, const SimOptions& opt, cost::CollectiveKind kind, double bytes) {
  const PassCosts none{};
  return Lowerer(model, cluster, plan, cal, opt, none).run_collective(kind, bytes);
}

Lowered lower_ranks(const TransformerSpec& model, const ClusterSpec& cluster, const ParallelPlan& plan,
                    const Calibration& cal, const SimOptions& opt) {
  const PassCosts none{};
  return Lowerer(model, cluster, plan, cal, opt, none).run_ranks();
}

}  // namespace dtsim::sim
