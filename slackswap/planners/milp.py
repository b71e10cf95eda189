"""Exact MILP planner: keep / swap / recompute and prefetch issue points (docs/milp.md).

One formulation (``_milp_formulation.build``) of the timeline contract (docs/timeline.md) as a
max-plus system with big-M switches, written once against a backend-neutral model and solved by
HiGHS (default), pulp-CBC or cvxpy. For the plan it returns, the objective equals
``simulate(problem, plan).step_time_s`` when ``costs.duplex_factor == 1`` (see docs/milp.md for
the argument and for what happens otherwise).

>>> from slackswap import planners
>>> planners.get("milp", time_limit_s=10).tags.exact
True
"""

from __future__ import annotations

import math
import time

from ..errors import SlackSwapError
from ..plan import Decision, Plan, SolveInfo, Status
from ..timeline import simulate
from ._milp_backends import BACKENDS, solve
from .base import Tags, available, get, int_param, register

_REL = 1e-6
_PRESOLVE_MAX_NNZ = 50_000
"""``presolve="auto"``: HiGHS presolve only on exact models up to this many nonzeros. On larger
ones HiGHS 1.16's MIP presolve alone outlasts the solve: ``tiny`` cut to 1 layer (155,187
nonzeros) is solved to optimality in 47-78 s without it and not within 20 s with it
(docs/milp.md section 9); on the small test table it is 2.5 times faster with it."""


@register("milp")
class MilpPlanner:
    """``milp(solver="highs", time_limit_s=None, mip_rel_gap=1e-9, threads=None, seed=0,
    warm_start=True, write_lp=None, allow_swap=True, allow_recompute=True, max_tree_nodes=4000,
    max_exact_tensors=40, aggregate_time_s=10, presolve="auto")``.

    Problems with more than ``max_exact_tensors`` planning tensors are beyond the exact formulation
    (it grows exponentially along residual streams, docs/milp.md section 7): the planner then solves
    the aggregated relaxation (``_milp_aggregate.py``; its LP, then its MILP for at most
    ``aggregate_time_s`` seconds), returns the better of the warm start and the aggregated MILP's
    decisions as judged by the simulator, with the certified lower bound and the proven gap
    between them: status OPTIMAL when that gap is at most ``mip_rel_gap``, else FEASIBLE; the
    message says which bound and which incumbent."""

    name = "milp"
    tags = Tags(exact=True, supports_swap=True, supports_recompute=True, deterministic=True)

    def __init__(self, solver: str = "highs", time_limit_s: float | None = None, mip_rel_gap: float = 1e-9,
                 threads: int | None = None, seed: int = 0, warm_start: bool = True, write_lp=None,
                 allow_swap: bool = True, allow_recompute: bool = True, max_tree_nodes: int = 4000,
                 max_exact_tensors: int = 40, aggregate_time_s: float = 10.0, presolve="auto"):
        self.solver, self.time_limit_s, self.mip_rel_gap = solver, time_limit_s, mip_rel_gap
        self.threads, self.seed, self.warm_start, self.write_lp = threads, seed, warm_start, write_lp
        self.allow_swap, self.allow_recompute, self.max_tree_nodes = allow_swap, allow_recompute, max_tree_nodes
        self.max_exact_tensors, self.aggregate_time_s = max_exact_tensors, aggregate_time_s
        self.presolve = presolve

    @property
    def params(self) -> dict:
        return {"solver": self.solver, "time_limit_s": self.time_limit_s, "mip_rel_gap": self.mip_rel_gap,
                "threads": self.threads, "seed": self.seed, "warm_start": self.warm_start,
                "allow_swap": self.allow_swap, "allow_recompute": self.allow_recompute,
                "max_exact_tensors": self.max_exact_tensors, "aggregate_time_s": self.aggregate_time_s,
                "presolve": self.presolve}

    def _check(self):
        if self.solver not in BACKENDS:
            raise SlackSwapError(f"milp.solver: must be one of {', '.join(BACKENDS)}; got {self.solver!r}")
        if self.time_limit_s is not None and not (isinstance(self.time_limit_s, (int, float)) and self.time_limit_s > 0):
            raise SlackSwapError(f"milp.time_limit_s: must be a positive number of seconds or None, got {self.time_limit_s!r}")
        int_param("milp", "max_exact_tensors", self.max_exact_tensors)
        if isinstance(self.aggregate_time_s, bool) or not (isinstance(self.aggregate_time_s, (int, float))
                                                           and self.aggregate_time_s >= 0):
            raise SlackSwapError(f"milp.aggregate_time_s: must be a number of seconds >= 0 (0: LP bound only), "
                                 f"got {self.aggregate_time_s!r}")
        if self.presolve not in (True, False, "auto"):
            raise SlackSwapError(f"milp.presolve: must be True, False or 'auto', got {self.presolve!r}")
        if not (isinstance(self.mip_rel_gap, (int, float)) and 0 <= self.mip_rel_gap < 1):
            raise SlackSwapError(f"milp.mip_rel_gap: must be in [0, 1), got {self.mip_rel_gap!r}")

    def build(self, problem, deadline: float | None = None):
        """The built model (``.model`` has ``to_lp(path)`` / ``to_mps(path)``)."""
        from ._milp_formulation import build

        return build(problem, self.allow_swap, self.allow_recompute, self.max_tree_nodes, deadline=deadline)

    def plan(self, problem) -> Plan:
        """Build, solve and check; the whole call honours ``time_limit_s`` (docs/milp.md, section 5):
        the solver gets what is left after the build minus a reserve for the post-processing, and a
        build that outlives the limit returns the warm start with status TIME_LIMIT."""
        from ._milp_formulation import BuildTimeout

        t0 = time.perf_counter()
        self._check()
        if self.solver == "cvxpy":
            try:
                import cvxpy  # noqa: F401
            except ImportError:
                raise SlackSwapError("milp solver 'cvxpy' needs cvxpy: pip install slackswap[cvxpy]") from None
        wall = lambda: time.perf_counter() - t0  # noqa: E731
        limit = self.time_limit_s
        # the post-processing (fixed-integer LP, two simulations) gets 10% of the limit
        deadline = None if limit is None else t0 + 0.9 * limit
        warm = self._warm(problem) if self.warm_start else None
        if len(problem.planning_ids) > self.max_exact_tensors:
            return self._beyond_exact(problem, warm, wall, deadline)
        try:
            built = self.build(problem, deadline)
        except BuildTimeout:
            return self._fallback(problem, warm, None, None, wall,
                                  f"time limit {limit} s reached while building the model")
        model = built.model
        if self.write_lp:
            (model.to_mps if str(self.write_lp).endswith(".mps") else model.to_lp)(self.write_lp)
        start = None
        if warm is not None:
            start = {}
            for t, d in warm.decisions.items():
                start[built.keep[t]] = float(d is Decision.KEEP)
                if t in built.swap:
                    start[built.swap[t]] = float(d is Decision.SWAP)
                if t in built.rec:
                    start[built.rec[t]] = float(d is Decision.RECOMPUTE)
        size = model.size()
        t_solve = time.perf_counter()
        presolve = self.presolve if self.presolve != "auto" else size["nonzeros"] <= _PRESOLVE_MAX_NNZ
        res = solve(model, self.solver, time_limit_s=None, mip_rel_gap=self.mip_rel_gap,
                    threads=self.threads, seed=self.seed, start=start, deadline=deadline, presolve=presolve)
        solve_wall = time.perf_counter() - t_solve
        note = "; ".join(built.narrowed)
        if res.status == "infeasible":
            dec = warm.decisions if warm is not None else {t: Decision.KEEP for t in problem.planning_ids}
            msg = "no plan fits the budget (the MILP is infeasible)" + (f"; narrowed model: {note}" if note else "")
            return Plan(dec, planner=self.name, params=self.params, problem_key=problem.key,
                        info=SolveInfo(Status.INFEASIBLE, wall_s=wall(), model_size=size, message=msg))
        # with a narrowed model the solver's bound covers only the plans that model allows
        bound = None if res.bound is None or built.narrowed else res.bound * built.tau
        if res.x is None:
            if res.status != "time_limit" and warm is None:
                return Plan({t: Decision.KEEP for t in problem.planning_ids}, planner=self.name, params=self.params,
                            problem_key=problem.key, info=SolveInfo(Status.ERROR, wall_s=wall(), model_size=size,
                                                                    message=res.message or "no solution"))
            return self._fallback(problem, warm, bound, size, wall,
                                  "time limit before the solver found a plan: the warm start"
                                  + (f" ({res.message})" if res.message else ""))
        # the polishing LP passes the whole model to HiGHS again: only when the time left could
        # plausibly hold it (at least half what the solve call took), else use the simulated time
        end = None if limit is None else t0 + limit
        polish = end is None or end - time.perf_counter() > 0.5 * solve_wall
        plan, obj = self._extract(problem, built, res.x, end, polish=polish)
        r = simulate(problem, plan, detail=False)
        if obj is None:   # no time left to polish: the simulated time (exact when duplex_factor == 1)
            obj = r.step_time_s
        if warm is not None and res.status != "optimal":
            rw = simulate(problem, warm, detail=False)
            if rw.fits and (not r.fits or rw.step_time_s < r.step_time_s):
                plan, r, obj = warm, rw, rw.step_time_s
        msgs = [note] if note else []
        status = Status.OPTIMAL if res.status == "optimal" else Status.TIME_LIMIT
        if problem.costs.duplex_factor < 1:
            msgs.append(f"duplex_factor {problem.costs.duplex_factor} < 1: the MILP times H2D at the full-duplex "
                        "rate (a relaxation); objective = simulated time")
            obj = r.step_time_s
            if status is Status.OPTIMAL:
                status = Status.FEASIBLE
        elif not r.fits or abs(obj - r.step_time_s) > _REL * max(1.0, abs(r.step_time_s)):
            msgs.append(f"model/simulator mismatch: MILP {obj!r} s, simulator {r.step_time_s!r} s")
            obj = r.step_time_s
            status = Status.FEASIBLE if r.fits else Status.ERROR
        if status is Status.OPTIMAL and bound is not None:
            bound = min(bound, obj)
        if not built.narrowed and status is Status.OPTIMAL:
            bound = obj if bound is None else bound
        else:
            bound = _certified(problem, bound)
            if r.fits and bound is not None:
                bound = min(bound, obj)
        gap = _gap(obj, bound)
        if status is Status.FEASIBLE and res.status == "optimal" and r.fits and gap is not None \
                and gap <= max(self.mip_rel_gap, 1e-9):
            # duplex < 1: the relaxation's optimum is a bound, and this plan's simulated time meets it
            status = Status.OPTIMAL
            msgs.append("the simulated time equals the relaxation's optimum: proven optimal")
        return plan.with_info(status=status, objective=obj, lower_bound=bound, gap=gap,
                              wall_s=wall(), model_size=size, message="; ".join(msgs))

    def _beyond_exact(self, problem, warm, wall, deadline):
        """Too large for the exact model: the best of the warm start and the aggregated MILP's
        decisions, judged by the simulator, with the certified bound of the aggregated relaxation
        (its LP, then its MILP dual bound within ``aggregate_time_s``) and the proven gap."""
        from ..bounds import aggregate_bound, lower_bound

        n = len(problem.planning_ids)
        if warm is None:
            warm = self._warm(problem)
        bound, how = lower_bound(problem, lp_max_tensors=0)
        msg = [f"{n} planning tensors > max_exact_tensors={self.max_exact_tensors}: exact model not built"]
        best, obj = None, None
        if warm is not None:
            r = simulate(problem, warm, detail=False)
            if r.feasible and r.fits:
                best, obj = warm, r.step_time_s
        size = {}
        left = self.aggregate_time_s if deadline is None else min(self.aggregate_time_s, deadline - time.perf_counter())
        if left > 0.5 and (obj is None or _gap(obj, bound) > self.mip_rel_gap):
            t_agg = time.perf_counter()
            extra, agg, res = aggregate_bound(problem, integral=True, time_limit_s=left,
                                              mip_rel_gap=max(self.mip_rel_gap, 1e-6))
            if agg is not None:
                size = agg.model.size()
                if problem.ideal_step_s + extra > bound:
                    bound = problem.ideal_step_s + extra
                    how = f"dual bound of the aggregated MILP after {time.perf_counter() - t_agg:.1f} s"
                cand = self._aggregate_plan(problem, agg, res)
                if cand is not None:
                    rc = simulate(problem, cand, detail=False)
                    if rc.feasible and rc.fits and (obj is None or rc.step_time_s < obj):
                        best, obj = cand, rc.step_time_s
                        msg.append("incumbent: the aggregated MILP's decisions")
        msg.append(f"bound: {how}")
        if best is None:
            msg.append("no candidate plan fits")
            dec = warm.decisions if warm is not None else {t: Decision.KEEP for t in problem.planning_ids}
            return Plan(dec, planner=self.name, params=self.params, problem_key=problem.key,
                        info=SolveInfo(Status.INFEASIBLE, lower_bound=bound, wall_s=wall(), model_size=size,
                                       message="; ".join(msg)))
        plan = Plan(best.decisions, issue_points=best.issue_points, d2h_order=best.d2h_order,
                    planner=self.name, params=self.params, problem_key=problem.key)
        gap = _gap(obj, bound)
        status = Status.OPTIMAL if gap is not None and gap <= self.mip_rel_gap else Status.FEASIBLE
        return plan.with_info(status=status, objective=obj, lower_bound=min(bound, obj), gap=gap,
                              wall_s=wall(), model_size=size, message="; ".join(msg))

    def _aggregate_plan(self, problem, agg, res):
        """The decisions of the aggregated MILP's incumbent as a plan (None when it has none or
        they use a choice the planner forbids)."""
        x = getattr(res, "x", None)
        if x is None:
            return None
        dec = _decisions(problem, x, agg.swap, agg.rec)
        if (not self.allow_swap and Decision.SWAP in dec.values()) or \
                (not self.allow_recompute and Decision.RECOMPUTE in dec.values()):
            return None
        return Plan(dec, planner=self.name, params=self.params, problem_key=problem.key)

    def _fallback(self, problem, warm, bound, size, wall, message):
        """TIME_LIMIT with the warm start (or ERROR when there is none)."""
        if warm is None:
            return Plan({t: Decision.KEEP for t in problem.planning_ids}, planner=self.name, params=self.params,
                        problem_key=problem.key, info=SolveInfo(Status.ERROR, wall_s=wall(), model_size=size or {},
                                                                message=message + "; no warm start"))
        r = simulate(problem, warm, detail=False)
        obj = r.step_time_s if r.fits else None
        bound = _certified(problem, bound)
        return warm.with_info(status=Status.TIME_LIMIT, objective=obj, lower_bound=bound, gap=_gap(obj, bound),
                              wall_s=wall(), model_size=size or {}, message=message)

    def _extract(self, problem, built, xval, deadline=None, polish: bool = True):
        dec, issue = _decisions(problem, xval, built.swap, built.rec), {}
        for (t, k), col in built.issue.items():
            if xval[col] > 0.5 and dec[t] is Decision.SWAP:
                issue[t] = k
        plan = Plan(dec, issue_points=issue, planner=self.name, params=self.params, problem_key=problem.key)
        obj = self._polish(built, xval, deadline) if polish else None
        return plan, None if obj is None else obj * built.tau

    def _polish(self, built, xval, deadline=None) -> float | None:
        """Fix the integer columns and re-solve the LP: the tight (max-plus) times of the plan."""
        from ._milp_backends import solve_highs

        m = built.model
        saved = (list(m.lb), list(m.ub), list(m.integer))
        try:
            for i, isint in enumerate(m.integer):
                if isint:
                    v = float(round(xval[i]))
                    m.lb[i] = m.ub[i] = v
                    m.integer[i] = False
            res = solve_highs(m, deadline=deadline)
        finally:
            m.lb, m.ub, m.integer = saved
        if res.status != "optimal":
            return None if res.status == "time_limit" else m.objective_value(xval)
        return res.objective

    def _warm(self, problem):
        """The warm start: ``slack`` if registered (and swapping is allowed), else the best fitting
        of keep-all and recompute-where-allowed."""
        cands = []
        if self.allow_swap and self.allow_recompute and "slack" in available():
            try:
                cands.append(get("slack").plan(problem))
            except SlackSwapError:
                pass
        g = problem.graph
        ids = problem.planning_ids
        cands.append(Plan({t: Decision.KEEP for t in ids}, problem_key=problem.key))
        if self.allow_recompute:
            cands.append(Plan({t: Decision.RECOMPUTE if g.tensors[t].recomputable else Decision.KEEP for t in ids},
                              problem_key=problem.key))
        best, bt = None, math.inf
        for p in cands:
            p = Plan(p.decisions, issue_points=p.issue_points if self.allow_swap else {}, planner=self.name,
                     params=self.params, problem_key=problem.key)
            if not self.allow_swap and p.ids(Decision.SWAP):
                continue
            r = simulate(problem, p, detail=False)
            if r.fits and r.step_time_s < bt:
                best, bt = p, r.step_time_s
        return best


def _decisions(problem, x, swap: dict, rec: dict) -> dict:
    """Read the decisions from column values ``x``: SWAP / RECOMPUTE where their binary column is
    set (``swap`` / ``rec``: tensor id -> column), else KEEP."""
    dec = {}
    for t in problem.planning_ids:
        if t in swap and x[swap[t]] > 0.5:
            dec[t] = Decision.SWAP
        elif t in rec and x[rec[t]] > 0.5:
            dec[t] = Decision.RECOMPUTE
        else:
            dec[t] = Decision.KEEP
    return dec


def _certified(problem, bound):
    """The larger of the solver's bound and the certified capacity bound (``slackswap.bounds``): a
    stopped solve still reports a proven gap."""
    from ..bounds import capacity_bound

    cap = capacity_bound(problem)
    return cap if bound is None else max(bound, cap)


def _gap(obj, bound):
    if obj is None or bound is None or not obj:
        return None
    return max(0.0, (obj - bound) / abs(obj))
