"""Named assumption sets (``data/assumptions/*.toml``): workload and hardware values under which the
published table is run, each with its source, and the ablation over them (docs/calibration.md,
"Assumption files"; ``slackswap reproduce --assumptions FILE``).

A file::

    name = "example"
    description = "what the set says"

    [workload.mlm_fraction]          # a field of calibration.workload.WORKLOAD
    value = 0.15625
    models = ["bert-large"]          # optional: without it, every model that takes the value
    source = "NVIDIA DeepLearningExamples BERT: max_predictions_per_seq 80 of 512"

    [hardware.compute_scale]         # a parameter of calibration.parameters.PARAMETERS
    value = 0.625
    source = "the slowest plausible compute (docs/calibration.md)"

``table(aset)`` gives, per published row, the ratio with our defaults and with the set, and
``ablation(aset)`` what each assumption does alone (added to the defaults) and what removing it
from the set costs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr

from .. import models
from ..core import hardware as hw_mod
from ..core.errors import ConfigError, UnknownNameError
from ..core.paths import data_dir, read_document
from ..core.schema import Schema, parse
from .calibrate import read_targets
from .parameters import PARAMETERS, bounds_for
from .search import RowEvaluator
from .workload import WORKLOAD, label

_Text = Annotated[str, Field(min_length=1)]


class _WorkloadEntry(Schema):
    value: StrictBool | StrictInt | StrictFloat | StrictStr
    models: Annotated[list[_Text], Field(min_length=1)] | None = None
    source: _Text


class _HardwareEntry(Schema):
    value: Annotated[float, Field(gt=0)]
    source: _Text


class _File(Schema):
    name: _Text
    description: str = ""
    workload: dict[str, _WorkloadEntry] = {}
    hardware: dict[str, _HardwareEntry] = {}


@dataclass(frozen=True)
class Item:
    """One assumption of a set: ``kind`` "workload" or "hardware", ``name = value`` for ``models``
    (None: every model that takes it), with its ``source``."""

    kind: str
    name: str
    value: object
    source: str
    models: tuple | None = None

    def __str__(self) -> str:
        where = f" for {', '.join(self.models)}" if self.models else ""
        v = f"{self.value / 1e9:g} GB/s" if self.kind == "hardware" and "bandwidth" in self.name else None
        return (f"{self.name}={v}" if v else label({self.name: self.value})) + where


@dataclass(frozen=True)
class AssumptionSet:
    name: str
    description: str
    items: tuple
    path: str

    def workload_for(self, spec, model: str, items=None) -> dict:
        """The spec overrides of ``items`` (default: all) for ``model`` (its ``spec``)."""
        out = {}
        for it in self.items if items is None else items:
            if it.kind != "workload" or (it.models is not None and model not in it.models):
                continue
            if it.models is None and not _takes(spec, it.name, it.value):
                continue
            out[it.name] = it.value
        return out

    def hardware_values(self, items=None) -> dict:
        return {it.name: it.value for it in (self.items if items is None else items) if it.kind == "hardware"}

    def applies(self, item: Item, spec, model: str) -> bool:
        return item.kind == "hardware" or bool(self.workload_for(spec, model, (item,)))


def _takes(spec, name, value) -> bool:
    try:
        spec.replace(**{name: value})
    except ConfigError:
        return False
    return True


def available() -> list[str]:
    """The named sets, sorted (the stems of ``data/assumptions/*.toml``)."""
    return sorted(p.stem for p in (data_dir() / "assumptions").glob("*.toml"))


def load(name_or_path) -> AssumptionSet:
    """A set by name (``data/assumptions/<name>.toml``) or path. Every key is checked: a bad one is
    a ``ConfigError`` naming the file and the key."""
    text = str(name_or_path)
    if not text.endswith(".toml") and "/" not in text:
        if text not in available():
            raise UnknownNameError("assumption set", text, available())
        path = data_dir() / "assumptions" / f"{text}.toml"
    else:
        path = Path(text)
    path, raw = read_document(path, "toml", "assumptions", ConfigError)
    doc = parse(_File, raw, path.name)
    items = []
    for key, e in doc.workload.items():
        if key not in WORKLOAD:
            raise ConfigError(f"{path.name}: workload.{key}: unknown workload assumption; allowed: {', '.join(WORKLOAD)}")
        if e.models is not None:
            for m in e.models:
                spec = models.spec(m) if m in models.available() else None
                if spec is None:
                    raise ConfigError(f"{path.name}: workload.{key}.models: unknown model {m!r}; allowed: "
                                      f"{', '.join(models.available())}")
                try:
                    spec.replace(**{key: e.value})
                except ConfigError as exc:
                    raise ConfigError(f"{path.name}: workload.{key}.value: {m}: {exc}") from None
        else:
            try:   # the value's type and range, as a spec checks it (on a model that may take it)
                models.spec("bert-large").replace(**{key: e.value})
            except ConfigError as exc:
                raise ConfigError(f"{path.name}: workload.{key}.value: {exc}") from None
        items.append(Item("workload", key, e.value, e.source, tuple(e.models) if e.models else None))
    for key, e in doc.hardware.items():
        if key not in PARAMETERS:
            raise ConfigError(f"{path.name}: hardware.{key}: unknown hardware parameter; allowed: {', '.join(PARAMETERS)}")
        items.append(Item("hardware", key, float(e.value), e.source))
    return AssumptionSet(doc.name, doc.description, tuple(items), str(path))


def outside_plausible(aset: AssumptionSet, hardware: str = "a100-80gb") -> list[str]:
    """The hardware values of ``aset`` outside their plausible range on ``hardware`` (one line each)."""
    hw = hw_mod.load(hardware)
    out = []
    for it in aset.items:
        if it.kind == "hardware":
            lo, hi = bounds_for(it.name, hw)
            if not lo * (1 - 1e-9) <= it.value <= hi * (1 + 1e-9):
                out.append(f"{it.name} = {it.value:.6g} is outside its plausible range [{lo:.4g}, {hi:.4g}]")
    return out


def _evaluator(targets, hardware, planner_params):
    rows = read_targets(None) if targets is None else targets
    return RowEvaluator(rows, hw_mod.load(hardware) if isinstance(hardware, str) else hardware, planner_params)


def table(aset: AssumptionSet, targets=None, hardware="a100-80gb", planner_params=None, models=None,
          tol: float = 0.002, rev: RowEvaluator | None = None):
    """Per target row (default: the published table): the target, the simulated value with our
    defaults and with every assumption of ``aset``, both differences, and whether each is within
    ``tol`` (relative)."""
    import pandas as pd  # lazy: start-up cost (pandas)

    rev = rev or _evaluator(targets, hardware, planner_params)
    hwv = aset.hardware_values()
    rows = []
    for i, t in enumerate(rev.targets):
        if models and t.model not in models:
            continue
        w = aset.workload_for(rev.specs[i], t.model)
        d, a = rev.value(i, {}, {}), rev.value(i, w, hwv)
        rows.append({"model": t.model, "budget": t.budget, "paper": t.value, "defaults": d,
                     "assumptions": a, "defaults_diff": d - t.value, "assumptions_diff": a - t.value,
                     "within": "yes" if math.isfinite(a) and abs(a / t.value - 1) <= tol else "no",
                     "assumed": label(w) + ("" if not hwv else "; " + ", ".join(
                         str(it) for it in aset.items if it.kind == "hardware"))})
    return pd.DataFrame(rows)


def ablation(aset: AssumptionSet, targets=None, hardware="a100-80gb", planner_params=None, models=None,
             rev: RowEvaluator | None = None):
    """One row per (target row, assumption that applies to it): the value with that assumption
    alone on top of our defaults (``alone``, and ``alone_moves`` = alone - defaults) and with every
    other assumption of the set but that one (``without``, and ``its_share`` = all - without)."""
    import pandas as pd  # lazy: start-up cost (pandas)

    rev = rev or _evaluator(targets, hardware, planner_params)
    rows = []
    for i, t in enumerate(rev.targets):
        if models and t.model not in models:
            continue
        spec = rev.specs[i]
        d = rev.value(i, {}, {})
        full = rev.value(i, aset.workload_for(spec, t.model), aset.hardware_values())
        for it in aset.items:
            if not aset.applies(it, spec, t.model):
                continue
            rest = tuple(x for x in aset.items if x is not it)
            alone = rev.value(i, aset.workload_for(spec, t.model, (it,)), aset.hardware_values((it,)))
            without = rev.value(i, aset.workload_for(spec, t.model, rest), aset.hardware_values(rest))
            rows.append({"model": t.model, "assumption": str(it), "defaults": d, "alone": alone,
                         "alone_moves": alone - d, "all": full, "without": without, "its_share": full - without})
    return pd.DataFrame(rows)


__all__ = ["AssumptionSet", "Item", "ablation", "available", "load", "outside_plausible", "table"]
