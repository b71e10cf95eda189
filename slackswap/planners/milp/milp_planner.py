"""Exact MILP planner: keep / swap / recompute and prefetch issue points (docs/milp.md).

One formulation (``slackswap.mip.formulation.build``) of the timeline contract (docs/timeline.md) as a
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
from dataclasses import replace
from importlib.util import find_spec
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field
from pydantic_core import PydanticCustomError

from ... import bounds  # bounds.aggregate_bound, ... looked up at call time (tests replace them)
from ...bounds import AGGREGATE_SOLVERS
from ...core.errors import SlackSwapError
from ...core.limits import parse_time_limit
from ...core.paths import check_output, prepare_output
from ...core.plan import Decision, Plan, SolveInfo, Status, validate
from ...core.schema import NonNegFloat, NonNegInt, PosInt, Schema
from ...mip.backends import BACKENDS, solve, solve_highs
from ...mip.formulation import BuildTimeout, build
from ...timeline import simulate
from ...timeline.pipeline import pipeline_of
from ..base import Parameterised, Tags, available, check_params, get, register
from ..dp import multilevel_plan
from . import chain as _chain_path
from . import incumbent as _improve  # incumbent.improve looked up at call time (tests replace it)
from .beyond import Settings, aggregate_plan, beyond_exact
from .clock import MIN_TIME_LIMIT_S, SOLVER_START_S, WARM_SHARE, Clock, Deadline, bound_fits
from .pipeline import plan_pipeline
from .solution import (  # noqa: F401 - re-exported: the planner's names as before
    AGGREGATE_PROOF_GAP,
    CHAIN_DEPTH,
    CHAIN_SEARCH_SHARE,
    _decisions,
    _gap,
    chain_search,
)

_REL = 1e-6
_PRESOLVE_MAX_NNZ = 250_000
"""``presolve="auto"``: HiGHS presolve only on exact models up to this many nonzeros
(docs/milp.md, "Time limit"; measured: docs/journal/milp-2026-12-03.md, "Time limit"): with it ``tiny`` with 2 layers (107,704 nonzeros) is proven optimal
in 147 s instead of 470 s and GPT-2 with 2 layers (85,855) in 247 s instead of not within 300 s;
on the 155,187-nonzero model of the previous formulation it outlasted the search."""
D2H_ORDER_MAX_SWAPS = 12
"""``d2h_order="auto"``: the exact model chooses the D2H order (one binary per pair of swappable
tensors, ``mip.formulation``, "d2h_order") up to this many swappable planning tensors, and keeps
production order above, where it slowed ``llama-7b`` with one layer (18) about twofold
(docs/milp.md, "The D2H order")."""
#: ``cutoff``: the solver searches below the warm start's time plus this relative margin (above
#: the solver's tolerances, so the warm start's own value is never pruned as "not better")
_CUTOFF_TOL = 1e-7
# the exact path improves its warm start (``improve``) above this many planning tensors: below,
# HiGHS proves the optimum in seconds whatever the start; above (GPT-2 at 3 layers, 50 tensors)
# slack's plan was the loose side of a 0.29% gap after 5 minutes
_IMPROVE_EXACT_MIN = 24
# up to SMALL_AGGREGATE_TENSORS planning tensors (either path) the aggregated MILP gets its release
# rows (``releases``: columns per swappable tensor and step that needs memory, `tiny` with 4 layers
# 728 -> 2,101) and at least SMALL_AGGREGATE_NODES nodes (``aggregate_nodes`` when larger): small,
# it is solved to optimality in seconds (`tiny` with 4 layers at 0.8: 38.022 us, against 37.999 us
# after 20 nodes; docs/milp.md, "Status, warm start and what is proven"); 10,000 rather than 2,000 since highspy solves it: HiGHS
# 1.16 proves GPT-2 3 layers at 0.9 after 7,904 nodes (3.7 s), scipy's HiGHS after 1,200
SMALL_AGGREGATE_TENSORS = 80
SMALL_AGGREGATE_NODES = 10000
# simulations of the incumbent search (``improve_sims=None``): up to SMALL_AGGREGATE_TENSORS planning
# tensors a simulation takes milliseconds, and the search from the aggregated MILP's decisions
# needs more than IMPROVE_SIMS to reach its end (`tiny` 4 layers at 0.5: 40.539 us after 500,
# 40.468 us, the aggregated MILP's bound, after 5,000: docs/journal/milp-2026-12-03.md, "Status, warm start and what is proven")
IMPROVE_SIMS = 500
SMALL_IMPROVE_SIMS = 5000
# the aggregated MILP's safety cap in seconds (``aggregate_time_s=None``): 2,000 nodes took up to
# about two minutes at `tiny` 4 layers on the 2-core machine (1,264 nodes at 0.5: 50-100 s); a cap
# that stops them makes the bound depend on machine speed
AGGREGATE_TIME_S = 60.0
SMALL_AGGREGATE_TIME_S = 300.0
# the shortest time limit at which SCIP runs beside the planner (``_background_scip``): its root on
# the presets takes 5-30 s (llama-7b 0.2: cuts until 5.7 s, heuristics until 30.6 s); under a
# 10 s limit it proved nothing more (16 of the 23 full-size settings either way) and, two
# planners at a time in the optimality-gap sweep, took the cores from the search (bert-large 0.3:
# proven gap 0.06% -> 0.88%); at 60 s 22 of 23 against 20 (docs/journal/benchmarks-milp-2026-12.md)
BACKGROUND_SCIP_MIN_S = 30.0


def _time_limit(value):
    """``time_limit_s`` read by ``core.limits.parse_time_limit`` (as ``--time-limit`` is), at least
    ``MIN_TIME_LIMIT_S``; None: no limit."""
    try:
        return parse_time_limit(value, "time_limit_s", allow_none=True, minimum=MIN_TIME_LIMIT_S)
    except SlackSwapError as e:   # the field is named once, by the schema's error line
        raise PydanticCustomError("time_limit", "{text}", {"text": str(e).removeprefix("time_limit_s: ")}) from None


def _presolve(value):
    if value is True or value is False or value == "auto":
        return value
    raise PydanticCustomError("literal_error", "must be True, False or 'auto'")


@register("milp")
class MilpPlanner(Parameterised):
    """Exact MILP planner: keep / swap / recompute and prefetch issue points (docs/milp.md).

    Its parameters are declared once, in ``Params`` (docs/planners.md, "Parameters", and
    ``slackswap planners milp`` list them).

    The warm start (and fallback incumbent) is the fastest fitting plan of keep-all, recompute-all
    and every registered heuristic that respects ``allow_swap`` / ``allow_recompute``. The exact
    model chooses the D2H order too (``d2h_order``: ``"auto"``, up to ``D2H_ORDER_MAX_SWAPS``
    swappable tensors; above, its optimum and bound are among plans with D2H in production order
    unless a bound for every plan meets it: docs/milp.md, "The D2H order", "Status, warm start and
    what is proven"); INFEASIBLE means no plan fits (proven), NO_PLAN_FOUND that none was found.

    Problems with more than ``max_exact_tensors`` planning tensors are beyond the exact formulation
    (it grows exponentially along residual streams, docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps"): the planner then solves
    the aggregated relaxation (``slackswap.mip.aggregate``; its LP, then its MILP for
    ``aggregate_nodes`` branch-and-bound nodes, a work limit, with ``aggregate_time_s`` seconds as
    a safety cap; None: ``AGGREGATE_TIME_S``, ``SMALL_AGGREGATE_TIME_S`` up to
    ``SMALL_AGGREGATE_TENSORS`` planning tensors; ``aggregate_nodes=None``: no node limit, the
    MILP runs until that cap or its share of the time limit; ``aggregate_solver``: HiGHS,
    ``"scip"``, SCIP through OR-Tools, whose bound rises faster at llama-7b's low budgets but
    whose 20 nodes take 46-64 s there, or ``"highs+scip"``, both at once with the larger bound and
    both solvers' plans: docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps"; ``"auto"``, the default: HiGHS, and under a
    ``time_limit_s`` of at least ``BACKGROUND_SCIP_MIN_S`` on a model above
    ``SMALL_AGGREGATE_TENSORS`` planning tensors SCIP on the same MILP in a second thread,
    without a node limit, from the start of the aggregated path until the limit, its bound and
    plan kept where better: ``_background_scip``), returns the better of the warm start and the
    aggregated MILP's decisions as judged by the simulator, with the certified lower bound and
    the proven gap between them: status OPTIMAL when that gap is at most ``mip_rel_gap``, else
    FEASIBLE; the message says which bound and which incumbent. Before that, while the gap is
    open, it looks for a better incumbent (``improve``): slack's switch variants (with
    ``warm_start``), then at most ``improve_sims`` simulations of a local search over two-tensor
    moves (0: off; None: ``IMPROVE_SIMS``, and ``SMALL_IMPROVE_SIMS`` up to
    ``SMALL_AGGREGATE_TENSORS`` planning tensors, or until the time limit while SCIP runs beside
    the planner), within the time limit.
    With ``cutoff`` (HiGHS) the exact MILP searches only below the warm start's time: nodes whose
    bound reaches it are pruned (docs/milp.md, "Status, warm start and what is proven"). Above ``_IMPROVE_EXACT_MIN`` planning
    tensors the exact path first solves the aggregated MILP (``_aggregate_work``), whose
    decisions replace the warm start when faster, then, while its bound leaves a gap, solves it
    again with its tight rows up to ``SMALL_AGGREGATE_TENSORS`` planning tensors (as beyond the
    exact model: ``_tight_aggregate``) and improves the warm start as above (from the warm start
    and the MILPs' decisions, relinked), and while a gap is still open after that solves it a third
    time with the chain rows too (``CHAIN_DEPTH``); when the bound is within ``AGGREGATE_PROOF_GAP`` of the warm start
    the exact model is not built (``_aggregate_proof``), else it is built with that bound as a
    floor of its step time (``add_floor``).
    ``aggregate_rows`` adds the aggregated relaxation's rows to the exact model, on its decisions:
    they cut off no plan and strengthen its LP relaxation (docs/milp.md, "Constraints (names as in the LP file)"); not with
    ``solver="cpsat"`` (its time grid). ``hold_points`` searches multi-level plans too (an op
    re-run more than once, regenerated tensors freed between stages: docs/timeline.md, "Backward: recompute, prefetch, gradients",
    docs/milp.md, "Potential steps"): the plan may carry hold points, and OPTIMAL / INFEASIBLE then cover
    every plan, single- or multi-level, in the D2H orders the model describes."""

    name = "milp"
    tags = Tags(exact=True, supports_swap=True, supports_recompute=True, deterministic=True)

    class Params(Schema):
        solver: Literal[BACKENDS] = Field("highs", description="the MILP backend")
        time_limit_s: Annotated[float | None, BeforeValidator(_time_limit)] = Field(None, description=(
            f"seconds for the whole plan call, at least {MIN_TIME_LIMIT_S:g} (docs/milp.md, \"Time limit\"); "
            "None: no limit"))
        mip_rel_gap: Annotated[float, Field(ge=0, lt=1)] = Field(1e-9, description=(
            "relative gap at which the solver stops and the status is OPTIMAL"))
        threads: PosInt | None = Field(None, description="solver threads (None: the solver's default)")
        seed: NonNegInt = Field(0, description="the solver's random seed")
        warm_start: bool = Field(True, description=(
            "start from the fastest fitting plan of keep-all, recompute-all and the registered heuristics"))
        write_lp: str | Path | None = Field(None, description="write the exact model as an LP file to this path")
        allow_swap: bool = Field(True, description="allow SWAP decisions")
        allow_recompute: bool = Field(True, description="allow RECOMPUTE decisions")
        max_tree_nodes: PosInt = Field(4000, description=(
            "recompute trees enumerated per tensor when the exact model is built, at most"))
        max_exact_tensors: NonNegInt = Field(40, description=(
            "above this many planning tensors the aggregated relaxation is solved instead of the exact model"))
        aggregate_nodes: NonNegInt | None = Field(20, description=(
            "branch-and-bound nodes of the aggregated MILP, a work limit (None: no node limit)"))
        aggregate_time_s: NonNegFloat | None = Field(None, description=(
            "the aggregated MILP's safety cap in seconds (None: AGGREGATE_TIME_S, SMALL_AGGREGATE_TIME_S "
            "up to SMALL_AGGREGATE_TENSORS planning tensors)"))
        presolve: Annotated[Literal[True, False, "auto"], BeforeValidator(_presolve)] = Field("auto", description=(
            "HiGHS presolve; 'auto': only on exact models up to _PRESOLVE_MAX_NNZ nonzeros"))
        improve_sims: NonNegInt | None = Field(None, description=(
            "simulations of the incumbent search while a gap is open (0: off; None: IMPROVE_SIMS, "
            "SMALL_IMPROVE_SIMS up to SMALL_AGGREGATE_TENSORS planning tensors)"))
        cutoff: bool = Field(True, description="the exact MILP searches only below the warm start's time (HiGHS)")
        aggregate_rows: bool = Field(True, description=(
            "add the aggregated relaxation's rows to the exact model (not with solver='cpsat')"))
        hold_points: bool = Field(False, description="search multi-level plans too (plans may carry hold points)")
        d2h_order: Literal["auto", "production", "any"] = Field("auto", description=(
            "the D2H order of the exact model: 'any', a decision (the optimum over every order); 'production', "
            "production order only; 'auto': 'any' up to D2H_ORDER_MAX_SWAPS swappable tensors"))
        chain_recursion: bool = Field(True, description=(
            "on a simple chain without SWAP, solve by the exact checkpointing recursion instead: plan and "
            "proof over every plan, hold points included (docs/milp.md, \"Simple chains, recompute only\")"))
        aggregate_solver: Literal[AGGREGATE_SOLVERS + ("auto",)] = Field("auto", description=(
            "solver of the aggregated MILP; 'auto': HiGHS, with SCIP beside it under a time limit of at least "
            "BACKGROUND_SCIP_MIN_S on a model above SMALL_AGGREGATE_TENSORS planning tensors"))

    def _checked(self) -> None:
        if self.write_lp:   # an output like any other: checked before any work
            check_output(self.write_lp, "milp: write_lp")

    def _set(self, p: Params) -> None:
        self._store(p)

    def _check(self):
        """Parse the parameters (also after an attribute was changed) by ``Params``."""
        self._set(check_params("milp", self.Params, **self.params))
        if self.write_lp:   # an output like any other: checked before any work, parents created
            check_output(self.write_lp, "milp: write_lp")

    def build(self, problem, deadline: float | None = None):
        """The built model (``.model`` has ``to_lp(path)`` / ``to_mps(path)``)."""

        # CP-SAT puts every continuous column on a time grid, where the relaxation's equalities
        # (bytes as fractions of the largest excess) have no solution: its model has no agg rows
        built = build(problem, self.allow_swap, self.allow_recompute, self.max_tree_nodes, deadline=deadline,
                      aggregate_rows=self.aggregate_rows and self.solver != "cpsat",
                      hold_points=self.hold_points, d2h_any=self._d2h_any(problem))
        for name, coefs, rhs in getattr(self, "_keep_rows", ()):   # a pipeline stage's (pipeline.py)
            if all(t in built.keep for t, b in coefs.items() if b):
                built.model.add_le(name, [(b, built.keep[t]) for t, b in coefs.items() if b], rhs)
        return built

    def _d2h_any(self, problem) -> bool:
        """Whether the exact model chooses the D2H order (``d2h_order``): always with ``"any"``,
        never with ``"production"``, with ``"auto"`` up to ``D2H_ORDER_MAX_SWAPS`` tensors that can
        be swapped (one binary per pair of them)."""
        if self.d2h_order != "auto":
            return self.d2h_order == "any"
        g = problem.graph
        return sum(self.allow_swap and g.tensors[t].swappable for t in problem.planning_ids) <= D2H_ORDER_MAX_SWAPS

    def plan(self, problem) -> Plan:
        """Build, solve and check; the whole call honours ``time_limit_s`` (docs/milp.md, "Time limit"):
        warm-start heuristics are started within their share of it, the solver gets what is left
        after the build minus a reserve for the post-processing, and a build that outlives the
        limit returns the warm start with status TIME_LIMIT."""

        self._check()
        clock = Clock(self.time_limit_s)
        self._bound_memo = {"clock": clock}
        if self.solver == "cvxpy":
            try:
                import cvxpy  # noqa: F401
            except ImportError:
                raise SlackSwapError("milp solver 'cvxpy' needs cvxpy: pip install slackswap[cvxpy]") from None
        if self.solver in ("scip", "cpsat") or "scip" in self.aggregate_solver:
            try:
                import ortools  # noqa: F401
            except ImportError:
                which = f"milp solver {self.solver!r}" if self.solver in ("scip", "cpsat") \
                    else f"milp aggregate_solver {self.aggregate_solver!r}"
                raise SlackSwapError(f"{which} needs ortools: pip install slackswap[ortools]") from None
        wall = clock.wall
        limit = self.time_limit_s
        if not self.allow_swap:     # bounds among the plans without SWAP (chain.without_swaps)
            problem = _chain_path.without_swaps(problem)
        if pipeline_of(problem) is not None:    # a pipeline stage: bisected one-micro-batch solves
            warm, src = self._warm(problem, clock.at(WARM_SHARE)) if self.warm_start else (None, "")
            return plan_pipeline(self, problem, warm, src, wall, clock.solve_deadline)
        if self.chain_recursion and not self.write_lp:     # write_lp asks for the model: build it
            xs = _chain_path.applies(problem, self.allow_swap, self.allow_recompute)
            done = _chain_path.chain_plan(problem, xs, self.name, self.params, wall) if xs else None
            if done is not None:
                return done
        # the post-processing (fixed-integer LP, two simulations) gets POST_SHARE of the limit
        deadline = clock.solve_deadline
        warm, src = self._warm(problem, clock.at(WARM_SHARE)) if self.warm_start else (None, "")
        if len(problem.planning_ids) > self.max_exact_tensors:
            return beyond_exact(problem, warm, src, self._settings(problem), Deadline(deadline), wall)
        if warm is not None and len(problem.planning_ids) > _IMPROVE_EXACT_MIN:
            proof, warm, src = self._aggregate_proof(problem, warm, src, wall, deadline, clock.at(WARM_SHARE))
            if proof is not None:
                return proof
        try:
            built = self.build(problem, deadline)
        except BuildTimeout:
            return self._fallback(problem, warm, src, None, None, wall,
                                  f"time limit {limit} s reached while building the model")
        model = built.model
        floor = self._bound_memo.get("agg")
        if floor is not None and floor > problem.ideal_step_s:
            add_floor(built, problem, floor)
        if self.write_lp:
            lp = str(prepare_output(self.write_lp))
            (model.to_mps if lp.endswith(".mps") else model.to_lp)(lp)
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
        if not clock.before(deadline, SOLVER_START_S):
            return self._fallback(problem, warm, src, None, size, wall,
                                  f"time limit {limit} s: too little time left after the build to start the solver")
        t_solve = time.perf_counter()
        presolve = self.presolve if self.presolve != "auto" else size["nonzeros"] <= _PRESOLVE_MAX_NNZ
        cutoff = self._cutoff(problem, warm, built.tau)
        res = solve(model, self.solver, time_limit_s=None, mip_rel_gap=self.mip_rel_gap,
                    threads=self.threads, seed=self.seed, start=start, deadline=deadline, presolve=presolve,
                    cutoff=cutoff)
        solve_wall = time.perf_counter() - t_solve
        note = "; ".join(built.narrowed)
        if res.status == "infeasible":
            why = (f"memory no plan can avoid exceeds the budget (row {model.infeasible[0]} has no decision "
                   "left and fails)" if model.infeasible
                   else "the MILP has no plan below the warm start's time (cutoff)" if cutoff is not None
                   else "the MILP is infeasible")
            if built.narrowed and not model.infeasible:   # the narrowed model leaves plans out: no proof
                return self._fallback(problem, warm, src, None, size, wall,
                                      f"the narrowed model is infeasible ({note})", Status.FEASIBLE)
            if warm is not None and cutoff is not None and warm.d2h_order is not None and _production_only(built):
                return self._fallback(problem, warm, src, None, size, wall,
                                      "no plan with D2H in production order is faster than the warm start, "
                                      "whose D2H order is its own (cutoff)", Status.FEASIBLE)
            if warm is not None:     # cannot happen if the model is exact: say so rather than hide it
                return self._fallback(problem, warm, src, None, size, wall,
                                      f"model/simulator mismatch: {why}, but the warm start fits", Status.FEASIBLE)
            multi = self._multilevel_fallback(problem, size, wall, why)
            if multi is not None:
                return multi
            return Plan({t: Decision.KEEP for t in problem.planning_ids}, planner=self.name, params=self.params,
                        problem_key=problem.key,
                        info=SolveInfo(Status.INFEASIBLE, wall_s=wall(), model_size=size,
                                       message=f"no plan fits the budget: {why}" + self._among(False)))
        # with a narrowed model the solver's bound covers only the plans that model allows
        bound = None if res.bound is None or built.narrowed else res.bound * built.tau
        if res.x is None:
            # a warm start in its own D2H order is outside a production-order model and its bound
            kept = None if warm is not None and warm.d2h_order is not None and _production_only(built) else bound
            if res.status != "time_limit":
                return self._fallback(problem, warm, src, kept, size, wall,
                                      f"the solver failed ({res.message or 'no solution'})", Status.ERROR)
            return self._fallback(problem, warm, src, kept, size, wall,
                                  "time limit before the solver found a plan"
                                  + (f" ({res.message})" if res.message else ""))
        # the polishing LP passes the whole model to HiGHS again: only when the time left could
        # plausibly hold it (at least half what the solve call took), else use the simulated time
        end = clock.end
        polish = end is None or end - time.perf_counter() > 0.5 * solve_wall
        plan, obj = self._extract(problem, built, res.x, end, polish=polish)
        r = simulate(problem, plan, detail=False)
        if plan.d2h_order is not None:   # an order the model chose: production order when as fast
            plain = replace(plan, d2h_order=None)
            rp = simulate(problem, plain, detail=False)
            if rp.fits and rp.step_time_s <= r.step_time_s:
                plan, r = plain, rp
        if obj is None:   # no time left to polish: the simulated time (exact when duplex_factor == 1)
            obj = r.step_time_s
        msgs = [note] if note else []
        status = {"optimal": Status.OPTIMAL, "feasible": Status.FEASIBLE}.get(res.status, Status.TIME_LIMIT)
        # a warm start in its own D2H order can beat the optimum of a model in production order
        outside = warm is not None and warm.d2h_order is not None and _production_only(built)
        if warm is not None and (res.status != "optimal" or outside):
            rw = simulate(problem, warm, detail=False)
            if rw.fits and (not r.fits or rw.step_time_s < r.step_time_s):
                if outside:
                    msgs.append(f"incumbent: {src}'s plan, in its own D2H order, faster than the model's "
                                f"{obj!r} s among plans with D2H in production order")
                    # the model's bound covers production-order plans only: one for every plan instead
                    status, bound = (Status.FEASIBLE if status is Status.OPTIMAL else status), None
                else:
                    msgs.append(f"incumbent: {src}'s plan")
                plan, r, obj = warm, rw, rw.step_time_s
        if res.status == "feasible" and res.message:
            msgs.append(res.message)
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
            bound = self._certified(problem, bound)
            if r.fits and bound is not None:
                bound = min(bound, obj)
        gap = _gap(obj, bound)
        if status is Status.FEASIBLE and res.status == "optimal" and r.fits and gap is not None \
                and gap <= max(self.mip_rel_gap, 1e-9):
            # duplex < 1: the relaxation's optimum is a bound, and this plan's simulated time meets it
            status = Status.OPTIMAL
            msgs.append("the simulated time equals the relaxation's optimum: proven optimal")
        production = _production_only(built)
        if production and status is Status.OPTIMAL and not (plan is warm and outside) \
                and self._certified(problem, None) >= obj * (1 - max(self.mip_rel_gap, 1e-9)):
            # a bound for every plan (any D2H order) meets the optimum: production order is optimal
            production = False
            msgs.append("a bound for every plan meets it")
        if not (plan is warm and outside):     # else the bound is one for every plan (``_certified``)
            msgs.append(self._among(True, production).lstrip("; "))
        return plan.with_info(status=status, objective=obj, lower_bound=bound, gap=gap,
                              wall_s=wall(), model_size=size, message="; ".join(m for m in msgs if m))

    def _multilevel_fallback(self, problem, size, wall, why: str):
        """Where the exact model without hold points is infeasible, ``dp-checkpoint``'s multi-level
        plan when it fits (status FEASIBLE; bound: the certified capacity bound, which holds for
        every plan, every plan without SWAP under ``allow_swap=False``), so that INFEASIBLE is
        never returned while a plan of ours fits; else None."""
        if self.hold_points or not self.allow_recompute:
            return None
        best = multilevel_plan(problem)
        if best is None:
            return None
        r = simulate(problem, best, detail=False)
        if not r.fits:
            return None
        bound = self._certified(problem, None)
        bound = None if bound is None else min(bound, r.step_time_s)
        return Plan(best.decisions, planner=self.name, params=self.params, problem_key=problem.key,
                    hold_points=best.hold_points).with_info(
            status=Status.FEASIBLE, objective=r.step_time_s, lower_bound=bound, gap=_gap(r.step_time_s, bound),
            wall_s=wall(), model_size=size,
            message=(f"no plan without hold points fits ({why}; proven); incumbent: dp-checkpoint's "
                     "multi-level plan, not proven optimal (hold_points=True searches multi-level plans)"))

    def _among(self, order: bool, production: bool = True) -> str:
        """Which plans the exact model's optimum and bound (``order``) or its infeasibility cover:
        with ``production`` (the model fixed the D2H queue to production order, ``d2h_order``)
        D2H in production order, else any D2H order (an optimum and bound only: no D2H order lets
        more plans fit, docs/milp.md, "Status, warm start and what is proven"), single-level plans
        unless ``hold_points``, and the ``allow_*`` switches."""
        kinds = (["D2H in production order"] if production else ["any D2H order"]) if order else []
        kinds += [] if self.hold_points else ["no hold points"]
        kinds += [] if self.allow_swap else ["no SWAP"]
        kinds += [] if self.allow_recompute else ["no RECOMPUTE"]
        if not kinds:
            return ""
        return f"; {'optimum and bound' if order else 'proof'} among plans with " + ", ".join(kinds)

    def _improved_warm(self, problem, warm, src, until, others=(), bound=None):
        """The warm start after the incumbent search (``improve``, within ``improve_sims`` and
        ``until``; ``others`` and ``bound`` as there: further starts, whose ends are relinked by
        layer), and its source."""

        s0 = simulate(problem, warm, detail=False).step_time_s
        better, s, note = _improve.improve(problem, warm, s0, allow_swap=self.allow_swap, allow_recompute=self.allow_recompute,
                                  max_sims=self._improve_work(problem), until=until, others=others,
                                  bound=bound)
        if better is None or not s < s0:
            return warm, src
        return (Plan(better.decisions, issue_points=better.issue_points, d2h_order=better.d2h_order, planner=self.name, params=self.params,
                     problem_key=problem.key), f"the incumbent search (from {src}: {note})")

    def _settings(self, problem) -> Settings:
        """What ``beyond`` and ``solution.chain_search`` need of this planner for ``problem``."""
        return Settings(name=self.name, params=self.params, allow_swap=self.allow_swap,
                        allow_recompute=self.allow_recompute, warm_start=self.warm_start,
                        mip_rel_gap=self.mip_rel_gap, max_exact_tensors=self.max_exact_tensors,
                        aggregate_nodes=self.aggregate_nodes, improve_sims=self.improve_sims,
                        aggregate_time=self._aggregate_time(problem), improve_work=self._improve_work(problem),
                        aggregate_work=self._aggregate_work(problem), aggregate_solver=self._aggregate_solver(),
                        background_scip=self._background_scip(problem),
                        cap_in_time=lambda: self._cap_in_time(problem), tight_aggregate=self._tight_aggregate)

    def _improve_work(self, problem) -> int:
        """Simulations of the incumbent search: ``improve_sims``, or when None ``IMPROVE_SIMS``,
        ``SMALL_IMPROVE_SIMS`` up to ``SMALL_AGGREGATE_TENSORS`` planning tensors."""
        if self.improve_sims is not None:
            return self.improve_sims
        return SMALL_IMPROVE_SIMS if len(problem.planning_ids) <= SMALL_AGGREGATE_TENSORS else IMPROVE_SIMS

    def _aggregate_time(self, problem) -> float:
        """The aggregated MILP's safety cap: ``aggregate_time_s``, or when None ``AGGREGATE_TIME_S``,
        ``SMALL_AGGREGATE_TIME_S`` up to ``SMALL_AGGREGATE_TENSORS`` planning tensors."""
        if self.aggregate_time_s is not None:
            return self.aggregate_time_s
        return SMALL_AGGREGATE_TIME_S if len(problem.planning_ids) <= SMALL_AGGREGATE_TENSORS else AGGREGATE_TIME_S

    def _aggregate_work(self, problem) -> tuple[int, bool]:
        """Node limit and release rows of the aggregated MILP: ``aggregate_nodes`` and none,
        except up to ``SMALL_AGGREGATE_TENSORS`` planning tensors, where it is small: at least
        ``SMALL_AGGREGATE_NODES`` nodes and the release rows."""
        if len(problem.planning_ids) <= SMALL_AGGREGATE_TENSORS:
            return (None if self.aggregate_nodes is None
                    else max(self.aggregate_nodes, SMALL_AGGREGATE_NODES)), True
        return self.aggregate_nodes, False

    def _aggregate_solver(self) -> str:
        """The aggregated MILP's solver in the planner's own thread: ``aggregate_solver``, HiGHS
        for ``"auto"`` (``_background_scip`` adds SCIP beside it)."""
        return "highs" if self.aggregate_solver == "auto" else self.aggregate_solver

    def _background_scip(self, problem) -> bool:
        """Whether SCIP solves the aggregated MILP in a second thread beside the planner's own
        work (``bounds.BackgroundBound``; beyond the exact model): with
        ``aggregate_solver="auto"``, a ``time_limit_s`` of at least ``BACKGROUND_SCIP_MIN_S``
        (30 s), more than ``SMALL_AGGREGATE_TENSORS``
        planning tensors (the full-size presets) and OR-Tools installed. HiGHS's 20 nodes and the
        incumbent search run as without it, on one core; SCIP uses the other until the limit,
        so its bound depends on machine speed, as every time-limited result does (at llama-7b
        0.2 its bound reaches 1798.69 ms where HiGHS's 20 nodes give 1794.04 ms: docs/milp.md,
        "Full-size models: the aggregated relaxation and proven gaps"). Without a time limit the planner's work limits stay as they are."""
        if self.aggregate_solver != "auto" or self.time_limit_s is None or self.time_limit_s < BACKGROUND_SCIP_MIN_S \
                or len(problem.planning_ids) <= SMALL_AGGREGATE_TENSORS:
            return False

        return find_spec("ortools") is not None

    def _aggregate_proof(self, problem, warm, src, wall, deadline, until):
        """``(proof, warm, src)``. The aggregated MILP (docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps") is solved with the
        nodes and release rows of ``_aggregate_work``, at most ``_aggregate_time`` and, under a
        time limit, a quarter of the time left (not with ``aggregate_nodes=0``). While its bound
        leaves a gap, with the release rows, a second pass with the tight rows
        (``_tight_aggregate``: the larger bound is kept), then the incumbent search
        (``_improved_warm``, until ``until``) starts from the warm start and from the MILPs'
        decisions and relinks their ends by layer, as beyond the exact model (without the search
        the decisions replace the warm start when they simulate faster), and while a gap is still
        open a third pass with the chain rows too (``CHAIN_DEPTH``). ``proof`` is the
        resulting warm start, returned without building the exact model, when the MILP's dual
        bound (it holds for every plan) is within ``max(mip_rel_gap, AGGREGATE_PROOF_GAP)`` of
        its simulated time: OPTIMAL when within ``mip_rel_gap``, else
        FEASIBLE with that proven gap. Else None, and the bound is kept as a floor of the
        certified bound (``_certified``) and a floor of the exact model's step time (``agg.floor``)."""

        left = self._aggregate_time(problem)
        if deadline is not None:
            left = min(left, 0.25 * (deadline - time.perf_counter()))
        if self.aggregate_nodes == 0 or not self._cap_in_time(problem) or left <= 0.5:
            if self._improve_work(problem):
                warm, src = self._improved_warm(problem, warm, src, until)
            return None, warm, src
        nodes, releases = self._aggregate_work(problem)
        extra, agg, res = bounds.aggregate_bound(problem, integral=True, time_limit_s=left, node_limit=nodes,
                                          mip_rel_gap=max(self.mip_rel_gap, AGGREGATE_PROOF_GAP), releases=releases,
                                          solver=self._aggregate_solver())
        if agg is not None and (agg.model.infeasible or res is None or (res.x is None and extra <= 0)):
            if self._improve_work(problem):       # nothing proven (or no plan fits: the exact model says which)
                warm, src = self._improved_warm(problem, warm, src, until)
            return None, warm, src
        bound = float(problem.ideal_step_s) + extra
        self._bound_memo["agg"] = bound
        how = ("no step exceeds the budget under keep-all: the bound is the ideal step" if agg is None
               else f"the aggregated MILP's dual bound after {getattr(res, 'mip_node_count', 0)} nodes")
        obj = simulate(problem, warm, detail=False).step_time_s
        others = []      # further starts of the search: the slower ones

        def consider(label, cand):      # a MILP's decisions: the warm start when faster, else a start
            nonlocal warm, src, obj
            rc = simulate(problem, cand, detail=False) if cand is not None else None
            if rc is not None and rc.feasible and rc.fits and rc.step_time_s < obj:
                others.append((f"{src}'s plan", warm, obj))
                warm, src, obj = cand, label, rc.step_time_s
            elif rc is not None and rc.feasible and rc.fits:
                others.append((f"{label}'s decisions", cand, rc.step_time_s))

        consider("the aggregated MILP", aggregate_plan(problem, agg, res, self._settings(problem)) if agg is not None else None)
        gap = _gap(obj, bound)
        if releases and gap is not None and gap > max(self.mip_rel_gap, AGGREGATE_PROOF_GAP):
            passes = ((0, "the tight aggregated MILP", "its tight rows"),
                      (CHAIN_DEPTH, "the aggregated MILP with chain rows", "its tight and chain rows"))
        else:
            passes = ()

        def another_pass(chains, label, rows):
            nonlocal bound, how, gap
            left = self._aggregate_time(problem)
            if deadline is not None:
                left = min(left, 0.25 * (deadline - time.perf_counter()))
            tight, cand2 = self._tight_aggregate(problem, nodes, left, chains)
            if tight is not None and tight > bound:
                bound = self._bound_memo["agg"] = tight
                how = f"the dual bound of the aggregated MILP with {rows}"
            consider(label, cand2)
            gap = _gap(obj, bound)
            return cand2

        if passes:
            another_pass(*passes[0])
        if self._improve_work(problem) and gap is not None and gap > max(self.mip_rel_gap, AGGREGATE_PROOF_GAP):
            warm, src = self._improved_warm(problem, warm, src, until, others, bound)
            obj = simulate(problem, warm, detail=False).step_time_s
            gap = _gap(obj, bound)
        if passes and gap is not None and gap > max(self.mip_rel_gap, AGGREGATE_PROOF_GAP):
            third = another_pass(*passes[1])     # the chain rows, while a gap is still open after the search
            if gap is not None and gap > max(self.mip_rel_gap, AGGREGATE_PROOF_GAP):
                cand, s, note = chain_search(self._settings(problem), problem, third, bound, until)
                if cand is not None and s < obj:
                    warm, obj, src = cand, s, f"the incumbent search (from the decisions of {passes[1][1]}: {note})"
                    gap = _gap(obj, bound)
        if gap is None or gap > max(self.mip_rel_gap, AGGREGATE_PROOF_GAP):
            return None, warm, src
        status = Status.OPTIMAL if gap <= self.mip_rel_gap else Status.FEASIBLE
        proof = warm.with_info(status=status, objective=obj, lower_bound=min(bound, obj), gap=gap, wall_s=wall(),
                               model_size={}, message=f"proven gap {gap:.2g} by {how}, which holds for every plan "
                               f"(docs/milp.md, \"Full-size models: the aggregated relaxation and proven gaps\"): exact model not built; incumbent: {src}'s plan")
        return proof, warm, src

    def _tight_aggregate(self, problem, nodes: int, left: float, chains: int = 0):
        """``(bound, plan)`` of the aggregated MILP with its ``tight`` rows (``rho_by``, ``o``,
        ``seg``: docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps"), solved after the one without them while a gap is open, for
        ``nodes`` nodes and at most ``left`` seconds: its certified bound and its decisions as a
        plan (``beyond.aggregate_plan``; each None when there is none; the callers judge the plan
        by simulation). Two
        passes, not one: the tight MILP can stop at its node limit below the bound the other
        proves (GPT-2 with 3 layers at 0.9), so the planner keeps the larger bound and searches
        from both MILPs' decisions. ``chains``: the third pass (``CHAIN_DEPTH``), with the
        copy-back rows along chains of re-runs too (``v_chain``), run only while a gap is
        still open after the second and the incumbent search: with them in the second pass
        HiGHS's search found slower plans where the second pass proves the optimum (GPT-2 with 4
        layers at 0.95), and run before the search, also where only the bound's shave was left,
        it took `tiny` 3 layers at 0.4 to 54.0 s against 20.5 s (docs/journal/benchmarks-milp-2026-12.md)."""

        if left <= 0.5:
            return None, None
        extra, agg, res = bounds.aggregate_bound(problem, integral=True, time_limit_s=left, node_limit=nodes,
                                          mip_rel_gap=max(self.mip_rel_gap, AGGREGATE_PROOF_GAP), releases=True,
                                          tight=True, solver=self._aggregate_solver(), chains=chains)
        if agg is None or agg.model.infeasible or res is None or (res.x is None and extra <= 0):
            return None, None
        return float(problem.ideal_step_s) + extra, aggregate_plan(problem, agg, res, self._settings(problem))

    def _cutoff(self, problem, warm, tau: float) -> float | None:
        """The MILP objective the solver need not reach (HiGHS ``objective_bound``): the warm
        start's simulated time (in the model's unit, ``tau`` seconds) plus ``_CUTOFF_TOL``. The
        model's time of a plan is at most its simulated time (equal when ``duplex_factor`` is 1),
        so every pruned plan is slower than the warm start, which stays the fallback incumbent."""
        if not self.cutoff or warm is None or self.solver != "highs":
            return None
        r = simulate(problem, warm, detail=False)
        return r.step_time_s / tau * (1 + _CUTOFF_TOL) if r.fits and r.feasible else None

    def _fallback(self, problem, warm, src, bound, size, wall, message, status=Status.TIME_LIMIT):
        """The warm start (a plan that fits) with ``status`` (FEASIBLE for ERROR), a certified bound
        and the proven gap; without one NO_PLAN_FOUND (ERROR when ``status`` is ERROR): nothing is
        proven."""
        if warm is None:
            st = Status.ERROR if status is Status.ERROR else Status.NO_PLAN_FOUND
            return Plan({t: Decision.KEEP for t in problem.planning_ids}, planner=self.name, params=self.params,
                        problem_key=problem.key,
                        info=SolveInfo(st, lower_bound=self._certified(problem, bound), wall_s=wall(),
                                       model_size=size or {}, message=message + "; no candidate plan fits"))
        obj = simulate(problem, warm, detail=False).step_time_s
        bound = min(self._certified(problem, bound), obj)
        status = Status.FEASIBLE if status is Status.ERROR else status     # a plan that fits all the same
        return warm.with_info(status=status, objective=obj, lower_bound=bound, gap=_gap(obj, bound),
                              wall_s=wall(), model_size=size or {}, message=f"{message}; incumbent: {src}'s plan")

    def _extract(self, problem, built, xval, deadline=None, polish: bool = True):
        dec, issue = _decisions(problem, xval, built.swap, built.rec), {}
        for (t, k), col in built.issue.items():
            if xval[col] > 0.5 and dec[t] is Decision.SWAP:
                issue[t] = k
        hold = _hold_points(problem, built, xval, dec) if built.reruns else {}
        plan = Plan(dec, issue_points=issue, d2h_order=_d2h_order(built, xval, dec), hold_points=hold,
                    planner=self.name, params=self.params, problem_key=problem.key)
        obj = self._polish(built, xval, deadline) if polish else None
        return plan, None if obj is None else obj * built.tau

    def _polish(self, built, xval, deadline=None) -> float | None:
        """Fix the integer columns and re-solve the LP: the tight (max-plus) times of the plan."""

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

    def _certified(self, problem, bound):
        """The larger of the solver's bound and the certified capacity bound (``slackswap.bounds``,
        computed once per call, and under a limit only while it fits: else the ideal step): a
        stopped solve still reports a proven gap."""
        memo = self._bound_memo
        if "cap" not in memo:
            memo["cap"] = _certified(problem, None) if self._cap_in_time(problem) else float(problem.ideal_step_s)
        floor = max(memo["cap"], memo.get("agg", memo["cap"]))
        return floor if bound is None else max(bound, floor)

    def _cap_in_time(self, problem) -> bool:
        return bound_fits(self._bound_memo["clock"], problem)

    def _warm(self, problem, until: float | None = None):
        """The warm start and its source: the fastest plan that fits, by simulation, among keep-all,
        recompute-all (when allowed) and the plan of every registered planner that is neither exact
        nor nondeterministic, keeping those that use only the choices ``allow_swap`` and
        ``allow_recompute`` permit. ``(None, "")`` when none fits. ``until``: a
        ``time.perf_counter()`` value after which no heuristic is started; slack is started first
        (the usual winner), the others in name order. Candidates are judged in name order."""
        g, ids = problem.graph, problem.planning_ids
        cands = [("keep-all", Plan({t: Decision.KEEP for t in ids}))]
        if self.allow_recompute:
            cands.append(("recompute-all", Plan({t: Decision.RECOMPUTE if g.tensors[t].recomputable
                                                 else Decision.KEEP for t in ids})))
        cands += heuristic_plans(problem, exclude=(self.name, "keep-all", "recompute-all"), until=until)
        best, bt, src = None, math.inf, ""
        for name, p in cands:
            if (not self.allow_swap and p.ids(Decision.SWAP)) or (not self.allow_recompute and p.ids(Decision.RECOMPUTE)):
                continue
            p = Plan(p.decisions, issue_points=p.issue_points, d2h_order=p.d2h_order,
                     hold_points=p.hold_points if self.hold_points else {}, planner=self.name,
                     params=self.params, problem_key=problem.key)
            try:
                validate(problem, p)
                r = simulate(problem, p, detail=False)
            except SlackSwapError:
                continue
            if r.fits and r.step_time_s < bt:
                best, bt, src = p, r.step_time_s, name
        return best, src


def heuristic_plans(problem, exclude=(), until: float | None = None) -> list[tuple[str, Plan]]:
    """``[(name, Plan)]`` of every registered planner that is neither exact nor nondeterministic
    (and not in ``exclude``), in name order; one that raises (e.g. a chain-only planner on a DAG)
    is left out. ``until``: a ``time.perf_counter()`` value after which none is started; slack is
    started first (the usual winner of the warm start), the others in name order."""
    names = [n for n in available() if n not in exclude]
    plans = {}
    for name in sorted(names, key=lambda n: n != "slack"):
        if until is not None and time.perf_counter() >= until:
            break
        try:
            other = get(name)
            if other.tags.exact or not other.tags.deterministic:
                continue
            plans[name] = other.plan(problem)
        except SlackSwapError:
            continue
    return [(n, plans[n]) for n in names if n in plans]


def add_floor(built, problem, floor: float) -> None:
    """Row ``agg.floor``: the exact model's step time (``built.objective_col``, the optimizer's
    start, plus ``optimizer_s``) is at least ``floor`` seconds less 1e-9 of it. With the
    aggregated MILP's bound as ``floor``, which holds for every plan's simulated time, it lifts
    the LP bound of every node; the step-time column is only bounded below, so the model then
    finds the least ``max(model time, floor)`` over its plans: still at most the optimum, also with
    ``duplex_factor`` < 1, where the model's time is a relaxation (docs/milp.md, "Status, warm start and what is proven", "The
    aggregated bound as a floor")."""
    built.model.add_ge("agg.floor", [(1.0, built.objective_col)],
                       (floor * (1 - 1e-9) - problem.costs.optimizer_s) / built.tau)


def _hold_points(problem, built, x, dec) -> dict[int, int]:
    """Hold points of the plan in column values ``x`` (``Built.reruns``, ``Built.held``): a
    regenerated tensor's hold point is the stage of its held copy; with none, just below the last
    stage that made a copy (every copy freed after its stage). Left out when no copy is freed
    early (the default, docs/timeline.md, "Backward: recompute, prefetch, gradients")."""
    hold = {}
    for y, stages in built.reruns.items():
        if y in dec and dec[y] is not Decision.RECOMPUTE:
            continue
        cols = built.held.get(y, {})
        made, k = [], None
        for j in sorted(stages, reverse=True):
            if any(x[c] > 0.5 for c in stages[j]):
                made.append(j)
                if j in cols and x[cols[j]] > 0.5:
                    k = j
                    break
        if not made:
            continue
        if k is None:
            k = max(made[-1] - 1, 0)
        if any(j > k for j in made):
            hold[y] = k
    return hold


def _production_only(built) -> bool:
    """Whether ``built`` fixes the D2H queue to production order while two or more tensors can be
    swapped (else every D2H order is among its plans)."""
    return not built.d2h_before and len(built.d2h_queue) >= 2


def _d2h_order(built, x, dec) -> tuple[int, ...] | None:
    """The D2H order of the plan in column values ``x`` (``Built.d2h_before``): the swapped
    tensors by the number of swapped tensors the columns put before them (then by start time and
    production order; ties only among copies of no duration, whose order changes no time). None
    when it is production order (the simulator's default) or the model fixes that order."""
    swapped = [t for t in built.d2h_queue if dec[t] is Decision.SWAP]
    if not built.d2h_before or len(swapped) < 2:
        return None
    ahead = dict.fromkeys(swapped, 0)
    for (a, b), col in built.d2h_before.items():
        if a in ahead and b in ahead:
            ahead[b if x[col] > 0.5 else a] += 1
    order = sorted(swapped, key=lambda t: (ahead[t], x[built.d2h_start[t]], swapped.index(t)))
    return None if order == swapped else tuple(order)


def _certified(problem, bound):
    """The larger of the solver's bound and the certified capacity bound (``slackswap.bounds``): a
    stopped solve still reports a proven gap."""

    cap = bounds.capacity_bound(problem)
    return cap if bound is None else max(bound, cap)
