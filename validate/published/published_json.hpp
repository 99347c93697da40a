// Shared measurements documents (../shared/measurements/*.json: TorchTitan, SimuMax, SAILOR tables) as published rows.
//
// A document is a JSON object with "source" (repo@commit:path), "licence", "about", "conventions", "model_shapes"
// (model name -> layers, hidden, ffn_hidden, heads, kv_heads, head_dim, vocab, attention, mlp, tied_embeddings,
// optional "moe" and "mla" blocks) and "rows" (one measured configuration each: gpu, gpus, gpus_per_node, model,
// seq, precision, tp, pp, dp, cp, ep, etp, vp, mbs, gbs, recompute, ZeRO/FSDP flags, "flags", and a "measured"
// block with iteration_s, peak memory and/or an out-of-memory outcome).
//
// Mapping (the software stack is recognised from "source"):
//   stack   SimuMax -> Megatron-Core with TransformerEngine (flash attention, vocabulary padded to a multiple of
//           128 x tp); torchtitan -> FSDP2/TP/PP/CP in PyTorch (SDPA flash attention, unpadded vocabulary);
//           SAILOR -> Megatron-DeepSpeed (unfused attention);
//   model   model_shapes[row.model] with the row's seq and its "layers_run" (depth-truncated proxies); MoE and MLA
//           blocks -> MoeSpec / MlaSpec; dtype bf16 with an "fp8" row's linears in FP8 (torchtitan: torchao's
//           tensorwise recipe unless the row says rowwise; Megatron-Core: TE delayed scaling); "fp32" rows run fp32;
//           async_tp / tp_comm_overlap -> chunked TP overlap; overlap_param_gather (with the distributed optimizer)
//           -> the parameter all-gather beside the next forward; compile noted (fusion not modelled);
//   plan    degrees as given (ep carved from the tp x cp x dp ranks, etp 0 = tp), micro batch (a PP row without one:
//           the local batch over torchtitan's default pp micro-batches), recompute none / selective / full,
//           1F1B or interleaved (vp), ZeRO 1 for Megatron's distributed optimizer, 3 for FSDP, sequence
//           parallelism, cp kind (a2a -> all-to-all, p2p -> ring, allgather -> all-gather), MoE dispatcher and
//           capacity factor (with padding to capacity);
//   cluster B200 -> dgx-b200, H100 -> dgx-h100 (torchtitan's 96 GB HBM2e / 500 W H100 -> grand-teton-h100, its
//           own preset; a 94/95 GB part of unstated power is noted as simulated with the 80 GB SXM5 preset),
//           H200 -> dgx-h200, H800 -> dgx-h800, GH200 -> clariden, A100 -> dgx-a100; mixed-GPU clusters fail with
//           the reason;
//   group   SimuMax: "dense", "moe" (ep > 1 or an MoE model) or "cp" (cp > 1); torchtitan: the table the row is
//           from; others: the model;
//   memory  measured.peak_memory_bytes, else the largest per-rank allocated peak, else peak_memory_gib (GiB).
// A row whose model, plan or hardware cannot be expressed (or whose fields are missing) is returned with
// PublishedRow::failure set, naming the file, the row and the reason; only a malformed document throws.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "validate/published/published.hpp"

namespace dtsim::sim {

/// True for a shared measurements document (an object with "model_shapes" and "rows").
bool is_measurements_document(const nlohmann::json& doc);

/// Every row of the document, in file order (failed rows included). FormatError when the document's structure is
/// wrong (rows or model_shapes of the wrong type, no rows).
std::vector<PublishedRow> load_measurements_document(const nlohmann::json& doc, const std::string& path);

}  // namespace dtsim::sim
