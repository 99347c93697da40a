#!/usr/bin/env python3
"""ASTRA-sim input files that describe the network dtsim simulated, from a dtsim summary.json (issue Interop).

Usage: bench/astra_configs.py SUMMARY_JSON OUT_DIR
Writes OUT_DIR/network.yml (analytical backend), OUT_DIR/system.json and OUT_DIR/memory.json.

The network is ASTRA-sim's two-dimensional analytical topology [Switch (the NVLink domain), Switch (the NICs)] with
the link speeds and per-step costs dtsim used (summary.json's cluster and calibration):
- bandwidth of a dimension: the link's nominal bandwidth x the calibration's efficiency (intra_bandwidth_efficiency,
  inter_bandwidth_efficiency), per GPU and direction, in ASTRA-sim's GB/s (2^30 bytes: astra-network-analytical
  common/NetworkFunction.cpp bw_GBps_to_Bpns);
- latency of a dimension: what dtsim charges a ring step over that link, the link's one-way latency plus the
  calibration's collective_step_overhead_s, split over the two links of ASTRA-sim's switch route (congestion_unaware
  Switch: src -> switch -> dest, each link's latency counted once). A point-to-point send pays the same latency:
  dtsim charges it the link latency plus the stack's p2p_overhead_s, the latter as a host delay before the send
  node (it is in the trace), so for sends the step overhead is the difference left in this file.
The system file turns off what dtsim does not model, so that only the export is compared: one chunk per collective
(preferred-dataset-splits 1, active-chunks-per-dimension 1), no endpoint delay, local reduction at a bandwidth far
above the network's (dtsim does not charge a ring step's local reduction), ring collectives, FIFO scheduling, and
all-to-all as "direct1" (ASTRA-sim's direct algorithm with a window of one message: each member sends its pieces one
after the other, dtsim's pairwise exchange on the analytic network). ASTRA-sim applies these only to collectives
over every NPU: a communicator group's collectives always run its ring algorithm (astra-sim/system/
CommunicatorGroup.cc, get_collective_plan), whose all-to-all sends n(n-1)/2 pieces around the ring.
"""
import json
import os
import sys


def main(argv):
    if len(argv) != 3:
        print("usage: bench/astra_configs.py SUMMARY_JSON OUT_DIR", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        cfg = json.load(f)["config"]
    cluster, net = cfg["cluster"], cfg["calibration"]["network"]
    gib = float(1 << 30)
    per_node = cluster["gpus_per_node"]
    nodes = cluster["num_nodes"]
    step_s = net["collective_step_overhead_s"]
    intra_bw = cluster["intra_node"]["bandwidth_Bps"] * net["intra_bandwidth_efficiency"] / gib
    intra_lat_ns = (cluster["intra_node"]["latency_s"] + step_s) * 1e9 / 2
    topology, npus, bws, lats = ["Switch"], [per_node], [intra_bw], [intra_lat_ns]
    if nodes > 1:
        inter = cluster["inter_node"]
        nic_Bps = inter["nic_bandwidth_Bps"] * inter["nics_per_node"] / per_node  # each GPU's share of the NICs
        topology.append("Switch")
        npus.append(nodes)
        bws.append(nic_Bps * net["inter_bandwidth_efficiency"] / gib)
        lats.append((inter["latency_s"] + step_s) * 1e9 / 2)
    os.makedirs(argv[2], exist_ok=True)
    with open(os.path.join(argv[2], "network.yml"), "w", encoding="utf-8") as f:
        f.write("topology: [ %s ]\n" % ", ".join(topology))
        f.write("npus_count: [ %s ]\n" % ", ".join(str(n) for n in npus))
        f.write("bandwidth: [ %s ]  # GB/s (2^30 bytes)\n" % ", ".join("%.6f" % b for b in bws))
        f.write("latency: [ %s ]  # ns per link\n" % ", ".join("%.3f" % x for x in lats))
    dims = len(topology)
    system = {
        "scheduling-policy": "FIFO",
        "endpoint-delay": 0,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 1,
        "all-reduce-implementation": ["ring"] * dims,
        "all-gather-implementation": ["ring"] * dims,
        "reduce-scatter-implementation": ["ring"] * dims,
        "all-to-all-implementation": ["direct1"] * dims,
        "collective-optimization": "localBWAware",
        "local-mem-bw": 1000000,
        "boost-mode": 0,
    }
    with open(os.path.join(argv[2], "system.json"), "w", encoding="utf-8") as f:
        json.dump(system, f, indent=2)
        f.write("\n")
    with open(os.path.join(argv[2], "memory.json"), "w", encoding="utf-8") as f:
        f.write('{"memory-type": "NO_MEMORY_EXPANSION"}\n')
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
