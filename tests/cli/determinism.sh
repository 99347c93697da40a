#!/usr/bin/env bash
# cli/determinism.sh DTSIM -- the same inputs give the same outputs, byte for byte.
#
# Golden tests and result comparisons rely on dtsim being deterministic: two runs of one configuration must
# write byte-identical summary.json and trace.json (no timestamps, no hash-order or thread-order effects),
# with the default lowering and with the un-folded, step-by-step collective lowering. The human report on
# stdout must also be identical apart from the "simulated in ... wall" line, which reports wall time, and the
# "wrote DIR/..." line, which names the (different) output directory.
set -euo pipefail

DTSIM=${1:?usage: determinism.sh /path/to/dtsim}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

failures=0
fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}

BASE=(simulate --model gpt3-1.3b --cluster dgx-a100:16 --tp 2 --pp 2 --dp 4 --mbs 2 --gbs 64)

# check_twice NAME EXTRA_ARGS... -- runs the base configuration twice and compares outputs.
check_twice() {
  local name=$1
  shift
  local a="$TMP/$name.a" b="$TMP/$name.b"
  "$DTSIM" "${BASE[@]}" "$@" --out "$a" >"$a.stdout"
  "$DTSIM" "${BASE[@]}" "$@" --out "$b" >"$b.stdout"
  local f
  for f in summary.json trace.json; do
    if [[ ! -s $a/$f || ! -s $b/$f ]]; then
      fail "$name: $f missing or empty"
    elif cmp "$a/$f" "$b/$f"; then
      echo "ok  $name: $f byte-identical ($(wc -c <"$a/$f") bytes)"
    else
      fail "$name: $f differs between two runs"
    fi
  done
  # stdout: drop the wall-time line, and the "wrote" line whose directory differs by construction.
  if diff -u <(grep -v -e '^simulated in ' -e '^wrote ' "$a.stdout") \
             <(grep -v -e '^simulated in ' -e '^wrote ' "$b.stdout"); then
    echo "ok  $name: stdout identical apart from the wall-time line"
  else
    fail "$name: stdout differs between two runs (see diff above)"
  fi
  # The filter must have removed exactly one wall-time line each, and the "wrote" line must be as expected.
  if [[ $(grep -c '^simulated in .* s wall' "$a.stdout") -ne 1 ]]; then
    fail "$name: stdout has no single 'simulated in ... s wall' line"
  fi
  if ! grep -qxF "wrote $a/summary.json and trace.json (open in https://ui.perfetto.dev)" "$a.stdout"; then
    fail "$name: stdout lacks the expected 'wrote $a/summary.json and trace.json' line"
  fi
}

check_twice default
check_twice unfolded_steps --fold none --collectives steps

# The bakeoff (every planner, their plans simulated in child processes) writes the same bakeoff.json twice.
for k in 1 2; do
  "$DTSIM" bakeoff --model gpt3-1.3b --cluster dgx-a100:16 --gbs 64 --top 2 --quiet --out "$TMP/bakeoff$k" ||
    fail "bakeoff run $k failed"
done
cmp -s "$TMP/bakeoff1/bakeoff.json" "$TMP/bakeoff2/bakeoff.json" || fail "bakeoff.json differs between two runs"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert [p['planner'] for p in d['planners']]==['grid','pipedream','dapple','rannc','uniap','luo']; assert all(p['plan'] for p in d['planners'])" \
  "$TMP/bakeoff1/bakeoff.json" || fail "bakeoff.json lacks a plan for every planner"

# Capacity planning writes the same capacity.json twice.
for k in 1 2; do
  "$DTSIM" capacity --cluster dgx-a100:16 --gbs 64 --models megatron-1.7b,megatron-7.5b,megatron-39b \
    --planners grid,dapple,luo,megatron-tp --quiet --out "$TMP/capacity$k" || fail "capacity run $k failed"
done
cmp -s "$TMP/capacity1/capacity.json" "$TMP/capacity2/capacity.json" || fail "capacity.json differs between two runs"

# Every golden scenario (tests/golden/scenarios.txt: schedules, ZeRO, stage replicas, fabrics, graph clusters)
# twice, this time with its trace: summary.json and trace.json byte-identical. (golden/check.sh compares the
# summaries with committed references but runs without traces.)
# shellcheck source=../golden/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../golden/common.sh"
DTSIM_ABS=$(golden_dtsim_path "$DTSIM")
golden_count=0
while IFS=$'\t' read -r name args; do
  read -ra argv <<<"$args"
  for k in 1 2; do
    (cd "$GOLDEN_DIR" && "$DTSIM_ABS" simulate "${argv[@]}" --out "$TMP/golden/$name.$k" --quiet) </dev/null ||
      fail "golden/$name: run $k failed"
  done
  for f in summary.json trace.json; do
    if ! cmp -s "$TMP/golden/$name.1/$f" "$TMP/golden/$name.2/$f"; then
      fail "golden/$name: $f differs between two runs (or is missing)"
    fi
  done
  golden_count=$((golden_count + 1))
done < <(golden_scenarios)
echo "ok  golden scenarios: $golden_count x (summary.json, trace.json) byte-identical over two runs"

if [[ $failures -ne 0 ]]; then
  echo "determinism: $failures checks FAILED"
  exit 1
fi
echo "determinism: all checks passed"
