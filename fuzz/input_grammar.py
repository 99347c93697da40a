#!/usr/bin/env python3
"""Input-grammar fuzzer for the dtsim CLI: runs the real binary on generated command lines and input files.

What it checks (the error contract of tests/cli/bad_input.sh): every invocation ends with exit code 0 or 2.
  exit 2: exactly one stderr line starting "dtsim: error: ", nothing on stdout, nothing written (a fresh --out dir
          and an --export-chakra dir are not created, an existing --out dir keeps exactly its keep.txt untouched,
          no new file appears in the case's working dir / TMPDIR);
  exit 0: every summary.json under --out satisfies: results.iteration_time_s finite > 0, results.mfu in (0, 1],
          each rank's peak_memory_bytes >= 0, each link *utilization <= 1 + 1e-9, every number finite (no null,
          which is how nlohmann writes NaN / inf, in results / ranks / stages / links).
Finding kinds: crash (signal), internal (exit 3), contract (other exit code, or a broken exit-2 / output rule),
invariant (bad summary.json), oom (died of std::bad_alloc under the --mem-gib address-space limit instead of being
refused up front), slow (over --timeout). Every finding makes the exit code 1.

What it generates (deterministic from --seed): mostly one or two mutations of a valid small `simulate` command
(flags and their kinds are read from `dtsim <cmd> --help`; values drawn per kind: ints, doubles, enumerations,
routing specs, sizes, rank lists, garbage), one-field mutations of JSON inputs (model, plan, cluster, stack,
calibration, custom schedule, jobs, sweep spec, validate rows: extreme numbers, wrong types, unknown / deleted
keys, truncation), and a few mutated plan / capacity / collective / validate / replay / sweep commands.
Each case runs in a fresh temp dir ($T in printed commands) with TMPDIR=$T, under RLIMIT_AS and a timeout.

Run:   fuzz/input_grammar.py --dtsim build/bin/dtsim --seed 1 --cases 200 --timeout 20 --jobs 2 \
           [--findings-dir DIR] [--minimize] [--verbose]
       (a case takes ~0.1 s: 200 cases ~15 s on 2 cores; the default 1500 cases ~2-3 minutes)
Output: one line per finding "FINDING kind rc=N [why] :: command :: first stderr line" (in case order), then
`input grammar: N cases, K findings`. --findings-dir gets one folder per finding (inputs, cmd.sh, finding.txt);
--minimize drops flags from each distinct finding while it still reproduces, and prints the shortest command.
"""
import argparse, concurrent.futures as cf, json, math, os, random, re, resource, shlex, shutil, subprocess, sys
import tempfile

PRE = "dtsim: error: "
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INTV = ["1", "2", "4", "8", "0", "-1", "2147483647", "4294967296", "1e308", "nan", "two", "65536", "1073741824"]
DBLV = INTV + ["1e-320", "inf", "-inf", "-0", "0.5"]
GARB = ["", "bogus", ",", ":", "::", "1,", "-1", "0", "nan", "1e308", "x" * 3000, "\u00e9\u2603", "%s%n", ".", "/"]
SIZES = ["8GB", "512MiB", "1", "0", "-1", "1e308", "1e308GB", "nan", "inf", "none", "1KB", "99999999999999999999GB",
         "1.5", "GB", "-0"]
MODELS = ["gpt3-1.3b", "llama3-8b", "mixtral-8x7b", "deepseek-v3", "qwen3-30b-a3b", "gpt-oss-120b", "llama2-7b"]
CLUSTERS = ["dgx-h100:8", "dgx-h100:16", "dgx-a100:16", "gb200-nvl72:72", "dgx-b200:8", "dgx-h100:2147483647",
            "dgx-h100:1048576", "dgx-a100:16:fat-tree:1:2", "dgx-a100:16:fat-tree:1e308", "dgx-a100:16:rail:1:1e308",
            "dgx-a100:16:fat-tree:0:1", "dgx-h100:-8", "dgx-h100:8:fat-tree:1:nan", "dgx-a100:16:fat-tree:1:inf"]
RANKS = ["auto", "all", "0", "0-7", "0-3,9", "5-2", "0-2147483647", "-1", "x", "0-4294967296", ",", "0,0,0"]
ENUMS = {
    "cp-kind": ["ring", "a2a", "allgather"], "dispatcher": ["alltoall", "allgather", "deepep", "hybridep"], "attention": ["flash", "unfused"],
    "schedule": ["gpipe", "1f1b", "1f1b:dapple", "1f1b:megatron", "interleaved:2", "interleaved:4", "interleaved:1",
                 "interleaved:-1", "interleaved:2147483647", "interleaved:1e308", "interleaved:nan", "zb-h1", "zb-h2",
                 "custom", "custom:/dev/null", "1f1b:"],
    "recompute": ["none", "selective", "full"],
    "tp-layout": ["1d", "2d", "2.5d:2", "2.5d:0", "2.5d:-1", "3d", "2.5d:2147483647", "2.5d"],
    "precision": ["bf16", "fp8", "fp8-current", "fp8-rowwise", "mxfp8", "nvfp4", "fp8-delayed", "fp8-tensorwise"],
    "stack": ["megatron-core", "megatron-lm", "megatron-deepspeed", "torchtitan", "/dev/null", ".json"],
    "collectives": ["flow", "steps"], "fold": ["auto", "none"], "network": ["flow", "analytic"],
    "collective-algo": ["auto", "ring", "hierarchical", "tree", "nvls"], "engine": ["auto", "simgrid", "maxmin"],
    "planner": ["grid", "pipedream", "dapple", "rannc", "rannc-paper", "rannc-layers", "uniap", "uniap-k1", "luo"],
    "op": ["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast", "send-recv"],
    "split": ["all", "train", "test"], "model": MODELS, "cluster": CLUSTERS,
    "models": ["gpt3-1.3b", "megatron-1.7b", "megatron-1.7b,gpt5"],
    "planners": ["grid", "grid,dapple", "megatron-tp"], "gpu": ["dgx-h100", "h100-sxm5-80gb", "b900", "dgx-a100"],
    "trace-ranks": RANKS, "max-memory": SIZES, "bytes": SIZES,
    "tokens": ["1B", "300B", "1T", "2e12", "0", "-1B", "1e308", "12XB", "nan"],
    "scale-kernels": ["gemm=0.5", "gemm|cutlass=2", "(=1", "gemm=nan", "gemm=-1", "gemm=1e308", "=", "gemm"],
    "sweep": ["8:1GiB", "1GiB:8", "1:1", "0:8", "8:1e308GB", "x:y", "8"],
    "rank-order": ["tp,dp,pp", "dp,tp,pp", "pp,dp,tp", "tp,cp,dp,pp", "tp,ep,pp", "tp,tp,pp", "tp,dp", ""]}
ENUMS["algo"] = ENUMS["collective-algo"]
INTS = {"tp", "pp", "dp", "cp", "ep", "etp", "seq-len", "mbs", "gbs", "zero", "tp-overlap-chunks", "fsdp-prefetch",
        "channels", "top", "ranks", "max-gpus", "max-evals", "collective-group"}
LISTS = {"layers-per-stage", "stage-replicas"}
NOVALUE = {"out", "export-chakra", "help", "jobs", "plan", "spec", "data", "trace"}

def _groups(s):  # "--a 1 --b" -> [["--a", "1"], ["--b"]]
    out = []
    for t in shlex.split(s): out.append([t]) if t.startswith("--") else out[-1].append(t)
    return out


SIM = "simulate"
BASES = [
    "--model gpt3-1.3b --cluster dgx-h100:8 --gbs 16 --mbs 1 --network analytic",
    "--model mixtral-8x7b --cluster dgx-h100:16 --ep 2 --tp 2 --sequence-parallel --gbs 32 --mbs 1 --network analytic",
    "--model llama3-8b --cluster dgx-h100:8 --tp 2 --pp 2 --gbs 16 --mbs 1 --network analytic",
    "--model gpt3-1.3b --cluster dgx-a100:16 --tp 2 --pp 2 --dp 4 --mbs 2 --gbs 16 --network analytic",
    "--model qwen3-30b-a3b --cluster dgx-b200:8 --ep 8 --gbs 8 --network analytic",
    "--model deepseek-v3 --cluster gb200-nvl72:72 --ep 4 --pp 2 --gbs 72 --network analytic",
    "--model llama3-8b --cluster dgx-h100:8 --cp 2 --gbs 8 --schedule interleaved:2 --pp 2 --network analytic",
]
TINY = {"schema_version": 1, "name": "tiny", "num_layers": 2, "hidden": 1024, "heads": 16, "seq_len": 1024,
        "vocab": 32000, "dtype": "fp16"}
P8 = "--cluster dgx-a100:8 --tp 2 --pp 2 --dp 2 --mbs 2 --gbs 16 --network analytic"
CUSTOM = {"schema_version": 1, "stages": [["F0", "F1", "B0", "F2", "B1", "F3", "B2", "B3"],
                                          ["F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"]]}
SWEEP = {"schema_version": 1, "name": "f", "models": ["gpt3-1.3b"], "gpus": [8], "cluster_preset": "dgx-h100",
         "gbs": [16], "tp": [1, 2], "pp": [1], "dp": ["auto"], "mbs": [1], "schedule": ["1f1b"],
         "network": ["analytic"]}
ROWS = [{"hidden": 1024, "heads": 16, "num_layers": 2, "micro_batch": 1, "global_batch": 1,
         "cluster": "dgx-h100:1", "measured_s": 0.01}]
OTHER = [("plan", "--model gpt3-1.3b --cluster dgx-h100:8 --gbs 16 --top 1 --network analytic"),
         ("plan", "--planner dapple --model gpt3-1.3b --cluster dgx-a100:8 --gbs 16 --top 1 --network analytic"),
         ("capacity", "--cluster dgx-h100:8 --gbs 16 --models gpt3-1.3b --planners grid"),
         ("capacity deadline", "--model gpt3-1.3b --tokens 1B --days 1 --gpu dgx-h100 --max-gpus 64 --top 1"),
         ("collective", "--cluster dgx-h100:16 --bytes 1MiB --network analytic"),
         ("collective", "--cluster dgx-a100:16 --op all-to-all --sweep 8:1MiB --algo ring"),
         ("replay", "--trace @T@/et"), ("validate published", "--data @T@/rows.json"),
         ("sweep", "--spec @T@/sweep.json --dry-run"), ("sweep", "--spec @T@/sweep.json")]
# `capacity --help` shows the ladder mode only; the deadline mode (--model/--tokens) takes these.
DEADLINE = {f: True for f in ["model", "tokens", "days", "gpu", "price-per-gpu-hour", "gbs", "max-gpus", "top",
                              "network", "memory-limit", "calibration"]}
SEEDS = {}  # JSON documents (model, plan, cluster) from a real summary.json, and a Chakra export ("et") for replay
get = lambda o, p: get(o[p[0]], p[1:]) if p else o  # noqa: E731  (o[p0][p1]...)
load = lambda p: json.load(open(os.path.join(ROOT, p)))  # noqa: E731


def help_flags(dtsim, cmd):
    """{flag: takes_value} from `dtsim CMD --help` (boost::program_options layout)."""
    r = subprocess.run([dtsim] + cmd.split() + ["--help"], capture_output=True, text=True, timeout=60)
    flags = {}
    for line in r.stdout.splitlines():
        m = re.match(r"  (?:-\w \[ )?--([a-z0-9-]+)(?: \])?(?: (\[?=?arg))?", line)
        if m: flags.setdefault(m.group(1), bool(m.group(2)))
    return flags


def value_for(rng, flag):
    if flag == "routing":
        r = rng.choice(["balanced", "skew:%s" % rng.choice(["0", "1", "1.2", "-1", "1e308", "nan", "inf", "1e-320"]),
                        "loads:" + ",".join(rng.choice(["1", "0", "-1", "1e308", "nan", "1e-320", "2"])
                                            for _ in range(rng.choice([8, 8, 3, 128, 256, 0]))), "hot", "skew:"])
        if rng.random() < 0.4:
            r += ",cf:" + rng.choice(["1", "1.25", "0", "-1", "1e308", "nan", "1e-320", "inf", "2147483648"])
            r += rng.choice(["", ":pad", ":x"])
        return r
    if flag in INTS: return rng.choice(INTV)
    if flag in ENUMS: return rng.choice(ENUMS[flag] + ([rng.choice(GARB)] if rng.random() < 0.3 else []))
    if flag in LISTS: return ",".join(rng.choice(INTV[:8]) for _ in range(rng.choice([1, 2, 2, 3])))
    if flag == "trace-links": return rng.choice(["auto", "all", "0", "3", "-1", "2147483648", "x"])
    if flag in ("calibration", "stack"): return rng.choice(["/dev/null", "@T@/nope.json", "", "/"])
    if rng.random() < 0.5: return rng.choice(DBLV)  # doubles and unknown-typed values
    return rng.choice(GARB)


def mutate_json(rng, doc):
    """Returns the text of doc with one field mutated (numbers, types, keys) or the text cut short."""
    paths = []
    def walk(o, p):
        paths.append(p)
        for k, v in (o.items() if isinstance(o, dict) else enumerate(o) if isinstance(o, list) else []):
            walk(v, p + (k,))
    walk(doc, ())
    doc = json.loads(json.dumps(doc))
    nums = [p for p in paths[1:] if isinstance(get(doc, p), (int, float)) and not isinstance(get(doc, p), bool)]
    op = rng.choice(["num", "num", "num", "type", "delete", "unknown", "string", "cut"])
    if op == "num" and nums or op in ("type", "string", "delete") and len(paths) > 1:
        p = rng.choice(nums if op == "num" else paths[1:])
        parent = get(doc, p[:-1])
        if op == "delete": del parent[p[-1]]
        else: parent[p[-1]] = (rng.choice([1e308, -1, 0, 1e-320, 2147483648, 4294967297, -2147483649, 0.5, 1e15,
                                           "@RAW1e400@", "@RAW-0@", 7, 1024 ** 3])
                               if op == "num" else rng.choice(["two", [], {}, None, True, "", [1, 2], 1.5])
                               if op == "type" else rng.choice(GARB[:12]))
    elif op == "unknown":
        dicts = [p for p in paths if isinstance(get(doc, p), dict)] or [()]
        get(doc, rng.choice(dicts))["frobnicate"] = 1
    text = json.dumps(doc, indent=1)
    text = re.sub(r'"@RAW([^@]*)@"', r"\1", text)
    return text[: rng.randrange(1, max(2, len(text)))] if op == "cut" else text


def set_group(groups, flag, val):
    grp = ["--" + flag] + ([] if val is None else [val])
    if flag == "trace-links": grp = ["--trace-links" + ("" if val is None else "=" + val)]
    for i, gr in enumerate(groups):
        if gr[0] == "--" + flag: groups[i] = grp; return
    groups.append(grp)


class Gen:
    def __init__(self, dtsim, seeds):
        self.help = {c: help_flags(dtsim, c) for c in ["simulate", "plan", "capacity", "collective",
                                                      "validate published", "replay", "sweep"]}
        self.seeds = seeds  # JSON documents taken from real dtsim output (may be empty)

    def case(self, rng):
        files, r = {}, rng.random()
        cmd, groups = SIM, _groups(rng.choice(BASES))
        if r < 0.55:  # one or two flag mutations of a valid base
            for _ in range(1 if rng.random() < 0.7 else 2):
                k = rng.random()
                flags = self.help[SIM]
                if k < 0.1 and len(groups) > 1: groups.pop(rng.randrange(len(groups)))
                else:
                    cand = [f for f, v in flags.items() if (v if k < 0.85 else not v) and f not in NOVALUE]
                    f = rng.choice(sorted(cand))
                    set_group(groups, f, value_for(rng, f) if flags[f] else None)
        elif r < 0.85:  # one mutated JSON input file
            kind = rng.choice(["model", "plan", "stack", "calibration", "cluster", "schedule", "jobs"])
            src = {"model": [TINY, load("examples/bert-large.json")] + self.seeds.get("model", []),
                   "plan": [{"schema_version": 1, "tp": 2, "pp": 2, "dp": 2, "micro_batch_size": 2,
                             "global_batch_size": 16}] + self.seeds.get("plan", []),
                   "stack": [load("traces/stacks/%s.json" % s) for s in ENUMS["stack"][:4]],
                   "calibration": [load("traces/calibration/%s.json" % n) for n in ("a100-sxm4-80gb",
                                                                                     "h100-sxm5-80gb")],
                   "cluster": [load("examples/nvlink-chain-8gpu.json")] + self.seeds.get("cluster", []),
                   "schedule": [CUSTOM], "jobs": [load("examples/two-jobs-shared-nics.json")]}[kind]
            files["in.json"] = mutate_json(rng, rng.choice(src))
            if kind == "model": groups = [["--model", "@T@/in.json"]] + _groups(P8)
            elif kind == "plan": groups = [["--model", "gpt3-1.3b"], ["--plan", "@T@/in.json"]] + _groups(P8)[:1] + \
                    [["--network", "analytic"]]
            elif kind in ("stack", "calibration"):
                groups = [["--model", "gpt3-1.3b"], ["--" + kind, "@T@/in.json"]] + _groups(P8)
                if "h100" in files["in.json"][:400]: groups[2][1] = "dgx-h100:8"
            elif kind == "cluster": groups = _groups("--model gpt3-1.3b --gbs 16 --tp 2 --network analytic") + \
                    [["--cluster", "@T@/in.json"]]
            elif kind == "schedule": groups = [["--model", "gpt3-1.3b"], ["--schedule", "custom:@T@/in.json"]] + \
                    _groups(P8)
            else: groups = [["--cluster", "dgx-a100:32"], ["--jobs", "@T@/in.json"], ["--network", "analytic"]]
        else:  # another command, one flag mutation or one file mutation
            cmd, base = rng.choice(OTHER)
            groups, flags = _groups(base), DEADLINE if cmd == "capacity deadline" else self.help[cmd]
            cmd = cmd.split(" deadline")[0]
            if cmd == "sweep": files["sweep.json"] = mutate_json(rng, SWEEP)
            elif cmd == "validate published": files["rows.json"] = mutate_json(rng, ROWS)
            if cmd in ("plan", "capacity", "collective", "replay") or rng.random() < 0.5:
                f = rng.choice(sorted(x for x in flags if x not in NOVALUE))
                set_group(groups, f, value_for(rng, f) if flags[f] else None)
        if cmd == SIM and rng.random() < 0.1: set_group(groups, "network", "flow")
        if cmd == SIM and rng.random() < 0.05: set_group(groups, "export-chakra", "@T@/et")
        keep = rng.random() < 0.1
        if cmd != "sweep" or rng.random() < 0.5: set_group(groups, "out", "@T@/keep" if keep else "@T@/out")
        return {"cmd": cmd, "groups": groups, "files": files, "keep": keep}


def show(c):  # the command line, with the case's temp dir as "$T"
    q = lambda a: '"%s"' % a.replace("@T@", "$T") if "@T@" in a and not re.search(r"[\"$`\\\s]", a) else shlex.quote(a)
    return "dtsim " + " ".join(q(a) for a in c["cmd"].split() + [a for gr in c["groups"] for a in gr])


def setup(c, d):
    for n, t in c["files"].items():
        with open(os.path.join(d, n), "w") as f: f.write(t)
    if c["keep"]:
        os.mkdir(os.path.join(d, "keep"))
        with open(os.path.join(d, "keep", "keep.txt"), "w") as f: f.write("previous results\n")
        os.utime(os.path.join(d, "keep", "keep.txt"), (978307200, 978307200))
    if c["cmd"] == "replay" and "et" in SEEDS: shutil.copytree(SEEDS["et"], os.path.join(d, "et"))


def check_summary(path):
    with open(path) as f: s = json.load(f, parse_constant=lambda x: float(x))
    runs = s["jobs"] if "jobs" in s and "results" not in s else [s]
    bad = []
    def finite(o, where):
        if isinstance(o, dict): [finite(v, where + "." + str(k)) for k, v in o.items()]
        elif isinstance(o, list): [finite(v, where + "[%d]" % i) for i, v in enumerate(o)]
        elif o is None and not where.endswith("interval_s"): bad.append(where + " is null (NaN/inf)")
        elif isinstance(o, float) and not math.isfinite(o): bad.append("%s = %r" % (where, o))
    for r in runs:
        res = r.get("results", {})
        t, mfu = res.get("iteration_time_s"), res.get("mfu")
        if not (isinstance(t, (int, float)) and math.isfinite(t) and t > 0): bad.append("iteration_time_s = %r" % t)
        if not (isinstance(mfu, (int, float)) and 0 < mfu <= 1): bad.append("mfu = %r" % mfu)
        # A job of a dtsim.jobs summary has no links of its own (the shared links are the file's): absent, not null.
        for k in ("results", "ranks", "stages", "links"):
            if k in r: finite(r[k], k)
        for rk in r.get("ranks", []):
            if isinstance(rk.get("peak_memory_bytes"), (int, float)) and rk["peak_memory_bytes"] < 0:
                bad.append("rank %s peak_memory_bytes = %r" % (rk.get("rank"), rk["peak_memory_bytes"]))
    for l in s.get("links", []):
        for k, v in l.items():
            if k.endswith("utilization") and isinstance(v, (int, float)) and v > 1 + 1e-9:
                bad.append("link %s %s = %r" % (l.get("name"), k, v))
    return bad


def run_case(c, args, keep=False):
    d = tempfile.mkdtemp(prefix="dtsim-fuzz-", dir=args.workdir)
    try:
        setup(c, d)
        before = sorted(os.listdir(d))
        argv = [args.dtsim] + c["cmd"].split() + [a.replace("@T@", d) for gr in c["groups"] for a in gr]
        lim = int(args.mem_gib * 2 ** 30)
        def pre():
            resource.setrlimit(resource.RLIMIT_AS, (lim, lim)); resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        p = subprocess.Popen(argv, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=pre,
                             start_new_session=True, env=dict(os.environ, TMPDIR=d))
        try:
            out, err = p.communicate(timeout=args.timeout); rc = p.returncode
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9); out, err = p.communicate(); rc = None
        err = err.decode("utf-8", "replace").replace(d, "$T"); out = out.decode("utf-8", "replace")
        first = err.splitlines()[0] if err.strip() else ""
        kind, why = None, ""
        if rc is None: kind, why = "slow", "over %gs" % args.timeout
        elif rc < 0: kind, why = "crash", "signal %d" % -rc
        elif rc == 3: kind = "internal"
        elif rc == 2:
            probs = []
            if "std::bad_alloc" in err: kind, why = "oom", "not refused up front"
            if len(err.splitlines()) != 1 or not err.endswith("\n"):
                probs.append("%d stderr lines" % len(err.splitlines()))
            if not err.startswith(PRE): probs.append("stderr lacks the prefix")
            if out: probs.append("stdout not empty")
            now = sorted(os.listdir(d))
            if c["keep"]:
                k = os.path.join(d, "keep")
                if os.listdir(k) != ["keep.txt"] or os.stat(os.path.join(k, "keep.txt")).st_mtime != 978307200:
                    probs.append("existing --out dir changed")
            if now != before: probs.append("left behind: " + ",".join(sorted(set(now) - set(before))))
            if probs: kind, why = "contract", "; ".join(probs)
        elif rc != 0: kind, why = "contract", "exit code %d" % rc
        else:
            sums = [os.path.join(r, "summary.json") for r, _, fs in os.walk(d) if "summary.json" in fs]
            if c["cmd"] == SIM and any(g[0] == "--out" for g in c["groups"]) and not sums:
                kind, why = "contract", "exit 0 but no summary.json"
            for s in sums:
                try: bad = check_summary(s)
                except (ValueError, KeyError, TypeError, AttributeError) as e: bad = ["summary.json: %s" % e]
                if bad: kind, why = "invariant", "; ".join(bad[:3]) + (" (+%d more)" % (len(bad) - 3)) * (len(bad) > 3)
        res = {"kind": kind, "rc": rc, "why": why, "first": first[:300], "err": err[-4000:], "out": out[-2000:]}
        if kind and keep: res["dir"], d = d, None
        return res
    finally:
        if d: shutil.rmtree(d, ignore_errors=True)


def write_repro(i, c, r, args):
    f = os.path.join(args.findings_dir, "%s-%04d-%s" % (args.seed, i, r["kind"]))
    shutil.rmtree(f, ignore_errors=True)
    os.makedirs(f)
    for n, t in c["files"].items():
        with open(os.path.join(f, n), "w") as fh: fh.write(t)
    prep = 'mkdir -p "$T/keep" && echo "previous results" >"$T/keep/keep.txt"\n' if c["keep"] else ""
    with open(os.path.join(f, "cmd.sh"), "w") as fh:
        fh.write('#!/bin/sh\n# %s %s\nT=$(cd "$(dirname "$0")" && pwd)\nrm -rf "$T/out" "$T/et" "$T/keep"\n%s'
                 'ulimit -v %d\nexec ${DTSIM:-dtsim} %s\n' % (r["kind"], r["why"], prep, int(args.mem_gib * 2 ** 20),
                                                              show(c)[6:]))
    os.chmod(os.path.join(f, "cmd.sh"), 0o755)
    with open(os.path.join(f, "finding.txt"), "w") as fh:
        fh.write("kind: %s\nrc: %s\nwhy: %s\nstderr:\n%s\nstdout:\n%s\n" % (r["kind"], r["rc"], r["why"], r["err"],
                                                                           r["out"]))
    shutil.rmtree(r.pop("dir", ""), ignore_errors=True)


def signature(r): return (r["kind"], r["rc"], re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", r["first"]))


def minimize(c, r, args):
    """Greedily drops flag groups while the finding keeps its signature (kind, exit code, first stderr line)."""
    sig, i = signature(r), 0
    while i < len(c["groups"]):
        t = dict(c, groups=c["groups"][:i] + c["groups"][i + 1:])
        if signature(run_case(t, args)) == sig: c = t
        else: i += 1
    return c


def make_seeds(args):
    """JSON documents (model, plan, cluster) from real summary.json files, and a Chakra export for replay."""
    d = tempfile.mkdtemp(prefix="dtsim-fuzz-seed-", dir=args.workdir)
    cmdl = [args.dtsim, SIM, "--model", "gpt3-1.3b"] + shlex.split(P8) + ["--out", d + "/s", "-q",
                                                                        "--export-chakra", d + "/et"]
    if subprocess.run(cmdl, capture_output=True, timeout=120).returncode == 0:
        with open(d + "/s/summary.json") as f: s = json.load(f)["config"]
        for k in ("model", "plan", "cluster"): SEEDS[k] = [s[k]]
    if os.path.isdir(d + "/et"): SEEDS["et"] = d + "/et"
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtsim", default=os.path.join(ROOT, "build/bin/dtsim"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=1500, help="default: about 2 minutes with --jobs 2")
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--mem-gib", type=float, default=4)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--findings-dir")
    ap.add_argument("--workdir", default=None, help="where the per-case temp dirs go (default: system temp)")
    ap.add_argument("--minimize", action="store_true")
    ap.add_argument("--verbose", action="store_true", help="print every case: exit code, command, first stderr line")
    args = ap.parse_args()
    args.dtsim = os.path.abspath(args.dtsim)
    seed_dir = make_seeds(args)
    try:
        gen, rng = Gen(args.dtsim, SEEDS), random.Random(args.seed)
        cases = [gen.case(rng) for _ in range(args.cases)]
        with cf.ThreadPoolExecutor(args.jobs) as ex:
            results = list(ex.map(lambda c: run_case(c, args, bool(args.findings_dir)), cases))
        found, seen = 0, {}
        for i, (c, r) in enumerate(zip(cases, results)):
            if args.verbose: print("case %d rc=%s :: %s :: %s" % (i, r["rc"], show(c), r["first"][:160]))
            if not r["kind"]: continue
            found += 1
            print("FINDING %s rc=%s [%s] :: %s :: %s" % (r["kind"], r["rc"], r["why"], show(c), r["first"]),
                  flush=True)
            seen.setdefault(signature(r), (c, r))
            if args.findings_dir: write_repro(i, c, r, args)
        if args.minimize:
            for sig, (c, r) in seen.items():
                print("MINIMAL %s rc=%s :: %s :: %s" % (r["kind"], r["rc"], show(minimize(c, r, args)), r["first"]))
        print("input grammar: %d distinct findings" % len(seen))
        print("input grammar: %d cases, %d findings" % (len(cases), found))
        return 1 if found else 0
    finally:
        shutil.rmtree(seed_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
