#!/usr/bin/env python3
"""moe_sweep.py OUT_DIR -- the kernels of a mixture-of-experts layer on one GPU, measured with PyTorch (no build).

What the Fidelity issue's first item asks the cost model to time by shape, measured where a GPU is lent:
  grouped.csv   grouped expert GEMMs as torchtitan runs them (torch._grouped_mm, bf16: tokens x hidden times
                per-expert weights given transposed, torchtitan/models/common/moe.py GroupedExperts), over the expert
                shapes of DeepSeek-V3, Qwen3-235B-A22B / 30B-A3B, Mixtral 8x7B and GPT-OSS-120B, 1-32 local experts
                and 32-4,096 tokens per expert, each with balanced token counts and with counts drawn from a
                multinomial over the experts (balanced routing's own raggedness), rounded up to 16 tokens (the
                alignment torchtitan pads groups to). Passes: `fwd` one eager call (the host's dispatch included);
                `fwd-graph`, `dgrad-graph`, `wgrad-graph` the three GEMMs of forward and backward, GPU time alone
                (calls captured in a CUDA graph; the weight gradient is the 2-D x 2-D form, tokens the reduction);
                `fwd-sequential-graph` one torch.mm per expert (Megatron's SequentialMLP, cuBLAS); `fwd-dense-graph`
                (one group) the same GEMM through cuBLAS; FP8 rowwise `fwd-graph` (torch._scaled_grouped_mm).
                Columns: shape,hidden,ffn,gemm,groups,tokens_mean,ragged,tokens_total,counts_max,dtype,pass,
                time_s,tflops  (gemm fc1: hidden -> 2 ffn, gated; fc2: ffn -> hidden)
  memory.csv    the memory-bound kernels around them: router softmax + top-k, permute (gather of the routed tokens),
                unpermute (weighted scatter-add back), with the bytes each moves and the achieved bandwidth.
  summary.json  device, torch version, HBM copy bandwidth, one 8192^3 bf16 GEMM for the peak.
Each timing is the median of `reps` CUDA-event-timed repetitions after warm-up.
"""
import csv
import json
import math
import os
import subprocess
import sys
import time

import torch

import cuda_timing  # beside this script

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
QUICK = "--quick" in sys.argv[2:]
os.makedirs(OUT, exist_ok=True)
dev = torch.device("cuda")
log = open(os.path.join(OUT, "log.txt"), "w")
T0 = time.time()


def say(*a):
    s = " ".join(str(x) for x in a)
    print(f"[{time.time() - T0:6.1f}s] {s}", flush=True)
    log.write(s + "\n")
    log.flush()


def timed(fn, reps=7, warmup=2):
    return cuda_timing.timed(fn, reps, warmup)


summary = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
           "sms": torch.cuda.get_device_properties(0).multi_processor_count,
           "date": time.strftime("%Y-%m-%d")}
try:
    q = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem,"
                        "power.limit", "--format=csv,noheader"], capture_output=True, text=True)
    summary["nvidia_smi"] = q.stdout.strip()
except OSError as e:
    summary["nvidia_smi"] = str(e)
say(summary)

x = torch.empty(2 * 1024**3, dtype=torch.uint8, device=dev)
y = torch.empty_like(x)
t = timed(lambda: y.copy_(x), reps=10)
summary["copy_Bps"] = 2 * x.numel() / t
del x, y
a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
t = timed(lambda: a @ b, reps=10)
summary["gemm_8192_bf16_flops"] = 2 * 8192**3 / t
del a, b
say("copy", summary["copy_Bps"] / 1e12, "TB/s; gemm", summary["gemm_8192_bf16_flops"] / 1e12, "TFLOP/s")

# name: (hidden, per-expert ffn)
SHAPES = {"deepseek-v3": (7168, 2048), "qwen3-235b-a22b": (4096, 1536), "qwen3-30b-a3b": (2048, 768),
          "mixtral-8x7b": (4096, 14336), "gpt-oss-120b": (2880, 2880)}
GROUPS = [1, 4, 8, 32] if QUICK else [1, 2, 4, 8, 16, 32]
TOKENS = [64, 256, 1024, 4096] if QUICK else [32, 64, 128, 256, 512, 1024, 2048, 4096]
MAX_TOTAL = 65536  # tokens per grouped GEMM
torch.manual_seed(1234)  # the ragged counts are the same on every run


def counts_for(groups, mean, ragged):
    if not ragged or groups == 1:
        return [mean] * groups
    # every routed slot picks an expert uniformly: multinomial over the groups (balanced routing's raggedness)
    c = torch.distributions.Multinomial(groups * mean, torch.ones(groups)).sample().tolist()
    return [int(v) for v in c]


def align16(c):
    return [max(16, 16 * math.ceil(v / 16)) for v in c]


rows = []
errors = {}
FIELDS = ["shape", "hidden", "ffn", "gemm", "groups", "tokens_mean", "ragged", "tokens_total", "counts_max", "dtype",
          "pass", "time_s", "tflops"]
grouped_file = open(os.path.join(OUT, "grouped.csv"), "w", newline="")
grouped_csv = csv.DictWriter(grouped_file, fieldnames=FIELDS)
grouped_csv.writeheader()


def add_row(r):  # written as measured: a run stopped at its time limit keeps what it measured
    rows.append(r)
    grouped_csv.writerow({k: (f"{r[k]:.6g}" if isinstance(r[k], float) else r[k]) for k in FIELDS})
    grouped_file.flush()


def note_error(kind, e):
    if kind not in errors:
        errors[kind] = f"{type(e).__name__}: {e}"[:400]
        say("error", kind, errors[kind])


def graph_time(fn, out_bytes):
    """GPU time of one call with the host taken out: n calls captured in a CUDA graph, replayed."""
    n = int(max(1, min(10, 4e9 // max(out_bytes, 1))))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n):
            fn()
    t = timed(g.replay, reps=5, warmup=1) / n
    del g
    return t


def grouped_case(shape, hidden, ffn, gemm, groups, mean, ragged):
    k, n = (hidden, 2 * ffn) if gemm == "fc1" else (ffn, hidden)
    counts = align16(counts_for(groups, mean, ragged))
    total = sum(counts)
    flops = 2.0 * total * n * k
    A = torch.randn(total, k, device=dev, dtype=torch.bfloat16) * 0.1
    W = torch.randn(groups, n, k, device=dev, dtype=torch.bfloat16) * 0.02  # (experts, out, in) as torchtitan keeps
    dY = torch.randn(total, n, device=dev, dtype=torch.bfloat16) * 0.1
    offs = torch.tensor(counts, device=dev, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    base = dict(shape=shape, hidden=hidden, ffn=ffn, gemm=gemm, groups=groups, tokens_mean=mean, ragged=int(ragged),
                tokens_total=total, counts_max=max(counts))

    def row(dtype, pss, t):
        add_row(dict(base, dtype=dtype, **{"pass": pss}, time_s=t, tflops=flops / t / 1e12))

    try:  # eager, one call: what a PyTorch program without graphs sees, the host's dispatch included
        row("bf16", "fwd", timed(lambda: torch._grouped_mm(A, W.transpose(-2, -1), offs=offs)))
    except Exception as e:  # noqa: BLE001 -- recorded once per kind, the sweep goes on
        note_error("grouped_mm", e)
        return
    # the three GEMMs of forward and backward, GPU time alone: forward X W^T, activation gradient dY W (again
    # 2-D x 3-D), weight gradient dY^T X per group (2-D x 2-D, the tokens are the reduction)
    for pss, fn, ob in (("fwd-graph", lambda: torch._grouped_mm(A, W.transpose(-2, -1), offs=offs), total * n * 2),
                        ("dgrad-graph", lambda: torch._grouped_mm(dY, W, offs=offs), total * k * 2),
                        ("wgrad-graph", lambda: torch._grouped_mm(dY.t(), A, offs=offs), groups * n * k * 2)):
        try:
            row("bf16", pss, graph_time(fn, ob))
        except Exception as e:  # noqa: BLE001
            note_error("grouped_mm " + pss, e)
    if not ragged and mean >= 64:
        # Megatron's SequentialMLP: one torch.mm per expert (cuBLAS), GPU time alone
        slices = [A[sum(counts[:i]):sum(counts[:i + 1])] for i in range(groups)]
        Wt = [W[i].t() for i in range(groups)]
        try:
            row("bf16", "fwd-sequential-graph", graph_time(lambda: [s @ w for s, w in zip(slices, Wt)], total * n * 2))
        except Exception as e:  # noqa: BLE001
            note_error("sequential", e)
    if groups == 1:  # the same GEMM through cuBLAS (torch.mm): the dense kernel the curve was fitted on
        try:
            row("bf16", "fwd-dense-graph", graph_time(lambda: A @ W[0].t(), total * n * 2))
        except Exception as e:  # noqa: BLE001
            note_error("dense", e)
    if hasattr(torch, "_scaled_grouped_mm") and "scaled_grouped_mm" not in errors:
        try:
            A8 = A.to(torch.float8_e4m3fn)
            W8 = W.to(torch.float8_e4m3fn)
            sa = torch.ones(total, device=dev, dtype=torch.float32)
            sb = torch.ones(groups, n, device=dev, dtype=torch.float32)
            row("fp8-rowwise", "fwd-graph",
                graph_time(lambda: torch._scaled_grouped_mm(A8, W8.transpose(-2, -1), sa, sb, offs=offs,
                                                            out_dtype=torch.bfloat16), total * n * 2))
        except Exception as e:  # noqa: BLE001
            note_error("scaled_grouped_mm", e)


for shape, (hidden, ffn) in SHAPES.items():
    for gemm in ("fc1", "fc2"):
        for groups in GROUPS:
            for mean in TOKENS:
                if groups * mean > MAX_TOTAL:
                    continue
                for ragged in (False, True):
                    if ragged and groups == 1:
                        continue
                    grouped_case(shape, hidden, ffn, gemm, groups, mean, ragged)
    torch.cuda.empty_cache()
    say(shape, "done,", len(rows), "rows")

grouped_file.close()

# The memory-bound kernels: router softmax + top-k, permute, unpermute (eager PyTorch, as torchtitan's
# TokenReorderer / Megatron's moe_utils.permute without fused kernels do them).
mem = []
for shape, (hidden, ffn) in SHAPES.items():
    experts = {"deepseek-v3": (256, 8), "qwen3-235b-a22b": (128, 8), "qwen3-30b-a3b": (128, 8),
               "mixtral-8x7b": (8, 2), "gpt-oss-120b": (128, 4)}[shape]
    E, topk = experts
    for T in (4096, 16384):
        try:
            x = torch.randn(T, hidden, device=dev, dtype=torch.bfloat16)
            logits = torch.randn(T, E, device=dev, dtype=torch.float32)
            t = timed(lambda: torch.topk(torch.softmax(logits, dim=-1), topk, dim=-1))
            mem.append(dict(shape=shape, kernel="softmax+topk", tokens=T, hidden=hidden, experts=E, topk=topk,
                            bytes=T * E * 4 * 2 + T * topk * 12, time_s=t))
            idx = torch.randint(0, T, (T * topk,), device=dev)
            t = timed(lambda: x.index_select(0, idx))
            mem.append(dict(shape=shape, kernel="permute", tokens=T, hidden=hidden, experts=E, topk=topk,
                            bytes=2 * T * topk * hidden * 2, time_s=t))
            y = torch.randn(T * topk, hidden, device=dev, dtype=torch.bfloat16)
            p = torch.rand(T * topk, 1, device=dev, dtype=torch.bfloat16)
            out = torch.zeros(T, hidden, device=dev, dtype=torch.bfloat16)
            t = timed(lambda: out.index_add_(0, idx, y * p))
            mem.append(dict(shape=shape, kernel="unpermute", tokens=T, hidden=hidden, experts=E, topk=topk,
                            bytes=(3 * T * topk + 2 * T) * hidden * 2, time_s=t))
        except Exception as e:  # noqa: BLE001
            note_error("memory kernels", e)
for r in mem:
    r["Bps"] = r["bytes"] / r["time_s"]
with open(os.path.join(OUT, "memory.csv"), "w", newline="") as f:
    fields = ["shape", "kernel", "tokens", "hidden", "experts", "topk", "bytes", "time_s", "Bps"]
    w = csv.DictWriter(f, fieldnames=fields)
    w.writeheader()
    for r in mem:
        w.writerow({k: (f"{r[k]:.6g}" if isinstance(r[k], float) else r[k]) for k in fields})

summary["errors"] = errors
summary["grouped_rows"] = len(rows)
summary["memory_rows"] = len(mem)
summary["seconds"] = time.time() - T0
with open(os.path.join(OUT, "summary.json"), "w") as f:
    json.dump(summary, f, indent=1)
say("done", len(rows), "grouped rows,", len(mem), "memory rows in", round(time.time() - T0), "s")
