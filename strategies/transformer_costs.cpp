#include "strategies/transformer_costs.hpp"

#include <algorithm>
#include <cmath>

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
  sh.layout = plan.tp_layout;
  sh.tp_depth = plan.tp_depth;
  return sh;
}

double Step::flops() const {
  double f = 0;
  for (const auto& op : ops) f += op.flops;
  return f;
}

namespace {
struct Dims {
  double b, s, h, kv, f, a, t, e, T, Tsp, v;
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
  d.T = d.b * d.s;                                 // tokens of the micro-batch
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
// Backward of a GEMM: input gradient and weight gradient, each as many FLOPs as the forward.
std::vector<Op> gemm_bwd(const Op& fwd) {
  // dgrad: dY (m x n) * W^T (n x k); wgrad: X^T (k x m) * dY (m x n).
  return {{fwd.name + "-dgrad", true, fwd.flops, fwd.bytes, false, fwd.m, fwd.n, fwd.k, fwd.batch},
          {fwd.name + "-wgrad", true, fwd.flops, fwd.bytes, true, fwd.k, fwd.m, fwd.n, fwd.batch}};
}
void append(std::vector<Op>& dst, const std::vector<Op>& src) { dst.insert(dst.end(), src.begin(), src.end()); }

// Whether the layer's softmax is a fused kernel: Megatron's rule (megatron_fused_softmax) for 1-D TP; the
// 2-D/2.5-D/3-D layouts keep their fused kernel.
bool fused_softmax(const TransformerSpec& m, const Shape& sh) {
  if (sh.layout != TpLayout::D1 && sh.tp > 1) return true;
  return megatron_fused_softmax(sh.micro_batch * (m.heads / sh.tp), m.seq_len, dtype_bytes(m.dtype));
}

// Attention core (QK^T, scale-mask-softmax, dropout, AV) per TP rank, as in Megatron-LM (no flash attention).
// The softmax is one fused kernel, or (fused = false) PyTorch's fallback: cast to fp32, scale, masked_fill,
// softmax, cast back — five kernels over the fp32 scores (read e write 4, read 4 write 4, read 4 + mask 1
// write 4, read 4 write 4, read 4 write e).
std::vector<Op> attention_core(const Dims& d, int heads_per_rank, double head_dim, bool fused) {
  double bh = d.b * heads_per_rank;
  double scores = bh * d.s * d.s;  // elements of the score matrix
  // QK^T and AV multiply two activations: their backward has no weight gradient.
  std::vector<Op> ops = {{"qk", true, 2 * bh * d.s * d.s * head_dim, (2 * bh * d.s * head_dim + scores) * d.e, false,
                          d.s, head_dim, d.s, bh}};
  if (fused) {
    ops.push_back(mem("softmax", 2 * scores * d.e));
  } else {
    ops.push_back(mem("softmax-to-fp32", scores * (d.e + 4)));
    ops.push_back(mem("softmax-scale", scores * 8));
    ops.push_back(mem("softmax-mask", scores * 9));
    ops.push_back(mem("softmax", scores * 8));
    ops.push_back(mem("softmax-to-half", scores * (4 + d.e)));
  }
  ops.push_back(mem("attn-dropout", scores * (2 * d.e + 1)));
  ops.push_back({"av", true, 2 * bh * d.s * d.s * head_dim, (scores + 2 * bh * d.s * head_dim) * d.e, false, d.s, d.s,
                 head_dim, bh});
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
  const std::vector<Op> core = attention_core(dl, m.heads / q, m.head_dim(), true);
  Op ln1 = mem("ln1", 2 * T * d.h * e / t);
  Op dropres1 = mem("dropout-residual1", T * d.h * (3 * e + 1) / t);
  Op ln2 = mem("ln2", 2 * T * d.h * e / t);
  Op act = mem(m.mlp == MlpKind::SWIGLU ? "swiglu" : "gelu", (m.mlp == MlpKind::SWIGLU ? 3 : 2) * T * d.f / t * e);
  Op dropres2 = mem("dropout-residual2", T * d.h * (3 * e + 1) / t);
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

  split_backward(p);
  if (sh.recompute == Recompute::FULL) {
    p.recompute = p.forward;
    for (auto& s : p.recompute) s.name = "recompute-" + s.name;
  } else if (sh.recompute == Recompute::SELECTIVE) {
    p.recompute.push_back(compute("recompute-attention-core", core));
  }
  return p;
}
}  // namespace

LayerPasses layer_passes(const TransformerSpec& m, const Shape& sh) {
  if (sh.layout != TpLayout::D1 && sh.tp > 1) return grid_layer_passes(m, sh);
  const Dims d = dims(m, sh);
  const int heads_rank = m.heads / sh.tp;
  const double hd = m.head_dim();
  const bool sp = sh.sequence_parallel;
  const bool tp = sh.tp > 1;
  const double act_bytes = d.T * d.h * d.e;  // one full hidden-state tensor of the micro-batch
  const double ffn_rank = d.f / d.t * (m.mlp == MlpKind::SWIGLU ? 2 : 1);

  Op ln1 = mem("ln1", 2 * d.Tsp * d.h * d.e);
  Op qkv = gemm("qkv", d.T, d.h, (d.h + 2 * d.kv) / d.t, d.e);
  std::vector<Op> core = attention_core(d, heads_rank, hd, fused_softmax(m, sh));
  Op proj = gemm("proj", d.T, d.h / d.t, d.h, d.e);
  Op dropres1 = mem("dropout-residual1", d.Tsp * d.h * (3 * d.e + 1));
  Op ln2 = mem("ln2", 2 * d.Tsp * d.h * d.e);
  Op fc1 = gemm("fc1", d.T, d.h, ffn_rank, d.e);
  Op act =
      mem(m.mlp == MlpKind::SWIGLU ? "swiglu" : "gelu", (m.mlp == MlpKind::SWIGLU ? 3 : 2) * d.T * d.f / d.t * d.e);
  Op fc2 = gemm("fc2", d.T, d.f / d.t, d.h, d.e);
  Op dropres2 = mem("dropout-residual2", d.Tsp * d.h * (3 * d.e + 1));

  LayerPasses p;
  // Forward. Without SP: attention block, all-reduce, MLP block, all-reduce (Megatron's g operator).
  // With SP: the all-reduces become reduce-scatter + all-gather around the replicated kernels.
  std::vector<Op> attn_ops = {qkv};
  append(attn_ops, core);
  attn_ops.push_back(proj);
  if (sp) {
    p.forward.push_back(compute("ln1", {ln1}));
    p.forward.push_back(coll("attn-ag", CollectiveKind::ALL_GATHER, act_bytes));
    p.forward.push_back(compute("attention", attn_ops));
    p.forward.push_back(coll("attn-rs", CollectiveKind::REDUCE_SCATTER, act_bytes));
    p.forward.push_back(compute("ln2", {dropres1, ln2}));
    p.forward.push_back(coll("mlp-ag", CollectiveKind::ALL_GATHER, act_bytes));
    p.forward.push_back(compute("mlp", {fc1, act, fc2}));
    p.forward.push_back(coll("mlp-rs", CollectiveKind::REDUCE_SCATTER, act_bytes));
    p.forward.push_back(compute("residual", {dropres2}));
  } else {
    std::vector<Op> a = {ln1};
    append(a, attn_ops);
    p.forward.push_back(compute("attention", a));
    if (tp) p.forward.push_back(coll("attn-ar", CollectiveKind::ALL_REDUCE, act_bytes));
    p.forward.push_back(compute("mlp", {dropres1, ln2, fc1, act, fc2, dropres2}));
    if (tp) p.forward.push_back(coll("mlp-ar", CollectiveKind::ALL_REDUCE, act_bytes));
  }

  // Backward: the conjugate collectives (all-reduce of input gradients; AG <-> RS with SP).
  std::vector<Op> mlp_b;
  append(mlp_b, gemm_bwd(fc2));
  mlp_b.push_back(mem(act.name + "-bwd", 1.5 * act.bytes));
  append(mlp_b, gemm_bwd(fc1));
  std::vector<Op> attn_b;
  append(attn_b, gemm_bwd(proj));
  for (auto it = core.rbegin(); it != core.rend(); ++it) {
    if (it->gemm) {
      auto b = gemm_bwd(*it);
      b[1].name = it->name + "-dgrad2";
      b[1].weight_grad = false;
      append(attn_b, b);
    } else attn_b.push_back(mem(it->name + "-bwd", 1.5 * it->bytes));
  }
  append(attn_b, gemm_bwd(qkv));
  Op dropres2_b = mem("dropout-residual2-bwd", d.Tsp * d.h * (3 * d.e + 1));
  Op ln2_b = mem("ln2-bwd", 1.5 * ln2.bytes);
  Op dropres1_b = mem("dropout-residual1-bwd", d.Tsp * d.h * (3 * d.e + 1));
  Op ln1_b = mem("ln1-bwd", 1.5 * ln1.bytes);
  if (sp) {
    p.backward.push_back(compute("residual-bwd", {dropres2_b}));
    p.backward.push_back(coll("mlp-ag-bwd", CollectiveKind::ALL_GATHER, act_bytes));
    p.backward.push_back(compute("mlp-bwd", mlp_b));
    p.backward.push_back(coll("mlp-rs-bwd", CollectiveKind::REDUCE_SCATTER, act_bytes));
    p.backward.push_back(compute("ln2-bwd", {ln2_b, dropres1_b}));
    p.backward.push_back(coll("attn-ag-bwd", CollectiveKind::ALL_GATHER, act_bytes));
    p.backward.push_back(compute("attention-bwd", attn_b));
    p.backward.push_back(coll("attn-rs-bwd", CollectiveKind::REDUCE_SCATTER, act_bytes));
    p.backward.push_back(compute("ln1-bwd", {ln1_b}));
  } else {
    std::vector<Op> mb = {dropres2_b};
    append(mb, mlp_b);
    p.backward.push_back(compute("mlp-bwd", mb));
    if (tp) p.backward.push_back(coll("mlp-ar-bwd", CollectiveKind::ALL_REDUCE, act_bytes));
    std::vector<Op> ab = {ln2_b, dropres1_b};
    append(ab, attn_b);
    ab.push_back(ln1_b);
    p.backward.push_back(compute("attention-bwd", ab));
    if (tp) p.backward.push_back(coll("attn-ar-bwd", CollectiveKind::ALL_REDUCE, act_bytes));
  }

  split_backward(p);
  if (sh.recompute == Recompute::FULL) {
    p.recompute = p.forward;
    for (auto& s : p.recompute) s.name = "recompute-" + s.name;
  } else if (sh.recompute == Recompute::SELECTIVE) {
    p.recompute.push_back(compute("recompute-attention-core", core));
  }
  return p;
}

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
  p.forward.push_back(compute("embedding-dropout", {mem("embedding-dropout", d.Tsp * d.h * (2 * d.e + 1))}));
  p.backward.push_back(compute("embedding-bwd", {mem("embedding-dropout-bwd", d.Tsp * d.h * (2 * d.e + 1)),
                                                 mem("embedding-scatter-add", 3 * d.T * d.h * d.e)}));
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
  const double tv = d.T * v_rank;
  std::vector<Op> fwd = {logits,
                         mem("ce-to-fp32", tv * (d.e + 4)),
                         mem("ce-max", tv * 4),
                         mem("ce-sub-max", tv * 8),
                         mem("ce-exp", tv * 8),
                         mem("ce-sum", tv * 4),
                         mem("ce-softmax", tv * 8)};
  p.forward.push_back(compute("final-ln", {ln}));
  if (sh.tp > 1 && sh.sequence_parallel) p.forward.push_back(coll("head-ag", CollectiveKind::ALL_GATHER, act_bytes));
  p.forward.push_back(compute("logits", fwd));
  // Max and sum of the softmax over the vocabulary shards: two small fp32 all-reduces of T values.
  if (sh.tp > 1) p.forward.push_back(coll("loss-ar", CollectiveKind::ALL_REDUCE, 2 * d.T * 4));
  // Backward: the saved softmax times the loss gradient in place (read + write 4), then the fp32 gradient back to
  // the logits' dtype (read 4, write e).
  std::vector<Op> b = {mem("ce-grad", tv * 8), mem("ce-grad-to-dtype", tv * (4 + d.e))};
  append(b, gemm_bwd(logits));
  p.backward.push_back(compute("logits-bwd", b));
  if (sh.tp > 1)
    p.backward.push_back(coll(sh.sequence_parallel ? "head-rs-bwd" : "head-ar-bwd",
                              sh.sequence_parallel ? CollectiveKind::REDUCE_SCATTER : CollectiveKind::ALL_REDUCE,
                              act_bytes));
  p.backward.push_back(compute("final-ln-bwd", {mem("final-ln-bwd", 1.5 * ln.bytes)}));
  split_backward(p);
  return p;
}

void split_backward(LayerPasses& p) {
  p.backward_input.clear();
  p.backward_weight.clear();
  Step w = compute("weight-grad", {});
  for (const auto& st : p.backward) {
    if (st.kind != Step::Kind::COMPUTE) {
      p.backward_input.push_back(st);
      continue;
    }
    Step in = st;
    in.ops.clear();
    for (const auto& op : st.ops) (op.weight_grad ? w.ops : in.ops).push_back(op);
    if (!in.ops.empty()) p.backward_input.push_back(in);
  }
  if (!w.ops.empty()) p.backward_weight.push_back(w);
}

ActivationBytes layer_activation_bytes(const TransformerSpec& m, const Shape& sh) {
  const Dims d = dims(m, sh);
  const double sbh = d.T * d.h;
  const double t = d.t;
  // Replicated across TP ranks unless sequence parallel (Korthikanti's "10 sbh" with e = 2):
  // two LayerNorm inputs, QKV input, FC1 input (e bytes each) and two dropout masks (1 byte each).
  double replicated = sbh * (4 * d.e + 2);
  // Sharded by TP: Q, K, V (e), attention-projection input (e), MLP activation input and FC2 input.
  double mlp_inner = d.T * d.f * d.e * (m.mlp == MlpKind::SWIGLU ? 3 : 2);
  double sharded = (d.T * (d.h + 2 * d.kv) * d.e + sbh * d.e + mlp_inner) / t;
  // Attention scores: softmax output (e), dropout mask (1), dropout output (e) = 5 a s^2 b with e = 2. Without
  // a fused softmax (see attention_core) the softmax output is kept in fp32 (4 bytes).
  double scores = d.a * d.s * d.s * d.b * ((fused_softmax(m, sh) ? d.e : 4) + 1 + d.e) / t;
  if (sh.sequence_parallel) replicated /= t;
  ActivationBytes out;
  double full = replicated + sharded + scores;
  switch (sh.recompute) {
    case Recompute::NONE: out.stored = full; break;
    case Recompute::SELECTIVE:
      out.stored = replicated + sharded;
      out.transient = scores;
      break;
    case Recompute::FULL:
      out.stored = sbh * d.e / (sh.sequence_parallel ? t : 1);  // the layer input only
      out.transient = full;
      break;
  }
  return out;
}

ActivationBytes embedding_activation_bytes(const TransformerSpec& m, const Shape& sh) {
  const Dims d = dims(m, sh);
  return {d.Tsp * d.h, 0};  // dropout mask of the embedding output
}

ActivationBytes head_activation_bytes(const TransformerSpec& m, const Shape& sh) {
  const Dims d = dims(m, sh);
  // Final LN input (e), logits (e) and their fp32 softmax copy (4) per vocabulary shard (Korthikanti's 4sbv/t).
  return {d.Tsp * d.h * d.e + d.T * d.v / d.t * (d.e + 4), 0};
}

double layer_params_per_rank(const TransformerSpec& m, int tp, int weight_replicas) {
  const double h = m.hidden;
  double replicated = 4 * h + (m.mlp == MlpKind::SWIGLU ? 0 : 2 * h);  // norms; row-parallel biases
  return (static_cast<double>(m.layer_params()) - replicated) * weight_replicas / tp + replicated;
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

double gemm_efficiency(double flops, const Calibration& cal) {
  if (flops <= 0) return cal.gemm_efficiency_max;
  if (cal.gemm_efficiency_exponent == 1.0)
    return cal.gemm_efficiency_max * flops / (flops + cal.gemm_half_efficiency_flops);
  // f^p / (f^p + h^p) = 1 / (1 + (h / f)^p)
  return cal.gemm_efficiency_max /
         (1.0 + std::pow(cal.gemm_half_efficiency_flops / flops, cal.gemm_efficiency_exponent));
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

double op_time_s(const Op& op, const GpuSpec& gpu, DType dtype, const Calibration& cal) {
  double t_mem = op.bytes / (gpu.hbm_Bps * cal.memory_bandwidth_efficiency);
  double t_flop = 0;
  if (op.gemm)
    t_flop =
        op.flops / (gpu.peak_flops(dtype) * gemm_efficiency(op.flops, cal) * gemm_alignment_factor(op, dtype, cal));
  return std::max(t_mem, t_flop) + cal.kernel_launch_s;
}

double step_time_s(const Step& step, const GpuSpec& gpu, DType dtype, const Calibration& cal) {
  DTSIM_ASSERT(step.kind == Step::Kind::COMPUTE, "step_time_s on a collective step '" << step.name << "'");
  double t = 0;
  for (const auto& op : step.ops) t += op_time_s(op, gpu, dtype, cal);
  return t;
}

double model_forward_flops_per_sample(const TransformerSpec& m) {
  Shape sh;  // b = 1, t = 1
  double f = 0;
  for (const auto& s : layer_passes(m, sh).forward) f += s.flops();
  f *= m.num_layers;
  for (const auto& s : head_passes(m, sh).forward) f += s.flops();
  return f;
}

}  // namespace dtsim::cost
