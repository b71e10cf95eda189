"""Multi-level checkpoint plans on the chain of blocks, for ``dp-checkpoint`` when no
single-level plan fits (docs/planners.md, "Multi-level fallback").

**Binomial** (``table``, ``splits``): Griewank & Walther's recursion on blocks with heterogeneous
costs. Reversing the blocks ``[c, e)`` with the input ``x_c`` resident and ``s`` free slots costs

    F(c, c+1, s) = leaf(c)                       (re-run block c's own tensors, then its backward)
    F(c, e, 0)   = inf                           (e - c > 1)
    F(c, e, s)   = min_{c<m<e} adv(c, m) + F(m, e, s-1) + F(c, m, s)

where ``adv(c, m)`` is the forward time of the ops that rebuild ``x_m`` from ``x_c`` (advance,
store ``x_m`` in a slot, reverse the right part with one slot less, then the left part with the
slot back). On a chain of unit ops this is Revolve's ``F(l, s)`` minus the first sweep, which is
the forward pass itself.

**Stage-aware** (``memory_aware``): the same recursion, but a slot is not a fixed number: the
state is ``k``, the checkpoints held outside the segment, and every choice is checked against
what its own stage holds (docs/timeline.md, "Backward: recompute, prefetch, gradients" to "Memory and the budget"): a leaf needs the block's tensors, the
gradients alive at its backward steps and its workspace; an advance in stage ``sigma`` (the
first stage of the segment: the last op of block ``e-1``) needs the gradients alive during that
stage's recompute steps and, per block passed, its output, its tensors and the previous block's
output; both also hold the always-kept tensors of the blocks not yet reversed. Free memory is
``budget - C0 - x_0 - x_c - k * X`` (``X`` the largest block input). The first sweep is the
forward pass: free, but every block it passes must fit next to the checkpoints kept so far, and
the head and loss (``tail_memory``: the steps after the chain, which run while every checkpoint
of the first sweep is held) must fit next to all of them.
Where gradients are few (the last stages: the loss's output has none) more checkpoints fit, so
this beats the binomial schedule on unit chains (chain(10) at 3 bytes: 28 re-runs against 36)
and equals the brute-force optimum over all hold points on chains of 6-9 unit ops
(``tests/test_timeline_multilevel.py``, benchmarks/README.md).

As a plan (docs/timeline.md, "Backward: recompute, prefetch, gradients", hold points): the split points of the first sweep are
kept in the forward pass (KEEP); a split point ``m`` chosen for ``[c, e)`` deeper down is
RECOMPUTE with hold point = the first stage of that reversal (the last op of block ``e-1``), and
every tensor a block produces for itself is RECOMPUTE with hold point = the block's own first
stage (its last op): when the schedule only passes through a block, its tensors are freed in the
stage that made them.
"""

from __future__ import annotations

import math

import numpy as np

from ..core.plan import Decision
from ..timeline import compile_schedule
from . import _chain


def advance_seconds(problem, bl) -> list[float]:
    """Per block ``b``: forward seconds of the ops the simulator re-runs to rebuild the next
    block's input from ``x_b`` (the last block: its output's producers, for completeness); the
    tensors every checkpoint plan keeps (``_chain.checkpoint_decisions``) stop the re-runs."""
    g, fwd = problem.graph, problem.costs.fwd_s
    where = _chain.block_of_tensor(g, bl)
    base = _chain.checkpoint_decisions(problem, set(), bl)
    out = []
    for b in bl:
        target = bl[b.index + 1].input if b.index + 1 < len(bl) else None
        start = [g.tensors[target].producer] if target is not None else list(b.ops)
        ops, stack = set(), start
        while stack:
            p = stack.pop()
            if p in ops:
                continue
            ops.add(p)
            for x in g.ops[p].inputs:
                if where.get(x) == b.index and base.get(x) is not Decision.KEEP and x != b.input:
                    stack.append(g.tensors[x].producer)
        out.append(sum(fwd[o] for o in ops))
    return out


def table(adv: list[float], leaf: list[float], s_max: int) -> np.ndarray:
    """``F[s, c, e]`` of the module docstring for ``s <= s_max`` (bottom up, vectorised over the
    split point)."""
    n = len(adv)
    pre = np.concatenate(([0.0], np.cumsum(adv)))
    F = np.full((s_max + 1, n + 1, n + 1), np.inf)
    for c in range(n):
        F[:, c, c + 1] = leaf[c]
    for s in range(1, s_max + 1):
        for length in range(2, n + 1):
            for c in range(n - length + 1):
                e = c + length
                m = np.arange(c + 1, e)
                F[s, c, e] = np.min(pre[m] - pre[c] + F[s - 1, m, e] + F[s, c, m])
    return F


def splits(F: np.ndarray, adv: list[float], s: int) -> tuple[set[int], dict[int, int]]:
    """The schedule of ``F[s, 0, n]``: block indices stored in the forward pass, and for every
    other split block ``m`` the block ``e - 1`` whose reversal stores it."""
    n = F.shape[1] - 1
    pre = np.concatenate(([0.0], np.cumsum(adv)))
    kept, stored_at = {0}, {}
    stack = [(0, n, s, True)]
    while stack:
        c, e, k, top = stack.pop()
        if e - c == 1:
            continue
        m = np.arange(c + 1, e)
        v = pre[m] - pre[c] + F[k - 1, m, e] + F[k, c, m]
        best = int(m[int(np.argmin(v))])
        if top:
            kept.add(best)
        else:
            stored_at[best] = e - 1
        stack.append((best, e, k - 1, top))
        stack.append((c, best, k, False))
    return kept, stored_at


def plan_for(problem, bl, kept: set[int], stored_at: dict[int, int]) -> tuple[dict[int, Decision], dict[int, int]]:
    """Decisions and hold points of a schedule: ``kept`` block inputs stored in the forward pass,
    ``stored_at[m] = b``: block input ``m`` stored when the reversal of block ``b`` starts."""
    dec = _chain.checkpoint_decisions(problem, kept, bl)
    last_op = [b.ops[-1] for b in bl]
    hold: dict[int, int] = {}
    inputs = {b.input: b.index for b in bl if b.input is not None}
    for b in bl:
        for t in b.produced:
            if t in inputs or (t in dec and dec[t] is not Decision.RECOMPUTE):
                continue
            hold[t] = last_op[b.index]
    for m, e1 in stored_at.items():
        x = bl[m].input
        if dec.get(x) is Decision.RECOMPUTE:
            hold[x] = last_op[e1]
    return dec, hold


def tail_memory(problem, bl) -> float:
    """The most the steps of the ops after the chain (forward and backward: head, loss) hold when
    the chain keeps only its input: the checkpoints of the first sweep come on top of it."""

    last = bl[-1].ops[-1]
    if last == len(problem.graph.ops) - 1:
        return 0.0
    dec = _chain.checkpoint_decisions(problem, set(), bl)
    sched = compile_schedule(problem.graph, dec)
    mem = sched.static_memory()
    steps = [i for i, o in enumerate(sched.ops) if o > last]
    return float(mem[steps].max()) if steps else 0.0


def memory_aware(problem, model, leaf: list[float], adv: list[float], budget: float, tail: float = 0.0):
    """The stage-aware schedule (module docstring, "Stage-aware"): ``(kept, stored_at, cost)`` or
    None when the model finds nothing that fits ``budget``. ``tail``: ``tail_memory``."""
    g, bl = problem.graph, model.bl
    n = len(bl)
    X = max(model.x[1:])
    if X <= 0:
        return None
    # grads alive during the recompute steps of stage s: producer <= s < last consumer
    gr = np.zeros(len(g.ops) + 1)
    for t in g.tensors:
        if t.requires_grad and g.consumers[t.id] and t.producer is not None:
            last = g.consumers[t.id][-1]
            if last > t.producer:
                gr[t.producer] += t.bytes
                gr[last] -= t.bytes
    g_rec = np.cumsum(gr)[:-1]
    last_op = [b.ops[-1] for b in bl]
    ws = [max(g.ops[o].workspace_bytes for o in b.ops) for b in bl]
    nxt = [model.x[b + 1] if b + 1 < n else 0 for b in range(n)]
    w_adv = np.array([nxt[b] + model.a[b] + model.fixed[b] + ws[b] for b in range(n)], float)
    need_leaf = np.array([model.a[b] + model.g[b] for b in range(n)], float)
    fixedpre = np.concatenate(([0.0], np.cumsum(model.fixed)))
    base = budget - model.c0 - model.x[0]
    K = int(min(n, max(base // X, 0)))
    pre = np.concatenate(([0.0], np.cumsum(adv)))
    xc = [0.0] + [float(x) for x in model.x[1:]]

    def avail(c, k):
        return base - xc[c] - k * X

    inf = math.inf
    F = np.full((K + 2, n + 1, n + 1), inf)      # F[k, c, e]; k = K + 1 is always inf

    def split(c, e, k):
        """(cost, split block) of reversing [c, e) by one advance in its first stage."""
        room = avail(c, k) - fixedpre[e] - g_rec[last_op[e - 1]]
        kk = min(k + (1 if c > 0 else 0), K + 1)
        best, arg, run = inf, None, 0.0          # run: max advance need over blocks c..m-1
        for m in range(c + 1, e):
            run = max(run, w_adv[m - 1] + (X if m - 1 > c else 0))
            if run > room:
                break
            v = pre[m] - pre[c] + F[kk, m, e] + F[k, c, m]
            if v < best:
                best, arg = v, m
        return best, arg

    for k in range(K, -1, -1):
        for c in range(n):
            if need_leaf[c] + fixedpre[c + 1] <= avail(c, k):
                F[k, c, c + 1] = leaf[c]
        for length in range(2, n + 1):
            for c in range(n - length + 1):
                F[k, c, c + length] = split(c, c + length, k)[0]
    # the first sweep is the forward pass: no advance cost, forward memory instead
    fwd_need = [model.fwd[b, False] for b in range(n)]
    T = np.full((K + 2, n + 1), inf)
    choice: dict = {}
    for k in range(K, -1, -1):
        for c in range(n - 1, -1, -1):
            if c == n - 1:
                # the head and loss run with every checkpoint of the first sweep held
                fits_tail = tail + (k + (1 if c > 0 else 0)) * X <= budget
                T[k, c] = F[k, c, n] if fits_tail else inf
                continue
            best, arg, run = inf, None, 0.0
            kk = k + (1 if c > 0 else 0)
            for m in range(c + 1, n):
                j = m - 1
                run = max(run, fixedpre[j + 1] + (model.fwd[j, True] if j == c else fwd_need[j]))
                if run > avail(c, k):
                    break
                v = T[min(kk, K + 1), m] + F[k, c, m]
                if v < best:
                    best, arg = v, m
            T[k, c] = best
            choice[k, c] = arg
    if not math.isfinite(T[0, 0]):
        return None
    kept, stored_at = {0}, {}
    c, k = 0, 0
    stack = []
    while c < n - 1:
        m = choice[k, c]
        kept.add(m)
        stack.append((c, m, k))
        k, c = k + (1 if c > 0 else 0), m
    while stack:
        c, e, k = stack.pop()
        if e - c == 1:
            continue
        arg = split(c, e, k)[1]
        stored_at[arg] = e - 1
        stack.append((arg, e, k + (1 if c > 0 else 0)))
        stack.append((c, arg, k))
    return kept, stored_at, float(T[0, 0])


def best_plan(problem, model, rounds: int = 20):
    """The fastest fitting multi-level plan (by simulation) among the stage-aware schedule and the
    binomial one with the most slots that fits; ``(decisions, hold points, label)`` or None.
    ``model``: ``dp._Model`` (its ``leaf``: each block's own re-run seconds).

    Needs every block input after the first to be a recomputable planning tensor
    (``model.can_none``). The stage-aware model is exact on chains of single ops; elsewhere its
    plan is simulated and, if it does not fit, re-solved with the budget lowered by the overshoot
    (at most ``rounds`` times). Binomial slots are tried from the most that the budget could hold
    (``s`` block inputs of the smallest size next to ``C0``) down to one."""
    bl = model.bl
    n = len(bl)
    if n < 2 or not all(model.can_none[1:]):
        return None
    leaf = model.leaf
    adv = advance_seconds(problem, bl)
    cands = []
    limit = problem.budget_bytes
    tail = tail_memory(problem, bl)
    free = problem.with_budget(None)
    for _ in range(rounds):
        found = memory_aware(problem, model, leaf, adv, limit, tail)
        if found is None:
            break
        dec, hold = plan_for(problem, bl, found[0], found[1])
        r = _chain.simulate_plan(problem, dec, hold)
        if r.fits:
            cands.append((r.step_time_s, 0, dec, hold, "stage-aware"))
            break
        limit -= max(_chain.simulate_plan(free, dec, hold).peak_bytes - problem.budget_bytes, 1)
    x_min = min(model.x[1:])
    room = problem.budget_bytes - model.c0
    s_max = n - 1 if x_min <= 0 or not math.isfinite(room) else int(min(n - 1, max(room // x_min, 1)))
    F = table(adv, leaf, s_max)
    for s in range(s_max, 0, -1):
        if not math.isfinite(F[s, 0, n]):
            break
        dec, hold = plan_for(problem, bl, *splits(F, adv, s))
        r = _chain.simulate_plan(problem, dec, hold)
        if r.fits:
            cands.append((r.step_time_s, 1, dec, hold, f"binomial, {s} slots"))
            break
    if not cands:
        return None
    _, _, dec, hold, label = min(cands, key=lambda c: (c[0], c[1]))
    return dec, hold, label

