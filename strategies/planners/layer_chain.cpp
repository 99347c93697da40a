#include "strategies/planners/layer_chain.hpp"

#include <algorithm>

#include "strategies/memory_model.hpp"
#include "strategies/transformer_costs.hpp"
#include "traces/error.hpp"

namespace dtsim::planning {

double LayerChain::all_reduce_s(double bytes, int n, const LinkCost& link) const {
  if (n <= 1) return 0;
  return 2.0 * (n - 1) * link.alpha_s + 2.0 * (n - 1) / n * bytes / link.bw_Bps;
}

bool LayerChain::spans_nodes(int base, int first, int count) const {
  const int lo = base + first, hi = base + first + count - 1;
  return lo / devices_per_node != hi / devices_per_node;
}

namespace {
/// One element of a chain (a layer, or an atom of one), per sample: forward, and forward + recompute + backward
/// times, parameters on one device and stored activations.
struct Element {
  double forward_s = 0, compute_s = 0, params = 0, act_bytes = 0;
};

/// The per-device shape a chain profiles at: TP `tp` (sequence parallel when > 1), micro-batch `batch`, recompute.
cost::Shape chain_shape(int tp, int batch, Recompute rc) {
  cost::Shape sh;
  sh.micro_batch = batch;
  sh.tp = tp;
  sh.sequence_parallel = tp > 1;
  sh.recompute = rc;
  return sh;
}

/// The passes `p` profiled at `sh` (costs per sample: the profile divided by the batch).
/// `cal`: the planner's calibration at the sustained clock of the model's tensor-core share (cost::at_tensor_share), as
/// estimate::estimate and the simulator cost it.
Element element(const PlannerInput& in, const Calibration& cal, const cost::Shape& sh, const cost::LayerPasses& p,
                double params, double act_bytes) {
  const double per = 1.0 / sh.micro_batch;
  auto time_s = [&](const std::vector<cost::Step>& st) {
    return estimate::steps_time_s(st, in.cluster, cal, in.model.dtype, sh.tp);
  };
  return {per * time_s(p.forward), per * (time_s(p.forward) + time_s(p.recompute) + time_s(p.backward)), params,
          per * act_bytes};
}

/// Fills the chain's per-element arrays with `per_layer` repeated over the model's layers, the embedding joining the
/// first element and the head the last, then its static bytes and prefix sums (for O(1) range queries).
void fill_elements(LayerChain& ch, const PlannerInput& in, const Calibration& cal, const cost::Shape& sh,
                   const std::vector<Element>& per_layer, bool whole_model = false) {
  const auto& m = in.model;
  // per_layer: the elements of one layer, repeated over the layers; whole_model: already one per layer of the model.
  const std::size_t n = whole_model ? per_layer.size() : per_layer.size() * static_cast<std::size_t>(m.num_layers);
  ch.num_layers = static_cast<int>(n);
  ch.forward_s.assign(n, 0.0);
  ch.compute_s = ch.params = ch.act_stored_bytes = ch.forward_s;
  for (std::size_t j = 0; j < n; ++j) {
    const Element& e = per_layer[j % per_layer.size()];
    ch.forward_s[j] = e.forward_s;
    ch.compute_s[j] = e.compute_s;
    ch.params[j] = e.params;
    ch.act_stored_bytes[j] = e.act_bytes;
  }
  const Element emb = element(in, cal, sh, cost::embedding_passes(m, sh), cost::first_stage_extra_params(m, sh.tp),
                              cost::embedding_activation_bytes(m, sh).stored);
  Element head = element(in, cal, sh, cost::head_passes(m, sh), cost::last_stage_extra_params(m, sh.tp, 2),
                         cost::head_activation_bytes(m, sh).stored);
  if (m.mtp_layers > 0) {  // multi-token prediction joins the head on the last element
    const auto kp = cost::mtp_params_per_rank(m, sh.tp, 1, sh.tp);
    const Element mtp =
        element(in, cal, sh, cost::mtp_passes(m, sh), kp.dense + kp.expert, cost::mtp_activation_bytes(m, sh).stored);
    head.forward_s += m.mtp_layers * mtp.forward_s;
    head.compute_s += m.mtp_layers * mtp.compute_s;
    head.params += m.mtp_layers * mtp.params;
    head.act_bytes += m.mtp_layers * mtp.act_bytes;
  }
  for (auto [j, e] : {std::pair{std::size_t{0}, &emb}, std::pair{n - 1, static_cast<const Element*>(&head)}}) {
    ch.forward_s[j] += e->forward_s;
    ch.compute_s[j] += e->compute_s;
    ch.params[j] += e->params;
    ch.act_stored_bytes[j] += e->act_bytes;
  }
  ch.static_bytes.clear();
  for (double p : ch.params) ch.static_bytes.push_back(memory::static_memory_for_params(p, m.dtype, 0, 1).total());
  auto prefix = [&](const std::vector<double>& v, std::vector<double>& out) {
    out.assign(v.size() + 1, 0.0);
    for (std::size_t i = 0; i < v.size(); ++i) out[i + 1] = out[i] + v[i];
  };
  prefix(ch.compute_s, ch.pre_compute);
  prefix(ch.forward_s, ch.pre_forward);
  prefix(ch.params, ch.pre_params);
  prefix(ch.static_bytes, ch.pre_static);
  prefix(ch.act_stored_bytes, ch.pre_act);
}
}  // namespace

LayerChain build_chain(const PlannerInput& in, int tp, int profile_batch, Recompute rc) {
  const auto& m = in.model;
  const auto& c = in.cluster;
  const Calibration cal = cost::at_tensor_share(in.calibration, m, c.gpu);
  if (tp < 1 || c.gpus_per_node % tp != 0)
    throw ConfigError("planner: tensor-parallel degree " + std::to_string(tp) + " must divide the " +
                      std::to_string(c.gpus_per_node) + " GPUs of a node");
  LayerChain ch;
  ch.tp = tp;
  const cost::Shape sh = chain_shape(tp, profile_batch, rc);
  if (m.layer_pattern.empty()) {
    fill_elements(ch, in, cal, sh,
                  {element(in, cal, sh, cost::layer_passes(m, sh), cost::layer_params_per_rank(m, tp),
                           cost::layer_activation_bytes(m, sh).stored)});
  } else {
    // Layers of several kinds (hybrid, sliding-window): one element per layer, each kind profiled once.
    std::vector<std::pair<LayerKind, Element>> kinds;
    std::vector<Element> layers;
    for (int l = 0; l < m.num_layers; ++l) {
      const LayerKind k = m.layer_kind(l);
      auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& e) { return e.first == k; });
      if (it == kinds.end()) {
        const auto kp = cost::kind_params_per_rank(m, k, tp, 1, tp);
        kinds.push_back({k, element(in, cal, sh, cost::layer_passes(m, sh, k), kp.dense + kp.expert,
                                    cost::layer_activation_bytes(m, sh, k).stored)});
        it = kinds.end() - 1;
      }
      layers.push_back(it->second);
    }
    fill_elements(ch, in, cal, sh, layers, true);
  }
  ch.boundary_bytes = static_cast<double>(m.seq_len) * m.hidden * dtype_bytes(m.dtype) / tp;
  ch.intra = {c.intra.latency_s + cal.p2p_overhead_s, c.intra.bandwidth_Bps * cal.intra_bandwidth_efficiency};
  // Byte counts of the chain are per GPU (boundary_bytes and params are a TP rank's shard): every GPU of a TP
  // group moves its own shard over its own NIC share, in parallel with the others.
  const double nic_per_gpu = c.inter.nic_bandwidth_Bps * c.inter.nics_per_node / c.gpus_per_node;
  if (c.num_nodes <= 1 || nic_per_gpu <= 0) ch.inter = ch.intra;
  else
    ch.inter = {
        c.inter.latency_s + cal.p2p_overhead_s,
        nic_per_gpu * cal.inter_bandwidth_efficiency / (c.inter.topology != "switch" ? c.inter.oversubscription : 1.0)};
  ch.devices_per_node = c.gpus_per_node / tp;
  ch.devices = c.total_gpus() / tp;
  ch.memory_limit_bytes = in.memory_limit_bytes > 0 ? in.memory_limit_bytes : c.gpu.memory_bytes;
  ch.reserved_bytes = cal.reserved_memory_bytes;
  return ch;
}

LayerChain build_atom_chain(const PlannerInput& in, int tp, int profile_batch, Recompute rc) {
  const auto& m = in.model;
  // The layer chain supplies links, device counts and limits; its per-layer arrays are replaced by per-atom ones.
  LayerChain ch = build_chain(in, tp, profile_batch, rc);
  const Calibration cal = cost::at_tensor_share(in.calibration, m, in.cluster.gpu);
  const int A = kLayerAtoms;
  ch.atoms_per_layer = A;
  const cost::Shape sh = chain_shape(tp, profile_batch, rc);
  const auto layer = cost::layer_passes(m, sh);
  std::vector<Element> atoms;
  for (int a = 0; a < A; ++a) {
    // Under full recompute a stage keeps the inputs of its first atom; the layer chain's rule (the layer input per
    // layer) is kept for whole layers: the atom that starts a layer carries it, the others nothing.
    const double act = rc == Recompute::FULL ? (a == 0 ? cost::layer_activation_bytes(m, sh).stored : 0.0)
                                             : cost::layer_activation_bytes_atoms(m, sh, a, a + 1).stored;
    atoms.push_back(element(in, cal, sh, cost::slice_atoms(layer, a, a + 1),
                            cost::layer_params_per_rank_atoms(m, tp, a, a + 1), act));
  }
  fill_elements(ch, in, cal, sh, atoms);
  // Bytes of one sample crossing each boundary: the hidden state (a TP rank's shard, as boundary_bytes) and what else
  // crosses a cut inside a layer.
  const cost::Shape one = chain_shape(tp, 1, rc);
  ch.cut_bytes.assign(static_cast<std::size_t>(ch.num_layers) + 1, ch.boundary_bytes);
  for (int j = 0; j <= ch.num_layers; ++j)
    ch.cut_bytes[static_cast<std::size_t>(j)] += cost::cut_extra_bytes(m, one, j % A);
  return ch;
}

bool atom_stages(const LayerChain& atoms, const std::vector<int>& ends, std::vector<int>* layers,
                 std::vector<int>* cut_atoms) {
  const int A = atoms.atoms_per_layer;
  layers->clear();
  cut_atoms->clear();
  int lo = 0;
  for (std::size_t s = 0; s < ends.size(); ++s) {
    const int hi = ends[s];
    // A layer counts in the stage that holds its last atom.
    const int owned = hi / A - lo / A;
    if (owned <= 0) return false;
    layers->push_back(owned);
    if (s + 1 < ends.size()) cut_atoms->push_back(hi % A);
    lo = hi;
  }
  return true;
}

ParallelPlan pipeline_plan(const PlannerInput& in, const LayerChain& ch, const std::vector<int>& layers,
                           const std::vector<int>& replicas, int copies, int micro_batch_size, Schedule schedule) {
  ParallelPlan plan;
  plan.tp = ch.tp;
  plan.sequence_parallel = ch.tp > 1;
  plan.pp = static_cast<int>(layers.size());
  plan.dp = copies;
  plan.micro_batch_size = micro_batch_size;
  plan.global_batch_size = in.global_batch_size;
  plan.layers_per_stage = layers;
  if (std::any_of(replicas.begin(), replicas.end(), [](int r) { return r > 1; })) plan.stage_replicas = replicas;
  plan.schedule = schedule;
  return plan;
}

Candidate make_candidate(const PlannerInput& in, ParallelPlan plan, double predicted_s, double bottleneck_s) {
  Candidate cand;
  cand.estimate.iteration_s = predicted_s;
  cand.estimate.bottleneck_stage_s = bottleneck_s;
  for (int s = 0; s < plan.pp; ++s) {
    const double peak = memory::analytic_peak_bytes(in.model, plan, s, in.calibration.reserved_memory_bytes) +
                        memory::bf16_optimizer_grad_copy_bytes(in.model, plan, s, in.calibration);
    cand.estimate.stage_peak_bytes.push_back(peak);
    cand.estimate.peak_bytes = std::max(cand.estimate.peak_bytes, peak);
  }
  const double limit = in.memory_limit_bytes > 0 ? in.memory_limit_bytes : in.cluster.gpu.memory_bytes;
  cand.estimate.fits = cand.estimate.peak_bytes <= limit;
  cand.plan = std::move(plan);
  return cand;
}

}  // namespace dtsim::planning
