#!/usr/bin/env python3
"""sustained.py OUT_DIR [SECONDS] -- GEMM throughput from the first milliseconds to seconds of back-to-back load.

Why: the sweeps of this folder (hw_sweep.py, moe_sweep.py) time each call between synchronisations, a few
milliseconds of load at a time, so the GPU runs at its boost clock. A training step keeps the GPU busy for seconds;
if power or temperature then lower the SM clock, the GEMM efficiency fitted on short bursts is too high for training.
This script measures that directly: each case enqueues its GEMM back to back for SECONDS (default 4) with a CUDA
event every ~10 ms, while `nvidia-smi` samples the SM clock, power and temperature every 100 ms; between cases the
GPU idles 3 s.
  windows.csv  case,dtype,m,k,n,t_s,window_s,calls,tflops   (t_s: end of the window from the first call)
  smi.csv      nvidia-smi's samples (timestamp, SM clock MHz, power W, temperature C, clock-event reasons)
  summary.json per case: TFLOP/s of the first 20 ms, of the last second, their ratio; device and driver.
With --mixes (--mixes-only: without the cases above), three more cases ask whether a training step, which is not all GEMMs, holds the power cap too: the
8192^3 bf16 GEMM alternating with (a) an idle GPU of about its own duration (the host sleeps), (b) a 1 GiB copy
(memory-bound, ~0.5 ms), (c) four such copies; each GEMM between its own CUDA events, so the GEMM's throughput is
measured apart from what surrounds it (mixes.csv: case,t_s,gemm_s,period_s,tflops; summary.json "mixes").
"""
import csv
import json
import os
import subprocess
import sys
import time

import torch

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 and not sys.argv[2].startswith("--") else 4.0
MIXES = "--mixes" in sys.argv[2:] or "--mixes-only" in sys.argv[2:]
os.makedirs(OUT, exist_ok=True)
dev = torch.device("cuda")

smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,"
                        "clocks_event_reasons.active", "--format=csv,noheader,nounits", "-lms", "100"],
                       stdout=open(os.path.join(OUT, "smi.csv"), "w"), stderr=subprocess.DEVNULL)


def case_fn(dtype, m, k, n, groups=1):
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    if groups > 1:  # torchtitan's grouped expert GEMM, balanced counts
        w = torch.randn(groups, n, k, device=dev, dtype=torch.bfloat16) * 0.02
        offs = torch.arange(1, groups + 1, device=dev, dtype=torch.int32) * (m // groups)
        return lambda: torch._grouped_mm(a, w.transpose(-2, -1), offs=offs)
    w = torch.randn(n, k, device=dev, dtype=torch.bfloat16) * 0.02
    if dtype == "bf16":
        return lambda: torch.mm(a, w.t())
    a8, w8 = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
    sa = torch.ones(m, 1, device=dev, dtype=torch.float32)
    sb = torch.ones(1, n, device=dev, dtype=torch.float32)
    return lambda: torch._scaled_mm(a8, w8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)


CASES = [  # name, dtype, m, k, n, groups
    ("square-8192", "bf16", 8192, 8192, 8192, 1),
    ("llama70b-fc1-tp8", "bf16", 8192, 8192, 7168, 1),
    ("llama8b-qkv", "bf16", 8192, 4096, 6144, 1),
    ("dsv3-expert-fc1-x8", "bf16", 8 * 2048, 7168, 4096, 8),
    ("square-8192-fp8-rowwise", "fp8-rowwise", 8192, 8192, 8192, 1),
]
if "--mixes-only" in sys.argv[2:]:
    CASES = []
rows, summary = [], {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "seconds": SECONDS,
                     "cases": {}}
time.sleep(2)
for name, dtype, m, k, n, groups in CASES:
    fn = case_fn(dtype, m, k, n, groups)
    flops = 2.0 * m * k * n
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    # calls per ~10 ms window, from one timed call
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    per_window = max(1, int(0.010 / (s.elapsed_time(e) / 1e3)))
    time.sleep(3)  # let the clock recover
    events = [torch.cuda.Event(enable_timing=True)]
    events[0].record()
    t_host = time.time()
    while time.time() - t_host < SECONDS:
        for _ in range(per_window):
            fn()
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        events.append(ev)
    torch.cuda.synchronize()
    t = 0.0
    windows = []
    for i in range(1, len(events)):
        w_s = events[i - 1].elapsed_time(events[i]) / 1e3
        t += w_s
        windows.append((t, w_s, flops * per_window / w_s / 1e12))
        rows.append(dict(case=name, dtype=dtype, m=m, k=k, n=n, t_s=f"{t:.4f}", window_s=f"{w_s:.6f}",
                         calls=per_window, tflops=f"{windows[-1][2]:.1f}"))
    first = [x for x in windows if x[0] <= 0.020] or windows[:1]
    last = [x for x in windows if x[0] >= t - 1.0]
    f_tf = sum(x[2] for x in first) / len(first)
    l_tf = sum(x[2] for x in last) / len(last)
    summary["cases"][name] = {"first_20ms_tflops": round(f_tf, 1), "last_1s_tflops": round(l_tf, 1),
                              "ratio": round(l_tf / f_tf, 4), "total_s": round(t, 3)}
    print(name, summary["cases"][name], flush=True)
    del fn
    torch.cuda.empty_cache()


def mix(name, gemm, other, flops):
    """gemm() then other() repeatedly for SECONDS; per-GEMM events give the GEMM's own throughput over time."""
    for _ in range(3):
        gemm()
        other()
    torch.cuda.synchronize()
    time.sleep(3)
    marks = []
    t_host = time.time()
    while time.time() - t_host < SECONDS:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        gemm()
        b.record()
        marks.append((a, b))
        other()
        if len(marks) % 32 == 0:
            marks[-32][1].synchronize()  # keep the host at most 32 iterations ahead
    torch.cuda.synchronize()
    out = []
    for a, b in marks:
        t = marks[0][0].elapsed_time(b) / 1e3
        g = a.elapsed_time(b) / 1e3
        out.append((t, g))
    for i, (t, g) in enumerate(out):
        period = (t - out[i - 1][0]) if i else t
        mixes.append(dict(case=name, t_s=f"{t:.4f}", gemm_s=f"{g:.6f}", period_s=f"{period:.6f}",
                          tflops=f"{flops / g / 1e12:.1f}"))
    end = out[-1][0]
    first = [flops / g / 1e12 for t, g in out if t <= 0.020] or [flops / out[0][1] / 1e12]
    last = [flops / g / 1e12 for t, g in out if t >= end - 1.0]
    busy = sum(g for t, g in out if t >= end - 1.0) / 1.0
    f_tf, l_tf = sum(first) / len(first), sum(last) / len(last)
    summary.setdefault("mixes", {})[name] = {"first_20ms_gemm_tflops": round(f_tf, 1),
                                             "last_1s_gemm_tflops": round(l_tf, 1), "ratio": round(l_tf / f_tf, 4),
                                             "gemm_share_of_last_1s": round(busy, 3)}
    print(name, summary["mixes"][name], flush=True)


mixes = []
if MIXES:
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    w = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    x = torch.empty(2**29, device=dev, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    gemm = lambda: torch.mm(a, w)  # noqa: E731
    mix("gemm+idle", gemm, lambda: (torch.cuda.synchronize(), time.sleep(0.0012)), 2.0 * 8192**3)
    mix("gemm+copy", gemm, lambda: y.copy_(x), 2.0 * 8192**3)
    mix("gemm+4copies", gemm, lambda: [y.copy_(x) for _ in range(4)], 2.0 * 8192**3)
    with open(os.path.join(OUT, "mixes.csv"), "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(mixes[0].keys()))
        wr.writeheader()
        wr.writerows(mixes)
time.sleep(0.5)
smi.terminate()
if rows:
    with open(os.path.join(OUT, "windows.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
with open(os.path.join(OUT, "summary.json"), "w") as f:
    json.dump(summary, f, indent=1)
