#!/usr/bin/env bash
# fuzz/make_corpus.sh OUT_DIR -- builds the seed corpora of the fuzz targets under OUT_DIR/<target>/.
#
# Seeds come from the project (examples/, tests/data/, tests/golden/: the model, cluster, plan and calibration
# blocks of the golden summaries, the custom schedule, traces/calibration/) and, when present, from the public
# traces in ../shared/traces (decompressed and cut down to their first events / nodes so that every seed stays
# under 16 KiB: small inputs keep the executions per second high). Nothing is copied into the repository; the corpus is rebuilt from these sources each time.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:?usage: make_corpus.sh OUT_DIR}
SHARED=${DTSIM_SHARED_DIR:-$ROOT/../shared}
mkdir -p "$OUT"
python3 - "$ROOT" "$OUT" "$SHARED" <<'PY'
import glob, gzip, io, json, os, sys, tarfile

root, out, shared = sys.argv[1:4]
MAX = 16 * 1024
CUT = 8 * 1024  # trace seeds: the first events / nodes that fit
count = {}

def put(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    if len(data) > MAX:
        return
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)
    count[target] = count.get(target, 0) + 1

def put_json(target, name, obj):
    put(target, name, json.dumps(obj, indent=1))

def read_any(path):
    with open(path, "rb") as f:
        data = f.read()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data

def cut(obj, key, target, name):
    """obj with its list `key` cut to the longest prefix (halving) that keeps the seed under CUT."""
    items = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(items, list):
        return
    n = len(items)
    while n > 0:
        o = dict(obj)
        o[key] = items[:n]
        text = json.dumps(o)
        if len(text) <= CUT:
            put(target, name, text)
            return
        n //= 2

# --- model, cluster, plan, calibration: examples, golden summaries, shipped calibrations -------------------------
for path in sorted(glob.glob(os.path.join(root, "examples", "*.json")) +
                   glob.glob(os.path.join(root, "tests", "golden", "*.json")) +
                   glob.glob(os.path.join(root, "tests", "data", "h100", "exec", "*.json"))):
    try:
        j = json.load(open(path))
    except Exception:
        continue
    base = os.path.basename(path)
    if isinstance(j, dict) and "num_layers" in j:
        put("fuzz_model", base, json.dumps(j))
    elif isinstance(j, dict) and "gpus_per_node" in j:
        put("fuzz_cluster", base, json.dumps(j))
    elif isinstance(j, dict) and "stages" in j:
        put("fuzz_schedule", base, json.dumps(j))
for path in sorted(glob.glob(os.path.join(root, "tests", "golden", "expected", "*.summary.json"))):
    cfg = json.load(open(path)).get("config", {})
    base = os.path.basename(path).replace(".summary.json", ".json")
    for key, target in (("model", "fuzz_model"), ("cluster", "fuzz_cluster"), ("plan", "fuzz_plan"),
                        ("calibration", "fuzz_calibration")):
        if isinstance(cfg.get(key), dict):
            put_json(target, base, cfg[key])
    plan = cfg.get("plan", {})
    if isinstance(plan, dict) and "custom_order" in plan:
        put_json("fuzz_schedule", base, {"schema_version": 1, "virtual_stages": plan.get("virtual_stages", 1),
                                         "stages": plan["custom_order"]})
for path in sorted(glob.glob(os.path.join(root, "traces", "calibration", "*.json"))):
    put("fuzz_calibration", os.path.basename(path), open(path, "rb").read())
# Hand-made seeds reaching the less common fields.
put_json("fuzz_model", "llama_gqa.json", {"schema_version": 1, "name": "g", "num_layers": 4, "hidden": 512, "heads": 8,
         "kv_heads": 2, "ffn_hidden": 1376, "seq_len": 256, "vocab": 1000, "dtype": "bf16", "tied_embeddings": False,
         "learned_pos_embedding": False, "mlp": "swiglu"})
put_json("fuzz_cluster", "fat_tree.json", {"schema_version": 1, "name": "ft", "gpu": "h100-sxm5-80gb", "num_nodes": 4,
         "gpus_per_node": 8, "intra_node": {"kind": "nvswitch", "bandwidth_Bps": 4.5e11, "latency_s": 3e-6},
         "inter_node": {"nics_per_node": 8, "nic_bandwidth_Bps": 5e10, "latency_s": 5e-6, "topology": "fat-tree",
                        "nodes_per_leaf": 2, "oversubscription": 2, "spine_latency_s": 1e-6, "leaves_per_pod": 1,
                        "pod_oversubscription": 1.5}})
put_json("fuzz_cluster", "rail.json", {"name": "r", "gpu": {"preset": "a100-sxm4-80gb", "memory_bytes": 4e10},
         "num_nodes": 2, "gpus_per_node": 4, "intra_node": {"bandwidth_Bps": 3e11, "latency_s": 2e-6},
         "inter_node": {"nics_per_node": 2, "nic_bandwidth_Bps": 2.5e10, "latency_s": 4e-6, "topology": "rail",
                        "nodes_per_leaf": 1}})
for i, spec in enumerate(["dgx-a100:1024:fat-tree:16:1", "dgx-h100:64:rail:4:2", "dgx-a100:2048:fat-tree:8:2:4:1.5",
                          "dgx1-v100:16", "pcie-a100:8", "dgx-a100:16:switch", "dgx-a100"]):
    put("fuzz_cluster", "preset%d.txt" % i, spec)  # preset strings (--cluster NAME:GPUS[:FABRIC...])
put_json("fuzz_plan", "replicas.json", {"schema_version": 1, "tp": 1, "pp": 4, "dp": 1, "micro_batch_size": 6,
         "global_batch_size": 24, "stage_replicas": [3, 2, 2, 1], "recompute": "selective"})
put_json("fuzz_plan", "stage_tp.json", {"schema_version": 1, "tp": 8, "pp": 3, "dp": 1, "micro_batch_size": 2,
         "global_batch_size": 8, "sequence_parallel": True, "stage_replicas": [1, 2, 1],
         "stage_strategies": [{}, {"tp": 4, "recompute": "full"}, {"zero_stage": 1}]})
put_json("fuzz_plan", "cuts.json", {"schema_version": 1, "tp": 2, "pp": 3, "dp": 1, "micro_batch_size": 2,
         "global_batch_size": 8, "stage_replicas": [1, 2, 1], "stage_cut_atoms": [2, 4]})
put_json("fuzz_plan", "layouts.json", {"tp": 8, "pp": 1, "dp": 1, "micro_batch_size": 2, "global_batch_size": 4,
         "tp_layout": "2.5d", "tp_depth": 2, "rank_order": "pp,tp,dp", "device_map": [7, 6, 5, 4, 3, 2, 1, 0]})
put_json("fuzz_plan", "interleaved.json", {"tp": 1, "pp": 2, "dp": 1, "micro_batch_size": 1, "global_batch_size": 4,
         "schedule": "interleaved:2", "virtual_stages": 2, "zero_stage": 1, "sequence_parallel": False,
         "dp_overlap": False, "dp_bucket_bytes": 1e6, "num_microbatches": 4, "layers_per_stage": [6, 6, 6, 6]})
put_json("fuzz_plan", "custom.json", {"tp": 1, "pp": 2, "dp": 4, "micro_batch_size": 1, "global_batch_size": 8,
         "schedule": "custom", "custom_order": [["F0", "F1", "B0", "W0", "B1", "W1"], ["F0", "B0", "W0", "F1", "B1", "W1"]]})
put_json("fuzz_schedule", "interleaved_v2.json", {"schema_version": 1, "virtual_stages": 2, "comment": "v2",
         "stages": [["F0.0", "F0.1", "B0.1", "B0.0"], ["F0.0", "F0.1", "B0.1", "B0.0"]]})
put_json("fuzz_schedule", "zb.json", {"stages": [["F0", "F1", "B0", "W0", "B1", "W1"], ["F0", "B0", "F1", "W0", "B1", "W1"]]})
put_json("fuzz_calibration", "segments.json", {"schema_version": 1, "name": "s", "gpu": "h100-sxm5-80gb",
         "compute": {"gemm_efficiency_max": 0.8, "gemm_half_efficiency_flops": 1e10, "memory_bandwidth_efficiency": 0.7,
                     "kernel_launch_s": 5e-6, "host_issue_s": 1e-5, "optimizer_bytes_per_param": 16},
         "network": {"intra_bandwidth_efficiency": 0.8, "inter_bandwidth_efficiency": 0.9,
                     "collective_step_overhead_s": 2e-6, "p2p_overhead_s": 5e-6,
                     "segments": [{"link": "nvlink", "max_bytes": 65536, "latency_factor": 2, "bandwidth_factor": 0.5},
                                  {"link": "network", "max_bytes": 1e9}],
                     "collective_algorithms": [{"op": "all-reduce", "max_bytes": 1e6, "algorithm": "tree"}]},
         "memory": {"reserved_memory_bytes": 1e9}})

# --- sweep specs: the examples without their prose, cut to two values per list (quick to expand) ---------------
for path in sorted(glob.glob(os.path.join(root, "examples", "sweeps", "*.json"))):
    spec = json.load(open(path))
    spec.pop("description", None)
    small = {k: (v[:2] if isinstance(v, list) else v) for k, v in spec.items()}
    if "random" in small:
        small["random"] = {"samples": 3, "seed": 7}
    put_json("fuzz_sweep", "small_" + os.path.basename(path), small)

# --- nccl-tests ---------------------------------------------------------------------------------------------------
for path in sorted(glob.glob(os.path.join(root, "tests", "data", "nccl-tests", "*")) +
                   glob.glob(os.path.join(root, "tests", "data", "h100", "nccl_*.txt"))):
    if path.endswith((".txt", ".json")):
        put("fuzz_nccl_tests", os.path.basename(path), open(path, "rb").read())

# --- Kineto traces ------------------------------------------------------------------------------------------------
kineto = sorted(glob.glob(os.path.join(root, "tests", "data", "h100", "*.json.gz")) +
                glob.glob(os.path.join(root, "tests", "data", "h100", "exec", "*.json.gz")) +
                glob.glob(os.path.join(shared, "traces", "HolisticTraceAnalysis", "**", "*.json.gz"), recursive=True) +
                glob.glob(os.path.join(shared, "traces", "param", "**", "*kineto*.json.gz"), recursive=True))
for path in kineto:
    if os.path.getsize(path) > 4 << 20:
        continue
    try:
        j = json.loads(read_any(path))
    except Exception:
        continue
    name = os.path.basename(path).replace(".json.gz", "") + ".json"
    if isinstance(j, dict) and "traceEvents" in j:
        # Two cuts: the head of the trace (metadata, CPU ops) and a slice from the middle (kernels, NCCL).
        cut(j, "traceEvents", "fuzz_kineto", name)
        ev = j["traceEvents"]
        mid = dict(j)
        mid["traceEvents"] = [e for e in ev if isinstance(e, dict) and e.get("cat") in
                              ("kernel", "Kernel", "gpu_memcpy", "cuda_runtime", "user_annotation")][:120]
        cut(mid, "traceEvents", "fuzz_kineto", "gpu_" + name)
    elif isinstance(j, dict) and "nodes" in j:
        cut(j, "nodes", "fuzz_exec_graph", name)
put("fuzz_kineto", "bare_array.json", '[{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2.25, '
    '"args": {"device": 0, "stream": 7}}]')

def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)

def et_prefix(data, limit):
    """A Chakra .et stream cut to its whole length-delimited messages that fit in `limit` bytes."""
    pos = end = 0
    while pos < len(data):
        n = shift = 0
        p = pos
        while p < len(data):
            b = data[p]
            p += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        if p + n > limit:
            break
        pos = end = p + n
    return data[:end]

def field(number, wire, payload):
    return varint(number << 3 | wire) + (varint(len(payload)) + payload if wire == 2 else varint(payload))

# --- execution graphs: PyTorch ET and Chakra JSON -----------------------------------------------------------------
for path in sorted(glob.glob(os.path.join(shared, "traces", "**", "*et*.json.gz"), recursive=True)):
    if os.path.getsize(path) > 4 << 20:
        continue
    try:
        j = json.loads(read_any(path))
    except Exception:
        continue
    cut(j, "nodes", "fuzz_exec_graph", os.path.basename(path).replace(".json.gz", ".json"))
for path in sorted(glob.glob(os.path.join(shared, "traces", "chakra", "**", "*.tar.gz"), recursive=True)):
    try:
        with tarfile.open(path) as t:
            for m in t.getmembers():
                if m.isfile() and m.name.endswith(".json"):
                    j = json.loads(t.extractfile(m).read())
                    cut(j, "workload_graph", "fuzz_exec_graph", "chakra_" + os.path.basename(m.name))
                if m.isfile() and m.name.endswith(".et"):
                    put("fuzz_chakra_et", os.path.basename(m.name), et_prefix(t.extractfile(m).read(), CUT))
                # the archive reader gets the (small) archive itself
            if os.path.getsize(path) <= MAX:
                put("fuzz_archive", os.path.basename(path), open(path, "rb").read())
    except (tarfile.TarError, ValueError):
        continue
put("fuzz_exec_graph", "jsonizer_stream.json",
    '{"version": "0.0.4", "attr": [{"name": "schema", "stringVal": "1.0.2-chakra.0.0.4"}]}\n'
    '{"id": "5", "name": "aten::mm", "type": "COMP_NODE", "durationMicros": "12", "attr": [{"name": "is_cpu_op", "boolVal": false}]}\n'
    '{"id": "6", "name": "allreduce", "type": "COMM_COLL_NODE", "dataDeps": ["5"], "ctrlDeps": ["0"], "attr": '
    '[{"name": "comm_type", "int64Val": "0"}, {"name": "comm_size", "int64Val": "1048576"}]}\n'
    '{"name": "root", "type": "METADATA_NODE"}\n')

# A hand-made Chakra .et: GlobalMetadata "0.0.4", a compute node of 12 us and an all-reduce depending on it.
meta = field(1, 2, b"0.0.4")
comp = field(1, 0, 5) + field(2, 2, b"aten::mm") + field(3, 0, 4) + field(7, 0, 12)
coll = (field(1, 0, 6) + field(2, 2, b"allreduce") + field(3, 0, 7) + field(5, 2, varint(5)) +
        field(10, 2, field(1, 2, b"comm_type") + field(9, 0, 0)) +
        field(10, 2, field(1, 2, b"comm_size") + field(13, 0, 1 << 20)))
put("fuzz_chakra_et", "allreduce.0.et", b"".join(varint(len(m)) + m for m in (meta, comp, coll)))

# --- archives: small compressed files and a tar.gz of two seeds ---------------------------------------------------
for path in sorted(glob.glob(os.path.join(shared, "traces", "**", "*.gz"), recursive=True)):
    if os.path.getsize(path) <= 8 * 1024:
        put("fuzz_archive", os.path.basename(path), open(path, "rb").read())
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as t:
    for i, text in enumerate((b'{"traceEvents": []}', b'{"nodes": []}')):
        info = tarfile.TarInfo("rank%d.json" % i)
        info.size = len(text)
        t.addfile(info, io.BytesIO(text))
put("fuzz_archive", "two_ranks.tar.gz", buf.getvalue())
put("fuzz_archive", "plain.json", b'{"a": 1}')
put("fuzz_archive", "one.json.gz", gzip.compress(b'{"traceEvents": []}', mtime=0))

for target in sorted(count):
    print("corpus %-18s %3d seeds" % (target, count[target]))
PY
