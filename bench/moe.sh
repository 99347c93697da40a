#!/usr/bin/env bash
# dtsim MoE benchmark (issue "MoE"): times `dtsim simulate` on DeepSeek-V3 (671B, 256 experts top-8) on 2,048 H100s,
# PP 16 x EP 64 x DP 128 (EP carved from DP, as DeepSeek trained), 1F1B, ZeRO-1, fp32 gradients, full recompute,
# micro-batch 1 of 4,096 tokens, global batch 2,048 -- balanced routing (EP ranks symmetric: dp folded) -- and the
# cost of skewed routing (EP ranks differ: dp simulated unfolded) on a smaller case, Qwen3-30B-A3B on 64 H100s,
# EP 64, balanced vs Zipf skew 1.0. Usage: bench/moe.sh [path/to/dtsim] [runs].
set -euo pipefail
DTSIM=${1:-build/bin/dtsim}
RUNS=${2:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run_case() {  # name, args...
  local name=$1; shift
  local walls=() rss=0
  for ((i = 0; i < RUNS; i++)); do
    local t0 t1
    t0=$EPOCHREALTIME
    if [ -x /usr/bin/time ]; then
      /usr/bin/time -f "%M" -o "$tmp/rss" "$DTSIM" simulate "$@" --out "$tmp/out" --no-trace > "$tmp/stdout"
      local r; r=$(cat "$tmp/rss"); (( r > rss )) && rss=$r
    else
      "$DTSIM" simulate "$@" --out "$tmp/out" --no-trace > "$tmp/stdout"
    fi
    t1=$EPOCHREALTIME
    walls+=("$(python3 -c "print($t1 - $t0)")")
  done
  python3 - "$name" "$rss" "$tmp/out/summary.json" "${walls[@]}" <<'PY'
import json, statistics, sys
name, rss, summary = sys.argv[1], int(sys.argv[2]), json.load(open(sys.argv[3]))
w = sorted(float(x) for x in sys.argv[4:])
st = summary["simulation_stats"]
rss_txt = f"{rss/1024:.0f} MiB" if rss else "n/a"
print(f"{name:44s} wall best {w[0]:.2f} s, median {statistics.median(w):.2f} s over {len(w)} runs | "
      f"{len({r['simulated_as'] for r in summary['ranks']})} simulated ranks, {st['tasks']} tasks | "
      f"peak RSS {rss_txt} | "
      f"iteration {summary['results']['iteration_time_s']:.3f} s")
PY
}

echo "dtsim MoE benchmark on $(nproc) cores"
DS=(--model deepseek-v3 --cluster dgx-h100:2048 --pp 16 --ep 64 --dp 128 --mbs 1 --gbs 2048 --zero 1 --fp32-grads
    --recompute full --rank-order tp,pp,dp)
run_case "deepseek-v3 2048 H100 EP64, balanced" "${DS[@]}"
Q=(--model qwen3-30b-a3b --cluster dgx-h100:64 --ep 64 --dp 64 --mbs 1 --gbs 256 --zero 1 --fp32-grads)
run_case "qwen3-30b-a3b 64 H100 EP64, balanced" "${Q[@]}"
run_case "qwen3-30b-a3b 64 H100 EP64, skew:1.0" "${Q[@]}" --routing skew:1.0
