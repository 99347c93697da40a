#!/usr/bin/env bash
# dtsim benchmark (Foundation issue): times `dtsim simulate` on GPT-3 175B, dgx-a100:1024, TP8 PP8 DP16,
# mbs 1, gbs 1536 (1F1B and the variants below), and reports wall seconds (best and median of N runs), SimGrid activities per second
# and peak RSS. Usage: bench/run.sh [path/to/dtsim] [runs]. Writes bench/results.txt-style lines to stdout.
set -euo pipefail
DTSIM=${1:-build/bin/dtsim}
RUNS=${2:-5}
ARGS=(simulate --model gpt3-175b --cluster dgx-a100:1024 --tp 8 --pp 8 --dp 16 --mbs 1 --gbs 1536)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run_case() {  # name, extra args...
  local name=$1; shift
  local walls=() rss=0 acts=""
  for ((i = 0; i < RUNS; i++)); do
    local t0 t1
    t0=$EPOCHREALTIME
    if [ -x /usr/bin/time ]; then
      /usr/bin/time -f "%M" -o "$tmp/rss" "$DTSIM" "${ARGS[@]}" "$@" --out "$tmp/out" > "$tmp/stdout"
      local r; r=$(cat "$tmp/rss"); (( r > rss )) && rss=$r
    else
      "$DTSIM" "${ARGS[@]}" "$@" --out "$tmp/out" > "$tmp/stdout"
    fi
    t1=$EPOCHREALTIME
    walls+=("$(python3 -c "print($t1 - $t0)")")
  done
  acts=$(python3 -c "import json;print(json.load(open('$tmp/out/summary.json'))['simulation_stats']['simgrid_activities'])")
  iter=$(python3 -c "import json;print('%.3f' % json.load(open('$tmp/out/summary.json'))['results']['iteration_time_s'])")
  python3 - "$name" "$acts" "$rss" "$iter" "${walls[@]}" <<'PY'
import statistics, sys
name, acts, rss, it = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
w = sorted(float(x) for x in sys.argv[5:])
med = statistics.median(w)
rss_txt = f"{rss/1024:.0f} MiB" if rss else "n/a (no /usr/bin/time)"
print(f"{name:28s} wall best {w[0]:.2f} s, median {med:.2f} s over {len(w)} runs | "
      f"{acts} SimGrid activities, {acts/med:,.0f} activities/s | peak RSS {rss_txt} | iteration {it} s")
PY
}

echo "dtsim benchmark on $(nproc) cores: ${ARGS[*]}"
run_case "1f1b (default: flow, fold)" --schedule 1f1b
run_case "1f1b, collectives as steps" --collectives steps
run_case "1f1b, full recompute" --recompute full
run_case "interleaved:3" --schedule interleaved:3
run_case "zb-h2" --schedule zb-h2
run_case "zero 3 (FSDP), tp8 pp8 dp16" --zero 3
run_case "1f1b, analytic network" --schedule 1f1b --network analytic

# Networks: one 1 GiB all-reduce over all 1,024 GPUs (flow fidelity), ring and hierarchical.
for algo in ring hierarchical; do
  best=""
  for ((i = 0; i < RUNS; i++)); do
    t0=$EPOCHREALTIME
    "$DTSIM" collective --cluster dgx-a100:1024 --bytes 1GiB --algo "$algo" --out "$tmp/coll" -q
    t1=$EPOCHREALTIME
    w=$(python3 -c "print($t1 - $t0)")
    best=$(python3 -c "print(min(float('$w'), float('${best:-1e9}')))")
  done
  python3 - "$algo" "$best" "$tmp/coll/collective.json" <<'PY'
import json, sys
algo, best, path = sys.argv[1], float(sys.argv[2]), sys.argv[3]
p = json.load(open(path))["points"][0]
print(f"all-reduce 1 GiB x 1024 {algo:13s} wall best {best:.2f} s | simulated {p['time_s']*1e3:.2f} ms, "
      f"busbw {p['busbw_Bps']/1e9:.1f} GB/s")
PY
done

# Profiler issue: import + replay of the largest shared Kineto trace (~123k events), best of RUNS (target <= 2 s).
TRACE="$(dirname "$0")/../../shared/traces/HolisticTraceAnalysis/tests/data/df_index_resolver/df_index_resolver.json.gz"
if [[ -f $TRACE ]]; then
  best=""
  for ((i = 0; i < RUNS; i++)); do
    t0=$EPOCHREALTIME
    "$DTSIM" replay --trace "$TRACE" --quiet --out "$tmp/replay"
    t1=$EPOCHREALTIME
    best=$(python3 -c "print(min($t1 - $t0, float('${best:-1e9}')))")
  done
  printf 'replay df_index_resolver (import + replay + outputs)  wall best %.2f s\n' "$best"
else
  echo "replay benchmark skipped: $TRACE absent"
fi

# Sweeps issue: throughput of `dtsim sweep -j 2` (SWEEP_JOBS to change): 1,000 random GPT-3 175B points on
# dgx-a100:1024 at analytic fidelity with and without the memory pre-filter, and 100 points at flow fidelity (a
# fresh process per scenario). One run each. "points/min" counts every point of the sweep (pre-filtered ones
# included), "simulated/min" only the simulations. Targets: >= 1,000/min analytic, >= 60/min flow, on 2 cores.
SWEEPS="$(dirname "$0")/../examples/sweeps"
sweep_case() {  # name, spec, extra args...
  local name=$1 spec=$2
  shift 2
  rm -rf "$tmp/sweep"
  local t0 t1
  t0=$EPOCHREALTIME
  "$DTSIM" sweep "$spec" -j "${SWEEP_JOBS:-2}" -q --out "$tmp/sweep" "$@"
  t1=$EPOCHREALTIME
  python3 - "$name" "$tmp/sweep/sweep.json" "$t0" "$t1" <<'PY'
import json, sys
name, path, t0, t1 = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
wall = t1 - t0
c = json.load(open(path))["counts"]
pts, sim, st = c["scenarios"], c["simulated_this_run"], c["status"]
print(f"{name:34s} {pts} points ({c['prefiltered']} pre-filtered), {sim} simulated in {wall:.1f} s wall: "
      f"{pts / wall * 60:,.0f} points/min, {sim / wall * 60:,.0f} simulated/min "
      f"({st['ok']} ok, {st['oom']} oom, {st['failed']} failed, {st['crashed']} crashed)")
PY
}
sweep_case "sweep analytic, pre-filter" "$SWEEPS/gpt3-175b-1024.json"
sweep_case "sweep analytic, no pre-filter" "$SWEEPS/gpt3-175b-1024.json" --no-prefilter
sweep_case "sweep flow, pre-filter" "$SWEEPS/gpt3-175b-1024-flow.json"
