#!/usr/bin/env bash
# gpu_exec_smoke.sh DTSIM DTSIM_EXEC WORKDIR -- the executor's GPU test (ctest label "gpu"; exit 77 = skipped
# without a GPU). A small GPT plan (TP 2 x PP 2 on 4 simulated GPUs, 2 distinct ranks after folding) is simulated,
# every distinct rank is executed alone on the GPU (ex-situ), the measurements are turned into a timeline and
# compared with the prediction. Checks: every compute task was measured on every rank, durations are positive,
# peaks are above the model's static memory, and compare reports matched tasks only.
set -uo pipefail
DTSIM=${1:?usage: gpu_exec_smoke.sh DTSIM DTSIM_EXEC WORKDIR}
EXEC=${2:?}
WORK=${3:?}
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "SKIP: no NVIDIA GPU"
  exit 77
fi
rm -rf "$WORK" && mkdir -p "$WORK"
cat >"$WORK/model.json" <<'JSON'
{"schema_version": 1, "name": "gpt-small", "num_layers": 4, "hidden": 1024, "heads": 16, "seq_len": 1024,
 "vocab": 32000, "dtype": "bf16"}
JSON
set -e
"$DTSIM" simulate --model "$WORK/model.json" --cluster dgx-h100:4 --tp 2 --pp 2 --mbs 2 --gbs 8 --out "$WORK/pred" -q
"$EXEC" --predicted "$WORK/pred" --out "$WORK/meas" --warmup 1 --iters 3
"$DTSIM" validate measured --predicted "$WORK/pred" --measurements "$WORK/meas/measurements.json" --out "$WORK/meas" -q
"$DTSIM" compare --predicted "$WORK/pred" --measured "$WORK/meas" --out "$WORK/cmp"
python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
m = json.load(open(w + "/meas/measurements.json"))
s = json.load(open(w + "/meas/summary.json"))["measured"]
assert len(m["ranks"]) == 2 and all(r["ok"] for r in m["ranks"]), m["ranks"]
assert s["measured_tasks"] == s["compute_tasks"], s
assert all(len(t["duration_s"]) == 3 and min(t["duration_s"]) > 0 for t in m["tasks"])
assert all(r["peak_memory_bytes"] > r["context_bytes"] > 0 for r in m["ranks"])
print("gpu exec smoke: ok", [round(r["peak_memory_bytes"] / 1e9, 2) for r in m["ranks"]], "GB")
PY
