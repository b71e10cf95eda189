"""Calibration: fit a few named hardware parameters to target rows (docs/calibration.md).

Which hardware assumptions make the simulator give the published throughput ratios, or a host's
measured step times? ``calibrate(targets, params=...)`` searches the named parameters
(``PARAMETERS``) within bounds (by default the physically plausible ranges of ``bounds_for``,
sources in docs/calibration.md) with ``scipy.optimize.least_squares`` over the simulator: for one
parameter setting, every target row is rebuilt from its cached graph with the scaled hardware,
planned with the chosen planner and simulated. Residuals are relative, ``(simulated - target) /
target``. A coarse grid (``grid`` points per parameter) picks the start; a profile scan
(``profile`` points per parameter, the others refitted) says whether each parameter is
identifiable. ``Calibration.write_hardware`` writes the fitted hardware file with provenance.

Targets (``read_targets``): the published table ``data/reference/slackswap_paper.csv``
(``throughput_ratio``) or a CSV of measured steps (``step_time_s``); columns in docs/calibration.md.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from .. import planners
from ..core import costs
from ..core import hardware as hw_mod
from ..core.errors import ConfigError, SlackSwapError
from ..core.limits import parse_budget
from ..core.paths import data_dir
from ..timeline import simulate
from ..timeline.problem import Problem
from .fit import Calibration, check_hardware_out, fit, relative_residuals  # the search itself
from .options import check_calibrate
from .parameters import PARAMETERS, Parameter, apply, bounds_for  # noqa: F401 - calibrate's API
from .search import RowEvaluator, fit_workload
from .workload import WORKLOAD

METRICS = ("throughput_ratio", "step_time_s")


@dataclass(frozen=True)
class Target:
    """One row to reproduce: ``metric`` of ``planner``'s plan for ``model`` at ``budget``."""

    model: str
    budget: object
    metric: str
    value: float
    planner: str = "slack"
    hardware: str | None = None
    weight: float = 1.0
    overrides: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        extra = "".join(f" {k}={v}" for k, v in sorted(self.overrides.items()))
        return f"{self.model}{extra} @{self.budget} {self.planner}"


_MISSING = {"", "na", "n/a", "#n/a", "nan", "null", "none", "<na>"}   # an empty cell (as pandas reads it)


def read_targets(path=None, planner: str = "slack"):
    """Target rows from a CSV (default: the published table, ``data/reference/slackswap_paper.csv``).

    Columns: ``model`` and ``budget`` (required; budget as ``Problem.build``: a fraction, bytes,
    or ``none``), exactly one of ``throughput_ratio`` / ``step_time_s``, and optional
    ``planner`` (default ``planner``), ``hardware``, ``batch``, ``seq``, ``weight``; other columns
    (``source``, ``tolerance``, ...) are ignored. A bad file or cell raises ``ConfigError`` with one
    line ``<file>: row <line>: <column>: <what was expected>; got <value>`` (row 1 is the header)."""
    import csv
    import io
    from pathlib import Path

    path = path or data_dir() / "reference" / "slackswap_paper.csv"
    where = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"{where}: cannot read: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = "\0"
    if "\0" in text:
        raise ConfigError(f"{where}: expected a UTF-8 text CSV; got binary data")
    if not text.strip():
        raise ConfigError(f"{where}: expected a CSV with a header row (model, budget and one of "
                          f"{', '.join(METRICS)}); got an empty file")
    reader = csv.reader(io.StringIO(text))
    try:
        lines = [(reader.line_num, row) for row in reader if row]
    except csv.Error as e:
        raise ConfigError(f"{where}: row {reader.line_num}: expected CSV fields; got {e}") from None
    (head_line, header), body = lines[0], lines[1:]
    header = [c.strip() for c in header]
    twice = [c for i, c in enumerate(header) if c in header[:i]]
    missing = [c for c in ("model", "budget") if c not in header]
    metric = [m for m in METRICS if m in header]
    if twice:
        raise ConfigError(f"{where}: row {head_line}: expected distinct column names; got {twice[0]!r} twice")
    if missing or len(metric) != 1:
        raise ConfigError(f"{where}: row {head_line}: expected columns model, budget and exactly one of "
                          f"{', '.join(METRICS)}; got {', '.join(header)}")
    if not body:
        raise ConfigError(f"{where}: expected at least one target row after the header; got none")
    out = []
    for line, cells in body:
        if len(cells) != len(header):
            raise ConfigError(f"{where}: row {line}: expected {len(header)} fields (as the header); "
                              f"got {len(cells)}")
        r = {c: v.strip() for c, v in zip(header, cells, strict=True)}
        cell = lambda c, r=r: None if r.get(c, "").lower() in _MISSING else r[c]  # noqa: E731
        at = f"{where}: row {line}"
        if cell("model") is None:
            raise ConfigError(f"{at}: model: expected a model name; got {r['model']!r}")
        value = _number(r[metric[0]], f"{at}: {metric[0]}", "a finite number > 0", lambda v: v > 0)
        b = r["budget"]
        budget = None if cell("budget") is None else _target_budget(b, f"{at}: budget")
        ov = {k: _count(cell(k), f"{at}: {k}") for k in ("batch", "seq") if cell(k) is not None}
        weight = 1.0 if cell("weight") is None else _number(r["weight"], f"{at}: weight",
                                                            "a finite number >= 0", lambda v: v >= 0)
        out.append(Target(r["model"], budget, metric[0], value, cell("planner") or planner, cell("hardware"),
                          weight, ov))
    return out


def _number(text: str, field: str, expected: str, ok) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or not ok(v):
        raise ConfigError(f"{field}: expected {expected}; got {text!r}")
    return v


def _count(text: str, field: str) -> int:
    v = _number(text, field, "an integer >= 1", lambda v: v >= 1 and float(v).is_integer())
    return int(v)


def _target_budget(text: str, field: str):
    """A target's budget, read as ``--budget`` and ``Problem.build`` read it (core.limits)."""
    kind, amount = parse_budget(text, field)
    if kind == "none":
        return None
    return int(amount) if kind == "bytes" else amount


class _Evaluator:
    """Simulated metric of every target for one parameter setting (graphs built once, cached)."""

    def __init__(self, targets, hw, planner_params):
        self.targets, self.hw, self.params = list(targets), hw, dict(planner_params or {})
        self.base = [Problem.build(t.model, hw, t.budget, **t.overrides) for t in self.targets]
        self.cache: dict[tuple, np.ndarray] = {}
        self.sims = 0

    def __call__(self, values: dict) -> np.ndarray:
        key = tuple(sorted((k, round(float(v), 12)) for k, v in values.items()))
        if key not in self.cache:
            hw = apply(self.hw, values)
            out = []
            for t, base in zip(self.targets, self.base, strict=True):
                p = replace(base, costs=costs.analytical(base.graph, hw), hardware=hw)
                plan = planners.get(t.planner, **(self.params if t.planner == "slack" else {})).plan(p)
                r = simulate(p, plan, detail=False)
                out.append(r.throughput_ratio if t.metric == "throughput_ratio" else r.step_time_s)
            self.cache[key] = np.asarray(out, dtype=float)
            self.sims += 1
        return self.cache[key]

    def residuals(self, values: dict) -> np.ndarray:
        return relative_residuals(self(values), self.targets)


def simulated_targets(rows, hardware, planner_params=None) -> list[Target]:
    """``rows`` (``Target`` list) with their values replaced by what the simulator gives on
    ``hardware`` (a ``Hardware``): targets from a known machine, to check that a fit recovers it."""
    values = _Evaluator(rows, hardware, planner_params)({})
    return [replace(t, value=float(v)) for t, v in zip(rows, values, strict=True)]




def calibrate(targets=None, params=("compute_scale", "bandwidth"), hardware="a100-80gb", planner: str = "slack",
              planner_params=None, bounds=None, grid: int = 3, profile: int = 0, max_evals: int = 60,
              tol: float = 0.002) -> Calibration:
    """Fit ``params`` (names in ``PARAMETERS``, and workload assumptions in ``WORKLOAD``: searched
    over their candidate values, ``search.fit_workload``) so that simulating ``targets`` (a list of
    ``Target``, a CSV path, or None for the published table) on ``hardware`` reproduces them.

    ``bounds``: ``{name: (lo, hi)}`` replacing ``bounds_for``'s plausible ranges. ``grid``:
    start points per parameter (coarse grid; 1 = start at the preset). ``profile``: points per
    parameter of the identifiability scan (0 = none). ``max_evals``: least-squares evaluations.
    ``tol``: a row is reproduced when its relative residual is at most ``tol``.
    """

    t0 = time.perf_counter()
    params = list(check_calibrate(params, bounds, grid, profile, max_evals, tol).params)   # before any work
    if targets is None or not isinstance(targets, (list, tuple)):
        targets = read_targets(targets, planner)
    if not targets:
        raise SlackSwapError("calibrate.targets: no target rows")
    unknown = [p for p in params if p not in PARAMETERS and p not in WORKLOAD]
    if unknown:
        raise SlackSwapError(f"calibrate.params: unknown parameter {unknown[0]!r}; known: "
                             f"{', '.join(list(PARAMETERS) + list(WORKLOAD))}")
    workload = [p for p in params if p in WORKLOAD]
    params = [p for p in params if p in PARAMETERS]
    if workload and not params:
        raise SlackSwapError(f"calibrate.params: workload parameters ({', '.join(workload)}) are searched "
                             "with at least one hardware parameter (e.g. compute_scale); got none")
    names = {t.hardware for t in targets if t.hardware}
    if isinstance(hardware, str) and len(names) > 1:
        raise SlackSwapError(f"calibrate.targets: rows name several hardware ({', '.join(sorted(names))}); "
                             "calibrate one hardware at a time")
    hw = hw_mod.load(hardware) if isinstance(hardware, str) else hardware
    box = {p: bounds_for(p, hw) for p in params}
    for p, (lo, hi) in (bounds or {}).items():
        if p not in box or not (lo < hi) or (PARAMETERS[p].log and lo <= 0):
            raise SlackSwapError(f"calibrate.bounds[{p!r}]: needs a fitted parameter and lo < hi (> 0 on a log "
                                 f"scale); fitted: {', '.join(params)}; got {(lo, hi)}")
        box[p] = (float(lo), float(hi))
    if workload:
        cal, wl = fit_workload(RowEvaluator(targets, hw, planner_params), params, workload, box, grid, profile,
                               max_evals, tol)
        cal = replace(cal, workload=wl)
    else:
        ev = _Evaluator(targets, hw, planner_params)
        cal = fit(ev, params, box, grid, profile, max_evals, tol)
    return replace(cal, hardware_name=hardware if isinstance(hardware, str) else hw.name,
                   planner=planner, wall_s=time.perf_counter() - t0)


__all__ = ["PARAMETERS", "Calibration", "Parameter", "Target", "apply", "bounds_for", "calibrate",
           "check_hardware_out", "read_targets", "simulated_targets"]
