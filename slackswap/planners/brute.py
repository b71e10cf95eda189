"""Exhaustive search over every keep/swap/recompute assignment: the oracle for tiny problems.

Every assignment (3^k at most; a tensor that is not swappable or not recomputable has fewer
choices) is judged by the simulator with its default issue points (docs/timeline.md 3) and
without hold points: OPTIMAL and INFEASIBLE are among single-level plans, like the MILP's
(docs/milp.md, "Status, warm start and what is proven"; ``scripts/multilevel_gain.py`` (a script of commit 40df6bb) measures how often a multi-level plan
does better, by ``milp(hold_points=True)``). The fastest plan that fits wins (step times within the simulator's relative time
tolerance are equal); ties go to fewer swaps, then fewer recomputes, then the lexicographically
smallest decision vector (tensor ids ascending; keep < swap < recompute).

``d2h_orders=True`` also tries every D2H order of each vector's swapped tensors (``k!`` plans for
``k`` swaps; production order first, then the other permutations in lexicographic order of
their production-order positions; an order ties with an earlier one of the same vector unless
faster by more than the tolerance): the oracle of ``milp``'s choice of the D2H order (docs/milp.md,
"The D2H order"). It refuses problems with more than ``max_order_swaps`` swappable planning
tensors.

On a problem with checkpointed regions (``Problem.with_regions``) every assignment is judged by
the region simulation (docs/regions.md, "Checkpointed regions"): OPTIMAL is then the optimum
over every assignment as that checkpointing runs it.
"""

from __future__ import annotations

import itertools
import time

from pydantic import Field

from ..core.errors import SlackSwapError
from ..core.plan import Decision, Plan, SolveInfo, Status
from ..core.schema import NonNegInt, Schema
from ..timeline import simulate
from ..timeline.schedule import default_d2h_order
from ..timeline.simulate import time_tolerance
from .base import Parameterised, Tags, register

_ORDER = {Decision.KEEP: 0, Decision.SWAP: 1, Decision.RECOMPUTE: 2}


@register("brute")
class BrutePlanner(Parameterised):
    """``brute(max_tensors=12, allow_swap=True, allow_recompute=True, d2h_orders=False, max_order_swaps=6)``."""

    name = "brute"
    tags = Tags(exact=True, supports_swap=True, supports_recompute=True, deterministic=True)
    plans_regions = True   # every assignment judged by the problem's simulate (docs/planners.md)

    class Params(Schema):
        max_tensors: NonNegInt = Field(12, description="refuse problems with more planning tensors than this "
                                                       "(the search tries up to 3^k assignments)")
        allow_swap: bool = Field(True, description="consider SWAP for swappable tensors")
        allow_recompute: bool = Field(True, description="consider RECOMPUTE for recomputable tensors")
        d2h_orders: bool = Field(False, description="also try every D2H order of the swapped tensors "
                                                    "(k! orders for k swaps)")
        max_order_swaps: NonNegInt = Field(6, description="with d2h_orders, refuse problems with more "
                                                          "swappable planning tensors than this")

    def plan(self, problem) -> Plan:
        t0 = time.perf_counter()
        ids = list(problem.planning_ids)
        if len(ids) > self.max_tensors:
            raise SlackSwapError(f"brute: problem has {len(ids)} planning tensors > max_tensors="
                                 f"{self.max_tensors}; exhaustive search is 3^k (use planner 'milp')")
        g = problem.graph
        choices = []
        for t in ids:
            c = [Decision.KEEP]
            if self.allow_swap and g.tensors[t].swappable:
                c.append(Decision.SWAP)
            if self.allow_recompute and g.tensors[t].recomputable:
                c.append(Decision.RECOMPUTE)
            choices.append(c)
        swappable = sum(Decision.SWAP in c for c in choices)
        if self.d2h_orders and swappable > self.max_order_swaps:
            raise SlackSwapError(f"brute: d2h_orders: problem has {swappable} swappable planning tensors > "
                                 f"max_order_swaps={self.max_order_swaps}; every order is k! plans per vector")
        best, best_key, best_order, n = None, None, None, 0
        tol = time_tolerance(problem.costs)
        for combo in itertools.product(*choices):
            dec = dict(zip(ids, combo, strict=False))
            swapped = default_d2h_order(g, [t for t, d in dec.items() if d is Decision.SWAP])
            orders = itertools.permutations(swapped) if self.d2h_orders and len(swapped) > 1 else [None]
            for order in orders:
                n += 1
                order = None if order is not None and list(order) == swapped else order
                plan = Plan(dec, d2h_order=order, problem_key=problem.key)
                r = simulate(problem, plan, detail=False)
                if not r.fits:
                    continue
                key = (r.step_time_s, combo.count(Decision.SWAP), combo.count(Decision.RECOMPUTE),
                       tuple(_ORDER[d] for d in combo))
                if best_key is None or _better(key, best_key, tol):
                    best, best_key, best_order = combo, key, order
        wall = time.perf_counter() - t0
        size = {"plans": n}
        if best is None:
            dec = {t: c[-1] for t, c in zip(ids, choices, strict=False)}
            return Plan(dec, planner=self.name, params=self.params, problem_key=problem.key,
                        info=SolveInfo(Status.INFEASIBLE, wall_s=wall, model_size=size,
                                       message=f"no plan fits the budget ({n} plans simulated)"))
        what = "default issue points, every D2H order" if self.d2h_orders else "default issue points"
        if problem.regions is not None:
            what = f"judged under {problem.regions_text}"
        return Plan(dict(zip(ids, best, strict=False)), d2h_order=best_order, planner=self.name, params=self.params,
                    problem_key=problem.key,
                    info=SolveInfo(Status.OPTIMAL, objective=best_key[0], lower_bound=best_key[0], gap=0.0,
                                   wall_s=wall, model_size=size, message=f"best of {n} plans ({what})"))


def _better(key, best, tol: float) -> bool:
    """Faster by more than ``tol``, or as fast within ``tol`` and smaller on the tie-breaks (so
    the choice does not depend on the unit of time)."""
    if key[0] < best[0] - tol:
        return True
    return abs(key[0] - best[0]) <= tol and key[1:] < best[1:]
