// NCCL's protocol choice and latency for ring collectives (and NCCL's alternatives to a ring), after NCCL's own tuning
// model (NVIDIA/nccl src/graph/tuning.cc, ncclTopoTuneModel, release 2.30.7; the constants are NCCL's defaults, cited
// there, not fitted here). NCCL times every (algorithm, protocol) pair as latency + bytes / bandwidth and runs the
// fastest; for a ring:
//   latency = base[protocol] + (steps - inter_steps) x intra[protocol] + inter_steps x net[protocol]
//   bandwidth = the ring's bus bandwidth x {LL 0.5 (at most llMaxBw), LL128 0.92, Simple 1}
// with steps = 2 (n - 1) for an all-reduce and n - 1 for an all-gather or reduce-scatter, and inter_steps the steps
// that cross a node boundary (2 (nodes - 1) for an all-reduce, nodes - 1 otherwise). LL moves 8-byte lines of 4
// data bytes and a flag, LL128 128-byte lines of 120 data bytes (the protocols' bandwidth factors). Small messages
// take LL (lowest latency), large ones Simple (full bandwidth).
//
// How dtsim uses it: NCCL's estimate of a ring's time is a floor on dtsim's own (its hops' route latencies, the
// calibration's per-step software overhead collective_step_overhead_s, and the payload at the Simple protocol's
// bandwidth, which the calibration's efficiencies describe); where NCCL's is larger, the difference is charged as
// latency. A calibration fitted to measured collectives (the A100 fit's 4.3 us per step) keeps what it measured;
// one without such a fit (the specification-based H100/Blackwell presets) gets NCCL's base and per-hop latencies
// instead of a wire latency alone, and small messages NCCL's LL and LL128 costs. The flows still carry the payload's
// own bytes (the protocols' flag bytes are in the floor, not in the links' load). Setting "off" leaves dtsim's
// ring as it is; "ll", "ll128", "simple" force one protocol (as NCCL_PROTO does).
//
// The tree (all-reduce across nodes) and PAT (all-gather / reduce-scatter at one GPU per node) enter as NCCL's
// alternatives: the floor is NCCL's fastest estimate (ring_choice), and where that is a tree or PAT timed below
// dtsim's ring, the ring stands in for it with that algorithm's latency (latency_adjust_s; the flow collective mode
// and the estimator): a small all-reduce over hundreds of nodes (FP8 amaxes, gradient norms) takes the tree's
// 2 log2(nodes) hops, not a ring's 2 (n - 1) steps. Single-node collectives never take a tree or PAT, so the A100
// fit's per-step cost (fitted on one node) is kept where it was measured. Not modelled: NVLS and CollNet (they need
// NVSwitch multicast or SHARP; without them the floor is, if anything, higher than NCCL's), NCCL's per-channel caps
// (LL128, tree: they need the channel count of NCCL's topology search), the tree's 0.85 for a non-balanced pattern,
// the CPU vendor's multi-node LL cap (Intel's row is used). dtsim's own tree and NVLS lowerings keep their route
// latencies.
#pragma once
#include <algorithm>
#include <string>

#include "traces/cluster.hpp"

namespace dtsim::nccl {

enum class Protocol { LL, LL128, SIMPLE };
/// The algorithms NCCL could run in place of dtsim's ring: the ring itself, the tree (all-reduce across nodes), PAT
/// (all-gather / reduce-scatter at one GPU per node).
enum class Algorithm { RING, TREE, PAT };
/// The calibration's network.nccl_protocol: off, auto (NCCL's choice), or one protocol forced.
enum class Setting { OFF, AUTO, LL, LL128, SIMPLE };

/// Parses "off" | "auto" | "ll" | "ll128" | "simple"; anything else is a ConfigError naming `ctx`.
Setting parse_setting(const std::string& text, const std::string& ctx);
std::string to_string(Protocol p);
std::string to_string(Algorithm a);

/// NCCL's architecture index (compute capability / 10 x 10: 70 Volta, 80 Ampere, 90 Hopper, 100 Blackwell), from
/// which tensor-core formats the preset has (FP4: Blackwell, FP8: Hopper, BF16: Ampere, else Volta).
int compute_capability(const GpuSpec& gpu);

/// Whether a cluster's node-local hops are NVLink (an NVSwitch node, or a graph with NVLink links) rather than PCIe.
bool nvlink_nodes(const ClusterSpec& c);

/// One ring collective as NCCL sees it.
struct Ring {
  bool all_reduce = false;  ///< else all-gather / reduce-scatter (n - 1 steps)
  int ranks = 1;
  int nodes = 1;       ///< distinct nodes among the ranks
  bool nvlink = true;  ///< node-local hops over NVLink (else PCIe: NCCL's PCI latencies, no LL128)
  int compute_capability = 90;
  double bytes = 0;        ///< the collective's buffer (NCCL's nBytes: the all-reduce's input, the gathered output)
  double bus_Bps = 0;      ///< the ring's bus bandwidth for the Simple protocol (the slowest hop's share)
  bool ring_only = false;  ///< NCCL restricted to its ring (NCCL_ALGO=Ring; dtsim's --collective-algo ring)
};

struct Choice {
  Algorithm algorithm = Algorithm::RING;
  Protocol protocol = Protocol::SIMPLE;
  double latency_s = 0;         ///< NCCL's modelled latency of the whole collective (base + per step)
  double bandwidth_factor = 1;  ///< of the Simple bus bandwidth (LL 0.5 or less, LL128 0.92)
  double time_s = 0;            ///< NCCL's estimate: latency + steps x (bytes / ranks) / (bus_Bps x factor)
  double simple_payload_s = 0;  ///< steps x (bytes / ranks) / bus_Bps: the payload at the Simple bandwidth
};

/// The (algorithm, protocol) NCCL's model picks for `r` under `s` (AUTO: the fastest; a forced protocol: the fastest
/// algorithm with it). With OFF (or one rank): no time at all, so no floor. NCCL runs the fastest of every algorithm
/// it may, so the floor is the fastest of the ring, the tree (an all-reduce across nodes) and PAT (an all-gather or
/// reduce-scatter at one GPU per node): dtsim's ring is not charged NCCL's ring latency where NCCL would not run a
/// ring (a ring all-reduce over 384 nodes has 766 steps of 14 us; NCCL's tree has 2 x 8 of them).
Choice ring_choice(Setting s, const Ring& r);

/// What dtsim adds to a ring whose own latency is `simulated_latency_s` (route latencies and per-step overheads) and
/// whose payload takes c.simple_payload_s: the amount by which NCCL's estimate exceeds that, else 0.
inline double floor_extra_s(const Choice& c, double simulated_latency_s) {
  const double own = simulated_latency_s + c.simple_payload_s;
  return c.time_s > own ? c.time_s - own : 0.0;
}

/// The signed change to a ring's own latency `simulated_latency_s` (its payload taking c.simple_payload_s) that
/// makes dtsim time the collective as NCCL runs it. Where NCCL's estimate is larger: floor_extra_s (> 0). Where NCCL
/// would run another algorithm (the tree, PAT) and times it below dtsim's ring, dtsim's ring stands in for that
/// algorithm: its payload flows keep their bytes, and its latency (2 (n - 1) sequential steps of route latency and
/// per-step overhead, 0.64 ms for a 96-byte all-reduce over 256 data-parallel ranks on 128 H100 nodes) becomes what
/// NCCL's estimate leaves after the payload (the tree's 2 log2(nodes) network hops: 0.04 ms), never below 0: the
/// result (< 0) is that difference. 0 where dtsim's ring is what NCCL runs and NCCL's estimate is not larger.
inline double latency_adjust_s(const Choice& c, double simulated_latency_s) {
  if (c.algorithm == Algorithm::RING || !(c.time_s < simulated_latency_s + c.simple_payload_s))
    return floor_extra_s(c, simulated_latency_s);
  return std::max(c.time_s - c.simple_payload_s, 0.0) - simulated_latency_s;
}

}  // namespace dtsim::nccl
