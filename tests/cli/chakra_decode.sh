#!/usr/bin/env bash
# cli/chakra_decode.sh DTSIM -- `dtsim simulate --export-chakra DIR` read by someone else's protobuf library:
# Debian's python3-protobuf decodes every exported .et file with a module that protoc generates from
# traces/chakra_et.proto, and checks what a Chakra consumer relies on: a GlobalMetadata (version 0.0.4) first,
# then Nodes with unique ids and dependencies that resolve; node types COMP_NODE, COMM_SEND_NODE and
# COMM_RECV_NODE only; every send (comm_src, comm_dst, comm_tag) met by exactly one receive on the other rank;
# GPU compute nodes with num_ops (the GEMM-carrying ones); and as many nodes in all as dtsim's own reader counts (`dtsim replay`).
# Exit 77 (skipped) without /usr/bin/python3's google.protobuf or protoc.
set -euo pipefail
DTSIM=${1:?usage: chakra_decode.sh /path/to/dtsim}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PY=/usr/bin/python3
[[ -x $PY ]] && $PY -c 'import google.protobuf' 2>/dev/null || { echo "SKIP: $PY has no google.protobuf (python3-protobuf)"; exit 77; }
command -v protoc >/dev/null || { echo "SKIP: protoc not found (protobuf-compiler)"; exit 77; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$DTSIM" simulate --model gpt3-1.3b --cluster dgx-a100:8 --tp 2 --pp 2 --gbs 16 --network analytic \
  --export-chakra "$TMP/et" --quiet
protoc -I "$ROOT/traces" --python_out="$TMP" "$ROOT/traces/chakra_et.proto"
nodes=$("$DTSIM" replay --trace "$TMP/et" | sed -n 's/.*, \([0-9]*\) nodes,.*/\1/p' | head -n1)
PYTHONPATH=$TMP "$PY" - "$TMP/et" "$nodes" <<'PY'
import collections, glob, os, sys
import chakra_et_pb2 as pb

def messages(data):
    pos = 0
    while pos < len(data):
        size, shift = 0, 0
        while True:
            b = data[pos]; pos += 1
            size |= (b & 0x7F) << shift; shift += 7
            if not b & 0x80:
                break
        yield data[pos:pos + size]
        pos += size

et_dir, want_nodes = sys.argv[1], int(sys.argv[2])
files = sorted(glob.glob(os.path.join(et_dir, "dtsim.*.et")), key=lambda f: int(f.split(".")[-2]))
assert [int(f.split(".")[-2]) for f in files] == list(range(8)), files
types = collections.Counter()
gpu_compute = with_ops = 0
sends, recvs = collections.Counter(), collections.Counter()
total = 0
for f in files:
    rank = int(f.split(".")[-2])
    msgs = list(messages(open(f, "rb").read()))
    meta = pb.GlobalMetadata()
    meta.ParseFromString(msgs[0])
    assert meta.version == "0.0.4", meta.version
    ids = set()
    nodes = []
    for m in msgs[1:]:
        n = pb.Node()
        n.ParseFromString(m)
        assert n.id not in ids, (f, n.id)
        ids.add(n.id)
        nodes.append(n)
    for n in nodes:
        for d in list(n.data_deps) + list(n.ctrl_deps):
            assert d in ids, (f, n.id, d)
        attrs = {a.name: a for a in n.attr}
        types[pb.NodeType.Name(n.type)] += 1
        if n.type == pb.COMP_NODE and not attrs["is_cpu_op"].bool_val:
            gpu_compute += 1
            with_ops += "num_ops" in attrs and attrs["num_ops"].int64_val > 0
        if n.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
            key = (attrs["comm_src"].int32_val, attrs["comm_dst"].int32_val, attrs["comm_tag"].int32_val)
            assert (key[0] if n.type == pb.COMM_SEND_NODE else key[1]) == rank, (f, n.name, key)
            (sends if n.type == pb.COMM_SEND_NODE else recvs)[key] += 1
    total += len(nodes)
assert set(types) <= {"COMP_NODE", "COMM_SEND_NODE", "COMM_RECV_NODE"}, types
assert sends == recvs and all(v == 1 for v in sends.values()), "unpaired sends or receives"
assert total == want_nodes, (total, want_nodes)
assert with_ops >= 0.9 * gpu_compute > 0, (with_ops, gpu_compute)  # the optimizer's memory-bound passes have none
print(f"PASS chakra_decode: {len(files)} ranks, {total} nodes decoded by python3-protobuf "
      f"({', '.join(f'{k} {v}' for k, v in sorted(types.items()))}), {len(sends)} send/receive pairs")
PY
