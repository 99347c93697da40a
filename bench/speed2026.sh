#!/usr/bin/env bash
# dtsim speed benchmark for 2026 configurations (issue "Speed"): wall time (best and median of N runs) and peak RSS
# of `dtsim simulate` on the issue's table, each on the analytic network and on the flow network:
#   qwen235-h100   Qwen3-235B-A22B, 256 H100, TP2 PP8 EP32 (ETP 1), interleaved:4, FP8, SP, gbs 512
#   qwen235-b200   Qwen3-235B-A22B, 256 B200, PP8 EP8, MXFP8, gbs 512
#   dsv3-b200      DeepSeek-V3, 256 B200, PP16 EP8 (uneven stages: 61 layers), gbs 512
#   gpt3-8k        GPT-3 175B, 8,192 H100, TP4 PP8 DP256, interleaved:12, FP8, SP, --tp-comm-overlap, gbs 2048
#   dsv3-skew      DeepSeek-V3, 2,048 H100, PP16 EP64, --routing skew:1.0, gbs 2048
#   llama405-nvl72 Llama 3 405B, 576 GB200 (NVL72), TP8 PP9 DP8, MXFP8, SP, --tp-comm-overlap, gbs 576
#   gpt3-1k        GPT-3 175B, 1,024 A100, TP8 PP8 DP16, folded (reference), gbs 1536
#   nemotronh56    Nemotron-H 56B (hybrid Mamba-2), 256 H100, TP8 PP4 DP8, SP, gbs 256 (issue Workloads: <= 5 s)
#   qwen3next      Qwen3-Next-80B-A3B (Gated DeltaNet + gated attention, MoE), 256 H100, TP2 PP4 EP32 (ETP 1), SP,
#                  gbs 512 (issue Workloads: <= 5 s)
#   dsv3-dualpipe  DeepSeek-V3 (MTP 1), 2,048 H800, PP16 EP64, bidirectional DualPipe, DeepEP dispatch, node-limited
#                  routing (8 groups, 4 per token), FP8, gbs 4096 (issue Workloads)
#   sweep300       `dtsim sweep examples/sweeps/moe-dense-300.json -j 2`: 300 MoE and dense plans on 256-2,048 H100s
#                  (once, not per network; target <= 10 min)
# The issue gives no global batch for most rows: the sizes above are this script's. Targets: <= 5 s analytic and
# <= 15 s flow, <= 2 GB. A case past the per-run limit (TIMEOUT_S, default 120) is reported as not finished; one
# the simulator refuses up front (memory guard, invalid plan) is reported with its message.
# Usage: bench/speed2026.sh [path/to/dtsim] [runs] [case ...]   (the default cases leave out sweep300)
set -uo pipefail
DTSIM=${1:-build/bin/dtsim}
RUNS=${2:-3}
shift $(($# > 2 ? 2 : $#))
CASES=("$@")
[[ ${#CASES[@]} -gt 0 ]] || CASES=(gpt3-1k qwen235-h100 qwen235-b200 dsv3-b200 gpt3-8k dsv3-skew llama405-nvl72 nemotronh56 qwen3next)
TIMEOUT_S=${TIMEOUT_S:-120}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

args_of() {
  case $1 in
    qwen235-h100) echo "--model qwen3-235b-a22b --cluster dgx-h100:256 --tp 2 --pp 8 --ep 32 --etp 1 --schedule interleaved:4 --precision fp8 --sequence-parallel --gbs 512" ;;
    qwen235-b200) echo "--model qwen3-235b-a22b --cluster dgx-b200:256 --pp 8 --ep 8 --precision mxfp8 --gbs 512" ;;
    dsv3-b200) echo "--model deepseek-v3 --cluster dgx-b200:256 --pp 16 --ep 8 --layers-per-stage 4,4,4,4,4,4,4,4,4,4,4,4,4,3,3,3 --gbs 512" ;;
    gpt3-8k) echo "--model gpt3-175b --cluster dgx-h100:8192 --tp 4 --pp 8 --dp 256 --schedule interleaved:12 --precision fp8 --sequence-parallel --tp-comm-overlap --gbs 2048" ;;
    dsv3-skew) echo "--model deepseek-v3 --cluster dgx-h100:2048 --pp 16 --ep 64 --layers-per-stage 4,4,4,4,4,4,4,4,4,4,4,4,4,3,3,3 --routing skew:1.0 --gbs 2048" ;;
    llama405-nvl72) echo "--model llama3-405b --cluster gb200-nvl72:576 --tp 8 --pp 9 --dp 8 --layers-per-stage 14,14,14,14,14,14,14,14,14 --precision mxfp8 --sequence-parallel --tp-comm-overlap --gbs 576" ;;
    gpt3-1k) echo "--model gpt3-175b --cluster dgx-a100:1024 --tp 8 --pp 8 --dp 16 --gbs 1536" ;;
    nemotronh56) echo "--model nemotron-h-56b --cluster dgx-h100:256 --tp 8 --pp 4 --dp 8 --sequence-parallel --gbs 256" ;;
    dsv3-dualpipe) echo "--model deepseek-v3-mtp --cluster dgx-h800:2048 --pp 16 --ep 64 --etp 1 --schedule dualpipe --dispatcher deepep --precision fp8 --zero 1 --gbs 4096" ;;
    qwen3next) echo "--model qwen3-next-80b-a3b --cluster dgx-h100:256 --tp 2 --pp 4 --ep 32 --etp 1 --sequence-parallel --gbs 512" ;;
    *) echo "unknown case '$1'" >&2; return 1 ;;
  esac
}

run_case() {  # name, network
  local name=$1 net=$2 walls=() rss=0 args
  args=$(args_of "$name") || return 0
  for ((i = 0; i < RUNS; i++)); do
    local t0 t1 rc=0
    rm -rf "$tmp/out"
    t0=$EPOCHREALTIME
    # shellcheck disable=SC2086
    timeout "$TIMEOUT_S" /usr/bin/time -f "%M" -o "$tmp/rss" "$DTSIM" simulate $args --mbs 1 --network "$net" \
      --no-trace --out "$tmp/out" -q >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
    t1=$EPOCHREALTIME
    if [[ $rc -eq 124 ]]; then
      printf '%-15s %-8s not finished in %d s\n' "$name" "$net" "$TIMEOUT_S"
      return 0
    elif [[ $rc -ne 0 ]]; then
      printf '%-15s %-8s refused or failed (exit %d): %s\n' "$name" "$net" "$rc" \
        "$(grep -v '^Command exited' "$tmp/stderr" | head -1)"
      return 0
    fi
    local r; r=$(tail -1 "$tmp/rss"); (( r > rss )) && rss=$r
    walls+=("$(python3 -c "print($t1 - $t0)")")
  done
  python3 - "$name" "$net" "$rss" "$tmp/out" "${walls[@]}" <<'PY'
import json, os, statistics, sys
name, net, rss, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
w = sorted(float(x) for x in sys.argv[5:])
s = json.load(open(os.path.join(out, "summary.json")))
st, sim = s["simulation_stats"], s["config"]["simulation"]
print(f"{name:15s} {net:8s} wall best {w[0]:.2f} s, median {statistics.median(w):.2f} s over {len(w)} | peak RSS "
      f"{rss / 1024:.0f} MiB | {sim['simulated_ranks']} simulated ranks, {st['tasks']:,} tasks | "
      f"iteration {s['results']['iteration_time_s']:.3f} s | {sim['fold_reason']}")
PY
}

run_sweep() {  # the 300-plan sweep with 2 workers, once
  local t0 t1 rc=0
  rm -rf "$tmp/sweep"
  t0=$EPOCHREALTIME
  /usr/bin/time -f "%M" -o "$tmp/rss" "$DTSIM" sweep examples/sweeps/moe-dense-300.json -j 2 --out "$tmp/sweep" -q \
    >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
  t1=$EPOCHREALTIME
  if [[ $rc -ne 0 ]]; then
    printf '%-15s failed (exit %d): %s\n' sweep300 "$rc" "$(grep -v '^Command exited' "$tmp/stderr" | head -1)"
    return 0
  fi
  python3 - "$tmp/sweep/sweep.json" "$(python3 -c "print($t1 - $t0)")" "$(tail -1 "$tmp/rss")" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["counts"]
print(f"sweep300        2 workers wall {float(sys.argv[2]):.1f} s | peak RSS of the driver {int(sys.argv[3]) / 1024:.0f} MiB | "
      f"{c['scenarios']} plans: {c['prefiltered']} refused by the memory estimate, {c['rows']} simulated "
      f"({c['status']['ok']} ok, {c['status']['failed']} failed, {c['status']['crashed']} crashed)")
PY
}

echo "dtsim speed benchmark (2026 configurations) on $(nproc) cores, $(date -u +%Y-%m-%d), timeout ${TIMEOUT_S} s per run"
for c in "${CASES[@]}"; do
  if [[ $c == sweep300 ]]; then run_sweep; continue; fi
  for net in analytic flow; do run_case "$c" "$net"; done
done
