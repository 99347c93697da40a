#!/usr/bin/env bash
# golden/check_collective.sh DTSIM -- the all-reduce sweep 8 B ... 1 GiB on dgx-a100:16 (flow fidelity, default
# calibration, automatic algorithm) must reproduce the committed table collective/allreduce_dgx-a100-16.tsv.
# Regenerate after an intended change with:
#   dtsim collective --cluster dgx-a100:16 --sweep 8:1GiB --out DIR -q && cp DIR/collective.tsv tests/golden/collective/allreduce_dgx-a100-16.tsv
set -euo pipefail
DTSIM=${1:?usage: check_collective.sh /path/to/dtsim}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$DTSIM" collective --cluster dgx-a100:16 --sweep 8:1GiB --out "$TMP/out" -q
if ! diff -u "$HERE/collective/allreduce_dgx-a100-16.tsv" "$TMP/out/collective.tsv"; then
  echo "FAIL: all-reduce sweep differs from the committed table"
  exit 1
fi
rows=$(($(wc -l < "$TMP/out/collective.tsv") - 1))
echo "ok  all-reduce sweep on dgx-a100:16 matches the committed table ($rows sizes)"
