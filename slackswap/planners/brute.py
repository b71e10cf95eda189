"""Exhaustive search over every keep/swap/recompute assignment: the oracle for tiny problems.

Every assignment (3^k at most; a tensor that is not swappable or not recomputable has fewer
choices) is judged by the simulator with its default issue points (docs/timeline.md 3) and
without hold points: OPTIMAL and INFEASIBLE are among single-level plans, like the MILP's
(docs/milp.md, "Status, warm start and what is proven"; ``scripts/multilevel_gain.py`` (a script of commit 40df6bb) measures how often a multi-level plan
does better, by ``milp(hold_points=True)``). The fastest plan that fits wins (step times within the simulator's relative time
tolerance are equal); ties go to fewer swaps, then fewer recomputes, then the lexicographically
smallest decision vector (tensor ids ascending; keep < swap < recompute).
"""

from __future__ import annotations

import itertools
import time

from pydantic import Field

from ..core.errors import SlackSwapError
from ..core.plan import Decision, Plan, SolveInfo, Status
from ..core.schema import NonNegInt, Schema
from ..timeline import simulate
from ..timeline.simulate import time_tolerance
from .base import Parameterised, Tags, register

_ORDER = {Decision.KEEP: 0, Decision.SWAP: 1, Decision.RECOMPUTE: 2}


@register("brute")
class BrutePlanner(Parameterised):
    """``brute(max_tensors=12, allow_swap=True, allow_recompute=True)``."""

    name = "brute"
    tags = Tags(exact=True, supports_swap=True, supports_recompute=True, deterministic=True)

    class Params(Schema):
        max_tensors: NonNegInt = Field(12, description="refuse problems with more planning tensors than this "
                                                       "(the search tries up to 3^k assignments)")
        allow_swap: bool = Field(True, description="consider SWAP for swappable tensors")
        allow_recompute: bool = Field(True, description="consider RECOMPUTE for recomputable tensors")

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
        best, best_key, n = None, None, 0
        tol = time_tolerance(problem.costs)
        for combo in itertools.product(*choices):
            n += 1
            plan = Plan(dict(zip(ids, combo, strict=False)), problem_key=problem.key)
            r = simulate(problem, plan, detail=False)
            if not r.fits:
                continue
            key = (r.step_time_s, combo.count(Decision.SWAP), combo.count(Decision.RECOMPUTE),
                   tuple(_ORDER[d] for d in combo))
            if best_key is None or _better(key, best_key, tol):
                best, best_key = combo, key
        wall = time.perf_counter() - t0
        size = {"plans": n}
        if best is None:
            dec = {t: c[-1] for t, c in zip(ids, choices, strict=False)}
            return Plan(dec, planner=self.name, params=self.params, problem_key=problem.key,
                        info=SolveInfo(Status.INFEASIBLE, wall_s=wall, model_size=size,
                                       message=f"no plan fits the budget ({n} plans simulated)"))
        return Plan(dict(zip(ids, best, strict=False)), planner=self.name, params=self.params, problem_key=problem.key,
                    info=SolveInfo(Status.OPTIMAL, objective=best_key[0], lower_bound=best_key[0], gap=0.0,
                                   wall_s=wall, model_size=size,
                                   message=f"best of {n} plans (default issue points)"))


def _better(key, best, tol: float) -> bool:
    """Faster by more than ``tol``, or as fast within ``tol`` and smaller on the tie-breaks (so
    the choice does not depend on the unit of time)."""
    if key[0] < best[0] - tol:
        return True
    return abs(key[0] - best[0]) <= tol and key[1:] < best[1:]
