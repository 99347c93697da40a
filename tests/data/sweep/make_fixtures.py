#!/usr/bin/env python3
"""Writes the synthetic `dtsim sweep` results used by the pareto/report tests and the sweep_plots notebook.

    python3 tests/data/sweep/make_fixtures.py      # rewrites the .jsonl files beside this script

* pareto_handmade.jsonl: a small hand-made set whose Pareto fronts are listed in README.md (dominated points,
  equal-throughput and equal-memory points, an exact duplicate, a planner row, over-capacity, oom, failed and
  crashed rows, and a GPU count where nothing ran).
* sweep_small.jsonl: a grid of two models on 8..64 GPUs with metrics from a crude analytic model (not dtsim's),
  plus one planner row per model and GPU count, oom/failed/crashed rows and an error message with HTML in it.
* torn.jsonl: two rows and a last line cut short (no newline), as an interrupted sweep leaves it.
"""
import json
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent
GB = 1e9
CAPACITY = 80 * GB
SEQ = 2048
METRICS = ("iteration_time_s", "tokens_per_s", "samples_per_s", "mfu", "model_tflops_per_gpu", "peak_memory_bytes",
           "memory_capacity_bytes", "fits", "memory_bytes", "compute_s", "exposed_comm_s", "bubble_s", "sim_wall_s")


def row(idx, model, params, gpus, tp, pp, dp, *, vp=1, mbs=1, gbs=64, zero=0, recompute="none", layout="1d", sp=False,
        planner="", status="ok", error="", tps=None, mem=None, fits=True, split=(0.2, 0.1, 0.3, 0.35, 0.05)):
    r = {"id": f"s{idx:04d}", "index": idx, "model": model, "params": params, "cluster": f"dgx-a100:{gpus}",
         "gpu": "a100-sxm4-80gb", "gpus": gpus, "nodes": max(1, gpus // 8), "network": "flow", "planner": planner,
         "tp": tp, "pp": pp, "dp": dp, "vp": vp, "mbs": mbs, "gbs": gbs,
         "schedule": "interleaved:%d" % vp if vp > 1 else "1f1b", "zero": zero, "recompute": recompute,
         "tp_layout": layout, "sequence_parallel": sp, "status": status, "error": error}
    if status != "ok":
        r.update({k: None for k in METRICS})
        return r
    it = gbs * SEQ / tps
    tflops = 6 * params * tps / gpus / 1e12
    r.update({"iteration_time_s": it, "tokens_per_s": tps, "samples_per_s": gbs / it, "mfu": tflops / 312,
              "model_tflops_per_gpu": tflops, "peak_memory_bytes": mem, "memory_capacity_bytes": CAPACITY,
              "fits": fits,
              "memory_bytes": dict(zip(("weights", "gradients", "optimizer", "activations", "reserved"),
                                       (f * mem for f in split))),
              "compute_s": 0.7 * it, "exposed_comm_s": 0.2 * it, "bubble_s": 0.1 * it, "sim_wall_s": 0.05})
    return r


def handmade():
    m, p = "tiny-gpt", 1.3e9
    h = lambda idx, gpus, tp, pp, dp, **kw: row(idx, m, p, gpus, tp, pp, dp, **kw)
    return [
        # 8 GPUs. Front: s0000, s0002, s0013 (planner), s0005 (same point as s0006), s0007.
        h(0, 8, 1, 1, 8, tps=1000.0, mem=10 * GB),
        h(1, 8, 2, 1, 4, tps=900.0, mem=10 * GB),                 # equal memory, slower than s0000
        h(2, 8, 2, 2, 2, tps=2000.0, mem=20 * GB),
        h(3, 8, 4, 1, 2, tps=1500.0, mem=25 * GB),                # dominated by s0002
        h(4, 8, 4, 2, 1, tps=2000.0, mem=30 * GB),                # equal throughput to s0002, more memory
        h(6, 8, 8, 1, 1, mbs=2, tps=3000.0, mem=40 * GB),         # same point as s0005; listed first, higher index
        h(5, 8, 1, 2, 4, mbs=2, tps=3000.0, mem=40 * GB),
        h(7, 8, 1, 8, 1, vp=2, zero=1, tps=3500.0, mem=60 * GB),
        h(8, 8, 1, 1, 8, mbs=4, tps=5000.0, mem=95 * GB, fits=False),  # ran, over capacity
        h(9, 8, 1, 1, 8, mbs=8, status="oom", error="out of memory: 131.2 GB on stage 0 > 80.0 GB"),
        h(10, 8, 8, 8, 1, status="failed", error="plan: pp 8 does not divide 12 layers"),
        h(11, 8, 2, 4, 1, status="crashed", error="worker exited with signal 11"),
        h(12, 8, 2, 1, 4, recompute="full", tps=3400.0, mem=70 * GB),  # dominated by s0007
        h(13, 8, 2, 2, 2, planner="dapple", tps=2500.0, mem=35 * GB),
        # 16 GPUs. Front: s0014, s0016.
        h(14, 16, 2, 1, 8, tps=4000.0, mem=15 * GB),
        h(15, 16, 4, 1, 4, tps=3000.0, mem=15 * GB),              # equal memory, slower
        h(16, 16, 2, 2, 4, tps=6000.0, mem=50 * GB),
        h(17, 16, 1, 1, 16, tps=7000.0, mem=85 * GB, fits=False),
        h(18, 16, 16, 1, 1, status="failed", error="plan: tp 16 exceeds the 8 GPUs of a node"),
        # 32 GPUs: nothing ran.
        h(19, 32, 1, 1, 32, status="oom", error="out of memory: 95.0 GB on stage 0 > 80.0 GB"),
        h(20, 32, 8, 4, 1, status="crashed", error="worker killed (timeout)"),
    ]


MODELS = {  # name: (params, layers, hidden)
    "gpt3-1.3b": (1.3e9, 24, 2048),
    "llama2-7b": (6.7e9, 32, 4096),
}


def small_sweep():
    rows = []

    def add(model, params, gpus, tp, pp, dp, **kw):
        rows.append(row(len(rows), model, params, gpus, tp, pp, dp, **kw))

    for model, (params, layers, hidden) in MODELS.items():
        for gpus in (8, 16, 32, 64):
            gbs = 256
            for tp in (1, 2, 8):
                for pp in (1, 4):
                    dp = gpus // (tp * pp)
                    for mbs, zero, recompute in ((1, 0, "none"), (4, 1, "full")):
                        kw = dict(mbs=mbs, gbs=gbs, zero=zero, recompute=recompute)
                        if dp < 1 or tp * pp * dp != gpus or gbs % (mbs * dp):
                            continue
                        shard = params / (tp * pp)
                        weights, grads = 2 * shard, 2 * shard
                        optim = 12 * shard / (dp if zero else 1)
                        micro = gbs // (mbs * dp)
                        act = SEQ * mbs * hidden * 34 * layers / pp / tp * min(pp, micro)
                        act *= 0.08 if recompute == "full" else 1.0
                        reserved = 1.5 * GB
                        mem = weights + grads + optim + act + reserved
                        if mem > CAPACITY and tp * pp == 1:
                            add(model, params, gpus, tp, pp, dp, status="oom", **kw,
                                error=f"out of memory: {mem / GB:.1f} GB on stage 0 > 80.0 GB")
                            continue
                        eff = 0.55 - 0.04 * math.log2(tp) + 0.02 * math.log2(mbs)
                        compute = 6 * params * gbs * SEQ / gpus / (312e12 * eff)
                        compute *= 4 / 3 if recompute == "full" else 1.0
                        comm = compute * (0.04 * math.log2(tp) * (2 if gpus > 8 and tp > 1 else 1)
                                          + (0.03 if dp > 1 else 0) + (0.02 if zero else 0))
                        bubble = compute * (pp - 1) / micro
                        it = compute + comm + bubble
                        split = tuple(v / mem for v in (weights, grads, optim, act, reserved))
                        add(model, params, gpus, tp, pp, dp, tps=round(gbs * SEQ / it, 3), mem=round(mem),
                            fits=mem <= CAPACITY, split=split, **kw)
                        rows[-1].update(compute_s=compute, exposed_comm_s=comm, bubble_s=bubble, iteration_time_s=it,
                                        samples_per_s=gbs / it)
            add(model, params, gpus, 16, 1, gpus // 16 or 1, status="failed",
                error="plan: tp 16 exceeds the 8 GPUs of a node")
            best = max((r for r in rows if r["model"] == model and r["gpus"] == gpus and r["status"] == "ok"
                        and r["fits"]), key=lambda r: r["tokens_per_s"])
            planned = dict(best, id=f"s{len(rows):04d}", index=len(rows), planner="alpa-lite", sim_wall_s=0.5)
            for k in ("tokens_per_s", "samples_per_s", "mfu", "model_tflops_per_gpu"):
                planned[k] = best[k] * 0.97  # the planner's pick, simulated a little slower
            for k in ("iteration_time_s", "compute_s", "exposed_comm_s", "bubble_s"):
                planned[k] = best[k] / 0.97
            rows.append(planned)
    add("gpt3-1.3b", 1.3e9, 8, 1, 1, 8, mbs=16, gbs=256, tps=52000.0, mem=round(92.5 * GB), fits=False)
    add("gpt3-1.3b", 1.3e9, 128, 8, 4, 4, gbs=256, status="crashed", error='lowering: <stage 3> & "rank 17" aborted')
    return rows


def write(name, rows, torn_tail=None):
    text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows)
    if torn_tail:
        text += torn_tail
    (HERE / name).write_text(text)
    print(f"wrote {name}: {len(rows)} rows")


if __name__ == "__main__":
    write("pareto_handmade.jsonl", handmade())
    write("sweep_small.jsonl", small_sweep())
    hm = handmade()
    write("torn.jsonl", hm[:2], torn_tail=json.dumps(hm[2], separators=(",", ":"))[:150])
