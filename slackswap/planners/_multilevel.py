"""Multi-level (binomial, Revolve-style) checkpoint plans on the chain of blocks, for
``dp-checkpoint`` when no single-level plan fits (docs/planners.md, "Multi-level").

The schedule is Griewank & Walther's recursion on blocks with heterogeneous costs: reversing the
blocks ``[c, e)`` with the input ``x_c`` resident and ``s`` free slots costs

    F(c, c+1, s) = leaf(c)                       (re-run block c's own tensors, then its backward)
    F(c, e, 0)   = inf                           (e - c > 1)
    F(c, e, s)   = min_{c<m<e} adv(c, m) + F(m, e, s-1) + F(c, m, s)

where ``adv(c, m)`` is the forward time of the ops that rebuild ``x_m`` from ``x_c`` (advance,
store ``x_m`` in a slot, reverse the right part with one slot less, then the left part with the
slot back). On a chain of unit ops this is Revolve's ``F(l, s)`` minus the first sweep, which is
the forward pass itself.

As a plan (docs/timeline.md section 3, hold points): the split points of the first sweep
(``F(0, n, s)`` and its right parts) are kept in the forward pass (KEEP); a split point ``m``
chosen for ``[c, e)`` deeper down is RECOMPUTE with hold point = the first stage of that
reversal (the last op of block ``e-1``), and every tensor a block produces for itself is
RECOMPUTE with hold point = the block's own first stage (its last op): when the schedule only
passes through a block, its tensors are freed in the stage that made them.
"""

from __future__ import annotations

import math

import numpy as np

from ..plan import Decision
from . import _chain


def advance_seconds(problem, bl, base: dict[int, Decision]) -> list[float]:
    """Per block ``b``: forward seconds of the ops the simulator re-runs to rebuild the next
    block's input from ``x_b`` (the last block: its output's producers, for completeness)."""
    g, fwd = problem.graph, problem.costs.fwd_s
    where = _chain.block_of_tensor(g, bl)
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


def plan_for(problem, bl, F, adv, s: int) -> tuple[dict[int, Decision], dict[int, int]]:
    """Decisions and hold points of the ``s``-slot schedule (module docstring)."""
    kept, stored_at = splits(F, adv, s)
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


def best_plan(problem, model, leaf: list[float]):
    """The multi-level plan with the most slots that fits (fewest re-runs), or None.

    Needs every block input after the first to be a recomputable planning tensor
    (``model.can_none``). Slots are tried from the most that the budget could hold (``s`` block
    inputs of the smallest size next to ``C0``) down to one; each candidate is simulated."""
    bl = model.bl
    n = len(bl)
    if n < 2 or not all(model.can_none[1:]):
        return None
    base = _chain.checkpoint_decisions(problem, set(), bl)
    adv = advance_seconds(problem, bl, base)
    x_min = min(model.x[1:])
    room = problem.budget_bytes - model.c0
    s_max = n - 1 if x_min <= 0 or not math.isfinite(room) else int(min(n - 1, max(room // x_min, 1)))
    F = table(adv, leaf, s_max)
    for s in range(s_max, 0, -1):
        if not math.isfinite(F[s, 0, n]):
            break
        dec, hold = plan_for(problem, bl, F, adv, s)
        r = _simulate(problem, dec, hold)
        if r.fits:
            return dec, hold, s
    return None


def _simulate(problem, dec, hold):
    from ..plan import Plan
    from ..timeline import simulate

    return simulate(problem, Plan(dec, problem_key=problem.key, hold_points=hold), detail=False)
