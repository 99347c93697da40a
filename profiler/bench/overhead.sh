#!/usr/bin/env bash
# overhead.sh BUILD_DIR [dtsim_gemm_sweep arguments...] -- the profiler's overhead on a GEMM sweep.
#
# Runs BUILD_DIR/profiler/dtsim_gemm_sweep twice, without and with the injection library
# (CUDA_INJECTION64_PATH=BUILD_DIR/profiler/libdtsim_cupti.so), and prints per shape the CUDA-event time of both
# runs and the relative slowdown, then the totals: summed GEMM time and whole-process wall time (which includes
# CUPTI's setup and writing the trace at exit). REPEAT=N (default 1) alternates N unprofiled/profiled pairs and
# keeps the fastest time of each shape, to damp clock and thermal noise.
#   e.g.  profiler/bench/overhead.sh build --dtype bf16 --reps 50
set -euo pipefail

BUILD=${1:?usage: overhead.sh BUILD_DIR [dtsim_gemm_sweep args...]}
shift
GEMM=$BUILD/profiler/dtsim_gemm_sweep
LIB=$BUILD/profiler/libdtsim_cupti.so
REPEAT=${REPEAT:-1}
for f in "$GEMM" "$LIB"; do
  [[ -e $f ]] || { echo "overhead.sh: $f not found (build dtsim_gemm_sweep and dtsim_cupti)" >&2; exit 2; }
done

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# run NAME ITER [env...] -- one sweep; CSV to $WORK/NAME.ITER.csv, wall seconds to $WORK/NAME.ITER.wall.
run() {
  local name=$1 iter=$2
  shift 2
  local t0 t1
  t0=$(date +%s.%N)
  env "$@" "$GEMM" "${GEMM_ARGS[@]}" >"$WORK/$name.$iter.csv" 2>"$WORK/$name.$iter.err" || {
    echo "overhead.sh: $name run failed:" >&2
    cat "$WORK/$name.$iter.err" >&2
    exit 1
  }
  t1=$(date +%s.%N)
  awk -v a="$t1" -v b="$t0" 'BEGIN { print a - b }' >"$WORK/$name.$iter.wall"
}

GEMM_ARGS=("$@")
for ((i = 0; i < REPEAT; ++i)); do
  run base "$i" -u CUDA_INJECTION64_PATH
  run prof "$i" CUDA_INJECTION64_PATH="$LIB" DTSIM_PROFILE_OUT="$WORK/trace.json" DTSIM_PROFILE_QUIET=1
done
[[ -s $WORK/trace.json ]] || echo "overhead.sh: warning: the profiled run wrote no trace" >&2
ls -l "$WORK/trace.json" 2>/dev/null | awk '{printf "trace size: %.1f MB\n", $5 / 1e6}'

# Best (minimum) time per shape over the repetitions, then the comparison.
awk -F, '
  FNR == 1 { kind = (FILENAME ~ /\/prof\./) ? "prof" : "base"; next }
  {
    key = $1 "," $2 "," $3 "," $4
    if (!(key in seen)) { seen[key] = 1; order[++n] = key }
    t = $5 + 0
    if (!((kind, key) in best) || t < best[kind, key]) best[kind, key] = t
  }
  END {
    printf "%-26s %14s %14s %9s\n", "m,n,k,dtype", "base_s", "profiled_s", "slowdown"
    for (i = 1; i <= n; ++i) {
      k = order[i]; b = best["base", k]; p = best["prof", k]
      printf "%-26s %14.6e %14.6e %8.2f%%\n", k, b, p, (p / b - 1) * 100
      sb += b; sp += p
    }
    if (sb > 0) printf "%-26s %14.6e %14.6e %8.2f%%\n", "total GEMM time", sb, sp, (sp / sb - 1) * 100
  }' "$WORK"/base.*.csv "$WORK"/prof.*.csv

wall_base=$(sort -g "$WORK"/base.*.wall | head -1)
wall_prof=$(sort -g "$WORK"/prof.*.wall | head -1)
awk -v b="$wall_base" -v p="$wall_prof" \
  'BEGIN { printf "%-26s %14.3f %14.3f %8.2f%%  (seconds, whole process)\n", "wall time", b, p, (p / b - 1) * 100 }'
