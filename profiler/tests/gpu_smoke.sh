#!/usr/bin/env bash
# gpu_smoke.sh SMOKE SMOKE_API LIBDTSIM_CUPTI CHECK WORKDIR -- the profiler's GPU smoke test (ctest label "gpu").
#   1. runs SMOKE (an unmodified CUDA program) with CUDA_INJECTION64_PATH=LIBDTSIM_CUPTI and checks its trace;
#   2. runs SMOKE_API (the same program profiling itself through dtsim::profiler::start/stop/flush) and checks it.
# Exit code 77 (ctest SKIP_RETURN_CODE) when there is no GPU: nvidia-smi missing or listing no GPU, or the program
# finding no CUDA device.
set -uo pipefail

SMOKE=${1:?usage: gpu_smoke.sh SMOKE SMOKE_API LIBDTSIM_CUPTI CHECK WORKDIR}
SMOKE_API=${2:?}
LIB=${3:?}
CHECK=${4:?}
WORK=${5:?}

if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "SKIP: nvidia-smi not found (no NVIDIA driver)"
  exit 77
fi
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "SKIP: nvidia-smi lists no GPU"
  exit 77
fi

mkdir -p "$WORK"
failed=0

# run_case NAME EXPECTED_FILE COMMAND... -- runs the program, then the checks on the file it must have written.
run_case() {
  local name=$1 out=$2
  shift 2
  rm -f "$out"
  echo "== $name: $*"
  "$@"
  local rc=$?
  if [[ $rc -eq 77 ]]; then
    echo "SKIP: no CUDA device"
    exit 77
  fi
  if [[ $rc -ne 0 ]]; then
    echo "FAIL $name: exit code $rc"
    failed=1
    return
  fi
  if [[ ! -s $out ]]; then
    echo "FAIL $name: no trace at $out"
    failed=1
    return
  fi
  "$CHECK" "$out" --min-kernels 3 --annotation smoke || failed=1
}

# NVTX_INJECTION64_PATH is left unset on purpose: the library must point NVTX at CUPTI by itself.
run_case injection "$WORK/injection.json" \
  env -u NVTX_INJECTION64_PATH CUDA_INJECTION64_PATH="$LIB" DTSIM_PROFILE_OUT="$WORK/injection.json" "$SMOKE"
run_case api "$WORK/api.json" env -u NVTX_INJECTION64_PATH -u CUDA_INJECTION64_PATH "$SMOKE_API" "$WORK/api.json"

if [[ $failed -ne 0 ]]; then
  echo "gpu smoke: FAILED (traces kept in $WORK)"
  exit 1
fi
echo "gpu smoke: ok"
