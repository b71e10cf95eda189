"""Planning for checkpointed regions with a planner that plans by its own model
(docs/regions.md, "Planning for checkpointed regions").

A problem made with ``Problem.with_regions`` is judged as selective activation checkpointing of its
regions runs a plan (docs/regions.md, "Checkpointed regions"). The planners that search with the
simulator (``slack``, ``brute``, ``capuchin``) judge their candidates that way themselves
(``plans_regions = True``). Every other planner plans by its own model of the default rules
(``dp-checkpoint``, ``chen-*``, the MILP's exact model, the baselines): ``plan_for_regions`` runs
it on the same problem without regions, first at the budget, then, while its plan does not fit
under the regions, at budgets lowered by bisection (``ROUNDS``; when even the plan at the smallest feasible
budget does not fit, first ``GRID`` budgets scanned from the top), each plan judged by the region
simulation at the true budget; the fastest that fits wins, then a greedy pass turns recomputed
tensors back to KEEP while the region simulation says that is faster and still fits
(``FLIPS`` simulations at most). The plan's status, objective and peak are its region simulation;
a plan with hold points is judged without them (a checkpointed region is replayed once, so hold
points cannot run), and a plan that swaps is judged with its swaps recomputed too (a SWAP
frees nothing in a region that saves it); no lower bound or gap is reported (docs/regions.md, "What is proven").
A planner with a ``time_limit_s`` (``milp``) keeps it for the whole call: each plan is given what is
left, and the search stops, keeping its best, when less than ``MIN_LEFT_S`` is left.
"""

from __future__ import annotations

import math
import time
import warnings

from ..core.errors import CapacityWarning, SlackSwapError
from ..core.plan import Decision, Plan, SolveInfo, Status
from ..timeline import simulate
from ..timeline.simulate import time_tolerance

#: bisection rounds on the planning budget, at most
ROUNDS = 12
#: the bisection stops when the interval is narrower than this fraction of the budget
WIDTH = 1e-3
#: budgets scanned, evenly between the floor and the budget, when the plan at the floor does not fit
GRID = 6
#: region simulations of the final keep-back pass, at most
FLIPS = 64
#: seconds of a time limit below which no further plan is asked for
MIN_LEFT_S = 2.0


_clock = time.perf_counter   # the time limit's clock (a test gives its own)


class _OutOfTime(Exception):
    """The planner's time limit is spent: no further plan."""


def plan_for_regions(run, problem, name: str, params: dict, time_limit_s: float | None = None) -> Plan:
    """The plan of ``run(problem without regions, at some budget) -> Plan`` judged and chosen under
    ``problem``'s regions (module docstring). Never raises for a plan that does not fit: the
    result is then INFEASIBLE, the least-peak candidate, with a message saying so.
    ``time_limit_s``: the whole call's, each plan asked for by ``run(p, seconds left)``."""
    t0 = _clock()
    deadline = None if time_limit_s is None else t0 + time_limit_s
    base = problem.without_regions()
    budget = problem.budget_bytes
    tol = time_tolerance(problem.costs)
    state = {"best": None, "least": None, "sims": 0, "plans": 0, "out": False}

    def judge(decisions: dict, at: float):
        plan = Plan(dict(decisions), problem_key=problem.key)
        r = simulate(problem, plan, detail=False)
        state["sims"] += 1
        if r.fits:
            b = state["best"]
            if b is None or r.step_time_s < b[0] - tol:
                state["best"] = (r.step_time_s, plan, r, at)
        elif state["least"] is None or r.peak_bytes < state["least"][0]:
            state["least"] = (r.peak_bytes, plan, r, at)
        return r

    def plan_at(b: float):
        left = None
        if deadline is not None:
            left = deadline - _clock()
            if state["plans"] and left < MIN_LEFT_S:   # the first plan gets the whole limit
                state["out"] = True
                raise _OutOfTime
        state["plans"] += 1
        p = base if b == budget else base.with_budget(int(b))
        with warnings.catch_warnings():   # the problem warned already; a lower budget needs less
            warnings.simplefilter("ignore", CapacityWarning)
            return run(p) if left is None else run(p, max(left, MIN_LEFT_S))

    def judge_both(decisions: dict, at: float) -> bool:
        """The plan, and (when it swaps) the plan with its swaps recomputed: a SWAP inside a
        region frees nothing with ``swap="save"``, and outside every region it is kept."""
        fits = judge(decisions, at).fits
        if any(d is Decision.SWAP for d in decisions.values()):
            rec = {t: (Decision.RECOMPUTE if tensors[t].recomputable else Decision.KEEP)
                   if d is Decision.SWAP else d for t, d in decisions.items()}
            fits = judge(rec, at).fits or fits
        return fits

    def try_at(b: float) -> bool:
        try:
            return judge_both(plan_at(b).decisions, b)
        except _OutOfTime:
            return False
        except SlackSwapError:   # a planner that refuses this budget: as if its plan did not fit
            return False

    tensors = problem.graph.tensors
    first = plan_at(budget)
    messages = [first.info.message] if first.info.message else []
    r = judge_both(first.decisions, budget)
    if not r and math.isfinite(budget):
        lo, hi = base.min_feasible_bytes, budget
        if not try_at(lo):
            # a plan that fits under the regions need not exist at every lower budget: scan
            # GRID budgets from the top for the highest whose plan fits, then bisect above it
            grid = sorted({lo + (hi - lo) * i // (GRID + 1) for i in range(1, GRID + 1)} - {lo, hi},
                          reverse=True)
            below = next((b for b in grid if try_at(b)), None)
            lo, hi = (below, next((b for b in reversed(grid) if b > below), hi)) if below is not None \
                else (hi, hi)
        for _ in range(ROUNDS):
            if hi - lo <= max(WIDTH * budget, 1) or state["out"]:
                break
            mid = (lo + hi) // 2
            if try_at(mid):
                lo = mid
            else:
                hi = mid
    if state["best"] is not None:
        _keep_back(problem, state, judge)
    wall = _clock() - t0
    where = problem.regions_text
    tried = f"{state['plans']} plan{'s' if state['plans'] != 1 else ''} under the default rules, " \
            f"{state['sims']} region simulations"
    if state["out"]:
        tried += f"; stopped by the time limit ({time_limit_s:g} s)"
    if state["best"] is None:
        _, plan, r, at = state["least"]
        return Plan(plan.decisions, planner=name, params=params, problem_key=problem.key,
                    info=SolveInfo(Status.INFEASIBLE, wall_s=wall, message=(
                        f"{where}: no plan fits the budget ({tried}; the least peak shown, planned at "
                        f"{_at(at, base)}): {r.reason}")))
    step, plan, r, at = state["best"]
    msg = f"{where}: planned at {_at(at, base)} ({tried})"
    if messages and at == budget:
        msg += f"; {messages[0]}"
    return Plan(plan.decisions, planner=name, params=params, problem_key=problem.key,
                info=SolveInfo(Status.FEASIBLE, objective=step, wall_s=wall, message=msg))


def _at(b: float, base) -> str:
    if not math.isfinite(b):
        return "no budget"
    return f"budget {int(b)} bytes ({b / base.keep_all_peak:.4f} of the keep-all peak)" if base.keep_all_peak \
        else f"budget {int(b)} bytes"


def _keep_back(problem, state, judge) -> None:
    """``keep_back`` on the best plan, each trial judged by ``judge`` (which keeps the best)."""
    step, plan, _, at = state["best"]
    keep_back(problem, dict(plan.decisions), step, lambda d: judge(d, at))


def keep_back(problem, decisions: dict, step: float, judge=None, limit: int = FLIPS):
    """Greedy: each recomputed (or swapped) tensor of ``decisions``, the slowest producer first
    (forward seconds; then the smaller tensor), turned to KEEP when the region
    simulation (``judge(decisions) -> SimResult``; default ``simulate`` on ``problem``) says the
    plan still fits and is faster; at most ``limit`` simulations. Returns ``(decisions, step,
    result of the last accepted change or None)``."""
    if judge is None:
        def judge(d):
            return simulate(problem, Plan(d, problem_key=problem.key), detail=False)
    fwd, tensors = problem.costs.fwd_s, problem.graph.tensors
    tol = time_tolerance(problem.costs)
    cand = sorted((t for t, d in decisions.items() if d is not Decision.KEEP),
                  key=lambda t: (-fwd[tensors[t].producer], tensors[t].bytes, t))
    dec, best = dict(decisions), None
    for t in cand[:limit]:
        trial = {**dec, t: Decision.KEEP}
        r = judge(trial)
        if r.fits and r.step_time_s < step - tol:
            dec, step, best = trial, r.step_time_s, r
    return dec, step, best


__all__ = ["FLIPS", "ROUNDS", "keep_back", "plan_for_regions"]
