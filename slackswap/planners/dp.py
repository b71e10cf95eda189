"""Optimal recompute-only checkpointing on the chain of blocks by dynamic programming.

References: Griewank & Walther 2000, "Algorithm 799: Revolve" (binomial checkpointing);
Beaumont, Herrmann et al. 2019, "Optimal checkpointing for heterogeneous chains" (rotor).

**Two levels of the same idea.**

1. ``revolve_extra_forwards(l, s)``: the pure input-checkpoint mapping. A chain of ``l`` unit
   steps; reversing step ``i`` needs its input ``x_{i-1}`` resident; every resident input except
   the chain input ``x_0`` uses one of ``s`` slots. Multi-level schedules are allowed. The DP is
   ``F(1, s) = 0``, ``F(l, 0) = inf`` (l > 1), ``F(l, s) = min_{1<=j<l} j + F(l-j, s-1) + F(j, s)``
   (advance j steps, store ``x_j``, reverse the right part with one slot less, then the left
   part); it equals Griewank's ``t*l - C(s+t, s+1)``, t the least integer with
   ``C(s+t, s) >= l`` (``griewank_formula``; counting every forward step of the schedule).

2. ``dp-checkpoint``: single-level first. Without hold points the simulator's recompute rule
   (docs/timeline.md, "Backward: recompute, prefetch, gradients") re-runs each op at most once and keeps regenerated tensors until
   their last use: such a plan is single-level. The DP optimises exactly over that space (when
   none of it fits, ``multilevel=True`` falls back to the faster of ``_multilevel``'s binomial
   and stage-aware schedules, with hold points), rotor-style with three states per block ``b``
   (input ``x_b``):
   FULL (keep ``x_b`` and every tensor the block produces: no recompute, "x-bar" in rotor),
   CKPT (keep ``x_b``, recompute the block's tensors), NONE (recompute ``x_b`` too; the block is
   rebuilt with the segment opened by the previous FULL/CKPT block). Block 0's input is kept.
   Tensors outside blocks, block outputs read outside the block and non-recomputable tensors
   are always kept (``_chain.checkpoint_decisions``).

   Model. Cost = forward seconds of the ops the simulator re-runs (``_chain.rerun_ops`` per
   block; exact). Memory: during the backward of block ``b`` of segment ``[c, e)`` the device
   holds ``C0`` (step inputs and tensors produced before the chain) + the stored bytes of blocks
   before ``c`` + every tensor of blocks ``c..b`` + ``g_b`` (gradients alive and workspace at
   block b's backward stages, plan-independent); in the forward pass, the stored prefix + the
   op's outputs, workspace and non-stored inputs. The peak over all of these must be
   ``<= budget``. On ``synthetic.chain`` graphs this model equals the simulator's peak; on
   transformer graphs it ignores short-lived intermediates, so the plan is judged by the
   simulator and, if it does not fit, the DP is re-solved with the model budget lowered by the
   overshoot (at most ``max_rounds`` times). The returned status is the simulator's.
"""

from __future__ import annotations

import math
import time
from functools import cache

from pydantic import Field

from ..bounds.pipeline import in_flight_counts
from ..core.errors import SlackSwapError
from ..core.plan import Decision, Plan, Status
from ..core.schema import PosInt, Schema
from ..timeline.pipeline import pipeline_of
from . import _chain, _multilevel
from .base import Parameterised, Tags, make_plan, register

FULL, CKPT, NONE = "full", "ckpt", "none"


@cache
def revolve_extra_forwards(l: int, s: int) -> float:  # noqa: E741 (l as in Griewank)
    """Least forward steps to reverse ``l`` unit steps with ``s`` slots (pure mapping, see above).

    >>> revolve_extra_forwards(4, 2)
    4
    """
    if l < 1 or s < 0:
        raise SlackSwapError(f"revolve_extra_forwards: need l >= 1 and s >= 0, got l={l}, s={s}")
    if l == 1:
        return 0
    if s == 0:
        return math.inf
    return min(j + revolve_extra_forwards(l - j, s - 1) + revolve_extra_forwards(j, s) for j in range(1, l))


def griewank_formula(l: int, s: int) -> int:  # noqa: E741 (l as in Griewank)
    """Griewank & Walther 2000: ``t*l - C(s+t, s+1)`` with t least such that ``C(s+t, s) >= l``."""
    t = 0
    while math.comb(s + t, s) < l:
        t += 1
    return t * l - math.comb(s + t, s + 1)


class _Model:
    """Per-block quantities of the DP (see module docstring)."""

    def __init__(self, problem):
        g, pb = problem.graph, problem
        self.bl = bl = _chain.blocks(g)
        n = len(bl)
        planning = set(pb.planning_ids)
        where = _chain.block_of_tensor(g, bl)
        base = _chain.checkpoint_decisions(pb, set(), bl)          # everything NONE
        nxt = [bl[b + 1].input if b + 1 < n else None for b in range(n)]
        B = lambda t: g.tensors[t].bytes  # noqa: E731
        self.x = [B(b.input) if b.input is not None and b.input in planning else 0 for b in bl]
        self.can_none = [b.index > 0 and b.input in planning and base.get(b.input) is Decision.RECOMPUTE
                         for b in bl]
        self.internal = [[t for t in b.produced if t in planning and t != nxt[b.index]
                          and base[t] is Decision.RECOMPUTE] for b in bl]
        self.a = [sum(B(t) for t in ts) for ts in self.internal]
        self.fixed = [sum(B(t) for t in b.produced if t in planning and base[t] is Decision.KEEP
                          and t != nxt[b.index]) for b in bl]
        self.full = [self.x[i] + self.a[i] + self.fixed[i] for i in range(n)]
        first = bl[0].ops[0] if bl else len(g.ops)
        chain_inputs = {b.input for b in bl}
        self.c0 = sum(t.bytes for t in g.tensors if t.producer is None) + sum(
            B(t) for t in planning if g.tensors[t].producer < first and t not in chain_inputs)
        # gradients alive at every backward stage (plan independent; docs/timeline.md 3)
        gl = [0] * (len(g.ops) + 1)
        for t in g.tensors:
            if t.requires_grad and g.consumers[t.id]:
                gl[t.producer] += t.bytes
                gl[g.consumers[t.id][-1] + 1] -= t.bytes
        for i in range(1, len(gl)):
            gl[i] += gl[i - 1]
        self.g = [max(gl[o] + g.ops[o].workspace_bytes for o in b.ops) for b in bl]
        self.fwd = {}
        for b in bl:
            for stored in (True, False):
                self.fwd[b.index, stored] = max(
                    sum(B(t) for t in g.ops[o].outputs) + g.ops[o].workspace_bytes
                    + sum(B(t) for t in set(g.ops[o].inputs) if where.get(t) == b.index)
                    + (B(b.input) if b.input in g.ops[o].inputs and not stored and b.index > 0 else 0)
                    for o in b.ops)
        # recompute seconds per (block, state, next block NONE)
        self.cost = {}
        for b in bl:
            for st in (FULL, CKPT, NONE):
                for nn in (False, True):
                    dec = {t: Decision.RECOMPUTE for t in self.internal[b.index] if st != FULL}
                    if nn and nxt[b.index] is not None:
                        dec[nxt[b.index]] = Decision.RECOMPUTE
                    ops = _local_reruns(g, dec, set(b.produced))
                    self.cost[b.index, st, nn] = sum(problem.costs.fwd_s[o] for o in ops)
        self.leaf = [self.cost[b, CKPT, False] for b in range(n)]   # re-run a block's own tensors

    def stored(self, b: int, st: str) -> int:
        return {FULL: self.full[b], CKPT: self.x[b] + self.fixed[b], NONE: self.fixed[b]}[st]


def _local_reruns(graph, dec, scope: set[int]) -> set[int]:
    out: set[int] = set()
    stack = [graph.tensors[t].producer for t in dec]
    while stack:
        p = stack.pop()
        if p is None or p in out:   # step inputs are always resident: nothing to re-run
            continue
        out.add(p)
        stack.extend(graph.tensors[x].producer for x in graph.ops[p].inputs
                     if x in scope and x in dec or (x in scope and not graph.saved_by[x]))
    return out


def solve_states(m: _Model, budget: float, stored_cap: float = math.inf) -> list[str] | None:
    """Exact DP over (segment start, stored bytes) with Pareto fronts; None if nothing fits.
    ``stored_cap``: the plan's stored bytes (the DP's ``mem`` at the end of the chain) at most
    this (a pipeline stage: what each micro-batch in flight holds)."""
    n = len(m.bl)
    if n == 0:
        return []
    fronts: list[dict[int, tuple[float, tuple | None]]] = [dict() for _ in range(n + 1)]
    fronts[0][0] = (0.0, None)
    for c in range(n):
        best_cost = math.inf
        for mem in sorted(fronts[c]):               # Pareto prune: cost must strictly improve
            cost, parent = fronts[c][mem]
            if cost >= best_cost:
                continue
            best_cost = cost
            for st in (FULL, CKPT):
                run, peak, fixed_sum, cost_seg = 0, 0.0, 0, 0.0
                for e in range(c + 1, n + 1):
                    b = e - 1
                    if b > c and not m.can_none[b]:
                        break
                    run += m.full[b]
                    fw = (m.x[c] + m.fwd[c, True]) if b == c else m.stored(c, st) + fixed_sum + m.fwd[b, False]
                    peak = max(peak, run + m.g[b], fw)
                    if m.c0 + mem + peak > budget:
                        break
                    if b > c:
                        fixed_sum += m.fixed[b]
                    nn_end = False
                    cost_e = cost_seg + (m.cost[b, st if b == c else NONE, nn_end])
                    cost_seg += m.cost[b, st if b == c else NONE, True]
                    new_mem = mem + m.stored(c, st) + fixed_sum
                    tot = cost + cost_e
                    cur = fronts[e].get(new_mem)
                    if cur is None or tot < cur[0]:
                        fronts[e][new_mem] = (tot, (c, mem, st))
    ends = [k for k in fronts[n] if k <= stored_cap]
    if not ends:
        return None
    mem = min(ends, key=lambda k: (fronts[n][k][0], k))
    states = [NONE] * n
    e = n
    while e > 0:
        _, (c, pm, st) = fronts[e][mem]
        states[c] = st
        e, mem = c, pm
    return states


def states_decisions(problem, m: _Model, states: list[str]) -> dict[int, Decision]:
    kept = {i for i, s in enumerate(states) if s != NONE}
    full = frozenset(i for i, s in enumerate(states) if s == FULL)
    return _chain.checkpoint_decisions(problem, kept, m.bl, full)


@register("dp-checkpoint")
class DPCheckpoint(Parameterised):
    """Single-level optimal checkpointing on the block chain; multi-level (binomial) where no
    single-level plan fits and ``multilevel`` (see module docstring)."""

    name = "dp-checkpoint"
    tags = Tags(supports_recompute=True, chain_only=True)

    class Params(Schema):
        max_rounds: PosInt = Field(20, description="DP solves at most: after a plan the simulator finds over the "
                                                   "budget, the model budget is lowered by the overshoot and the DP "
                                                   "solved again")
        multilevel: bool = Field(True, description="when no single-level plan fits, fall back to multi-level "
                                                   "schedules (binomial or stage-aware, with hold points)")

    def plan(self, problem) -> Plan:
        t0 = time.perf_counter()
        m = _Model(problem)
        free = problem.with_budget(None)
        limit, dec = problem.budget_bytes, None
        piped = pipeline_of(problem) is not None
        if piped:       # a pipeline stage: the bisection of _pipeline_fit instead of the rounds below
            dec = self._pipeline_fit(problem, m)
        for _ in range(0 if piped else self.max_rounds):
            states = solve_states(m, limit)
            if states is None:
                break
            cand = states_decisions(problem, m, states)
            r = _chain.simulate_plan(problem, cand)
            if r.fits:
                dec = cand
                break
            over = _chain.simulate_plan(free, cand).peak_bytes - problem.budget_bytes
            limit = min(limit, m.c0 + _model_peak(m, states)) - max(over, 1)
        params = self.params
        if dec is None:   # the DP found none: the least-peak checkpoint plan (it may still fit)
            opts = [states_decisions(problem, m, [CKPT] * len(m.bl)),
                    _chain.checkpoint_decisions(problem, _chain.sqrt_checkpoints(len(m.bl)), m.bl)]
            dec = min(opts, key=lambda d: _chain.simulate_plan(free, d).peak_bytes)
            if self.multilevel and not _chain.simulate_plan(problem, dec).fits:
                # no single-level plan found fits: re-run blocks more than once
                found = _multilevel.best_plan(problem, m)
                if found is not None:
                    ml, hold, label = found
                    return make_plan(problem, ml, self.name, params, t0, hold_points=hold,
                                     message=f"multi-level, {label} (no single-level plan fits)")
        return make_plan(problem, dec, self.name, params, t0)

    def _pipeline_fit(self, problem, m: _Model) -> dict | None:
        """A pipeline stage (docs/planners.md, "Planning a pipeline stage"): the DP's memory model
        is one micro-batch's, while up to ``q + 1`` micro-batches hold their stored tensors at
        once (``q``: the most other micro-batches in flight at a backward pass). So the DP is
        solved with a cap ``S`` on the stored bytes and the one-micro-batch limit
        ``budget - q * S``, ``S`` found by bisection between 0 and the bytes keep-all stores
        (``max_rounds`` solves at most, the largest first), each plan judged by the pipeline's
        simulation: a plan that fits raises the low end (more stored bytes, fewer re-runs), one
        that does not, or no plan, lowers the high end. Returns the fastest plan that fits (ties:
        the first found), None when none did."""
        q = in_flight_counts(pipeline_of(problem).order)[1]
        budget = float(problem.budget_bytes)
        lo, hi = 0.0, float(sum(m.full))
        best, seen = None, {}
        for i in range(self.max_rounds):
            if i and hi - lo < 1:
                break
            cap = hi if i == 0 else 0.5 * (lo + hi)
            states = solve_states(m, budget - q * cap, cap)
            if states is None:          # nothing under this cap and limit in the model
                hi = cap
                continue
            key = tuple(states)
            if key not in seen:
                cand = states_decisions(problem, m, states)
                r = _chain.simulate_plan(problem, cand)
                seen[key] = r.fits
                if r.fits and (best is None or r.step_time_s < best[0]):
                    best = (r.step_time_s, cand)
            if seen[key]:
                lo = cap
            else:
                hi = cap
        return None if best is None else best[1]


def _model_peak(m: _Model, states: list[str]) -> float:
    """The DP model's peak of a state vector (without ``C0``)."""
    peak, mem, n = 0.0, 0, len(states)
    c = 0
    while c < n:
        e = c + 1
        while e < n and states[e] == NONE:
            e += 1
        run, fixed_sum = 0, 0
        for b in range(c, e):
            run += m.full[b]
            fw = (m.x[c] + m.fwd[c, True]) if b == c else m.stored(c, states[c]) + fixed_sum + m.fwd[b, False]
            peak = max(peak, mem + run + m.g[b], mem + fw)
            if b > c:
                fixed_sum += m.fixed[b]
        mem += m.stored(c, states[c]) + fixed_sum
        c = e
    return peak


def multilevel_plan(problem):
    """``dp-checkpoint``'s plan when it is multi-level (hold points) and fits, else None: the
    fallback of ``slack`` and of the ``milp`` planner's full-size path when no single-level
    candidate fits."""
    try:
        plan = DPCheckpoint().plan(problem)
    except SlackSwapError:      # a graph without a chain of blocks
        return None
    return plan if plan.hold_points and plan.info.status is Status.FEASIBLE else None


def binomial_plan(problem, slots: int) -> tuple[Plan, float]:
    """The ``slots``-slot binomial (Revolve) schedule on ``problem``'s chain of blocks as a plan
    with hold points, and the forward seconds its recursion counts, the first sweep included (on
    a unit chain Griewank's ``F(l, s)``, of which the plan re-runs ``F(l, s) - (l - 1)``: the
    first sweep is the forward pass). Public for comparisons (benchmarks/bench_revolve.py);
    ``dp-checkpoint`` returns it only where no single-level plan fits and it is the faster
    multi-level candidate."""
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
        raise SlackSwapError(f"binomial_plan(slots): an integer >= 1; got {slots!r}")
    m = _Model(problem)
    adv = _multilevel.advance_seconds(problem, m.bl)
    table = _multilevel.table(adv, m.leaf, slots)
    dec, hold = _multilevel.plan_for(problem, m.bl, *_multilevel.splits(table, adv, slots))
    return (Plan(dec, hold_points=hold, planner="dp-checkpoint", problem_key=problem.key),
            float(table[slots, 0, len(m.bl)]))
