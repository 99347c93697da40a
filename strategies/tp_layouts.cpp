#include "strategies/tp_layouts.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "traces/error.hpp"

namespace dtsim::tp {
namespace {

double ring_factor(const std::string& kind, int g) {
  const double f = static_cast<double>(g - 1) / g;
  // [Δ §2] ring all-reduce = reduce-scatter + all-gather; the others move S over g-1 links in total.
  return kind == "all-reduce" ? 2.0 * f : f;
}

Collective coll(const char* kind, const char* axis, int g, double bytes, int count = 1) {
  return Collective{kind, axis, g, bytes, count};
}

void check_shape(const LinearShape& s) {
  if (!(s.batch_tokens > 0 && s.h_in > 0 && s.h_out > 0 && s.elem_bytes > 0))
    throw ConfigError("tensor-parallel linear: batch_tokens, h_in, h_out and elem_bytes must be > 0");
}

}  // namespace

bool valid_degree(Layout layout, int devices, int depth) { return tp_grid_side(layout, devices, depth) > 0; }

int grid_side(Layout layout, int devices, int depth) {
  const int q = tp_grid_side(layout, devices, depth);
  if (q == 0)
    throw ConfigError("tensor-parallel layout " + to_string(layout) + " cannot use " + std::to_string(devices) +
                      " devices" + (layout == Layout::D2_5 ? " with depth " + std::to_string(depth) : "") +
                      " (1d: any p >= 1; 2d: p = q^2; 2.5d: p = q^2*d; 3d: p = q^3)");
  return q;
}

double ring_bytes_sent(const Collective& c) { return ring_factor(c.kind, c.group_size) * c.bytes * c.count; }

LinearCost linear_cost(Layout layout, int devices, int depth, const LinearShape& s, Split1D split) {
  check_shape(s);
  const int q = grid_side(layout, devices, depth);
  const double e = s.elem_bytes, B = s.batch_tokens;
  const double X = B * s.h_in * e, A = s.h_in * s.h_out * e, Y = B * s.h_out * e;  // full tensors, bytes
  const double p = devices;

  LinearCost c{};
  // Compute is divided by p in every layout [D §2 table, "compute" column].
  c.flops_per_device = 2.0 * B * s.h_in * s.h_out / p;

  switch (layout) {
    case Layout::D1: {
      // [D][T §2] Megatron: A divided by p. Column split: X replicated, Y split by columns, forward
      // nothing, backward all-reduce of dX [B, h_in] ("f" operator). Row split: X split by columns,
      // forward all-reduce of Y [B, h_out] ("g" operator), backward nothing. A column/row pair therefore
      // costs one all-reduce forward and one backward; non-GEMM activations stay unsplit.
      c.weight_bytes_per_device = A / p;
      if (split == Split1D::Column) {
        c.activation_in_bytes_per_device = X;
        c.activation_out_bytes_per_device = Y / p;
        if (devices > 1) c.backward.push_back(coll("all-reduce", "tp", devices, X));
      } else {
        c.activation_in_bytes_per_device = X / p;
        c.activation_out_bytes_per_device = Y;
        if (devices > 1) c.forward.push_back(coll("all-reduce", "tp", devices, Y));
      }
      break;
    }
    case Layout::D2:
    case Layout::D2_5: {
      // [D §2] 2-D SUMMA (Optimus): p = q², X, A, Y in q×q blocks. 2.5-D (Tesseract): p = q²·d, A in
      // q×q blocks replicated over the d depth layers, X and Y in (d·q)×q blocks, i.e. d independent
      // 2-D SUMMAs on B/d tokens each. With d = 1 the 2.5-D formulas reduce to the 2-D ones.
      const int d = layout == Layout::D2 ? 1 : depth;
      const double xb = X / (static_cast<double>(d) * q * q);  // one block of X  [B/(dq), h_in/q]
      const double yb = Y / (static_cast<double>(d) * q * q);  // one block of Y  [B/(dq), h_out/q]
      const double ab = A / (static_cast<double>(q) * q);      // one block of A  [h_in/q, h_out/q]
      c.weight_bytes_per_device = ab;                          // [D] params O(1/q²) for both
      c.activation_in_bytes_per_device = xb;
      c.activation_out_bytes_per_device = yb;
      if (q > 1) {
        // Forward Y_ij = Σ_t X_it·A_tj, q steps: X_it broadcast along row i, A_tj along column j [D].
        c.forward.push_back(coll("broadcast", "row", q, xb, q));
        c.forward.push_back(coll("broadcast", "col", q, ab, q));
        // Backward [D "two more SUMMA-style products", Δ exact operations]:
        //  dX_it = Σ_j dY_ij·A_tjᵀ: A_tj broadcast along column j, partial dX_it reduced along row i;
        //  dA_tj = Σ_i X_itᵀ·dY_ij: X_it broadcast along row i, partial dA_tj reduced along column j.
        c.backward.push_back(coll("broadcast", "col", q, ab, q));
        c.backward.push_back(coll("reduce", "row", q, xb, q));
        c.backward.push_back(coll("broadcast", "row", q, xb, q));
        c.backward.push_back(coll("reduce", "col", q, ab, q));
      }
      // [Δ] 2.5-D: every depth layer holds the same A block but saw different tokens, so the weight
      // gradient block is all-reduced over the depth axis (not in the docs' bandwidth column, which
      // counts only the SUMMA traffic 3(q−1)(d+1)/(dq)).
      if (d > 1) c.backward.push_back(coll("all-reduce", "depth", d, ab));
      // Closed form [Δ]: SUMMA traffic = 3(q−1)/q · q · (xb + ab) = 3(q−1)/q²·(B·h_in/d + h_in·h_out)·e
      // (the docs' 2-D coefficient 6(q−1)/q when B·h_in = h_in·h_out, per tensor of size S/q),
      // plus 2(d−1)/d · h_in·h_out/q² · e for 2.5-D.
      break;
    }
    case Layout::D3: {
      // [D][C §2] p = q³, device (i,j,l) holds X_ijl [B/q², h_in/q], A_lji [h_in/q², h_out/q] (1/q of
      // A_lj) and Y_ijl: 1/q³ of every tensor. Axis names: "input" = j, "weight" = i, "output" = l.
      const double q2 = static_cast<double>(q) * q, q3 = q2 * q;
      c.weight_bytes_per_device = A / q3;
      c.activation_in_bytes_per_device = X / q3;
      c.activation_out_bytes_per_device = Y / q3;
      if (q > 1) {
        // Forward [D][C]: all-gather X over j → X_il [B/q, h_in/q]; all-gather A over i → A_lj;
        // local GEMM [B/q, h_in/q]×[h_in/q, h_out/q] (= 1/q³ of the FLOPs); reduce-scatter the partial
        // Y_il-block [B/q, h_out/q] over l → Y_ijl. Sizes below are the gathered / unreduced buffers.
        c.forward.push_back(coll("all-gather", "input", q, X / q2));
        c.forward.push_back(coll("all-gather", "weight", q, A / q2));
        c.forward.push_back(coll("reduce-scatter", "output", q, Y / q2));
        // Backward [C _Linear3D.backward]: all-gather dY over the output axis; dX = dY·Aᵀ
        // reduce-scatter over the input axis; dA = Xᵀ·dY reduce-scatter over the weight axis (async).
        c.backward.push_back(coll("all-gather", "output", q, Y / q2));
        c.backward.push_back(coll("reduce-scatter", "input", q, X / q2));
        c.backward.push_back(coll("reduce-scatter", "weight", q, A / q2));
      }
      // Total [Δ §2] = 2(q−1)/q³ · (B·h_in + B·h_out + h_in·h_out) · e over 6 collectives.
      break;
    }
  }

  c.comm_bytes_per_device = 0;
  for (const auto& k : c.forward) c.comm_bytes_per_device += ring_bytes_sent(k);
  for (const auto& k : c.backward) c.comm_bytes_per_device += ring_bytes_sent(k);
  return c;
}

LayerTpCost transformer_layer_cost(Layout layout, int devices, int depth, double batch_tokens, double hidden,
                                   double ffn_hidden, double elem_bytes) {
  struct Spec {
    double h_in, h_out;
    Split1D split;
  };
  // [D][T §2] Megatron pairs: (QKV column, proj row), (FFN-in column, FFN-out row) → 2 all-reduces of
  // [B, h] forward and 2 backward per layer: 8·B·h·(t−1)/t·e in total.
  const Spec specs[] = {{hidden, 3 * hidden, Split1D::Column},
                        {hidden, hidden, Split1D::Row},
                        {hidden, ffn_hidden, Split1D::Column},
                        {ffn_hidden, hidden, Split1D::Row}};
  LayerTpCost out;
  bool swapped = false;
  for (const Spec& sp : specs) {
    LinearCost c =
        linear_cost(layout, devices, depth, LinearShape{batch_tokens, sp.h_in, sp.h_out, elem_bytes}, sp.split);
    // [D §2] 3-D: consecutive linears swap the roles of the input and output groups (no re-layout).
    if (layout == Layout::D3 && swapped) {
      for (auto* list : {&c.forward, &c.backward})
        for (auto& k : *list) {
          if (k.axis == "input") k.axis = "output";
          else if (k.axis == "output") k.axis = "input";
        }
    }
    swapped = !swapped;
    out.flops_per_device += c.flops_per_device;
    out.weight_bytes_per_device += c.weight_bytes_per_device;
    out.comm_bytes_per_device += c.comm_bytes_per_device;
    out.forward.insert(out.forward.end(), c.forward.begin(), c.forward.end());
    out.backward.insert(out.backward.end(), c.backward.begin(), c.backward.end());
    out.linears.push_back(std::move(c));
  }
  return out;
}

}  // namespace dtsim::tp
