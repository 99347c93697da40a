#!/usr/bin/env bash
# cli/trace_bounds.sh DTSIM PROTOC -- traces a person can open, end to end through `dtsim simulate`:
#   1. an unfolded 128-rank run (GPT-3 1.3B, dgx-a100:128, tp 8 pp 4 dp 4, --fold none) writes a bounded
#      trace.json: only the selected ranks (per pipeline stage its representative, busiest and largest-memory ranks,
#      so at most 3 per stage and every stage's rank s*32), the 32 busiest links with --trace-links, and metadata
#      that lists them and counts what was left out;
#   2. --trace-ranks 0-7,64 --trace-links 4 keeps exactly those ranks and the 4 links that carried the most bytes;
#   3. --perfetto writes trace.pftrace, decoded with `protoc --decode` against traces/perfetto_trace.proto: on a
#      small run whose trace.json holds every rank, it has as many slices (SLICE_BEGIN and SLICE_END each) as
#      trace.json has complete events, one process track per trace.json process, and every link counter of trace.json;
#      on the 128-rank run, one process track per simulated rank (trace.json kept 4).
set -euo pipefail

DTSIM=${1:?usage: trace_bounds.sh /path/to/dtsim /path/to/protoc}
PROTOC=${2:?usage: trace_bounds.sh /path/to/dtsim /path/to/protoc}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

failures=0
fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}

BIG=(simulate --model gpt3-1.3b --cluster dgx-a100:128 --tp 8 --pp 4 --dp 4 --fold none --mbs 1 --gbs 16 -q)
"$DTSIM" "${BIG[@]}" --trace-links --perfetto --out "$TMP/big" || fail "128-rank run failed"
"$DTSIM" "${BIG[@]}" --trace-ranks 0-7,64 --trace-links 4 --out "$TMP/list" || fail "128-rank run with a list failed"
"$DTSIM" simulate --model gpt3-1.3b --cluster dgx-a100:16 --tp 2 --pp 2 --dp 4 --mbs 2 --gbs 64 --fold none \
  --trace-links --perfetto -q --out "$TMP/small" || fail "16-rank run failed"

# Counts of a decoded trace.pftrace: "slices_begin slices_end processes link_counters".
pftrace_counts() {
  "$PROTOC" --decode=perfetto.protos.Trace -I "$SRC/traces" "$SRC/traces/perfetto_trace.proto" <"$1" >"$1.txt"
  python3 - "$1.txt" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
begins = len(re.findall(r"type: TYPE_SLICE_BEGIN", text))
ends = len(re.findall(r"type: TYPE_SLICE_END", text))
processes = len(re.findall(r"\n    process \{", text))
# Counter tracks that are not memory: the links'.
links = len([n for n in re.findall(r'track_descriptor \{\n    uuid: \d+\n    name: "([^"]*)"\n(?:    parent_uuid: \d+\n)?    counter', text)
             if not n.startswith("memory ")])
print(begins, ends, processes, links)
PY
}

python3 - "$TMP" <<'PY' || failures=$((failures + 1))
import json, sys
tmp = sys.argv[1]
ok = True
def check(cond, what):
    global ok
    print(("ok  " if cond else "FAIL ") + what)
    ok = ok and cond

def load(d):
    t = json.load(open(f"{tmp}/{d}/trace.json"))
    ev = t["traceEvents"]
    pids = {e["pid"] for e in ev if e["ph"] == "X"}
    named = {e["pid"] for e in ev if e["ph"] == "M" and e["name"] == "process_name" and e["pid"] != 1 << 30}
    links = {e["name"] for e in ev if e["ph"] == "C" and e["pid"] == 1 << 30}
    return t["otherData"]["selection"], pids, named, links

sel, pids, named, links = load("big")
kept = set(sel["ranks"])
check(sel["simulated_ranks"] == 128, "big: 128 simulated ranks (%d)" % sel["simulated_ranks"])
check(pids == kept and named == kept, "big: trace.json holds only the selected ranks %s" % sorted(kept))
check({0, 32, 64, 96} <= kept, "big: every stage's representative rank is kept")
check(all(sum(1 for r in kept if r // 32 == s) <= 3 for s in range(4)), "big: at most 3 ranks per stage")
check(sel["ranks_left_out"] == 128 - len(kept), "big: ranks_left_out = %d" % sel["ranks_left_out"])
check(links == set(sel["links"]) and len(links) == 32, "big: the 32 busiest links, as the metadata lists (%d)" % len(links))
check(sel["links_left_out"] == sel["used_links"] - 32 > 0, "big: links_left_out = %d of %d used" % (sel["links_left_out"], sel["used_links"]))
summary = json.load(open(f"{tmp}/big/summary.json"))
by_bytes = sorted(summary["links"], key=lambda l: -l["bytes"])
check(min(l["bytes"] for l in summary["links"] if l["name"] in links) >= by_bytes[31]["bytes"],
      "big: no left-out link carried more bytes than a kept one")

sel, pids, named, links = load("list")
want = set(range(8)) | {64}
check(pids == want and set(sel["ranks"]) == want, "list: --trace-ranks 0-7,64 keeps exactly %s" % sorted(pids))
check(len(links) == 4 and sel["links_left_out"] == sel["used_links"] - 4, "list: --trace-links 4 keeps 4 links")

sel, pids, named, links = load("small")
check(sel["ranks_left_out"] == 0 and len(pids) == 16 and sel["links_left_out"] == 0, "small: every rank and link kept")
sys.exit(0 if ok else 1)
PY

read -r b e p l <<<"$(pftrace_counts "$TMP/small/trace.pftrace")"
x=$(grep -o '"ph":"X"' "$TMP/small/trace.json" | wc -l)
jl=$(python3 -c "import json,sys; print(len({e['name'] for e in json.load(open(sys.argv[1]))['traceEvents'] if e['ph'] == 'C' and e['pid'] == 1 << 30}))" "$TMP/small/trace.json")
if [[ $b -eq $x && $e -eq $x && $x -gt 0 ]]; then echo "ok  small: trace.pftrace has $b slices, as trace.json"; else fail "small: trace.pftrace $b begins / $e ends, trace.json $x slices"; fi
if [[ $p -eq 17 ]]; then echo "ok  small: 16 rank processes and the links process"; else fail "small: $p process tracks, expected 17"; fi
if [[ $l -eq $jl && $l -gt 0 ]]; then echo "ok  small: $l link counter tracks, as trace.json"; else fail "small: $l link counters, trace.json $jl"; fi
read -r b e p l <<<"$(pftrace_counts "$TMP/big/trace.pftrace")"
if [[ $p -eq 129 && $b -eq $e && $b -gt 0 ]]; then echo "ok  big: trace.pftrace holds all 128 ranks ($b slices)"; else fail "big: $p process tracks, $b/$e slices"; fi

if [[ $failures -ne 0 ]]; then
  echo "trace_bounds: $failures failure(s)"
  exit 1
fi
echo "trace_bounds: all checks passed"
