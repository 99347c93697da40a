"""Tests of the dtsim Python module (ctest python_api): every call against the dtsim command line on the same inputs
(the same library, so the same numbers), errors as exceptions with the CLI's message, repeated SimGrid runs in one
interpreter, to_frame() where pandas is installed.

Environment (set by ctest): DTSIM (the dtsim binary), DTSIM_SHARED (../shared), PYTHONPATH (build/python).
"""
import json
import os
import pickle
import re
import subprocess
from pathlib import Path

import pytest

import dtsim

REPO = Path(__file__).resolve().parents[2]
DTSIM = os.environ.get("DTSIM", str(REPO / "build" / "bin" / "dtsim"))
SHARED = Path(os.environ.get("DTSIM_SHARED", REPO.parent / "shared"))

SMALL_PLAN = {"tp": 2, "pp": 2, "micro_batch_size": 1, "global_batch_size": 16}


def cli(*args, check=True):
    """Runs the dtsim binary; returns the CompletedProcess (text)."""
    p = subprocess.run([DTSIM, *map(str, args)], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"dtsim {' '.join(map(str, args))} failed: {p.stderr}")
    return p


def cli_error(*args):
    """The one-line message the CLI prints for a user error (exit code 2), without "dtsim: error: "."""
    p = cli(*args, check=False)
    assert p.returncode == 2, p.stderr
    line = p.stderr.strip()
    assert line.startswith("dtsim: error: "), line
    return line[len("dtsim: error: "):]


# ---- presets and specs -------------------------------------------------------------------------------------------


def test_version_and_presets():
    assert cli("--version").stdout.split()[:2] == ["dtsim", dtsim.version()]
    p = dtsim.presets()
    assert "gpt3-175b" in p.models and "dgx-a100" in p.clusters and p.gpus
    assert str(p) == cli("presets").stdout


def test_model_spec_round_trips_through_simulate():
    m = dtsim.model_spec("gpt3-1.3b")
    assert m["num_layers"] == 24
    base = dtsim.simulate("gpt3-1.3b", "dgx-a100:8", SMALL_PLAN, options={"network": "analytic"})
    same = dtsim.simulate(m, dtsim.cluster_spec("dgx-a100:8"), SMALL_PLAN, options={"network": "analytic"})
    assert same.iteration_time_s == base.iteration_time_s
    m["seq_len"] = 2 * m["seq_len"]
    longer = dtsim.simulate(m, "dgx-a100:8", SMALL_PLAN, options={"network": "analytic"})
    assert longer.iteration_time_s > 1.8 * base.iteration_time_s


# ---- simulate ----------------------------------------------------------------------------------------------------


def test_simulate_matches_the_cli(tmp_path):
    cli("simulate", "--model", "gpt3-1.3b", "--cluster", "dgx-a100:8", "--tp", 2, "--pp", 2, "--mbs", 1, "--gbs", 16,
        "--out", tmp_path / "cli", "--quiet")
    summary = json.loads((tmp_path / "cli" / "summary.json").read_text())
    r = dtsim.simulate("gpt3-1.3b", "dgx-a100:8", SMALL_PLAN, out=tmp_path / "py")
    assert r.engine == "simgrid-flow"
    assert r.iteration_time_s == pytest.approx(summary["results"]["iteration_time_s"], rel=1e-12)
    assert (tmp_path / "py" / "summary.json").read_bytes() == (tmp_path / "cli" / "summary.json").read_bytes()
    assert sorted(Path(p).name for p in r.paths) == ["summary.json", "trace.json"]
    assert {x.stage for x in r.ranks} == {0, 1}  # folded: one simulated rank per symmetry class
    for rank in r.ranks:
        assert 0 < rank.compute_s <= r.iteration_time_s
        assert rank.peak_bytes > 0 and rank.memory_timeline
    assert r.tokens_per_s == pytest.approx(r.samples_per_s * dtsim.model_spec("gpt3-1.3b")["seq_len"])
    assert "iteration" in str(r)


def test_simgrid_runs_repeat_in_one_process():
    # SimGrid's engine exists once per process: the module runs each flow simulation in a child.
    a = dtsim.simulate("gpt3-1.3b", "dgx-a100:8", SMALL_PLAN)
    b = dtsim.simulate("gpt3-1.3b", "dgx-a100:8", SMALL_PLAN)
    c = dtsim.simulate("gpt3-1.3b", "dgx-a100:8", dict(SMALL_PLAN, tp=4, pp=1))
    assert a == b
    assert c.iteration_time_s != a.iteration_time_s


def test_plan_dict_fills_dp_as_the_cli_does():
    r = dtsim.simulate("gpt3-1.3b", "dgx-a100:16", SMALL_PLAN, options={"network": "analytic"})
    assert "tp 2 pp 2 dp 4" in str(r) and max(x.global_rank for x in r.ranks) < 16
    with pytest.raises(dtsim.ConfigError, match="does not divide"):
        dtsim.simulate("gpt3-1.3b", "dgx-a100:8", dict(SMALL_PLAN, tp=3))


def test_spread_rings_option():
    # ZeRO-3 over two nodes of 8: its all-gathers and reduce-scatters cross the nodes through all 8 NICs, or
    # through one with spread_rings off (the CLI's --single-nic-rings).
    plan = dict(SMALL_PLAN, tp=1, pp=1, zero_stage=3)
    opts = {"network": "analytic"}
    spread = dtsim.simulate("gpt3-1.3b", "dgx-a100:16", plan, options=opts)
    one_nic = dtsim.simulate("gpt3-1.3b", "dgx-a100:16", plan, options=dict(opts, spread_rings=False))
    assert spread.iteration_time_s < one_nic.iteration_time_s
    with pytest.raises(dtsim.ConfigError, match="spread_rings"):
        dtsim.simulate("gpt3-1.3b", "dgx-a100:16", plan, options=dict(opts, spread_rings="no"))


def test_plan_file_and_calibration_file(tmp_path):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(dict(SMALL_PLAN, dp=2)))
    cal = dtsim.calibration_spec("dgx-a100:8")
    cal_file = tmp_path / "cal.json"
    cal_file.write_text(json.dumps(cal))
    opts = {"network": "analytic"}
    a = dtsim.simulate("gpt3-1.3b", "dgx-a100:8", plan_file, calibration=cal_file, options=opts)
    b = dtsim.simulate("gpt3-1.3b", "dgx-a100:8", SMALL_PLAN, calibration=cal, options=opts)
    assert a.iteration_time_s == b.iteration_time_s
    cli("simulate", "--model", "gpt3-1.3b", "--cluster", "dgx-a100:8", "--plan", plan_file, "--calibration", cal_file,
        "--network", "analytic", "--out", tmp_path / "o", "--no-trace", "--quiet")
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert a.iteration_time_s == pytest.approx(summary["results"]["iteration_time_s"], rel=1e-12)


def test_result_is_picklable_and_plain():
    r = dtsim.simulate("gpt3-1.3b", "dgx-a100:8", SMALL_PLAN, options={"network": "analytic", "trace": True})
    assert "trace.json" in r.files and isinstance(r.files["trace.json"], bytes)
    assert pickle.loads(pickle.dumps(r)) == r
    d = r.to_dict()
    assert "files" not in d and json.dumps(d)
    with pytest.raises(AttributeError):
        r.no_such_field
    with pytest.raises(AttributeError):
        r.iteration_time_s = 1.0


# ---- errors ------------------------------------------------------------------------------------------------------


def test_errors_carry_the_cli_message(tmp_path):
    with pytest.raises(dtsim.ConfigError) as e:
        dtsim.simulate("no-such-model", "dgx-a100:8", SMALL_PLAN)
    assert str(e.value) == cli_error("simulate", "--model", "no-such-model", "--cluster", "dgx-a100:8", "--gbs", 16)
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    with pytest.raises(dtsim.FormatError) as e:
        dtsim.simulate(bad, "dgx-a100:8", SMALL_PLAN)
    assert str(e.value) == cli_error("simulate", "--model", bad, "--cluster", "dgx-a100:8", "--gbs", 16)
    assert isinstance(e.value, dtsim.Error) and isinstance(e.value, ValueError)


def test_bad_options_and_plans_are_config_errors():
    with pytest.raises(dtsim.ConfigError, match="unknown option 'netwrok'"):
        dtsim.simulate("gpt3-1.3b", "dgx-a100:8", SMALL_PLAN, options={"netwrok": "analytic"})
    with pytest.raises(dtsim.ConfigError, match="--network 'magic' is not known"):
        dtsim.simulate("gpt3-1.3b", "dgx-a100:8", SMALL_PLAN, options={"network": "magic"})
    with pytest.raises(dtsim.ConfigError, match="tpp"):
        dtsim.simulate("gpt3-1.3b", "dgx-a100:8", dict(SMALL_PLAN, tpp=2))
    with pytest.raises(dtsim.ConfigError, match="model"):
        dtsim.simulate(42, "dgx-a100:8", SMALL_PLAN)
    with pytest.raises(dtsim.ConfigError, match="plan is required"):
        dtsim.simulate("gpt3-1.3b", "dgx-a100:8", None)


def test_memory_guard_refuses_before_running():
    with pytest.raises(dtsim.ConfigError, match="memory"):
        dtsim.simulate("gpt3-1.3b", "dgx-a100:8", SMALL_PLAN, options={"max_memory_bytes": 1e6})


@pytest.mark.parametrize("options, message", [
    (["network"], "options: expected a dict"),
    ("analytic", "options: expected a dict"),
    ({"max_memory_bytes": 0}, "max_memory_bytes' must be a positive number"),
    ({"max_memory_bytes": -1}, "max_memory_bytes' must be a positive number"),
    ({"max_memory_bytes": float("nan")}, "max_memory_bytes' must be a positive number"),
    ({"max_memory_bytes": float("inf")}, "max_memory_bytes' must be a positive number"),
    ({"max_memory_bytes": "1GB"}, "option 'max_memory_bytes' has the wrong type"),
    ({"channels": 2.5}, "option 'channels' has the wrong type"),
    ({"channels": 0}, "--channels must be between 1 and 64"),
    ({"network": 3}, "option 'network' has the wrong type"),
])
def test_bad_options_raise_config_error(options, message):
    """Issue Guard: every wrong option type or value is a ConfigError with the CLI's message, never a builtin
    exception, and the memory guard cannot be switched off by 0, -1 or NaN (None is "no limit")."""
    if isinstance(options, dict) and "network" not in options:
        options = dict(options, network="analytic")  # never SimGrid: no child process for an error
    with pytest.raises(dtsim.ConfigError, match=re.escape(message)):
        dtsim.simulate("gpt3-1.3b", "dgx-a100:8", SMALL_PLAN, options=options)


@pytest.mark.parametrize("plan, message", [
    (dict(SMALL_PLAN, dp_bucket_bytes=float("nan")), "plan: not representable as JSON \\(a value is NaN or infinite\\)"),
    (dict(SMALL_PLAN, tp=float("inf")), "plan: not representable as JSON"),
    ({"cp": 0, "micro_batch_size": 1, "global_batch_size": 8}, "plan: cp must be positive, got 0"),
    (dict(SMALL_PLAN, fsdp_prefetch=2), "fsdp_prefetch \\(--fsdp-prefetch\\) has no effect unless zero stage is 3"),
    (dict(SMALL_PLAN, megatron_fsdp=True), "megatron-fsdp needs zero stage 2 \\(optim_grads\\) or 3"),
    (dict(SMALL_PLAN, routing="skew:1,cf:1e-9"), "capacity factor '1e-9' is outside its range"),
    (dict(SMALL_PLAN, recompute="selective", recompute_num_layers=2), "num layers .* needs recompute full"),
])
def test_bad_plan_values_raise_config_error(plan, message):
    with pytest.raises(dtsim.ConfigError, match=message):
        dtsim.simulate("gpt3-1.3b", "dgx-a100:8", plan, options={"network": "analytic"})


# ---- planners, sweeps, validation --------------------------------------------------------------------------------


def test_recompute_num_layers_matches_the_cli():
    # Megatron's block method from a plan dict: the first 3 of each stage's 12 layers recomputed (the CLI's flag).
    plan = dict(SMALL_PLAN, recompute="full", recompute_num_layers=3)
    r = dtsim.simulate("gpt3-1.3b", "dgx-a100:8", plan, options={"network": "analytic"})
    out = cli("simulate", "--model", "gpt3-1.3b", "--cluster", "dgx-a100:8", "--tp", "2", "--pp", "2", "--mbs", "1",
              "--gbs", "16", "--recompute-num-layers", "3", "--network", "analytic").stdout
    assert f"{r.iteration_time_s:.3f} s" in out
    none = dtsim.simulate("gpt3-1.3b", "dgx-a100:8", SMALL_PLAN, options={"network": "analytic"})
    full = dtsim.simulate("gpt3-1.3b", "dgx-a100:8", dict(SMALL_PLAN, recompute="full"),
                          options={"network": "analytic"})
    assert none.iteration_time_s < r.iteration_time_s < full.iteration_time_s


def test_plan_then_simulate_the_chosen_plan():
    r = dtsim.plan("gpt3-1.3b", "dgx-a100:8", 32, planner="grid", top=2, network="analytic")
    assert r.planner == "grid" and r.considered >= r.feasible > 0 and len(r.candidates) == 2
    best = r.best
    assert best is not None and best.fits
    again = dtsim.simulate("gpt3-1.3b", "dgx-a100:8", best.plan, options={"network": "analytic"})
    assert again.iteration_time_s == pytest.approx(best.simulated_s, rel=1e-9)
    assert min(c.simulated_s for c in r.candidates if c.fits) == best.simulated_s
    with pytest.raises(dtsim.ConfigError, match="planner"):
        dtsim.plan("gpt3-1.3b", "dgx-a100:8", 32, planner="oracle")
    with pytest.raises(dtsim.ConfigError, match="global_batch_size"):
        dtsim.plan("gpt3-1.3b", "dgx-a100:8", 0)


def test_bakeoff_runs_every_planner():
    r = dtsim.bakeoff("gpt3-1.3b", "dgx-a100:8", 32, top=1, network="analytic")
    names = [p.planner for p in r.planners]
    assert len(names) >= 5 and "grid" in names and "uniap" in names
    assert json.loads(r.files["bakeoff.json"])  # the same file `dtsim bakeoff --out` writes


def test_sweep_and_pareto(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({
        "schema_version": 1, "name": "py", "models": ["gpt3-1.3b"], "gpus": [8], "cluster_preset": "dgx-a100",
        "gbs": [32], "tp": [1, 2, 4], "pp": [1, 2], "dp": ["auto"], "mbs": [1], "schedule": ["1f1b"],
        "recompute": ["none"], "network": ["analytic"]}))
    dry = dtsim.sweep(spec, out_dir=tmp_path / "dry", dry_run=True)
    assert dry.scenarios == 6 and dry.simulated == 0 and dry.rows() == []
    r = dtsim.sweep(spec, out_dir=tmp_path / "out", jobs=2)
    assert r.simulated == 6 and r.rows_total == 6 and r.rows_ok == 6
    rows = r.rows()
    assert len(rows) == 6
    again = dtsim.sweep(spec, out_dir=tmp_path / "out")
    assert again.simulated == 0 and again.resumed == 6
    p = dtsim.pareto(tmp_path / "out")
    assert p.counts["total"] == 6 and len(p.fronts) == 1 and p.fronts[0].points
    best = max(rows, key=lambda x: x.get("tokens_per_s", 0) if x["status"] == "ok" else 0)
    assert max(pt.tokens_per_s for pt in p.fronts[0].points) == pytest.approx(best["tokens_per_s"])


def test_validate_matches_the_cli(tmp_path):
    data = SHARED / "measurements" / "vtrain_ground_truth_single.csv"
    if not data.exists():
        pytest.skip(f"{data} not found")
    r = dtsim.validate(data)
    cli("validate", "published", "--data", data, "--out", tmp_path)
    want = json.loads((tmp_path / "validation.json").read_text())
    assert r.rows == len(r.results) > 10
    assert r.files["validation.json"] == (tmp_path / "validation.json").read_bytes()
    assert r.mape == pytest.approx(want["summary"]["mape"] if "summary" in want else want["mape"], rel=1e-9)
    with pytest.raises(dtsim.ConfigError):
        dtsim.validate(data, split="sideways")
    assert r.extrapolation is None


def test_validate_fit_max_gpus_matches_cli(tmp_path):
    data = SHARED / "measurements" / "torchtitan_h100.json"
    if not data.exists():
        pytest.skip(f"{data} not found")
    r = dtsim.validate(data, fit_max_gpus=8, max_evals=10)
    cli("validate", "published", "--data", data, "--fit-max-gpus", "8", "--max-evals", "10", "--out", tmp_path)
    want = json.loads((tmp_path / "validation.json").read_text())["extrapolation"]
    assert r.extrapolation["scored_rows"] == want["scored_rows"] > 0
    assert r.extrapolation["mape"] * 100 == pytest.approx(want["mape_pct"], rel=1e-9)
    assert set(r.extrapolation["calibrations"]) == set(want["calibrations"])
    with pytest.raises(dtsim.ConfigError):
        dtsim.validate(data, fit_max_gpus=-1)



def test_calibrate_runs_matches_the_cli(tmp_path):
    data = SHARED / "measurements" / "simumax_b200.json"
    if not data.exists():
        pytest.skip(f"{data} not found")
    r = dtsim.calibrate_runs(data, fit_runs=6, max_evals=20)
    cli("calibrate", "runs", "--data", data, "--fit-runs", "6", "--max-evals", "20", "--out", tmp_path)
    assert r["report"] == json.loads((tmp_path / "fit_report.json").read_text())
    assert r["calibration"] == json.loads((tmp_path / "calibration.json").read_text())
    assert r["runs"] == 6 and r["held_out"][0]["runs"] == 37
    kept = {v["field"]: v for v in r["report"]["values"] if not v["fitted"]}
    assert kept["network.inter_bandwidth_efficiency"]["reason"].startswith("not identified")
    assert "host_issue_s" not in r["calibration"]["compute"] and r["stack"]["fitted_on"] == ["simumax_b200.json"]
    # The two files drive simulate: a single-node run's interval comes from the fit.
    dtsim.write_files(tmp_path / "w", r["files"])
    plan = dict(SMALL_PLAN, stack=str(tmp_path / "w" / "stack.json"))
    dtsim.simulate("gpt3-1.3b", "dgx-b200:8", plan, calibration=tmp_path / "w" / "calibration.json",
                   options={"network": "analytic"}, out=tmp_path / "sim")
    summary = json.loads((tmp_path / "sim" / "summary.json").read_text())
    assert "fit to measured runs" in summary["results"]["iteration_time_interval_s"]["source"]
    with pytest.raises(dtsim.ConfigError):
        dtsim.calibrate_runs(data, noise=2)
    # plan takes the fitted pair too: its candidates name the stack they were costed with.
    p = dtsim.plan("gpt3-1.3b", "dgx-b200:8", 64, top=1, network="analytic",
                   calibration=tmp_path / "w" / "calibration.json", stack=tmp_path / "w" / "stack.json")
    assert p.candidates[0].plan["stack"] == str(tmp_path / "w" / "stack.json")


def test_plan_stack_changes_the_costs():
    a = dtsim.plan("gpt3-1.3b", "dgx-a100:8", 32, top=1, network="analytic")
    b = dtsim.plan("gpt3-1.3b", "dgx-a100:8", 32, top=1, network="analytic", stack="megatron-deepspeed")
    assert b.candidates[0].plan["stack"] == "megatron-deepspeed"
    assert a.candidates[0].simulated_s != b.candidates[0].simulated_s


# ---- pandas ------------------------------------------------------------------------------------------------------


def test_to_frame():
    pd = pytest.importorskip("pandas")
    r = dtsim.simulate("gpt3-1.3b", "dgx-a100:8", SMALL_PLAN, options={"network": "analytic"})
    df = r.to_frame()
    assert isinstance(df, pd.DataFrame) and len(df) == len(r.ranks)
    assert df["compute_s"].max() == pytest.approx(max(x.compute_s for x in r.ranks))
    mem = r.memory_frame()
    assert len(mem) == sum(len(x.memory_timeline) for x in r.ranks)
    assert mem.groupby("global_rank")["bytes"].max().max() == pytest.approx(r.peak_bytes)
    plan = dtsim.plan("gpt3-1.3b", "dgx-a100:8", 32, top=2, network="analytic").to_frame()
    assert len(plan) == 2 and plan["chosen"].sum() == 1
    p = dtsim.pareto(REPO / "tests" / "data" / "sweep" / "sweep_small.jsonl").to_frame()
    assert {"model", "gpus", "tokens_per_s", "peak_memory_bytes"} <= set(p.columns) and len(p) > 0


def test_help_is_useful():
    doc = dtsim.simulate.__doc__
    for word in ("model", "cluster", "plan", "calibration", "options", "ConfigError", "to_frame"):
        assert word in doc
    assert (Path(dtsim.__file__).parent / "__init__.pyi").exists()
    assert (Path(dtsim.__file__).parent / "py.typed").exists()


def test_chakra_export_round_trip(tmp_path):
    r = dtsim.simulate("gpt3-1.3b", "dgx-a100:8", SMALL_PLAN, options={"network": "analytic", "export_chakra": True})
    assert set(r.chakra_files) == {"dtsim.comm_group.json"} | {f"dtsim.{k}.et" for k in range(8)}
    assert not any(name.startswith("chakra/") for name in r.files)
    paths = dtsim.write_files(tmp_path / "et", r.chakra_files)
    assert len(paths) == 9
    rep = dtsim.replay(tmp_path / "et")
    longest = max(t.replayed_span_s for t in rep.traces)
    assert longest == pytest.approx(r.iteration_time_s, rel=0.01)
    slow = dtsim.replay(tmp_path / "et", collective_bw_GBps=1.0)
    assert max(t.predicted_span_s for t in slow.traces) > longest


def test_calibrate_device_model_scales_the_h100_by_board_power():
    r = dtsim.calibrate_device_model("b200")
    eff = r["calibration"]["compute"]["gemm_efficiency_max"]
    h100 = dtsim.calibration_spec("dgx-h100:8")["compute"]["gemm_efficiency_max"]
    assert abs(eff - h100 * 989e12 * (1000 / 700) / 2250e12) < 1e-9
    assert "calibration.json" in r["files"]
    with pytest.raises(dtsim.ConfigError, match="board_power_w"):
        dtsim.calibrate_device_model("gh200")
