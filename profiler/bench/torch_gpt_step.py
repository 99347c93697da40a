#!/usr/bin/env python3
"""torch_gpt_step.py -- a Megatron-style GPT training step in plain PyTorch, for calibrating and checking dtsim on a GPU.

The layer is built from the operators Megatron-LM uses without fused or flash kernels, so that a
torch.profiler trace recorded with shapes gives `dtsim calibrate compute` one sample per kernel with its GEMM
shape or its bytes:
  LayerNorm -> QKV linear -> baddbmm(Q, K^T) -> causal mask + softmax -> dropout -> bmm(P, V) -> output linear
  -> dropout + residual -> LayerNorm -> MLP up linear -> GELU -> MLP down linear -> dropout + residual,
then a final LayerNorm, the tied LM head and cross-entropy. Mixed precision as Megatron's bf16 runs: fp32 weights
and gradients, bf16 GEMMs (torch.autocast), fused AdamW.

One iteration = one micro-batch: forward, backward, optimizer step (dtsim: --tp 1 --pp 1 --dp 1 --gbs MBS).

Prints one JSON line per configuration with per-iteration times (CUDA events around whole iterations after
warm-up) and the peak allocated memory:
  {"layers":..,"hidden":..,"mbs":..,"recompute":..,"iter_s":[...],"median_s":..,"peak_bytes":..,...}
With --trace FILE, one more iteration is recorded with torch.profiler (record_shapes=True) into FILE (Kineto JSON).
"""
import argparse
import json
import math
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class Layer(torch.nn.Module):
    def __init__(self, hidden, heads, ffn, dropout):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(hidden)
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)
        self.proj = torch.nn.Linear(hidden, hidden)
        self.ln2 = torch.nn.LayerNorm(hidden)
        self.fc1 = torch.nn.Linear(hidden, ffn)
        self.fc2 = torch.nn.Linear(ffn, hidden)
        self.p = dropout

    def attention(self, x):  # x: [s, b, h] (Megatron's layout)
        s, b, h = x.shape
        d = h // self.heads
        qkv = self.qkv(x).view(s, b * self.heads, 3 * d)
        q, k, v = qkv.split(d, dim=-1)
        q, k, v = (t.transpose(0, 1) for t in (q, k, v))  # [b*heads, s, d]
        scores = torch.baddbmm(torch.empty(b * self.heads, s, s, dtype=q.dtype, device=q.device), q,
                               k.transpose(1, 2), beta=0.0, alpha=1.0 / math.sqrt(d))
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu_(1)
        probs = F.dropout(torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1), self.p, self.training)
        ctx = torch.bmm(probs, v).transpose(0, 1).reshape(s, b, h)
        return self.proj(ctx)

    def forward(self, x):
        x = x + F.dropout(self.attention(self.ln1(x)), self.p, self.training)
        return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)))), self.p, self.training)


class GPT(torch.nn.Module):
    def __init__(self, layers, hidden, heads, ffn, seq, vocab, dropout, recompute):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.pos = torch.nn.Embedding(seq, hidden)
        self.layers = torch.nn.ModuleList(Layer(hidden, heads, ffn, dropout) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(hidden)
        self.recompute = recompute

    def forward(self, tokens, labels):  # tokens: [b, s]
        x = (self.embed(tokens) + self.pos.weight[: tokens.shape[1]]).transpose(0, 1).contiguous()
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=False) if self.recompute == "full" else layer(x)
        logits = F.linear(self.ln_f(x), self.embed.weight)  # tied LM head, [s, b, vocab]
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.transpose(0, 1).reshape(-1))


def run(cfg, args):
    torch.manual_seed(1234)
    dev = torch.device("cuda")
    with dev:  # initialise on the GPU: a CPU init of a billion parameters takes longer than the measurement
        model = GPT(cfg["layers"], cfg["hidden"], cfg["heads"], 4 * cfg["hidden"], cfg["seq"], cfg["vocab"],
                    args.dropout, cfg["recompute"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    tokens = torch.randint(0, cfg["vocab"], (cfg["mbs"], cfg["seq"]), device=dev)
    labels = torch.randint(0, cfg["vocab"], (cfg["mbs"], cfg["seq"]), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(tokens, labels)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(args.iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        loss = step()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    if not math.isfinite(loss.item()):
        raise RuntimeError("loss is not finite")
    out = dict(cfg)
    out.update(params=sum(p.numel() for p in model.parameters()), iter_s=[round(t, 6) for t in times],
               median_s=statistics.median(times), min_s=min(times), peak_bytes=torch.cuda.max_memory_allocated(),
               reserved_bytes=torch.cuda.max_memory_reserved(), gpu=torch.cuda.get_device_name(),
               torch=torch.__version__, loss=loss.item())
    if args.trace:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
            step()
            torch.cuda.synchronize()
        prof.export_chrome_trace(args.trace)
        out["trace"] = args.trace
    del model, opt
    torch.cuda.empty_cache()
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--vocab", type=int, default=51200)
    p.add_argument("--mbs", default="1", help="micro-batch sizes, comma separated")
    p.add_argument("--recompute", default="none", help="none and/or full, comma separated")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--trace", default="", help="Kineto trace of one more iteration (one configuration only)")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("torch_gpt_step: no CUDA device", file=sys.stderr)
        return 77
    configs = [dict(layers=args.layers, hidden=args.hidden, heads=args.heads, seq=args.seq, vocab=args.vocab,
                    mbs=int(m), recompute=r) for r in args.recompute.split(",") for m in args.mbs.split(",")]
    if args.trace and len(configs) != 1:
        print("torch_gpt_step: --trace needs exactly one configuration", file=sys.stderr)
        return 2
    for cfg in configs:
        try:
            print(json.dumps(run(cfg, args)), flush=True)
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            print(json.dumps(dict(cfg, oom=True)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
