"""The ``milp`` planner above ``max_exact_tensors`` planning tensors (docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps"):
the aggregated relaxation's certified bound, the best incumbent (warm start, the aggregated
MILP's decisions, then the incumbent search of ``improve``) and the proven gap between them.
Plain functions of the problem, the warm start, the planner's ``Settings`` and a ``Deadline``;
``milp_planner.py`` calls ``beyond_exact``."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from ... import (
    bounds,  # bounds.BackgroundBound, bounds.probe_bound: looked up at call time (tests replace them)
)
from ...bounds import PROBE_MIN_S
from ...core.errors import SlackSwapError
from ...core.plan import Decision, Plan, SolveInfo, Status
from ...timeline import simulate
from ...timeline.schedule import default_d2h_order
from ..dp import multilevel_plan
from . import incumbent as _improve  # incumbent.improve looked up at call time (tests replace it)
from .clock import Deadline, import_cost
from .solution import AGGREGATE_PROOF_GAP, CHAIN_DEPTH, _decisions, _gap, chain_search


@dataclass(frozen=True)
class Settings:
    """What the functions here (and ``solution.chain_search``) need of the ``milp`` planner for one
    problem: its parameters and the work it gives each phase there (``MilpPlanner._settings``).
    ``cap_in_time()``: whether the capacity bound still fits before the limit (asked when
    needed); ``tight_aggregate(problem, nodes, left, chains=0)``: ``MilpPlanner._tight_aggregate``."""

    name: str
    params: dict
    allow_swap: bool
    allow_recompute: bool
    warm_start: bool
    mip_rel_gap: float
    max_exact_tensors: int
    aggregate_nodes: int | None
    improve_sims: int | None
    aggregate_time: float           # MilpPlanner._aggregate_time
    improve_work: int               # MilpPlanner._improve_work
    aggregate_work: tuple           # MilpPlanner._aggregate_work: (node limit, release rows)
    aggregate_solver: str           # MilpPlanner._aggregate_solver
    background_scip: bool           # MilpPlanner._background_scip
    cap_in_time: Callable[[], bool]
    tight_aggregate: Callable


def beyond_exact(problem, warm, src, settings: Settings, deadline: Deadline, wall):
    """``_beyond_exact`` with, under ``aggregate_solver="auto"`` and a time limit on the full-size
    presets (``MilpPlanner._background_scip``), SCIP on the aggregated MILP in a second thread
    (``bounds.BackgroundBound``) from here until the limit; it is stopped if the planner raises."""
    bg = None
    if deadline.at is not None and settings.background_scip and deadline.left() > 1.0:
        bg = bounds.BackgroundBound(problem, deadline.left(), mip_rel_gap=max(settings.mip_rel_gap, 1e-6))
    try:
        return _beyond_exact(problem, warm, src, settings, deadline, wall, bg)
    except BaseException:
        if bg is not None:
            try:
                bg.finish()
            except Exception:       # the planner's own error is the one to raise
                pass
        raise


def _beyond_exact(problem, warm, src, settings: Settings, deadline: Deadline, wall, bg):
    """Too large for the exact model: the best of the warm start and the aggregated MILP's
    decisions, then the incumbent search from it (``improve``), judged by the simulator, with the
    certified bound of the aggregated relaxation (its LP, then its MILP dual bound after
    ``aggregate_nodes`` branch-and-bound nodes, more with release rows for small models:
    ``MilpPlanner._aggregate_work``; for those, while a gap is open, a second pass with the tight
    rows, and after the search a third with the chain rows too: ``MilpPlanner._tight_aggregate``;
    for the others, under a time limit while a gap is open, cutoff probes between the bound and
    the incumbent: ``bounds.probe_bound``) and the proven gap; ``bg`` (a
    ``bounds.BackgroundBound`` or None): SCIP's bound and plan on the same MILP, read when the
    rest is done, kept where better.
    INFEASIBLE only when the relaxation is infeasible (then no plan fits)."""

    n = len(problem.planning_ids)
    if settings.cap_in_time():
        bound, how = bounds.lower_bound(problem)
    else:
        bound, how = float(problem.ideal_step_s), "ideal step (no time left for the capacity bound's LP)"
    msg = [f"{n} planning tensors > max_exact_tensors={settings.max_exact_tensors}: exact model not built"]
    best, obj = None, None
    inc = None
    others = []     # further starts of the incumbent search (``improve`` drops the one it starts from)
    if warm is not None:
        best, obj, inc = warm, simulate(problem, warm, detail=False).step_time_s, f"incumbent: {src}'s plan"
    size, proven = {}, False
    chains = None       # the node limit of a third pass with the chain rows, after the search

    def consider(label, cand):
        nonlocal best, obj, inc
        if cand is None:
            return
        rc = simulate(problem, cand, detail=False)
        if rc.feasible and rc.fits:
            # a start of its own even when a variant of slack's switches beats it
            others.append((label, cand, rc.step_time_s))
            if obj is None or rc.step_time_s < obj:
                if best is not None and all(p is not best for _, p, _ in others):
                    others.append((inc.removeprefix("incumbent: "), best, obj))
                best, obj, inc = cand, rc.step_time_s, f"incumbent: {label}"

    cap = settings.aggregate_time
    left = min(cap, deadline.left())
    if deadline.at is not None and import_cost():   # the import is not part of the solver's limit
        if left < import_cost() + 0.5:
            left = 0.0
        else:
            import scipy.optimize  # noqa: F401
            left = min(cap, deadline.left())
    sims = settings.improve_work
    if bg is not None and settings.improve_sims is None:    # SCIP runs until the limit: so does the search
        sims = UNTIL_THE_LIMIT
    if deadline.at is not None and sims:   # leave the incumbent search half the time
        left = min(left, 0.5 * deadline.left())
    if left > 0.5 and settings.aggregate_nodes != 0 and (obj is None or _gap(obj, bound) > settings.mip_rel_gap):
        t_agg = time.perf_counter()
        nodes, releases = settings.aggregate_work
        extra, agg, res = bounds.aggregate_bound(problem, integral=True, time_limit_s=left, node_limit=nodes,
                                          mip_rel_gap=max(settings.mip_rel_gap, 1e-6), releases=releases,
                                          solver=settings.aggregate_solver)
        if agg is not None:
            size = agg.model.size()
            proven = bool(agg.model.infeasible) or getattr(res, "status", None) == 2
            timed = time.perf_counter() - t_agg >= 0.95 * left
            work = (f"aggregated MILP after {getattr(res, 'mip_node_count', 0)} nodes"
                    + (f", stopped by the time limit ({left:.3g} s): depends on machine speed" if timed else ""))
            if problem.ideal_step_s + extra > bound:
                bound, how = problem.ideal_step_s + extra, f"dual bound of the {work}"
            else:
                msg.append(work)
            consider("the aggregated MILP's decisions", aggregate_plan(problem, agg, res, settings))
            if not releases and deadline.at is not None and obj is not None \
                    and _gap(obj, bound) > max(settings.mip_rel_gap, AGGREGATE_PROOF_GAP):
                # cutoff probes between the bound and the incumbent (docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps")
                share = min(cap, PROBE_SHARE * deadline.left())
                if share / PROBE_PARTS >= PROBE_MIN_S:
                    low, found, proofs, probes = bounds.probe_bound(
                        problem, agg, bound, obj, share, share / PROBE_PARTS,
                        rel_gap=max(settings.mip_rel_gap, AGGREGATE_PROOF_GAP))
                    if low > bound:
                        bound, how = low, (f"cutoff probes of the aggregated MILP ({probes} run, {proofs} proving their "
                                           "cutoff; each under a time limit: depends on machine speed)")
                    for r in found:
                        consider("a cutoff probe's solution of the aggregated MILP",
                                 aggregate_plan(problem, agg, r, settings))
            if releases and (obj is None or _gap(obj, bound) > settings.mip_rel_gap):
                # the tight rows, in a second pass (MilpPlanner._tight_aggregate)
                rest = min(cap, deadline.left())
                if deadline.at is not None and sims:
                    rest = min(rest, 0.5 * deadline.left())
                tight, cand2 = settings.tight_aggregate(problem, nodes, rest)
                if tight is not None and tight > bound:
                    bound, how = tight, "dual bound of the aggregated MILP with its tight rows"
                consider("the tight aggregated MILP's decisions", cand2)
                chains = nodes
    if sims and (obj is None or _gap(obj, bound) > settings.mip_rel_gap) \
            and not deadline.passed():

        better, s, note = _improve.improve(problem, best, obj, allow_swap=settings.allow_swap,
                                  allow_recompute=settings.allow_recompute, max_sims=sims,
                                  until=deadline.at, variants_too=settings.warm_start, others=others,
                                  bound=bound)
        if better is not None and (obj is None or s < obj):
            best, obj = better, s
            inc = (f"{inc}, improved: {note}" if inc else f"incumbent: {note}")
        elif note:
            msg.append(note)
    if chains is not None and (obj is None or _gap(obj, bound) > max(settings.mip_rel_gap, AGGREGATE_PROOF_GAP)):
        # a third pass with the chain rows while a gap is still open after the search (not where
        # the gap is only the bound's shave for the solver's tolerance): MilpPlanner._tight_aggregate
        rest = min(cap, deadline.left())
        deep, cand3 = settings.tight_aggregate(problem, chains, rest, CHAIN_DEPTH)
        if deep is not None and deep > bound:
            bound, how = deep, "dual bound of the aggregated MILP with its tight and chain rows"
        consider("the decisions of the aggregated MILP with chain rows", cand3)
        if obj is not None and _gap(obj, bound) > max(settings.mip_rel_gap, AGGREGATE_PROOF_GAP):
            cand, s, note = chain_search(settings, problem, cand3, bound, deadline.at)
            if cand is not None and s < obj:
                best, obj, inc = cand, s, ("incumbent: the incumbent search (from the decisions of the aggregated "
                                           f"MILP with chain rows: {note})")
    if bg is not None:      # SCIP beside the rest: until the limit while a gap is open, else stopped now
        wait = obj is None or _gap(obj, bound) > max(settings.mip_rel_gap, AGGREGATE_PROOF_GAP)
        extra, agg_bg, res_bg = bg.finish(wait=wait)
        if agg_bg is not None and res_bg is not None:
            size = size or agg_bg.model.size()
            proven = proven or bool(agg_bg.model.infeasible) or getattr(res_bg, "status", None) == 2
            nodes = getattr(res_bg, "mip_node_count", 0)
            kept = problem.ideal_step_s + extra > bound
            msg.append(f"SCIP beside the rest: {nodes} nodes, bound {(problem.ideal_step_s + extra) * 1e3:.6g} ms"
                       + ("" if kept else ", not above the rest's: not kept"))
            if kept:
                bound, how = problem.ideal_step_s + extra, (
                    f"dual bound of SCIP on the aggregated MILP beside the rest, after {nodes} nodes"
                    + (", stopped at the time limit: depends on machine speed" if wait else ""))
            consider("SCIP's solution of the aggregated MILP", aggregate_plan(problem, agg_bg, res_bg, settings))
        else:
            msg.append("SCIP beside the rest: no result (no time left, a trivial model, or not stopped "
                       "within its grace)")
    return _result(problem, settings, wall, best, obj, inc, bound, how, proven, size, msg)


def _result(problem, settings: Settings, wall, best, obj, inc, bound, how, proven, size, msg) -> Plan:
    """The plan ``_beyond_exact`` returns: the incumbent ``best`` (``obj`` its simulated time,
    ``inc`` where it comes from; else dp-checkpoint's multi-level plan) with the bound ``bound``
    (``how``: its source), the status, the model ``size`` and the message ``msg``, or, with no
    plan that fits, keep-all with INFEASIBLE (``proven``, or proven here by the relaxation's LP)
    or NO_PLAN_FOUND."""
    if best is None and settings.allow_recompute:   # every plan maps into the relaxation: its bound holds

        best = multilevel_plan(problem)
        if best is not None:
            obj = simulate(problem, best, detail=False).step_time_s
            inc = "incumbent: dp-checkpoint's multi-level plan (no single-level candidate fits)"
    msg += [inc] if inc else []
    msg.append(f"bound: {how}")
    if best is None:
        if not proven and settings.cap_in_time():   # the MILP was skipped or stopped: its LP may prove it
            lp = bounds.aggregate_bound(problem)
            proven = lp[1] is not None and (bool(lp[1].model.infeasible) or getattr(lp[2], "status", None) == 2)
        status = Status.INFEASIBLE if proven else Status.NO_PLAN_FOUND
        msg.append("no plan fits the budget: the aggregated relaxation is infeasible" if proven
                   else "no candidate plan fits (not proven: the exact model was not built)")
        return Plan({t: Decision.KEEP for t in problem.planning_ids}, planner=settings.name, params=settings.params,
                    problem_key=problem.key,
                    info=SolveInfo(status, lower_bound=None if proven else bound, wall_s=wall(),
                                   model_size=size, message="; ".join(msg)))
    plan = Plan(best.decisions, issue_points=best.issue_points, d2h_order=best.d2h_order,
                planner=settings.name, params=settings.params, problem_key=problem.key, hold_points=best.hold_points)
    gap = _gap(obj, bound)
    status = Status.OPTIMAL if gap is not None and gap <= settings.mip_rel_gap else Status.FEASIBLE
    return plan.with_info(status=status, objective=obj, lower_bound=min(bound, obj), gap=gap,
                          wall_s=wall(), model_size=size, message="; ".join(msg))


#: the incumbent search's simulations when SCIP runs beside it (``MilpPlanner._background_scip``)
#: and ``improve_sims`` is None: as many as fit before the time limit
UNTIL_THE_LIMIT = 10**9

#: the cutoff probes' share of the time left after the aggregated MILP (under a time limit,
#: without the release rows, while a gap is open; ``bounds.probe_bound``; at most the
#: aggregated MILP's cap, ``aggregate_time_s``), and a probe's limit as a part of that share
PROBE_SHARE, PROBE_PARTS = 0.25, 3

#: the most integer solutions of the aggregated MILP judged by simulation (the newest first).
#: The search starts from the fastest; its three fastest as three starts were tried on the nine
#: full-size settings above 0.1% at 2,000 simulations and left out: three settings better
#: (bert-large 0.3 0.320% -> 0.110%), two worse (gpt2-xl 0.3 0.184% -> 0.298%: the starts share
#: the work), four unchanged (docs/journal/benchmarks-milp-2026-12.md, "The solution pool")
POOL_PLANS = 64


def aggregate_plan(problem, agg, res, settings):
    """The aggregated MILP's decisions as a plan: of its incumbent and the other integer solutions
    its search found (``res.solutions``, the newest ``POOL_PLANS``), the one that simulates
    fastest within the budget, else the incumbent's (the callers judge it by simulation); None
    when there is no solution, or every one uses a choice the planner forbids. The relaxation
    ranks plans by a bound on their time, not by their time: at ``tiny`` with 4 layers at 0.5 its
    incumbent simulates to 50.63 us while another solution it found simulates to the optimum,
    40.468 us (docs/journal/milp-2026-12-03.md, "Full-size models: the aggregated relaxation and proven gaps", "The solution pool")."""

    x = getattr(res, "x", None)
    xs = ([] if x is None else [x]) + list(reversed(getattr(res, "solutions", None) or []))[:POOL_PLANS]
    best, first, seen = None, None, set()
    for xv in xs:
        dec = _decisions(problem, xv, agg.swap, agg.rec)
        key = tuple(dec[t] for t in problem.planning_ids)
        if key in seen:
            continue
        seen.add(key)
        if (not settings.allow_swap and Decision.SWAP in dec.values()) or \
                (not settings.allow_recompute and Decision.RECOMPUTE in dec.values()):
            continue
        plan = Plan(dec, planner=settings.name, params=settings.params, problem_key=problem.key)
        if first is None:
            first = plan
        plans = [plan]
        order = _release_order(problem, dec, agg.released, xv)
        if order is not None:
            plans.append(Plan(dec, planner=settings.name, params=settings.params, problem_key=problem.key, d2h_order=order))
        for cand in plans:
            try:
                r = simulate(problem, cand, detail=False)
            except SlackSwapError:        # an order that needs a copy before it can run
                continue
            if r.feasible and r.fits and (best is None or r.step_time_s < best[0]):
                best = (r.step_time_s, cand)
    return first if best is None else best[1]


def _release_order(problem, dec, released, xv) -> tuple[int, ...] | None:
    """A D2H order for the swapped tensors of ``dec`` read from an aggregated MILP solution ``xv``:
    the relaxation holds for every D2H order, so its solutions may rely on one other than the
    default (production order): at `tiny` 4 layers, 0.4, a solution whose decisions simulate to
    51.13 us in the default order, 41.53 us in this one, copies a small tensor out first. The
    tensors it has copied out earliest go first (the first step whose release column, ``u``,
    ``v`` or ``o``, is 1; ``released``: ``Aggregate.released``), the ones it never needs copied
    out last, ties in the default order.
    None without release columns, or when that is the default order. (A second order, the one a
    D2H engine would take starting each copy with the most urgent tensor already made, waiting
    for a more urgent one made before that copy would end, was tried and left out: it gave no
    faster plan at GPT-2 with 4 layers at 0.95, where the pool's best solution needs an order
    neither finds.)"""

    if not released:
        return None
    swaps = default_d2h_order(problem.graph, [t for t, d in dec.items() if d is Decision.SWAP])
    first: dict[int, float] = {}
    for col, t, rank in released:
        if xv[col] > 0.5 and rank < first.get(t, math.inf):
            first[t] = rank
    order = tuple(sorted(swaps, key=lambda t: first.get(t, math.inf)))     # stable: ties in the default order
    return None if list(order) == swaps else order
