"""Helpers of the SlackSwap planner (``planner.py``): rebuild costs, D2H slack, prefetch points,
simulator judge. Private: the public API is ``SlackPlanner``.

Rebuild cost (docs/timeline.md section 3): a RECOMPUTE tensor is rebuilt by re-running its
producer, after recursively regenerating every input that is not resident (unsaved
intermediates and other RECOMPUTE tensors). Regenerated tensors stay until their last use, so
every op is re-run at most once: the cost of a recompute set ``R`` is the forward time of the
*closure* of ops re-run for ``R``, and the marginal cost of adding ``t`` is the forward time of
the ops its closure adds.
"""

from __future__ import annotations

import bisect
import math

from ...plan import Decision, Plan
from ...timeline import compile_schedule, simulate
from ...timeline.simulate import time_tolerance


def rerun_closure(graph, t: int, evicted: set[int], planning: set[int]) -> set[int]:
    """Ops re-run to rebuild tensor ``t`` when the tensors in ``evicted`` (and every unsaved
    intermediate) are not resident; step inputs and other planning tensors are."""
    ops, tensors = graph.ops, graph.tensors
    out: set[int] = set()
    stack = [t]
    seen: set[int] = set()
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        p = tensors[x].producer
        if p is None or p in out:
            continue
        out.add(p)
        for y in ops[p].inputs:
            if tensors[y].producer is not None and (y not in planning or y in evicted):
                stack.append(y)
    return out


def d2h_fifo_ends(items: list[tuple[int, float, float]]) -> list[float]:
    """D2H FIFO (docs/timeline.md section 2): ``items`` = (producer, producer end, copy s) in
    production order; each copy starts at max(producer end, previous copy end)."""
    ends, prev = [], 0.0
    for _, ready, dur in items:
        prev = max(prev, ready) + dur
        ends.append(prev)
    return ends


class Fifo:
    """The production-ordered D2H FIFO of the accepted swaps with its copy end times, kept up to
    date incrementally: ``insert`` recomputes ends only from the new item on and stops as soon
    as an end is unchanged (every later end is then unchanged too: FIFO ends are a max-plus
    recurrence), so a rejected insertion costs only the copies it would delay."""

    def __init__(self):
        self.items: list[tuple[int, float, float]] = []
        self.ends: list[float] = []

    def insert(self, item: tuple[int, float, float], deadline: float) -> bool:
        """Insert ``item`` = (producer, producer end, copy s) if every copy from it on still
        ends by ``deadline``; return whether it was inserted."""
        items, ends = self.items, self.ends
        i = bisect.bisect_right(items, item)
        prev = max(ends[i - 1] if i else 0.0, item[1]) + item[2]
        if prev > deadline:
            return False
        new = [prev]
        for j in range(i, len(items)):
            e = max(prev, items[j][1]) + items[j][2]
            if e == ends[j]:
                break
            if e > deadline:
                return False
            new.append(e)
            prev = e
        items.insert(i, item)
        ends[i:i + len(new) - 1] = new
        return True

    def copy(self) -> Fifo:
        f = Fifo()
        f.items, f.ends = list(self.items), list(self.ends)
        return f

    def last_end(self) -> float:
        return self.ends[-1] if self.ends else 0.0


def issue_points(problem, decisions: dict, policy: str) -> dict[int, int]:
    """Prefetch issue stages for ``policy``: ``auto`` -> {} (the simulator issues each copy as
    early as the budget allows); ``first_use`` -> the stage of the first backward use;
    ``lookahead`` -> the latest stage whose backward compute before the first use covers the
    copy's H2D time (just-in-time prefetch, less memory held by early copies)."""
    if policy == "auto":
        return {}
    sched = compile_schedule(problem.graph, decisions)
    n = sched.n_fwd
    bwd, h2d = problem.costs.bwd_s, problem.costs.h2d_s
    out = {}
    for t, (u, _) in sched.swap_bwd.items():
        ju = sched.stage[u]
        if policy == "first_use":
            out[t] = ju
            continue
        k, acc = ju, 0.0
        while k < n - 1 and acc < h2d[t]:
            k += 1
            acc += bwd[k]
        out[t] = k
    return out


class Judge:
    """Counts and caches simulator calls (detail=False); the simulator is the only judge.

    ``score(..., prefilter=True)`` first compiles the schedule and sums a lower bound of the
    simulator's accounted memory at every step (docs/timeline.md section 4: fixed lifetimes,
    swapped tensors' forward lives, and every prefetched copy from its first backward use to its
    last use, which its issue stage can only extend). If the bound exceeds the budget anywhere
    the simulator would report the plan infeasible, so it is scored ``inf`` without a
    simulation (counted in ``pruned``, not in ``calls``)."""

    def __init__(self, problem, max_sims: int):
        self.problem, self.max_sims, self.calls, self.pruned = problem, max_sims, 0, 0
        self.cache: dict = {}

    @property
    def left(self) -> int:
        return self.max_sims - self.calls

    def score(self, decisions: dict, issue: dict, prefilter: bool = False) -> tuple[float, object]:
        """(step seconds, SimResult or None when pruned); ``inf`` when infeasible or over budget."""
        key = (tuple(sorted((t, d.value) for t, d in decisions.items())), tuple(sorted(issue.items())))
        if key in self.cache:
            return self.cache[key]
        sched = None
        if prefilter:
            sched, lb = memory_lower_bound(self.problem, decisions)
            if not _under_budget(self.problem, lb):
                self.pruned += 1
                self.cache[key] = (math.inf, None)
                return self.cache[key]
        self.calls += 1
        r = simulate(self.problem, Plan(decisions, issue_points=issue), detail=False, schedule=sched)
        s = r.step_time_s if (r.feasible and r.fits) else math.inf
        self.cache[key] = (s, r)
        return s, r


def memory_lower_bound(problem, decisions: dict):
    """``(schedule, bytes per step)``: a lower bound of the accounted memory at every step (see
    ``Judge``): what the schedule holds whatever the copy timing, plus each swapped tensor while
    its D2H source and its H2D destination must be resident."""
    sched = compile_schedule(problem.graph, decisions)
    lb = sched.static_memory().astype(float)
    sizes = problem.graph.tensors
    for t, (p, lf) in sched.swap_fwd.items():
        lb[p:lf + 1] += sizes[t].bytes
    for t, (u, f) in sched.swap_bwd.items():
        lb[u:f + 1] += sizes[t].bytes
    return sched, lb


def memory_may_fit(problem, decisions: dict) -> bool:
    """False only if the simulator must find ``decisions`` infeasible: a lower bound of the
    accounted memory exceeds the budget at some step."""
    return _under_budget(problem, memory_lower_bound(problem, decisions)[1])


def _under_budget(problem, lb) -> bool:
    return bool(lb.max() <= problem.budget_bytes + 1e-9) if lb.size else True


def recompute_fit(problem, max_tensors: int = 64) -> dict | None:
    """Keep/recompute decisions grown from keep-all: while the peak is over the budget, recompute
    the kept tensor that lowers the peak most per second of extra re-run time (the marginal
    forward time of the union of re-run closures), until it fits. Without swaps the accounted
    memory is the schedule's static memory, so the peak is exact without a simulation; each
    round compiles one schedule per candidate, so it runs only on problems with at most
    ``max_tensors`` planning tensors. None when it gets stuck or is skipped.

    It exists because, under "regenerated tensors stay until their last use", recomputing more
    can raise the peak at recompute steps: a greedy that only adds recomputes by rebuild cost can
    end at recompute-all, which does not fit (docs/planners.md, slack, known weakness)."""
    planning = list(problem.planning_ids)
    if len(planning) > max_tensors or not math.isfinite(problem.budget_bytes):
        return None
    g, fwd, budget = problem.graph, problem.costs.fwd_s, problem.budget_bytes
    tol = time_tolerance(problem.costs)
    pset = set(planning)
    dec = {t: Decision.KEEP for t in planning}

    def peak(d) -> float:
        mem = compile_schedule(g, d).static_memory()
        return float(mem.max()) if mem.size else 0.0

    def rerun_cost(evicted: set[int]) -> float:
        ops: set[int] = set()
        for t in evicted:
            ops |= rerun_closure(g, t, evicted, pset)
        return sum(fwd[p] for p in ops)

    cur, evicted, cost = peak(dec), set(), 0.0
    while cur > budget:
        best = None
        for t in planning:
            if dec[t] is not Decision.KEEP or not g.tensors[t].recomputable:
                continue
            cand = dict(dec)
            cand[t] = Decision.RECOMPUTE
            pk = peak(cand)
            if pk >= cur:
                continue
            extra = rerun_cost(evicted | {t}) - cost
            # bytes per second to 9 significant digits: equal ratios stay equal in any unit of time
            score = float(f"{(cur - pk) / max(extra, tol):.9e}")
            if best is None or score > best[0]:
                best = (score, t, pk, extra)
        if best is None:
            return None
        _, t, cur, extra = best
        dec[t] = Decision.RECOMPUTE
        evicted.add(t)
        cost += extra
    return dec
