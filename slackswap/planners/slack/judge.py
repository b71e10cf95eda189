"""Helpers of the SlackSwap planner (``slack_planner.py``): rebuild costs, D2H slack, prefetch points,
simulator judge. Private: the public API is ``SlackPlanner``.

Rebuild cost (docs/timeline.md, "Backward: recompute, prefetch, gradients"): a RECOMPUTE tensor is rebuilt by re-running its
producer, after recursively regenerating every input that is not resident (unsaved
intermediates and other RECOMPUTE tensors). Regenerated tensors stay until their last use, so
every op is re-run at most once: the cost of a recompute set ``R`` is the forward time of the
*closure* of ops re-run for ``R``, and the marginal cost of adding ``t`` is the forward time of
the ops its closure adds.
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from ...bounds.pipeline import path_constants
from ...core.plan import Decision, Plan
from ...timeline import compile_schedule, simulate
from ...timeline.pipeline import pipeline_of
from ...timeline.simulate import memory_bound, time_tolerance


def rerun_closure(graph, t: int, evicted: set[int], planning: set[int]) -> set[int]:
    """Ops re-run to rebuild tensor ``t`` when the tensors in ``evicted`` (and every unsaved
    intermediate) are not resident; step inputs and other planning tensors are."""
    return rerun_union(graph, (t,), evicted, planning)


def rerun_union(graph, ts, evicted: set[int], planning: set[int]) -> set[int]:
    """The union of ``rerun_closure`` over the tensors ``ts``, in one walk."""
    ins, tensors = graph.produced_inputs, graph.tensors
    out: set[int] = set()
    stack = [p for p in (tensors[t].producer for t in ts) if p is not None][::-1]
    while stack:
        p = stack.pop()
        if p in out:
            continue
        out.add(p)
        for y, q in ins[p]:
            if y in evicted or y not in planning:
                stack.append(q)
    return out


def d2h_fifo_ends(items: list[tuple[int, float, float]]) -> list[float]:
    """D2H FIFO (docs/timeline.md, "Forward lifetimes"): ``items`` = (producer, producer end, copy s) in
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
    recurrence), so a rejected insertion costs only the copies it would delay.

    While every end meets the deadline, two shortcuts give the same answers without the walk:
    an item refused under it is refused again at once (items are only ever added, and an added
    item can only delay the copies after it, so an end the refused item would push past the
    deadline stays past it); and an item is refused when its own end plus every copy after it
    (``fsum``) is past the deadline by more than float rounding can account for (inserted at
    ``i`` with end ``e``, the last copy ends at ``max(old last end, e + sum of the copy times
    from i on)``: max-plus)."""

    def __init__(self):
        self.items: list[tuple[int, float, float]] = []
        self.ends: list[float] = []
        self.durs: list[float] = []   # copy seconds, in FIFO order
        self._refused: tuple[float, set] = (math.nan, set())   # (deadline, items refused under it)

    def insert(self, item: tuple[int, float, float], deadline: float) -> bool:
        """Insert ``item`` = (producer, producer end, copy s) if every copy from it on still
        ends by ``deadline``; return whether it was inserted."""
        items, ends = self.items, self.ends
        if self._refused[0] == deadline:
            if item in self._refused[1]:
                return False
        else:   # refusals are final only while every end meets the deadline
            self._refused = (deadline if not ends or ends[-1] <= deadline else math.nan, set())
        i = bisect.bisect_right(items, item)
        prev = max(ends[i - 1] if i else 0.0, item[1]) + item[2]
        if prev > deadline or (self._refused[0] == deadline and i < len(items)
                               and prev + math.fsum(self.durs[i:]) > deadline + 1e-9 * abs(deadline)):
            return self._refuse(item, deadline)
        new = [prev]
        for j in range(i, len(items)):
            _, ready, dur = items[j]
            e = (prev if prev > ready else ready) + dur
            if e == ends[j]:
                break
            if e > deadline:
                return self._refuse(item, deadline)
            new.append(e)
            prev = e
        items.insert(i, item)
        self.durs.insert(i, item[2])
        ends[i:i + len(new) - 1] = new
        return True

    def _refuse(self, item, deadline: float) -> bool:
        if self._refused[0] == deadline:
            self._refused[1].add(item)
        return False

    def insert_all(self, items: list[tuple[int, float, float]], deadline: float) -> bool:
        """Insert every item of ``items`` (``insert``) or, if one is refused, none."""
        if len(items) == 1:
            return self.insert(items[0], deadline)
        if self._refused[0] == deadline and any(x in self._refused[1] for x in items):
            return False
        f = self.copy()
        if not all(f.insert(x, deadline) for x in items):
            return False
        self.items, self.ends, self.durs, self._refused = f.items, f.ends, f.durs, f._refused
        return True

    def copy(self) -> Fifo:
        f = Fifo()
        f.items, f.ends, f.durs = list(self.items), list(self.ends), list(self.durs)
        f._refused = (self._refused[0], set(self._refused[1]))
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

    ``score(..., prefilter=True)`` first sums a lower bound of the simulator's accounted memory
    on the forward steps (``ForwardBound``), then at every step (``timeline.memory_bound``, on
    the simulator's compiled core: docs/timeline.md, "Memory and the budget": fixed lifetimes, swapped
    tensors' forward lives, and every prefetched copy from its first backward use to its last
    use, which its issue stage can only extend). If the bound exceeds the budget anywhere the
    simulator would report the plan infeasible, so it is scored ``inf`` without a simulation
    (counted in ``pruned``, not in ``calls``). A score the caller already has (a baseline
    planner's own simulation) is ``record``-ed, not simulated."""

    def __init__(self, problem, max_sims: int):
        self.problem, self.max_sims, self.calls, self.pruned = problem, max_sims, 0, 0
        self.cache: dict = {}
        self._pset = set(problem.planning_ids)
        self._fwd: ForwardBound | None = None   # built at the first prefiltered score
        self.tol, self.ideal = time_tolerance(problem.costs), problem.ideal_step_s
        self.pipe = pipeline_of(problem)
        self._paths: list | None = None     # a pipeline stage's (j, C_j), at the first compute_bound

    def compute_bound(self, decisions: dict) -> float:
        """A lower bound of the simulated step time: the compute stream runs every step one
        after another, i.e. every forward and backward op and the optimizer (``ideal_step_s``)
        plus each op the recomputes re-run (once: docs/timeline.md, "Backward: recompute, prefetch, gradients"), less ``tol`` (so
        the bound stays below the simulator's sum in any order of addition).

        On a pipeline stage (m micro-batches) the ideal step holds waits for arrivals that a
        re-run may fill, so the bound is the pipeline bound's paths row instead: the largest
        ``C_j + j * rho`` (``bounds.pipeline.path_constants``: the longest path through the
        stage's passes holding ``j`` backward passes, each ``rho``, the re-run seconds, longer),
        at least the ideal step and the compute stream's work ``m (F + B + rho) + optimizer``,
        less ``2 m`` times ``tol``."""
        rec = {t for t, d in decisions.items() if d is Decision.RECOMPUTE}
        ops = rerun_union(self.problem.graph, rec, rec, self._pset)
        fwd = self.problem.costs.fwd_s
        if self.pipe is not None:
            if self._paths is None:
                self._paths = [(j, v) for j, v in enumerate(path_constants(self.problem.costs, self.pipe))
                               if math.isfinite(v)]
            rho = sum(fwd[o] for o in ops)
            return max(v + j * rho for j, v in self._paths) - 2 * self.pipe.microbatches * self.tol
        return self.ideal + sum(fwd[o] for o in ops) - self.tol

    @property
    def left(self) -> int:
        return self.max_sims - self.calls

    @staticmethod
    def _key(decisions: dict, issue: dict) -> tuple:
        return tuple(sorted(decisions.items())), tuple(sorted(issue.items()))   # tensor ids are unique

    def record(self, decisions: dict, issue: dict, seconds: float, result=None) -> None:
        """Cache the score of a plan the caller has simulated already (``seconds``: its step time
        if it fits, else ``inf``; ``result``: its SimResult when at hand); not a simulation of the
        judge's, so not counted in ``calls``."""
        self.cache.setdefault(self._key(decisions, issue), (seconds, result))

    def result(self, decisions: dict, issue: dict):
        """The SimResult of a plan scored before, or None (not scored, pruned or recorded without)."""
        return self.cache.get(self._key(decisions, issue), (None, None))[1]

    def score(self, decisions: dict, issue: dict, prefilter: bool = False) -> tuple[float, object]:
        """(step seconds, SimResult or None when pruned); ``inf`` when infeasible or over budget."""
        key = self._key(decisions, issue)
        if key in self.cache:
            return self.cache[key]
        if prefilter and self._fwd is None:
            self._fwd = ForwardBound(self.problem)
        if prefilter and (self._fwd.over(decisions)
                          or not _under_budget(self.problem, memory_bound(self.problem, decisions))):
            self.pruned += 1
            self.cache[key] = (math.inf, None)
            return self.cache[key]
        self.calls += 1
        r = simulate(self.problem, Plan(decisions, issue_points=issue), detail=False)
        s = r.step_time_s if (r.feasible and r.fits) else math.inf
        self.cache[key] = (s, r)
        return s, r


class ForwardBound:
    """``timeline.memory_bound`` on the forward steps, without compiling a schedule. There a
    planning tensor's decision only sets how long it stays: KEEP past the forward pass, SWAP and
    RECOMPUTE (or no decision) until its last forward use, so the bound at forward step ``i`` is
    keep-all's less the bytes of every evicted tensor last used before ``i`` (whole bytes: exact).
    ``over(decisions)``: this bound, hence ``memory_bound``, exceeds the budget."""

    def __init__(self, problem):
        g = problem.graph
        self.n, self.budget = len(g.ops), problem.budget_bytes
        self.planning = list(problem.planning_ids)
        keep = dict.fromkeys(self.planning, Decision.KEEP)
        self.base = memory_bound(problem, keep)[:self.n]
        self.after = np.array([max(g.last_forward_use(t), g.tensors[t].producer) + 1 for t in self.planning], int)
        self.bytes = np.array([g.tensors[t].bytes for t in self.planning], float)

    def over(self, decisions: dict) -> bool:
        gone = np.fromiter((decisions.get(t) is not Decision.KEEP for t in self.planning), bool, len(self.planning))
        drop = np.bincount(self.after[gone], self.bytes[gone], self.n + 1)
        return bool(self.n and (self.base - np.cumsum(drop)[:-1]).max() > self.budget + 1e-9)


def memory_may_fit(problem, decisions: dict) -> bool:
    """False only if the simulator must find ``decisions`` infeasible: a lower bound of the
    accounted memory exceeds the budget at some step."""
    return _under_budget(problem, memory_bound(problem, decisions))


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

    free = problem.with_budget(None) if pipeline_of(problem) is not None else None

    def peak(d) -> float:   # keep/recompute only: the static memory, exact
        if free is not None:    # a pipeline stage: the peak of its timeline (one simulation)
            return float(simulate(free, Plan(d), detail=False).peak_bytes)
        mem = memory_bound(problem, d)
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
