"""Sensitivity surface: throughput ratio over (compute efficiency x link bandwidth) (docs/calibration.md).

For each model, ``sensitivity_grid`` scales the hardware's matmul and attention efficiency curves
by ``compute_scale`` (``calibrate.PARAMETERS["compute_scale"]``) and sets the host link bandwidth
(both directions), then records the planner's throughput ratio and the certified ceiling
``ideal step / bounds.lower_bound`` (no plan by any planner does better in the simulator). The
figure is ``report.calibration_figures.sensitivity_figure``.
"""

from __future__ import annotations

import concurrent.futures as cf
import itertools

from .. import bounds, planners
from ..core import hardware as hw_mod
from ..core.limits import parse_budget
from ..timeline import simulate
from ..timeline.problem import Problem
from .calibrate import apply
from .options import check_sensitivity

COLUMNS = ("model", "budget", "compute_scale", "bandwidth", "ideal_step_s", "ratio", "bound_ratio")


def _point(model: str, hardware: str, budget, planner: str, scale: float, bandwidth: float, bound: bool) -> dict:
    hw = apply(hw_mod.load(hardware), {"compute_scale": scale, "bandwidth": bandwidth})
    p = Problem.build(model, hw, budget)
    r = simulate(p, planners.get(planner).plan(p), detail=False)
    lb = bounds.lower_bound(p)[0] if bound else float("nan")
    return {"model": model, "budget": budget, "compute_scale": scale, "bandwidth": bandwidth,
            "ideal_step_s": p.ideal_step_s, "ratio": r.throughput_ratio if r.fits else 0.0,
            "bound_ratio": p.ideal_step_s / lb if bound and lb > 0 else float("nan")}


def sensitivity_grid(models, hardware: str = "a100-80gb", budget=0.5, compute_scales=(0.5, 0.75, 1.0, 1.25),
                     bandwidths=(12.5e9, 25e9, 50e9), planner: str = "slack", bound: bool = True,
                     workers: int = 1):
    """One row per (model, compute_scale, bandwidth): ``COLUMNS``. ``bandwidths`` in bytes/s.
    ``workers > 1`` runs the points in processes."""
    import pandas as pd  # lazy: start-up cost (pandas)

    opts = check_sensitivity(models, compute_scales, bandwidths, bound, workers)   # before any work
    parse_budget(budget, "sensitivity.budget")   # as Problem.build reads it, in every point
    hw_mod.load(hardware)                         # an unknown preset or file: here, not in a worker
    planners.get(planner)
    models, scales, bws = opts.models, [float(s) for s in opts.compute_scales], [float(b) for b in opts.bandwidths]
    todo = [(m, hardware, budget, planner, s, b, bound) for m, s, b in itertools.product(models, scales, bws)]
    if workers == 1:
        rows = [_point(*a) for a in todo]
    else:
        with cf.ProcessPoolExecutor(workers) as ex:
            rows = list(ex.map(_point, *zip(*todo, strict=True)))
    return pd.DataFrame(rows, columns=list(COLUMNS))
