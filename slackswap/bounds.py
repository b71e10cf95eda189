"""Certified lower bounds on the step time of ANY plan, and the gap of a plan to them.

``lower_bound(problem) -> (seconds, how)``:

1. **ideal** (always): every plan runs every forward and backward op once and the optimizer, on one
   compute stream: ``step >= sum fwd_s + sum bwd_s + optimizer_s`` (docs/timeline.md 1).
2. **LP relaxation** (problems with at most ``lp_max_tensors`` planning tensors): the linear
   relaxation of the exact MILP (docs/milp.md) with H2D timed at the full-duplex rate. The MILP's
   optimum is <= the simulated time of every plan (its feasible set contains every plan with every
   issue point, and a slower duplex rate only delays copies: the timeline is monotone, max-plus),
   so its relaxation is a bound too. Skipped when the MILP had to be narrowed (capped trees).

3. **PCIe capacity** (always, any size; ``capacity_bound``): at the start of every forward step and
   of the first backward step, the accounted memory (docs/timeline.md 4) must fit the budget. Under
   keep-all it is ``A(s)``; a plan can only lower it by recomputing tensors whose forward use is
   over (each re-run op ``p`` costs its forward time ``c_p`` once and frees at most the bytes
   ``B_p`` of its recomputable outputs) or by swapped sources whose D2H copy has ended, and the D2H
   engine moves at most ``bw * t`` bytes by time ``t``. So the extra time ``E = step - ideal`` (stall
   plus recompute) satisfies, for every such step ``s`` reached at ``T_s + sigma`` (forward time
   before it plus stall, plus recompute time for the backward step):

       E >= min  sigma + sum_p c_p r_p   s.t.  sum_p B_p r_p + bw (T_s + sigma [+ sum_p c_p r_p])
                                                 >= A(s) - budget,   0 <= r_p <= 1, sigma >= 0,

   a fractional knapsack solved exactly by sorting. Latencies, issue points, the duplex factor and
   every other step only make plans slower, so dropping them keeps the bound valid.

``gap(problem, result) = (step - bound) / step`` (the MIP-gap convention, 0 = proven optimal).
"""

from __future__ import annotations

import math
from dataclasses import replace


def lower_bound(problem, lp_max_tensors: int = 12) -> tuple[float, str]:
    """A certified lower bound (seconds) on ``simulate(problem, plan).step_time_s`` for every plan:
    the best of the ideal step, the PCIe-capacity bound and (small problems only, it is slow) the
    LP relaxation of the exact MILP."""
    best, how = float(problem.ideal_step_s), "ideal step (every op once, no stall)"
    cap = capacity_bound(problem)
    if cap > best:
        best, how = cap, "PCIe-capacity bound (recompute or copy out what exceeds the budget)"
    if len(problem.planning_ids) <= lp_max_tensors and math.isfinite(problem.budget_bytes):
        from .planners._milp_backends import solve_highs
        from .planners._milp_formulation import build

        p = problem
        if problem.costs.duplex_factor < 1:
            p = replace(problem, costs=replace(problem.costs, duplex_factor=1.0))
        try:
            built = build(p)
        except ValueError:
            return best, how
        if built.narrowed:
            return best, how
        res = solve_highs(built.model, relax=True)
        if res.status == "optimal" and res.objective is not None:
            lp = res.objective * built.tau * (1 - 1e-9)
            if lp > best:
                best, how = lp, "LP relaxation of the exact MILP"
    return best, how


def gap(problem, result, bound: float | None = None) -> float:
    """Relative gap of a ``SimResult`` to the lower bound: ``(step - lb) / step`` (inf if it does
    not fit)."""
    if not result.fits or not math.isfinite(result.step_time_s):
        return math.inf
    lb = lower_bound(problem)[0] if bound is None else bound
    return max(0.0, (result.step_time_s - lb) / result.step_time_s) if result.step_time_s > 0 else 0.0


def capacity_bound(problem) -> float:
    """The PCIe-capacity lower bound on the step time (seconds); see the module docstring."""
    import numpy as np

    from .plan import Decision
    from .timeline import compile_schedule

    budget = float(problem.budget_bytes)
    if not math.isfinite(budget):
        return float(problem.ideal_step_s)
    g, c = problem.graph, problem.costs
    n = len(g.ops)
    planning = [g.tensors[t] for t in problem.planning_ids]
    keep = compile_schedule(g, {t.id: Decision.KEEP for t in planning}).static_memory()
    bw = max(b / s for b, s in ((t.bytes, c.d2h_s[t.id]) for t in planning if c.d2h_s[t.id] > 0)) \
        if any(c.d2h_s[t.id] > 0 for t in planning) else math.inf
    cost = np.asarray(c.fwd_s, dtype=float)
    t_before = np.concatenate([[0.0], np.cumsum(cost)])   # forward time before step j
    freed = np.zeros(n)                      # B_p: recomputable planning bytes of op p whose use is over
    out = np.zeros(n)                        # swappable planning bytes of op p whose use is over
    by_last_use: dict[int, list] = {}
    for t in planning:
        by_last_use.setdefault(g.last_forward_use(t.id), []).append(t)
    cands: list[tuple[float, float, object, bool]] = []   # (greedy bound, need, B_p, backward)
    for k in range(n + 1):                   # forward steps 0..n-1, then the first backward step
        if k == n:
            saved_last = set(g.ops[n - 1].saves)
            freed, out = np.zeros(n), np.zeros(n)
            for t in planning:
                if t.id not in saved_last:
                    freed[t.producer] += t.bytes if t.recomputable else 0
                    out[t.producer] += t.bytes if t.swappable else 0
        # copies released by step k: a tensor produced by op j-1 or later is copied after T_j, so
        # released <= min_j (bytes produced before j + bw (T_k - T_j))  (+ bw * stall, in the knapsack)
        kk = min(k, n)
        produced = np.concatenate([[0.0], np.cumsum(out[:kk])])
        released = float(np.min(produced + bw * (t_before[kk] - t_before[:kk + 1]))) if math.isfinite(bw) \
            else float(produced[-1])
        need = float(keep[k]) - budget - released
        if need > 0:
            cands.append((_knapsack(need, freed, cost, bw, backward=(k == n)), need, freed.copy(), k == n))
        if k < n:
            for t in by_last_use.get(k, ()):
                freed[t.producer] += t.bytes if t.recomputable else 0
                out[t.producer] += t.bytes if t.swappable else 0
    extra = max((x[0] for x in cands), default=0.0)
    # the same knapsack with re-run prerequisites (an op can only be re-run after the producers of
    # its unsaved inputs), as an LP at the few steps where the plain knapsack is largest
    pre = _prerequisites(g, {t.id for t in planning})
    for _, need, freed_k, backward in sorted(cands, key=lambda x: -x[0])[:4]:
        extra = max(extra, _knapsack_lp(need, freed_k, cost, bw, backward, pre))
    return float(problem.ideal_step_s) + extra


def _knapsack(need: float, freed, cost, bw: float, backward: bool) -> float:
    """min sigma + sum c_p r_p  s.t.  sum B_p r_p + bw (sigma [+ sum c_p r_p]) >= need (fractional)."""
    import numpy as np

    gain = freed + (bw * cost if backward else 0.0)      # bytes bought by re-running op p
    free = (cost <= 0) & (gain > 0)
    need -= float(gain[free].sum())
    if need <= 0:
        return 0.0
    mask = (cost > 0) & (gain > 0)
    dens = gain[mask] / cost[mask]
    order = np.argsort(-dens, kind="stable")
    g_sorted, c_sorted, d_sorted = gain[mask][order], cost[mask][order], dens[order]
    total = 0.0
    for gp, cp, dp in zip(g_sorted, c_sorted, d_sorted, strict=True):
        if dp <= bw:                      # stalling buys bytes as cheaply from here on
            break
        if gp >= need:
            return total + need / dp
        total += cp
        need -= gp
    return total + (need / bw if math.isfinite(bw) and bw > 0 else math.inf)


def _prerequisites(graph, planning: set[int]) -> list[tuple[int, int]]:
    """Pairs (p, q): re-running op p needs op q re-run first (q produces an unsaved input of p,
    which is never resident in the backward pass)."""
    out = []
    for op in graph.ops:
        for x in set(op.inputs):
            q = graph.tensors[x].producer
            if q is not None and x not in planning:
                out.append((op.id, q))
    return out


def _knapsack_lp(need, freed, cost, bw, backward, pre) -> float:
    """``_knapsack`` with ``r_q >= r_p`` for every prerequisite pair, solved by HiGHS (scipy)."""
    import numpy as np
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    n = len(cost)
    gain = freed + (bw * cost if backward else 0.0)
    # variables: r_0..r_{n-1}, sigma
    obj = np.append(cost, 1.0)
    rows, cols, vals = [0] * (2 * n + 2), [], []
    rows = []
    for i in range(n):
        rows.append(0), cols.append(i), vals.append(-gain[i])
    rows.append(0), cols.append(n), vals.append(-bw)
    for j, (p, q) in enumerate(pre, start=1):
        rows += [j, j]
        cols += [p, q]
        vals += [1.0, -1.0]
    a = coo_matrix((vals, (rows, cols)), shape=(len(pre) + 1, n + 1)).tocsr()
    b = np.zeros(len(pre) + 1)
    b[0] = -need
    res = linprog(obj, A_ub=a, b_ub=b, bounds=[(0, 1)] * n + [(0, None)], method="highs")
    if res.status != 0:
        return 0.0
    # the dual bound of an LP solved to optimality equals its objective; shave for float safety
    return max(0.0, float(res.fun) * (1 - 1e-9))
