#!/usr/bin/env bash
# dtsim scale benchmark (issue "Scale"): wall time (best and median of N runs) and peak RSS of `dtsim simulate` on
# GPT-3 175B, TP8 PP8, 1F1B, micro-batch 1, 96 micro-batches per pipeline, in the issue's three settings:
#   1. 1,048,576 GPUs (dgx-a100), folded                      target <= 2 s, <= 1 GB
#   2. 1,024 GPUs, --fold none (every rank simulated)         target <= 30 s, <= 2 GB
#   3. 16,384 GPUs of dgx-a100:16384:fat-tree:16:4 (4:1 oversubscribed leaf uplinks; TP folds with multiplicity 8)
#                                                             target <= 60 s, <= 4 GB at flow fidelity
# plus the folded 1,024-GPU run for reference. Each case writes its outputs (summary.json, bounded trace.json) like a
# user's run. A case the simulator refuses up front (memory guard) is reported as refused, with its message.
# Usage: bench/scale.sh [path/to/dtsim] [runs] [case ...]   (cases: million, unfolded, fattree, folded1024)
set -euo pipefail
DTSIM=${1:-build/bin/dtsim}
RUNS=${2:-3}
shift $(($# > 2 ? 2 : $#))
CASES=("$@")
[[ ${#CASES[@]} -gt 0 ]] || CASES=(folded1024 million unfolded fattree)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
MODEL=(--model gpt3-175b --tp 8 --pp 8 --mbs 1 --schedule 1f1b)

run_case() {  # name, args...
  local name=$1; shift
  local walls=() rss=0
  for ((i = 0; i < RUNS; i++)); do
    local t0 t1 rc=0
    rm -rf "$tmp/out"
    t0=$EPOCHREALTIME
    /usr/bin/time -f "%M" -o "$tmp/rss" "$DTSIM" simulate "${MODEL[@]}" "$@" --out "$tmp/out" -q \
      >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
    t1=$EPOCHREALTIME
    if [[ $rc -ne 0 ]]; then
      printf '%-34s refused or failed (exit %d): %s\n' "$name" "$rc" "$(grep -v '^Command exited' "$tmp/stderr" | head -1)"
      return 0
    fi
    local r; r=$(tail -1 "$tmp/rss"); (( r > rss )) && rss=$r
    walls+=("$(python3 -c "print($t1 - $t0)")")
  done
  python3 - "$name" "$rss" "$tmp/out" "${walls[@]}" <<'PY'
import json, os, statistics, sys
name, rss, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
w = sorted(float(x) for x in sys.argv[4:])
s = json.load(open(os.path.join(out, "summary.json")))
st, sim = s["simulation_stats"], s["config"]["simulation"]
size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
print(f"{name:34s} wall best {w[0]:.2f} s, median {statistics.median(w):.2f} s over {len(w)} runs | peak RSS "
      f"{rss / 1024:.0f} MiB | {sim['simulated_ranks']} simulated ranks, {st['tasks']:,} tasks, engine {st['engine']} | "
      f"iteration {s['results']['iteration_time_s']:.3f} s | outputs {size / 1e6:.1f} MB")
PY
}

echo "dtsim scale benchmark on $(nproc) cores, $(date -u +%Y-%m-%d)"
for c in "${CASES[@]}"; do
  case $c in
    folded1024) run_case "1,024 GPUs folded" --cluster dgx-a100:1024 --dp 16 --gbs 1536 ;;
    million) run_case "1,048,576 GPUs folded" --cluster dgx-a100:1048576 --dp 16384 --gbs 1572864 ;;
    unfolded) run_case "1,024 GPUs --fold none" --cluster dgx-a100:1024 --dp 16 --gbs 1536 --fold none ;;
    fattree) run_case "16,384 GPUs fat-tree 4:1" --cluster dgx-a100:16384:fat-tree:16:4 --dp 256 --gbs 24576 ;;
    *) echo "unknown case '$c' (known: folded1024 million unfolded fattree)" >&2; exit 2 ;;
  esac
done
