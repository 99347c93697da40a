"""Decodes dtsim's Chakra export with Google's own protobuf runtime (Debian's python3-protobuf), independently of
dtsim's C++ reader: the classes come from traces/chakra_et.proto through `protoc --python_out` into a scratch
directory. Checks the stream framing (varint length, GlobalMetadata "0.0.4", then Nodes), node types and attribute
kinds, that every collective names a group of the comm-group file that holds its rank, that every send has its
receive on the destination (same tag and size), that dependencies name earlier nodes, and that the per-rank counts
equal what `dtsim replay` reports for the same files. The rules ASTRA-sim's workload layer needs (issue Interop):
only the published node types (0-7) and collective types; every dependency in data_deps (its feeder does not wait
on ctrl_deps); every GPU compute node with FLOPs has num_ops and tensor_size (its roofline mode); no GPU metadata
node (it would never be issued).

usage: chakra_decode.py DTSIM PROTOC PROTO_FILE WORKDIR   (exit 77: no google.protobuf in this Python)
"""
import json
import os
import shutil
import subprocess
import sys

try:
    import google.protobuf  # noqa: F401
except ImportError:
    print("skipped: this Python has no google.protobuf (Debian: python3-protobuf)")
    sys.exit(77)

dtsim, protoc, proto, work = sys.argv[1:5]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
gen = os.path.join(work, "gen")
os.makedirs(gen)
subprocess.run([protoc, "-I", os.path.dirname(proto), "--python_out=" + gen, proto], check=True)
sys.path.insert(0, gen)
import chakra_et_pb2 as pb  # noqa: E402

out = os.path.join(work, "et")
subprocess.run([dtsim, "simulate", "--model", "gpt3-1.3b", "--cluster", "dgx-a100:8", "--tp", "2", "--pp", "2",
                "--dp", "2", "--gbs", "16", "--mbs", "2", "--network", "analytic", "--export-chakra", out, "-q"],
               check=True)


def read_varint(b, i):
    shift = value = 0
    while True:
        byte = b[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7


def decode(path):
    data = open(path, "rb").read()
    i = 0
    msgs = []
    while i < len(data):
        n, i = read_varint(data, i)
        assert i + n <= len(data), f"{path}: message at {i} runs past the end"
        msgs.append(data[i:i + n])
        i += n
    md = pb.GlobalMetadata()
    md.ParseFromString(msgs[0])
    assert md.version == "0.0.4", md.version
    nodes = []
    for m in msgs[1:]:
        node = pb.Node()
        node.ParseFromString(m)
        nodes.append(node)
    return nodes


def attrs(node):
    return {a.name: a for a in node.attr}


groups = json.load(open(os.path.join(out, "dtsim.comm_group.json")))
assert groups and all(k.isdigit() and int(k) >= 1 for k in groups), groups
world = 8
files = sorted(f for f in os.listdir(out) if f.endswith(".et"))
assert files == [f"dtsim.{r}.et" for r in range(world)], files
counts = {}
kernels = {r: 0 for r in range(world)}  # GPU compute nodes with num_ops (and so tensor_size)
sends, recvs = {}, {}
for r in range(world):
    nodes = decode(os.path.join(out, f"dtsim.{r}.et"))
    c = {"compute": 0, "collective": 0, "send": 0, "recv": 0}
    for k, n in enumerate(nodes):
        assert n.id == k, f"rank {r}: ids are not 0..n-1"
        for d in list(n.ctrl_deps) + list(n.data_deps):
            assert d < n.id, f"rank {r} node {n.id} depends on a later node {d}"
        a = attrs(n)
        assert a["is_cpu_op"].WhichOneof("value") == "bool_val"
        assert 1 <= n.type <= 7, f"rank {r} node {n.id}: node type {n.type} is not in the published schema"
        assert not n.ctrl_deps, f"rank {r} node {n.id}: a dependency in ctrl_deps, which ASTRA-sim does not wait on"
        if n.type == pb.METADATA_NODE:
            assert a["is_cpu_op"].bool_val, f"rank {r} node {n.id}: a GPU metadata node, which ASTRA-sim never issues"
        if n.type == pb.COMP_NODE:
            c["compute"] += 1
            if not a["is_cpu_op"].bool_val and "num_ops" in a:  # a kernel with FLOPs (not a delay)
                assert a["num_ops"].int64_val > 0 and a["tensor_size"].uint64_val > 0, (
                    f"rank {r} node {n.id}: a kernel with num_ops but no tensor_size")
                kernels[r] += 1
        elif n.type == pb.COMM_COLL_NODE:
            c["collective"] += 1
            assert a["comm_type"].int64_val in (pb.ALL_REDUCE, pb.ALL_GATHER, pb.REDUCE_SCATTER, pb.ALL_TO_ALL,
                                                pb.BROADCAST, pb.REDUCE), n
            assert a["comm_size"].int64_val > 0
            g = a["pg_name"].string_val
            assert g in groups and r in groups[g], f"rank {r}: collective on group {g} {groups.get(g)}"
            assert not a["is_cpu_op"].bool_val
        elif n.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
            send = n.type == pb.COMM_SEND_NODE
            c["send" if send else "recv"] += 1
            key = (a["comm_src"].int32_val, a["comm_dst"].int32_val, a["comm_tag"].int32_val)
            assert key[0 if send else 1] == r, (r, key)
            (sends if send else recvs)[key] = a["comm_size"].int64_val
        else:
            raise AssertionError(f"rank {r}: unexpected node type {n.type}")
    counts[r] = c
assert sends == recvs, "every send has its receive (same src, dst, tag and size)"
assert all(kernels.values()), f"every rank has kernels with num_ops and tensor_size: {kernels}"
assert sum(c["send"] for c in counts.values()) > 0 and sum(c["collective"] for c in counts.values()) > 0

rep = os.path.join(work, "replay")
subprocess.run([dtsim, "replay", "--trace", out, "--out", rep, "-q"], check=True)
replayed = json.load(open(os.path.join(rep, "replay.json")))
assert replayed["schema"] == "dtsim.replay.chakra"
for x in replayed["ranks"]:
    c = counts[x["rank"]]
    got = {"compute": x["compute_nodes"], "collective": x["collective_nodes"], "send": x["sends"], "recv": x["recvs"]}
    assert got == c, f"rank {x['rank']}: dtsim replay counts {got}, protobuf decode {c}"
print("chakra_decode: %d ranks, %s" % (world, counts[0]))
