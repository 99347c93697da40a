"""Result classes of the dtsim module: attribute access to what the C++ library returns, the human summary as str(),
the output files, and pandas DataFrames (to_frame()) when pandas is installed.

Every result is a plain record over a dict of Python values (numbers, strings, lists, dicts, bytes), so results can
be pickled, compared and turned into JSON (to_dict()). pandas is imported only by the to_frame() methods.
"""
import json
import os


def _pandas():
    try:
        import pandas
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise ImportError("to_frame() needs pandas (Debian: apt-get install python3-pandas)") from e
    return pandas


class Record:
    """A read-only record: each key of the underlying dict is an attribute (r.iteration_time_s)."""

    _nested = {}  # key -> Record subclass (or list of it) for nested records

    def __init__(self, data):
        object.__setattr__(self, "_data", dict(data))
        for key, cls in self._nested.items():
            value = self._data.get(key)
            if isinstance(value, list):
                self._data[key] = [cls(v) if isinstance(v, dict) else v for v in value]
            elif isinstance(value, dict):
                self._data[key] = cls(value)

    def __getattr__(self, name):
        if name.startswith("__") or name == "_data":
            raise AttributeError(name)
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}") from None

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._data))

    def __eq__(self, other):
        return type(self) is type(other) and self._data == other._data

    def __getstate__(self):
        return self._data

    def __setstate__(self, state):
        object.__setattr__(self, "_data", state)

    def keys(self):
        """The field names."""
        return self._data.keys()

    def to_dict(self):
        """The record as plain dicts and lists (nested records included), e.g. for json.dumps (files excepted)."""

        def plain(v):
            if isinstance(v, Record):
                return v.to_dict()
            if isinstance(v, list):
                return [plain(x) for x in v]
            if isinstance(v, dict):
                return {k: plain(x) for k, x in v.items() if not isinstance(x, bytes)}
            return v

        return {k: plain(v) for k, v in self._data.items() if k != "files"}

    def __repr__(self):
        shown = []
        for k, v in self._data.items():
            if isinstance(v, (int, float, bool)) or (isinstance(v, str) and len(v) < 40 and "\n" not in v):
                shown.append(f"{k}={v!r}")
            if len(shown) == 6:
                break
        return f"{type(self).__name__}({', '.join(shown)})"


class Result(Record):
    """A call's result: str() is what the dtsim command prints; `files` (name -> bytes) what its --out writes."""

    def __str__(self):
        return self._data.get("text", repr(self))

    def write(self, directory):
        """Writes every file of `files` into `directory` (created if needed), all or nothing; returns their paths."""
        from . import _dtsim

        files = self._data.get("files") or {}
        _dtsim.write_files(os.fspath(directory), files)
        return [os.path.join(os.fspath(directory), name) for name in files]


class RankResult(Record):
    """One simulated rank: coordinates, compute / exposed communication / bubble time, peak memory, timeline."""


class LinkResult(Record):
    """One network link's traffic over the iteration."""


class SimulateResult(Result):
    """One simulated iteration (dtsim.simulate): iteration_time_s, samples_per_s, tokens_per_s, mfu, peak_bytes,
    oom, ranks (RankResult), links (LinkResult), text, files, paths (written with out=)."""

    _nested = {"ranks": RankResult, "links": LinkResult}

    def to_frame(self):
        """One row per simulated rank: global_rank, stage, data, tensor, compute_s, exposed_comm_s, bubble_s,
        bubble_fraction, peak_bytes, peak_time_s, oom_event."""
        pd = _pandas()
        rows = [{k: v for k, v in r.to_dict().items() if k != "memory_timeline"} for r in self.ranks]
        return pd.DataFrame(rows)

    def memory_frame(self):
        """The memory timelines: one row per change (global_rank, time_s, bytes)."""
        pd = _pandas()
        rows = [(r.global_rank, t, b) for r in self.ranks for t, b in r.memory_timeline]
        return pd.DataFrame(rows, columns=["global_rank", "time_s", "bytes"])

    def links_frame(self):
        """One row per network link: name, bandwidth_Bps, bytes, busy_s, peak_utilization."""
        return _pandas().DataFrame([link.to_dict() for link in self.links])


class PlanCandidate(Record):
    """A plan a planner proposed: plan (a plan dict, accepted by dtsim.simulate), description, predicted_s,
    predicted_peak_bytes, simulated_s, simulated_peak_bytes, fits."""


class PlanResult(Result):
    """A planner's search (dtsim.plan): counts, search_s, candidates (PlanCandidate), chosen (index, -1 if none)."""

    _nested = {"candidates": PlanCandidate}

    @property
    def best(self):
        """The chosen candidate (the fastest simulated one that fits memory), or None."""
        return self.candidates[self.chosen] if self.chosen >= 0 else None

    def to_frame(self):
        """One row per simulated candidate, in the planner's order, with a `chosen` column."""
        pd = _pandas()
        rows = []
        for i, c in enumerate(self.candidates):
            row = {k: v for k, v in c.to_dict().items() if k != "plan"}
            row.update(planner=self.planner, chosen=(i == self.chosen))
            rows.append(row)
        return pd.DataFrame(rows)


class BakeoffResult(Result):
    """Every planner on the same request (dtsim.bakeoff): planners (PlanResult, in planner order)."""

    _nested = {"planners": PlanResult}

    def to_frame(self):
        """One row per planner and simulated candidate (columns as PlanResult.to_frame)."""
        pd = _pandas()
        frames = [p.to_frame() for p in self.planners if p.candidates]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


class SweepResult(Result):
    """A sweep's expansion and run counts (dtsim.sweep); the rows are in out_dir/results.jsonl."""

    @property
    def results_path(self):
        return os.path.join(self.out_dir, "results.jsonl")

    def rows(self):
        """Every row of results.jsonl (dicts; schema in studies/sweep/sweep_results.hpp)."""
        if not os.path.exists(self.results_path):
            return []
        with open(self.results_path) as f:
            return [json.loads(line) for line in f if line.strip()]

    def to_frame(self):
        """results.jsonl as a DataFrame, nested fields flattened with dots (plan.tp, memory.peak_bytes, ...)."""
        pd = _pandas()
        return pd.json_normalize(self.rows())


class ParetoPoint(Record):
    """A scenario on a front: id, index, strategy, tokens_per_s, mfu, peak_memory_bytes, duplicates."""


class ParetoFront(Record):
    """The front of one model at one GPU count: model, gpus, clusters, counts, points (ParetoPoint)."""

    _nested = {"points": ParetoPoint}


class ParetoResult(Result):
    """The Pareto fronts of a sweep's results (dtsim.pareto): source, counts, fronts (ParetoFront)."""

    _nested = {"fronts": ParetoFront}

    def to_frame(self):
        """One row per front point: model, gpus, then the point's fields."""
        pd = _pandas()
        rows = []
        for f in self.fronts:
            for p in f.points:
                row = {"model": f.model, "gpus": f.gpus}
                row.update(p.to_dict())
                rows.append(row)
        return pd.DataFrame(rows)


class ValidationRow(Record):
    """One predicted measured row: plan degrees, measured_s, predicted_s, error, memory, failure, notes."""


class ValidationResult(Result):
    """Predictions scored against measured runs (dtsim.validate): rows, mape, max_abs_error, mean_error,
    spearman_min, memory scores, groups, mape_by_feature, results (ValidationRow)."""

    _nested = {"results": ValidationRow}

    def to_frame(self):
        """One row per measured row of the split."""
        return _pandas().DataFrame([r.to_dict() for r in self.results])

    def groups_frame(self):
        """One row per model group: rows, mape, max_abs_error, spearman, memory_rows, memory_mape."""
        return _pandas().DataFrame(self.groups)


class CalibrationResult(Result):
    """A compute calibration fitted to kernel traces (dtsim.calibrate_compute): calibration (a calibration dict,
    accepted by dtsim.simulate), gpu, samples, residuals, notes, host_issue_s (the traces' median host time per
    launch, a stack value: 0 when no trace measures it); files calibration.json and points.csv."""

    def to_frame(self):
        """points.csv: one row per fitted sample (operator, class, measured and predicted time, ...)."""
        import io

        return _pandas().read_csv(io.BytesIO(self.files["points.csv"]))


class ReplayTrace(Record):
    """One replayed trace: source, rank, world_size, measured_span_s, replayed_span_s, error_pct, edits,
    predicted_span_s, change_pct."""


class ReplayResult(Result):
    """A trace replay with optional what-if edits (dtsim.replay): traces (ReplayTrace)."""

    _nested = {"traces": ReplayTrace}

    def to_frame(self):
        """One row per replayed trace."""
        return _pandas().DataFrame([t.to_dict() for t in self.traces])


class Presets(Result):
    """The built-in presets (dtsim.presets): models, gpus, clusters (used as NAME:GPUS) and the table as text."""
