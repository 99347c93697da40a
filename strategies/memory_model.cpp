#include "strategies/memory_model.hpp"

#include <algorithm>

#include "strategies/schedule.hpp"
#include "strategies/transformer_costs.hpp"
#include "traces/error.hpp"

namespace dtsim::memory {

double optimizer_bytes_per_param(DType dtype) { return (dtype == DType::FP32 ? 0.0 : 4.0) + 8.0; }

std::vector<int> stage_layer_indexes(const TransformerSpec& m, const ParallelPlan& plan, int stage) {
  const auto chunks = plan.chunk_layers(m.num_layers);
  const auto first = plan.chunk_first_layers(m.num_layers);
  std::vector<int> out;
  for (int k = 0; k < static_cast<int>(chunks.size()); ++k)
    if (plan.stage_of_chunk(k) == stage)
      for (int l = first[k]; l < first[k] + chunks[k]; ++l) out.push_back(l);
  return out;
}

namespace {
// The routed experts of the stage's decoder layers on one rank.
double stage_decoder_expert_params_per_rank(const TransformerSpec& m, const ParallelPlan& plan, int stage);
}  // namespace

double stage_expert_params_per_rank(const TransformerSpec& m, const ParallelPlan& plan, int stage) {
  if (!m.moe.enabled()) return 0;
  const double mtp = plan.is_head_stage(stage) && m.mtp_layers > 0
                         ? m.mtp_layers * cost::mtp_params_per_rank(m, plan.tp, plan.ep, plan.expert_tp()).expert
                         : 0.0;
  return mtp + stage_decoder_expert_params_per_rank(m, plan, stage);
}

namespace {
double stage_decoder_expert_params_per_rank(const TransformerSpec& m, const ParallelPlan& plan, int stage) {
  if (!m.layer_pattern.empty()) {
    double p = 0;
    for (int l : stage_layer_indexes(m, plan, stage))
      p += cost::kind_params_per_rank(m, m.layer_kind(l), plan.tp, plan.ep, plan.expert_tp()).expert;
    return p;
  }
  const auto per = cost::moe_layer_params_per_rank(m, plan.tp, plan.ep, plan.expert_tp());
  double p = 0;
  for (int l : stage_layer_indexes(m, plan, stage))
    if (m.is_moe_layer(l)) p += per.expert;
  return p;
}
}  // namespace

double stage_params_per_rank(const TransformerSpec& m, const ParallelPlan& plan, int stage) {
  double p = 0;
  if (!m.layer_pattern.empty()) {
    // Per layer kind (hybrid and sliding-window models).
    for (int l : stage_layer_indexes(m, plan, stage)) {
      const auto k =
          cost::kind_params_per_rank(m, m.layer_kind(l), plan.tp, plan.ep, plan.expert_tp(), plan.tp_weight_replicas());
      p += k.dense + k.expert;
    }
  } else if (!m.moe.enabled()) {
    p = plan.stage_layers(m.num_layers)[stage] * cost::layer_params_per_rank(m, plan.tp, plan.tp_weight_replicas());
    // Boundaries inside layers: the first layer's first atoms run on the stage before, the next stage's first atoms
    // here.
    if (const int a = plan.cut_atoms(stage - 1); a > 0) p -= cost::layer_params_per_rank_atoms(m, plan.tp, 0, a);
    if (const int a = plan.cut_atoms(stage); a > 0) p += cost::layer_params_per_rank_atoms(m, plan.tp, 0, a);
  } else {
    const auto per = cost::moe_layer_params_per_rank(m, plan.tp, plan.ep, plan.expert_tp());
    const double dense = cost::layer_params_per_rank(m, plan.tp, plan.tp_weight_replicas());
    for (int l : stage_layer_indexes(m, plan, stage)) p += m.is_moe_layer(l) ? per.dense + per.expert : dense;
  }
  if (plan.is_embedding_stage(stage)) p += cost::first_stage_extra_params(m, plan.tp);
  if (plan.is_head_stage(stage)) p += cost::last_stage_extra_params(m, plan.tp, plan.head_stage() > 0 ? plan.pp : 1);
  if (plan.is_head_stage(stage) && m.mtp_layers > 0) {
    const auto kp = cost::mtp_params_per_rank(m, plan.tp, plan.ep, plan.expert_tp());
    p += m.mtp_layers * (kp.dense + kp.expert);
  }
  return p;
}

StaticMemory static_memory_for_params(double params, DType dtype, int zero_stage, int dp, bool fp32_grads) {
  StaticMemory s;
  s.params = params;
  const double e = dtype_bytes(dtype);
  // ZeRO: stage 1 shards optimizer states, 2 also gradients, 3 also parameters.
  s.weight_bytes = params * e / (zero_stage >= 3 ? dp : 1);
  s.gradient_bytes = params * (fp32_grads ? 4.0 : e) / (zero_stage >= 2 ? dp : 1);
  s.optimizer_bytes = params * optimizer_bytes_per_param(dtype) / (zero_stage >= 1 ? dp : 1);
  s.step_params = params / (zero_stage >= 1 ? dp : 1);
  return s;
}

StaticMemory static_memory(const TransformerSpec& m, const ParallelPlan& plan, int stage) {
  // Dense weights are sharded (ZeRO) over the dp x cp ranks that reduce their gradients, the routed experts over
  // their expert-data-parallel group.
  const double all = stage_params_per_rank(m, plan, stage), expert = stage_expert_params_per_rank(m, plan, stage);
  StaticMemory s =
      static_memory_for_params(all - expert, m.dtype, plan.zero_stage, plan.dense_grad_ranks(), plan.fp32_grads);
  if (expert > 0) {
    const StaticMemory x =
        static_memory_for_params(expert, m.dtype, plan.zero_stage, plan.expert_dp(), plan.fp32_grads);
    s.params += x.params;
    s.weight_bytes += x.weight_bytes;
    s.gradient_bytes += x.gradient_bytes;
    s.optimizer_bytes += x.optimizer_bytes;
    s.step_params += x.step_params;
    s.expert_params = expert;
  }
  if (plan.optimizer_offload_fraction > 0) {
    // HybridDeviceOptimizer: the offloaded share's fp32 master copy and moments live on the host (pinned), with the
    // fp32 gradients copied there for the CPU step.
    const double f = plan.optimizer_offload_fraction;
    s.host_bytes = f * (s.optimizer_bytes + 4 * s.step_params);
    s.optimizer_bytes *= 1 - f;
  }
  if (caches_lowp_weights(plan.precision)) {
    // The linear layers' weights: the stage's parameters without the embedding and output head (norms are small).
    double linear = all;
    if (plan.is_embedding_stage(stage)) linear -= cost::first_stage_extra_params(m, plan.tp);
    if (plan.is_head_stage(stage))
      linear -= cost::last_stage_extra_params(m, plan.tp, plan.head_stage() > 0 ? plan.pp : 1);
    s.lowp_weight_bytes = std::max(0.0, linear) * 2 * cost::precision_bytes(plan.precision, dtype_bytes(m.dtype));
  }
  return s;
}

double optimizer_step_s(const ParallelPlan& plan, const HostSpec& host, double step_params, double gpu_bytes_per_param,
                        double gpu_Bps) {
  const double f = plan.optimizer_offload_fraction;
  const double gpu = (1 - f) * step_params * gpu_bytes_per_param / gpu_Bps;
  if (f <= 0) return gpu;
  DTSIM_ASSERT(host.known(), "optimizer offload without the host's figures");
  const double cpu = f * step_params * kCpuAdamBytesPerParam / host.memory_Bps;
  const double copies = f * step_params * (4.0 + 4.0) / host.link_Bps;
  return std::max(gpu, plan.overlap_optimizer_offload ? std::max(cpu, copies) : cpu + copies);
}

namespace {
// A replica of a replicated stage holds its share of the micro-batch.
cost::Shape shape_of(const ParallelPlan& plan, int stage) {
  return cost::shape_of(plan, plan.micro_batch_size / plan.replicas(stage));
}
}  // namespace

double stage_activation_bytes_per_microbatch(const TransformerSpec& m, const ParallelPlan& plan, int stage) {
  auto sh = shape_of(plan, stage);
  // Skewed routing: the MoE layers' activations follow the most loaded EP rank (the others ignore the loads).
  if (m.moe.enabled() && !plan.routing.balanced())
    sh.ep_loads = cost::ep_rank_loads(plan.routing, m.moe.experts, plan.ep);
  double a = 0;
  if (plan.recompute_num_layers > 0 && plan.recompute == Recompute::FULL) {
    // Partial full recompute: the layers after the first N of a chunk store what they would without recompute.
    cost::Shape keep = sh;
    keep.recompute = Recompute::NONE;
    for (int l : stage_layer_indexes(m, plan, stage))
      a += cost::layer_activation_bytes(m, plan.recomputes_layer(l, m.num_layers) ? sh : keep, m.layer_kind(l)).stored;
  } else if (!m.layer_pattern.empty()) {
    std::vector<std::pair<LayerKind, double>> per_kind;  // each kind's activations once
    for (int l : stage_layer_indexes(m, plan, stage)) {
      const LayerKind k = m.layer_kind(l);
      auto it = std::find_if(per_kind.begin(), per_kind.end(), [&](const auto& entry) { return entry.first == k; });
      if (it == per_kind.end())
        it = per_kind.insert(per_kind.end(), {k, cost::layer_activation_bytes(m, sh, k).stored});
      a += it->second;
    }
  } else if (!m.moe.enabled()) {
    a = plan.stage_layers(m.num_layers)[stage] * cost::layer_activation_bytes(m, sh).stored;
    if (const int c = plan.cut_atoms(stage - 1); c > 0)  // the first layer from atom c on
      a +=
          cost::layer_activation_bytes_atoms(m, sh, c, kLayerAtoms).stored - cost::layer_activation_bytes(m, sh).stored;
    if (const int c = plan.cut_atoms(stage); c > 0) a += cost::layer_activation_bytes_atoms(m, sh, 0, c).stored;
  } else {
    const double dense = cost::layer_activation_bytes(m, sh).stored,
                 moe = cost::layer_activation_bytes(m, sh, true).stored;
    for (int l : stage_layer_indexes(m, plan, stage)) a += m.is_moe_layer(l) ? moe : dense;
  }
  if (plan.is_embedding_stage(stage)) a += cost::embedding_activation_bytes(m, sh).stored;
  if (plan.is_head_stage(stage)) a += cost::head_activation_bytes(m, sh).stored;
  if (plan.is_head_stage(stage) && m.mtp_layers > 0) a += m.mtp_layers * cost::mtp_activation_bytes(m, sh).stored;
  return a;
}

OffloadedActivations offloaded_activations(const TransformerSpec& m, const ParallelPlan& plan, int stage) {
  OffloadedActivations o;
  const int n = plan.offload_activation_layers;
  if (n <= 0) return o;
  auto sh = shape_of(plan, stage);
  if (m.moe.enabled() && !plan.routing.balanced())
    sh.ep_loads = cost::ep_rank_loads(plan.routing, m.moe.experts, plan.ep);
  const auto chunks = plan.chunk_layers(m.num_layers);
  const auto start = plan.chunk_first_layers(m.num_layers);
  for (int ch = 0; ch < plan.virtual_stages; ++ch) {
    const int k = plan.model_chunk(stage, ch);
    for (int l = start[k]; l < start[k] + n && l < start[k] + chunks[k]; ++l) {
      cost::Shape lsh = sh;  // partial full recompute: a kept layer stores what it would without recompute
      if (!plan.recomputes_layer(l, m.num_layers)) lsh.recompute = Recompute::NONE;
      const double a = cost::layer_activation_bytes(m, lsh, m.layer_kind(l)).stored;
      o.bytes += a;
      o.largest_layer = std::max(o.largest_layer, a);
    }
  }
  const auto orders = sched::plan_orders(plan);
  o.host_bytes = sched::max_in_flight(orders[stage], plan.split_backward()) * o.bytes / plan.virtual_stages;
  return o;
}

double bf16_optimizer_grad_copy_bytes(const TransformerSpec& m, const ParallelPlan& plan, int stage,
                                      const Calibration& cal) {
  // Checked before the stage's view is built: the lowering asks once per simulated rank, and almost no run has it.
  if (!bf16_optimizer_active(cal, m.dtype == DType::BF16, plan.stage_strategy(stage).zero_stage)) return 0;
  return 4.0 * static_memory(m, plan.stage_view(stage), stage).params;
}

double analytic_peak_bytes(const TransformerSpec& m, const ParallelPlan& plan, int stage, double reserved_bytes) {
  const auto orders = sched::plan_orders(plan);
  const auto sh = shape_of(plan, stage);
  auto layer_act =
      m.layer_pattern.empty() ? cost::layer_activation_bytes(m, sh, m.moe.enabled()) : cost::ActivationBytes{};
  // Hybrid models: the largest transient of the stage's layer kinds.
  if (!m.layer_pattern.empty())
    for (int l : stage_layer_indexes(m, plan, stage))
      layer_act.transient =
          std::max(layer_act.transient, cost::layer_activation_bytes(m, sh, m.layer_kind(l)).transient);
  const double v = plan.virtual_stages;
  // Walk the stage's pass order: F stores the chunk's activations (1/v of the stage's); with a split backward the
  // recomputed activations of the chunk's layers stay from B until W, otherwise one layer's at a time.
  // Offloaded layers' activations leave the device (the double buffer keeps up to two layers' on it).
  const OffloadedActivations off = offloaded_activations(m, plan, stage);
  const double stored_chunk = (stage_activation_bytes_per_microbatch(m, plan, stage) - off.bytes) / v;
  int recomputed_layers = plan.stage_layers(m.num_layers)[stage];  // partial full recompute: only these hold them
  if (plan.recompute_num_layers > 0)
    for (int l : stage_layer_indexes(m, plan, stage))
      recomputed_layers -= plan.recomputes_layer(l, m.num_layers) ? 0 : 1;
  const double recompute_chunk = recomputed_layers / v * layer_act.transient;
  const bool split = plan.split_backward();
  double held = 0, peak = 0;
  for (const auto& op : orders[stage]) {
    if (op.kind == PipeOp::Kind::F) {
      held += stored_chunk;
      peak = std::max(peak, held);
    } else if (op.kind == PipeOp::Kind::B) {
      if (split) {
        held += recompute_chunk;
        peak = std::max(peak, held);
      } else {
        peak = std::max(peak, held + layer_act.transient);
        held -= stored_chunk;
      }
    } else {
      held -= stored_chunk + recompute_chunk;
    }
  }
  return reserved_bytes + static_memory(m, plan, stage).total() + peak + 2 * off.largest_layer;
}

std::vector<int> megatron_fsdp_prefetch(const std::vector<double>& unit_params, bool double_buffer,
                                        double limit_params) {
  const std::size_t n = unit_params.size();
  std::vector<int> ahead(n, 0);
  std::vector<bool> covered(n, false);
  for (std::size_t j = 0; j < n; ++j) {
    // The hook of unit j: the units after it, while fewer than limit_params parameters are prefetched.
    double prefetched = 0;
    for (std::size_t i = j + 1; i < n && prefetched < limit_params && !(double_buffer && i > j + 1); ++i) {
      prefetched += unit_params[i];
      if (!covered[i]) ahead[i] = static_cast<int>(i - j);
      covered[i] = true;
    }
  }
  return ahead;
}

}  // namespace dtsim::memory
