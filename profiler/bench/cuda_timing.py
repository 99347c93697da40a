"""cuda_timing.py -- the timing the PyTorch benchmarks of profiler/bench/ share (hw_sweep.py, moe_sweep.py)."""
import statistics

import torch


def timed(fn, reps=10, warmup=3):
    """Median seconds of `reps` calls of fn, each between two CUDA events, after `warmup` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    return statistics.median(times)
