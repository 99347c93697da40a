// Lowering of (model, cluster, plan, calibration) to a per-rank task graph.
//
// Ranks and streams. Global rank r runs on GPU r (rank order from the plan). Every simulated rank has four
// FIFO streams: compute, TP communication, PP communication and DP communication.
//
// Collectives are rings (NCCL's default for large messages). Two forms, selected by SimOptions:
//  - STEPS: the 2(n-1) (all-reduce) or n-1 (reduce-scatter, all-gather) ring steps, each a flow of S/n bytes
//    from a member to its ring successor that waits for the member's previous step and for the data of the
//    predecessor's previous step;
//  - FLOW (default): per member one start-up delay of (steps-1) hop latencies plus the per-step software
//    cost, then one flow of steps*S/n bytes to the successor. Without contention both forms take exactly
//    steps*(alpha + S/(n*B)) = 2(n-1)alpha + 2(n-1)/n*S/B for an all-reduce; the FLOW form has ~2(n-1) times
//    fewer events and shares bandwidth with concurrent traffic as one aggregate flow instead of a sequence.
//
// Symmetry folding. Ranks that differ only in their TP (or DP) coordinate run identical work. When every link
// a rank uses is private to that GPU (one NIC per GPU, one NVSwitch port per GPU) and every rank's ring and
// pipeline neighbours are reached over the same kind of path as its representative's, the folded-away ranks
// load their own links exactly as the representative loads its own. Then only the representatives (TP and/or
// DP coordinate 0) are simulated, and a collective over a folded axis becomes flows from the representative
// to its "mirror", a sink that shares the representative's own links: its up-link carries what it sends to
// its ring successor, its down-link what its predecessor sends it. This is exact under the conditions above
// (tests compare folded and unfolded runs); `fold = NONE` simulates every rank.
// Folding with multiplicity: a link that folded-away ranks share with their representative (a leaf's or pod's
// uplink, a NIC of several GPUs) is allowed when each representative's whole fold class sits under its leaf and pod
// and spreads evenly over its NICs. Each simulated flow on such a link then stands for k identical real flows, k
// the number of class members using it (SimRank::nic_multiplicity, fabric_multiplicity), and the link runs at
// capacity / k, which max-min sharing makes exact when every flow on it stands for the same k (checked; tests in
// tests/oracle/test_fold_multiplicity.cpp). Reports count every copy's bytes against the real capacity.
// Folding under skewed routing: the EP group's ranks carry different expert loads and stay simulated, but its
// expert-data-parallel copies (the same EP indices on other data-parallel ranks: the same loads) fold onto it
// (Lowered::fold_edp). The data-parallel rings then hold several simulated members and their copies; they are lowered
// as one rendezvous instance over the simulated members, a copy's steps taken as its representative's, which is exact
// when every ring the group uses commutes with the fold (a copy's successor is a copy of its representative's
// successor: checked) and a flow to a copy lands on its representative's links (tests/oracle/test_skew_folding.cpp).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sim/model/task_graph.hpp"
#include "strategies/estimator.hpp"
#include "strategies/memory_model.hpp"
#include "strategies/transformer_costs.hpp"
#include "traces/calibration.hpp"
#include "traces/cluster.hpp"
#include "traces/model.hpp"
#include "traces/plan.hpp"

namespace dtsim::sim {

enum class CollectiveMode { FLOW, STEPS };
enum class FoldMode { AUTO, NONE };
/// ring: one ring over the whole group; hierarchical: all-reduce as intra-node reduce-scatter, inter-node
/// all-reduce per local index, intra-node all-gather; tree: NCCL-style double binary tree all-reduce (half the
/// data on each tree, reduce up then broadcast down, pipelined in chunks of 512 KiB); auto: the calibration's
/// size table (collective_algorithms) when it has a rule for the all-reduce's size; nvls: NVSwitch in-network
/// reduction (NVLink SHARP) for groups inside one NVSwitch node: every GPU pushes its S bytes up its port and
/// pulls the reduced S bytes down, alpha + S/B; auto, without a size rule: hierarchical where the
/// group has several nodes and several members on each node, else ring. Trees break the symmetry folding relies
/// on: a plan that may use them is not folded.
enum class CollectiveAlgorithm { AUTO, RING, HIERARCHICAL, TREE, NVLS };
std::string to_string(CollectiveAlgorithm a);
/// flow: SimGrid flow-level max-min sharing (contention); analytic: contention-free alpha-beta, no SimGrid.
enum class NetworkMode { FLOW, ANALYTIC };
std::string to_string(NetworkMode m);
std::string to_string(CollectiveMode m);
std::string to_string(FoldMode m);
/// Which engine runs a flow-level simulation (NetworkMode::FLOW): SimGrid, dtsim's own max-min engine (same model;
/// sim/engine/maxmin_runtime.hpp), or AUTO: SimGrid up to kSimgridUpToRanks simulated ranks, max-min above.
enum class FlowEngine { AUTO, SIMGRID, MAXMIN };
std::string to_string(FlowEngine e);
inline constexpr int kSimgridUpToRanks = 64;
/// The task in which a rank waits for the job's slowest GPU (per-GPU speed variability,
/// strategies/straggler_model.hpp): a COMPUTE-stream task the report counts apart from compute.
inline constexpr const char* kVariabilityWaitName = "gpu-variability-wait";

struct SimOptions {
  CollectiveMode collective_mode = CollectiveMode::FLOW;
  FoldMode fold = FoldMode::AUTO;
  NetworkMode network = NetworkMode::FLOW;
  FlowEngine engine = FlowEngine::AUTO;
  CollectiveAlgorithm collective_algorithm = CollectiveAlgorithm::AUTO;
  int first_gpu = 0;  ///< rank r runs on GPU first_gpu + r (several jobs sharing one cluster)
  int channels = 1;   ///< ring collectives split each transfer over this many parallel flows (NCCL channels)
  /// A ring over several GPUs on each of several nodes crosses every node through each member's NIC, as NCCL's
  /// channels do (Lowerer::spread_ring); false: through one NIC per node (dtsim before 2026-11-29).
  bool spread_rings = true;
  /// Overlapped kernels and collectives slow each other down (Calibration's interference_* fractions; flow engine).
  bool interference = true;
  /// Folding with multiplicity allowed (links folded-away ranks share, at capacity / k). Off where other traffic
  /// the lowering does not see shares those links (several jobs on one cluster).
  bool fold_shared_links = true;
  /// The host's kernel issue as DELAY tasks on each rank's HOST stream even when the host never waits for the device
  /// (by default it then becomes release times of the gated tasks, TaskGraph::release_at_least: the same schedule
  /// with fewer tasks). The tests compare the two forms.
  bool host_issue_tasks = false;
  bool record_kernels =
      false;  ///< keep every COMPUTE task's kernels in the graph (TaskGraph::kernels), for the executor
  /// Keep one CollectiveRecord per collective instance (Lowered::collectives), for the Chakra export
  /// (sim/report/chakra_export.hpp). Off by default: large runs pay nothing for it.
  bool record_collectives = false;
  /// On the analytic network, an unfolded all-to-all as one task per member whose pieces the engine times in closed
  /// form (Exchange, task_graph.hpp); false: a FLOW task per piece. The same times; the tests compare the two forms.
  bool compound_all_to_all = true;
  /// The compound all-to-all's receive-side bound (TaskGraph::exchange_receive_bound); `--no-receive-bound`.
  bool receive_bound = true;
};

/// The automatic all-reduce choice across `nodes` nodes of `per_node` GPUs with rings spread over every NIC
/// (SimOptions::spread_rings): the hierarchical form where its closed form (two node-local rings and one ring of the
/// 1/g shard across nodes, one after the other) is faster than the spread ring's at `bytes`, as NCCL picks the
/// algorithm its tuning model times fastest (src/enqueue.cc over src/graph/tuning.cc): the ring at large sizes,
/// the two levels where the ring's (n - 1) steps of latency dominate. Both the lowering and the footprint decide
/// by this. `nc`: NCCL's protocol model of the calibration on the cluster (estimate::nccl_context), when the caller
/// has it already; null = work it out.
bool hierarchical_all_reduce_is_faster(const ClusterSpec& c, const Calibration& cal, int per_node, int nodes,
                                       double bytes, const estimate::NcclContext* nc = nullptr);

/// Whether the host's kernel issue stays DELAY tasks on each rank's HOST stream: when the host syncs with the device
/// before every pass (calibration host_sync_each_pass with host_issue_s > 0) or inside MoE layers
/// (moe_dispatch_waits; `moe_model`: the model has MoE layers), or SimOptions::host_issue_tasks asks; otherwise it
/// becomes release times and host spans (TaskGraph::release_at_least). The lowering and the footprint estimate both
/// decide by this.
inline bool host_issue_as_tasks(const Calibration& cal, const SimOptions& opt, const ParallelPlan& plan,
                                bool moe_model) {
  return (cal.host_sync_each_pass && cal.host_issue_s > 0) || moe_dispatch_waits(cal, plan, moe_model) ||
         opt.host_issue_tasks;
}

struct SimRank {
  int global_rank = 0;  ///< rank in the plan; its GPU is SimOptions::first_gpu + global_rank
  RankCoord coord;
  int class_size = 1;  ///< how many global ranks this simulated rank stands for
  /// Folding with multiplicity: how many identical real flows each of this rank's flows stands for on its NIC's
  /// links and on its leaf and pod uplinks (shared by folded-away ranks; those links run at 1/k of their capacity).
  int nic_multiplicity = 1, fabric_multiplicity = 1;
  memory::StaticMemory static_mem;  ///< weights, gradients, optimizer states
  double reserved_bytes = 0;        ///< context and workspaces (calibration)
};

/// One collective instance of an unfolded group as the lowering built it (SimOptions::record_collectives): its tasks
/// are the contiguous ids [first_task, end_task) of the graph, first_task being its rendezvous JOIN (shared by the
/// members, it waits for every member's predecessor and stream); member i's part starts after it and ends with
/// done[i]. A hierarchical all-reduce is three instances (reduce-scatter, all-reduce across nodes, all-gather).
/// Folded collectives (against a mirror) are not instances and have no record.
struct CollectiveRecord {
  cost::CollectiveKind kind = cost::CollectiveKind::ALL_REDUCE;
  double bytes = 0;  ///< the collective's message size (per member, as the cost model gives it)
  std::int32_t first_task = -1, end_task = -1;
  std::vector<int> members;        ///< simulated ranks, in ring / member order
  std::vector<std::int32_t> done;  ///< per member: the task that ends its part
};

struct Lowered {
  TaskGraph graph;
  std::vector<SimRank> ranks;     ///< simulated ranks, ordered by global rank
  std::vector<int> sim_index_of;  ///< for every global rank: index of the simulated rank standing for it
  bool fold_tp = false, fold_dp = false;
  /// Skewed routing: the expert-data-parallel copies of each EP group are folded (the EP groups' ranks simulated);
  /// data-parallel rings then run over several simulated members, each copy's steps taken as its representative's.
  bool fold_edp = false;
  std::string fold_reason;                    ///< why folding is (not) applied, for the summary
  double model_flops_per_iteration = 0;       ///< 3 x forward FLOPs of the global batch (no recompute)
  double hardware_flops_per_iteration = 0;    ///< FLOPs actually executed by all GPUs (recompute included)
  std::vector<CollectiveRecord> collectives;  ///< with SimOptions::record_collectives, in creation order
  /// Per simulated rank: the latency NCCL's protocol model (strategies/nccl_model.hpp) added to its ring
  /// collectives beyond dtsim's own ring, by task name id (summary.json: nccl_floor_by_kind_s).
  std::vector<std::map<std::int32_t, double>> nccl_floor_s;
  bool collectives_recorded = false;  ///< SimOptions::record_collectives was set
};

/// The per-layer costs the lowering uses. By default they come from strategies/transformer_costs; tests and
/// trace-driven runs may supply their own.
struct PassCosts {
  cost::LayerPasses layer, embedding, head;
  cost::ActivationBytes layer_act, embedding_act, head_act;
  /// MoE layers (mixture-of-experts models): one entry for balanced routing, else one per EP rank (its experts'
  /// load sets its expert GEMMs).
  std::vector<cost::LayerPasses> moe_layer;
  std::vector<cost::ActivationBytes> moe_layer_act;
  /// Layer kinds other than the base ones (cost::other_kinds: Mamba-2, Gated DeltaNet, sliding-window, attention-only,
  /// MLP-only and MoE-only blocks), each with one entry per EP rank under skewed routing when it has experts.
  struct KindCosts {
    LayerKind kind;
    std::vector<cost::LayerPasses> passes;
    std::vector<cost::ActivationBytes> act;
  };
  std::vector<KindCosts> kinds;
  /// Multi-token-prediction depths (TransformerSpec::mtp_layers), after the head on the last stage: one entry, or one
  /// per EP rank under skewed routing when the MTP layer has experts.
  std::vector<cost::LayerPasses> mtp;
  std::vector<cost::ActivationBytes> mtp_act;
  /// The entry of kind `k` (asserts it exists).
  const KindCosts& kind_costs(LayerKind k) const;
  /// Stage boundaries inside layers (ParallelPlan::stage_cut_atoms): atoms [a, kLayerAtoms) of the stage's first
  /// layer (`front`, when the boundary before the stage cuts at a > 0) and atoms [0, b) of the next stage's first
  /// layer (`back`, b > 0), with their activations and parameters on one rank.
  cost::LayerPasses front, back;
  cost::ActivationBytes front_act, back_act;
  double front_params = 0, back_params = 0;
  /// Partial full recompute (ParallelPlan::recompute_num_layers N > 0): the costs of the decoder layers after the
  /// first N of a model chunk, which keep their activations (the plan without recompute).
  std::shared_ptr<const PassCosts> kept;
  int recompute_layers = 0;
  /// The costs of the decoder layer `offset` layers after its chunk's first: these, or `kept`'s.
  const PassCosts& for_layer(int offset) const { return kept && offset >= recompute_layers ? *kept : *this; }
};
PassCosts default_pass_costs(const TransformerSpec& model, const ParallelPlan& plan);
/// The costs of stage `stage` of `plan`: its view of the plan (heterogeneous plans), its replicas' share of the
/// micro-batch, and the partial layers at boundaries inside layers.
PassCosts stage_pass_costs(const TransformerSpec& model, const ParallelPlan& plan, int stage);
/// True when the stages need costs of their own (stage replicas, stage strategies or boundaries inside layers).
bool needs_stage_costs(const ParallelPlan& plan);

/// Which network path connects GPUs a and b.
Path path_between(const ClusterSpec& c, int gpu_a, int gpu_b);

/// Lowers the plan. The inputs must already be validated.
Lowered lower(const TransformerSpec& model, const ClusterSpec& cluster, const ParallelPlan& plan,
              const Calibration& cal, const SimOptions& opt);
Lowered lower(const TransformerSpec& model, const ClusterSpec& cluster, const ParallelPlan& plan,
              const Calibration& cal, const SimOptions& opt, const PassCosts& costs);

/// One collective alone over `plan`'s TP groups (every TP group issues it at t = 0), for collective
/// benchmarks and oracle tests. `model` only provides the dtype; no compute is generated.
Lowered lower_collective(const TransformerSpec& model, const ClusterSpec& cluster, const ParallelPlan& plan,
                         const Calibration& cal, const SimOptions& opt, cost::CollectiveKind kind, double bytes);
/// The simulated ranks (Lowered::ranks, sim_index_of) and the folding decision of `plan`, without its tasks.
Lowered lower_ranks(const TransformerSpec& model, const ClusterSpec& cluster, const ParallelPlan& plan,
                    const Calibration& cal, const SimOptions& opt);

}  // namespace dtsim::sim
