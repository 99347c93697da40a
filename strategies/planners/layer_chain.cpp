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
/// The chain's prefix sums, for O(1) range queries.
void fill_prefix_sums(LayerChain& ch) {
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
  const auto& cal = in.calibration;
  if (tp < 1 || c.gpus_per_node % tp != 0)
    throw ConfigError("planner: tensor-parallel degree " + std::to_string(tp) + " must divide the " +
                      std::to_string(c.gpus_per_node) + " GPUs of a node");
  LayerChain ch;
  ch.num_layers = m.num_layers;
  ch.tp = tp;
  cost::Shape sh;
  sh.micro_batch = profile_batch;
  sh.tp = tp;
  sh.sequence_parallel = tp > 1;
  sh.recompute = rc;
  const double per = 1.0 / profile_batch;
  auto pass_s = [&](const cost::LayerPasses& p) {
    return per * (estimate::steps_time_s(p.forward, c, cal, m.dtype, tp) +
                  estimate::steps_time_s(p.recompute, c, cal, m.dtype, tp) +
                  estimate::steps_time_s(p.backward, c, cal, m.dtype, tp));
  };
  auto fwd_s = [&](const cost::LayerPasses& p) { return per * estimate::steps_time_s(p.forward, c, cal, m.dtype, tp); };
  const double layer_s = pass_s(cost::layer_passes(m, sh));
  ch.forward_s.assign(m.num_layers, fwd_s(cost::layer_passes(m, sh)));
  ch.forward_s.front() += fwd_s(cost::embedding_passes(m, sh));
  ch.forward_s.back() += fwd_s(cost::head_passes(m, sh));
  const double layer_params = cost::layer_params_per_rank(m, tp);
  const double layer_act = per * cost::layer_activation_bytes(m, sh).stored;
  ch.compute_s.assign(m.num_layers, layer_s);
  ch.params.assign(m.num_layers, layer_params);
  ch.act_stored_bytes.assign(m.num_layers, layer_act);
  ch.compute_s.front() += pass_s(cost::embedding_passes(m, sh));
  ch.compute_s.back() += pass_s(cost::head_passes(m, sh));
  ch.params.front() += cost::first_stage_extra_params(m, tp);
  ch.params.back() += cost::last_stage_extra_params(m, tp, 2);
  ch.act_stored_bytes.front() += per * cost::embedding_activation_bytes(m, sh).stored;
  ch.act_stored_bytes.back() += per * cost::head_activation_bytes(m, sh).stored;
  for (double p : ch.params) ch.static_bytes.push_back(memory::static_memory_for_params(p, m.dtype, 0, 1).total());
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
  fill_prefix_sums(ch);
  return ch;
}

LayerChain build_atom_chain(const PlannerInput& in, int tp, int profile_batch, Recompute rc) {
  const auto& m = in.model;
  const auto& c = in.cluster;
  const auto& cal = in.calibration;
  // The layer chain supplies links, device counts and limits; its per-layer arrays are replaced by per-atom ones.
  LayerChain ch = build_chain(in, tp, profile_batch, rc);
  const int L = m.num_layers, A = kLayerAtoms;
  ch.num_layers = L * A;
  ch.atoms_per_layer = A;
  cost::Shape sh;
  sh.micro_batch = profile_batch;
  sh.tp = tp;
  sh.sequence_parallel = tp > 1;
  sh.recompute = rc;
  const double per = 1.0 / profile_batch;
  const auto layer = cost::layer_passes(m, sh);
  auto time_s = [&](const std::vector<cost::Step>& st) { return estimate::steps_time_s(st, c, cal, m.dtype, tp); };
  std::vector<double> a_compute(A), a_forward(A), a_params(A), a_act(A);
  for (int a = 0; a < A; ++a) {
    const auto part = cost::slice_atoms(layer, a, a + 1);
    a_forward[a] = per * time_s(part.forward);
    a_compute[a] = a_forward[a] + per * (time_s(part.recompute) + time_s(part.backward));
    a_params[a] = cost::layer_params_per_rank_atoms(m, tp, a, a + 1);
    // Under full recompute a stage keeps the inputs of its first atom; the layer chain's rule (the layer input per
    // layer) is kept for whole layers: the atom that starts a layer carries it, the others nothing.
    a_act[a] = rc == Recompute::FULL ? (a == 0 ? per * cost::layer_activation_bytes(m, sh).stored : 0.0)
                                     : per * cost::layer_activation_bytes_atoms(m, sh, a, a + 1).stored;
  }
  const cost::LayerPasses emb = cost::embedding_passes(m, sh), head = cost::head_passes(m, sh);
  auto pass_s = [&](const cost::LayerPasses& p) {
    return per * (time_s(p.forward) + time_s(p.recompute) + time_s(p.backward));
  };
  const std::size_t n = static_cast<std::size_t>(L) * static_cast<std::size_t>(A);
  ch.compute_s.assign(n, 0.0);
  ch.forward_s = ch.params = ch.act_stored_bytes = ch.compute_s;
  for (int l = 0; l < L; ++l)
    for (int a = 0; a < A; ++a) {
      const std::size_t j = static_cast<std::size_t>(l) * static_cast<std::size_t>(A) + static_cast<std::size_t>(a);
      ch.compute_s[j] = a_compute[static_cast<std::size_t>(a)];
      ch.forward_s[j] = a_forward[static_cast<std::size_t>(a)];
      ch.params[j] = a_params[static_cast<std::size_t>(a)];
      ch.act_stored_bytes[j] = a_act[static_cast<std::size_t>(a)];
    }
  // The embedding joins the first atom, the head the last (as the layer chain's first and last layers).
  ch.compute_s.front() += pass_s(emb);
  ch.forward_s.front() += per * time_s(emb.forward);
  ch.act_stored_bytes.front() += per * cost::embedding_activation_bytes(m, sh).stored;
  ch.params.front() += cost::first_stage_extra_params(m, tp);
  ch.compute_s.back() += pass_s(head);
  ch.forward_s.back() += per * time_s(head.forward);
  ch.act_stored_bytes.back() += per * cost::head_activation_bytes(m, sh).stored;
  ch.params.back() += cost::last_stage_extra_params(m, tp, 2);
  ch.static_bytes.clear();
  for (double p : ch.params) ch.static_bytes.push_back(memory::static_memory_for_params(p, m.dtype, 0, 1).total());
  // Bytes of one sample crossing each boundary: the hidden state (a TP rank's shard, as boundary_bytes) and what else
  // crosses a cut inside a layer.
  cost::Shape one = sh;
  one.micro_batch = 1;
  ch.cut_bytes.assign(n + 1, ch.boundary_bytes);
  for (int j = 0; j <= L * A; ++j) ch.cut_bytes[static_cast<std::size_t>(j)] += cost::cut_extra_bytes(m, one, j % A);
  fill_prefix_sums(ch);
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
    const double peak = memory::analytic_peak_bytes(in.model, plan, s, in.calibration.reserved_memory_bytes);
    cand.estimate.stage_peak_bytes.push_back(peak);
    cand.estimate.peak_bytes = std::max(cand.estimate.peak_bytes, peak);
  }
  const double limit = in.memory_limit_bytes > 0 ? in.memory_limit_bytes : in.cluster.gpu.memory_bytes;
  cand.estimate.fits = cand.estimate.peak_bytes <= limit;
  cand.plan = std::move(plan);
  return cand;
}

}  // namespace dtsim::planning
