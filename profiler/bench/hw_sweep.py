#!/usr/bin/env python3
"""hw_sweep.py OUT_DIR -- the hardware half of a calibration, measured on one GPU with PyTorch (no build needed).

Measures what traces/calibration/<gpu>.json holds as hardware values, apart from any framework's end-to-end runs:
  gemm.csv          GEMMs over transformer-layer shapes (tokens x hidden x TP) in bf16, FP8 tensorwise and rowwise
                    scaling (torch._scaled_mm, e4m3 inputs, bf16 output) and fp32 without TF32, in the CSV of
                    profiler/bench/gemm_sweep.cpp: m,n,k,dtype,time_s,tflops (dtsim calibrate compute --gemm-csv);
  summary.json      device and clocks, HBM bandwidth of copy / add kernels, SDPA (flash) attention forward and
                    forward+backward TFLOP/s, eager PyTorch host time per operator, and a Llama-3-8B-shaped decoder
                    layer stack run eagerly (forward + backward) with its achieved TFLOP/s.
Each timing is the median of `reps` CUDA-event-timed repetitions after warm-up.
"""
import contextlib
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from cuda_timing import timed  # beside this script

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
COMPILE_ONLY = "--compile" in sys.argv[2:]  # only the decoder-layer stack, eager and torch.compile'd
os.makedirs(OUT, exist_ok=True)
dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
log = open(os.path.join(OUT, "log.txt"), "w")


def say(*a):
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    log.write(s + "\n")
    log.flush()


summary = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
           "sms": torch.cuda.get_device_properties(0).multi_processor_count}
try:
    q = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem,"
                        "power.limit,power.max_limit", "--format=csv,noheader"], capture_output=True, text=True)
    summary["nvidia_smi"] = q.stdout.strip()
except OSError as e:
    summary["nvidia_smi"] = str(e)
say("device", summary)

def hardware_sweeps():
    """GEMMs, HBM bandwidth, SDPA attention and eager host time (everything but the layer stack)."""
    # ---- GEMMs -------------------------------------------------------------------------------------------------
    shapes = set()
    for tokens in (512, 2048, 8192):
        for h, ffn in ((2048, 8192), (4096, 14336), (8192, 28672)):
            for tp in (1, 4, 8):
                shapes.add((tokens, 3 * h // tp, h))       # QKV (column parallel)
                shapes.add((tokens, h, h // tp))           # attention output (row parallel)
                shapes.add((tokens, 2 * ffn // tp, h))     # SwiGLU up + gate
                shapes.add((tokens, h, ffn // tp))         # down (row parallel)
    shapes.update({(16384, 16384, 16384), (8192, 8192, 8192), (4096, 4096, 4096), (1024, 1024, 1024), (256, 4096, 4096)})
    shapes = sorted(s for s in shapes if all(d % 16 == 0 for d in s))

    rows = []


    def gemm_row(m, n, k, dtype, t):
        rows.append(f"{m},{n},{k},{dtype},{t:.9g},{2 * m * n * k / t / 1e12:.6g}")


    fp8 = torch.float8_e4m3fn
    for (m, n, k) in shapes:
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        gemm_row(m, n, k, "bf16", timed(lambda: torch.mm(a, w.t())))
        a8, w8 = a.to(fp8), w.to(fp8)
        one = torch.ones((), device=dev, dtype=torch.float32)
        try:
            gemm_row(m, n, k, "fp8-tensorwise",
                     timed(lambda: torch._scaled_mm(a8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)))
            sa = torch.ones(m, 1, device=dev, dtype=torch.float32)
            sb = torch.ones(1, n, device=dev, dtype=torch.float32)
            gemm_row(m, n, k, "fp8-rowwise",
                     timed(lambda: torch._scaled_mm(a8, w8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)))
        except RuntimeError as e:  # an older torch or a GPU without FP8
            say("fp8 failed at", (m, n, k), str(e).splitlines()[0])
        if 2 * m * n * k <= 2e12:
            af, wf = a.float(), w.float()
            gemm_row(m, n, k, "fp32", timed(lambda: torch.mm(af, wf.t()), reps=5, warmup=2))
        del a, w, a8, w8
    with open(os.path.join(OUT, "gemm.csv"), "w") as f:
        f.write("m,n,k,dtype,time_s,tflops\n" + "\n".join(rows) + "\n")
    say("gemm rows", len(rows))

    # ---- HBM bandwidth -------------------------------------------------------------------------------------------
    n = 1 << 30  # 2 GiB of bf16
    x = torch.randn(n, device=dev, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    z = torch.empty_like(x)
    t_copy = timed(lambda: y.copy_(x))
    t_add = timed(lambda: torch.add(x, y, out=z))
    t_mul = timed(lambda: torch.mul(x, 1.5, out=z))
    summary["hbm"] = {"copy_GBps": 2 * 2 * n / t_copy / 1e9, "add_GBps": 3 * 2 * n / t_add / 1e9,
                      "scale_GBps": 2 * 2 * n / t_mul / 1e9}
    del x, y, z
    say("hbm", summary["hbm"])

    # ---- attention (SDPA) -----------------------------------------------------------------------------------------
    att = []
    for (b, heads, kv, seq, d) in ((1, 32, 8, 4096, 128), (1, 32, 8, 8192, 128), (1, 32, 8, 16384, 128),
                                   (2, 64, 8, 8192, 128), (4, 16, 16, 2048, 128)):
        q = torch.randn(b, heads, seq, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
        k_ = torch.randn(b, heads, seq, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(b, heads, seq, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
        fwd_flops = 4 * b * heads * seq * seq * d / 2  # causal: half the score matrix
        out = {"b": b, "heads": heads, "seq": seq, "head_dim": d}
        for backend_name in ("default", "flash", "cudnn"):
            try:
                if backend_name == "default":
                    ctx = contextlib.nullcontext()
                else:
                    from torch.nn.attention import SDPBackend, sdpa_kernel
                    ctx = sdpa_kernel(SDPBackend.FLASH_ATTENTION if backend_name == "flash"
                                      else SDPBackend.CUDNN_ATTENTION)
                with ctx:
                    t_f = timed(lambda: F.scaled_dot_product_attention(q, k_, v, is_causal=True))
                    go = torch.randn(b, heads, seq, d, device=dev, dtype=torch.bfloat16)

                    def fb():
                        o = F.scaled_dot_product_attention(q, k_, v, is_causal=True)
                        o.backward(go)
                    t_fb = timed(fb, reps=5)
                    # The same calls back to back (20 between two events): the host issues ahead of the device,
                    # so a per-call cost of the host's dispatch drops out and only device time is left. The
                    # single-call timings above start on an idle device and include the dispatch: fitted with a
                    # fixed time per call, the H200 sweep of 2026-11-26 gave ~70 us (forward) and ~260 us
                    # (backward), which these separate into device and host.
                    t_f20 = timed(lambda: [F.scaled_dot_product_attention(q, k_, v, is_causal=True)
                                           for _ in range(20)], reps=3) / 20

                    def fb20():
                        for _ in range(20):
                            fb()
                    t_fb20 = timed(fb20, reps=3) / 20
                out[backend_name] = {"fwd_s": t_f, "fwd_tflops": fwd_flops / t_f / 1e12,
                                     "fwd_bwd_s": t_fb, "fwd_bwd_tflops": 3.5 * fwd_flops / t_fb / 1e12,
                                     "fwd_s_back_to_back": t_f20, "fwd_bwd_s_back_to_back": t_fb20}
            except Exception as e:  # noqa: BLE001 -- a backend missing on this build
                out[backend_name] = {"error": str(e).splitlines()[0][:200]}
        att.append(out)
        say("sdpa", out)
    summary["sdpa"] = att

    # ---- eager host time per operator ------------------------------------------------------------------------------
    a = torch.randn(64, device=dev)
    b_ = torch.randn(64, device=dev)
    c = torch.empty_like(a)
    for _ in range(200):
        torch.add(a, b_, out=c)
    torch.cuda.synchronize()
    N = 20000
    t0 = time.perf_counter()
    for _ in range(N):
        torch.add(a, b_, out=c)
    t_issue = (time.perf_counter() - t0) / N
    torch.cuda.synchronize()
    t_total = (time.perf_counter() - t0) / N
    summary["eager_op"] = {"host_issue_s": t_issue, "wall_per_op_s": t_total}
    say("eager op", summary["eager_op"])


# ---- a Llama-3-8B-shaped decoder layer stack, eager ----------------------------------------------------------
def rms(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w


def layer_stack(layers, seq, mbs, h=4096, heads=32, kv=8, ffn=14336, compiled=False):
    d = h // heads
    ps = []
    for _ in range(layers):
        ps.append({"n1": torch.ones(h, device=dev, dtype=torch.bfloat16, requires_grad=True),
                   "qkv": (torch.randn(h + 2 * kv * d, h, device=dev, dtype=torch.bfloat16) * 0.02).requires_grad_(),
                   "o": (torch.randn(h, h, device=dev, dtype=torch.bfloat16) * 0.02).requires_grad_(),
                   "n2": torch.ones(h, device=dev, dtype=torch.bfloat16, requires_grad=True),
                   "w13": (torch.randn(2 * ffn, h, device=dev, dtype=torch.bfloat16) * 0.02).requires_grad_(),
                   "w2": (torch.randn(h, ffn, device=dev, dtype=torch.bfloat16) * 0.02).requires_grad_()})
    x0 = torch.randn(mbs, seq, h, device=dev, dtype=torch.bfloat16, requires_grad=True)

    def one_layer(x, p):
        y = rms(x, p["n1"])
        qkv = F.linear(y, p["qkv"])
        q, k, v = qkv.split([h, kv * d, kv * d], dim=-1)
        q = q.view(mbs, seq, heads, d).transpose(1, 2)
        k = k.view(mbs, seq, kv, d).transpose(1, 2).repeat_interleave(heads // kv, dim=1)
        v = v.view(mbs, seq, kv, d).transpose(1, 2).repeat_interleave(heads // kv, dim=1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(mbs, seq, h)
        x = x + F.linear(o, p["o"])
        y = rms(x, p["n2"])
        g, u = F.linear(y, p["w13"]).chunk(2, dim=-1)
        return x + F.linear(F.silu(g) * u, p["w2"])
    layer_fn = torch.compile(one_layer) if compiled else one_layer

    def step():
        x = x0
        for p in ps:
            x = layer_fn(x, p)
        x.float().pow(2).mean().backward()

    tokens = mbs * seq
    gemm = 2 * tokens * (h * (h + 2 * kv * d) + h * h + 3 * h * ffn) * layers
    attn = 4 * mbs * heads * seq * seq * d / 2 * layers
    t = timed(step, reps=5, warmup=3 if compiled else 2)
    return {"compiled": compiled, "layers": layers, "seq": seq, "mbs": mbs, "hidden": h, "heads": heads, "kv_heads": kv, "ffn": ffn,
            "fwd_bwd_s": t, "model_flops": 3 * (gemm + attn), "tflops": 3 * (gemm + attn) / t / 1e12}


if not COMPILE_ONLY:
    hardware_sweeps()
key = "llama8b_layers_compile" if COMPILE_ONLY else "llama8b_layers_eager"
summary[key] = []
for (layers, seq, mbs) in ((4, 8192, 1), (4, 2048, 1), (4, 8192, 2)):
    for compiled in ((False, True) if COMPILE_ONLY else (False,)):
        r = layer_stack(layers, seq, mbs, compiled=compiled)
        summary[key].append(r)
        say("llama layers", r)
        torch.cuda.empty_cache()

with open(os.path.join(OUT, "summary.json"), "w") as f:
    json.dump(summary, f, indent=1)
say("done")
