// The model as a chain of layers with per-sample costs, as the pipeline planners of PipeDream, DAPPLE and RaNNC
// see it (they profile each layer once and scale by batch and replica count), plus the two link classes of a
// two-level cluster (inside a node, between nodes). Shared by the partitioning planners.
#pragma once
#include <limits>
#include <map>
#include <tuple>
#include <vector>

#include "strategies/planner.hpp"

namespace dtsim::planning {

/// "No feasible value" in the planners' dynamic programmes (a time or cost that cannot be reached).
inline constexpr double kInf = std::numeric_limits<double>::infinity();

struct LinkCost {
  double alpha_s = 0;
  double bw_Bps = 1;
  double time_s(double bytes) const { return alpha_s + bytes / bw_Bps; }
};

struct LayerChain {
  int num_layers = 0;
  int tp = 1;  ///< every "device" of the planners is a tensor-parallel group of tp GPUs (1 = plain GPUs)
  /// Per transformer layer (embedding folded into the first, head into the last), per sample, on one device.
  std::vector<double> compute_s;         ///< forward + backward (+ recompute)
  std::vector<double> forward_s;         ///< forward only
  std::vector<double> params;            ///< parameters held by one device
  std::vector<double> static_bytes;      ///< weights + gradients + optimizer states (no ZeRO)
  std::vector<double> act_stored_bytes;  ///< stored activations of one sample
  double boundary_bytes = 0;             ///< activation sent between two layers, one sample
  /// Atom chains (build_atom_chain): elements per layer (kLayerAtoms; 1 for a layer chain), and per boundary j
  /// (before element j, num_layers + 1 entries) the bytes of one sample that cross it; empty = boundary_bytes.
  int atoms_per_layer = 1;
  std::vector<double> cut_bytes;
  double bytes_at(int j) const { return cut_bytes.empty() ? boundary_bytes : cut_bytes[static_cast<std::size_t>(j)]; }
  LinkCost intra, inter;     ///< device-to-device inside a node / across nodes
  int devices_per_node = 1;  ///< planner devices (TP groups) per node
  int devices = 1;           ///< planner devices in the cluster
  double memory_limit_bytes = 0;
  double reserved_bytes = 0;

  // Prefix sums for O(1) range queries over layers [i, j).
  std::vector<double> pre_compute, pre_forward, pre_params, pre_static, pre_act;
  double range_forward(int i, int j) const { return pre_forward[j] - pre_forward[i]; }
  double range_compute(int i, int j) const { return pre_compute[j] - pre_compute[i]; }
  double range_params(int i, int j) const { return pre_params[j] - pre_params[i]; }
  double range_static(int i, int j) const { return pre_static[j] - pre_static[i]; }
  double range_act(int i, int j) const { return pre_act[j] - pre_act[i]; }

  /// Ring all-reduce of `bytes` over `n` devices on `link` (the cost model every seed uses): 2(n-1)/n S/B.
  double all_reduce_s(double bytes, int n, const LinkCost& link) const;
  /// Do planner devices [first, first + count) of a pipeline whose device 0 is `base` span several nodes?
  bool spans_nodes(int base, int first, int count) const;
};

/// Profiles the model's layers with tensor parallelism `tp` (sequence parallel when tp > 1) at micro-batch
/// `profile_batch` (costs are per sample: the profile divided by the batch) with recompute `rc`.
LayerChain build_chain(const PlannerInput& in, int tp, int profile_batch = 1, Recompute rc = Recompute::NONE);

/// Layer chains by (tp, profile batch, recompute), each built once per search (profiling a layer at the batch a
/// device runs: kernels grow more efficient with the batch, which a per-sample cost scaled linearly misses).
class ChainCache {
public:
  explicit ChainCache(const PlannerInput& in) : in_(in) {}
  const LayerChain& get(int tp, int batch, Recompute rc = Recompute::NONE) {
    const auto key = std::make_tuple(tp, batch, static_cast<int>(rc));
    auto it = chains_.find(key);
    if (it == chains_.end()) it = chains_.emplace(key, build_chain(in_, tp, batch, rc)).first;
    return it->second;
  }

private:
  const PlannerInput& in_;
  std::map<std::tuple<int, int, int>, LayerChain> chains_;
};

/// The same model as a chain of sub-layer atoms (RaNNC's operator-level atoms: kLayerAtoms per layer, from the cost
/// model's kernels; num_layers = layers x kLayerAtoms, the embedding joining the first atom and the head the last).
/// Only for models whose layers can be cut (dense, no MLA).
LayerChain build_atom_chain(const PlannerInput& in, int tp, int profile_batch = 1, Recompute rc = Recompute::NONE);

/// Layers per stage and stage_cut_atoms of a plan whose stages end after atom-chain elements `ends` (ascending, the
/// last = the chain's length); false when some stage would hold no layer's last atom (a plan counts a cut layer in
/// the later stage, and every stage needs a layer).
bool atom_stages(const LayerChain& atoms, const std::vector<int>& ends, std::vector<int>* layers,
                 std::vector<int>* cut_atoms);

/// A pipeline plan of the partitioning planners: tp from the chain (sequence parallel when > 1), stages with
/// `layers` and `replicas` (stage replication omitted when all are 1), `copies` pipeline copies.
ParallelPlan pipeline_plan(const PlannerInput& in, const LayerChain& ch, const std::vector<int>& layers,
                           const std::vector<int>& replicas, int copies, int micro_batch_size, Schedule schedule);

/// Fills a candidate's estimate from the planner's own predicted time and the analytic memory model.
Candidate make_candidate(const PlannerInput& in, ParallelPlan plan, double predicted_s, double bottleneck_s);

}  // namespace dtsim::planning
