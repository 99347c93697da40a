// The MoE flex dispatcher's traffic (Megatron-Core --moe-token-dispatcher-type flex, backends deepep and hybridep;
// megatron/core/transformer/moe/token_dispatcher.py MoEFlexTokenDispatcher, fused_a2a.py): DeepEP's normal kernels
// (github.com/deepseek-ai/DeepEP, docs/legacy.md "Normal kernels with NVLink and RDMA forwarding"; DeepSeek-V3
// report section 3.2.2) and NVIDIA's HybridEP send a token once to every NVLink domain holding one of its experts,
// by RDMA to the rank at the sender's position in that domain, which forwards it over NVLink to the domain's ranks
// that hold its experts; inside the sender's own domain the token goes once to every rank it is routed to. The
// all-to-all dispatcher sends one copy per routed expert instead. Under DeepSeek-V3's node-limited routing a token
// crosses at most router_group_topk domains (the report: "each token will be sent to at most 4 nodes").
//
// How many copies leave a rank follows from the probability that a token is routed to a block of experts (a rank's
// or a domain's), under the routing the benchmarks force (Megatron-Core --moe-router-force-load-balancing: random
// router scores): without a group limit its top_k experts are a uniform draw, 1 - C(E - B, k) / C(E, k) for a block
// of B; with one, the groups are chosen by their best scores and the probability is sampled (flex_dispatch.cpp).
#pragma once

namespace dtsim::cost {

struct FlexDispatch {
  int experts = 0;     ///< routed experts of the layer; 0: not a flex dispatch step
  int top_k = 0;       ///< experts per token
  int groups = 0;      ///< router groups (0: no group limit)
  int group_topk = 0;  ///< groups a token may use
  /// HybridEP: a domain is the whole NVLink domain (an NVL72 rack). DeepEP: at most 8 GPUs of one (its
  /// NUM_MAX_NVL_PEERS); beyond them its "RDMA" hop runs over NVLink too where the domain is larger.
  bool hybrid = false;
  bool enabled() const { return experts > 0; }
};

/// Probability that a token is routed to at least one expert of a block of `block_experts` contiguous experts
/// starting at a block boundary (block_experts divides experts); with a group limit, sampled once per shape from a
/// fixed seed (20,000 tokens, averaged over every block: about 0.1% of the value) and kept.
double flex_hit_probability(const FlexDispatch& f, int block_experts);

/// GPUs of one dispatch domain on a node of `gpus_per_node` GPUs (NVLink domain: the node; DeepEP: at most 8).
int flex_domain_gpus(const FlexDispatch& f, int gpus_per_node);

/// Bytes one EP rank sends for a dispatch (or a combine, the same pieces reversed) of `token_bytes` (its tokens, each
/// counted once) over an EP group of `ep` ranks laid out `per_domain` to a domain: to the rank at its position in each
/// other domain (`rdma_piece_bytes`), and to each other rank of its own domain (`nvlink_piece_bytes`: the tokens it
/// routes there itself and those it forwards from the other domains).
struct FlexPieces {
  int domains = 1, per_domain = 1;
  double rdma_piece_bytes = 0, nvlink_piece_bytes = 0;
};
FlexPieces flex_pieces(const FlexDispatch& f, int ep, int per_domain, double token_bytes);

}  // namespace dtsim::cost
