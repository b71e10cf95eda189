"""Experiments: sweep grids of settings into one tidy pandas DataFrame (docs/experiments.md).

One **run** = (model, hardware, link, spec overrides, parallel setting, checkpointed regions, budget,
planner variant): build the
``Problem``, plan it, judge the plan with ``timeline.simulate``, and flatten everything into one
``RunRow`` (``dataclasses.asdict``; STYLE.md 4, after Calculon's one-CSV-row-per-execution).
Runs are independent, so any ``concurrent.futures.Executor`` runs them (processes by default; a
Dask ``distributed`` client's ``get_executor()`` for clusters). Rows come back in grid order, so a
sweep is deterministic; a run that raises becomes a row with status ``ERROR`` and the message.

>>> df = sweep(["tiny"], ["a100-80gb"], [0.5], ["keep-all"], workers=1, progress=False)
>>> df[["model", "planner", "status"]].values.tolist()
[['tiny', 'keep-all', 'INFEASIBLE']]
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import itertools
import json
import math
import signal
import time
import warnings
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, fields, replace
from functools import lru_cache

from .. import (
    __version__,
    bounds,  # bounds.lower_bound looked up at call time (tests may replace it)
)
from .. import planners as planners_mod
from ..core.errors import CapacityWarning, ConfigError
from ..core.graph import check_limit
from ..core.limits import parse_time_limit
from ..core.paths import user_path
from ..core.plan import Decision, Status
from ..core.schema import check_type
from ..models import as_parallel
from ..timeline import simulate
from ..timeline.problem import Problem
from . import runcache

WALL_COLUMNS = ("solve_s",)
"""Columns that measure wall time: they differ between two otherwise identical sweeps."""

SETTING_COLUMNS = ("model", "hardware", "link", "overrides", "parallel", "regions", "region_swap", "budget")
"""Columns that identify one setting (a problem); planners are compared within a setting."""

REGIONS = (None, "layers")
"""The values of a sweep's ``regions`` axis (None: no checkpointing; docs/regions.md)."""

MAX_RUNS = 10_000
"""``sweep`` refuses a grid of more runs than this unless ``max_runs`` says otherwise (None: no
limit); the runs are counted before the grid is expanded (docs/experiments.md)."""


@dataclass(frozen=True)
class RunSpec:
    """The settings of one run (all JSON-able; ``key()`` hashes them with what they resolve to)."""

    model: str
    hardware: str
    link: str | dict | None
    budget: float | int | str
    planner: str
    label: str
    params: dict = field(default_factory=dict)
    overrides: dict = field(default_factory=dict)
    bound: bool | dict = True
    parallel: str | dict | None = None
    #: checkpointed regions the step runs under (None or "layers"; ``Problem.with_regions``)
    regions: str | None = None
    region_swap: str = "save"

    def key(self) -> str:
        """The cache key: these settings, the content of the model spec, hardware and link they
        resolve to now, the cost mode, the package version and code (``slackswap.experiments.runcache``)."""
        return runcache.run_key(self, runcache.setting_digest(*self.resolve()), runcache.code_digest())

    def resolve(self):
        """``(TransformerSpec, Hardware)`` of this run, read from the files now."""
        return runcache.resolve(self.model, self.hardware, self.link, self.overrides)

    def resolve_parallel(self):
        """The ``Parallel`` of this run (a preset file is read now), or None (one GPU)."""
        return as_parallel(self.parallel, "parallel")

    def setting(self) -> str:
        """The content digest of this run's problem without a budget (``runcache.setting_digest``)."""
        return runcache.setting_digest(*self.resolve(), self.resolve_parallel())


@dataclass
class RunRow:
    """One flat result row; see docs/experiments.md for every column."""

    model: str
    hardware: str
    link: str
    budget: float
    budget_bytes: float
    planner: str
    label: str
    params: str
    overrides: str
    parallel: str = ""
    regions: str = ""
    region_swap: str = ""
    status: str = "ERROR"
    message: str = ""
    solve_s: float = math.nan
    step_time_s: float = math.nan
    ideal_step_time_s: float = math.nan
    throughput_ratio: float = math.nan
    peak_bytes: float = math.nan
    fits: bool = False
    stall_s: float = math.nan
    recompute_s: float = math.nan
    swapped_bytes: float = math.nan
    n_keep: float = math.nan
    n_swap: float = math.nan
    n_recompute: float = math.nan
    lower_bound_s: float = math.nan
    bound_how: str = ""
    gap_to_bound: float = math.nan
    gap_to_milp: float = math.nan
    planner_bound_s: float = math.nan
    warning: str = ""
    version: str = ""


INT_COLUMNS = ("peak_bytes", "swapped_bytes", "n_keep", "n_swap", "n_recompute")


# ---------------------------------------------------------------- one run
_PROBLEMS: OrderedDict[str, object] = OrderedDict()
_PROBLEMS_MAX = 16


def _base_problem(spec: RunSpec):
    """``(content digest, problem without a budget)`` of a run's setting. The files are read on
    every call and problems are reused by the digest of what they resolve to, so an edited model,
    hardware or link file is never served from this process's memory."""

    tspec, hw = spec.resolve()
    par = spec.resolve_parallel()
    key = runcache.setting_digest(tspec, hw, par)
    if key in _PROBLEMS:
        _PROBLEMS.move_to_end(key)
    else:
        with warnings.catch_warnings():   # a run reports it in its row (column ``warning``)
            warnings.simplefilter("ignore", CapacityWarning)
            model = tspec.build() if isinstance(tspec, runcache.TracedModel) else tspec
            _PROBLEMS[key] = Problem.build(model, hw, budget=None, cost_mode=runcache.COST_MODE, parallel=par)
        while len(_PROBLEMS) > _PROBLEMS_MAX:
            _PROBLEMS.popitem(last=False)
    return key, _PROBLEMS[key]


DEFAULT_BOUND: dict = {}
"""``lower_bound`` keyword arguments for ``bound=True``: the ideal step and the capacity bound (the
LP of the aggregated relaxation, about a second on a full-size model). The aggregated MILP's dual
bound is opt-in (``bound={"integral_time_limit_s": 10}``)."""


def _bound_kwargs(bound) -> dict | None:
    """``bound`` (False, True or a dict of ``lower_bound`` keyword arguments) as keyword arguments,
    checked: an unknown key is a ``ConfigError`` naming the allowed ones."""
    if not bound:
        return None
    if bound is True:
        return dict(DEFAULT_BOUND)
    if not isinstance(bound, dict):
        raise ConfigError(f"bound: True, False or a dict of lower_bound keyword arguments; got {bound!r}")
    allowed = ("integral_time_limit_s",)
    bad = sorted(set(bound) - set(allowed))
    if bad:
        raise ConfigError(f"bound: unknown key(s) {', '.join(map(str, bad))}; allowed: {', '.join(allowed)}"
                          + (" (lp_max_tensors was removed: the exact MILP's relaxation does not bound "
                             "multi-level plans, docs/milp.md, \"Status, warm start and what is proven\")" if "lp_max_tensors" in bound else ""))

    out = dict(bound)
    if "integral_time_limit_s" in out:
        out["integral_time_limit_s"] = parse_time_limit(out["integral_time_limit_s"], "bound.integral_time_limit_s",
                                                        allow_none=True)
    return out


@lru_cache(maxsize=64)
def _bound(setting: str, budget_bytes: float, kwargs_json: str = "{}", regions: str | None = None,
           region_swap: str = "save"):
    """``slackswap.bounds.lower_bound`` of one problem (``setting``: its content digest, a key of
    ``_PROBLEMS``; under ``regions`` when given), or (nan, why) while it is unavailable."""
    problem = replace(_PROBLEMS[setting], budget_bytes=budget_bytes)
    if regions is not None:
        problem = problem.with_regions(regions, region_swap)
    seconds, how = bounds.lower_bound(problem, **json.loads(kwargs_json))
    return float(seconds), str(how)


def _parallel_name(parallel) -> str:
    if parallel is None:
        return ""
    return parallel if isinstance(parallel, str) else json.dumps(parallel, sort_keys=True)


def _link_name(link) -> str:
    if link is None:
        return ""
    return link if isinstance(link, str) else json.dumps(link, sort_keys=True)


def _settings_row(spec: RunSpec) -> RunRow:
    """A row holding every setting of ``spec`` (the link by its resolved name, the budget as a
    fraction when it can be known) and status ERROR until the run fills it."""

    row = RunRow(model=spec.model, hardware=spec.hardware, link=_link_name(spec.link), budget=math.nan,
                 budget_bytes=math.nan, planner=spec.planner, label=spec.label,
                 params=json.dumps(spec.params, sort_keys=True), overrides=json.dumps(spec.overrides, sort_keys=True),
                 parallel=_parallel_name(spec.parallel), regions=spec.regions or "",
                 region_swap=spec.region_swap if spec.regions else "", version=__version__)
    if isinstance(spec.budget, float):
        row.budget = round(spec.budget, 6)
    if spec.link is None:
        try:
            row.link = runcache.load_hardware(spec.hardware, None).link.name
        except Exception:  # noqa: BLE001 - an unknown hardware: the run's message says so
            pass
    return row


def error_row(spec: RunSpec, message: str) -> dict:
    """The ERROR row of a run that did not return one (a lost worker): every setting of the run,
    so that tables put it beside the other planners of its setting."""
    row = _settings_row(spec)
    row.message = message
    try:   # the budget in bytes, and its fraction when given in bytes, need the problem
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CapacityWarning)
            problem = _base_problem(spec)[1].with_budget(spec.budget)
        row.budget_bytes = float(problem.budget_bytes)
        row.budget = round(problem.budget_bytes / problem.budget_base_bytes, 6)
    except Exception:  # noqa: BLE001 - the setting itself is broken: keep what is known
        pass
    return asdict(row)


def run_one(spec: RunSpec) -> dict:
    """Run one setting: build, plan, simulate. Never raises: errors become an ERROR row. A
    ``CapacityWarning`` goes to the row's ``warning`` column (``sweep`` warns once per text)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CapacityWarning)
        return _run_one(spec)


def _run_one(spec: RunSpec) -> dict:
    row = _settings_row(spec)
    try:
        setting, base = _base_problem(spec)
        problem = base.with_budget(spec.budget)
        row.budget_bytes = float(problem.budget_bytes)
        row.budget = round(problem.budget_bytes / problem.budget_base_bytes, 6)
        if spec.regions is not None:
            problem = problem.with_regions(spec.regions, spec.region_swap)
        kw = _bound_kwargs(spec.bound)
        bound = None if kw is None else \
            (lambda: _bound(setting, float(problem.budget_bytes), json.dumps(kw, sort_keys=True),
                            spec.regions, spec.region_swap))
        _plan_and_judge(row, problem, spec.planner, spec.params, bound)
    except Exception as e:  # noqa: BLE001 - a failed run is a row, never a crashed sweep
        row.status, row.message = "ERROR", f"{type(e).__name__}: {' '.join(str(e).split())}"
    return asdict(row)


def _plan_and_judge(row: RunRow, problem, planner: str, params: dict, bound) -> None:
    """Fill ``row`` from planning ``problem`` with ``planner(**params)`` and simulating the plan;
    ``bound``: None or a callable returning ``(seconds, how)`` of the problem's lower bound."""

    row.budget_bytes = float(problem.budget_bytes)
    row.budget = round(problem.budget_bytes / problem.budget_base_bytes, 6)
    row.warning = "; ".join(problem.memory_warnings)
    t0 = time.perf_counter()
    plan = planners_mod.get(planner, **params).plan(problem)
    row.solve_s = time.perf_counter() - t0
    r = simulate(problem, plan, detail=False)
    status = plan.info.status
    if not (r.feasible and r.fits) and status in (Status.OPTIMAL, Status.FEASIBLE):
        status = Status.INFEASIBLE
    row.status, row.message = status.value, plan.info.message or r.reason
    row.step_time_s, row.ideal_step_time_s = float(r.step_time_s), float(r.ideal_step_time_s)
    row.throughput_ratio, row.fits = float(r.throughput_ratio), bool(r.fits)
    row.peak_bytes = r.peak_bytes if r.feasible else math.nan
    row.stall_s, row.recompute_s, row.swapped_bytes = float(r.stall_s), float(r.recompute_s), r.swapped_bytes
    # under checkpointed regions: the decisions as they run (the simulation's counts)
    counts = r.counts if getattr(problem, "regions", None) is not None else plan.counts()
    row.n_keep, row.n_swap, row.n_recompute = (counts[d.value] for d in (Decision.KEEP, Decision.SWAP,
                                                                           Decision.RECOMPUTE))
    if plan.info.lower_bound is not None:      # the planner's own certified bound (milp, brute)
        row.planner_bound_s = float(plan.info.lower_bound)
    if bound is not None:
        row.lower_bound_s, row.bound_how = bound()
        if r.fits and row.lower_bound_s > 0:
            row.gap_to_bound = row.step_time_s / row.lower_bound_s - 1.0


def _problem_bound(problem, kw: dict) -> tuple[float, str]:
    seconds, how = bounds.lower_bound(problem, **kw)
    return float(seconds), str(how)


def run_problems(problems, planners, *, planner_params=None, bound: bool | dict = True, progress: bool = False):
    """Run planners on problems you built yourself (``Problem`` objects, e.g. synthetic graphs,
    which ``sweep`` cannot name), in this process, one row per (problem, planner variant) with the
    ``RunRow`` columns of ``sweep`` and ``gap_to_milp`` filled by ``finish``.

    ``problems``: a mapping name -> ``Problem`` (the name goes to the ``model`` column) or a list
    of problems (named by ``problem.graph.name``; problems of one graph at several budgets share
    it, like a model in ``sweep``). ``planners`` / ``planner_params``: as in ``sweep``. Errors
    become ERROR rows.

    >>> from slackswap.experiments import synthetic
    >>> df = run_problems(synthetic.exact_suite(levels=(0.5,)), ["slack", "milp"])
    >>> sorted(set(df["status"]))
    ['FEASIBLE', 'OPTIMAL']
    """
    import pandas as pd  # lazy: start-up cost (pandas)


    items = list(problems.items()) if isinstance(problems, dict) else [(p.graph.name, p) for p in problems]
    kw = _bound_kwargs(bound)
    rows = []
    todo = [(name, p, v) for name, p in items for v in variants(planners, planner_params)]
    for k, (name, p, (label, planner, params)) in enumerate(todo, 1):
        row = RunRow(model=str(name), hardware="", link="", budget=math.nan, budget_bytes=math.nan,
                     planner=planner, label=label, params=json.dumps(params, sort_keys=True), overrides="{}",
                     version=__version__)
        try:
            _plan_and_judge(row, p, planner, params, None if kw is None else functools.partial(_problem_bound, p, kw))
        except Exception as e:  # noqa: BLE001 - a failed run is a row
            row.status, row.message = "ERROR", f"{type(e).__name__}: {' '.join(str(e).split())}"
        rows.append(asdict(row))
        if progress:
            print(f"[{k}/{len(todo)}] {name} {label}: {row.status}", flush=True)
    df = finish(pd.DataFrame(rows, columns=[f.name for f in fields(RunRow)]))
    _warn(df)
    return df


# ---------------------------------------------------------------- the grid
def _as_list(x, what: str) -> list:
    if x is None:
        return [None]
    if isinstance(x, (str, dict, int, float)):
        return [x]
    out = list(x)
    if not out:
        raise ConfigError(f"{what}: must not be empty")
    return out


def variants(planners, planner_params=None) -> list[tuple[str, str, dict]]:
    """``(label, planner name, params)`` for each run of a planner: every name in ``planners``
    (with ``planner_params[name]`` when that is a dict), then each ``(label, name, params)`` of
    ``planner_params`` when that is a list (ablation variants)."""

    check_type(planners, (str, list, tuple, type(None)), "planners", "a planner name or a list of names",
               ConfigError)
    names = [planners] if isinstance(planners, str) else list(planners or [])
    for i, n in enumerate(names):
        check_type(n, str, f"planners[{i}]", "a planner name (a string)", ConfigError)
    per_name = planner_params if isinstance(planner_params, dict) else {}
    for n, params in per_name.items():
        check_type(params, dict, f"planner_params[{n!r}]", "a dict of parameters", ConfigError)
    out = [(n, n, dict(per_name.get(n, {}))) for n in names]
    if isinstance(planner_params, (list, tuple)):
        for v in planner_params:
            if isinstance(v, dict):
                v = (v.get("label"), v.get("planner"), v.get("params", {}))
            if len(v) != 3 or not v[0] or not v[1]:
                raise ConfigError(f"planner_params: a variant must be (label, planner, params), got {v!r}")
            out.append((str(v[0]), str(v[1]), dict(v[2] or {})))
    elif planner_params is not None and not isinstance(planner_params, dict):
        raise ConfigError("planner_params: expected a dict name -> params or a list of (label, name, params)")
    if not out:
        raise ConfigError("planners: no planner to run")
    labels = [v[0] for v in out]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"planner_params: duplicate labels {sorted({x for x in labels if labels.count(x) > 1})}")
    return out


def count_runs(models, hardware, budgets, planners, *, overrides=None, planner_params=None, link=None,
               parallel=None, regions=None) -> int:
    """How many runs ``grid`` of these arguments has, without building it."""
    n = len(variants(planners, planner_params))
    for x, what in ((models, "models"), (hardware, "hardware"), (link, "link"), (overrides, "overrides"),
                    (parallel, "parallel"), (regions, "regions"), (budgets, "budgets")):
        n *= len(_as_list(x, what))
    return n


def each_once(values, axis: str, where: str, field: str | None = None) -> None:
    """Refuse (``ConfigError``) a value given twice in one axis of a sweep: the sweep would compute
    the same runs twice and its table could not tell them apart. Names the axis, the position (as
    ``field.format(j)`` when given) and the value: ``"sweep: budgets[2]: expected each value once
    (the same as budgets[0]); got 0.5"``. A value that is not a list has nothing to repeat."""
    from ..core.schema import _short  # lazy: the one way values are shortened in messages

    if not isinstance(values, (list, tuple)):
        return
    for j, v in enumerate(values):
        i = next(i for i, u in enumerate(values) if u == v)
        if i < j:
            at = field.format(j) if field else f"{axis}[{j}]"
            raise ConfigError(f"{where}: {at}: expected each value once (the same as {axis}[{i}]); "
                              f"got {_short(v)}")


def check_runs(n: int, max_runs: int | None, what: str = "sweep") -> None:
    """Raise ``ConfigError`` when ``n`` runs are more than ``max_runs`` (None: no limit)."""
    check_limit(max_runs, "max_runs", ConfigError)
    if max_runs is not None and n > max_runs:
        raise ConfigError(f"{what}: {n:,} runs, more than max_runs={max_runs:,}; give a larger max_runs "
                          f"(CLI --max-runs) to run them anyway")


def check_regions_axis(regions, region_swap, where: str = "sweep") -> list:
    """The ``regions`` axis as a list (``ConfigError`` unless each value is one of ``REGIONS``,
    the string "none" read as None) and ``region_swap`` checked ("save" or "recompute", and not
    "recompute" without regions)."""
    from ..timeline.regions import SWAP_AS  # the checkpointed-regions option only

    out = []
    for i, r in enumerate(_as_list(regions, "regions")):
        r = None if r == "none" else r
        if r not in REGIONS:
            at = f"regions[{i}]" if isinstance(regions, (list, tuple)) else "regions"
            raise ConfigError(f"{where}: {at}: must be 'none' or 'layers' (docs/regions.md); got {r!r}")
        if r in out:
            raise ConfigError(f"{where}: regions[{i}]: expected each value once (the same as "
                              f"regions[{out.index(r)}]); got {regions[i]!r}")
        out.append(r)
    if not isinstance(region_swap, str) or region_swap not in SWAP_AS:
        raise ConfigError(f"{where}: region_swap: must be one of {', '.join(SWAP_AS)}; got {region_swap!r}")
    if region_swap != "save" and all(r is None for r in out):
        raise ConfigError(f"{where}: region_swap: only with regions (what a SWAP inside a checkpointed "
                          f"region becomes); got region_swap={region_swap!r} and no regions")
    return out


def grid(models, hardware, budgets, planners, *, overrides=None, planner_params=None, link=None,
         bound=True, max_runs: int | None = MAX_RUNS, parallel=None, regions=None,
         region_swap: str = "save") -> list[RunSpec]:
    """Every run of a sweep, in the sweep's (deterministic) order: model, hardware, link,
    overrides, parallel setting, regions, budget, planner variant. More than ``max_runs`` runs raise
    ``ConfigError``, and so does a value given twice in one axis (``models``, ``hardware``,
    ``link``, ``overrides``, ``parallel``, ``regions``, ``budgets``, ``planners``), naming it, before
    anything else is checked; so does a parallel setting that is not one (docs/parallel.md), and a
    ``regions`` value or ``region_swap`` that is not one (``check_regions_axis``)."""
    for axis, values in (("models", models), ("hardware", hardware), ("link", link), ("overrides", overrides),
                         ("parallel", parallel), ("regions", regions), ("budgets", budgets),
                         ("planners", planners)):
        each_once(values, axis, "sweep")
    check_runs(count_runs(models, hardware, budgets, planners, overrides=overrides,
                          planner_params=planner_params, link=link, parallel=parallel, regions=regions),
               max_runs)
    regs = check_regions_axis(regions, region_swap)
    vs = variants(planners, planner_params)
    for i, ov in enumerate(_as_list(overrides, "overrides")):
        if ov is not None and not isinstance(ov, dict):
            raise ConfigError(f"overrides[{i}]: expected a dict of TransformerSpec fields; got {ov!r}")
    pars = _as_list(parallel, "parallel")
    for i, p in enumerate(pars):
        if p is not None and not isinstance(p, (str, dict)):
            raise ConfigError(f"parallel[{i}]: expected a dict of parallel keys or a preset name; got {p!r}")
        as_parallel(p, f"parallel[{i}]" if isinstance(parallel, (list, tuple)) else "parallel")
    return [RunSpec(m, h, lk, b, name, label, params, dict(ov or {}), bound, p, r,
                    region_swap if r is not None else "save")
            for m, h, lk, ov, p, r, b in itertools.product(_as_list(models, "models"), _as_list(hardware, "hardware"),
                                                          _as_list(link, "link"), _as_list(overrides, "overrides"),
                                                          pars, regs, _as_list(budgets, "budgets"))
            for label, name, params in vs]


def sweep(models, hardware, budgets, planners, *, overrides=None, planner_params=None, link=None,
          executor: cf.Executor | None = None, workers: int = 2, cache=None, progress: bool = True,
          bound: bool = True, on_row=None, max_runs: int | None = MAX_RUNS, parallel=None,
          regions=None, region_swap: str = "save"):
    """Run the grid ``models x hardware x link x overrides x parallel x regions x budgets x planner
    variants``.

    ``overrides``: a dict (or list of dicts) of spec overrides (seq, batch, attention, layers ...).
    ``parallel``: a parallel setting (a dict of its keys or a ``data/parallel`` preset name) or a
    list of them (None: one GPU; docs/parallel.md).
    ``regions``: None (no checkpointing), ``"layers"`` (every run planned and judged under per-layer
    checkpointed regions, ``Problem.with_regions``; docs/regions.md) or a list of them ("none" is
    None); ``region_swap``: what a SWAP inside a region becomes, "save" or "recompute".
    ``planner_params``: dict name -> params, or a list of ``(label, name, params)`` variants.
    ``link``: link preset name(s) or dict(s) of ``Hardware.with_link`` changes (None: the preset's).
    ``executor``: any ``concurrent.futures.Executor`` (e.g. ``distributed.Client().get_executor()``);
    default a ``ProcessPoolExecutor(workers)``, or in-process when ``workers == 1``.
    ``cache``: a directory (``~`` expanded); finished runs are stored there keyed by
    ``RunSpec.key()`` (the settings, the content of the model, hardware and link they resolve to,
    the cost mode, the package version and code) and a resumed sweep reads them instead of running
    them again.
    ``on_row(row, done, total)``: called in the calling process as each run finishes (any order).
    ``bound``: False, True (``DEFAULT_BOUND``) or a dict of ``bounds.lower_bound`` keyword arguments.
    ``max_runs``: a grid of more runs is refused before any starts (``ConfigError``; None: no limit).
    Returns a DataFrame with one row per run (``RunRow`` columns) in grid order; ``df.attrs`` holds
    ``runs``, ``cache_hits`` and ``computed``.
    """
    import pandas as pd  # lazy: start-up cost (pandas)

    _bound_kwargs(bound)      # a bad ``bound`` fails before any run starts
    specs = grid(models, hardware, budgets, planners, overrides=overrides, planner_params=planner_params,
                 link=link, bound=bound, max_runs=max_runs, parallel=parallel, regions=regions,
                 region_swap=region_swap)
    cache_dir = user_path(cache) if cache is not None else None
    keys: list[str | None] = [None] * len(specs)
    if cache_dir is not None:
        cache_dir.mkdir(parents=True, exist_ok=True)
        keys = _cache_keys(specs)
    rows: list[dict | None] = [None] * len(specs)
    todo = []
    for i in range(len(specs)):
        hit = runcache.read(cache_dir, keys[i], RunRow.__dataclass_fields__)
        if hit is not None:
            rows[i] = hit
        else:
            todo.append(i)
    hits = len(specs) - len(todo)
    bar = _progress(len(specs), hits, progress)
    try:
        for i, row in _execute(specs, todo, executor, workers):
            rows[i] = row
            if row["status"] != "ERROR":
                runcache.write(cache_dir, keys[i], row)
            bar.update(1)
            if on_row is not None:
                on_row(row, sum(r is not None for r in rows), len(specs))
    finally:
        bar.close()
    df = finish(pd.DataFrame(rows, columns=list(RunRow.__dataclass_fields__)))
    df.attrs.update(runs=len(specs), cache_hits=hits, computed=len(todo))
    _warn(df)
    return df


def _warn(df) -> None:
    """One ``CapacityWarning`` per distinct text of the ``warning`` column."""
    for text in dict.fromkeys(df.loc[df["warning"] != "", "warning"]):
        warnings.warn(text, CapacityWarning, stacklevel=3)


def _cache_keys(specs) -> list[str | None]:
    """``RunSpec.key()`` of every run, resolving each setting once; None where it does not resolve."""
    code, settings, out = runcache.code_digest(), {}, []
    for s in specs:
        sid = json.dumps([s.model, s.hardware, s.link, s.overrides, s.parallel], sort_keys=True, default=str)
        if sid not in settings:
            try:
                settings[sid] = s.setting()
            except Exception:  # noqa: BLE001 - it will be an ERROR row, never cached
                settings[sid] = None
        out.append(None if settings[sid] is None else runcache.run_key(s, settings[sid], code))
    return out


def _execute(specs, todo, executor, workers):
    if not todo:
        return
    if executor is None and workers <= 1:
        for i in todo:
            yield i, run_one(specs[i])
        return
    own = executor is None
    # our workers leave Ctrl-C (SIGINT to the whole process group) to this process, which stops them
    ex = cf.ProcessPoolExecutor(max_workers=workers, initializer=_ignore_sigint) if own else executor
    interrupted = False
    try:
        futures = {ex.submit(run_one, specs[i]): i for i in todo}
        for fut in cf.as_completed(futures):
            i = futures[fut]
            try:
                row = fut.result()
            except Exception as e:  # noqa: BLE001 - a lost worker is a row too
                row = error_row(specs[i], f"{type(e).__name__}: {' '.join(str(e).split())}")
            yield i, row
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        if own and interrupted:   # do not wait for the runs in flight: stop their processes
            procs = list((getattr(ex, "_processes", None) or {}).values())
            ex.shutdown(wait=False, cancel_futures=True)
            for p in procs:
                p.terminate()
            for p in procs:
                p.join(5.0)
        elif own:
            ex.shutdown(wait=True, cancel_futures=True)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def finish(df):
    """Fill the cross-run columns: ``gap_to_milp`` (step time over the MILP's, minus 1, within the
    same setting; the row labelled ``milp`` first, else the first milp row that fits) and nullable
    integer dtypes."""
    import pandas as pd  # lazy: start-up cost (pandas)

    df = df.copy()
    df["gap_to_milp"] = math.nan
    ok = (df["planner"] == "milp") & df["fits"].astype(bool)
    if ok.any():
        milp = df[ok].sort_values("label", key=lambda s: s != "milp", kind="stable")
        milp = milp.drop_duplicates(list(SETTING_COLUMNS))[[*SETTING_COLUMNS, "step_time_s"]]
        ref = df[list(SETTING_COLUMNS)].merge(milp, how="left", on=list(SETTING_COLUMNS))["step_time_s"]
        gap = df["step_time_s"].to_numpy() / ref.to_numpy() - 1.0
        df["gap_to_milp"] = [g if f else math.nan for g, f in zip(gap, df["fits"].astype(bool), strict=True)]
    for c in INT_COLUMNS:
        df[c] = pd.array([None if (v is None or (isinstance(v, float) and math.isnan(v))) else int(v)
                          for v in df[c]], dtype="Int64")
    df["fits"] = df["fits"].astype(bool)
    return df


# ---------------------------------------------------------------- progress
class _NoBar:
    def update(self, n=1):
        pass

    def close(self):
        pass


def _progress(total: int, done: int, enabled: bool):
    if not enabled or total == 0:
        return _NoBar()
    from tqdm.auto import tqdm  # lazy: start-up cost (tqdm)

    return tqdm(total=total, initial=done, desc="sweep", unit="run")
