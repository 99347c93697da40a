#!/usr/bin/env bash
# torch_campaign.sh OUT_DIR -- the PyTorch-only measurements of this folder, for a GPU machine with no dtsim build:
#   hw_sweep.py (GEMMs bf16 / FP8 tensorwise / rowwise / fp32, HBM copy, SDPA, host time per operator, a
#   Llama-3-8B-shaped layer stack eager), hw_sweep.py --compile (the same stack eager and torch.compile'd),
#   moe_sweep.py (grouped expert GEMMs eager and as CUDA graphs, the memory-bound MoE kernels) and
#   sustained.py 8 --mixes (GEMM throughput under seconds of load). Each step runs under its own time limit; after
#   each, OUT_DIR/torch_campaign.tar.gz is rewritten with everything so far (a step cut off loses only itself).
#   The exit code is the number of failed steps.
set -uo pipefail
OUT=${1:?usage: torch_campaign.sh OUT_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
RES=$(mktemp -d)/campaign
mkdir -p "$RES" "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
failed=0
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv \
  | tee "$RES/nvidia-smi.csv"
step() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$RES/$name.log" 2>&1
  local rc=$?
  echo "step $name: rc=$rc in $((SECONDS - t0)) s" | tee -a "$RES/steps.txt"
  [[ $rc -ne 0 ]] && failed=$((failed + 1)) && tail -n 8 "$RES/$name.log"
  tar -C "$(dirname "$RES")" -czf "$OUT/torch_campaign.tar.gz" campaign
}
step moe_sweep "${MOE_LIMIT:-220}" "$PY" "$HERE/moe_sweep.py" "$RES/moe"
step sustained "${SUSTAINED_LIMIT:-150}" "$PY" "$HERE/sustained.py" "$RES/sustained" 8 --mixes
step hw_sweep "${HW_LIMIT:-150}" "$PY" "$HERE/hw_sweep.py" "$RES/hw"
step hw_compile "${COMPILE_LIMIT:-120}" "$PY" "$HERE/hw_sweep.py" "$RES/hw_compile" --compile
cat "$RES/steps.txt"
exit "$failed"
