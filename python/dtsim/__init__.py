"""dtsim: discrete-event simulator and what-if analyzer for distributed deep-learning training, from Python.

The same library as the ``dtsim`` command line (one call per subcommand), returning result objects instead of
printing::

    import dtsim
    r = dtsim.simulate(model="gpt3-175b", cluster="dgx-a100:1024",
                       plan={"tp": 8, "pp": 8, "micro_batch_size": 1, "global_batch_size": 1536})
    print(r.iteration_time_s, r.mfu)   # seconds, fraction of peak
    print(r)                           # the summary `dtsim simulate` prints
    df = r.to_frame()                  # per-rank breakdown (pandas)

Inputs are named as on the command line: a preset (``dtsim.presets()``), a JSON file path, or (for simulate) a dict
with the JSON file's fields (``dtsim.model_spec("gpt3-175b")`` returns a preset's dict to edit). Errors in the input
raise :class:`dtsim.ConfigError` or :class:`dtsim.FormatError` (both :class:`dtsim.Error`) with the one-line
message the CLI prints. Results have ``to_frame()`` when pandas is installed; pandas is not required otherwise.

Calls that run the flow network on SimGrid (whose engine exists once per process) run in a forked child process, so
every call may be repeated in one interpreter; plan, bakeoff and sweep fork their own workers.
"""
import os
import pickle

from . import _dtsim
from ._results import (BakeoffResult, CalibrationResult, ParetoResult, PlanResult, Presets, ReplayResult,
                       SimulateResult, SweepResult, ValidationResult)
from .errors import ConfigError, Error, FormatError, InternalError, SimulationCrashed

__all__ = [
    "version", "simgrid_version", "presets", "model_spec", "cluster_spec", "calibration_spec", "simulate", "plan",
    "bakeoff", "sweep", "pareto", "validate", "calibrate_compute", "calibrate_device_model", "calibrate_runs", "replay", "write_files", "Error", "ConfigError", "FormatError",
    "InternalError", "SimulationCrashed", "SimulateResult", "PlanResult", "BakeoffResult", "SweepResult",
    "ParetoResult", "ValidationResult", "CalibrationResult", "ReplayResult", "Presets"
]

__version__ = _dtsim.version()


def version():
    """dtsim's version ("0.1.0")."""
    return _dtsim.version()


def simgrid_version():
    """The SimGrid version dtsim was built with ("3.32.0")."""
    return _dtsim.simgrid_version()


def presets():
    """The built-in presets: ``.models``, ``.gpus`` and ``.clusters`` (names), and the table `dtsim presets` prints
    as ``str()``."""
    return Presets(_dtsim.presets())


def model_spec(model):
    """A model preset or model JSON file as a dict of the model JSON format, to edit and pass to simulate()."""
    return _dtsim.model_spec(model)


def cluster_spec(cluster):
    """A cluster preset (``"dgx-h100:64"``) or cluster JSON file as a dict of the cluster JSON format."""
    return _dtsim.cluster_spec(cluster)


def calibration_spec(cluster, calibration=None):
    """The calibration a simulation of `cluster` uses: the built-in one of its GPU (calibration=None) or the given
    file or dict, validated, as a dict of the calibration JSON format."""
    return _dtsim.calibration_spec(calibration, cluster)


def _isolated(fn, *args):
    """Runs fn(*args) in a forked child and returns its (picklable) result, re-raising its exception here."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, send (ok, value), leave without running the parent's exit handlers
        code = 0
        try:
            os.close(read_fd)
            try:
                payload = (True, fn(*args))
            except BaseException as e:  # noqa: B902 - every failure goes back to the parent
                payload = (False, e)
            try:
                data = pickle.dumps(payload)
            except Exception as e:  # an unpicklable exception: keep its type name and message
                data = pickle.dumps((False, RuntimeError(f"{type(e).__name__}: {e}")))
            with os.fdopen(write_fd, "wb") as f:
                f.write(data)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        how = (f"was killed by signal {os.WTERMSIG(status)}"
               if os.WIFSIGNALED(status) else f"exited with code {os.WEXITSTATUS(status)}")
        raise SimulationCrashed(f"the simulation process {how} without a result")
    ok, value = pickle.loads(data)
    if not ok:
        raise value
    return value


def simulate(model, cluster, plan, calibration=None, options=None, out=None):
    """Simulates one training iteration and returns a :class:`SimulateResult`.

    model        a model preset name ("gpt3-175b"), a model JSON file, or a dict (see model_spec()).
    cluster      a cluster preset NAME:GPUS[:fabric...] ("dgx-a100:64", "dgx-a100:1024:fat-tree:16:4"), a cluster
                 JSON file, or a dict (see cluster_spec()).
    plan         a plan JSON file, or a dict of its fields: tp, pp, dp (default: what fills the cluster), cp, ep,
                 micro_batch_size, global_batch_size (required), schedule ("1f1b", "gpipe", "interleaved",
                 "zb-h1", ...), virtual_stages, recompute ("none", "selective", "full"), zero_stage,
                 sequence_parallel, precision ("bf16", "fp8", ...), ...; or a planner's candidate's ``.plan``.
    calibration  None (the built-in calibration of the cluster's GPU), a calibration JSON file, or a dict.
    options      a dict of simulation options, as the CLI's flags: network ("flow" | "analytic"), engine ("auto" |
                 "simgrid" | "maxmin"), collectives ("flow" | "steps"), fold ("auto" | "none"),
                 collective_algorithm, channels, interference, trace (render trace.json, default False unless
                 out is given), trace_links, trace_ranks, perfetto, max_memory_bytes (None: no limit),
                 export_chakra (also render the run as Chakra .et files, one per rank, and ASTRA-sim's
                 comm-group JSON: ``chakra_files``).
    out          a directory: write summary.json (and trace.json unless options["trace"] is False) there, as
                 `dtsim simulate --out` does; the result's ``paths`` lists them.

    The result: iteration_time_s, samples_per_s, tokens_per_s, model_tflops_per_gpu, hardware_tflops_per_gpu, mfu,
    max_bubble_fraction, peak_bytes, oom, engine, tasks, ranks (per rank: compute_s, exposed_comm_s, bubble_s,
    peak_bytes, memory_timeline, ...), links, text (str(result)), files, chakra_files (name -> bytes, with
    export_chakra; dtsim.write_files writes them); to_frame() (per rank), memory_frame(),
    links_frame(). Raises ConfigError / FormatError for bad input, and ConfigError before it starts for a run
    whose estimated memory is above max_memory_bytes (default 90% of this machine's memory).
    """
    if options is not None and not isinstance(options, dict):
        raise ConfigError(f"simulate: options: expected a dict of option names to values, not {type(options).__name__}")
    opts = dict(options or {})
    if out is not None:
        opts.setdefault("trace", True)
    network = opts.get("network", "flow")
    if network == "analytic" or opts.get("engine") == "maxmin":
        data = _dtsim.simulate(model, cluster, plan, calibration, opts)
    else:  # SimGrid may run: once per process, so in a child
        data = _isolated(_dtsim.simulate, model, cluster, plan, calibration, opts)
    paths = []
    if out is not None:
        _dtsim.write_files(os.fspath(out), data["files"])
        paths = [os.path.join(os.fspath(out), name) for name in data["files"]]
    data["paths"] = paths
    return SimulateResult(data)


def write_files(directory, files):
    """Writes `files` (name -> bytes or str, e.g. a result's ``files`` or ``chakra_files``) into `directory`,
    created if needed, all or nothing; returns their paths."""
    _dtsim.write_files(os.fspath(directory), files)
    return [os.path.join(os.fspath(directory), name) for name in files]


def _plan_request(model, cluster, global_batch_size, **kwargs):
    req = {"model": model, "cluster": cluster, "global_batch_size": global_batch_size}
    req.update({k: v for k, v in kwargs.items() if v is not None})
    return req


def plan(model, cluster, global_batch_size, planner="grid", top=5, calibration=None, network="flow",
         memory_limit_bytes=None, tensor_parallel=None, precision=None, seq_len=None, stack=None):
    """Searches a plan with one planner and simulates its best `top` candidates (each in its own process); returns
    a :class:`PlanResult` whose ``best`` is the fastest candidate that fits memory (its ``.plan`` is a plan dict
    for simulate()).

    planner: "grid" | "pipedream" | "dapple" | "rannc" | "rannc-paper" | "rannc-layers" | "uniap" | "uniap-k1" |
    "luo". model and cluster: preset
    names or JSON file paths. network: "flow" | "analytic" for the simulations. memory_limit_bytes: default the
    device's. tensor_parallel: GPUs of one node acting as one device (pipedream, dapple). precision: GEMM precision
    of every candidate ("bf16", "fp8", ...). seq_len: overrides the model's sequence length. stack: the software stack
    of every candidate (a name, or a profile file such as calibrate_runs()' stack.json; default "megatron-core").
    """
    req = _plan_request(model, cluster, global_batch_size, planner=planner, top=top, calibration=calibration,
                        network=network, memory_limit_bytes=memory_limit_bytes, tensor_parallel=tensor_parallel,
                        precision=precision, seq_len=seq_len,
                        stack=os.fspath(stack) if stack is not None else None)
    return PlanResult(_dtsim.plan(req))


def bakeoff(model, cluster, global_batch_size, top=5, calibration=None, network="flow", memory_limit_bytes=None,
            tensor_parallel=None, precision=None, seq_len=None, stack=None):
    """Every planner on the same model, cluster and batch, each one's best `top` candidates simulated in the same
    simulator; returns a :class:`BakeoffResult` (``planners``: one PlanResult each; to_frame(): every candidate).
    Arguments as plan()."""
    req = _plan_request(model, cluster, global_batch_size, top=top, calibration=calibration, network=network,
                        memory_limit_bytes=memory_limit_bytes, tensor_parallel=tensor_parallel,
                        precision=precision, seq_len=seq_len, stack=os.fspath(stack) if stack is not None else None)
    return BakeoffResult(_dtsim.bakeoff(req))


def sweep(spec, out_dir="sweep-out", jobs=1, prefilter=True, timeout_s=0.0, dry_run=False, verbose=False):
    """Runs a sweep spec (a JSON file: models x clusters x strategy knobs, planners; see examples/sweeps/) with
    `jobs` worker processes, writing results.jsonl, results.csv and sweep.json into `out_dir` as it goes (a rerun
    resumes). Returns a :class:`SweepResult` (expansion and run counts; to_frame() reads results.jsonl).
    verbose: stream the progress text to stdout. dry_run: expand and filter only."""
    return SweepResult(_dtsim.sweep(spec, out_dir, jobs, prefilter, float(timeout_s), dry_run, verbose))


def pareto(results):
    """The Pareto fronts (throughput against peak memory, per model and GPU count) of a sweep's results.jsonl or
    output directory; returns a :class:`ParetoResult` (to_frame(): one row per front point)."""
    return ParetoResult(_dtsim.pareto(results))


def validate(data, calibration=None, split="all", network="analytic", fit_max_gpus=0, max_evals=300):
    """Predicts measured runs and scores the predictions (`dtsim validate published`): `data` is one file or a list
    (vTrain CSV, CSV with named columns, JSON rows, measurements documents such as
    ../shared/measurements/*/measurements.json). split: "all" | "train" | "test". fit_max_gpus > 0: scale
    extrapolation (`--fit-max-gpus`): each GPU's calibration refit (max_evals evaluations) on the rows with at most that
    many GPUs, the rows with more scored with it (result["extrapolation"]). Returns a :class:`ValidationResult` (mape,
    max_abs_error, spearman_min, groups, results; to_frame(): one row per run)."""
    return ValidationResult(_dtsim.validate(data, calibration, split, network, fit_max_gpus, max_evals))


def calibrate_compute(traces=None, gemm_csvs=None, gpu=None, base=None):
    """Fits the compute fields of a calibration (launch overhead, memory-bandwidth and GEMM efficiency) to the
    kernel times of PyTorch-profiler traces recorded with shapes and/or GEMM sweep CSVs; returns a
    :class:`CalibrationResult` (calibration: a dict for simulate(); to_frame(): the fitted samples)."""
    return CalibrationResult(_dtsim.calibrate_compute(traces, gemm_csvs, gpu, base))


def calibrate_device_model(gpu, reference=None, base=None):
    """The calibration of a GPU nothing was measured on (preset name or GPU JSON file with board_power_w), derived
    from a measured GPU of the same process generation (reference, default "h100-sxm5-80gb"; base: its calibration
    file, default the built-in one) by board power: sustained tensor-core throughput is power-limited. Returns a dict:
    calibration (for simulate()), text, files ({"calibration.json": ...} for write_files())."""
    return _dtsim.calibrate_device_model(gpu, reference, base)


def calibrate_runs(data, **options):
    """Fits what a few measured runs of your cluster can identify (`dtsim calibrate runs`): `data` is one file or a
    list of measured runs (JSON rows with model, cluster, plan, measured_s; or any published-data format). Options:
    calibration (base file), stack (base stack name or profile file), fit_max_gpus, fit_runs (fit on these, predict
    the rest), max_evals, noise. Returns a dict: calibration and stack (the two files' contents, for simulate() after
    write_files()), report (fitted values with 90% ranges, kept values with the reason, runs with leave-one-out
    errors, intervals), runs, fitted_values, rms_before, rms_after, held_out, text, files."""
    return _dtsim.calibrate_runs(data, options)


def replay(trace, **edits):
    """Replays a Kineto trace (.json, .json.gz, or an archive of one trace per rank), or Chakra execution traces (a
    .et file or a directory of them, one per rank, replayed together), as a dependency graph, with
    optional what-if edits: scale_kernels (["REGEX=FACTOR", ...]), collective_bw_scale, collective_bw_GBps,
    collective_group, collective_alpha_us, collective_time_scale, cpu_scale, runtime_scale, launch_latency_us,
    keep_unexplained_gaps, member (one archive member), chrome_trace (render replay_trace.json into files).
    Returns a :class:`ReplayResult` (traces: measured and replayed spans; to_frame())."""
    return ReplayResult(_dtsim.replay(trace, edits))
