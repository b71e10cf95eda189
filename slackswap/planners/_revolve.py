"""Exact multi-level checkpointing on simple chains: plan and proof (docs/milp.md, "Simple
chains, recompute only").

A **simple chain** (``simple_chain``) is a graph of ``n`` ops where op ``i`` reads one tensor
``x_i``, saves it and writes one tensor ``x_{i+1}``; ``x_0`` is the only step input, ``x_n``
the chain's output, and the planning tensors are ``x_1 .. x_{n-1}``, all recomputable
(``synthetic.chain(n)``, the benchmark chain of Checkmate). Sizes and compute costs may differ
per tensor and per op.

**The plan space.** Recompute only: every ``x_t`` is KEEP or RECOMPUTE with any hold point
(docs/timeline.md, "Backward: recompute, prefetch, gradients"). In such a plan the tensors
resident at a stage are the step input, the KEEP tensors and the held copies; stage ``j``
re-runs ops ``c .. j-1`` from ``c``, the nearest resident tensor below ``j``, and each copy it
makes is held (its hold point is ``j`` or higher) or transient. A held copy of ``x_m`` lives from
its stage ``s_m`` to its last use, stage ``m``. Two held copies ``m < m'`` are disjoint in time
or nested (``m'`` stored while ``m`` is held), because a stage that advances past ``m'`` while
``m'`` is resident starts from ``m'`` or above. So every plan is a recursive split schedule:
reversing stages ``e-1 .. c`` with ``x_c`` resident and ``k`` units held below it is either
the backward step of op ``c`` (``e = c + 1``) or an advance from ``c`` to some ``m`` in stage
``e-1`` storing ``x_m``, the reversal of ``[m, e)`` with ``x_c`` held too, then that of
``[c, m)``. The forward pass is the first sweep: its stored tensors are the KEEP tensors.

**The recursion** (``solve``), Revolve's (Griewank & Walther 2000; rotor's for per-op costs,
Beaumont et al. 2019) with the simulator's memory at every step instead of a fixed slot count::

    F(k, c, c+1) = 0                                      if the backward step of op c fits
    F(k, c, e)   = min_m  adv(c, m) + F(k', m, e) + F(k, c, m)   over m in (c, e) whose advance fits
    T(k, c)      = min( F(k, c, n)                         if forward steps c .. n-1 fit,
                        min_m T(k', m) + F(k, c, m) )      over KEEP m whose forward steps c .. m-1 fit

with ``k`` the bytes held below ``x_c`` in units of ``u``, the greatest common divisor of the
sizes of ``x_1 .. x_{n-1}`` (one unit per tensor on a chain of one size), ``k' = k + |x_c| / u``
(``x_c`` joins those held below) except at ``c = 0`` (``x_0`` is the step input) and
``adv(c, m)`` the forward seconds of ops ``c .. m-1``. The optimum is ``T(0, 0)`` re-run
seconds. A step fits when its accounted memory (docs/timeline.md, "Memory and the budget"),
written per step in ``problem_needs``, is at most the budget; it depends on the plan only
through the bytes held below ``x_c``, ``k u``, which is therefore the state (rotor's DP,
Beaumont et al. 2019, discretises memory and rounds sizes up; whole bytes divided by their
common divisor need no rounding, so the optimum stays exact, at a cost that grows with the
budget in units). Every plan of the space is one path of the recursion and every path one plan, so
``T(0, 0)`` is the least re-run time of any plan that fits: a proof, not a heuristic.

``solve`` takes the needs as arrays, so the same code runs Revolve's own slot model
(``revolve_needs``: every resident tensor but ``x_0`` takes one of ``s`` slots, nothing else
counts), where ``T(0, 0) + n - 1`` is Griewank's ``F(n, s)`` (``tests/test_milp_chain.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core.plan import Decision

INF = math.inf


@dataclass(frozen=True)
class ChainNeeds:
    """Per-step memory of a simple chain, and costs. Held tensors are counted in units of
    ``slot`` bytes: ``held[c]`` units for ``x_c`` (``held[0] = 0``: ``x_0`` is counted in every step).

    ``free``: the budget less what every step holds (the step input). ``adv[c, m]``: the most a
    re-run of ops ``c .. m-1`` from resident ``x_c`` needs, besides held tensors and gradients of
    its stage. ``stage[e]``: what every step of stage ``e - 1`` holds besides (the gradient of
    ``x_e``). ``leaf[c]``: the backward step of op ``c`` with ``x_c`` resident, besides held
    tensors. ``fwd[c, m]``: the most forward steps ``c .. m-1`` need besides the KEEP tensors
    below ``c``. ``cost``: forward seconds per op."""

    n: int
    free: float
    slot: float
    held: np.ndarray
    adv: np.ndarray
    stage: np.ndarray
    leaf: np.ndarray
    fwd: np.ndarray
    cost: np.ndarray


@dataclass(frozen=True)
class ChainSolution:
    """``reruns``: least re-run seconds (``inf``: nothing fits); ``keep``: tensor indices ``t``
    of ``x_t`` kept in the forward pass; ``stored``: ``{m: stage}`` for ``x_m`` held from the
    re-run in that stage; ``multilevel``: some re-run passes a tensor it does not store (that
    tensor's producer runs again in a later stage)."""

    reruns: float
    keep: frozenset
    stored: dict
    multilevel: bool = False


def simple_chain(problem) -> list[int] | None:
    """The tensor ids ``x_0 .. x_n`` if ``problem``'s graph is a simple chain (module docstring)
    with planning tensors ``x_1 .. x_{n-1}`` recomputable and of at least one byte, else None."""
    g = problem.graph
    n = len(g.ops)
    if n < 2 or len(g.tensors) != n + 1:
        return None
    op0 = g.ops[0]
    if len(op0.inputs) != 1:
        return None
    xs = [op0.inputs[0]]
    for i, op in enumerate(g.ops):
        if op.id != i or op.inputs != (xs[i],) or op.saves != (xs[i],) or len(op.outputs) != 1:
            return None
        xs.append(op.outputs[0])
    if len(set(xs)) != n + 1 or g.tensors[xs[0]].producer is not None:
        return None
    if any(g.tensors[x].producer != i - 1 for i, x in enumerate(xs) if i > 0):
        return None
    if tuple(sorted(problem.planning_ids)) != tuple(sorted(xs[1:n])):
        return None
    mid = [g.tensors[x] for x in xs[1:n]]
    if not all(t.recomputable and t.bytes > 0 for t in mid):
        return None
    return xs


def _range_max(v: np.ndarray) -> np.ndarray:
    """``R[a, b] = max(v[a:b])`` for ``a < b`` (``-inf`` elsewhere)."""
    n = len(v)
    R = np.full((n + 1, n + 1), -INF)
    for a in range(n):
        R[a, a + 1:] = np.maximum.accumulate(v[a:])
    return R


def problem_needs(problem, xs: list[int]) -> ChainNeeds:
    """The simulator's accounted memory per step of a simple chain (docs/timeline.md, "Memory
    and the budget"), term by term:

    * forward step ``i``: ``x_0``, the KEEP tensors below ``i``, ``x_i`` (``i >= 1``), ``x_{i+1}``
      and op ``i``'s workspace;
    * re-run of op ``i`` in stage ``e - 1``, advancing from resident ``x_c``: ``x_0``, the held
      tensors below ``c``, ``x_c`` (``c >= 1``), the transient ``x_i`` (``i > c``: freed after
      its last read, this step), ``x_{i+1}``, the workspace, and the gradient of ``x_e`` (alive
      from the backward step of op ``e`` to that of op ``e - 1``);
    * backward step of op ``c``: ``x_0``, the held tensors below ``c``, ``x_c`` (``c >= 1``), the
      gradients of ``x_{c+1}`` and of ``x_c`` and the workspace.

    Gradients are those of tensors that require one and have a forward reader (``x_n`` has
    none)."""
    g, costs = problem.graph, problem.costs
    n = len(g.ops)
    size = np.array([float(g.tensors[x].bytes) for x in xs])
    grad = np.array([size[i] if 0 < i < n and g.tensors[xs[i]].requires_grad else 0.0 for i in range(n + 1)])
    ws = np.array([float(op.workspace_bytes) for op in g.ops])
    X = float(math.gcd(*(int(v) for v in size[1:n])))
    hold = size.copy()
    hold[0] = 0.0                      # x_0 is the step input, counted in every step
    # advance from c: step i = c holds x_c + x_{c+1} + ws_c; step i > c holds x_c + x_i + x_{i+1} + ws_i
    first = hold[:n] + size[1:n + 1] + ws
    later = np.array([size[i] + size[i + 1] + ws[i] for i in range(n)])
    R = _range_max(later)
    adv = np.full((n + 1, n + 1), INF)
    fwd = np.full((n + 1, n + 1), INF)
    for c in range(n):
        for m in range(c + 1, n + 1):
            inner = R[c + 1, m] if m > c + 1 else -INF
            adv[c, m] = max(first[c], hold[c] + inner)
            # forward step c: x_c (as its input) + x_{c+1} + ws; steps i > c: x_c kept + x_i + x_{i+1} + ws
            fwd[c, m] = max(hold[c] + size[c + 1] + ws[c], hold[c] + inner)
    leaf = np.array([hold[c] + grad[c + 1] + grad[c] + ws[c] for c in range(n)])
    stage = np.array([grad[e] if e <= n else 0.0 for e in range(n + 1)])
    units = np.array([0] + [int(v) // int(X) for v in size[1:n]] + [0], dtype=np.int64)
    return ChainNeeds(n, float(problem.budget_bytes) - size[0], X, units, adv, stage, leaf, fwd,
                      np.array(costs.fwd_s, dtype=float))


def revolve_needs(n: int, slots: int, cost=None) -> ChainNeeds:
    """Revolve's slot model on ``n`` steps: ``x_0`` is free, every other resident state takes one
    of ``slots`` slots, transient states and gradients take none."""
    hold = np.array([0.0] + [1.0] * n)
    adv = np.full((n + 1, n + 1), INF)
    fwd = np.full((n + 1, n + 1), INF)
    for c in range(n):
        adv[c, c + 1:] = hold[c]
        fwd[c, c + 1:] = hold[c]
    return ChainNeeds(n, float(slots), 1.0, hold.astype(np.int64), adv, np.zeros(n + 1), hold[:n].copy(), fwd,
                      np.ones(n) if cost is None else np.asarray(cost, dtype=float))


def _held_max(nd: ChainNeeds) -> int:
    """The most held units that can fit anywhere: ``floor(free / slot)``, at most all of them."""
    return int(min(int(nd.held.sum()), math.floor(nd.free / nd.slot + 1e-9)))


def _table(nd: ChainNeeds):
    """``F[k, c, e]`` of the module docstring (and its split points) for ``k <= K + 1``, bottom up
    over the segment length, vectorised over the held count and the segment start; row ``K + 1``
    is always ``inf``. Every step's test is ``need + k * slot <= free``, so the table of a budget
    ``d`` slots smaller is this one shifted by ``d`` rows (``solve(nd, fewer=d)``)."""
    n, X = nd.n, nd.slot
    K = _held_max(nd)
    ks = np.arange(K + 2)[:, None]
    pre = np.concatenate(([0.0], np.cumsum(nd.cost)))
    F = np.full((K + 2, n + 1, n + 1), INF)
    A = np.full((K + 2, n + 1, n + 1), -1, dtype=np.int64)
    cs = np.arange(n)
    ok = nd.leaf[None, :] + ks * X <= nd.free
    ok[K + 1] = False
    F[:, cs, cs + 1] = np.where(ok, 0.0, INF)
    shift = nd.held
    for L in range(2, n + 1):
        c = np.arange(0, n - L + 1)                       # segments [c, c + L)
        e = c + L
        m = c[:, None] + np.arange(1, L)[None, :]         # split points, shape (C, L-1)
        cc = np.broadcast_to(c[:, None], m.shape)
        ee = np.broadcast_to(e[:, None], m.shape)
        need = nd.adv[cc, m] + nd.stage[ee]                # besides k held
        kk = np.minimum(ks[:, :, None] + shift[cc][None], K + 1)     # (K+2, C, L-1)
        v = (pre[m] - pre[cc])[None] + F[kk, m[None], ee[None]] + F[ks[:, :, None], cc[None], m[None]]
        v = np.where(need[None] + ks[:, :, None] * X <= nd.free, v, INF)
        v[K + 1] = INF
        arg = np.argmin(v, axis=2)
        best = np.take_along_axis(v, arg[:, :, None], axis=2)[:, :, 0]
        F[:, c, e] = best
        A[:, c, e] = np.where(np.isfinite(best), m[np.arange(len(c))[None, :], arg], -1)
    return F, A, K


def solve(nd: ChainNeeds, fewer=0, table=None):
    """The recursion of the module docstring: a ``ChainSolution``. With ``fewer`` (an int, or a
    list of them) the budget is ``fewer`` slots below ``nd``'s, solved from ``nd``'s table (pass it
    as ``table``, from ``_table(nd)``, to reuse it); a list gives a list of solutions."""
    many = isinstance(fewer, (list, tuple, range))
    ds = list(fewer) if many else [fewer]
    if nd.free < 0:
        out = [ChainSolution(INF, frozenset(), {}) for _ in ds]
        return out if many else out[0]
    F, A, K = table if table is not None else _table(nd)
    out = [_first_sweep(nd, F, A, K, int(d)) for d in ds]
    return out if many else out[0]


def _first_sweep(nd: ChainNeeds, F, A, K: int, d: int) -> ChainSolution:
    """``T(0, 0)`` and its schedule at a budget ``d`` slots below ``nd``'s: ``F``'s row ``k + d``
    is row ``k`` there."""
    n, X = nd.n, nd.slot
    free = nd.free - d * X
    if free < 0 or d > K:
        return ChainSolution(INF, frozenset(), {})
    Kd = K - d
    shift = nd.held
    T = np.full((Kd + 2, n + 1), INF)
    B = np.full((Kd + 2, n + 1), -1, dtype=np.int64)
    k = np.arange(Kd + 1)
    for c in range(n - 1, -1, -1):
        kk = np.minimum(k + shift[c], Kd + 1)
        fits_all = nd.fwd[c, n] + k * X <= free
        best = np.where(fits_all, F[k + d, c, n], INF)
        arg = np.full(Kd + 1, n)
        if c + 1 < n:
            m = np.arange(c + 1, n)
            v = T[kk[:, None], m[None, :]] + F[k[:, None] + d, c, m[None, :]]
            v = np.where(nd.fwd[c, m][None, :] + k[:, None] * X <= free, v, INF)
            j = np.argmin(v, axis=1)
            vb = v[np.arange(Kd + 1), j]
            better = vb < best
            best = np.where(better, vb, best)
            arg = np.where(better, m[j], arg)
        T[:Kd + 1, c] = best
        B[:Kd + 1, c] = arg
    total = float(T[0, 0])
    if not math.isfinite(total):
        return ChainSolution(INF, frozenset(), {})
    keep, stored, multilevel = set(), {}, False
    segs = []
    c, kc = 0, 0
    while c < n:
        m = int(B[kc, c])
        segs.append((kc, c, m))
        if m < n:
            keep.add(m)
        kc, c = kc + int(shift[c]), m
    while segs:
        kc, c, e = segs.pop()
        if e - c == 1:
            continue
        m = int(A[kc + d, c, e])
        stored[m] = e - 1
        multilevel |= m > c + 1
        segs.append((kc + int(shift[c]), m, e))
        segs.append((kc, c, m))
    return ChainSolution(total, frozenset(keep), stored, multilevel)


def chain_plan(problem, xs: list[int], sol: ChainSolution):
    """Decisions and hold points of ``sol`` on ``problem``: ``x_t`` KEEP for ``t`` in
    ``sol.keep``; stored ``x_m`` RECOMPUTE with hold point its stage; every other planning tensor
    RECOMPUTE with hold point 0 (each of its copies is transient; the one made in its own stage
    ends with that stage's backward step either way). A single-level solution (no re-run passes a
    tensor it does not store) needs no hold points: every copy is held from its first re-run,
    the simulator's default."""
    n = len(xs) - 1
    dec, hold = {}, {}
    for t in range(1, n):
        if t in sol.keep:
            dec[xs[t]] = Decision.KEEP
        else:
            dec[xs[t]] = Decision.RECOMPUTE
            hold[xs[t]] = sol.stored.get(t, 0)
    return dec, hold if sol.multilevel else {}
