#!/usr/bin/env bash
# gpu_campaign.sh BUILD_DIR OUT_DIR -- everything the profiler issue measures on one GPU machine, in one go:
#   1. the GPU smoke test (injection into an unmodified CUDA program, and the start/stop API);
#   2. cuBLAS GEMM sweeps (fp16 + bf16 on transformer shapes at 4,096 tokens; bf16 at 1,024 and 16,384 tokens);
#   3. the profiler's overhead on the GEMM sweep (overhead.sh, 3 alternating pairs);
#   4. the NCCL sweep on the GPUs present (one GPU: NCCL's own single-rank floor, no link is measured);
#   5. PyTorch GPT steps (torch_gpt_step.py): two torch.profiler traces with shapes for `dtsim calibrate compute`,
#      end-to-end iteration times and peak memory of GPT configurations for checking the fitted preset, and the same
#      program under our injection library (attach to an unmodified PyTorch program; overhead on a real workload);
#   6. the MoE kernel sweep (moe_sweep.py): grouped expert GEMMs, per-expert GEMMs, the memory-bound MoE kernels;
#   7. sustained GEMM throughput (sustained.py --mixes): the power cap under seconds of load.
# BUILD_DIR holds profiler/{dtsim_gemm_sweep,dtsim_nccl_sweep,libdtsim_cupti.so,dtsim_gpu_smoke[_api],
# dtsim_profile_check}. Writes OUT_DIR/campaign.tar.gz (all results) and OUT_DIR/summary.txt. Each step's failure
# is logged and the campaign goes on; the exit code is the number of failed steps.
set -uo pipefail

BUILD=${1:?usage: gpu_campaign.sh BUILD_DIR OUT_DIR}
OUT=${2:?usage: gpu_campaign.sh BUILD_DIR OUT_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$BUILD/profiler
RES=$(mktemp -d)/h100
mkdir -p "$RES" "$OUT"
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
failed=0
PY=${PYTHON:-python3}

say() { echo "$*" | tee -a "$SUMMARY"; }
# step NAME COMMAND... -- runs a step with its output in $RES/NAME.log, records its time and exit code.
step() {
  local name=$1
  shift
  local t0=$SECONDS
  echo "== $name: $*" >"$RES/$name.log"
  "$@" >>"$RES/$name.log" 2>&1
  local rc=$?
  say "step $name: rc=$rc in $((SECONDS - t0)) s"
  if [[ $rc -ne 0 ]]; then
    failed=$((failed + 1))
    tail -n 15 "$RES/$name.log" | sed 's/^/    /' | tee -a "$SUMMARY"
  fi
}

# Libraries the binaries were linked against (CUDA 13 runtime, cuBLAS, NCCL, CUPTI): the toolkit's, else the ones
# pip installed next to PyTorch.
libdirs=()
for lib in libcudart.so.13 libcublas.so.13 libnccl.so.2 libcupti.so.13; do
  f=$(find /usr/local/cuda/lib64 /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/targets /usr/lib/x86_64-linux-gnu \
        /usr/local/lib /opt -name "$lib" 2>/dev/null | head -1)
  if [[ -n $f ]]; then
    libdirs+=("$(dirname "$f")")
  else
    say "library $lib: not found"
  fi
done
LIBPATH=$(printf '%s\n' "$BIN" "${libdirs[@]}" | awk '!seen[$0]++' | paste -sd:)
export LD_LIBRARY_PATH=$LIBPATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
say "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv \
  | tee -a "$SUMMARY" >"$RES/nvidia-smi.csv"
nvidia-smi -q >"$RES/nvidia-smi-q.txt" 2>&1
nproc >"$RES/nproc.txt"
lscpu >"$RES/lscpu.txt" 2>&1

step gpu_smoke bash "$HERE/../tests/gpu_smoke.sh" "$BIN/dtsim_gpu_smoke" "$BIN/dtsim_gpu_smoke_api" \
  "$BIN/libdtsim_cupti.so" "$BIN/dtsim_profile_check" "$RES/gpu_smoke"

step gemm_t4096 bash -c "'$BIN/dtsim_gemm_sweep' --dtype both --reps 50 > '$RES/gemm_t4096.csv'"
step gemm_t1024 bash -c "'$BIN/dtsim_gemm_sweep' --dtype bf16 --reps 50 --tokens 1024 > '$RES/gemm_t1024.csv'"
step gemm_t16384 bash -c "'$BIN/dtsim_gemm_sweep' --dtype bf16 --reps 20 --tokens 16384 > '$RES/gemm_t16384.csv'"
step gemm_small bash -c "'$BIN/dtsim_gemm_sweep' --dtype bf16 --reps 100 --shapes \
2048x2048x2048,2048x6144x2048,2048x2048x8192,2048x8192x2048,512x512x512,1024x1024x1024,4096x4096x4096,8192x8192x8192,256x4096x4096,128x12288x12288 \
  > '$RES/gemm_small.csv'"

step overhead env REPEAT=3 bash "$HERE/overhead.sh" "$BUILD" --dtype bf16 --reps 50

ngpu=$(nvidia-smi -L | grep -c '^GPU ')
step nccl "$BIN/dtsim_nccl_sweep" --gpus "$ngpu" --max-bytes 256M --output-dir "$RES/nccl"

# PyTorch: shapes-recorded traces for the compute fit (8 layers: every layer is the same, the trace stays small).
step torch_trace_h2048 "$PY" "$HERE/torch_gpt_step.py" --layers 8 --hidden 2048 --heads 16 --mbs 2 --iters 3 \
  --trace "$RES/torch_h2048_mbs2.json"
step torch_trace_h4096 "$PY" "$HERE/torch_gpt_step.py" --layers 4 --hidden 4096 --heads 32 --mbs 1 --iters 3 \
  --trace "$RES/torch_h4096_mbs1.json"
# End-to-end iterations of whole models (dtsim presets gpt3-1.3b and megatron-1.7b, and 8 layers of hidden 4096).
step torch_gpt3_1.3b bash -c "'$PY' '$HERE/torch_gpt_step.py' --layers 24 --hidden 2048 --heads 16 --mbs 1,2,4,8 \
  --recompute none,full > '$RES/iters_gpt3-1.3b.jsonl'"
step torch_megatron_1.7b bash -c "'$PY' '$HERE/torch_gpt_step.py' --layers 24 --hidden 2304 --heads 24 --mbs 1,2,4 \
  --recompute none,full > '$RES/iters_megatron-1.7b.jsonl'"
step torch_h4096_l8 bash -c "'$PY' '$HERE/torch_gpt_step.py' --layers 8 --hidden 4096 --heads 32 --mbs 1,2,4 \
  --recompute none,full > '$RES/iters_h4096-l8.jsonl'"
# The same program, unmodified, under our injection library: trace + slowdown on a real workload.
step torch_injected bash -c "CUDA_INJECTION64_PATH='$BIN/libdtsim_cupti.so' DTSIM_PROFILE_OUT='$RES/dtsim_profile_torch.json' \
  '$PY' '$HERE/torch_gpt_step.py' --layers 8 --hidden 2048 --heads 16 --mbs 2 --iters 10 > '$RES/iters_injected.jsonl'"
step torch_plain bash -c "'$PY' '$HERE/torch_gpt_step.py' --layers 8 --hidden 2048 --heads 16 --mbs 2 --iters 10 \
  > '$RES/iters_plain.jsonl'"

# The kernels of an MoE layer (moe_sweep.py: grouped expert GEMMs eager and as CUDA graphs, per-expert cuBLAS,
# FP8 grouped, permute / unpermute), into moe/ (tests/data/h200/PROVENANCE.md describes the files).
step moe_sweep "$PY" "$HERE/moe_sweep.py" "$RES/moe"

# GEMM throughput under seconds of back-to-back load and in mixes with idle time and HBM copies (sustained.py, ~2 min):
# the board's power cap, compute.sustained_tensor_ratio of the calibration.
step sustained "$PY" "$HERE/sustained.py" "$RES/sustained" 8 --mixes

for f in "$RES"/*.json; do [[ -f $f ]] && gzip -9 "$f"; done
cp "$SUMMARY" "$RES/summary.txt"
tar -C "$(dirname "$RES")" -czf "$OUT/campaign.tar.gz" h100
cat "$RES/overhead.log" >>"$SUMMARY"
say "failed steps: $failed"
ls -l "$OUT"
exit "$failed"
