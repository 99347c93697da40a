#!/usr/bin/env bash
# bench/footprint.sh [DTSIM] -- the memory estimate of `dtsim simulate` (sim/model/footprint.*, the --max-memory guard)
# against the measured peak RSS (/usr/bin/time -f %M) of the runs its constants were fitted to; prints one markdown
# table row per run (docs/benchmarks.md, "Memory guard"). The estimate is read from the refusal message of the same
# run under --max-memory 1 (the CLI prints it nowhere else). Takes ~6 minutes and ~4 GB on a 2-core machine (FOOTPRINT_LONG=1: ~18 minutes).
set -euo pipefail
DTSIM=${1:-build/bin/dtsim}
[ -x "$DTSIM" ] || { echo "footprint.sh: $DTSIM is not an executable (build first)" >&2; exit 2; }
command -v /usr/bin/time >/dev/null || { echo "footprint.sh: needs /usr/bin/time (GNU time)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

G13=(--model gpt3-1.3b --tp 2 --pp 2)
G175=(--model gpt3-175b --tp 8 --pp 8 --mbs 1)
M18=(--model megatron-18b --cluster dgx-a100:128 --tp 4 --pp 4 --dp 8 --gbs 256 --fold none)

to_mb() {  # "12.3 GB" / "45.6 MB" -> MB
  awk '{ print ($2 == "GB") ? $1 * 1000 : $1 }' <<<"$1"
}

run() {  # run NAME -|out ARGS...: one table row
  local name=$1 with_out=$2
  shift 2
  local out=() msg est tasks rss meas est_mb
  if [[ $with_out == out ]]; then out=(--out "$TMP/$name"); fi
  msg=$("$DTSIM" "${CMD:-simulate}" "$@" "${out[@]}" --max-memory 1 2>&1 >/dev/null || true)
  est=$(grep -oP 'about \K[0-9.]+ [MG]B' <<<"$msg") || { echo "footprint.sh: $name: no estimate in: $msg" >&2; exit 1; }
  tasks=$(grep -oP '\(\K[0-9.]+( [Mk])?(?= tasks)' <<<"$msg")
  rss=$( { /usr/bin/time -f "%M" "$DTSIM" "${CMD:-simulate}" "$@" "${out[@]}" --max-memory none -q >/dev/null; } 2>&1 | tail -n 1)
  rm -rf "${TMP:?}/$name"
  meas=$(awk -v k="$rss" 'BEGIN { printf "%.0f", k * 1024 / 1e6 }')
  est_mb=$(to_mb "$est")
  printf '| %s | `%s%s` | %s | %s MB | %.0f MB | %+.1f%% |\n' "$name" "${CMD:+$CMD }" "$*${out[*]:+ --out DIR}" "$tasks" "$meas" "$est_mb" \
    "$(awk -v e="$est_mb" -v m="$meas" 'BEGIN { print (e / m - 1) * 100 }')"
}

echo "| run | arguments | tasks | peak RSS | estimate | error |"
echo "|---|---|---:|---:|---:|---:|"
run A - "${G13[@]}" --cluster dgx-a100:8 --dp 2 --gbs 16
run B - "${G175[@]}" --cluster dgx-a100:1024 --dp 16 --gbs 1536 --recompute full
run C - "${G175[@]}" --cluster dgx-a100:1024 --dp 16 --gbs 1536 --recompute full --collectives steps
run D - "${G13[@]}" --cluster dgx-a100:64 --dp 16 --gbs 128 --fold none
run E - "${G13[@]}" --cluster dgx-a100:64 --dp 16 --gbs 128 --fold none --collectives steps
run F - "${M18[@]}"
run G - "${M18[@]}" --collectives steps
run H - "${M18[@]}" --engine simgrid
run I - "${G13[@]}" --cluster dgx-a100:256 --dp 64 --gbs 128 --fold none
run J - "${G13[@]}" --cluster dgx-a100:256 --dp 64 --gbs 128 --fold none --engine simgrid
run K - "${G13[@]}" --cluster dgx-a100:1024 --dp 256 --gbs 512 --fold none
run L - "${G13[@]}" --cluster dgx-a100:1024 --dp 256 --gbs 512 --fold none --engine simgrid
run N - "${G175[@]}" --cluster dgx-a100:256 --dp 4 --gbs 384 --fold none
run O - "${G175[@]}" --cluster dgx-a100:256 --dp 4 --gbs 384 --fold none --network analytic
run P - "${G175[@]}" --cluster dgx-a100:1024 --dp 16 --gbs 1536 --fold none
run Q out "${G13[@]}" --cluster dgx-a100:64 --dp 16 --gbs 128 --fold none
run R out "${G175[@]}" --cluster dgx-a100:1024 --dp 16 --gbs 1536 --recompute full --collectives steps
run S out "${G175[@]}" --cluster dgx-a100:256 --dp 4 --gbs 384 --fold none --perfetto
# Issue Guard: the estimate on every benchmark's configuration (bench/moe.sh, bench/scale.sh) and on the 2026 MoE
# configurations that used to end in std::bad_alloc, within +-25% of the measured peak.
QW=(--model qwen3-235b-a22b --cluster dgx-b200:256 --pp 8 --ep 8 --dp 32 --precision mxfp8 --mbs 1 --gbs 256)
DS256=(--model deepseek-v3 --cluster dgx-b200:256 --pp 16 --ep 8 --dp 16 --mbs 1 --gbs 256)
Q30=(--model qwen3-30b-a3b --cluster dgx-h100:64 --ep 64 --dp 64 --mbs 1 --gbs 256 --zero 1 --fp32-grads)
DSB=(--model deepseek-v3 --cluster dgx-h100:2048 --pp 16 --ep 64 --dp 128 --mbs 1 --gbs 2048 --zero 1 --fp32-grads
     --recompute full --rank-order tp,pp,dp)
run T - "${QW[@]}" --network analytic
run U - "${QW[@]}"
run V - "${DS256[@]}" --network analytic
run W - "${DS256[@]}"
run X - "${Q30[@]}"
run Y - "${Q30[@]}" --routing skew:1.0
run Z - "${DSB[@]}"
run AA - --model gpt3-175b --tp 8 --pp 8 --mbs 1 --cluster dgx-a100:1048576 --dp 16384 --gbs 1572864
run AD - "${M18[@]}" --network analytic --export-chakra "$TMP/chakra-AD"
run AE - "${G13[@]}" --cluster dgx-a100:64 --dp 16 --gbs 128 --export-chakra "$TMP/chakra-AE"
run AB - --model gpt3-175b --tp 8 --pp 8 --mbs 1 --cluster dgx-a100:16384:fat-tree:16:4 --dp 256 --gbs 24576
# dtsim collective (CMD=collective): an all-to-all starts all n(n-1) flows at once (the max-min engine above 64 ranks).
CMD=collective run AF - --cluster dgx-h100:256 --op all-to-all --bytes 1MiB
CMD=collective run AG - --cluster dgx-h100:1024 --op all-to-all --bytes 1MiB
CMD=collective run AH - --cluster dgx-h100:64 --op all-to-all --bytes 1MiB
CMD=collective run AI - --cluster dgx-h100:1024 --op all-reduce --bytes 1GiB
# DeepSeek-V3 on 2,048 H100s with skewed routing: every rank simulated, ~11 minutes on 2 cores (FOOTPRINT_LONG=1).
if [[ ${FOOTPRINT_LONG:-0} == 1 ]]; then
  run AC - --model deepseek-v3 --cluster dgx-h100:2048 --pp 16 --ep 64 --dp 128 --routing skew:1.0 --mbs 1 --gbs 2048
fi
