#!/usr/bin/env bash
# tests/notebooks/run_notebooks.sh DTSIM -- executes notebooks/calibration_fits.ipynb headless (jupyter nbconvert
# --to notebook --execute) into a temporary directory, with the dtsim Python module of the build that holds the given
# dtsim binary (BUILD/bin/dtsim -> BUILD/python), and checks that every figure it lists in its manifest was written
# as a PNG. Exit 77 (ctest SKIP_RETURN_CODE) when jupyter nbconvert, the kernel's Python modules (ipykernel,
# nbformat, matplotlib), the build's Python module or the shared traces are missing.
# run_notebooks.sh DTSIM sweep_plots -- executes notebooks/sweep_plots.ipynb instead, on the committed synthetic sweep
# results (tests/data/sweep/sweep_small.jsonl, no shared data needed), and checks its four PNGs.
set -euo pipefail

DTSIM=$(realpath -m "${1:?usage: run_notebooks.sh /path/to/dtsim}")
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
NOTEBOOK=$ROOT/notebooks/calibration_fits.ipynb

skip() { echo "SKIP: $*"; exit 77; }
JUPYTER=$(command -v jupyter || true)
[[ -n $JUPYTER ]] || skip "jupyter not found (Debian: jupyter-nbconvert python3-nbconvert python3-ipykernel)"
"$JUPYTER" nbconvert --version >/dev/null 2>&1 || skip "jupyter nbconvert not available"
# The kernel runs on jupyter's own Python (ipykernel's native kernel): check its modules there.
PY=$(head -n1 "$JUPYTER" | sed -e 's/^#! *//')
[[ $PY == /* ]] || PY=python3
# shellcheck disable=SC2086  # "$PY" may be "/usr/bin/env python3"
$PY -c 'import ipykernel, nbformat, matplotlib, numpy' 2>/dev/null ||
  skip "ipykernel, nbformat, matplotlib or numpy missing for $PY (Debian: python3-ipykernel python3-nbformat python3-matplotlib)"
[[ -x $DTSIM ]] || { echo "FAIL dtsim binary not executable: $DTSIM"; exit 1; }
# The notebooks import the dtsim module: the one built beside this binary.
DTSIM_PYTHON=$(realpath -m "$(dirname "$DTSIM")/../python")
export DTSIM_PYTHON PYTHONPATH=$DTSIM_PYTHON${PYTHONPATH:+:$PYTHONPATH}
# shellcheck disable=SC2086
$PY -c 'import dtsim' 2>/dev/null || skip "the dtsim Python module is not built in $DTSIM_PYTHON (pybind11-dev, python3-dev)"
if [[ ${2:-} == sweep_plots ]]; then
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
  export DTSIM DTSIM_REPO=$ROOT NOTEBOOK_OUT=$TMP/out MPLBACKEND=Agg MPLCONFIGDIR=$TMP/mpl \
    SWEEP_RESULTS=$ROOT/tests/data/sweep/sweep_small.jsonl
  if ! "$JUPYTER" nbconvert --to notebook --execute --ExecutePreprocessor.timeout=600 --output-dir "$TMP" \
       --output executed "$ROOT/notebooks/sweep_plots.ipynb" >"$TMP/nbconvert.log" 2>&1; then
    tail -n 40 "$TMP/nbconvert.log"
    echo "FAIL notebook execution"
    exit 1
  fi
  fail=0
  for png in sweep_throughput_vs_gpus sweep_memory_by_strategy sweep_pareto sweep_time_breakdown; do
    grep -qx "$png.png" "$TMP/out/sweep_manifest.txt" 2>/dev/null || { echo "FAIL $png.png not in sweep_manifest.txt"; fail=1; }
    [[ -s $TMP/out/$png.png && $(head -c 4 "$TMP/out/$png.png" | od -An -tx1 | tr -d ' \n') == 89504e47 ]] ||
      { echo "FAIL $png.png missing or not a PNG"; fail=1; }
  done
  [[ $fail -eq 0 ]] || exit 1
  echo "PASS notebook sweep_plots: 4 figures"
  exit 0
fi
SHARED=${DTSIM_SHARED:-$ROOT/../shared}
[[ -d $SHARED/traces ]] || skip "shared traces absent: $SHARED/traces"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export DTSIM DTSIM_SHARED=$SHARED DTSIM_REPO=$ROOT NOTEBOOK_OUT=$TMP/out MPLBACKEND=Agg MPLCONFIGDIR=$TMP/mpl
if ! "$JUPYTER" nbconvert --to notebook --execute --ExecutePreprocessor.timeout=600 --output-dir "$TMP" \
     --output executed "$NOTEBOOK" >"$TMP/nbconvert.log" 2>&1; then
  tail -n 40 "$TMP/nbconvert.log"
  echo "FAIL notebook execution"
  exit 1
fi

fail=0
[[ -s $TMP/out/manifest.txt ]] || { echo "FAIL the notebook wrote no manifest.txt"; exit 1; }
n=0
while IFS= read -r png; do
  n=$((n + 1))
  if [[ ! -s $TMP/out/$png ]] || [[ $(head -c 4 "$TMP/out/$png" | od -An -tx1 | tr -d ' \n') != 89504e47 ]]; then
    echo "FAIL $png missing or not a PNG"
    fail=1
  fi
done <"$TMP/out/manifest.txt"
for kind in measured_vs_predicted gemm_efficiency memory_bound; do
  compgen -G "$TMP/out/${kind}_*.png" >/dev/null || { echo "FAIL no ${kind}_*.png"; fail=1; }
done
[[ $n -ge 6 ]] || { echo "FAIL only $n figures (expected 3 per trace, at least 2 traces)"; fail=1; }
[[ $fail -eq 0 ]] || exit 1
echo "PASS notebook calibration_fits: $n figures"
