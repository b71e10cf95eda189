"""The ``milp`` planner on a pipeline stage (docs/milp.md, "Pipeline stages").

The exact model describes one micro-batch's timeline; a pipeline stage runs ``m`` micro-batches
under 1F1B with up to ``in_flight`` of them holding their activations at once, one shared
decision per tensor (docs/timeline.md, "Pipeline stages (1F1B)"). The planner therefore:

1. takes its warm start as on one GPU (keep-all, recompute-all and the registered heuristics,
   each judged by the pipeline's simulation);
2. solves the ``milp`` planner itself on the ONE-micro-batch problem (same graph and costs, no
   pipeline) at one-micro-batch budgets found by bisection between the smallest feasible
   budget and the stage's budget (the stage's budget first, at most ``PIPELINE_ROUNDS`` solves):
   each solution's decisions (and hold points) are judged by the pipeline's simulation; one
   that fits raises the low end, one that does not, or no solution, lowers the high end;
3. returns the fastest plan that fits, with the certified pipeline bound of
   ``bounds.pipeline`` (via ``bounds.lower_bound``) and the gap between them: OPTIMAL only when
   that gap is within ``mip_rel_gap``, else TIME_LIMIT when the time limit ended the solves,
   else FEASIBLE; INFEASIBLE when the bound proves that no
   shared plan fits; NO_PLAN_FOUND when none was found and none is proven.
"""

from __future__ import annotations

import math
import time

from ... import bounds
from ...bounds.pipeline import keep_rows
from ...core.errors import SlackSwapError
from ...core.plan import Decision, Plan, Status
from ...timeline import simulate
from ...timeline.problem import Problem
from ..base import make_plan
from .clock import MIN_TIME_LIMIT_S

#: one-micro-batch MILP solves of the bisection, at most (the stage's budget is the first)
PIPELINE_ROUNDS = 6


def one_micro_batch(problem, budget_bytes: float) -> Problem:
    """The stage's graph and costs as a one-GPU problem (no pipeline: one micro-batch's timeline,
    its own keep-all peak) under ``budget_bytes``."""
    return Problem.from_graph(problem.graph, problem.costs, float(budget_bytes), problem.hardware)


def plan_pipeline(planner, problem, warm, src: str, wall, deadline: float | None) -> Plan:
    """Steps 1-3 of the module docstring for ``planner`` (a ``MILPPlanner``) on the pipelined
    ``problem``, from the warm start ``warm`` (a Plan that fits, or None) of source ``src``."""
    t0 = time.perf_counter() - wall()
    bound, how = bounds.lower_bound(problem)
    ids = problem.planning_ids
    if math.isinf(bound):
        return Plan({t: Decision.KEEP for t in ids}, planner=planner.name, params=planner.params,
                    problem_key=problem.key).with_info(
            status=Status.INFEASIBLE, wall_s=wall(), message=f"no shared plan fits the budget: {how}")
    best, best_s, best_r, label = None, math.inf, None, ""
    if warm is not None:
        r = simulate(problem, warm, detail=False)
        if r.fits:
            best, best_s, best_r, label = warm, r.step_time_s, r, f"warm start ({src})"
    exact = len(ids) <= planner.max_exact_tensors
    rows = keep_rows(problem) if exact else []
    budget = float(problem.budget_bytes)
    # exact: bisect the margin taken off the in-flight rows' right-hand sides (0 first); beyond:
    # the one-micro-batch budget (the stage's first)
    if exact:
        lo, hi = 0.0, budget
    else:   # a one-micro-batch budget at or above its keep-all peak gives keep-all: the warm start's
        lo = float(problem.min_feasible_bytes)
        hi = max(lo, min(budget, one_micro_batch(problem, math.inf).keep_all_peak - 1.0))
    solves, tried, stopped = 0, set(), False
    for i in range(PIPELINE_ROUNDS):
        if best is not None and _gap(best_s, bound) <= planner.mip_rel_gap and not (planner.write_lp and not solves):
            break       # proven (write_lp asks for a model: one solve all the same)
        if deadline is not None and deadline - time.perf_counter() < MIN_TIME_LIMIT_S:
            stopped = True      # too little time left for another solve
            break
        x = math.floor(lo if exact and i == 0 else hi if i == 0 else 0.5 * (lo + hi))
        if x in tried or not lo <= x <= hi:
            break
        tried.add(x)
        if exact:
            cand = _solve_one(planner, problem, budget, deadline,
                              [(f"pipe.mem[{r}]", {t: v / budget for t, v in coefs.items()}, (rhs - x) / budget)
                               for r, (coefs, rhs) in enumerate(rows)], solves)
        else:
            cand = _solve_one(planner, problem, x, deadline, [], solves)
        if cand is _NO_TIME:
            stopped = True
            break
        solves += 1
        if cand is None:            # no solution: less margin, or more one-micro-batch memory
            if exact:
                hi = x - 1
            else:
                lo = x + 1
            continue
        r = simulate(problem, cand, detail=False)
        if r.fits and r.step_time_s < best_s:
            best, best_s, best_r = cand, r.step_time_s, r
            label = (f"exact model with the in-flight rows less {x} B" if exact
                     else f"milp at one-micro-batch budget {x} B")
        if exact:                   # fits: a smaller margin may be faster; else a larger one
            lo, hi = (lo, x - 1) if r.fits else (x + 1, hi)
        else:
            lo, hi = (x, hi) if r.fits else (lo, x)
    note = f"{solves} one-micro-batch solves; bound: {how}"
    if best is None:
        return Plan({t: Decision.KEEP for t in ids}, planner=planner.name, params=planner.params,
                    problem_key=problem.key).with_info(
            status=Status.NO_PLAN_FOUND, lower_bound=bound, wall_s=wall(),
            message=f"no shared plan found that fits the pipeline's budget ({note})")
    gap = _gap(best_s, bound)
    status = (Status.OPTIMAL if gap <= planner.mip_rel_gap else Status.TIME_LIMIT if stopped
              else Status.FEASIBLE)
    plan = make_plan(problem, dict(best.decisions), planner.name, planner.params, t0,
                     hold_points=best.hold_points, d2h_order=best.d2h_order, issue_points=best.issue_points,
                     status=status, message=f"{label}; {note}", result=best_r)
    return plan.with_info(lower_bound=min(bound, best_s), gap=gap, wall_s=wall())


_NO_TIME = object()     # ``_solve_one``: too little time left to start a solve


def _solve_one(planner, problem, limit: float, deadline: float | None, rows, solves: int = 0):
    """The ``milp`` planner's plan of the one-micro-batch problem at ``limit`` bytes, with the
    ``rows`` (``(name, {tensor: coefficient}, rhs)``: ``sum coefficient * keep <= rhs``) added to
    its exact model, as a plan of the stage (its decisions, hold points and D2H order; its issue
    points are one micro-batch's and are left to the simulator's default), None when it has
    none, ``_NO_TIME`` when less than ``MIN_TIME_LIMIT_S`` is left before ``deadline``. With
    rows: without a warm start, cutoff or chain recursion (a one-micro-batch plan need not
    satisfy the rows). ``write_lp`` is passed to the first solve (``solves == 0``) only: its
    exact model, with the rows, is written there (the one-GPU rule: none beyond
    ``max_exact_tensors``)."""
    params = dict(planner.params)
    if planner.write_lp and solves:     # write_lp: the first solve's model only
        params["write_lp"] = None
    if rows:
        params.update(warm_start=False, cutoff=False, chain_recursion=False)
    if deadline is not None:
        left = deadline - time.perf_counter()
        if left < MIN_TIME_LIMIT_S:
            return _NO_TIME
        params["time_limit_s"] = left
    try:
        sub = one_micro_batch(problem, limit)
        inner = type(planner)(**params)
        inner._keep_rows = rows
        plan = inner.plan(sub)
    except SlackSwapError:
        return None
    if plan.info.status not in (Status.OPTIMAL, Status.FEASIBLE, Status.TIME_LIMIT):
        return None
    return Plan(dict(plan.decisions), hold_points=plan.hold_points, d2h_order=plan.d2h_order,
                problem_key=problem.key)


def _gap(step_s: float, bound: float) -> float:
    return max(0.0, (step_s - bound) / step_s) if step_s > 0 else 0.0
