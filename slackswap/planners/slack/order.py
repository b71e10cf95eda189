"""The D2H order pass of the ``slack`` planner (``slack_planner.py``, step 9; docs/planners.md,
"slack"): other copy-out orders of the winning plan's swaps, judged by the simulator.

The swap pass and the search plan with copies out in production order (the simulator's default,
docs/timeline.md, "Forward lifetimes"). A long copy produced early then holds up a later, small
one that the backward pass needs first, or whose bytes a later step waits for. For the winner's
decisions and issue points this pass simulates, in order: **deadline first** (the tensor whose
first backward use comes first, by the highest op that saves it, goes first), **largest first**,
**smallest first**, then exchanges of two neighbours in the best order so far, first improvement,
until one sweep improves nothing or ``max_sims`` simulations are spent. An order is kept only when
it is faster than production order by more than the simulator's tolerance; none is tried when
the plan has no stall (the copies' order changes only the waits) or fewer than two swaps.
"""

from __future__ import annotations

from ...core.plan import Decision, Plan
from ...timeline import simulate
from ...timeline.schedule import default_d2h_order
from ...timeline.simulate import time_tolerance

ORDER_SIMS = 24
"""Simulations of the pass per ``plan`` call, at most (few beside the search's ``max_sims``,
1000 by default; none where the winner does not stall)."""


def better_order(problem, decisions: dict, issue_points: dict, result, max_sims: int = ORDER_SIMS):
    """``(order, result, label, sims)``: a D2H order of the swaps in ``decisions`` faster than
    production order (``result`` is the plan's simulation in production order) with its
    simulation and which rule found it, or ``(None, result, "", sims)`` when none was found."""
    # the cheap checks first: on the presets the winner has no stall and the pass ends here
    if max_sims <= 0 or not result.fits or result.stall_s <= 0:
        return None, result, "", 0
    tol = time_tolerance(problem.costs)
    g = problem.graph
    prod = default_d2h_order(g, [t for t, d in decisions.items() if d is Decision.SWAP])
    if len(prod) < 2 or result.stall_s <= tol:
        return None, result, "", 0
    pos = {t: i for i, t in enumerate(prod)}
    size = {t: g.tensors[t].bytes for t in prod}
    rules = (("deadline first", sorted(prod, key=lambda t: (-max(g.saved_by[t], default=-1), pos[t]))),
             ("largest first", sorted(prod, key=lambda t: (-size[t], pos[t]))),
             ("smallest first", sorted(prod, key=lambda t: (size[t], pos[t]))))
    best, best_r, label, sims, seen = None, result, "", 0, {tuple(prod)}

    def judge(order) -> bool:
        nonlocal best, best_r, sims
        key = tuple(order)
        if key in seen or sims >= max_sims:
            return False
        seen.add(key)
        sims += 1
        r = simulate(problem, Plan(decisions, issue_points=issue_points, d2h_order=key), detail=False)
        if r.feasible and r.fits and r.step_time_s < best_r.step_time_s - tol:
            best, best_r = key, r
            return True
        return False

    for name, order in rules:
        if judge(order):
            label = name
    improved = True
    while improved and sims < max_sims:
        improved = False
        cur = list(best or prod)
        for i in range(len(cur) - 1):
            trial = cur[:i] + [cur[i + 1], cur[i]] + cur[i + 2:]
            if judge(trial):
                if "neighbour" not in label:
                    label = (label + ", then " if label else "") + "neighbour exchanges"
                improved = True
                break
    return best, best_r, label, sims
