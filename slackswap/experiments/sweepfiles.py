"""Sweep files: one TOML per ablation in ``data/sweeps/`` (docs/experiments.md, "Sweep files (`data/sweeps/`)").

``experiments`` re-exports ``load_sweep``, ``run_sweep_file``, ``sweeps_dir`` and ``SWEEP_KEYS``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from .. import planners
from ..core.errors import ConfigError, SlackSwapError
from ..core.limits import resolve_budget
from ..core.paths import check_output, data_dir, read_document, user_path
from ..core.schema import PosFloat, PosInt, Schema, parse
from ..models import as_parallel
from .runs import MAX_RUNS, check_regions_axis, check_runs, count_runs, each_once, sweep, variants

__all__ = ["SWEEP_KEYS", "load_sweep", "run_sweep_file", "sweep_from_dict", "sweeps_dir"]


def _budget(value):
    """One budget as ``Problem.build`` takes it: a fraction in (0, 1], bytes, "24GiB" or "inf"."""

    try:
        resolve_budget(value, 1)
    except SlackSwapError as exc:
        raise PydanticCustomError("budget", str(exc).removeprefix("budget: ")) from None
    return value


Budget = Annotated[Any, AfterValidator(_budget)]
Names = Annotated[str, Field(min_length=1)] | Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]


class BudgetRange(Schema):
    """``budgets = {start, stop, step}``: fractions of the keep-all peak, stop included."""

    start: Annotated[float, Field(gt=0, le=1)]
    stop: Annotated[float, Field(gt=0, le=1)]
    step: PosFloat

    @model_validator(mode="after")
    def _ordered(self):
        if self.stop < self.start:
            raise ValueError(f"stop ({self.stop}) must be >= start ({self.start})")
        return self

    def count(self) -> int:
        """How many budgets the range holds (known before the list is made)."""
        return int(round((self.stop - self.start) / self.step)) + 1

    def values(self) -> list[float]:
        return [round(self.start + i * self.step, 6) for i in range(self.count())]


class Variant(Schema):
    label: Annotated[str, Field(min_length=1)]
    planner: Annotated[str, Field(min_length=1)]
    params: dict[str, Any] = Field(default_factory=dict)


class SweepFile(Schema):
    """A sweep file (docs/experiments.md, "Sweep files (`data/sweeps/`)")."""

    name: str | None = None
    description: str = ""
    models: Names
    hardware: Names = ["a100-80gb"]
    budgets: Annotated[list[Budget], Field(min_length=1)] | BudgetRange
    planners: Annotated[str, Field(min_length=1)] | list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    planner_params: dict[str, dict[str, Any]] | None = None
    variants: Annotated[list[Variant], Field(min_length=1)] | None = None
    links: Annotated[str, Field(min_length=1)] | list[str | dict[str, Any]] | None = None
    overrides: dict[str, Any] | list[dict[str, Any]] | None = None
    parallel: Annotated[str, Field(min_length=1)] | dict[str, Any] | \
        Annotated[list[Annotated[str, Field(min_length=1)] | dict[str, Any]], Field(min_length=1)] | None = None
    regions: Annotated[str, Field(min_length=1)] | \
        Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)] | None = None
    region_swap: str = "save"
    workers: PosInt = 2
    by: Annotated[str, Field(min_length=1)] = "budget"
    bound: bool | dict[str, Any] = True

    @model_validator(mode="after")
    def _planners(self):
        if self.variants is not None and self.planner_params is not None:
            raise ValueError("give planner_params or variants, not both")
        if not self.planners and not self.variants:
            raise ValueError("no planner to run: give planners (a list of names) or [[variants]]")
        return self


SWEEP_KEYS = set(SweepFile.model_fields)


def sweeps_dir() -> Path:
    """The shipped sweep files (``data/sweeps/*.toml``)."""

    return data_dir() / "sweeps"


def load_sweep(path, max_runs: int | None = None) -> dict:
    """Read a sweep file (``data/sweeps/*.toml``) into ``sweep()`` keyword arguments plus ``name``,
    ``description`` and ``by`` (the ablation column). Unknown keys raise ``ConfigError``.
    ``budgets`` is a list or a table ``{start, stop, step}`` (stop included; more than
    ``max_runs`` budgets are refused before the list is made)."""
    p, doc = read_document(path, "toml", "sweep file", ConfigError)
    return sweep_from_dict(doc, p.name, p.stem, max_runs)


def sweep_from_dict(doc, where: str = "sweep", default_name: str = "sweep", max_runs: int | None = None) -> dict:
    """``load_sweep`` of an already-parsed document (``where`` names it in errors)."""

    f = parse(SweepFile, doc, where)
    _each_once(f, where)
    if isinstance(f.budgets, BudgetRange):
        check_runs(f.budgets.count(), max_runs, f"{where}: budgets")   # before the list is made
        budgets = f.budgets.values()
    else:
        budgets = list(f.budgets)
    params = f.planner_params
    if f.variants is not None:
        params = [(v.label, v.planner, dict(v.params)) for v in f.variants]
    out = {"name": f.name or default_name, "description": f.description, "models": f.models,
           "hardware": f.hardware, "budgets": budgets, "planners": f.planners,
           "planner_params": params, "link": f.links, "overrides": f.overrides, "parallel": f.parallel,
           "regions": f.regions, "region_swap": f.region_swap,
           "workers": f.workers, "bound": f.bound, "by": f.by}

    check_runs(count_runs(out["models"], out["hardware"], budgets, out["planners"], overrides=out["overrides"],
                          planner_params=params, link=out["link"], parallel=f.parallel, regions=f.regions),
               max_runs, where)   # before any check of planners
    check_regions_axis(f.regions, f.region_swap, where)
    pars = f.parallel if isinstance(f.parallel, list) else [f.parallel]
    for i, p in enumerate(pars):   # every setting read and checked now, not in the middle of a sweep
        as_parallel(p, f"{where}: parallel" + (f"[{i}]" if isinstance(f.parallel, list) else ""))
    try:  # validate now, not in the middle of a sweep
        for label, name, params in variants(out["planners"], out["planner_params"]):
            try:
                planners.get(name, **params)
            except SlackSwapError as exc:
                raise ConfigError(f"planner {label!r}: {exc}") from None
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return out


def _each_once(f: SweepFile, where: str) -> None:
    """Refuse a value given twice in one axis (two equal budgets, models, planners, variant labels,
    links or overrides): the sweep would compute the same runs twice and its table could not tell
    them apart. Raised before any run, naming the axis, the position and the value."""
    axes = {"models": f.models, "hardware": f.hardware, "planners": f.planners, "links": f.links,
            "overrides": f.overrides, "parallel": f.parallel, "regions": f.regions}
    if not isinstance(f.budgets, BudgetRange):
        axes["budgets"] = f.budgets
    if f.variants is not None:
        axes["variants"] = [v.label for v in f.variants]
    for axis, values in axes.items():
        each_once(values, axis, where, "variants[{}].label" if axis == "variants" else None)


def run_sweep_file(path, out=None, **kw):
    """Run a sweep file; write the rows as CSV to ``out`` when given. ``kw`` overrides
    ``sweep()`` arguments (e.g. ``workers``, ``executor``, ``cache``, ``progress``)."""

    cfg = load_sweep(path, max_runs=kw.get("max_runs", MAX_RUNS))
    if out is not None:   # before any run: a sweep never computes rows it cannot write

        check_output(out, "out")
    args = {k: v for k, v in cfg.items() if k not in ("name", "description", "by")}
    args.update(kw)

    df = sweep(**args)
    df.attrs["by"] = cfg["by"]
    if out is not None:
        out = user_path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(out, index=False)
    return df
