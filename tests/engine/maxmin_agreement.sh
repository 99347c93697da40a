#!/usr/bin/env bash
# engine/maxmin_agreement.sh DTSIM -- dtsim's own max-min engine against SimGrid: every golden scenario (whose
# expected summary.json SimGrid produced) rerun with --engine maxmin must give the same numbers to a relative 1e-9
# (start/end times, iteration time, per-rank breakdown, memory, link bytes, busy time and peak utilisation), plus
# larger unfolded cases run with both engines (fat-tree with oversubscribed uplinks, shared NICs, interference,
# steps collectives, an explicit graph, MoE).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../golden/common.sh"
DTSIM=$(golden_dtsim_path "${1:?usage: maxmin_agreement.sh /path/to/dtsim}")
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
COMPARE="$(dirname "${BASH_SOURCE[0]}")/compare_summaries.py"

failures=0
count=0
golden_scenarios >"$TMP/list"
while IFS=$'\t' read -r name args; do
  read -ra argv <<<"$args"
  (cd "$GOLDEN_DIR" && "$DTSIM" simulate "${argv[@]}" --engine maxmin --out "$TMP/$name" --no-trace --quiet)
  count=$((count + 1))
  if ! python3 "$COMPARE" "$EXPECTED_DIR/$name.summary.json" "$TMP/$name/summary.json" "$name"; then
    failures=$((failures + 1))
  fi
done <"$TMP/list"

# Unfolded cases beyond the goldens, both engines.
while IFS='|' read -r name args; do
  read -ra argv <<<"$args"
  for e in simgrid maxmin; do
    (cd "$GOLDEN_DIR" && "$DTSIM" simulate "${argv[@]}" --engine "$e" --out "$TMP/$name.$e" --no-trace --quiet)
  done
  count=$((count + 1))
  python3 "$COMPARE" "$TMP/$name.simgrid/summary.json" "$TMP/$name.maxmin/summary.json" "$name" ||
    failures=$((failures + 1))
done <<'CASES'
fat_tree_2to1|--model ./tiny-4layer.json --cluster dgx-a100:64:fat-tree:2:2 --tp 4 --pp 2 --dp 8 --mbs 1 --gbs 32
shared_nics|--model ./tiny-4layer.json --cluster dgx-h100:32 --tp 2 --pp 2 --dp 8 --mbs 1 --gbs 16 --fold none
steps_unfolded|--model ./tiny-2layer.json --cluster dgx-a100:16 --tp 4 --pp 2 --dp 2 --mbs 1 --gbs 8 --collectives steps --fold none
moe_ep|--model mixtral-8x7b --seq-len 512 --cluster dgx-h100:16 --tp 2 --pp 2 --dp 4 --ep 4 --sequence-parallel --mbs 1 --gbs 8 --fold none
zero3_channels|--model ./tiny-4layer.json --cluster dgx-a100:16 --tp 2 --pp 1 --dp 8 --mbs 1 --gbs 16 --zero 3 --channels 2 --fold none
CASES

echo "maxmin agreement: $((count - failures)) of $count cases agree"
[[ $failures -eq 0 ]]
