"""Certified lower bounds on the step time of ANY plan, and the gap of a plan to them.

``lower_bound(problem) -> (seconds, how)``:

1. **ideal** (always): every plan runs every forward and backward op once and the optimizer, on one
   compute stream: ``step >= sum fwd_s + sum bwd_s + optimizer_s`` (docs/timeline.md 1).
2. **LP relaxation** (problems with at most ``lp_max_tensors`` planning tensors): the linear
   relaxation of the exact MILP (docs/milp.md) with H2D timed at the full-duplex rate. The MILP's
   optimum is <= the simulated time of every plan (its feasible set contains every plan with every
   issue point, and a slower duplex rate only delays copies: the timeline is monotone, max-plus),
   so its relaxation is a bound too. Skipped when the MILP had to be narrowed (capped trees).

``gap(problem, result) = (step - bound) / step`` (the MIP-gap convention, 0 = proven optimal).
"""

from __future__ import annotations

import math
from dataclasses import replace


def lower_bound(problem, lp_max_tensors: int = 40) -> tuple[float, str]:
    """A certified lower bound (seconds) on ``simulate(problem, plan).step_time_s`` for every plan."""
    best, how = float(problem.ideal_step_s), "ideal step (every op once, no stall)"
    if len(problem.planning_ids) <= lp_max_tensors and math.isfinite(problem.budget_bytes):
        from .planners._milp_backends import solve_highs
        from .planners._milp_formulation import build

        p = problem
        if problem.costs.duplex_factor < 1:
            p = replace(problem, costs=replace(problem.costs, duplex_factor=1.0))
        try:
            built = build(p)
        except ValueError:
            return best, how
        if built.narrowed:
            return best, how
        res = solve_highs(built.model, relax=True)
        if res.status == "optimal" and res.objective is not None:
            lp = res.objective * built.tau * (1 - 1e-9)
            if lp > best:
                best, how = lp, "LP relaxation of the exact MILP"
    return best, how


def gap(problem, result, bound: float | None = None) -> float:
    """Relative gap of a ``SimResult`` to the lower bound: ``(step - lb) / step`` (inf if it does
    not fit)."""
    if not result.fits or not math.isfinite(result.step_time_s):
        return math.inf
    lb = lower_bound(problem)[0] if bound is None else bound
    return max(0.0, (result.step_time_s - lb) / result.step_time_s) if result.step_time_s > 0 else 0.0
