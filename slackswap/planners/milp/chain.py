"""The milp planner on simple chains, recompute only: the checkpointing recursion as plan and
proof (``planners._revolve``; docs/milp.md, "Simple chains, recompute only")."""

from __future__ import annotations

import math
from dataclasses import replace

from ...core.graph import Graph
from ...core.plan import Decision, Plan, SolveInfo, Status
from ...timeline import simulate
from .. import _revolve

#: the recursion's work, ``(K + 2) * n**3 / 6`` table entries (``K`` the most held units that
#: fit, ``_revolve._held_max``), at most this (chain(200) at 0.5 of its peak, 1.4e8 entries: the
#: planner takes 5.8 s on the 2-core development machine, docs/journal/milp-recompute-only-2026-12-04.md);
#: above it the planner takes its other paths
CHAIN_MAX_WORK = 2e8

PLAN_SPACE = "every KEEP/RECOMPUTE plan, any hold points"


def applies(problem, allow_swap: bool, allow_recompute: bool) -> list[int] | None:
    """The chain's tensor ids when the chain path applies: recompute allowed, no SWAP possible
    (``allow_swap`` off, or no planning tensor swappable), a simple chain
    (``_revolve.simple_chain``) and the recursion's work within ``CHAIN_MAX_WORK``."""
    if not allow_recompute:
        return None
    g = problem.graph
    if allow_swap and any(g.tensors[t].swappable for t in problem.planning_ids):
        return None
    xs = _revolve.simple_chain(problem)
    if xs is None:
        return None
    n = len(xs) - 1
    sizes = [g.tensors[x].bytes for x in xs[1:n]]
    unit = math.gcd(*sizes)
    free = problem.budget_bytes - g.tensors[xs[0]].bytes
    if not math.isfinite(free):      # no limit: keep-all, no recursion (``chain_plan``)
        return xs
    held = min(sum(sizes) // unit, max(int(free // unit), 0))
    if (held + 2) * n ** 3 / 6 > CHAIN_MAX_WORK:
        return None
    return xs


def chain_plan(problem, xs: list[int], planner: str, params, wall) -> Plan | None:
    """The optimal plan and its proof (status OPTIMAL, bound = objective), INFEASIBLE when the
    recursion finds nothing that fits, or None when the simulated plan does not confirm the
    recursion's value (then the caller's other paths decide)."""
    if not math.isfinite(problem.budget_bytes):
        sol = _revolve.ChainSolution(0.0, frozenset(range(1, len(xs) - 1)), {})
    else:
        sol = _revolve.solve(_revolve.problem_needs(problem, xs))
    if not math.isfinite(sol.reruns):
        return Plan({t: Decision.KEEP for t in problem.planning_ids}, planner=planner, params=params,
                    problem_key=problem.key,
                    info=SolveInfo(Status.INFEASIBLE, wall_s=wall(), message=(
                        "no plan fits the budget: the checkpointing recursion on this simple chain finds "
                        f"none; proof among {PLAN_SPACE} (docs/milp.md, \"Simple chains, recompute only\")")))
    dec, hold = _revolve.chain_plan(problem, xs, sol)
    plan = Plan(dec, hold_points=hold, planner=planner, params=params, problem_key=problem.key)
    r = simulate(problem, plan, detail=False)
    bound = problem.ideal_step_s + sol.reruns
    if not r.fits or abs(r.step_time_s - bound) > 1e-9 * max(1.0, bound):
        return None
    levels = "multi-level" if sol.multilevel else "single-level"
    return plan.with_info(status=Status.OPTIMAL, objective=r.step_time_s, lower_bound=min(bound, r.step_time_s), gap=0.0,
                          wall_s=wall(), message=(
                              f"simple chain, recompute only: the checkpointing recursion's optimum, {levels} "
                              f"({sol.reruns:g} s of re-runs); optimum and bound among {PLAN_SPACE} "
                              "(docs/milp.md, \"Simple chains, recompute only\")"))


def without_swaps(problem):
    """``problem`` with every tensor unswappable: the same plans without SWAP, simulated alike
    (the same problem key), and nothing else. The planner solves this one under
    ``allow_swap=False``, so that every bound it computes (the capacity bound, the aggregated
    relaxation, which frees memory by SWAP only where a tensor is swappable) holds among plans
    without SWAP and charges recomputation for all the memory they free (docs/milp.md, "Status,
    warm start and what is proven")."""
    g = problem.graph
    if not any(t.swappable for t in g.tensors):
        return problem
    ng = Graph(g.name, g.ops, tuple(replace(t, swappable=False) for t in g.tensors), g.static_bytes, g.spec)
    return replace(problem, graph=ng)     # the same key: it names sizes and producers, not switches
