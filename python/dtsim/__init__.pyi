"""Type stubs of the dtsim module (python/dtsim/__init__.py); the docstrings there say what each call does."""
import os
from typing import Any, Dict, KeysView, List, Optional, Sequence, Tuple, Union

from .errors import ConfigError as ConfigError
from .errors import Error as Error
from .errors import FormatError as FormatError
from .errors import InternalError as InternalError
from .errors import SimulationCrashed as SimulationCrashed

PathLike = Union[str, os.PathLike]
Spec = Union[str, os.PathLike, Dict[str, Any]]
DataFrame = Any  # pandas.DataFrame (pandas is optional)

__version__: str

class Record:
    def keys(self) -> KeysView[str]: ...
    def to_dict(self) -> Dict[str, Any]: ...
    def __getattr__(self, name: str) -> Any: ...

class Result(Record):
    text: str
    files: Dict[str, bytes]
    def write(self, directory: PathLike) -> List[str]: ...

class RankResult(Record):
    global_rank: int
    stage: int
    data: int
    tensor: int
    compute_s: float
    exposed_comm_s: float
    bubble_s: float
    bubble_fraction: float
    peak_bytes: float
    peak_time_s: float
    oom_event: str
    memory_timeline: List[Tuple[float, float]]

class LinkResult(Record):
    name: str
    bandwidth_Bps: float
    bytes: float
    busy_s: float
    peak_utilization: float

class SimulateResult(Result):
    iteration_time_s: float
    samples_per_s: float
    tokens_per_s: float
    model_tflops_per_gpu: float
    hardware_tflops_per_gpu: float
    mfu: float
    max_bubble_fraction: float
    peak_bytes: float
    oom: bool
    engine: str
    tasks: int
    activities: int
    ranks: List[RankResult]
    links: List[LinkResult]
    paths: List[str]
    chakra_files: Dict[str, bytes]
    def to_frame(self) -> DataFrame: ...
    def memory_frame(self) -> DataFrame: ...
    def links_frame(self) -> DataFrame: ...

class PlanCandidate(Record):
    plan: Dict[str, Any]
    description: str
    predicted_s: float
    predicted_peak_bytes: float
    simulated_s: float
    simulated_peak_bytes: float
    fits: bool

class PlanResult(Result):
    planner: str
    considered: int
    invalid: int
    over_memory: int
    pruned: int
    feasible: int
    search_s: float
    simulate_s: float
    candidates: List[PlanCandidate]
    chosen: int
    @property
    def best(self) -> Optional[PlanCandidate]: ...
    def to_frame(self) -> DataFrame: ...

class BakeoffResult(Result):
    planners: List[PlanResult]
    def to_frame(self) -> DataFrame: ...

class SweepResult(Result):
    out_dir: str
    models: int
    clusters: int
    grid_points: int
    scenarios: int
    planner_scenarios: int
    prefiltered: int
    skipped: List[Tuple[str, int]]
    simulated: int
    resumed: int
    retried: int
    rows_total: int
    rows_ok: int
    rows_oom: int
    rows_failed: int
    rows_crashed: int
    wall_s: float
    scenarios_per_min: float
    @property
    def results_path(self) -> str: ...
    def rows(self) -> List[Dict[str, Any]]: ...
    def to_frame(self) -> DataFrame: ...

class ParetoPoint(Record):
    id: str
    index: int
    strategy: str
    tokens_per_s: float
    mfu: float
    peak_memory_bytes: float
    duplicates: List[str]

class ParetoFront(Record):
    model: str
    gpus: int
    clusters: List[str]
    counts: Dict[str, int]
    points: List[ParetoPoint]

class ParetoResult(Result):
    source: str
    counts: Dict[str, int]
    fronts: List[ParetoFront]
    def to_frame(self) -> DataFrame: ...

class ValidationRow(Record):
    index: int
    id: str
    group: str
    measured_s: float
    predicted_s: float
    error: float
    failure: str

class ValidationResult(Result):
    rows: int
    failed: int
    mape: float
    max_abs_error: float
    mean_error: float
    spearman_min: float
    memory_rows: int
    memory_mape: float
    groups: List[Dict[str, Any]]
    mape_by_feature: List[Tuple[str, float]]
    results: List[ValidationRow]
    extrapolation: Optional[Dict[str, Any]]
    def to_frame(self) -> DataFrame: ...
    def groups_frame(self) -> DataFrame: ...

class CalibrationResult(Result):
    calibration: Dict[str, Any]
    gpu: str
    samples: int
    median_rel_error: float
    mean_rel_error: float
    max_rel_error: float
    notes: List[str]
    def to_frame(self) -> DataFrame: ...

class ReplayTrace(Record):
    source: str
    rank: int
    world_size: int
    measured_span_s: float
    replayed_span_s: float
    error_pct: float
    edited: bool
    edits: str
    predicted_span_s: float
    change_pct: float

class ReplayResult(Result):
    traces: List[ReplayTrace]
    def to_frame(self) -> DataFrame: ...

class Presets(Result):
    models: List[str]
    gpus: List[str]
    clusters: List[str]

def version() -> str: ...
def simgrid_version() -> str: ...
def presets() -> Presets: ...
def model_spec(model: PathLike) -> Dict[str, Any]: ...
def cluster_spec(cluster: PathLike) -> Dict[str, Any]: ...
def calibration_spec(cluster: Spec, calibration: Optional[Spec] = ...) -> Dict[str, Any]: ...
def simulate(model: Spec, cluster: Spec, plan: Spec, calibration: Optional[Spec] = ...,
             options: Optional[Dict[str, Any]] = ..., out: Optional[PathLike] = ...) -> SimulateResult: ...
def plan(model: PathLike, cluster: PathLike, global_batch_size: int, planner: str = ..., top: int = ...,
         calibration: Optional[PathLike] = ..., network: str = ..., memory_limit_bytes: Optional[float] = ...,
         tensor_parallel: Optional[int] = ..., precision: Optional[str] = ...,
         seq_len: Optional[int] = ...) -> PlanResult: ...
def bakeoff(model: PathLike, cluster: PathLike, global_batch_size: int, top: int = ...,
            calibration: Optional[PathLike] = ..., network: str = ..., memory_limit_bytes: Optional[float] = ...,
            tensor_parallel: Optional[int] = ..., precision: Optional[str] = ...,
            seq_len: Optional[int] = ...) -> BakeoffResult: ...
def sweep(spec: PathLike, out_dir: PathLike = ..., jobs: int = ..., prefilter: bool = ..., timeout_s: float = ...,
          dry_run: bool = ..., verbose: bool = ...) -> SweepResult: ...
def pareto(results: PathLike) -> ParetoResult: ...
def write_files(directory: PathLike, files: Dict[str, Union[bytes, str]]) -> List[str]: ...
def validate(data: Union[PathLike, Sequence[PathLike]], calibration: Optional[PathLike] = ..., split: str = ...,
             network: str = ..., fit_max_gpus: int = ..., max_evals: int = ...) -> ValidationResult: ...
def calibrate_compute(traces: Union[None, PathLike, Sequence[PathLike]] = ...,
                      gemm_csvs: Union[None, PathLike, Sequence[PathLike]] = ..., gpu: Optional[PathLike] = ...,
                      base: Optional[PathLike] = ...) -> CalibrationResult: ...
def calibrate_device_model(gpu: PathLike, reference: Optional[PathLike] = ...,
                           base: Optional[PathLike] = ...) -> Dict[str, Any]: ...
def replay(trace: PathLike, **edits: Any) -> ReplayResult: ...
