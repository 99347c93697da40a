#include "strategies/transformer_costs.hpp"

#include <algorithm>
#include <cmath>

#include "strategies/straggler_model.hpp"
#include "strategies/tp_layouts.hpp"
#include "traces/error.hpp"

namespace dtsim::cost {

std::string to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::ALL_REDUCE: return "all-reduce";
    case CollectiveKind::REDUCE_SCATTER: return "reduce-scatter";
    case CollectiveKind::ALL_GATHER: return "all-gather";
    case CollectiveKind::ALL_TO_ALL: return "all-to-all";
    case CollectiveKind::BROADCAST: return "broadcast";
    case CollectiveKind::REDUCE: return "reduce";
  }
  return "?";
}

std::string to_string(CommGroup g) {
  switch (g) {
    case CommGroup::TP: return "tp";
    case CommGroup::CP: return "cp";
    case CommGroup::EP: return "ep";
    case CommGroup::ETP: return "etp";
  }
  return "?";
}

std::string to_string(TpAxis a) {
  switch (a) {
    case TpAxis::ALL: return "tp";
    case TpAxis::ROW: return "row";
    case TpAxis::COL: return "col";
    case TpAxis::DEPTH: return "depth";
    case TpAxis::INPUT: return "input";
    case TpAxis::WEIGHT: return "weight";
    case TpAxis::OUTPUT: return "output";
  }
  return "?";
}

std::vector<int> tp_axis_members(TpLayout layout, int tp, int depth, TpAxis axis, int t) {
  std::vector<int> out;
  if (axis == TpAxis::ALL || layout == TpLayout::D1) {
    for (int x = 0; x < tp; ++x) out.push_back(x);
    return out;
  }
  const int q = tp_grid_side(layout, tp, depth);
  DTSIM_ASSERT(q > 0 && t >= 0 && t < tp, "tp index " << t << " outside layout " << to_string(layout) << " of " << tp);
  // Coordinates (a, b, c) with t = (a q + b) q + c: 2-D/2.5-D (k, i, j), 3-D (i, j, l).
  const int a = t / (q * q), b = (t / q) % q, c = t % q;
  const int na = tp / (q * q);
  auto idx = [q](int x, int y, int z) { return (x * q + y) * q + z; };
  const bool cube = layout == TpLayout::D3;
  DTSIM_ASSERT(cube ? (axis == TpAxis::INPUT || axis == TpAxis::WEIGHT || axis == TpAxis::OUTPUT)
                    : (axis == TpAxis::ROW || axis == TpAxis::COL || axis == TpAxis::DEPTH),
               "axis " << to_string(axis) << " does not belong to layout " << to_string(layout));
  if (axis == TpAxis::ROW || axis == TpAxis::OUTPUT)  // vary the last coordinate (j of a row; l)
    for (int z = 0; z < q; ++z) out.push_back(idx(a, b, z));
  else if (axis == TpAxis::COL || axis == TpAxis::INPUT)  // vary the middle one (i of a column; j)
    for (int y = 0; y < q; ++y) out.push_back(idx(a, y, c));
  else  // DEPTH (k), WEIGHT (i): the first
    for (int x = 0; x < (cube ? q : na); ++x) out.push_back(idx(x, b, c));
  return out;
}

Shape shape_of(const ParallelPlan& plan, int micro_batch) {
  Shape sh;
  sh.micro_batch = micro_batch;
  sh.tp = plan.tp;
  sh.sequence_parallel = plan.sequence_parallel || (plan.tp_layout != TpLayout::D1 && plan.tp > 1);
  sh.recompute = plan.recompute;
  sh.recompute_modules = plan.recompute_modules;
  sh.layout = plan.tp_layout;
  sh.tp_depth = plan.tp_depth;
  sh.cp = plan.cp;
  sh.cp_kind = plan.cp_kind;
  sh.ep = plan.ep;
  sh.etp = plan.expert_tp();
  sh.dispatcher = plan.dispatcher;
  sh.moe_padded = plan.routing.capacity_factor > 0 && plan.routing.pad_to_capacity;
  sh.random_routing = plan.routing.balanced() && !plan.routing.exact && plan.routing.capacity_factor <= 0;
  sh.sequential_experts = !plan.moe_grouped_gemm;
  sh.precision = plan.precision;
  sh.fp32_grad_accumulation = plan.fp32_grads;
  sh.torch_compile = plan.torch_compile;
  // Transformer Engine's recipes quantize a weight on the first micro-batch and reuse it (is_first_microbatch);
  // torchao's tensorwise and rowwise Float8 linears cast it in every forward.
  sh.weight_cast_share = caches_lowp_weights(plan.precision) ? 1.0 / std::max(1, plan.num_microbatches()) : 1.0;
  return sh;
}

double Shape::ep_load_factor() const {
  if (ep_loads.empty()) return 1.0;
  const double mine =
      ep_rank >= 0 ? ep_loads[static_cast<std::size_t>(ep_rank)] : *std::max_element(ep_loads.begin(), ep_loads.end());
  return mine * static_cast<double>(ep_loads.size());
}

double sampling_load_factor(const MoeSpec& moe, const Shape& sh, double slots) {
  if (!sh.random_routing || !sh.ep_loads.empty() || sh.ep <= 1 || slots <= 0 || moe.experts <= 1) return 1.0;
  const double E = moe.experts, k = moe.top_k;
  return 1.0 + straggler::expected_max_standard_normal(sh.ep) * std::sqrt((E - k) / ((E - 1) * slots));
}

std::vector<double> ep_rank_loads(const Routing& routing, int experts, int ep) {
  DTSIM_ASSERT(ep > 0 && experts % ep == 0, ep << " EP ranks for " << experts << " experts");
  const auto f = routing.expert_fractions(experts);
  std::vector<double> out(static_cast<std::size_t>(ep), 0.0);
  const int per = experts / ep;
  for (int i = 0; i < experts; ++i) out[static_cast<std::size_t>(i / per)] += f[static_cast<std::size_t>(i)];
  return out;
}

double Step::flops() const {
  double f = 0;
  for (const auto& op : ops) f += op.flops;
  return kind == Kind::RING_ATTENTION ? f * ring_steps : f;
}

namespace {
struct Dims {
  double b, s, h, kv, f, a, t, e, T, Tsp, v;
  double sq, skv;  // query tokens of a sequence on this rank (s / cp) and key/value tokens it attends to (s)
  double qd;       // query / output projection width heads x head_dim (= h unless head_dim is explicit)
};
Dims dims(const TransformerSpec& m, const Shape& sh) {
  Dims d{};
  d.b = sh.micro_batch;
  d.s = m.seq_len;
  d.h = m.hidden;
  d.kv = m.kv_dim();
  d.f = m.ffn_hidden;
  d.a = m.heads;
  d.t = sh.tp;
  d.e = dtype_bytes(m.dtype);
  d.sq = d.s / sh.cp;
  d.skv = d.s;
  d.qd = m.q_dim();
  d.T = d.b * d.sq;                                // tokens of the micro-batch on this rank
  d.Tsp = sh.sequence_parallel ? d.T / d.t : d.T;  // tokens seen by replicated (non-TP) kernels
  d.v = m.vocab;
  return d;
}

Op gemm(const std::string& name, double M, double K, double N, double e) {
  return {name, true, 2 * M * K * N, (M * K + K * N + M * N) * e, false, M, K, N, 1};
}
Op mem(const std::string& name, double bytes) { return {name, false, 0, bytes, false}; }
Step compute(const std::string& name, std::vector<Op> ops) {
  Step s;
  s.kind = Step::Kind::COMPUTE;
  s.name = name;
  s.ops = std::move(ops);
  return s;
}
Step coll(const std::string& name, CollectiveKind k, double bytes) {
  Step s;
  s.kind = Step::Kind::TP_COLLECTIVE;
  s.name = name;
  s.collective = k;
  s.collective_bytes = bytes;
  return s;
}
}  // namespace

std::vector<Op> gemm_bwd(const Op& fwd) {
  // dgrad: dY (m x n) * W^T (n x k); wgrad: X^T (k x m) * dY (m x n).
  std::vector<Op> out = {{fwd.name + "-dgrad", true, fwd.flops, fwd.bytes, false, fwd.m, fwd.n, fwd.k, fwd.batch},
                         {fwd.name + "-wgrad", true, fwd.flops, fwd.bytes, true, fwd.k, fwd.m, fwd.n, fwd.batch}};
  for (Op& o : out) {
    o.atom = fwd.atom;
    o.grouped = fwd.grouped;
    o.separate = fwd.separate;
  }
  out[0].separate_on_k = !fwd.separate.empty();
  return out;
}

namespace {

// The end of every pass builder with weight GEMMs: weight gradients fused into fp32 main_grad buffers
// (Shape::fp32_grad_accumulation) read and write their m x n (x groups) fp32 output in the epilogue, then the
// backward is split for zero-bubble schedules (so the W pass carries the same accumulation).
void finish_backward(LayerPasses& p, const Shape& sh) {
  if (sh.fp32_grad_accumulation)
    for (auto& st : p.backward)
      for (auto& op : st.ops)
        if (op.gemm && op.weight_grad) op.accumulate_bytes = 8 * op.m * op.n * op.batch;
  split_backward(p);
}
Op tagged(Op o, int atom) {
  o.atom = static_cast<std::int8_t>(atom);
  return o;
}
Step tagged(Step s, int atom) {
  s.atom = static_cast<std::int8_t>(atom);
  return s;
}
void append(std::vector<Op>& dst, const std::vector<Op>& src) { dst.insert(dst.end(), src.begin(), src.end()); }
void append_steps(std::vector<Step>& dst, const std::vector<Step>& src) {
  dst.insert(dst.end(), src.begin(), src.end());
}

// Whether the layer's softmax is a fused kernel: Megatron's rule (megatron_fused_softmax) for 1-D TP; the
// 2-D/2.5-D/3-D layouts keep their fused kernel.
bool fused_softmax(const TransformerSpec& m, const Shape& sh) {
  if (sh.layout != TpLayout::D1 && sh.tp > 1) return true;
  return megatron_fused_softmax(sh.micro_batch * (m.heads / sh.tp), m.seq_len, dtype_bytes(m.dtype));
}

// Bytes per score element an unfused attention keeps for its backward: the softmax output (e; fp32 without a fused
// softmax) and, with dropout on it (TransformerSpec::attention_dropout), the dropout's mask (1) and output (e).
double kept_score_bytes(const TransformerSpec& m, const Shape& sh, const Dims& d) {
  return (fused_softmax(m, sh) ? d.e : 4) + (m.attention_dropout ? 1 + d.e : 0);
}

// Bytes per hidden element of a hidden dropout's kept mask: 1 (a bool per element), 0 without hidden dropout
// (TransformerSpec::hidden_dropout).
double hidden_mask_bytes(const TransformerSpec& m) { return m.hidden_dropout ? 1 : 0; }

// Attention core (QK^T, scale-mask-softmax, dropout, AV) per TP rank, as in Megatron-LM (no flash attention).
// The softmax is one fused kernel, or (fused = false) PyTorch's fallback: cast to fp32, scale, masked_fill,
// softmax, cast back — five kernels over the fp32 scores (read e write 4, read 4 write 4, read 4 + mask 1
// write 4, read 4 write 4, read 4 write e).
std::vector<Op> attention_core(const Dims& d, int heads_per_rank, double head_dim, bool fused, bool dropout) {
  double bh = d.b * heads_per_rank;
  double scores = bh * d.sq * d.skv;  // elements of the score matrix
  // QK^T and AV multiply two activations: their backward has no weight gradient.
  std::vector<Op> ops = {{"qk", true, 2 * bh * d.sq * d.skv * head_dim, (bh * (d.sq + d.skv) * head_dim + scores) * d.e,
                          false, d.sq, head_dim, d.skv, bh}};
  if (fused) {
    ops.push_back(mem("softmax", 2 * scores * d.e));
  } else {
    // An fp32 model's scores are fp32 already: Megatron casts only fp16/bf16 input (input_in_float16).
    const bool cast = d.e != 4;
    if (cast) ops.push_back(mem("softmax-to-fp32", scores * (d.e + 4)));
    ops.push_back(mem("softmax-scale", scores * 8));
    ops.push_back(mem("softmax-mask", scores * 9));
    ops.push_back(mem("softmax", scores * 8));
    if (cast) ops.push_back(mem("softmax-to-half", scores * (4 + d.e)));
  }
  if (dropout) ops.push_back(mem("attn-dropout", scores * (2 * d.e + 1)));
  ops.push_back({"av", true, 2 * bh * d.sq * d.skv * head_dim, (scores + bh * (d.sq + d.skv) * head_dim) * d.e, false,
                 d.sq, d.skv, head_dim, bh});
  return ops;
}
}  // namespace

bool megatron_fused_softmax(int attn_batches, long long seq_len, double element_bytes) {
  // Megatron-LM FusedScaleMaskSoftmax.is_kernel_available (causal mask, fp16/bf16 input): 16 < sk <= 16384
  // (2048 in the 2020-2022 releases), sq % 4 == 0, (micro-batch x heads per rank) % 4 == 0 and divisible by the
  // kernel's batches per block: 4 warps of one row each, two rows per warp when sk <= 128.
  if (element_bytes != 2 || seq_len <= 16 || seq_len > 16384 || seq_len % 4 != 0) return false;
  const int batches_per_block = seq_len <= 128 ? 8 : 4;
  return attn_batches % 4 == 0 && attn_batches % batches_per_block == 0;
}

namespace {
std::vector<Step> module_recompute(const std::vector<Step>& forward, unsigned mods);  // below
CollectiveKind collective_kind(const std::string& k) {
  if (k == "all-reduce") return CollectiveKind::ALL_REDUCE;
  if (k == "all-gather") return CollectiveKind::ALL_GATHER;
  if (k == "reduce-scatter") return CollectiveKind::REDUCE_SCATTER;
  if (k == "broadcast") return CollectiveKind::BROADCAST;
  DTSIM_ASSERT(k == "reduce", "unknown collective kind " << k);
  return CollectiveKind::REDUCE;
}
TpAxis tp_axis(const std::string& a) {
  for (TpAxis x : {TpAxis::ALL, TpAxis::ROW, TpAxis::COL, TpAxis::DEPTH, TpAxis::INPUT, TpAxis::WEIGHT, TpAxis::OUTPUT})
    if (to_string(x) == a) return x;
  DTSIM_ASSERT(false, "unknown tensor-parallel axis " << a);
  return TpAxis::ALL;
}
Step axis_coll(const std::string& name, const tp::Collective& k) {
  Step s = coll(name + "-" + k.kind + "-" + k.axis, collective_kind(k.kind), k.bytes * k.count);
  s.axis = tp_axis(k.axis);
  s.group_size = k.group_size;
  return s;
}
bool gathers(const tp::Collective& k) { return k.kind == "broadcast" || k.kind == "all-gather"; }

// One linear of a 2-D / 2.5-D / 3-D layer: its input-side collectives (broadcasts, all-gathers), the local
// GEMMs, its output-side collectives (reduce-scatters, reduces); backward: dY gathers, the dgrad and wgrad GEMMs,
// then the reductions of dX and dA. The `count` calls of a collective (the q SUMMA steps) are merged into one
// call of count x the bytes: the bandwidth term is exact, the latency term counts one call [Δ].
struct GridLinear {
  std::vector<Step> forward, backward;
};
GridLinear grid_linear(const Shape& sh, const std::string& name, double tokens, double h_in, double h_out, double e,
                       bool swap_io) {
  const tp::LinearCost c = tp::linear_cost(sh.layout, sh.tp, sh.tp_depth, {tokens, h_in, h_out, e});
  const int q = tp_grid_side(sh.layout, sh.tp, sh.tp_depth);
  // Per-device GEMMs: SUMMA runs q steps of [rows, h_in/q] x [h_in/q, h_out/q] (rows = B/q for 2-D, B/(dq) for
  // 2.5-D); 3-D one GEMM [B/q, h_in/q] x [h_in/q, h_out/q] after the gathers.
  const bool cube = sh.layout == TpLayout::D3;
  const double rows = cube ? tokens / q : tokens / (static_cast<double>(sh.tp) / q);
  const int steps = cube ? 1 : q;
  std::vector<Op> fwd, bwd;
  for (int k = 0; k < steps; ++k) {
    Op g = gemm(name, rows, h_in / q, h_out / q, e);
    fwd.push_back(g);
    append(bwd, gemm_bwd(g));
  }
  auto fix_axis = [&](tp::Collective k) {
    if (cube && swap_io) k.axis = k.axis == "input" ? "output" : k.axis == "output" ? "input" : k.axis;
    return k;
  };
  GridLinear out;
  for (const auto& k0 : c.forward) {
    const auto k = fix_axis(k0);
    if (gathers(k)) out.forward.push_back(axis_coll(name, k));
  }
  out.forward.push_back(compute(name, fwd));
  for (const auto& k0 : c.forward) {
    const auto k = fix_axis(k0);
    if (!gathers(k)) out.forward.push_back(axis_coll(name, k));
  }
  for (const auto& k0 : c.backward) {
    const auto k = fix_axis(k0);
    if (gathers(k)) out.backward.push_back(axis_coll(name + "-bwd", k));
  }
  out.backward.push_back(compute(name + "-bwd", bwd));
  for (const auto& k0 : c.backward) {
    const auto k = fix_axis(k0);
    if (!gathers(k)) out.backward.push_back(axis_coll(name + "-bwd", k));
  }
  return out;
}

// A transformer layer with every tensor partitioned over the tp ranks (2-D, 2.5-D, 3-D): the four linears with
// their layout's collectives (seed-algorithms §2); the attention core and the element-wise kernels do 1/tp of the
// work on local data [Δ: heads split q ways, tokens tp/q ways]; LayerNorm statistics all-reduces are not modelled.
LayerPasses grid_layer_passes(const TransformerSpec& m, const Shape& sh) {
  const Dims d = dims(m, sh);
  const double t = d.t, T = d.T, e = d.e;
  const int q = tp_grid_side(sh.layout, sh.tp, sh.tp_depth);
  const double ffn_out = d.f * (m.mlp == MlpKind::SWIGLU ? 2 : 1);
  const bool cube = sh.layout == TpLayout::D3;
  GridLinear qkv = grid_linear(sh, "qkv", T, d.h, d.h + 2 * d.kv, e, false);
  GridLinear proj = grid_linear(sh, "proj", T, d.h, d.h, e, cube);
  GridLinear fc1 = grid_linear(sh, "fc1", T, d.h, ffn_out, e, false);
  GridLinear fc2 = grid_linear(sh, "fc2", T, d.f, d.h, e, cube);
  Dims dl = d;
  dl.b = d.b / (t / q);  // the tokens of this rank's row block
  const std::vector<Op> core = attention_core(dl, m.heads / q, m.head_dim(), true, m.attention_dropout);
  Op ln1 = mem("ln1", 2 * T * d.h * e / t);
  const double mask = hidden_mask_bytes(m);  // the dropout's 1-byte mask
  Op dropres1 = mem("dropout-residual1", T * d.h * (3 * e + mask) / t);
  Op ln2 = mem("ln2", 2 * T * d.h * e / t);
  Op act = mem(m.mlp == MlpKind::SWIGLU ? "swiglu" : "gelu", (m.mlp == MlpKind::SWIGLU ? 3 : 2) * T * d.f / t * e);
  Op dropres2 = mem("dropout-residual2", T * d.h * (3 * e + mask) / t);
  auto add = [](std::vector<Step>& dst, const std::vector<Step>& src) {
    dst.insert(dst.end(), src.begin(), src.end());
  };
  LayerPasses p;
  p.forward.push_back(compute("ln1", {ln1}));
  add(p.forward, qkv.forward);
  p.forward.push_back(compute("attention-core", core));
  add(p.forward, proj.forward);
  p.forward.push_back(compute("ln2", {dropres1, ln2}));
  add(p.forward, fc1.forward);
  p.forward.push_back(compute(act.name, {act}));
  add(p.forward, fc2.forward);
  p.forward.push_back(compute("residual", {dropres2}));

  std::vector<Op> core_b;
  for (auto it = core.rbegin(); it != core.rend(); ++it) {
    if (it->gemm) {
      auto b = gemm_bwd(*it);
      b[1].name = it->name + "-dgrad2";
      b[1].weight_grad = false;
      append(core_b, b);
    } else {
      core_b.push_back(mem(it->name + "-bwd", 1.5 * it->bytes));
    }
  }
  p.backward.push_back(compute("residual-bwd", {mem("dropout-residual2-bwd", dropres2.bytes)}));
  add(p.backward, fc2.backward);
  p.backward.push_back(compute(act.name + "-bwd", {mem(act.name + "-bwd", 1.5 * act.bytes)}));
  add(p.backward, fc1.backward);
  p.backward.push_back(
      compute("ln2-bwd", {mem("ln2-bwd", 1.5 * ln2.bytes), mem("dropout-residual1-bwd", dropres1.bytes)}));
  add(p.backward, proj.backward);
  p.backward.push_back(compute("attention-core-bwd", core_b));
  add(p.backward, qkv.backward);
  p.backward.push_back(compute("ln1-bwd", {mem("ln1-bwd", 1.5 * ln1.bytes)}));

  apply_precision(p, m, sh);
  finish_backward(p, sh);
  if (sh.recompute == Recompute::FULL) {
    p.recompute = p.forward;
    for (auto& s : p.recompute) s.name = "recompute-" + s.name;
  } else if (sh.recompute == Recompute::SELECTIVE && sh.recompute_modules != 0) {
    p.recompute = module_recompute(p.forward, sh.recompute_modules);
  } else if (sh.recompute == Recompute::SELECTIVE) {
    p.recompute.push_back(compute("recompute-attention-core", core));
  }
  return p;
}
}  // namespace

namespace {
// The attention block's projections on one TP rank of a 1-D layer: the GEMMs (and small kernels) before the core
// and the output projection, with the per-rank, per-token widths of q, k, v and the core's output.
struct AttentionProj {
  std::vector<Op> in;  // qkv (or MLA's down / norm / up projections and rope)
  Op out;              // output projection
  double q_w = 0, k_w = 0, v_w = 0, o_w = 0;
  double qk_dim = 0, v_dim = 0;  // per head
  double duplicated_w = 0;       // MLA: per-token width of the down-projection outputs (not split by tp)
};
AttentionProj attention_proj(const TransformerSpec& m, const Dims& d) {
  AttentionProj a;
  if (m.mla.enabled()) {
    // Megatron-Core MLA: the down projections are duplicated on the TP ranks, the up projections split by heads.
    const auto& x = m.mla;
    const double hr = m.heads / d.t;
    a.qk_dim = x.qk_nope_head_dim + x.qk_rope_head_dim;
    a.v_dim = x.v_head_dim;
    if (x.q_lora_rank > 0) {
      a.in.push_back(gemm("q-down", d.T, d.h, x.q_lora_rank, d.e));
      a.in.push_back(mem("q-norm", 2 * d.T * x.q_lora_rank * d.e));
      a.in.push_back(gemm("q-up", d.T, x.q_lora_rank, hr * a.qk_dim, d.e));
    } else {
      a.in.push_back(gemm("q", d.T, d.h, hr * a.qk_dim, d.e));
    }
    a.in.push_back(gemm("kv-down", d.T, d.h, x.kv_lora_rank + x.qk_rope_head_dim, d.e));
    a.in.push_back(mem("kv-norm", 2 * d.T * x.kv_lora_rank * d.e));
    a.in.push_back(gemm("kv-up", d.T, x.kv_lora_rank, hr * (x.qk_nope_head_dim + x.v_head_dim), d.e));
    a.in.push_back(mem("rope", 4 * d.T * hr * x.qk_rope_head_dim * d.e));
    a.q_w = hr * a.qk_dim;
    a.k_w = hr * a.qk_dim;
    a.v_w = hr * a.v_dim;
    a.o_w = hr * a.v_dim;
    a.duplicated_w = (x.q_lora_rank > 0 ? x.q_lora_rank : 0) + x.kv_lora_rank + x.qk_rope_head_dim;
  } else {
    // Gated attention: the query projection also makes the gate (heads x head_dim more outputs).
    a.in.push_back(gemm("qkv", d.T, d.h, (d.qd * (m.attention_gate ? 2 : 1) + 2 * d.kv) / d.t, d.e));
    // Unfused, the query (with its gate), key and value projections (torchtitan: wq, wk, wv).
    const double q_out = d.qd * (m.attention_gate ? 2 : 1), qkv_out = q_out + 2 * d.kv;
    a.in.back().separate = {q_out / qkv_out, d.kv / qkv_out, d.kv / qkv_out};
    a.q_w = d.qd / d.t;
    a.k_w = a.v_w = d.kv / d.t;
    a.o_w = d.qd / d.t;
    a.qk_dim = a.v_dim = m.head_dim();
  }
  a.out = gemm("proj", d.T, a.o_w, d.h, d.e);
  return a;
}

// FlashAttention forward and backward kernels of `heads` heads, sq query tokens against skv key tokens, per
// micro-batch of b: forward 2 (d_qk + d_v) flops per (query, key, head), backward 2 (3 d_qk + 2 d_v) (it recomputes
// the scores: QK^T again, then dV, dP, dQ, dK); a causal mask halves both where the kernel skips masked blocks.
// Bytes: q, k, v, o read/written once (backward: twice, plus the gradients).
std::pair<Op, Op> flash_ops(const Dims& d, double heads, double sq, double skv, double qk_dim, double v_dim,
                            bool causal, double share, double window = 0) {
  const double c = causal ? 0.5 : 1.0;
  double pairs = d.b * heads * sq * skv * c * share;
  // A causal sliding window of w keys (itself included; sq = skv, no context parallelism): query i attends to
  // min(i + 1, w) keys, sum_i min(i + 1, w) = w s - w (w - 1) / 2 pairs; the kernel skips the blocks outside it.
  if (window > 0 && causal) {
    const double w = std::min(window, skv);
    pairs = d.b * heads * (sq * w - w * (w - 1) / 2) * share;
  }
  const double io = d.b * heads * (sq * (qk_dim + v_dim) + skv * share * (qk_dim + v_dim)) * d.e + d.b * heads * sq * 4;
  Op f{"flash-attention", false, 2 * pairs * (qk_dim + v_dim), io, false, sq, qk_dim, skv, d.b * heads};
  f.flash = true;
  f.attention_kv = pairs / (d.b * heads * sq);  // keys per query: causal halves them, a ring block has its own
  Op b{"flash-attention-bwd",
       false,
       2 * pairs * (3 * qk_dim + 2 * v_dim),
       2.5 * io,
       false,
       sq,
       qk_dim,
       skv,
       d.b * heads};
  b.flash = true;
  b.attention_kv = f.attention_kv;
  return {f, b};
}

Step group_coll(const std::string& name, CollectiveKind k, double bytes, CommGroup g) {
  Step s = coll(name, k, bytes);
  s.group = g;
  return s;
}

// The SSD scan's backward and the gated delta rule's: about twice the forward's FLOPs (the gradients of each of the
// forward's products, states recomputed), its bytes 2.5 times as FlashAttention's backward (flash_ops) -- an
// approximation; no published FLOP count of the Triton backward kernels.
Op chunk_scan_bwd(const Op& f) {
  Op b = f;
  b.name = f.name + "-bwd";
  b.flops = 2 * f.flops;
  b.bytes = 2.5 * f.bytes;
  return b;
}

// The backward of a forward op list (reverse order): GEMMs of weights give dgrad + wgrad, GEMMs of two activations
// (no weight) dgrad + a second dgrad, memory-bound kernels 1.5x their bytes, fused chunked kernels (the SSD scan, the
// gated delta rule) chunk_scan_bwd. FlashAttention's backward is flash_ops' own, not derived here.
std::vector<Op> backward_of(const std::vector<Op>& fwd, const std::vector<std::string>& activation_gemms) {
  std::vector<Op> out;
  for (auto it = fwd.rbegin(); it != fwd.rend(); ++it) {
    if (it->gemm) {
      auto b = gemm_bwd(*it);
      if (std::find(activation_gemms.begin(), activation_gemms.end(), it->name) != activation_gemms.end()) {
        b[1].name = it->name + "-dgrad2";
        b[1].weight_grad = false;
      }
      append(out, b);
    } else if (it->flash) {
      out.push_back(chunk_scan_bwd(*it));
    } else {
      out.push_back(tagged(mem(it->name + "-bwd", 1.5 * it->bytes), it->atom));
    }
  }
  return out;
}
}  // namespace

double moe_dispatch_bytes(const TransformerSpec& m, const Shape& sh) {
  const Dims d = dims(m, sh);
  const double tokens = d.T / d.t;  // sequence parallel: each TP rank routes its share of the tokens
  return tokens * m.moe.top_k * d.h * d.e;
}

namespace {
// The MoE FFN of one layer on one rank: forward and backward steps.
struct MoeBlock {
  std::vector<Step> forward, backward;
};
// Mixture-of-experts FFN on this rank (sequence parallel: Tr = T / tp tokens routed by each TP rank).
MoeBlock moe_block(const TransformerSpec& m, const Shape& sh, const Dims& d) {
  const bool tp = sh.tp > 1;
  const double act_bytes = d.T * d.h * d.e;
  MoeBlock blk;
  const auto& x = m.moe;
  const double Tr = d.T / d.t, k = x.top_k, E = x.experts, ep = sh.ep, etp = sh.etp;
  const double E_local = E / ep;
  // Tokens this rank's experts process: its EP group's routed slots to its experts, gathered over ETP.
  // 1 = balanced; random balanced routing: the most loaded EP rank's expected share (sampling_load_factor).
  const double sampling = sampling_load_factor(x, sh, Tr * k * etp);
  const double load = sh.ep_load_factor() * sampling;
  const double N = Tr * k * load * etp;
  const double fe = x.expert_ffn_hidden / etp;
  const double slots_bytes = Tr * k * d.h * d.e;  // one rank's routed token-slots
  Op router = gemm("router", Tr, d.h, E, d.e);
  Op topk = mem(x.sigmoid_router ? "router-sigmoid-topk" : "router-softmax-topk", 3 * Tr * E * 4);
  Op permute = mem("moe-permute", 2 * slots_bytes);
  Op efc1 = gemm("expert-fc1", N / E_local, d.h, fe * (m.mlp == MlpKind::SWIGLU ? 2 : 1), d.e);
  Op eact = mem(m.mlp == MlpKind::SWIGLU ? "expert-swiglu" : "expert-gelu",
                (m.mlp == MlpKind::SWIGLU ? 3 : 2) * N * fe * d.e);
  Op efc2 = gemm("expert-fc2", N / E_local, fe, d.h, d.e);
  for (Op* g : {&efc1, &efc2}) {  // grouped GEMM over the rank's local experts
    g->flops *= E_local;
    g->bytes = (N * g->k + E_local * g->k * g->n + N * g->n) * d.e;
    g->batch = E_local;
    g->grouped = true;
  }
  Op unpermute = mem("moe-unpermute", 2 * slots_bytes + Tr * d.h * d.e);
  unpermute.scatter_src_bytes = slots_bytes;
  const bool dispatch = ep > 1 || sh.dispatcher == Dispatcher::ALL_GATHER;
  const double recv_bytes = N / etp * d.h * d.e;  // tokens received from the EP group
  auto ep_step = [&](const std::string& name, bool combine_shaped) {
    Step st;
    if (sh.dispatcher == Dispatcher::ALL_GATHER) {
      // Every EP rank gathers all tokens (Tr each) of its EP group, keeps its experts' ones; the outputs are
      // reduce-scattered back.
      st = group_coll(name, combine_shaped ? CollectiveKind::REDUCE_SCATTER : CollectiveKind::ALL_GATHER,
                      ep * Tr * d.h * d.e, CommGroup::EP);
    } else if (is_flex(sh.dispatcher)) {
      // The flex dispatcher's fused kernels: the rank's Tr tokens, each counted once; the lowering and the estimator
      // send them once per domain and once per rank they are routed to (strategies/flex_dispatch.hpp). Balanced
      // routing only (plan validation): the most loaded rank's share scales them as it does the all-to-all.
      st = group_coll(name, CollectiveKind::ALL_TO_ALL, Tr * d.h * d.e * sampling, CommGroup::EP);
      st.flex = {x.experts, x.top_k, x.router_groups, x.router_group_topk, sh.dispatcher == Dispatcher::HYBRIDEP};
    } else {
      st = group_coll(name, CollectiveKind::ALL_TO_ALL, slots_bytes, CommGroup::EP);
      // Even loads (balanced, or every expert padded to capacity) scale the buffer; uneven ones shape it.
      const bool even = sh.ep_loads.empty() || std::all_of(sh.ep_loads.begin(), sh.ep_loads.end(), [&](double l) {
                          return std::abs(l - sh.ep_loads[0]) <= 1e-12 * sh.ep_loads[0];
                        });
      if (even) {
        if (!sh.ep_loads.empty()) st.collective_bytes *= sh.ep_loads[0] * ep;
        st.collective_bytes *= sampling;  // the most loaded rank receives (and returns) the most
      } else {
        st.a2a_loads = sh.ep_loads;
        st.a2a_combine = combine_shaped;
      }
    }
    return st;
  };
  // Shared experts: a dense SwiGLU/GELU FFN of shared_ffn_hidden split by tp, on the TP-gathered tokens.
  const bool shared = x.shared_ffn_hidden > 0;
  const double sf = static_cast<double>(x.shared_ffn_hidden) / d.t;
  Op sfc1 = gemm("shared-fc1", d.T, d.h, sf * (m.mlp == MlpKind::SWIGLU ? 2 : 1), d.e);
  Op sact = mem("shared-act", (m.mlp == MlpKind::SWIGLU ? 3 : 2) * d.T * sf * d.e);
  Op sfc2 = gemm("shared-fc2", d.T, sf, d.h, d.e);

  auto& F = blk.forward;
  F.push_back(compute("moe-router", {router, topk, permute}));
  // Dropless dispatch sizes its buffers from the per-expert token counts (Megatron-Core token_dispatcher.py,
  // MoEAlltoAllTokenDispatcher.preprocess): with EP or TP the counts are all-gathered over the TP x EP group (E
  // int64 per member; over the EP group here, the TP members adding latency steps only) and copied to the host,
  // which waits for them before the all-to-all (cuda_sync_point "before_ep_alltoall"); without either the host
  // waits after the router ("before_finish"). The all-gather dispatcher reads the counts of the gathered routing
  // map (.cpu()) after its token all-gather. Padded experts have static sizes: neither.
  const bool counts = !sh.moe_padded && sh.dispatcher != Dispatcher::ALL_GATHER;
  if (counts && ep > 1) {
    F.push_back(group_coll("moe-token-counts", CollectiveKind::ALL_GATHER, ep * E * 8, CommGroup::EP));
  } else if (counts && tp) {
    F.push_back(coll("moe-token-counts", CollectiveKind::ALL_GATHER, d.t * E * 8));
  }
  if (counts) F.back().host_sync = true;
  if (dispatch) F.push_back(ep_step("moe-dispatch", false));
  if (!sh.moe_padded && sh.dispatcher == Dispatcher::ALL_GATHER) F.back().host_sync = true;
  if (etp > 1) F.push_back(group_coll("moe-etp-ag", CollectiveKind::ALL_GATHER, etp * recv_bytes, CommGroup::ETP));
  // Megatron's SequentialMLP (no --moe-grouped-gemm) loops over the local experts in Python: the host issues every
  // expert's kernels (the same GPU work as the grouped GEMM's groups).
  auto per_expert_issue = [&](Step st) {
    if (sh.sequential_experts) st.host_issues = static_cast<double>(st.ops.size()) * E_local;
    return st;
  };
  // Permutation 2 (Megatron-Core token_dispatcher.py, MoEAlltoAllTokenDispatcher.dispatch_postprocess and
  // combine_preprocess): with more than one local expert the received tokens arrive grouped by source rank and are
  // copied into expert order before the experts (sort_chunks_by_idxs; with drop-and-pad a transpose().contiguous()
  // of the capacity buffer), and back into source-rank order before the combine; autograd runs the inverse copy of
  // each in the backward (torchtitan's expert parallelism does the same: expert_parallel.py _permute / _unpermute).
  // Each reads and writes the N tokens this rank's experts process (the probabilities, N values, are left out). The
  // all-gather and flex dispatchers permute once, into expert order (moe-permute).
  const bool sort_chunks = E_local > 1 && sh.dispatcher == Dispatcher::ALL_TO_ALL;
  const double sort_bytes = 2 * N * d.h * d.e;
  if (sort_chunks) F.push_back(compute("moe-sort-chunks", {mem("moe-sort-chunks", sort_bytes)}));
  F.push_back(per_expert_issue(compute("moe-experts", {efc1, eact, efc2})));
  if (sort_chunks) F.push_back(compute("moe-unsort-chunks", {mem("moe-unsort-chunks", sort_bytes)}));
  if (etp > 1) F.push_back(group_coll("moe-etp-rs", CollectiveKind::REDUCE_SCATTER, etp * recv_bytes, CommGroup::ETP));
  if (dispatch) F.push_back(ep_step("moe-combine", true));
  F.push_back(compute("moe-unpermute", {unpermute}));
  if (shared) {
    if (tp) F.push_back(coll("shared-ag", CollectiveKind::ALL_GATHER, act_bytes));
    F.push_back(compute("moe-shared", {sfc1, sact, sfc2}));
    if (tp) F.push_back(coll("shared-rs", CollectiveKind::REDUCE_SCATTER, act_bytes));
  }
  auto& B = blk.backward;
  if (shared) {
    if (tp) B.push_back(coll("shared-ag-bwd", CollectiveKind::ALL_GATHER, act_bytes));
    B.push_back(compute("moe-shared-bwd", backward_of({sfc1, sact, sfc2}, {})));
    if (tp) B.push_back(coll("shared-rs-bwd", CollectiveKind::REDUCE_SCATTER, act_bytes));
  }
  B.push_back(compute("moe-unpermute-bwd", {mem("moe-unpermute-bwd", 1.5 * unpermute.bytes)}));
  if (dispatch) B.push_back(ep_step("moe-combine-bwd", false));
  if (etp > 1) B.push_back(group_coll("moe-etp-ag-bwd", CollectiveKind::ALL_GATHER, etp * recv_bytes, CommGroup::ETP));
  if (sort_chunks) B.push_back(compute("moe-unsort-chunks-bwd", {mem("moe-unsort-chunks-bwd", sort_bytes)}));
  B.push_back(per_expert_issue(compute("moe-experts-bwd", backward_of({efc1, eact, efc2}, {}))));
  if (sort_chunks) B.push_back(compute("moe-sort-chunks-bwd", {mem("moe-sort-chunks-bwd", sort_bytes)}));
  if (etp > 1)
    B.push_back(group_coll("moe-etp-rs-bwd", CollectiveKind::REDUCE_SCATTER, etp * recv_bytes, CommGroup::ETP));
  if (dispatch) B.push_back(ep_step("moe-dispatch-bwd", true));
  B.push_back(compute("moe-router-bwd", backward_of({router, topk, permute}, {})));
  return blk;
}
}  // namespace

namespace {
// Megatron-Core's recompute_modules (traces/plan.hpp RecomputeModule) as the recompute steps of a layer: the steps
// and ops of its forward (after apply_precision, so low-precision GEMMs and their input casts recompute as they ran)
// that each chosen module covers, in forward order. Checkpointed modules re-run whole, their TP / EP collectives
// included (Megatron's CheckpointFunction re-runs the module's forward); the output-discarding ones re-run their own
// kernels only. By name: the step and op names of standard_layer_passes, hybrid_layer_passes and moe_block.
bool named(const std::string& name, std::initializer_list<const char*> bases) {
  for (const char* b : bases) {
    const std::string base = b;
    // The op itself, or its low-precision input cast (quantize_ops: NAME-x...); the weight's cast is cached.
    if (name == base || name.rfind(base + "-x", 0) == 0) return true;
  }
  return false;
}
std::vector<Step> module_recompute(const std::vector<Step>& forward, unsigned mods) {
  const bool moe = mods & RECOMPUTE_MOE, shared = mods & RECOMPUTE_SHARED_EXPERTS, mlp = mods & RECOMPUTE_MLP;
  auto op_chosen = [&](const std::string& n) {
    return ((mods & RECOMPUTE_CORE_ATTN) &&
            named(n, {"flash-attention", "qk", "softmax", "softmax-scale", "softmax-mask", "softmax-to-half",
                      "attn-dropout", "av", "attention-gate"})) ||
           ((mods & RECOMPUTE_LAYERNORM) && named(n, {"ln1", "ln2", "attention-norm", "mlp-norm", "moe-norm"})) ||
           ((mods & RECOMPUTE_MLA_UP_PROJ) && named(n, {"q-up", "kv-up", "rope"})) ||
           (mlp && named(n, {"fc1", "swiglu", "gelu", "squared-relu", "fc2"})) ||
           ((mods & RECOMPUTE_MOE_ACT) && named(n, {"expert-swiglu", "expert-gelu"}));
  };
  auto step_chosen = [&](const Step& st) {
    const std::string& n = st.name;
    if (moe && named(n, {"moe-router", "moe-token-counts", "moe-dispatch", "moe-etp-ag", "moe-sort-chunks",
                         "moe-experts", "moe-unsort-chunks", "moe-etp-rs", "moe-combine", "moe-unpermute", "shared-ag",
                         "moe-shared", "shared-rs"}))
      return true;
    if (shared && named(n, {"shared-ag", "moe-shared", "shared-rs"})) return true;
    if (mlp && st.kind != Step::Kind::COMPUTE && named(n, {"mlp-ag", "mlp-rs", "mlp-ar"})) return true;
    // Context-parallel ring attention: the core's blocks and their KV exchange.
    return (mods & RECOMPUTE_CORE_ATTN) && st.kind == Step::Kind::RING_ATTENTION;
  };
  std::vector<Step> out;
  for (const Step& st : forward) {
    Step r = st;
    r.name = "recompute-" + st.name;
    if (!step_chosen(st)) {
      if (st.kind != Step::Kind::COMPUTE) continue;
      r.ops.clear();
      for (const Op& o : st.ops)
        if (op_chosen(o.name)) r.ops.push_back(o);
      if (r.ops.empty()) continue;
      if (st.host_issues > 0)
        r.host_issues = st.host_issues * static_cast<double>(r.ops.size()) / static_cast<double>(st.ops.size());
    }
    out.push_back(std::move(r));
  }
  return out;
}

// torchtitan's op-level selective activation checkpointing of a dense block (RECOMPUTE_OP_SAC; torchtitan
// _apply_ac_to_transformer_block, selective_ac_option "op": torchtitan/parallelisms/parallelize_llama.py at e846b69,
// 2024-12, and torchtitan/models/llama3/parallelize_llama.py at 820504e, 2025-06, the same policy). Inside each
// block the outputs of aten.mm, of SDPA's flash and memory-efficient kernels, of reduce_scatter_tensor and of max
// are saved (MUST_SAVE), except every second mm in call order, counted per block (wq 1, wk 2, wv 3, wo 4, w1 5,
// w3 6, w2 7); everything else is PREFER_RECOMPUTE, re-run when the backward unpacks it. What the backward needs of
// the unsaved, and so recomputes before the block's backward:
//  - both norms' outputs (the projections' weight gradients; wk's recompute);
//  - k (SDPA's backward): wk, a share k_w / (q_w + k_w + v_w) of the fused QKV GEMM (q and v from their saved
//    outputs);
//  - h = x + attention output (the second norm's input): the residual add, from wo's output without tensor
//    parallelism (wo recomputed), from the saved reduce-scatter output with it (wo not needed);
//  - the MLP's activation (silu(w1 x) * w3 x: w2's weight gradient) and w3, half of the fused SwiGLU FC1 (a GELU
//    MLP's second mm is its output GEMM, not needed);
//  - sequence-parallel TP: both all-gathered block inputs (all_gather_into_tensor is not in the save list), with a
//    current-scaling format's amax reduction before them;
//  - low precision (torchao Float8Linear): each recomputed projection's input cast, and its share of the weight's.
std::vector<Step> op_sac_recompute(const std::vector<Step>& forward, const TransformerSpec& m, const Shape& sh,
                                   const AttentionProj& ap) {
  const bool tp = sh.tp > 1;
  const double k_share = ap.k_w / (ap.q_w * (m.attention_gate ? 2 : 1) + ap.k_w + ap.v_w);
  const double w3_share = m.mlp == MlpKind::SWIGLU ? 0.5 : 0.0;
  auto part = [](Op o, double f) {
    o.flops *= f;
    o.bytes *= f;
    o.n *= f;
    o.separate.clear();  // one module's share (wk of QKV, w3 of FC1)
    return o;
  };
  auto cast_of = [](const std::string& n, const char* gemm_name, char operand) {
    const std::string p = std::string(gemm_name) + "-" + operand;
    return n.rfind(p, 0) == 0;
  };
  std::vector<Step> out;
  for (const Step& st : forward) {
    Step r = st;
    r.name = "recompute-" + st.name;
    if (st.kind != Step::Kind::COMPUTE) {
      if (tp && st.kind == Step::Kind::TP_COLLECTIVE && st.group == CommGroup::TP &&
          (st.name == "attn-ag" || st.name == "mlp-ag" || st.name == "attn-ag-amax" || st.name == "mlp-ag-amax"))
        out.push_back(std::move(r));
      continue;
    }
    r.ops.clear();
    for (const Op& o : st.ops) {
      const std::string& n = o.name;
      // The share of the op re-run: whole, wk's of QKV (and of its weight cast), w3's of FC1, or none (0).
      double share = 0;
      if (n == "ln1" || n == "ln2" || n == "dropout-residual1" || n == "swiglu" || n == "gelu" ||
          cast_of(n, "qkv", 'x') || (!tp && (n == "proj" || cast_of(n, "proj", 'x') || cast_of(n, "proj", 'w'))) ||
          (w3_share > 0 && cast_of(n, "fc1", 'x')))
        share = 1;
      else if (n == "qkv" || cast_of(n, "qkv", 'w')) share = k_share;
      else if (n == "fc1" || cast_of(n, "fc1", 'w')) share = w3_share;
      if (share > 0) r.ops.push_back(part(o, share));
    }
    if (r.ops.empty()) continue;
    if (st.host_issues > 0)
      r.host_issues = st.host_issues * static_cast<double>(r.ops.size()) / static_cast<double>(st.ops.size());
    out.push_back(std::move(r));
  }
  return out;
}

LayerPasses standard_layer_passes(const TransformerSpec& m, const Shape& sh, bool moe, double window);
LayerPasses hybrid_layer_passes(const TransformerSpec& m, const Shape& sh, LayerKind kind);
}  // namespace

namespace {
// Ring attention's blocks: cp blocks of 1/cp of the rank's (causal-balanced) flash work, each after a KV transfer.
std::pair<Op, Op> ring_flash_ops(const TransformerSpec& m, const Dims& d, double heads_rank, const AttentionProj& ap) {
  return flash_ops(d, heads_rank, d.sq, d.skv, ap.qk_dim, ap.v_dim, m.causal, d.sq / d.s);
}

// The attention block as steps: [qkv projections] [CP exchange] [core] [CP exchange] [output projection], the
// context-parallel exchange per micro-batch of this rank (sq tokens of each sequence) as the plan's cp_kind runs it.
// Without context parallelism (and for the unfused kernels) it stays one compute step.
struct CpAttention {
  const Shape& sh;
  const Dims& d;
  const AttentionProj& ap;
  const std::vector<Op>&core, &core_b;
  const Op& proj;
  std::pair<Op, Op> ring_block;

  double qkv_bytes() const { return d.T * (ap.q_w + ap.k_w + ap.v_w) * d.e; }
  Step ring_step(const std::string& name, const Op& block, double bytes, double tail_bytes) const {
    Step r = compute(name, {block});
    r.kind = Step::Kind::RING_ATTENTION;
    r.group = CommGroup::CP;
    r.ring_steps = sh.cp;
    r.collective_bytes = bytes;
    r.ring_tail_bytes = tail_bytes;
    return r;
  }
  void forward(std::vector<Step>& out, std::vector<Op> before) const {
    std::vector<Op> in = std::move(before);
    append(in, ap.in);
    if (sh.cp <= 1) {
      append(in, core);
      in.push_back(proj);
      out.push_back(compute("attention", in));
      return;
    }
    const double kv_block = d.T * (ap.k_w + ap.v_w) * d.e, o_bytes = d.T * ap.o_w * d.e;
    out.push_back(compute("attention-qkv", in));
    if (sh.cp_kind == CpKind::RING) {
      out.push_back(ring_step("attention-ring", ring_block.first, kv_block, 0));
    } else if (sh.cp_kind == CpKind::ALL_TO_ALL) {
      out.push_back(group_coll("attention-cp-a2a-qkv", CollectiveKind::ALL_TO_ALL, qkv_bytes(), CommGroup::CP));
      out.push_back(compute("attention-core", core));
      out.push_back(group_coll("attention-cp-a2a-out", CollectiveKind::ALL_TO_ALL, o_bytes, CommGroup::CP));
    } else {
      out.push_back(group_coll("attention-cp-ag-kv", CollectiveKind::ALL_GATHER, kv_block * sh.cp, CommGroup::CP));
      out.push_back(compute("attention-core", core));
    }
    out.push_back(compute("attention-proj", {proj}));
  }
  void backward(std::vector<Step>& out, std::vector<Op> before, const std::vector<Op>& after) const {
    std::vector<Op> pb = std::move(before);
    append(pb, gemm_bwd(proj));
    std::vector<Op> qb = backward_of(ap.in, {});
    append(qb, after);
    if (sh.cp <= 1) {
      append(pb, core_b);
      append(pb, qb);
      out.push_back(compute("attention-bwd", pb));
      return;
    }
    const double kv_block = d.T * (ap.k_w + ap.v_w) * d.e, o_bytes = d.T * ap.o_w * d.e;
    out.push_back(compute("attention-proj-bwd", pb));
    if (sh.cp_kind == CpKind::RING) {
      // K, V and the partial dK, dV travel together; the finished dK, dV return to their owner at the end.
      out.push_back(ring_step("attention-ring-bwd", ring_block.second, 2 * kv_block, kv_block));
    } else if (sh.cp_kind == CpKind::ALL_TO_ALL) {
      out.push_back(group_coll("attention-cp-a2a-out-bwd", CollectiveKind::ALL_TO_ALL, o_bytes, CommGroup::CP));
      out.push_back(compute("attention-core-bwd", core_b));
      out.push_back(group_coll("attention-cp-a2a-qkv-bwd", CollectiveKind::ALL_TO_ALL, qkv_bytes(), CommGroup::CP));
    } else {
      out.push_back(group_coll("attention-cp-ag-kv-bwd", CollectiveKind::ALL_GATHER, kv_block * sh.cp, CommGroup::CP));
      out.push_back(compute("attention-core-bwd", core_b));
      out.push_back(group_coll("attention-cp-rs-dkv", CollectiveKind::REDUCE_SCATTER, kv_block * sh.cp, CommGroup::CP));
    }
    out.push_back(compute("attention-qkv-bwd", qb));
  }
};
}  // namespace

LayerPasses layer_passes(const TransformerSpec& m, const Shape& sh, bool moe) {
  return standard_layer_passes(m, sh, moe, 0);
}

LayerPasses layer_passes(const TransformerSpec& m, const Shape& sh, LayerKind kind) {
  if (kind.ffn != FfnKind::NONE && (kind.mixer == MixerKind::ATTENTION || kind.mixer == MixerKind::SLIDING_ATTENTION))
    return standard_layer_passes(m, sh, kind.ffn == FfnKind::MOE,
                                 kind.mixer == MixerKind::SLIDING_ATTENTION ? m.sliding_window : 0);
  return hybrid_layer_passes(m, sh, kind);
}

namespace {
LayerPasses standard_layer_passes(const TransformerSpec& m, const Shape& sh, bool moe, double window) {
  if (sh.layout != TpLayout::D1 && sh.tp > 1 && m.parallel_block)
    throw ConfigError("model '" + m.name + "': parallel transformer blocks with the " + to_string(sh.layout) +
                      " tensor-parallel layout are not modelled");
  if (sh.layout != TpLayout::D1 && sh.tp > 1) {
    DTSIM_ASSERT(!moe && sh.cp == 1 && !m.mla.enabled(), "grid tensor-parallel layouts model dense GPT layers only");
    return grid_layer_passes(m, sh);
  }
  const Dims d = dims(m, sh);
  const int heads_rank = m.heads / sh.tp;
  const bool sp = sh.sequence_parallel;
  const bool tp = sh.tp > 1;
  const bool flash = m.attention == AttentionKind::FLASH;
  const double act_bytes = d.T * d.h * d.e;  // one full hidden-state tensor of the micro-batch
  const double ffn_rank = d.f / d.t * (m.mlp == MlpKind::SWIGLU ? 2 : 1);

  // Ops and collectives carry their sub-layer atom (kLayerAtoms) for stages that end inside a layer.
  Op ln1 = tagged(mem("ln1", 2 * d.Tsp * d.h * d.e), 0);
  AttentionProj ap = attention_proj(m, d);
  for (Op& o : ap.in) o.atom = 0;
  ap.out.atom = 2;
  // Attention core: the unfused Megatron kernels, or FlashAttention. Context parallelism: the rank's sq = s / cp
  // queries attend to the whole sequence (causal load balance gives every rank 1/cp of the causal work).
  std::vector<Op> core, core_b;
  if (flash) {
    auto [f, b] = flash_ops(d, heads_rank, d.sq, d.skv, ap.qk_dim, ap.v_dim, m.causal, 1.0, window);
    core = {tagged(f, 1)};
    core_b = {tagged(b, 1)};
  } else {
    core = attention_core(d, heads_rank, m.head_dim(), fused_softmax(m, sh), m.attention_dropout);
    for (Op& o : core) o.atom = 1;
    core_b = backward_of(core, {"qk", "av"});
  }
  if (m.attention_gate) {
    // Gated attention (Qwen3-Next): the core's output times the sigmoid of the gate the query projection made (read
    // both, write one); its backward reads those and the output gradient, writes two gradients.
    const Op gate = tagged(mem("attention-gate", 3 * d.T * ap.o_w * d.e), 1);
    core.push_back(gate);
    core_b.insert(core_b.begin(), tagged(mem("attention-gate-bwd", 5 * d.T * ap.o_w * d.e), 1));
  }
  Op proj = ap.out;
  // Megatron's fused bias-dropout-add: read the output and the residual, write the sum, and with dropout its mask.
  const double mask = hidden_mask_bytes(m);
  Op dropres1 = tagged(mem("dropout-residual1", d.Tsp * d.h * (3 * d.e + mask)), 2);
  Op ln2 = tagged(mem("ln2", 2 * d.Tsp * d.h * d.e), 3);
  Op fc1 = tagged(gemm("fc1", d.T, d.h, ffn_rank, d.e), 3);
  if (m.mlp == MlpKind::SWIGLU) fc1.separate = {0.5, 0.5};  // unfused: the gate and up projections (w1, w3)
  Op act = tagged(
      mem(m.mlp == MlpKind::SWIGLU ? "swiglu" : "gelu", (m.mlp == MlpKind::SWIGLU ? 3 : 2) * d.T * d.f / d.t * d.e), 3);
  Op fc2 = tagged(gemm("fc2", d.T, d.f / d.t, d.h, d.e), 4);
  Op dropres2 = tagged(mem("dropout-residual2", d.Tsp * d.h * (3 * d.e + mask)), 4);

  const CpAttention cpa{sh, d, ap, core, core_b, proj, ring_flash_ops(m, d, heads_rank, ap)};
  auto attention_fwd = [&](std::vector<Step>& out, std::vector<Op> before) { cpa.forward(out, std::move(before)); };
  auto attention_bwd = [&](std::vector<Step>& out, std::vector<Op> before, const std::vector<Op>& after) {
    cpa.backward(out, std::move(before), after);
  };

  // The backward's own kernels (the GEMMs' are gemm_bwd's).
  std::vector<Op> mlp_b;
  append(mlp_b, gemm_bwd(fc2));
  mlp_b.push_back(tagged(mem(act.name + "-bwd", 1.5 * act.bytes), 3));
  append(mlp_b, gemm_bwd(fc1));
  Op dropres2_b = tagged(mem("dropout-residual2-bwd", d.Tsp * d.h * (3 * d.e + mask)), 4);
  Op ln2_b = tagged(mem("ln2-bwd", 1.5 * ln2.bytes), 3);
  Op dropres1_b = tagged(mem("dropout-residual1-bwd", d.Tsp * d.h * (3 * d.e + mask)), 2);
  Op ln1_b = tagged(mem("ln1-bwd", 1.5 * ln1.bytes), 0);
  if (!sh.torch_compile) {
    // Eager PyTorch's composite RMSNorm over N = tokens x hidden elements (torchtitan/models/norms.py RMSNorm):
    // forward x.float() (e + 4 bytes per element), pow (4 + 4), mean (4), x * r (4 + 4), type_as (4 + e), * weight
    // (e + e) = 4e + 28; backward (autograd of the same): the weight's multiply and its gradient's product and sum
    // (6e), the casts back and forth (e + 4, 4 + e), x * r's two gradients and the sum (24), mean's expansion (4),
    // pow's (12) and the sum of the two input-gradient paths (12) = 8e + 60. Used where the stack runs it so.
    const double n = d.Tsp * d.h;
    for (Op* o : {&ln1, &ln2}) o->eager_norm_bytes = n * (4 * d.e + 28);
    for (Op* o : {&ln1_b, &ln2_b}) o->eager_norm_bytes = n * (8 * d.e + 60);
  }

  LayerPasses p;
  if (m.parallel_block) {
    // Parallel transformer block (TransformerSpec::parallel_block; PaLM section 2, MegaScale section 3.1): one norm,
    // attention and MLP on the same normalised input, their row-parallel outputs summed (the second GEMM accumulates
    // into the first's output) and reduced once, one bias-dropout-add of the sum onto the residual. Forward: [ln]
    // [all-gather] attention, MLP [reduce-scatter | all-reduce] [residual]; the backward mirrors it, the input
    // gradients of QKV and FC1 summed the same way before the one reduction. QKV and FC1 stay two GEMMs (PaLM fuses
    // them into one; the FLOPs are the same).
    // Its one bias-dropout-add: the standard block's second, by the name it has here.
    Op dropres = dropres2, dropres_b = dropres2_b;
    dropres.name = "dropout-residual";
    dropres_b.name = "dropout-residual-bwd";
    std::vector<Op> mlp_f = {fc1, act, fc2}, mlp_bwd = mlp_b;
    if (tp && sp) {
      p.forward.push_back(compute("ln1", {ln1}));
      p.forward.push_back(tagged(coll("block-ag", CollectiveKind::ALL_GATHER, act_bytes), 0));
      attention_fwd(p.forward, {});
      p.forward.push_back(compute("mlp", mlp_f));
      p.forward.push_back(tagged(coll("block-rs", CollectiveKind::REDUCE_SCATTER, act_bytes), 4));
      p.forward.push_back(compute("residual", {dropres}));
      p.backward.push_back(compute("residual-bwd", {dropres_b}));
      p.backward.push_back(tagged(coll("block-ag-bwd", CollectiveKind::ALL_GATHER, act_bytes), 4));
      p.backward.push_back(compute("mlp-bwd", mlp_bwd));
      attention_bwd(p.backward, {}, {});
      p.backward.push_back(tagged(coll("block-rs-bwd", CollectiveKind::REDUCE_SCATTER, act_bytes), 0));
      p.backward.push_back(compute("ln1-bwd", {ln1_b}));
    } else {
      attention_fwd(p.forward, {ln1});
      if (tp) {
        p.forward.push_back(compute("mlp", mlp_f));
        p.forward.push_back(tagged(coll("block-ar", CollectiveKind::ALL_REDUCE, act_bytes), 4));
        p.forward.push_back(compute("residual", {dropres}));
      } else {
        mlp_f.push_back(dropres);
        p.forward.push_back(compute("mlp", mlp_f));
      }
      mlp_bwd.insert(mlp_bwd.begin(), dropres_b);
      p.backward.push_back(compute("mlp-bwd", mlp_bwd));
      attention_bwd(p.backward, {}, tp ? std::vector<Op>{} : std::vector<Op>{ln1_b});
      if (tp) {
        p.backward.push_back(tagged(coll("block-ar-bwd", CollectiveKind::ALL_REDUCE, act_bytes), 0));
        p.backward.push_back(compute("ln1-bwd", {ln1_b}));
      }
    }
  } else {
    if (sp || moe) {
      // Forward. Without SP: attention block, all-reduce, MLP block, all-reduce (Megatron's g operator).
      // With SP: the all-reduces become reduce-scatter + all-gather around the replicated kernels.
      DTSIM_ASSERT(sp || !tp, "a MoE layer with tp > 1 needs sequence parallelism");
      if (tp) {
        p.forward.push_back(compute("ln1", {ln1}));
        p.forward.push_back(tagged(coll("attn-ag", CollectiveKind::ALL_GATHER, act_bytes), 0));
        attention_fwd(p.forward, {});
        p.forward.push_back(tagged(coll("attn-rs", CollectiveKind::REDUCE_SCATTER, act_bytes), 2));
      } else {
        attention_fwd(p.forward, {ln1});
      }
      if (moe) {
        p.forward.push_back(compute("ln2", {dropres1, ln2}));
        append_steps(p.forward, moe_block(m, sh, d).forward);
        p.forward.push_back(compute("residual", {dropres2}));
      } else {
        p.forward.push_back(compute("ln2", {dropres1, ln2}));
        p.forward.push_back(tagged(coll("mlp-ag", CollectiveKind::ALL_GATHER, act_bytes), 3));
        p.forward.push_back(compute("mlp", {fc1, act, fc2}));
        p.forward.push_back(tagged(coll("mlp-rs", CollectiveKind::REDUCE_SCATTER, act_bytes), 4));
        p.forward.push_back(compute("residual", {dropres2}));
      }
    } else {
      attention_fwd(p.forward, {ln1});
      if (tp) p.forward.push_back(tagged(coll("attn-ar", CollectiveKind::ALL_REDUCE, act_bytes), 2));
      p.forward.push_back(compute("mlp", {dropres1, ln2, fc1, act, fc2, dropres2}));
      if (tp) p.forward.push_back(tagged(coll("mlp-ar", CollectiveKind::ALL_REDUCE, act_bytes), 4));
    }

    // Backward: the conjugate collectives (all-reduce of input gradients; AG <-> RS with SP).
    if (sp || moe) {
      p.backward.push_back(compute("residual-bwd", {dropres2_b}));
      if (moe) {
        append_steps(p.backward, moe_block(m, sh, d).backward);
      } else {
        p.backward.push_back(tagged(coll("mlp-ag-bwd", CollectiveKind::ALL_GATHER, act_bytes), 4));
        p.backward.push_back(compute("mlp-bwd", mlp_b));
        p.backward.push_back(tagged(coll("mlp-rs-bwd", CollectiveKind::REDUCE_SCATTER, act_bytes), 3));
      }
      if (tp) {
        p.backward.push_back(compute("ln2-bwd", {ln2_b, dropres1_b}));
        p.backward.push_back(tagged(coll("attn-ag-bwd", CollectiveKind::ALL_GATHER, act_bytes), 2));
        attention_bwd(p.backward, {}, {});
        p.backward.push_back(tagged(coll("attn-rs-bwd", CollectiveKind::REDUCE_SCATTER, act_bytes), 0));
        p.backward.push_back(compute("ln1-bwd", {ln1_b}));
      } else {
        attention_bwd(p.backward, {ln2_b, dropres1_b}, {ln1_b});
      }
    } else {
      std::vector<Op> mb = {dropres2_b};
      append(mb, mlp_b);
      p.backward.push_back(compute("mlp-bwd", mb));
      if (tp) p.backward.push_back(tagged(coll("mlp-ar-bwd", CollectiveKind::ALL_REDUCE, act_bytes), 3));
      attention_bwd(p.backward, {ln2_b, dropres1_b}, {ln1_b});
      if (tp) p.backward.push_back(tagged(coll("attn-ar-bwd", CollectiveKind::ALL_REDUCE, act_bytes), 0));
    }
  }
  apply_precision(p, m, sh);
  finish_backward(p, sh);
  if (sh.recompute == Recompute::FULL) {
    p.recompute = p.forward;
    for (auto& s : p.recompute) s.name = "recompute-" + s.name;
  } else if (sh.recompute == Recompute::SELECTIVE && sh.recompute_modules == RECOMPUTE_OP_SAC) {
    DTSIM_ASSERT(!moe && !m.parallel_block && sh.cp == 1, "op_sac recompute of a dense block only (plan validation)");
    p.recompute = op_sac_recompute(p.forward, m, sh, ap);
  } else if (sh.recompute == Recompute::SELECTIVE && sh.recompute_modules != 0) {
    p.recompute = module_recompute(p.forward, sh.recompute_modules);
  } else if (sh.recompute == Recompute::SELECTIVE && !flash) {
    p.recompute.push_back(compute("recompute-attention-core", core));
  }
  return p;
}

}  // namespace

namespace {

// Mamba-2 mixer on one TP rank (Megatron-Core MambaMixer: heads and groups split by tp; in_proj column-parallel,
// out_proj row-parallel). Forward ops between the block's norm and its TP reduction.
std::vector<Op> mamba_ops(const TransformerSpec& m, const Dims& d) {
  const auto& x = m.mamba;
  const double H = x.heads / d.t, G = x.groups / d.t, P = x.head_dim, N = x.state, Q = x.chunk;
  const double di = H * P, gn = G * N;
  std::vector<Op> ops;
  ops.push_back(gemm("in-proj", d.T, d.h, 2 * di + 2 * gn + H, d.e));
  // Causal depthwise conv1d (kernel K) with SiLU over x, B, C: read and write them (causal-conv1d's kernel).
  ops.push_back(mem("conv1d", 2 * d.T * (di + 2 * gn) * d.e));
  // The chunked SSD scan (Dao & Gu 2024, section 6; mamba_ssm's Triton kernels chunk_state, state_passing, bmm_chunk,
  // chunk_scan): per token C B^T within its chunk once per group (2 Q N), and per head the chunk's masked product
  // with x (2 Q P), its chunk state B^T x (2 N P) and the output from the incoming state C h (2 N P); tiled dot
  // products on tensor cores, timed as a fused attention kernel. Bytes: x, B, C read twice (chunk state, chunk scan),
  // dt (fp32), y written, the fp32 chunk states (heads x N x P per chunk) written and read, C B^T (fp32) likewise.
  Op scan{"ssd-scan", false, d.T * (G * 2 * Q * N + H * (2 * Q * P + 4 * N * P)),
          d.T * (2 * (di + 2 * gn) * d.e + di * d.e + 2 * H * 4 + 2 * H * N * P * 4 / Q + 2 * G * Q * 4), false};
  scan.flash = true;
  ops.push_back(scan);
  // Gated RMSNorm: y x SiLU(z), normalised per group (read y and z, write).
  ops.push_back(mem("gated-norm", 3 * d.T * di * d.e));
  ops.push_back(gemm("out-proj", d.T, di, d.h, d.e));
  return ops;
}

// Gated DeltaNet mixer on one TP rank (key and value heads split by tp).
std::vector<Op> gated_deltanet_ops(const TransformerSpec& m, const Dims& d) {
  const auto& x = m.linear;
  const double Hk = x.key_heads / d.t, Hv = x.value_heads / d.t, dk = x.key_head_dim, dv = x.value_head_dim,
               C = x.chunk;
  const double kd = Hk * dk, vd = Hv * dv;
  std::vector<Op> ops;
  // in_proj_qkvz and in_proj_ba as one GEMM: q, k, v, the output gate z, beta and the decay per value head.
  ops.push_back(gemm("in-proj", d.T, d.h, 2 * kd + 2 * vd + 2 * Hv, d.e));
  // conv1d with SiLU over q, k, v (read, write), q and k L2-normalised (read, write), beta and decay gates.
  ops.push_back(mem("conv1d", 2 * d.T * (2 * kd + vd) * d.e + 2 * d.T * 2 * kd * d.e + 4 * d.T * Hv * 4));
  // The chunked gated delta rule (Yang et al. 2025, section 3.3, WY representation; fla's chunk_gated_delta_rule):
  // per token and value head (keys shared by value_heads / key_heads heads) within its chunk K K^T, W = A K, U = A V,
  // Q K^T and the masked product with U - W S (2 C (3 d_k + 2 d_v)); with the chunk's incoming state S (d_k x d_v):
  // W S, Q S and the state update K^T (U - W S) (6 d_k d_v). Bytes: q, k, v, gates read, the output written, the fp32
  // chunk-local A (C per token and head) and chunk states written and read.
  Op rule{"gated-delta-rule", false, d.T * Hv * (2 * C * (3 * dk + 2 * dv) + 6 * dk * dv),
          d.T * ((2 * kd + vd) * d.e + 2 * Hv * 4 + vd * d.e + 2 * Hv * C * 4 + 2 * Hv * dk * dv * 4 / C), false};
  rule.flash = true;
  ops.push_back(rule);
  ops.push_back(mem("gated-norm", 3 * d.T * vd * d.e));
  ops.push_back(gemm("out-proj", d.T, vd, d.h, d.e));
  return ops;
}

// Forward and backward steps of one pre-norm residual block: its norm, its TP collectives (sequence parallel:
// all-gather before, reduce-scatter after; otherwise an all-reduce after), its ops, the residual add.
struct Block {
  std::vector<Step> forward, backward;
};
// `fwd` and `bwd` are the block's steps between its TP collectives; where no collective separates them from the
// norm and the residual add, those join the first and last compute step (one step for a single-step block).
Block residual_block(const std::string& name, const Dims& d, const Shape& sh, std::vector<Step> fwd,
                     std::vector<Step> bwd) {
  DTSIM_ASSERT(!fwd.empty() && !bwd.empty() && fwd.front().kind == Step::Kind::COMPUTE &&
                   fwd.back().kind == Step::Kind::COMPUTE && bwd.front().kind == Step::Kind::COMPUTE &&
                   bwd.back().kind == Step::Kind::COMPUTE,
               "block " << name << " must begin and end with compute steps");
  const bool tp = sh.tp > 1, sp = sh.sequence_parallel;
  const double act_bytes = d.T * d.h * d.e;
  const Op norm = mem(name + "-norm", 2 * d.Tsp * d.h * d.e), add = mem(name + "-residual", 3 * d.Tsp * d.h * d.e);
  const Op norm_b = mem(name + "-norm-bwd", 1.5 * norm.bytes), add_b = mem(name + "-residual-bwd", add.bytes);
  Block b;
  if (tp && sp) {
    b.forward = {compute(name + "-norm", {norm}), coll(name + "-ag", CollectiveKind::ALL_GATHER, act_bytes)};
    append_steps(b.forward, fwd);
    b.forward.push_back(coll(name + "-rs", CollectiveKind::REDUCE_SCATTER, act_bytes));
    b.forward.push_back(compute(name + "-residual", {add}));
    b.backward = {compute(name + "-residual-bwd", {add_b}),
                  coll(name + "-ag-bwd", CollectiveKind::ALL_GATHER, act_bytes)};
    append_steps(b.backward, bwd);
    b.backward.push_back(coll(name + "-rs-bwd", CollectiveKind::REDUCE_SCATTER, act_bytes));
    b.backward.push_back(compute(name + "-norm-bwd", {norm_b}));
  } else {
    fwd.front().ops.insert(fwd.front().ops.begin(), norm);
    bwd.front().ops.insert(bwd.front().ops.begin(), add_b);
    if (tp) {
      b.forward = std::move(fwd);
      b.forward.push_back(coll(name + "-ar", CollectiveKind::ALL_REDUCE, act_bytes));
      b.forward.push_back(compute(name + "-residual", {add}));
      b.backward = std::move(bwd);
      b.backward.push_back(coll(name + "-ar-bwd", CollectiveKind::ALL_REDUCE, act_bytes));
      b.backward.push_back(compute(name + "-norm-bwd", {norm_b}));
    } else {
      fwd.back().ops.push_back(add);
      bwd.back().ops.push_back(norm_b);
      b.forward = std::move(fwd);
      b.backward = std::move(bwd);
    }
  }
  return b;
}
Block residual_block(const std::string& name, const Dims& d, const Shape& sh, const std::vector<Op>& fwd,
                     const std::vector<Op>& bwd) {
  return residual_block(name, d, sh, std::vector<Step>{compute(name, fwd)},
                        std::vector<Step>{compute(name + "-bwd", bwd)});
}

// Context parallelism of a Mamba-2 or Gated DeltaNet mixer (Megatron-Core's all-to-all CP: MambaContextParallel in
// megatron/core/ssm/mamba_context_parallel.py, a2a_cp_to_hp in gated_delta_net/gdn.py): after the input projection
// (the rank's s / cp tokens), an all-to-all over the CP group trades tokens for heads, so the conv1d and the scan (the
// delta rule) run over the whole sequence with heads / (tp cp); another brings the output back to the rank's tokens
// before the output projection (Mamba: the scan's y, gated norm after it; Gated DeltaNet: after its gated norm). The
// kernels' work is the same (linear in tokens x heads); the exchanges are what CP adds. Mamba's B and C are repeated
// cp / (groups / tp) times first when fewer groups than CP ranks share a TP rank.
struct CpMixer {
  std::vector<Step> forward, backward;
};
CpMixer cp_mixer(const TransformerSpec& m, const Dims& d, const Shape& sh, MixerKind mixer,
                 const std::vector<Op>& ops) {
  DTSIM_ASSERT(ops.size() == 5, "a mixer is in-proj, conv1d, kernel, gated norm, out-proj");
  double in_width = 0, out_width = 0;
  std::size_t back_from = 3;  // ops from here on run after the exchange back
  if (mixer == MixerKind::MAMBA2) {
    const auto& x = m.mamba;
    const double H = x.heads / d.t, G = x.groups / d.t, di = H * x.head_dim;
    const double repeat = G < sh.cp ? sh.cp / G : 1;
    in_width = 2 * di + 2 * G * x.state * repeat + H;
    out_width = di;
  } else {
    const auto& x = m.linear;
    const double Hv = x.value_heads / d.t, kd = x.key_heads / d.t * x.key_head_dim, vd = Hv * x.value_head_dim;
    in_width = 2 * kd + 2 * vd + 2 * Hv;
    out_width = vd;
    back_from = 4;
  }
  const std::vector<Op> front(ops.begin(), ops.begin() + 1),
      middle(ops.begin() + 1, ops.begin() + static_cast<std::ptrdiff_t>(back_from)),
      back(ops.begin() + static_cast<std::ptrdiff_t>(back_from), ops.end());
  const double in_bytes = d.T * in_width * d.e, out_bytes = d.T * out_width * d.e;
  CpMixer c;
  c.forward = {
      compute("mixer-in", front), group_coll("mixer-cp-a2a-in", CollectiveKind::ALL_TO_ALL, in_bytes, CommGroup::CP),
      compute("mixer-scan", middle),
      group_coll("mixer-cp-a2a-out", CollectiveKind::ALL_TO_ALL, out_bytes, CommGroup::CP), compute("mixer-out", back)};
  c.backward = {compute("mixer-out-bwd", backward_of(back, {})),
                group_coll("mixer-cp-a2a-out-bwd", CollectiveKind::ALL_TO_ALL, out_bytes, CommGroup::CP),
                compute("mixer-scan-bwd", backward_of(middle, {})),
                group_coll("mixer-cp-a2a-in-bwd", CollectiveKind::ALL_TO_ALL, in_bytes, CommGroup::CP),
                compute("mixer-in-bwd", backward_of(front, {}))};
  return c;
}

// A layer that is not a standard attention + FFN layer: a Megatron-Core hybrid block (Mamba-2, attention, MLP or MoE
// alone, each with its own norm and residual) or a whole layer of another mixer and an FFN (Gated DeltaNet + MoE).
// 1-D tensor parallelism only (the plan is refused otherwise); context parallelism as Megatron-Core runs it (cp_mixer;
// the attention blocks' as in standard layers).
LayerPasses hybrid_layer_passes(const TransformerSpec& m, const Shape& sh, LayerKind kind) {
  DTSIM_ASSERT(sh.layout == TpLayout::D1 || sh.tp == 1, "layer kind " << to_string(kind) << " with a grid TP layout");
  const Dims d = dims(m, sh);
  std::vector<Block> blocks;
  std::vector<Op> selective;  // an unfused attention core, recomputed under selective recompute
  if (kind.mixer == MixerKind::MAMBA2 || kind.mixer == MixerKind::GATED_DELTANET) {
    const auto f = kind.mixer == MixerKind::MAMBA2 ? mamba_ops(m, d) : gated_deltanet_ops(m, d);
    if (sh.cp > 1) {
      CpMixer c = cp_mixer(m, d, sh, kind.mixer, f);
      blocks.push_back(residual_block("mixer", d, sh, std::move(c.forward), std::move(c.backward)));
    } else {
      blocks.push_back(residual_block("mixer", d, sh, f, backward_of(f, {})));
    }
  } else if (kind.mixer != MixerKind::NONE) {  // attention alone (a '*' block)
    const AttentionProj ap = attention_proj(m, d);
    const double heads_rank = static_cast<double>(m.heads) / sh.tp;
    std::vector<Op> f = ap.in, b;
    std::vector<Op> core, core_b;
    if (m.attention == AttentionKind::FLASH) {
      auto [cf, cb] = flash_ops(d, heads_rank, d.sq, d.skv, ap.qk_dim, ap.v_dim, m.causal, 1.0,
                                kind.mixer == MixerKind::SLIDING_ATTENTION ? m.sliding_window : 0);
      core = {cf};
      core_b = {cb};
    } else {
      core = attention_core(d, static_cast<int>(heads_rank), m.head_dim(), fused_softmax(m, sh), m.attention_dropout);
      core_b = backward_of(core, {"qk", "av"});
      selective = core;
    }
    if (sh.cp > 1) {  // the standard layers' context-parallel attention (flash only: the plan refuses CP otherwise)
      const CpAttention cpa{sh, d, ap, core, core_b, ap.out, ring_flash_ops(m, d, heads_rank, ap)};
      std::vector<Step> fs, bs;
      cpa.forward(fs, {});
      cpa.backward(bs, {}, {});
      blocks.push_back(residual_block("attention", d, sh, std::move(fs), std::move(bs)));
    } else {
      append(f, core);
      f.push_back(ap.out);
      append(b, gemm_bwd(ap.out));
      append(b, core_b);
      append(b, backward_of(ap.in, {}));
      blocks.push_back(residual_block("attention", d, sh, f, b));
    }
  }
  if (kind.ffn == FfnKind::DENSE) {
    const double ffn_rank = d.f / d.t * (m.mlp == MlpKind::SWIGLU ? 2 : 1);
    Op fc1 = gemm("fc1", d.T, d.h, ffn_rank, d.e);
    if (m.mlp == MlpKind::SWIGLU) fc1.separate = {0.5, 0.5};  // unfused: w1, w3
    const Op act = mem(m.mlp == MlpKind::SWIGLU  ? "swiglu"
                       : m.mlp == MlpKind::RELU2 ? "squared-relu"
                                                 : "gelu",
                       (m.mlp == MlpKind::SWIGLU ? 3 : 2) * d.T * d.f / d.t * d.e);
    const Op fc2 = gemm("fc2", d.T, d.f / d.t, d.h, d.e);
    blocks.push_back(residual_block("mlp", d, sh, {fc1, act, fc2}, backward_of({fc1, act, fc2}, {})));
  } else if (kind.ffn == FfnKind::MOE) {
    // The MoE block's own steps (router, dispatch, experts, combine: transformer_costs' moe_block) between its norm
    // and its residual add; with TP it runs on the sequence-parallel shard (as in standard MoE layers).
    DTSIM_ASSERT(sh.sequence_parallel || sh.tp == 1, "a MoE block with tp > 1 needs sequence parallelism");
    const MoeBlock moe = moe_block(m, sh, d);
    const Op norm = mem("moe-norm", 2 * d.Tsp * d.h * d.e), add = mem("moe-residual", 3 * d.Tsp * d.h * d.e);
    Block b;
    b.forward.push_back(compute("moe-norm", {norm}));
    append_steps(b.forward, moe.forward);
    b.forward.push_back(compute("moe-residual", {add}));
    b.backward.push_back(compute("moe-residual-bwd", {mem("moe-residual-bwd", add.bytes)}));
    append_steps(b.backward, moe.backward);
    b.backward.push_back(compute("moe-norm-bwd", {mem("moe-norm-bwd", 1.5 * norm.bytes)}));
    blocks.push_back(std::move(b));
  }
  LayerPasses p;
  for (const auto& b : blocks) append_steps(p.forward, b.forward);
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) append_steps(p.backward, it->backward);
  apply_precision(p, m, sh);
  finish_backward(p, sh);
  if (sh.recompute == Recompute::FULL) {
    p.recompute = p.forward;
    for (auto& st : p.recompute) st.name = "recompute-" + st.name;
  } else if (sh.recompute == Recompute::SELECTIVE && sh.recompute_modules != 0) {
    p.recompute = module_recompute(p.forward, sh.recompute_modules);
  } else if (sh.recompute == Recompute::SELECTIVE && !selective.empty()) {
    p.recompute.push_back(compute("recompute-attention-core", selective));
  }
  return p;
}
}  // namespace

LayerPasses embedding_passes(const TransformerSpec& m, const Shape& sh) {
  const Dims d = dims(m, sh);
  const double act_bytes = d.T * d.h * d.e;
  LayerPasses p;
  // Vocabulary-parallel lookup, then a sum over TP ranks (reduce-scatter with SP), then dropout.
  p.forward.push_back(compute("embedding", {mem("embedding-gather", 2 * d.T * d.h * d.e)}));
  if (sh.tp > 1)
    p.forward.push_back(coll(sh.sequence_parallel ? "embedding-rs" : "embedding-ar",
                             sh.sequence_parallel ? CollectiveKind::REDUCE_SCATTER : CollectiveKind::ALL_REDUCE,
                             act_bytes));
  // Without dropout (TransformerSpec::hidden_dropout) PyTorch's dropout returns its input: no kernel either way.
  if (m.hidden_dropout) {
    p.forward.push_back(compute("embedding-dropout", {mem("embedding-dropout", d.Tsp * d.h * (2 * d.e + 1))}));
    p.backward.push_back(compute("embedding-bwd", {mem("embedding-dropout-bwd", d.Tsp * d.h * (2 * d.e + 1)),
                                                   mem("embedding-scatter-add", 3 * d.T * d.h * d.e)}));
  } else {
    p.backward.push_back(compute("embedding-bwd", {mem("embedding-scatter-add", 3 * d.T * d.h * d.e)}));
  }
  if (sh.tp > 1 && sh.sequence_parallel)
    p.backward.insert(p.backward.begin() + 1, coll("embedding-ag-bwd", CollectiveKind::ALL_GATHER, act_bytes));
  split_backward(p);
  return p;
}

LayerPasses head_passes(const TransformerSpec& m, const Shape& sh) {
  const Dims d = dims(m, sh);
  const double act_bytes = d.T * d.h * d.e;
  const double v_rank = d.v / d.t;
  LayerPasses p;
  Op ln = mem("final-ln", 2 * d.Tsp * d.h * d.e);
  Op logits = gemm("logits", d.T, d.h, v_rank, d.e);
  // Megatron's vocabulary-parallel cross entropy on an fp32 copy of the logits (output.float()), one pass over the
  // T x v/t shard per kernel: the copy (read e, write 4), max (read 4), subtract the max in place (read + write),
  // exp in place, sum (read 4), divide by the sum in place to keep the softmax for the backward = (e + 36) bytes.
  // An fp32 model's logits are fp32 already: .float() returns them uncopied (no ce-to-fp32, no cast back).
  const double tv = d.T * v_rank;
  const bool cast = d.e != 4;
  std::vector<Op> fwd = {logits};
  if (cast) fwd.push_back(mem("ce-to-fp32", tv * (d.e + 4)));
  for (const Op& op : {mem("ce-max", tv * 4), mem("ce-sub-max", tv * 8), mem("ce-exp", tv * 8), mem("ce-sum", tv * 4),
                       mem("ce-softmax", tv * 8)})
    fwd.push_back(op);
  p.forward.push_back(compute("final-ln", {ln}));
  if (sh.tp > 1 && sh.sequence_parallel) p.forward.push_back(coll("head-ag", CollectiveKind::ALL_GATHER, act_bytes));
  p.forward.push_back(compute("logits", fwd));
  // Max and sum of the softmax over the vocabulary shards: two small fp32 all-reduces of T values.
  if (sh.tp > 1) p.forward.push_back(coll("loss-ar", CollectiveKind::ALL_REDUCE, 2 * d.T * 4));
  // Backward: the saved softmax times the loss gradient in place (read + write 4), then the fp32 gradient back to
  // the logits' dtype (read 4, write e).
  std::vector<Op> b = {mem("ce-grad", tv * 8)};
  if (cast) b.push_back(mem("ce-grad-to-dtype", tv * (4 + d.e)));
  append(b, gemm_bwd(logits));
  p.backward.push_back(compute("logits-bwd", b));
  if (sh.tp > 1)
    p.backward.push_back(coll(sh.sequence_parallel ? "head-rs-bwd" : "head-ar-bwd",
                              sh.sequence_parallel ? CollectiveKind::REDUCE_SCATTER : CollectiveKind::ALL_REDUCE,
                              act_bytes));
  p.backward.push_back(compute("final-ln-bwd", {mem("final-ln-bwd", 1.5 * ln.bytes)}));
  finish_backward(p, sh);
  return p;
}

namespace {
void prefix_names(std::vector<Step>& steps, const std::string& prefix) {
  for (auto& st : steps) st.name = prefix + st.name;
}
}  // namespace

LayerPasses mtp_passes(const TransformerSpec& m, const Shape& sh) {
  const Dims d = dims(m, sh);
  const bool tp = sh.tp > 1, sp = sh.sequence_parallel;
  const double act_bytes = d.T * d.h * d.e;
  LayerPasses emb = embedding_passes(m, sh), layer = layer_passes(m, sh, m.mtp_kind()), head = head_passes(m, sh);
  for (auto* lp : {&emb, &layer, &head}) {
    prefix_names(lp->forward, "mtp-");
    prefix_names(lp->recompute, "mtp-");
    prefix_names(lp->backward, "mtp-");
  }
  // Megatron-Core's MultiTokenPredictionLayer: enorm and hnorm, concatenated, eh_proj (column-parallel 2h -> h), the
  // output gathered over the TP ranks and scattered back to the sequence-parallel shard, then the layer and the
  // shared output head. Backward: the gather's conjugate (an all-gather of the sequence shards), the projection's
  // gradients, its input gradients reduced (reduce-scatter to the shards, or all-reduced without sequence parallelism).
  const Op norms = mem("mtp-norms", 2 * 2 * d.Tsp * d.h * d.e);
  const Op proj = gemm("mtp-proj", d.T, 2 * d.h, d.h / d.t, d.e);
  LayerPasses p;
  append_steps(p.forward, emb.forward);
  p.forward.push_back(compute("mtp-norms", {norms}));
  if (tp && sp) p.forward.push_back(coll("mtp-proj-ag", CollectiveKind::ALL_GATHER, 2 * act_bytes));
  p.forward.push_back(compute("mtp-proj", {proj}));
  if (tp) p.forward.push_back(coll("mtp-proj-gather", CollectiveKind::ALL_GATHER, act_bytes));
  append_steps(p.forward, layer.forward);
  append_steps(p.forward, head.forward);
  p.recompute = layer.recompute;
  append_steps(p.backward, head.backward);
  append_steps(p.backward, layer.backward);
  if (tp && sp) p.backward.push_back(coll("mtp-proj-gather-bwd", CollectiveKind::ALL_GATHER, act_bytes));
  p.backward.push_back(compute("mtp-proj-bwd", gemm_bwd(proj)));
  if (tp)
    p.backward.push_back(coll(sp ? "mtp-proj-rs-bwd" : "mtp-proj-ar-bwd",
                              sp ? CollectiveKind::REDUCE_SCATTER : CollectiveKind::ALL_REDUCE, 2 * act_bytes));
  p.backward.push_back(compute("mtp-norms-bwd", {mem("mtp-norms-bwd", 1.5 * norms.bytes)}));
  append_steps(p.backward, emb.backward);
  finish_backward(p, sh);
  return p;
}

ActivationBytes mtp_activation_bytes(const TransformerSpec& m, const Shape& sh) {
  const Dims d = dims(m, sh);
  const ActivationBytes layer = layer_activation_bytes(m, sh, m.mtp_kind());
  // The embedding's and the head's, the two norms' inputs and the projection's (sequence-parallel shards), the layer's.
  return {embedding_activation_bytes(m, sh).stored + 4 * d.Tsp * d.h * d.e + layer.stored +
              head_activation_bytes(m, sh).stored,
          layer.transient};
}

MoeLayerParams mtp_params_per_rank(const TransformerSpec& m, int tp, int ep, int etp) {
  MoeLayerParams p = kind_params_per_rank(m, m.mtp_kind(), tp, ep, etp);
  const double h = m.hidden;
  p.dense += 2 * h * h / tp + 6 * h;
  return p;
}

void split_backward(LayerPasses& p) {
  p.backward_input.clear();
  p.backward_weight.clear();
  Step w = compute("weight-grad", {});
  double w_issues = 0;
  for (const auto& st : p.backward) {
    if (st.kind != Step::Kind::COMPUTE) {
      p.backward_input.push_back(st);
      continue;
    }
    Step in = st;
    in.ops.clear();
    const std::size_t w_before = w.ops.size();
    for (const auto& op : st.ops) (op.weight_grad ? w.ops : in.ops).push_back(op);
    // Host issues per op (more than one for a SequentialMLP's experts): each part keeps its ops' share.
    const double per_op = st.host_issues > 0 ? st.host_issues / static_cast<double>(st.ops.size()) : 1.0;
    if (st.host_issues > 0) in.host_issues = per_op * static_cast<double>(in.ops.size());
    w_issues += per_op * static_cast<double>(w.ops.size() - w_before);
    if (!in.ops.empty()) p.backward_input.push_back(in);
  }
  if (w_issues != static_cast<double>(w.ops.size())) w.host_issues = w_issues;  // some ops issue per expert
  if (!w.ops.empty()) p.backward_weight.push_back(w);
}

namespace {
// Bytes per element of a linear layer's input kept for its weight gradient. Transformer Engine's recipes (FP8
// delayed scaling, MXFP8, NVFP4: caches_lowp_weights) keep the input quantized, column-wise data only, instead of the
// high-precision tensor (transformer_engine/pytorch/module/linear.py: inputmat.update_usage(rowwise_usage=False,
// columnwise_usage=True); saved_inputmat = inputmat; layernorm_linear.py, layernorm_mlp.py and grouped_linear.py
// alike), unless save_original_input. torchao's Float8 linears keep the high-precision input
// (torchao/float8/float8_linear.py, matmul_with_hp_or_float8_args.forward: ctx.save_for_backward(input_hp, ...)).
double saved_input_bytes(const Shape& sh, double e) {
  return caches_lowp_weights(sh.precision) ? precision_bytes(sh.precision, e) : e;
}
// The quantized copy a linear layer keeps of an input that is also kept whole at e bytes (the attention core's output,
// the projection's input): saved_input_bytes, or nothing where the layer keeps the input itself.
double quantized_copy_bytes(const Shape& sh, double e) {
  const double q = saved_input_bytes(sh, e);
  return q < e ? q : 0;
}
// A dense MLP's inner tensors per token and unit of FFN width: FC1's output (the activation's input, e bytes, twice
// for a gated MLP) and the activation's output (FC2's input, q bytes: saved_input_bytes).
double mlp_inner_bytes_per_ffn(const TransformerSpec& m, double e, double q) {
  return e * (m.mlp == MlpKind::SWIGLU ? 2 : 1) + q;
}

// A MoE FFN's stored activations on one rank: router input and fp32 probabilities, the permuted tokens (expert FC1
// input), FC1 output (activation input), FC2 input, the expert outputs kept for the weighted unpermute; shared
// experts as a dense MLP of their width.
struct MoeActivations {
  double total = 0;
  double expert_act = 0;  ///< the routed experts' activation output (FC2 input)
  double shared = 0;      ///< the shared experts' inner activations
};
MoeActivations moe_activations(const TransformerSpec& m, const Shape& sh, const Dims& d) {
  const auto& x = m.moe;
  const double Tr = d.T / d.t,
               N = Tr * x.top_k * sh.ep_load_factor() * sampling_load_factor(x, sh, Tr * x.top_k * sh.etp) * sh.etp;
  const double fe = static_cast<double>(x.expert_ffn_hidden) / sh.etp;
  const double glu = m.mlp == MlpKind::SWIGLU ? 2 : 1;
  const double q = saved_input_bytes(sh, d.e);  // the expert FC1 and FC2 inputs (GEMM inputs)
  MoeActivations a;
  a.expert_act = N * fe * q;
  if (x.shared_ffn_hidden > 0) a.shared = d.T * x.shared_ffn_hidden / d.t * (glu * d.e + q);
  a.total = Tr * d.h * d.e + 2 * Tr * x.experts * 4 + N * d.h * q + N * fe * glu * d.e + a.expert_act +
            Tr * x.top_k * d.h * d.e + a.shared;
  return a;
}
double moe_activation_bytes(const TransformerSpec& m, const Shape& sh, const Dims& d) {
  return moe_activations(m, sh, d).total;
}

// What Megatron-Core's recompute_modules (sh.recompute_modules) free of one layer's stored activations, re-made
// during its backward: the attention core's inner tensors (the unfused scores, or FlashAttention's log-sum-exp;
// `core`), each transformer block's norm output (`norms` blocks), MLA's up-projected q, k, v, a dense MLP's inner
// activations (`mlp_inner`), the MoE block's (all of them, or the experts' activation output, or the shared
// experts'). Module inputs stay: the checkpoint keeps them.
double module_dropped_bytes(const TransformerSpec& m, const Shape& sh, const Dims& d, double core, int norms,
                            double mlp_inner, bool moe) {
  const unsigned mods = sh.recompute_modules;
  const double rep = sh.sequence_parallel ? 1 / d.t : 1;
  double drop = 0;
  if (mods & RECOMPUTE_CORE_ATTN) drop += core;
  if (mods & RECOMPUTE_LAYERNORM) drop += norms * d.T * d.h * d.e * rep;
  if ((mods & RECOMPUTE_MLA_UP_PROJ) && m.mla.enabled() && core > 0) {
    const AttentionProj ap = attention_proj(m, d);
    drop += d.T * (ap.q_w + ap.k_w + ap.v_w) * d.e;
  }
  if (mods & RECOMPUTE_MLP) drop += mlp_inner;
  if (moe) {
    const MoeActivations a = moe_activations(m, sh, d);
    if (mods & RECOMPUTE_MOE) {
      drop += a.total;
    } else {
      if (mods & RECOMPUTE_MOE_ACT) drop += a.expert_act;
      if (mods & RECOMPUTE_SHARED_EXPERTS) drop += a.shared;
    }
  }
  return drop;
}
}  // namespace

ActivationBytes layer_activation_bytes(const TransformerSpec& m, const Shape& sh, bool moe) {
  const Dims d = dims(m, sh);
  const double sbh = d.T * d.h;
  const double t = d.t;
  const bool flash = m.attention == AttentionKind::FLASH;
  const bool gpt = m.attention == AttentionKind::UNFUSED && !m.mla.enabled() && !m.moe.enabled();
  // Linear layers' inputs kept for the weight gradients: e bytes, or quantized (saved_input_bytes).
  const double q = saved_input_bytes(sh, d.e);
  const double proj_copy = quantized_copy_bytes(sh, d.e);  // the projection's copy of the core's output
  // Replicated across TP ranks unless sequence parallel (Korthikanti's "10 sbh" with e = 2):
  // two LayerNorm inputs (e), QKV input, FC1 input (q bytes each; a MoE block's is the router's and the dispatch's
  // input: e) and two dropout masks (1 byte each).
  const double masks = 2 * hidden_mask_bytes(m);  // the two hidden dropouts' masks
  double replicated = sbh * (2 * d.e + q + (moe ? d.e : q) + masks);
  // A parallel block (TransformerSpec::parallel_block) has one norm: one norm input, and QKV and FC1 read the same
  // normalised input (stored once); the two dropout masks stay.
  if (m.parallel_block) replicated = sbh * (d.e + q + masks);
  // Sharded by TP: Q, K, V (e), attention-projection input (e), MLP activation input (e) and FC2 input (q).
  double mlp_inner = d.T * d.f * mlp_inner_bytes_per_ffn(m, d.e, q);
  double sharded = 0;
  if (gpt) {
    sharded = (d.T * (d.h + 2 * d.kv) * d.e + sbh * (d.e + proj_copy) + mlp_inner) / t;
  } else {
    const AttentionProj ap = attention_proj(m, d);
    // q, k, v and the core's output (the projection input), split by tp; MLA's down-projection outputs (and q's
    // normalised copy) are duplicated on the TP ranks.
    sharded =
        d.T * (ap.q_w + ap.k_w + ap.v_w + ap.o_w) * d.e + d.T * ap.o_w * proj_copy + d.T * 2 * ap.duplicated_w * d.e;
    // Gated attention keeps the gate and the ungated core output for the gate's backward.
    if (m.attention_gate) sharded += 2 * d.T * ap.o_w * d.e;
    if (!moe) sharded += mlp_inner / t;
  }
  double scores = 0;
  if (flash) {
    // FlashAttention keeps only the log-sum-exp (fp32) of every query row besides q, k, v and the output.
    scores = d.b * (m.heads / t) * d.sq * 4;
  } else {
    // Attention scores: softmax output (e), dropout mask (1), dropout output (e) = 5 a s^2 b with e = 2. Without
    // a fused softmax (see attention_core) the softmax output is kept in fp32 (4 bytes).
    scores = d.a * d.sq * d.skv * d.b * kept_score_bytes(m, sh, d) / t;
  }
  const double moe_bytes = moe ? moe_activation_bytes(m, sh, d) : 0.0;
  if (sh.sequence_parallel) replicated /= t;
  ActivationBytes out;
  double full = replicated + sharded + scores + moe_bytes;
  switch (sh.recompute) {
    case Recompute::NONE: out.stored = full; break;
    case Recompute::SELECTIVE:
      if (sh.recompute_modules == RECOMPUTE_OP_SAC && !moe && !gpt) {
        // torchtitan's op-level policy (op_sac_recompute): not kept are both norms' outputs, h (the second norm's
        // input), k and the MLP's inner tensors but for its first GEMM's output (w1's, or a GELU MLP's FC1);
        // kept besides the layer's are w2's output (the 7th mm: T x h on every TP rank, before the reduce-scatter)
        // and, with sequence-parallel TP, the two reduce-scatter outputs.
        const double rep = sh.sequence_parallel ? 1 / t : 1;
        const AttentionProj ap = attention_proj(m, d);
        const double first_mlp_out = d.T * d.f / t * d.e;
        const double drop =
            sbh * (2 * q + d.e) * rep + d.T * ap.k_w * d.e + std::max(0.0, mlp_inner / t - first_mlp_out);
        const double kept = (m.mlp == MlpKind::SWIGLU ? sbh * d.e : 0) + (t > 1 ? 2 * sbh * d.e * rep : 0);
        out.stored = full - drop + kept;
        out.transient = drop;
        break;
      }
      if (sh.recompute_modules != 0) {
        // The dense MLP's inner activations: its FC1 output and activation output (its input is the norm's output).
        const double drop = module_dropped_bytes(m, sh, d, scores, 2, moe ? 0 : mlp_inner / t, moe);
        out.stored = full - drop;
        out.transient = drop;
        break;
      }
      out.stored = replicated + sharded + moe_bytes + (flash ? scores : 0);
      out.transient = flash ? 0 : scores;
      break;
    case Recompute::FULL:
      out.stored = sbh * d.e / (sh.sequence_parallel ? t : 1);  // the layer input only
      out.transient = full;
      break;
  }
  return out;
}

ActivationBytes layer_activation_bytes(const TransformerSpec& m, const Shape& sh, LayerKind kind) {
  if (kind.standard() || (kind.mixer == MixerKind::SLIDING_ATTENTION && kind.ffn != FfnKind::NONE))
    return layer_activation_bytes(m, sh, kind.ffn == FfnKind::MOE);  // a window does not change what is stored
  const Dims d = dims(m, sh);
  const double rep = sh.sequence_parallel ? 1 / d.t : 1;
  // Every block keeps its norm's input and the normalised input of its first GEMM (replicated unless sequence
  // parallel), as Korthikanti's attention and MLP halves do.
  double full = 0, scores = 0, mlp_inner = 0;
  int norms = 0;  // transformer blocks' norms (Megatron-Core's layernorm module; not the Mamba mixer's)
  const double q = saved_input_bytes(sh, d.e);  // the first GEMM's normalised input, the FC2 input
  auto block_inputs = [&](bool into_gemm = true) { full += d.T * d.h * (d.e + (into_gemm ? q : d.e)) * rep; };
  if (kind.mixer == MixerKind::MAMBA2) {
    // in_proj's output (z, x, B, C, dt), the scan's output y and the gated norm's output (out_proj's input); the
    // conv1d output and the chunk states are recomputed in the backward (mamba_ssm's fused path).
    const auto& x = m.mamba;
    const double H = x.heads / d.t, di = H * x.head_dim, gn = x.groups / d.t * x.state;
    block_inputs();
    full += d.T * (2 * di + 2 * gn + H + 2 * di) * d.e;
  } else if (kind.mixer == MixerKind::GATED_DELTANET) {
    // The projections' output, the conv1d output (q, k, v), the fp32 chunk-local A (C per token and value head), the
    // rule's output and the gated norm's output.
    const auto& x = m.linear;
    const double Hv = x.value_heads / d.t, kd = x.key_heads / d.t * x.key_head_dim, vd = Hv * x.value_head_dim;
    block_inputs();
    full += d.T * ((2 * kd + 2 * vd + 2 * Hv) + (2 * kd + vd) + 2 * vd) * d.e + d.T * Hv * x.chunk * 4;
  } else if (kind.mixer != MixerKind::NONE) {
    // Attention alone: q, k, v and the core's output; FlashAttention's log-sum-exp, or the unfused scores.
    const AttentionProj ap = attention_proj(m, d);
    block_inputs();
    ++norms;
    full += d.T * (ap.q_w + ap.k_w + ap.v_w + ap.o_w) * d.e + d.T * ap.o_w * quantized_copy_bytes(sh, d.e);
    if (m.attention == AttentionKind::FLASH) full += d.b * (m.heads / d.t) * d.sq * 4;
    else scores = d.a * d.sq * d.skv * d.b * kept_score_bytes(m, sh, d) / d.t;
  }
  if (kind.ffn == FfnKind::DENSE) {
    block_inputs();
    ++norms;
    mlp_inner = d.T * d.f * mlp_inner_bytes_per_ffn(m, d.e, q) / d.t;
    full += mlp_inner;
  } else if (kind.ffn == FfnKind::MOE) {
    // As the MoE half of a standard MoE layer (moe_activation_bytes); its normalised input feeds the router.
    block_inputs(false);
    ++norms;
    full += moe_activation_bytes(m, sh, d);
  }
  ActivationBytes out;
  switch (sh.recompute) {
    case Recompute::NONE: out.stored = full + scores; break;
    case Recompute::SELECTIVE:
      if (sh.recompute_modules != 0) {
        // FlashAttention's log-sum-exp is the core's inner tensor here; the unfused scores are.
        const bool attn = kind.mixer == MixerKind::ATTENTION || kind.mixer == MixerKind::SLIDING_ATTENTION;
        const double lse = attn && m.attention == AttentionKind::FLASH ? d.b * (m.heads / d.t) * d.sq * 4 : 0;
        const double drop =
            module_dropped_bytes(m, sh, d, attn ? scores + lse : 0, norms, mlp_inner, kind.ffn == FfnKind::MOE);
        out.stored = full + scores - drop;
        out.transient = drop;
        break;
      }
      out.stored = full;
      out.transient = scores;
      break;
    case Recompute::FULL:
      out.stored = d.T * d.h * d.e * rep;  // the layer input only
      out.transient = full + scores;
      break;
  }
  return out;
}

MoeLayerParams kind_params_per_rank(const TransformerSpec& m, LayerKind kind, int tp, int ep, int etp,
                                    int weight_replicas) {
  if (kind == LayerKind{MixerKind::ATTENTION, FfnKind::DENSE})
    return {layer_params_per_rank(m, tp, weight_replicas), 0};
  if (kind == LayerKind{MixerKind::ATTENTION, FfnKind::MOE}) return moe_layer_params_per_rank(m, tp, ep, etp);
  // Split by tp but the norms (one per block) and the router; the routed experts by ep x etp.
  const double h = m.hidden;
  const double norms = 2 * h * ((kind.mixer != MixerKind::NONE ? 1 : 0) + (kind.ffn != FfnKind::NONE ? 1 : 0));
  const double routed = static_cast<double>(m.kind_expert_params(kind));
  const double router = kind.ffn == FfnKind::MOE ? h * m.moe.experts : 0;
  MoeLayerParams p;
  p.dense = (static_cast<double>(m.kind_params(kind)) - routed - router - norms) / tp + router + norms;
  p.expert = routed / ep / etp;
  return p;
}

std::vector<LayerKind> other_kinds(const TransformerSpec& m) {
  std::vector<LayerKind> out;
  for (int l = 0; l < m.num_layers; ++l) {
    const LayerKind k = m.layer_kind(l);
    if (!base_kind(k) && std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  }
  return out;
}

const char* atom_name(int atom) {
  static const char* const names[kLayerAtoms] = {"ln1-qkv", "attention-core", "proj", "ln2-fc1", "fc2"};
  DTSIM_ASSERT(atom >= 0 && atom < kLayerAtoms, "atom " << atom);
  return names[atom];
}

namespace {
std::vector<Step> slice_steps(const std::vector<Step>& steps, int lo, int hi) {
  std::vector<Step> out;
  for (const Step& st : steps) {
    if (st.kind == Step::Kind::COMPUTE) {
      Step part = st;
      part.ops.clear();
      for (const Op& o : st.ops) {
        DTSIM_ASSERT(o.atom >= 0, "op '" << o.name << "' of step '" << st.name << "' has no atom");
        if (o.atom >= lo && o.atom < hi) part.ops.push_back(o);
      }
      if (!part.ops.empty()) out.push_back(std::move(part));
    } else {
      DTSIM_ASSERT(st.kind == Step::Kind::TP_COLLECTIVE && st.atom >= 0, "step '" << st.name << "' has no atom");
      if (st.atom >= lo && st.atom < hi) out.push_back(st);
    }
  }
  return out;
}

/// Per-atom activation bytes of a dense layer kept for the backward without recompute, split into the part that
/// selective recompute drops (the attention scores of the unfused core) and the rest.
struct AtomActivations {
  double kept[kLayerAtoms] = {};
  double scores = 0;  ///< atom 1
};
AtomActivations atom_activations(const TransformerSpec& m, const Shape& sh) {
  const Dims d = dims(m, sh);
  const double sbh = d.T * d.h, t = d.t;
  const double rep = sh.sequence_parallel ? 1 / t : 1;  // replicated kernels' inputs (sequence parallel: a 1/t)
  const AttentionProj ap = attention_proj(m, d);
  const double glu = m.mlp == MlpKind::SWIGLU ? 2 : 1;
  AtomActivations a;
  // Korthikanti's replicated terms (LayerNorm inputs, QKV and FC1 inputs, dropout masks), by the atom that keeps
  // them; the TP-split ones: q, k, v (core inputs), the projection input, the activation and FC2 inputs.
  const double q = saved_input_bytes(sh, d.e);  // QKV, FC1 and FC2 inputs; the projection's copy of its input
  a.kept[0] = sbh * (d.e + q) * rep;
  a.kept[1] = d.T * (ap.q_w + ap.k_w + ap.v_w) * d.e;
  const double mask = hidden_mask_bytes(m);  // a hidden dropout's mask
  a.kept[2] = sbh * mask * rep + d.T * ap.o_w * (d.e + quantized_copy_bytes(sh, d.e));
  a.kept[3] = sbh * (d.e + q) * rep + d.T * d.f * d.e * glu / t;
  a.kept[4] = sbh * mask * rep + d.T * d.f * q / t;
  if (m.attention == AttentionKind::FLASH) a.kept[1] += d.b * (m.heads / t) * d.sq * 4;
  else a.scores = d.a * d.sq * d.skv * d.b * kept_score_bytes(m, sh, d) / t;
  return a;
}
}  // namespace

LayerPasses slice_atoms(const LayerPasses& layer, int lo, int hi) {
  DTSIM_ASSERT(0 <= lo && lo < hi && hi <= kLayerAtoms, "atoms [" << lo << ", " << hi << ")");
  LayerPasses p;
  p.forward = slice_steps(layer.forward, lo, hi);
  p.recompute = slice_steps(layer.recompute, lo, hi);
  p.backward = slice_steps(layer.backward, lo, hi);
  split_backward(p);
  return p;
}

double cut_extra_bytes(const TransformerSpec& m, const Shape& sh, int a) {
  const Dims d = dims(m, sh);
  const AttentionProj ap = attention_proj(m, d);
  if (a == 1) return d.T * (ap.q_w + ap.k_w + ap.v_w) * d.e;
  if (a == 2) return d.T * ap.o_w * d.e;
  if (a == 4) return d.T * d.f / d.t * d.e;
  return 0;
}

ActivationBytes layer_activation_bytes_atoms(const TransformerSpec& m, const Shape& sh, int lo, int hi) {
  DTSIM_ASSERT(0 <= lo && lo < hi && hi <= kLayerAtoms, "atoms [" << lo << ", " << hi << ")");
  DTSIM_ASSERT(!m.moe.enabled() && !m.mla.enabled(), "atoms of a dense layer");
  const AtomActivations a = atom_activations(m, sh);
  double kept = 0;
  for (int i = lo; i < hi; ++i) kept += a.kept[i];
  const double scores = lo <= 1 && 1 < hi ? a.scores : 0;
  ActivationBytes out;
  switch (sh.recompute) {
    case Recompute::NONE: out.stored = kept + scores; break;
    case Recompute::SELECTIVE:
      out.stored = kept;
      out.transient = scores;
      break;
    case Recompute::FULL: {
      // The slice's inputs: the hidden state and what else crosses the cut before it.
      const Dims d = dims(m, sh);
      out.stored = d.T * d.h * d.e / (sh.sequence_parallel ? d.t : 1) + cut_extra_bytes(m, sh, lo);
      out.transient = kept + scores;
      break;
    }
  }
  return out;
}

double layer_params_per_rank_atoms(const TransformerSpec& m, int tp, int lo, int hi) {
  DTSIM_ASSERT(0 <= lo && lo < hi && hi <= kLayerAtoms, "atoms [" << lo << ", " << hi << ")");
  const double h = m.hidden, qd = m.q_dim(), kv = static_cast<double>(m.kv_heads) * m.head_dim(), f = m.ffn_hidden,
               glu = m.mlp == MlpKind::SWIGLU ? 2 : 1;
  const bool bias = m.mlp == MlpKind::GELU;  // as TransformerSpec::layer_params
  // Per atom: TP-split weights (and column-parallel biases), and what every TP rank holds (norms, row-parallel biases).
  const double split[kLayerAtoms] = {h * (qd + 2 * kv) + (bias ? qd + 2 * kv : 0), 0, qd * h,
                                     glu * h * f + (bias ? glu * f : 0), f * h};
  const double whole[kLayerAtoms] = {2 * h, 0, bias ? h : 0, 2 * h, bias ? h : 0};
  double p = 0;
  for (int i = lo; i < hi; ++i) p += split[i] / tp + whole[i];
  return p;
}

ActivationBytes embedding_activation_bytes(const TransformerSpec& m, const Shape& sh) {
  const Dims d = dims(m, sh);
  return {hidden_mask_bytes(m) * d.Tsp * d.h, 0};  // dropout mask of the embedding output
}

ActivationBytes head_activation_bytes(const TransformerSpec& m, const Shape& sh) {
  const Dims d = dims(m, sh);
  // Final LN input (e), logits (e) and their fp32 softmax copy (4) per vocabulary shard (Korthikanti's 4sbv/t); an
  // fp32 model's softmax is computed in place in the logits themselves (no copy): 4 bytes per logit.
  return {d.Tsp * d.h * d.e + d.T * d.v / d.t * (d.e == 4 ? 4 : d.e + 4), 0};
}

double layer_replicated_params(const TransformerSpec& m) {
  const double h = m.hidden;
  return 4 * h + (m.mlp == MlpKind::GELU ? 2 * h : 0);  // norms; row-parallel biases
}

double layer_params_per_rank(const TransformerSpec& m, int tp, int weight_replicas) {
  const double replicated = layer_replicated_params(m);
  return (static_cast<double>(m.layer_params()) - replicated) * weight_replicas / tp + replicated;
}

MoeLayerParams moe_layer_params_per_rank(const TransformerSpec& m, int tp, int ep, int etp) {
  DTSIM_ASSERT(m.moe.enabled(), "MoE parameters of the dense model '" << m.name << "'");
  MoeLayerParams p;
  const double h = m.hidden;
  const double norms = 4 * h;
  const double routed = static_cast<double>(m.moe.experts) * static_cast<double>(m.expert_params());
  const double router = h * m.moe.experts;
  const double rest = static_cast<double>(m.moe_layer_params()) - routed - router - norms;
  p.dense = rest / tp + router + norms;
  p.expert = routed / ep / etp;
  return p;
}

double first_stage_extra_params(const TransformerSpec& m, int tp) {
  double pos = m.learned_pos_embedding ? static_cast<double>(m.seq_len) * m.hidden : 0;
  return static_cast<double>(m.vocab) * m.hidden / tp + pos;
}

double last_stage_extra_params(const TransformerSpec& m, int tp, int pp) {
  double head = static_cast<double>(m.vocab) * m.hidden / tp;
  double extra = 2.0 * m.hidden;  // final layer norm
  // Untied: the output projection. Tied with pp > 1: Megatron keeps a copy of the word embedding on the last
  // stage (gradients summed with the first stage). Tied with pp == 1: already counted on the first stage.
  if (!m.tied_embeddings || pp > 1) extra += head;
  return extra;
}

double gemm_monotone_flops(const Calibration& cal) {
  const double p = cal.gemm_efficiency_exponent;
  return p > 1 ? cal.gemm_half_efficiency_flops * std::pow(p - 1, 1 / p) : 0;
}

namespace {
/// max f^p / (f^p + half^p), held at f* = half (p - 1)^(1/p) below it where p > 1 (see gemm_efficiency).
double saturating_efficiency(double flops, double max, double half, double p) {
  if (flops <= 0 || half <= 0) return max;
  if (p == 1.0) return max * flops / (flops + half);
  const double f = std::max(flops, p > 1 ? half * std::pow(p - 1, 1 / p) : 0.0);
  return max / (1.0 + std::pow(half / f, p));
}
}  // namespace

double gemm_efficiency(double flops, const Calibration& cal) {
  // f^p / (f^p + h^p) = 1 / (1 + (h / f)^p). With p > 1 the time f / eff(f) ~ f^(1-p) h^p grows again as f shrinks
  // below f* = h (p - 1)^(1/p), where d/df [f + h^p f^(1-p)] = 0: a smaller GEMM would take longer than a larger
  // one. Below f* the efficiency stays at eff(f*), so time falls with size (gemm_monotone_flops).
  return saturating_efficiency(flops, cal.gemm_efficiency_max, cal.gemm_half_efficiency_flops,
                               cal.gemm_efficiency_exponent);
}

double gemm_curve_flops(double flops, double peak_flops, const GpuSpec& gpu) {
  const double ref = gpu.peak_bf16_flops > 0 ? gpu.peak_bf16_flops : gpu.peak_fp16_flops;
  return ref > 0 && peak_flops > 0 ? flops * ref / peak_flops : flops;
}

double flash_attention_efficiency(const Op& op, const Calibration& cal) {
  // FlashAttention-2 kernels (the stack's fa2_attention) keep their one measured fraction; the fused kernels
  // (cuDNN's, FlashAttention-3) follow the curve of their direction where the calibration has one.
  if (cal.fa2_attention && cal.fa2_attention_efficiency > 0) return cal.fa2_attention_efficiency;
  if (op.attention_kv <= 0) return cal.flash_attention_efficiency;
  const bool backward = op.name.size() > 4 && op.name.compare(op.name.size() - 4, 4, "-bwd") == 0;
  if (!backward)
    return saturating_efficiency(op.attention_kv, cal.flash_attention_efficiency, cal.flash_attention_half_kv,
                                 cal.flash_attention_exponent);
  return saturating_efficiency(op.attention_kv, cal.flash_attention_efficiency * cal.flash_attention_backward_ratio,
                               cal.flash_attention_backward_half_kv, cal.flash_attention_backward_exponent);
}

double gemm_alignment_bytes(const Op& op, DType dtype) {
  if (!op.gemm || op.m <= 0) return 16;
  double align = 16;
  for (double dim : {op.m, op.k, op.n}) {
    const double bytes = std::round(dim) * dtype_bytes(dtype);
    while (align > 1 && std::fmod(bytes, align) != 0) align /= 2;
  }
  return align;
}

bool gemm_misaligned(const Op& op, DType dtype) { return gemm_alignment_bytes(op, dtype) < 16; }

double gemm_alignment_factor(const Op& op, DType dtype, const Calibration& cal) {
  const double align = gemm_alignment_bytes(op, dtype);
  if (align >= 16) return 1.0;
  // Each halving of the operands' vector width below 16 bytes costs the same factor; the calibration's value is
  // that of 2-byte alignment (three halvings: an odd fp16 dimension).
  return std::pow(cal.gemm_misaligned_efficiency, std::log2(16.0 / align) / 3.0);
}

double precision_bytes(Precision p, double dtype_bytes) {
  switch (p) {
    case Precision::BF16: return dtype_bytes;
    case Precision::FP8_DELAYED:
    case Precision::FP8_CURRENT:
    case Precision::FP8_ROWWISE: return 1.0;
    case Precision::MXFP8: return 1.0 + 1.0 / 32;  // an E8M0 scale per 32 elements
    case Precision::NVFP4: return 0.5 + 1.0 / 16;  // an E4M3 scale per 16 elements
  }
  return dtype_bytes;
}

namespace {
bool linear_weight_gemm(const std::string& name) {
  static const std::vector<std::string> names = {"qkv",        "proj",       "fc1",        "fc2",     "q-down",
                                                 "q-up",       "q",          "kv-down",    "kv-up",   "expert-fc1",
                                                 "expert-fc2", "shared-fc1", "shared-fc2", "in-proj", "out-proj"};
  return std::find(names.begin(), names.end(), name) != names.end();
}
// The quantization kernels of one tensor of n elements (dtype e bytes) under recipe p, producing the row-wise copy
// and the column-wise (transposed) copy the backward's other GEMM needs: an amax pass where the scale comes from the
// tensor itself (current, rowwise: one per direction, NVFP4's per-tensor amax), then the fused cast(-transpose).
std::vector<Op> quantize_ops(const std::string& name, Precision p, double n, double e) {
  const double q = precision_bytes(p, e);
  switch (p) {
    case Precision::BF16: return {};
    case Precision::FP8_DELAYED: return {mem(name + "-cast", n * (e + 2 * q))};
    case Precision::FP8_CURRENT: return {mem(name + "-amax", n * e), mem(name + "-cast", n * (e + 2 * q))};
    case Precision::FP8_ROWWISE: return {mem(name + "-amax", 2 * n * e), mem(name + "-cast", 2 * n * (e + q))};
    case Precision::MXFP8: return {mem(name + "-cast", n * (e + 2 * q))};
    case Precision::NVFP4:
      // The weight-gradient operands also go through the 16x16 random Hadamard transform (fused, one more read).
      return {mem(name + "-amax", n * e), mem(name + "-cast", n * (2 * e + 2 * q))};
  }
  return {};
}
bool needs_amax_reduction(Precision p) { return p == Precision::FP8_CURRENT || p == Precision::NVFP4; }
}  // namespace

void apply_precision(LayerPasses& p, const TransformerSpec& m, const Shape& sh) {
  if (sh.precision == Precision::BF16) return;
  const double e = dtype_bytes(m.dtype), q = precision_bytes(sh.precision, e);
  // The column-parallel GEMMs' sequence-parallel all-gather carries the low-precision copy (quantized on each rank's
  // shard) except under torchao's rowwise recipe: its tensor parallelism is plain DTensor TP, so the all-gather moves
  // the high-precision activation and each rank quantizes the whole gathered tensor (torchtitan
  // models/llama3/infra/parallelize.py @ f4048f8e1, 2025-06: "float8 all-gather with TP is only supported for
  // tensorwise float8 scaling recipes. For rowwise recipes, we use regular TP and all-gather happens in high
  // precision").
  const bool sp_gather =
      sh.tp > 1 && sh.sequence_parallel && sh.layout == TpLayout::D1 && sh.precision != Precision::FP8_ROWWISE;
  // torchao's rowwise backward GEMMs (no fast accumulation) run the tensorwise cuBLAS kernel with unit scales and
  // rescale the output by the two operands' row scales in a kernel of their own (torchao float8/float8_ops.py
  // addmm_float8_unwrapped: "The rowwise CUTLASS-based kernel is so slow without fast-accum that we'd rather use the
  // tensorwise cuBLAS-based kernel and do the scaling manually afterwards"; pytorch/ao issue 2184, 2025-05: under
  // torch.compile one extra Triton kernel per GEMM). The forward GEMM (fast accumulation) stays rowwise.
  const bool rowwise = sh.precision == Precision::FP8_ROWWISE;
  auto convert = [&](std::vector<Step>& steps, bool forward) {
    std::vector<Step> out;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      Step st = steps[i];
      if (st.kind == Step::Kind::COMPUTE) {
        std::vector<Op> ops;
        for (Op op : st.ops) {
          const bool dgrad = op.name.size() > 6 && op.name.compare(op.name.size() - 6, 6, "-dgrad") == 0;
          const bool wgrad = op.name.size() > 6 && op.name.compare(op.name.size() - 6, 6, "-wgrad") == 0;
          const std::string base = dgrad || wgrad ? op.name.substr(0, op.name.size() - 6) : op.name;
          if (!op.gemm || !linear_weight_gemm(base)) {
            ops.push_back(op);
            continue;
          }
          if (forward && !dgrad && !wgrad) {
            // The input (its local sequence shard when it is all-gathered in low precision) and the weight.
            const double x = op.m * op.k * op.batch /
                             (sp_gather && (base == "qkv" || base == "fc1" || base == "in-proj") ? sh.tp : 1);
            for (auto& k : quantize_ops(op.name + "-x", sh.precision, x, e)) ops.push_back(k);
            for (auto& k : quantize_ops(op.name + "-w", sh.precision, op.k * op.n * op.batch * sh.weight_cast_share, e))
              ops.push_back(k);
          } else if (dgrad) {  // the output gradient dY (m x k of the dgrad GEMM); wgrad reuses its transpose
            for (auto& k : quantize_ops(base + "-dy", sh.precision, op.m * op.k * op.batch, e)) ops.push_back(k);
          }
          const bool rescale = rowwise && (dgrad || wgrad) && !op.grouped;  // the tensorwise kernel, then a rescale
          op.precision = rescale ? Precision::FP8_CURRENT : sh.precision;
          op.bytes *= (2 * q + e) / (3 * e);  // both operands in the low-precision format, the output in dtype
          ops.push_back(op);
          if (rescale)
            ops.push_back(mem(op.name + "-rescale", 2 * op.batch * op.m * op.n * e));  // output read, written
        }
        st.ops = std::move(ops);
      } else if (forward && sp_gather && st.kind == Step::Kind::TP_COLLECTIVE &&
                 st.collective == CollectiveKind::ALL_GATHER && st.group == CommGroup::TP &&
                 (st.name == "attn-ag" || st.name == "mlp-ag" || st.name == "shared-ag" || st.name == "mixer-ag" ||
                  st.name == "attention-ag" || st.name == "block-ag")) {
        // The column-parallel GEMM's input is quantized on each rank's shard and all-gathered in the low-precision
        // format (Transformer Engine, torchao Float8 tensor parallelism); a per-tensor scale needs the shards' amax
        // all-reduced first so that every shard uses the same scale.
        if (needs_amax_reduction(sh.precision)) out.push_back(coll(st.name + "-amax", CollectiveKind::ALL_REDUCE, 4));
        st.collective_bytes *= q / e;
      } else if (rowwise && st.kind == Step::Kind::TP_COLLECTIVE && st.group == CommGroup::TP &&
                 st.collective == CollectiveKind::ALL_GATHER) {
        st.gather_unfused = true;
      }
      out.push_back(std::move(st));
    }
    steps = std::move(out);
  };
  convert(p.forward, true);
  convert(p.backward, false);
}

bool tp_overlappable(const Step& st, CollectiveKind kind) {
  return st.kind == Step::Kind::TP_COLLECTIVE && st.group == CommGroup::TP && st.axis == TpAxis::ALL &&
         st.group_size == 0 && st.collective == kind && !(kind == CollectiveKind::ALL_GATHER && st.gather_unfused);
}

int gemm_index(const std::vector<Op>& ops, bool first) {
  const int n = static_cast<int>(ops.size());
  for (int k = 0; k < n; ++k) {
    const int i = first ? k : n - 1 - k;
    if (ops[static_cast<std::size_t>(i)].gemm) return i;
  }
  return -1;
}

int tp_overlap_pieces(CollectiveKind kind, int tp, int chunks) {
  if (chunks > 0) return chunks;
  return kind == CollectiveKind::REDUCE_SCATTER ? kTePipelineSplits : tp;
}

bool tp_overlap_bulk(const Op& last_gemm) { return last_gemm.weight_grad; }

Op gemm_piece(Op op, int k) {
  op.flops /= k;
  op.bytes /= k;
  op.accumulate_bytes /= k;  // a weight gradient's fp32 accumulation: each piece adds into its own rows
  op.m /= k;
  op.pieces *= k;
  return op;
}

double gemm_peak_flops(const GpuSpec& gpu, DType dtype, const Calibration& cal) {
  // FP32 GEMMs on TF32 tensor cores (the stack's tf32_matmul): half the dense FP16/BF16 peak on A100, H100 and later
  // (156 of 312, 494 of 989 TFLOP/s), the convention of validate/calibrate's compute fit too.
  if (dtype == DType::FP32 && cal.tf32_matmul && gpu.peak_bf16_flops > 0) return gpu.peak_bf16_flops / 2;
  return gpu.peak_flops(dtype);
}

double grouped_expected_tiles(double tokens, double tile) {
  DTSIM_ASSERT(tile > 0 && tokens > 0, "expected tiles of " << tokens << " tokens in tiles of " << tile);
  // E[ceil(X / tile)] = sum over j >= 0 of P(X > j tile), X ~ Normal(tokens, tokens): a group's token count under
  // balanced routing is binomial over many routed slots, its variance about its mean. Tiles far below the mean are
  // always filled (counted at once), so the sum has a few terms at any size.
  const double sd = std::sqrt(tokens), lo = tokens - 8 * sd, hi = tokens + 8 * sd;
  const double first = lo > 0 ? std::floor(lo / tile) : 0;  // j < first: P = 1
  double tiles = first;
  for (double j = first; j * tile < hi; j += 1) tiles += 0.5 * std::erfc((j * tile - tokens) / (sd * std::sqrt(2.0)));
  return tiles;
}

double single_kernel_grouped_s(const Op& op, const GpuSpec& gpu, double peak_flops, const Calibration& cal) {
  DTSIM_ASSERT(op.grouped && gpu.sm_count > 0 && peak_flops > 0, "single-kernel grouped GEMM '" << op.name << "'");
  // One persistent kernel over every group's tiles (CUTLASS's grouped GEMM as PyTorch's torch._grouped_mm runs it,
  // aten/src/ATen/native/cuda/GroupMM.cu): each SM takes a tile_m x tile_n output tile at a time, so the kernel runs
  // ceil(tiles / SMs) waves, each as long as one tile's main loop at the SM's share of the peak at the dense GEMM
  // curve's asymptote (nothing fitted on grouped GEMMs). Tokens are the rows of the forward and the activation
  // gradient (op.m, padded per group to whole tiles, binomially spread) and the reduction of the weight gradient
  // (op.k, padded per group to tile_k). Measured on one H200 (tests/data/h200/moe_grouped_2026-12-04.csv; the check
  // in tests/oracle/test_grouped_gemm_h200.cpp).
  const double groups = op.batch, tm = cal.gemm_tile_m, tn = cal.gemm_tile_n, tk = cal.gemm_tile_k;
  double tiles = 0, tile_flops = 0;
  if (op.weight_grad) {  // output m x n per group, the tokens its reduction
    tiles = groups * std::ceil(op.m / tm) * std::ceil(op.n / tn);
    tile_flops = 2 * tm * tn * tk * grouped_expected_tiles(op.k, tk);
  } else {
    tiles = groups * grouped_expected_tiles(op.m, tm) * std::ceil(op.n / tn);
    tile_flops = 2 * tm * tn * op.k;
  }
  // Expected tile counts carry the binomial tails of improbable extra tiles: a last wave of under 0.1% of the SMs'
  // tiles is such a tail, not a wave.
  const double waves = std::max(1.0, std::ceil(tiles / gpu.sm_count - 1e-3));
  return waves * tile_flops / (peak_flops / gpu.sm_count * cal.gemm_efficiency_max);
}

double grouped_tile_fill(double tokens, double tile) {
  if (tile <= 0 || tokens <= 0) return 1.0;
  const double tiles = grouped_expected_tiles(tokens, tile);
  return tiles > 0 ? std::min(1.0, tokens / (tiles * tile)) : 1.0;
}

namespace {
// A low-precision GEMM's tensor-core peak (FP8 or FP4) and its format's efficiency scale of the calibration.
std::pair<double, double> lowp_peak_and_scale(const Op& op, const GpuSpec& gpu, const Calibration& cal) {
  const bool fp4 = op.precision == Precision::NVFP4;
  const double peak = fp4 ? gpu.peak_fp4_flops : gpu.peak_fp8_flops;
  DTSIM_ASSERT(peak > 0, "a " << to_string(op.precision) << " GEMM on gpu '" << gpu.name << "' without that peak");
  return {peak, fp4                                      ? cal.fp4_gemm_efficiency_scale
                : op.precision == Precision::FP8_ROWWISE ? cal.fp8_rowwise_gemm_efficiency_scale
                                                         : cal.fp8_gemm_efficiency_scale};
}
}  // namespace

double op_time_s(const Op& op, const GpuSpec& gpu, DType dtype, const Calibration& cal) {
  if (!cal.fused_projections && op.gemm && op.separate.size() > 1) {
    // Separate linear modules (Op::separate; torchtitan/models/llama/model.py at e846b6946: wq, wk, wv and w1, w3,
    // each an nn.Linear): one GEMM per module at the efficiency of its own size, each reading the whole input (the
    // bytes scale with the module's footprint); their activation gradients are summed by autograd, one add of the
    // input-sized gradient (read two, write one) per module after the first.
    const auto footprint = [](const Op& o) { return o.m * o.k + o.k * o.n + o.m * o.n; };
    double t = 0;
    for (double share : op.separate) {
      Op part = op;
      part.separate.clear();
      (op.separate_on_k ? part.k : part.n) *= share;
      part.flops *= share;
      part.accumulate_bytes *= share;  // a weight gradient's fp32 accumulation: its own columns
      part.bytes = footprint(op) > 0 ? op.bytes * footprint(part) / footprint(op) : op.bytes * share;
      t += op_time_s(part, gpu, dtype, cal);
    }
    if (op.separate_on_k) {
      const double sums = static_cast<double>(op.separate.size() - 1);
      t += sums * (3 * op.m * op.n * op.batch * dtype_bytes(dtype) / (gpu.hbm_Bps * cal.memory_bandwidth_efficiency) +
                   cal.kernel_launch_s);
    }
    return t;
  }
  if (op.scatter_src_bytes > 0 && !cal.moe_permute_fusion) {
    // Eager unpermute (torchtitan's moe.py out.scatter_add; Megatron-Core's moe_utils.unpermute scatter_add_): two
    // kernels, the probability multiply over the routed tokens and the atomic scatter-add into the tokens.
    const double src = op.scatter_src_bytes, out = std::max(0.0, op.bytes - 2 * src);
    return 2 * src / (gpu.hbm_Bps * cal.memory_bandwidth_efficiency) +
           (src + 2 * out) / (gpu.hbm_Bps * cal.scatter_add_bandwidth_efficiency) + 2 * cal.kernel_launch_s;
  }
  const double bytes = cal.eager_rmsnorm && op.eager_norm_bytes > 0 ? op.eager_norm_bytes : op.bytes;
  double t_mem = bytes / (gpu.hbm_Bps * cal.memory_bandwidth_efficiency);
  double t_flop = 0;
  // A grouped GEMM's groups run as separate GEMMs: each at the efficiency of its own size, its tokens (the rows; the
  // reduction of a weight gradient) padded to whole tiles. Checked against SimuMax's measured B200 grouped GEMMs
  // (MooreThreads/SimuMax configs/system/b200_bf16_ceperm.json; docs/modelling.md "Grouped GEMMs").
  const double groups = op.grouped ? op.batch : 1.0;
  const double fill =
      op.grouped ? grouped_tile_fill(op.weight_grad ? op.k : op.m, op.weight_grad ? cal.gemm_tile_k : cal.gemm_tile_m)
                 : 1.0;
  if (op.flash) t_flop = op.flops / (gpu.peak_flops(dtype) * flash_attention_efficiency(op, cal));
  else if (op.gemm && op.grouped && cal.grouped_gemm_single_kernel && gpu.sm_count > 0 && cal.gemm_tile_m > 0 &&
           cal.gemm_tile_k > 0 && cal.gemm_tile_n > 0) {
    const auto [peak, scale] = op.precision != Precision::BF16 ? lowp_peak_and_scale(op, gpu, cal)
                                                               : std::pair{gemm_peak_flops(gpu, dtype, cal), 1.0};
    t_flop = single_kernel_grouped_s(op, gpu, peak * scale, cal);
  } else if (op.gemm && op.precision != Precision::BF16) {
    const auto [peak, scale] = lowp_peak_and_scale(op, gpu, cal);
    // A low-precision GEMM runs through the BF16 efficiency curve at the size of the BF16 GEMM of the same duration
    // (flops x peak_bf16 / peak_lowp): its fixed costs (tile quantisation, launch, epilogue) are the same in time
    // while its FLOPs go twice (four times) as fast, so it saturates at a larger size. On one H200 (2026-11-26,
    // tests/data/h200/gemm_sweep_2026-11-26.csv) this fits torch._scaled_mm's 105 transformer shapes to a median
    // 6.1% (tensorwise) and 6.6% (rowwise) against 18% for the unshifted curve.
    const double f_equiv = gemm_curve_flops(op.flops, peak, gpu) * op.pieces / groups;
    t_flop = op.flops / (peak * gemm_efficiency(f_equiv, cal) * scale * fill);
  } else if (op.gemm) {
    // FP16 and BF16 read the curve at their own size; FP32 (on the CUDA cores, or TF32's half rate) at that of the
    // BF16 GEMM of the same duration (gemm_curve_flops).
    const double peak = gemm_peak_flops(gpu, dtype, cal);
    t_flop = op.flops / (peak * gemm_efficiency(gemm_curve_flops(op.flops, peak, gpu) * op.pieces / groups, cal) *
                         gemm_alignment_factor(op, dtype, cal) * fill);
  }
  // Sustained load: the tensor cores at the power-capped clock, not the burst clock the efficiencies were measured at
  // (Calibration::sustained_tensor_ratio; profiler/bench/sustained.py). Memory-bound time keeps HBM speed.
  if (op.gemm || op.flash) t_flop /= cal.sustained_tensor_ratio;
  // The fp32 accumulation of a fused weight gradient: its epilogue's read-modify-write of the output. A dense GEMM's
  // persistent kernel overlaps each tile's epilogue with the next tile's main loop, so the traffic joins the
  // roofline; a grouped GEMM's per-group kernels run it after their main loop, so it adds. SimuMax's measured B200
  // GEMMs show both: fp32 instead of bf16 accumulation costs a dense 8192^2 x 4096-token weight gradient 4% (0.479 vs
  // 0.498 of peak; 16% if it were serial), while the grouped ones fall to 0.33 and 0.09 of peak from 0.51 and 0.20
  // forward (serial epilogue: 0.31 and 0.08).
  const double t_acc =
      cal.gemm_accumulate_epilogue ? op.accumulate_bytes / (gpu.hbm_Bps * cal.memory_bandwidth_efficiency) : 0.0;
  if (op.grouped) return std::max(t_mem, t_flop) + t_acc + cal.kernel_launch_s;
  return std::max(t_mem + t_acc, t_flop) + cal.kernel_launch_s;
}

double step_time_s(const Step& step, const GpuSpec& gpu, DType dtype, const Calibration& cal) {
  DTSIM_ASSERT(step.kind != Step::Kind::TP_COLLECTIVE, "step_time_s on a collective step '" << step.name << "'");
  double t = 0;
  for (const auto& op : step.ops) t += op_time_s(op, gpu, dtype, cal);
  return step.kind == Step::Kind::RING_ATTENTION ? t * step.ring_steps : t;
}

double tensor_time_share(const TransformerSpec& m, const GpuSpec& gpu, const Calibration& cal) {
  Calibration burst = cal;
  burst.sustained_tensor_ratio = 1;
  double tensor = 0, all = 0;
  auto add = [&](const LayerPasses& lp, double weight) {
    for (const auto* steps : {&lp.forward, &lp.recompute, &lp.backward})
      for (const auto& st : *steps)
        for (const auto& op : st.ops) {
          const double t = op_time_s(op, gpu, m.dtype, burst) * weight;
          all += t;
          if (op.gemm || op.flash) tensor += t;
        }
  };
  // One sequence, no TP / CP / EP split, no recompute; norms as one fused kernel (a stack's eager composite norms,
  // Calibration::eager_rmsnorm, would lower the share with memory-bound time that runs at the same clock).
  Shape sh;
  sh.torch_compile = true;
  const int moe = m.moe.enabled() ? m.num_moe_layers() : 0;
  if (m.num_layers > moe) add(layer_passes(m, sh), m.num_layers - moe);
  if (moe > 0) add(layer_passes(m, sh, true), moe);
  return all > 0 ? tensor / all : 0.0;
}

double sustained_ratio_at_share(double full_load_ratio, double share) {
  const double x = std::clamp((share - 0.5) / 0.5, 0.0, 1.0);
  return 1 - (1 - full_load_ratio) * x;
}

Calibration at_tensor_share(Calibration cal, const TransformerSpec& m, const GpuSpec& gpu) {
  if (cal.sustained_tensor_ratio < 1)
    cal.sustained_tensor_ratio = sustained_ratio_at_share(cal.sustained_tensor_ratio, tensor_time_share(m, gpu, cal));
  return cal;
}

double model_forward_flops_per_sample(const TransformerSpec& m, double routed_kept_fraction) {
  DTSIM_ASSERT(routed_kept_fraction > 0 && routed_kept_fraction <= 1, "kept fraction " << routed_kept_fraction);
  Shape sh;  // b = 1, t = 1, balanced routing
  double f = 0;
  if (!m.layer_pattern.empty()) {
    // Per layer kind (hybrid and sliding-window models).
    Shape kept = sh;
    if (routed_kept_fraction < 1) kept.ep_loads = {routed_kept_fraction};
    for (int l = 0; l < m.num_layers; ++l) {
      const LayerKind k = m.layer_kind(l);
      for (const auto& s : layer_passes(m, k.ffn == FfnKind::MOE ? kept : sh, k).forward) f += s.flops();
    }
    for (const auto& s : head_passes(m, sh).forward) f += s.flops();
    if (m.mtp_layers > 0)
      for (const auto& s : mtp_passes(m, m.mtp_kind().ffn == FfnKind::MOE ? kept : sh).forward)
        f += m.mtp_layers * s.flops();
    return f;
  }
  for (const auto& s : layer_passes(m, sh).forward) f += s.flops();
  f *= m.num_layers - m.num_moe_layers();
  if (m.num_moe_layers() > 0) {
    double fm = 0;
    // Tokens dropped by a capacity factor skip the experts: not the model's work (Megatron-Core's capacity
    // dropping, moe_utils.py); one EP rank holding the kept share describes the layer.
    Shape kept = sh;
    if (routed_kept_fraction < 1) kept.ep_loads = {routed_kept_fraction};
    for (const auto& s : layer_passes(m, kept, true).forward) fm += s.flops();
    f += fm * m.num_moe_layers();
  }
  for (const auto& s : head_passes(m, sh).forward) f += s.flops();
  if (m.mtp_layers > 0) {
    Shape kept = sh;
    if (routed_kept_fraction < 1) kept.ep_loads = {routed_kept_fraction};
    for (const auto& s : mtp_passes(m, m.mtp_kind().ffn == FfnKind::MOE ? kept : sh).forward)
      f += m.mtp_layers * s.flops();
  }
  return f;
}

}  // namespace dtsim::cost
