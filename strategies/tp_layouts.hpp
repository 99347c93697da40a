// Intra-layer tensor-parallel layouts: 1-D (Megatron), 2-D (SUMMA / Optimus), 2.5-D (Tesseract) and
// 3-D (Bian, Xu, Wang, You 2021). Closed-form per-device compute, memory and communication of one
// linear layer Y = X·A and of a transformer layer's four linears, per seed-algorithms.md §2.
//
// Source tags used in the comments: [D] = Colossal-AI feature docs / authors' statement quoted in §2,
// [T] = Megatron-LM SC'21 transcription in §2, [C] = Colossal-AI legacy code as described in §2,
// [Δ] = derived here (or in §2) from the documented data layout.
//
// Conventions (all per device, per micro-batch):
//  * Collective::bytes is the size S of the full buffer one call works on, on each member: the gathered
//    output of an all-gather, the unreduced input of a reduce-scatter, the buffer of an all-reduce, the
//    block that a broadcast / reduce moves (same convention as cost::Step::collective_bytes).
//  * Bytes sent per member with ring algorithms [Δ, §2 "ring collectives"]:
//      all-reduce 2(g-1)/g·S; all-gather, reduce-scatter (g-1)/g·S;
//      broadcast, reduce (g-1)/g·S: a pipelined chain (NCCL ring broadcast / reduce) carries S over g-1
//      links, i.e. (g-1)·S in total, averaged over the g members.
//  * Only the GEMM operands are modelled (no bias, LayerNorm statistics, dropout or residual).
#pragma once
#include <string>
#include <vector>

#include "traces/plan.hpp"

namespace dtsim::tp {

/// The plan's layout type (traces/plan.hpp: to_string(TpLayout), tp_layout_from_string, tp_grid_side).
using Layout = dtsim::TpLayout;

/// Whether `devices` can be arranged in `layout` [D §2 "Complexity"]: 1-D any p >= 1; 2-D p = q²;
/// 2.5-D p = q²·depth (depth >= 1); 3-D p = q³. `depth` is read only for 2.5-D.
bool valid_degree(Layout layout, int devices, int depth);

/// Side length q of the layout's grid (1-D: p; 2-D: sqrt(p); 2.5-D: sqrt(p/depth); 3-D: cbrt(p)).
/// Throws dtsim::ConfigError when !valid_degree.
int grid_side(Layout layout, int devices, int depth);

/// Y = X·A with X: [batch_tokens, h_in], A: [h_in, h_out]; batch_tokens = batch·seq of the micro-batch.
struct LinearShape {
  double batch_tokens;
  double h_in;
  double h_out;
  double elem_bytes;
};

struct Collective {
  std::string kind;  ///< "all-reduce", "all-gather", "reduce-scatter", "broadcast", "reduce"
  std::string axis;  ///< group axis: "tp" (1-D); "row", "col" (2-D, 2.5-D); "depth" (2.5-D);
                     ///< "input", "weight", "output" (3-D; the j, i, l axes of device (i,j,l) in §2)
  int group_size;
  double bytes;  ///< S of one call on each member (see the header comment)
  int count;     ///< number of such calls
};

/// Bytes one member sends for all `c.count` calls with ring algorithms (header comment).
double ring_bytes_sent(const Collective& c);

/// 1-D only: which Megatron split a standalone linear uses. Column: A = [A_1 … A_p], X replicated,
/// backward all-reduce of dX. Row: A split by rows, X split by columns, forward all-reduce of Y.
enum class Split1D { Column, Row };

struct LinearCost {
  double flops_per_device;                 ///< forward GEMM FLOPs (2·B·h_in·h_out / p); backward is 2×
  double weight_bytes_per_device;          ///< stored shard of A (not the transient gathered copy)
  double activation_in_bytes_per_device;   ///< stored shard of X
  double activation_out_bytes_per_device;  ///< stored shard of Y
  std::vector<Collective> forward, backward;
  double comm_bytes_per_device;  ///< total bytes each device sends, forward + backward, ring algorithms
};

/// Cost of one linear layer; `depth` is d for 2.5-D and ignored otherwise; `split` is read only for 1-D.
/// Throws dtsim::ConfigError on an invalid degree or a non-positive shape.
LinearCost linear_cost(Layout layout, int devices, int depth, const LinearShape& shape,
                       Split1D split = Split1D::Column);

struct LayerTpCost {
  double flops_per_device = 0;  ///< forward GEMM FLOPs of the four linears
  double weight_bytes_per_device = 0;
  double comm_bytes_per_device = 0;           ///< forward + backward
  std::vector<Collective> forward, backward;  ///< the linears' lists concatenated in layer order
  std::vector<LinearCost> linears;            ///< QKV, proj, FFN-in, FFN-out
};

/// The four linears of a transformer layer: QKV h->3h, attention projection h->h, FFN h->ffn_hidden,
/// ffn_hidden->h. 1-D pairs them as Megatron does (QKV, FFN-in column-split; proj, FFN-out row-split);
/// 3-D alternates the roles of the input and output axes between consecutive linears [D §2].
LayerTpCost transformer_layer_cost(Layout layout, int devices, int depth, double batch_tokens, double hidden,
                                   double ffn_hidden, double elem_bytes);

}  // namespace dtsim::tp
