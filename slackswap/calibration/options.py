"""The options of ``calibrate``, ``sensitivity_grid`` and the robustness functions, declared once
with their types and ranges (``core.schema``), and checked before any work. The command line
passes its options to the same checks, so an option and the API argument it maps to give the
same line (docs/errors.md, "Calibration, sensitivity and robustness")::

    calibrate.tol: expected a finite number; got nan
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from ..core.errors import SlackSwapError
from ..core.schema import (
    Distinct,
    NonEmpty,
    NonNegFloat,
    NonNegInt,
    PosFloat,
    PosInt,
    Schema,
    parse,
)

#: ``robustness --samples`` / ``samples=`` above this is refused unless ``max_samples`` raises it
MAX_SAMPLES = 10_000
ENGINES = ("compute", "d2h", "h2d", "latency")

Names = Annotated[list[str], NonEmpty, Distinct]


def _profile(v):
    if v == 1:
        raise PydanticCustomError("profile", "must be 0 (no scan) or >= 2")
    return v


class CalibrateOptions(Schema):
    params: Names
    bounds: dict[str, tuple[float, float]] | None = None
    grid: PosInt
    profile: Annotated[NonNegInt, AfterValidator(_profile)]
    max_evals: PosInt
    tol: NonNegFloat


class SearchOptions(Schema):
    params: Names
    workload: Names
    max_size: NonNegInt
    grid: PosInt
    refine: NonNegInt
    max_evals: PosInt
    tol: NonNegFloat


class SensitivityOptions(Schema):
    models: Names
    compute_scales: Annotated[list[PosFloat], NonEmpty, Distinct]
    bandwidths: Annotated[list[PosFloat], NonEmpty, Distinct]
    bound: bool
    workers: PosInt


class RobustnessOptions(Schema):
    noise: Annotated[list[Annotated[float, Field(ge=0, lt=1)]], NonEmpty, Distinct]
    samples: PosInt
    max_samples: PosInt
    seed: NonNegInt
    correlation: Annotated[float, Field(ge=0, le=1)]
    engines: Annotated[list[Literal[ENGINES]], NonEmpty, Distinct]


def _plain(value):
    """A NumPy scalar as the Python number it holds (``np.float64(0.5)`` -> ``0.5``)."""
    return value.item() if type(value).__module__ == "numpy" and hasattr(value, "item") else value


def _listed(value):
    """A tuple (a default), a range, a NumPy array or a pandas Series as the list the schema
    declares; a set in a fixed order; NumPy scalars as Python numbers."""
    if isinstance(value, (set, frozenset)):
        value = sorted(value, key=str)
    elif hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    elif isinstance(value, (tuple, range)):
        value = list(value)
    return [_plain(v) for v in value] if isinstance(value, list) else _plain(value)


def _check(schema, entry: str, kw: dict):
    return parse(schema, {k: _listed(v) for k, v in kw.items()}, exc=SlackSwapError, prefix=(entry,))


def check_calibrate(params, bounds, grid, profile, max_evals, tol) -> CalibrateOptions:
    if isinstance(bounds, dict):
        bounds = {k: tuple(v) if isinstance(v, list) else v for k, v in bounds.items()}
    return _check(CalibrateOptions, "calibrate", dict(params=params, bounds=bounds, grid=grid, profile=profile,
                                                      max_evals=max_evals, tol=tol))


def check_search(params, workload, max_size, grid, refine, max_evals, tol) -> SearchOptions:
    return _check(SearchOptions, "search_assumptions", dict(params=params, workload=workload, max_size=max_size,
                                                            grid=grid, refine=refine, max_evals=max_evals, tol=tol))


def check_sensitivity(models, compute_scales, bandwidths, bound, workers) -> SensitivityOptions:
    models = [models] if isinstance(models, str) else models
    return _check(SensitivityOptions, "sensitivity", dict(models=models, compute_scales=compute_scales,
                                                          bandwidths=bandwidths, bound=bound, workers=workers))


def check_robustness(noise, samples, seed, correlation, engines, max_samples=MAX_SAMPLES) -> RobustnessOptions:
    noise = [noise] if isinstance(noise, (int, float)) and not isinstance(noise, bool) else noise
    opts = _check(RobustnessOptions, "robustness", dict(noise=noise, samples=samples, max_samples=max_samples,
                                                        seed=seed, correlation=correlation, engines=engines))
    if opts.samples > opts.max_samples:
        raise SlackSwapError(f"robustness.samples: must be <= max_samples ({opts.max_samples}; raise it with "
                             f"--max-samples or max_samples=); got {samples!r}")
    return opts
