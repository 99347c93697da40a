#!/usr/bin/env bash
# dtsim's Chakra export run in ASTRA-sim (issue Interop): the iteration time ASTRA-sim's analytical backend gives for
# the exported traces next to dtsim's own, on README's two examples (a dense 3-D plan across two nodes and a MoE plan
# with expert parallelism).
#
# Usage: bench/astra_sim.sh DTSIM ASTRA_SIM_BINARY [WORKDIR]
#   ASTRA_SIM_BINARY: astra-sim's build/astra_analytical/build/bin/AstraSim_Analytical_Congestion_Unaware, built from
#   astra-sim/astra-sim at c459ab6 with its pinned submodules (build/astra_analytical/build.sh; not part of dtsim:
#   fetch and build it outside this repository).
# ASTRA-sim is given the network dtsim simulated (bench/astra_configs.py: link bandwidths x the calibration's
# efficiencies, per-step costs as link latencies) and replays the exported compute nodes' durations, so the two
# differ only in how the exported communication is timed.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: bench/astra_sim.sh DTSIM ASTRA_SIM_BINARY [WORKDIR]" >&2
  exit 2
fi
DTSIM=$1
ASTRA=$(realpath -m "$2")
WORK=$(realpath -m "${3:-$(mktemp -d)}")
HERE=$(cd "$(dirname "$0")" && pwd)
[ -x "$ASTRA" ] || { echo "astra_sim.sh: no ASTRA-sim binary at $ASTRA" >&2; exit 2; }

run_case() {  # name, then dtsim simulate arguments
  local name=$1
  shift
  local dir=$WORK/$name
  rm -rf "$dir"
  mkdir -p "$dir"
  "$DTSIM" simulate "$@" --network analytic --export-chakra "$dir/et" --out "$dir/sim" -q
  python3 "$HERE/astra_configs.py" "$dir/sim/summary.json" "$dir/astra"
  # ASTRA-sim writes its logs into log/ of the working directory: run it in the case's own.
  (cd "$dir" && "$ASTRA" --workload-configuration="$dir/et/dtsim" --system-configuration="$dir/astra/system.json" \
    --network-configuration="$dir/astra/network.yml" --remote-memory-configuration="$dir/astra/memory.json" \
    --comm-group-configuration="$dir/et/dtsim.comm_group.json" >"$dir/astra.log" 2>&1)
  python3 - "$name" "$dir" <<'EOF'
import json, re, sys
name, d = sys.argv[1], sys.argv[2]
dtsim_s = json.load(open(d + "/sim/summary.json"))["results"]["iteration_time_s"]
cycles = [int(c) for c in re.findall(r"finished, (\d+) cycles", open(d + "/astra.log").read())]
if not cycles:
    sys.exit(f"{name}: ASTRA-sim did not finish (see {d}/astra.log)")
astra_s = max(cycles) * 1e-9  # the analytical backend's cycle is 1 ns
print(f"{name:10s} ranks {len(cycles):3d}  dtsim {dtsim_s * 1e3:9.3f} ms  ASTRA-sim {astra_s * 1e3:9.3f} ms  "
      f"{(astra_s / dtsim_s - 1) * 100:+.2f}%")
EOF
}

run_case dense --model gpt3-1.3b --cluster dgx-a100:16 --tp 2 --pp 2 --dp 4 --gbs 32 --mbs 2
run_case moe --model qwen3-30b-a3b --cluster dgx-h100:8 --ep 8 --zero 1 --recompute full --gbs 16 --mbs 1
