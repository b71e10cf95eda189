"""Helpers of the SlackSwap planner (``slack.py``): rebuild costs, D2H slack, prefetch points,
simulator-judged local search. Private: the public API is ``SlackPlanner``.

Rebuild cost (docs/timeline.md section 3): a RECOMPUTE tensor is rebuilt by re-running its
producer, after recursively regenerating every input that is not resident (unsaved
intermediates and other RECOMPUTE tensors). Regenerated tensors stay until their last use, so
every op is re-run at most once: the cost of a recompute set ``R`` is the forward time of the
*closure* of ops re-run for ``R``, and the marginal cost of adding ``t`` is the forward time of
the ops its closure adds.
"""

from __future__ import annotations

import math

from ..plan import Decision, Plan
from ..timeline import compile_schedule, simulate


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
    """Counts and caches simulator calls (detail=False); the simulator is the only judge."""

    def __init__(self, problem, max_sims: int):
        self.problem, self.max_sims, self.calls = problem, max_sims, 0
        self.cache: dict = {}

    @property
    def left(self) -> int:
        return self.max_sims - self.calls

    def score(self, decisions: dict, issue: dict) -> tuple[float, object]:
        """(step seconds, SimResult); ``inf`` when infeasible or over budget."""
        key = (tuple(sorted((t, d.value) for t, d in decisions.items())), tuple(sorted(issue.items())))
        if key in self.cache:
            return self.cache[key]
        self.calls += 1
        r = simulate(self.problem, Plan(decisions, issue_points=issue), detail=False)
        s = r.step_time_s if (r.feasible and r.fits) else math.inf
        self.cache[key] = (s, r)
        return s, r


def local_search(judge: Judge, decisions: dict, prefetch: str, moves: list[tuple[int, Decision]],
                 best: float, max_passes: int = 2) -> tuple[dict, float]:
    """Simulator-judged local search: try each single-tensor move ``(t, new decision)`` in the
    given order, accept only strict improvements of the step time, stop when no pass improves or
    the simulation budget is spent."""
    cur = dict(decisions)
    for _ in range(max_passes):
        improved = False
        for t, d in moves:
            if judge.left <= 0:
                return cur, best
            if cur.get(t) is d:
                continue
            cand = dict(cur)
            cand[t] = d
            s, _ = judge.score(cand, issue_points(judge.problem, cand, prefetch))
            if s < best * (1 - 1e-12):
                cur, best, improved = cand, s, True
        if not improved:
            break
    return cur, best
