// The model FLOP counts that publications use for MFU and "model TFLOP/s": with the source's own count, a row that
// gives only MFU or TFLOP/s per GPU yields the iteration time it measured (time = FLOPs / (TFLOP/s x GPUs)), whatever
// the count's merits, because the source divided by the same count.
//
// Conventions (per iteration: forward + backward of the global batch, recomputation not counted):
//   palm               Chowdhery et al. 2022 (PaLM), Appendix B: 6N + 12 L H Q T FLOPs per token, N the parameters
//                      (all of them: 6N with N = 540.35B and T = 2048 reproduces PaLM's 46.2% MFU at 238.3K tokens/s
//                      on 6,144 TPU v4 of 275 TFLOP/s), L layers, H heads, Q head size, T sequence length (no causal
//                      halving). An MoE model counts its active parameters. Used by Llama 3 ("BF16 MFU", citing it).
//   megatron-2021      Narayanan et al. 2021 (SC'21), appendix "Floating-point operations": 72 l h^2 (1 + s/(6h) +
//                      V/(12 l h)) per token without recomputation (GPT: FFN 4h, multi-head attention). MegaScale's
//                      Megatron-LM MFUs are reproduced exactly by it (large_scale_papers.json conventions (b)).
//   megatron-core-2025 Megatron-LM megatron/training/training.py num_floating_point_operations at df0430d (2025-04-19,
//                      the MoE Parallel Folding paper's month; the causal halving of the score terms landed in
//                      8873b55, 2025-03-06): 12 h per token per layer x (ffn x g for dense layers, routed top_k x
//                      expert ffn x g + shared ffn x g for MoE layers; g = 3/2 for SwiGLU) + the attention term
//                      12 L h^2 (1 + G/A + s/(2h)) q/h (GQA; MLA: the MLA branch's terms) + 6 h V (logits, padded V).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "traces/model.hpp"

namespace dtsim::sim {

enum class FlopConvention { PALM, MEGATRON_2021, MEGATRON_CORE_2025 };

/// "palm", "megatron-2021", "megatron-core-2025".
std::string flop_convention_name(FlopConvention c);
/// The convention named `name` (as flop_convention_name writes it); nullopt when unknown.
std::optional<FlopConvention> flop_convention_named(const std::string& name);

/// Model FLOPs of one training iteration of `global_batch` sequences of m.seq_len tokens, counted as `c` counts them.
double convention_flops_per_iteration(FlopConvention c, const TransformerSpec& m, std::int64_t global_batch);

}  // namespace dtsim::sim
