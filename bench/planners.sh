#!/usr/bin/env bash
# Regenerates the planner figures of docs/planning.md (bake-off tables, search times on GPT-3 175B,
# capacity against a deadline) with the shipped presets. Usage: bench/planners.sh [path/to/dtsim] OUT_DIR [PART]
# (PART: bakeoff, search, uniap or all, the default; run search on an otherwise idle machine: it reports times).
# PART uniap: UniAP with a strategy per stage ("uniap") against one strategy for the model ("uniap-k1").
# PART capacity: the largest enlarged BERT (examples/models/bert-ladder/) each planner fits on 32 V100s (RaNNC's claim),
# on the 6-layer ladder and one layer at a time from 60 to 66 layers.
# Each case's stdout goes to OUT_DIR/<case>.txt, its JSON to OUT_DIR/<case>/, its wall time to OUT_DIR/times.tsv.
set -euo pipefail
DTSIM=${1:-build/bin/dtsim}
OUT=${2:?usage: bench/planners.sh [dtsim] OUT_DIR}
PART=${3:-all}
mkdir -p "$OUT"
touch "$OUT/times.tsv"
run() {  # name, dtsim args...
  local name=$1; shift
  local t0=$EPOCHREALTIME
  "$DTSIM" "$@" --out "$OUT/$name" > "$OUT/$name.txt" 2>&1 || echo "exit $?" >> "$OUT/$name.txt"
  printf '%s\t%.1f\n' "$name" "$(echo "$EPOCHREALTIME - $t0" | bc)" >> "$OUT/times.tsv"
}
if [[ $PART == bakeoff || $PART == all ]]; then
  run bakeoff-1.3b-a100 bakeoff --model gpt3-1.3b --cluster dgx-a100:16 --gbs 64 --top 3
  run bakeoff-1.3b-v100 bakeoff --model gpt3-1.3b --cluster dgx1-v100:16 --gbs 64 --top 3
  run bakeoff-7.5b-a100 bakeoff --model megatron-7.5b --cluster dgx-a100:64 --gbs 512 --tp 8 --top 3
  run bakeoff-chain bakeoff --model gpt3-1.3b --cluster examples/nvlink-chain-8gpu.json --gbs 32 --top 3
  run bakeoff-bert-ib bakeoff --model examples/bert-large.json --cluster dgx1-v100:16 --gbs 128 --top 3
  run bakeoff-bert-eth bakeoff --model examples/bert-large.json --cluster examples/dgx1-v100-2x8-25gbe.json --gbs 128 --top 3
fi
if [[ $PART == capacity || $PART == all ]]; then
  ladder=examples/models/bert-ladder/bert-large.json
  for l in 6 12 18 24 30 36 42 48 54 60 66 72; do ladder+=,examples/models/bert-ladder/bert-h8192-l$l.json; done
  run capacity-bert-v100 capacity --cluster dgx1-v100:32 --gbs 64 --models "$ladder" \
    --planners megatron-tp,rannc,rannc-layers,rannc-paper,grid,uniap,dapple,luo,pipedream
  # One layer at a time between 60 and 66 layers: where cutting inside layers could matter.
  fine=examples/models/bert-ladder/bert-h8192-l60.json
  for l in 61 62 63 64 65 66; do fine+=,examples/models/bert-ladder/bert-h8192-l$l.json; done
  run capacity-bert-v100-fine capacity --cluster dgx1-v100:32 --gbs 64 --models "$fine" \
    --planners rannc,rannc-layers,rannc-paper,grid,uniap
  [[ $PART == capacity ]] && exit 0
fi
[[ $PART == search || $PART == uniap || $PART == all ]] || exit 0
if [[ $PART == uniap || $PART == all ]]; then
  for p in uniap uniap-k1; do
    run "$p-175b-a100" plan --planner "$p" --model gpt3-175b --cluster dgx-a100:1024 --gbs 1536 --top 3
    run "$p-1.3b-a100" plan --planner "$p" --model gpt3-1.3b --cluster dgx-a100:16 --gbs 64 --top 3
    run "$p-1.3b-v100" plan --planner "$p" --model gpt3-1.3b --cluster dgx1-v100:16 --gbs 64 --top 3
    run "$p-7.5b-a100" plan --planner "$p" --model megatron-7.5b --cluster dgx-a100:64 --gbs 512 --top 3
    run "$p-18b-v100" plan --planner "$p" --model megatron-18b --cluster dgx1-v100:32 --gbs 256 --top 3
    run "$p-70b-h100" plan --planner "$p" --model llama3-70b --cluster dgx-h100:256 --gbs 512 --top 3
    # Memory-limited cases where a TP degree per stage is picked or ranked (found by a search over small models).
    run "$p-7b-h100-32g" plan --planner "$p" --model llama2-7b --cluster dgx-h100:16 --gbs 16 --memory-limit 32 --top 3
    run "$p-7b-a100-32g" plan --planner "$p" --model llama2-7b --cluster dgx-a100:16 --gbs 32 --memory-limit 32 --top 3
    run "$p-7b-v100-24g" plan --planner "$p" --model llama2-7b --cluster dgx1-v100:16 --gbs 64 --memory-limit 24 --top 3
  done
  [[ $PART == uniap ]] && exit 0
fi
for p in grid pipedream dapple rannc uniap luo; do
  run "plan-175b-$p-tp1" plan --planner "$p" --model gpt3-175b --cluster dgx-a100:1024 --gbs 1536 --top 3
done
for p in pipedream dapple rannc luo; do
  run "plan-175b-$p-tp8" plan --planner "$p" --model gpt3-175b --cluster dgx-a100:1024 --gbs 1536 --tp 8 --top 3
done
run deadline-175b capacity --model gpt3-175b --tokens 300B --days 30 --gpu a100-sxm4-80gb --price-per-gpu-hour 2
