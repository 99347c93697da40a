#include "strategies/nccl_model.hpp"

#include <algorithm>
#include <limits>

#include "traces/error.hpp"

namespace dtsim::nccl {

namespace {
// NCCL 2.30.7 src/graph/tuning.cc, ncclTunerConstantsDefaults (microseconds; index = LL, LL128, Simple).
constexpr double kBaseRing_us[3] = {6.6, 14.0, 8.4};    // baseLatencies, Ring
constexpr double kNvlinkRing_us[3] = {0.6, 1.9, 3.4};   // hwLatencies NVLINK, Ring
constexpr double kPciRing_us[3] = {1.0, 2.5, 5.7};      // hwLatencies PCI, Ring
constexpr double kNetRing_us[3] = {2.7, 4.0, 14.0};     // hwLatencies NET, Ring
constexpr double kNetTree_us[3] = {5.0, 8.5, 14.0};     // hwLatencies NET, Tree: a ring's net hops at one GPU per node
constexpr double kNetOverhead_us = 1.0;                 // getNetOverhead (x86 Intel and default; AMD 2.0), Simple x 3
constexpr double kLlFactor = 0.5, kLl128Factor = 0.92;  // "Various model refinements"
// Tree (all-reduce across nodes): base latencies, per NVLink hop inside a node (the network's per hop is the tree's
// kNetTree_us); the bandwidth refinements (all-reduce 0.92; LL 1 / 3.8; LL128 120/128 across nodes) and the
// algorithm bandwidth of half the bus bandwidth ("ratio *= .5").
constexpr double kBaseTree_us[3] = {6.8, 14.0, 8.4};
constexpr double kNvlinkTree_us[3] = {0.6, 1.25, 4.0};
constexpr double kTreeFactor[3] = {0.92 / 3.8, 0.92 * 120.0 / 128.0, 0.92};
// PAT (all-gather / reduce-scatter at one GPU per node, NCCL 2.23 and later; Simple only): base 8.0 us, the network's
// latency / 3.5 per log2 of the nodes, and 2.8 us per rank; bandwidth 0.75 of the bus.
constexpr double kBasePat_us = 8.0, kPatPerRank_us = 2.8, kPatFactor = 0.75;
int log2i(int n) {
  int l = 0;
  while (n >>= 1) ++l;
  return l;
}
// llMaxBws (GB/s): one node by architecture (Volta, Ampere, Hopper, Blackwell); several nodes by CPU (Intel row:
// 2 nodes, more than 2).
double ll_max_Bps(int cc, int nodes) {
  if (nodes == 2) return 39.0e9;
  if (nodes > 2) return 20.4e9;
  return (cc >= 100 ? 282.0 : cc >= 90 ? 141.0 : cc >= 80 ? 87.7 : 39.0) * 1e9;
}
}  // namespace

Setting parse_setting(const std::string& text, const std::string& ctx) {
  if (text == "off") return Setting::OFF;
  if (text == "auto") return Setting::AUTO;
  if (text == "ll") return Setting::LL;
  if (text == "ll128") return Setting::LL128;
  if (text == "simple") return Setting::SIMPLE;
  throw ConfigError(ctx + ": NCCL protocol '" + text + "' is not known (known: auto, off, ll, ll128, simple)");
}

std::string to_string(Algorithm a) {
  switch (a) {
    case Algorithm::RING: return "ring";
    case Algorithm::TREE: return "tree";
    case Algorithm::PAT: return "PAT";
  }
  return "?";
}

std::string to_string(Protocol p) {
  switch (p) {
    case Protocol::LL: return "LL";
    case Protocol::LL128: return "LL128";
    case Protocol::SIMPLE: return "Simple";
  }
  return "?";
}

int compute_capability(const GpuSpec& gpu) {
  if (gpu.peak_fp4_flops > 0) return 100;
  if (gpu.peak_fp8_flops > 0) return 90;
  if (gpu.peak_bf16_flops > 0) return 80;
  return 70;
}

bool nvlink_nodes(const ClusterSpec& c) {
  if (!c.has_graph()) return true;
  return std::any_of(c.graph.links.begin(), c.graph.links.end(), [](const auto& l) { return l.kind == "nvlink"; });
}

Choice ring_choice(Setting s, const Ring& r) {
  Choice best;
  if (s == Setting::OFF || r.ranks <= 1) return best;
  DTSIM_ASSERT(r.nodes >= 1 && r.nodes <= r.ranks && r.bus_Bps > 0,
               "NCCL ring of " << r.ranks << " ranks on " << r.nodes << " nodes");
  const int steps = r.all_reduce ? 2 * (r.ranks - 1) : r.ranks - 1;
  const int inter_steps = r.nodes == 1 ? 0 : (r.all_reduce ? 2 : 1) * (r.nodes - 1);
  const bool one_per_node = r.ranks == r.nodes;
  best.time_s = std::numeric_limits<double>::infinity();
  for (int p = 0; p < 3; ++p) {
    const auto proto = static_cast<Protocol>(p);
    if (s == Setting::LL && proto != Protocol::LL) continue;
    if (s == Setting::LL128 && proto != Protocol::LL128) continue;
    if (s == Setting::SIMPLE && proto != Protocol::SIMPLE) continue;
    // LL128 is enabled by default only where the node-local hops are NVLink (tuning.cc: typeIntra <= PATH_NVB); a
    // forced LL128 is taken as asked.
    if (s == Setting::AUTO && proto == Protocol::LL128 && !r.nvlink) continue;
    double intra_us = r.nvlink ? kNvlinkRing_us[p] : kPciRing_us[p];
    if (r.nodes > 1) intra_us = std::max(intra_us, proto == Protocol::SIMPLE ? 3 * kNetOverhead_us : kNetOverhead_us);
    const double net_us = one_per_node ? kNetTree_us[p] : kNetRing_us[p];
    const double latency_s =
        (kBaseRing_us[p] + (steps - inter_steps) * intra_us + inter_steps * net_us) * 1e-6;  // microseconds
    double bw = r.bus_Bps;
    if (proto == Protocol::LL) bw = std::min(ll_max_Bps(r.compute_capability, r.nodes), bw * kLlFactor);
    if (proto == Protocol::LL128) bw *= kLl128Factor;
    const double t = latency_s + steps * (r.bytes / r.ranks) / bw;
    const double simple_payload_s = steps * (r.bytes / r.ranks) / r.bus_Bps;
    if (t < best.time_s) best = {Algorithm::RING, proto, latency_s, bw / r.bus_Bps, t, simple_payload_s};
    // NCCL's tree for an all-reduce across nodes: reduce up and broadcast down the double binary tree, a chain of
    // the node's GPUs at each tree node; the whole buffer crosses each link twice.
    if (r.all_reduce && r.nodes > 1 && !r.ring_only) {
      const int ppn = r.ranks / r.nodes;
      const double tree_latency_s =
          (kBaseTree_us[p] + 2 * ((ppn - 1) * kNvlinkTree_us[p] + log2i(r.nodes) * kNetTree_us[p])) * 1e-6;
      const double tree_t = tree_latency_s + 2 * r.bytes / (r.bus_Bps * kTreeFactor[p]);
      if (tree_t < best.time_s)
        best = {Algorithm::TREE, proto, tree_latency_s, kTreeFactor[p], tree_t, simple_payload_s};
    }
  }
  // PAT for an all-gather / reduce-scatter at one GPU per node (Simple only).
  if (!r.all_reduce && one_per_node && r.nodes > 1 && !r.ring_only && (s == Setting::AUTO || s == Setting::SIMPLE)) {
    const double pat_latency_s =
        (kBasePat_us + log2i(r.nodes) * kNetTree_us[2] / 3.5 + r.ranks * kPatPerRank_us) * 1e-6;
    const double pat_t = pat_latency_s + r.bytes / (r.bus_Bps * kPatFactor);
    if (pat_t < best.time_s)
      best = {
          Algorithm::PAT, Protocol::SIMPLE, pat_latency_s, kPatFactor, pat_t, steps * (r.bytes / r.ranks) / r.bus_Bps};
  }
  return best;
}

}  // namespace dtsim::nccl
