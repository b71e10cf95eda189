"""The reference timeline simulator: the plain-Python implementation of docs/timeline.md.

``slackswap.timeline.simulate`` (``simulate.py``) runs the same model on a compiled core
(``_core.py``); this module is the readable statement of the rules it must reproduce, kept
callable so that ``tests/test_simulate_core.py`` can compare the two on random plans, and
``benchmarks/bench_core.py`` can time them side by side.

Three engines: the compute stream runs the compiled step sequence; the D2H engine copies swapped
tensors out in FIFO order (production order unless the plan gives another); the H2D engine copies
them back in FIFO order of first backward use. Every compute step, at its start, is checked
against the budget; when over, it waits for pending D2H copies (oldest first) to free their
sources. Nothing here is approximate: the waits and times are max-plus expressions of the plan's
decisions and the cost model, so the MILP can reproduce them exactly.
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from ..core.errors import PlanError
from ..core.plan import Plan, validate
from .result import Event, SimResult
from .schedule import BWD, FWD, REC, Schedule, compile_schedule

_EPS = 1e-9   # bytes (whole numbers, summed exactly in float64)
_REL = 1e-9   # times: tolerance relative to the problem's time horizon, so units do not matter


def time_tolerance(costs) -> float:
    """Two times closer than this are equal: ``_REL`` times the longest any simulated timeline can
    be (every step and copy one after another, recompute counted twice), so scaling every time
    by one factor changes no comparison."""
    horizon = (2 * sum(costs.fwd_s) + sum(costs.bwd_s) + costs.optimizer_s + sum(costs.d2h_s)
               + sum(costs.h2d_s) / costs.duplex_factor)
    return _REL * horizon


def default_issue_points(sched: Schedule, sizes, budget: float, base: np.ndarray,
                         given: dict[int, int] | None = None) -> dict[int, int]:
    """Issue every H2D copy as early as the budget allows (docs/timeline.md, 3).

    Copies are taken in H2D queue order. A copy in ``given`` (the plan's issue points) keeps its
    stage; any other gets the earliest backward stage, no earlier than the previous copy's, from
    which its bytes fit under ``budget`` on every step up to its last use, given ``base`` (fixed
    memory, swapped tensors' forward lives already released) plus the copies before it in the
    queue. A copy that fits nowhere gets the stage of its first use. So giving a copy the stage
    this rule would choose changes nothing.
    """
    given = given or {}
    mem = base.astype(np.float64).copy()
    n = sched.n_fwd
    out: dict[int, int] = {}
    k_prev = n - 1
    for t in sched.h2d_queue():
        u, f = sched.swap_bwd[t]
        ju = sched.stage[u]
        if t in given:
            k = out[t] = given[t]
            mem[sched.stage_first_step[k]:f + 1] += sizes[t]
            k_prev = k
            continue
        lo = sched.stage_first_step[k_prev]
        k = ju
        if budget == math.inf:
            k = k_prev
        else:
            seg = mem[lo:f + 1]
            rmax = np.maximum.accumulate(seg[::-1])[::-1]   # rmax[i] = max(mem[lo+i .. f])
            ok = np.nonzero(rmax + sizes[t] <= budget + _EPS)[0]
            if ok.size:
                a0 = lo + int(ok[0])
                k0 = sched.stage[a0]
                k = k0 if sched.stage_first_step[k0] == a0 else k0 - 1
                k = max(min(k, k_prev), ju)
                if sched.stage_first_step[k] > sched.stage_first_step[ju]:
                    k = ju
        k = max(min(k, k_prev), ju)
        out[t] = k
        mem[sched.stage_first_step[k]:f + 1] += sizes[t]
        k_prev = k
    return out


def _issue_points(sched: Schedule, plan: Plan, sizes, budget: float):
    """Memory of the fixed lives (swapped tensors' forward lives included) and the issue point of
    every swapped tensor: the plan's, the open ones placed by ``default_issue_points``."""
    n = sched.n_fwd
    fixed = sched.static_memory().astype(np.float64)
    for t, (p, lf) in sched.swap_fwd.items():
        fixed[p:lf + 1] += sizes[t]
    issue = dict(plan.issue_points)
    for t, k in issue.items():
        ju = sched.stage[sched.swap_bwd[t][0]]
        if k < ju:
            raise PlanError(f"plan.issue_points[{t}]: stage {k} is after the first backward use "
                            f"(stage {ju}); allowed {ju}..{n - 1}")
    if len(issue) < len(sched.swap_bwd):   # place the copies the plan leaves open
        issue = default_issue_points(sched, sizes, budget, fixed, given=issue)
    return fixed, issue


def issue_points(problem, plan: Plan, *, schedule: Schedule | None = None) -> dict[int, int]:
    """The issue point (backward stage) of every swapped tensor of ``plan`` as ``simulate`` uses
    it: the plan's own where it gives one, else the default of docs/timeline.md, "Backward: recompute, prefetch, gradients".
    ``schedule``: as for ``simulate``."""
    validate(problem, plan)
    sched = _schedule(problem.graph, plan, schedule)
    sizes = [t.bytes for t in problem.graph.tensors]
    return _issue_points(sched, plan, sizes, float(problem.budget_bytes))[1]


def _schedule(g, plan: Plan, schedule: Schedule | None) -> Schedule:
    """``schedule`` when given (a schedule of ``g``: ``PlanError`` otherwise), else compiled."""
    if schedule is None:
        return compile_schedule(g, plan.decisions, plan.hold_points)
    if schedule.n_fwd != len(g.ops):
        raise PlanError(f"schedule=...: not a schedule of {g.name!r} ({schedule.n_fwd} forward steps, "
                        f"{len(g.ops)} ops)")
    return schedule


def simulate(problem, plan: Plan, *, detail: bool = True, schedule: Schedule | None = None) -> SimResult:
    """Simulate one training step of ``problem`` under ``plan``.

    Returns a ``SimResult``; an impossible allocation is a result with ``feasible=False`` and a
    reason naming the step and bytes, never an exception. Bad plans raise ``PlanError``.
    ``detail=False`` skips the event list (peak and times are still exact). ``schedule``: the
    plan's ``compile_schedule(problem.graph, plan.decisions, plan.hold_points)`` when the caller
    has it already (a search that compiled it to prune by memory), so it is not compiled twice;
    it is trusted to be that one (only its number of forward steps is checked: ``PlanError``).
    """
    validate(problem, plan)
    g, c = problem.graph, problem.costs
    budget = float(problem.budget_bytes)
    sched = _schedule(g, plan, schedule)
    sizes = [t.bytes for t in g.tensors]
    n = sched.n_fwd
    steps = sched.n_steps

    tol = time_tolerance(c)
    fixed, issue = _issue_points(sched, plan, sizes, budget)
    acc = fixed.copy()   # accounted memory per step, pending D2H sources excluded
    for t, k in issue.items():
        acc[sched.stage_first_step[k]:sched.swap_bwd[t][1] + 1] += sizes[t]

    # ---- D2H queue ----
    q = list(plan.d2h_order) if plan.d2h_order is not None else sched.d2h_queue(g)
    qpos = {t: i for i, t in enumerate(q)}
    d2h_start = [math.nan] * len(q)
    d2h_end = [math.nan] * len(q)
    becomes_pending: dict[int, list[int]] = {}
    for t, (_, lf) in sched.swap_fwd.items():
        becomes_pending.setdefault(lf + 1, []).append(t)
    h2dq = sched.h2d_queue()
    h2d_start: dict[int, float] = {}
    h2d_end: dict[int, float] = {}
    hq_next = 0

    S = [0.0] * steps
    E = [0.0] * steps
    ready = [0.0] * steps   # ready time of each step: reached and done waiting for memory
    fwd_s, bwd_s = c.fwd_s, c.bwd_s
    qi = 0
    prev_d2h = 0.0
    prev_h2d = 0.0
    pend: list[int] = []          # queue positions pending (forward use over, not yet released)
    pend_bytes = 0.0
    stall_f = stall_b = 0.0
    t_prev = 0.0
    d2h_starts_sorted: list[float] = []
    for s in range(steps):
        for t in becomes_pending.get(s, ()):
            bisect.insort(pend, qpos[t])
            pend_bytes += sizes[t]
        reached = t_prev
        # release sources whose copy has ended
        while pend and not math.isnan(d2h_end[pend[0]]) and d2h_end[pend[0]] <= reached + tol:
            pend_bytes -= sizes[q[pend.pop(0)]]
        need = acc[s] + pend_bytes
        start = reached
        while need > budget + _EPS:
            if not pend or math.isnan(d2h_end[pend[0]]):
                kind = sched.kinds[s]
                name = g.ops[sched.ops[s]].name if sched.ops[s] >= 0 else "optimizer"
                return _infeasible(problem, plan, f"step {s} ({kind} {name}) needs {int(need)} bytes "
                                   f"> budget {int(budget)} with no pending copy left to free", int(need))
            i = pend.pop(0)
            start = max(start, d2h_end[i])
            pend_bytes -= sizes[q[i]]
            need -= sizes[q[i]]
        ready[s] = start
        # H2D copies this step waits for (FIFO: every earlier copy in the queue first)
        for t in sched.uses[s]:
            while t not in h2d_end:
                x = h2dq[hq_next]
                hq_next += 1
                i = qpos[x]
                if math.isnan(d2h_end[i]):
                    raise PlanError(f"plan.d2h_order: tensor {x} cannot be copied out before it is needed")
                hs = max(ready[sched.stage_first_step[issue[x]]], d2h_end[i], prev_h2d)
                dur = c.h2d_s[x]
                if c.duplex_factor < 1 and _busy(d2h_starts_sorted, d2h_end, hs, tol):
                    dur /= c.duplex_factor
                h2d_start[x], h2d_end[x] = hs, hs + dur
                prev_h2d = hs + dur
            start = max(start, h2d_end[t])
        S[s] = start
        kind, op = sched.kinds[s], sched.ops[s]
        dur = fwd_s[op] if kind in (FWD, REC) else bwd_s[op] if kind == BWD else c.optimizer_s
        E[s] = start + dur
        if s < n:
            stall_f += start - t_prev
        else:
            stall_b += start - t_prev
        t_prev = E[s]
        if kind == FWD:  # copies of this step's swapped outputs (and any now unblocked) join the queue
            while qi < len(q) and g.tensors[q[qi]].producer <= s:
                ds = max(E[g.tensors[q[qi]].producer], prev_d2h)
                d2h_start[qi], d2h_end[qi] = ds, ds + c.d2h_s[q[qi]]
                prev_d2h = d2h_end[qi]
                d2h_starts_sorted.append(ds)
                qi += 1

    # ---- memory curve (actual times; frees before allocations at equal times) ----
    ev_t: list[float] = []
    ev_b: list[float] = []
    for a, f, b, _ in sched.intervals:
        if b:
            ev_t += (S[a], E[f])
            ev_b += (b, -b)
    for t, (p, lf) in sched.swap_fwd.items():
        ev_t += (S[p], max(E[lf], d2h_end[qpos[t]]))
        ev_b += (sizes[t], -sizes[t])
    for t, (_, f) in sched.swap_bwd.items():
        ev_t += (h2d_start[t], E[f])
        ev_b += (sizes[t], -sizes[t])
    tt = np.asarray(ev_t)
    bb = np.asarray(ev_b)
    order = np.argsort(tt, kind="stable")
    tt, bb = tt[order], bb[order]
    same = np.cumsum(np.diff(tt, prepend=-math.inf) > tol)   # times within tol of the previous are equal
    order = np.lexsort((bb, same))
    tt, bb = np.maximum.accumulate(tt[order]), bb[order]
    curve = np.cumsum(bb)
    peak = int(round(curve.max())) if curve.size else 0

    recompute = sum(E[s] - S[s] for s in range(steps) if sched.kinds[s] == REC)
    step_time = E[-1]
    events: tuple[Event, ...] = ()
    if detail:
        evs = []
        for s in range(steps):
            op = sched.ops[s]
            name = g.ops[op].name if op >= 0 else "optimizer"
            evs.append(Event(S[s], E[s], "compute", f"{sched.kinds[s]}:{name}", sched.kinds[s],
                             op if op >= 0 else None))
        for i, t in enumerate(q):
            evs.append(Event(d2h_start[i], d2h_end[i], "d2h", f"d2h:{g.tensors[t].name}", "d2h", None, t))
        for t in h2dq:
            evs.append(Event(h2d_start[t], h2d_end[t], "h2d", f"h2d:{g.tensors[t].name}", "h2d", None, t))
        events = tuple(evs)
    return SimResult(
        feasible=True, step_time_s=step_time, ideal_step_time_s=problem.ideal_step_s,
        peak_bytes=peak, budget_bytes=budget, compute_s=step_time - stall_f - stall_b - recompute,
        recompute_s=recompute, stall_fwd_s=stall_f, stall_bwd_s=stall_b,
        swapped_bytes=sum(sizes[t] for t in sched.swap_fwd), counts=plan.counts(), events=events,
        memory_times=tt if detail else np.zeros(0), memory_bytes=curve if detail else np.zeros(0),
        reason="")


def _busy(starts_sorted, d2h_end, t: float, tol: float) -> bool:
    """Is the D2H engine copying at time ``t``? (copies are FIFO, so starts are sorted)"""
    i = bisect.bisect_right(starts_sorted, t) - 1
    return i >= 0 and d2h_end[i] > t + tol


def _infeasible(problem, plan: Plan, reason: str, need: int) -> SimResult:
    return SimResult(feasible=False, step_time_s=math.inf, ideal_step_time_s=problem.ideal_step_s,
                     peak_bytes=need, budget_bytes=float(problem.budget_bytes), counts=plan.counts(),
                     reason=reason)


__all__ = ["simulate", "default_issue_points", "issue_points", "time_tolerance"]
