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

   a fractional knapsack solved exactly by sorting (``T_s - T_j`` with ``T_j`` replaced by the end
   ``E_j = T_{j+1} + sigma_j`` of op ``j``, after which the outputs of ops ``>= j`` are copied).

   **3b. Joint LP** (scipy HiGHS, sparse, O(ops + planning tensors) rows): the same constraints at
   every step at once, with the variables a plan really shares between steps. Every plan maps to
   a feasible point of equal or lower objective, so the LP optimum is a bound:

   - ``r_p in [0, 1]``: op ``p`` is re-run in the backward pass (cost ``c_p``; each op is re-run at
     most once, docs/timeline.md 3); ``r_p <= r_q`` when ``q`` produces an unsaved input of ``p``;
   - ``x_t <= r_{producer(t)}``: recomputable planning tensor ``t`` is decided RECOMPUTE (its
     producer must be re-run, every planning tensor is needed in the backward pass);
   - ``sigma_k`` (cumulative, non-decreasing): forward stall before step ``k``, so ``S_k = T_k +
     sigma_k`` and op ``j`` ends at ``E_j = T_{j+1} + sigma_j``; at the first backward step ``S =
     T_n + sigma_n + rho``, ``rho <= sum_p c_p r_p`` (the recompute run before it);
   - ``R_k = sum x_t b_t`` over tensors whose forward use ended before step ``k`` (freed there);
   - ``W_k``: bytes of swapped sources released by ``S_k``. A source is released only after its
     copy, and the copies of the outputs of ops ``>= j`` start after ``E_j`` on one serial engine (in
     any ``d2h_order``) of rate ``bw``: ``W_k <= (P_j - X_j) + bw (S_k - E_j)`` for every ``j < k``, where ``P_j`` is the
     swappable planning bytes produced by ops ``< j`` and ``X_j`` those of them decided RECOMPUTE
     (a tensor is swapped or recomputed, not both); kept O(n) by a running minimum ``M_k``;
   - memory at every step with ``A(k) > budget``: ``R_k + W_k >= A(k) - budget`` and ``R_k + W_k
     <=`` the planning bytes freeable there;
   - objective ``sigma_n + sum_p c_p r_p <= E``.

   ``bw`` is the largest ``b / d2h_s`` over swappable tensors (``d2h_s = latency + b / rate``, so
   per-copy latency only lowers the rate). Steps after the last one with ``A(k) > budget`` are
   dropped (any subset of constraints keeps a relaxation). It is solved to HiGHS's tolerance (1e-7 on scaled rows), so the optimum is shaved by that much.

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
    keep = compile_schedule(g, {t.id: Decision.KEEP for t in planning}).static_memory()[:n + 1]
    need = keep.astype(float) - budget
    if n == 0 or not (need > 0).any():
        return float(problem.ideal_step_s)
    bw = _bandwidth(planning, c)
    cost = np.asarray(c.fwd_s, dtype=float)
    t_before = np.concatenate([[0.0], np.cumsum(cost)])       # T_k: forward time before step k
    saved_last = set(g.ops[n - 1].saves)
    rec = np.zeros((n + 1, n))      # rec[k, p]: recomputable bytes of op p that step k need not hold
    swp = np.zeros(n + 1)           # swappable bytes that step k need not hold
    out = np.zeros(n)               # swappable planning bytes produced by op p
    for t in planning:
        k = g.last_forward_use(t.id) + 1                       # first step past its forward use
        if t.swappable:
            out[t.producer] += t.bytes
        for lo, hi in ((k, n), (n, n + 1)) if t.id not in saved_last else ((k, n),):
            if t.recomputable:
                rec[lo:hi, t.producer] += t.bytes
            if t.swappable:
                swp[lo:hi] += t.bytes
    produced = np.concatenate([[0.0], np.cumsum(out)])          # P_j: produced by ops < j
    extra = 0.0
    for k in np.nonzero(need > 0)[0]:     # the per-step fractional knapsack (closed form, fast)
        win = t_before[k] - t_before[1:k + 1]                   # S_k - E_j at zero stall, j < k
        rel = min(float(swp[k]), float(np.min(produced[:k] + bw * win))) if k and math.isfinite(bw) \
            else (float(swp[k]) if not math.isfinite(bw) else 0.0)
        if need[k] - rel > 0:
            extra = max(extra, _knapsack(need[k] - rel, rec[k], cost, bw, backward=(k == n)))
    pre = _prerequisites(g, {t.id for t in planning})
    lp = _joint_lp(need, [(t.bytes, t.producer, g.last_forward_use(t.id) + 1, t.swappable, t.recomputable,
                           t.id in saved_last) for t in planning], produced, cost, t_before, bw, pre)
    return float(problem.ideal_step_s) + max(extra, lp)


def _bandwidth(planning, c) -> float:
    """Bytes per second the D2H engine can move at best: the largest ``b / d2h_s`` over swappable
    tensors (a copy of ``b`` bytes takes ``latency + b / bw``, so big copies are the fastest)."""
    rates = [t.bytes / c.d2h_s[t.id] for t in planning if t.swappable and c.d2h_s[t.id] > 0]
    if any(t.swappable and t.bytes > 0 and c.d2h_s[t.id] <= 0 for t in planning):
        return math.inf
    return max(rates, default=0.0)


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
    return total + (need / bw if bw > 0 else math.inf)


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


def _joint_lp(need, tensors, produced, cost, t_before, bw: float, pre) -> float:
    """The joint LP of the module docstring (item 3b), solved by HiGHS (scipy). ``tensors``: one
    ``(bytes, producer, first step past its forward use, swappable, recomputable, saved by the last
    op)`` per planning tensor. Returns the least extra time in seconds (shaved for float safety),
    or 0.0 when the solver proves no optimum."""
    import numpy as np
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    n = len(cost)
    last = int(np.nonzero(need > 0)[0].max())           # steps after the last tight one are free
    m = last + 1
    b0 = float(need.max())                             # scale: bytes / b0, seconds / t0
    t0 = float(t_before[n]) if t_before[n] > 0 else 1.0
    timed = math.isfinite(bw)
    w = bw * t0 / b0 if timed else 0.0
    rec = [i for i, t in enumerate(tensors) if t[4]]
    xi = {i: j for j, i in enumerate(rec)}
    # variables: r_p (n) | x_t (recomputable) | sigma_k, R_k, W_k, M_k, X_k (m each) | rho
    x0 = n
    sig = x0 + len(rec)
    big_r, big_w, big_m, big_x, rho = sig + m, sig + 2 * m, sig + 3 * m, sig + 4 * m, sig + 5 * m
    nv = rho + 1
    ub: tuple[list, list, list, list] = ([], [], [], [])
    eq: tuple[list, list, list, list] = ([], [], [], [])

    def row(mat, entries, b):
        i = len(mat[3])
        for j, v in entries:
            mat[0].append(i), mat[1].append(j), mat[2].append(v)
        mat[3].append(b)

    by_elig: dict[int, list[int]] = {}
    by_prod: dict[int, list[int]] = {}
    for i in rec:
        b, p, e, sw, _, ex = tensors[i]
        row(ub, [(x0 + xi[i], 1.0), (p, -1.0)], 0.0)                # x_t <= r_p
        if e < n:
            by_elig.setdefault(e, []).append(x0 + xi[i])
        elif not ex:
            by_elig.setdefault(n, []).append(x0 + xi[i])
        if sw:
            by_prod.setdefault(p + 1, []).append(x0 + xi[i])
    size = {x0 + xi[i]: tensors[i][0] / b0 for i in rec}
    ex_n = [x0 + xi[i] for i in rec if tensors[i][5] and tensors[i][2] < n]
    free_cap = np.zeros(m)          # bytes of planning tensors that step k need not hold
    for b, _, e, sw, rc, ex in tensors:
        if sw or rc:       # (the last op's saves are resident at the first backward step)
            free_cap[e:min(n, m) if ex else m] += b / b0
    for k in range(m):
        # R_k = R_{k-1} + recompute-decided bytes whose forward use ended at k - 1 (equality)
        ent = [(big_r + k, 1.0)] + ([(big_r + k - 1, -1.0)] if k else [])
        ent += [(v, -size[v]) for v in by_elig.get(k, ())]
        if k == n:
            ent += [(v, size[v]) for v in ex_n]
        row(eq, ent, 0.0)
        # X_k = recompute-decided swappable bytes produced by ops < k (equality)
        ent = [(big_x + k, 1.0)] + ([(big_x + k - 1, -1.0)] if k else [])
        row(eq, ent + [(v, -size[v]) for v in by_prod.get(k, ())], 0.0)
        if need[k] > 0:                                  # R_k + W_k >= need_k
            row(ub, [(big_r + k, -1.0), (big_w + k, -1.0)], -need[k] / b0)
        row(ub, [(big_r + k, 1.0), (big_w + k, 1.0)], free_cap[k])   # disjoint byte sets
        if k:
            row(ub, [(sig + k - 1, 1.0), (sig + k, -1.0)], 0.0)    # sigma is cumulative
        if timed and k:
            # M_k <= M_{k-1};  M_k <= (P_{k-1} - X_{k-1}) - bw E_{k-1},  E_{k-1} = T_k + sigma_{k-1}
            if k > 1:
                row(ub, [(big_m + k, 1.0), (big_m + k - 1, -1.0)], 0.0)
            row(ub, [(big_m + k, 1.0), (big_x + k - 1, 1.0), (sig + k - 1, w)],
                (produced[k - 1] - bw * t_before[k]) / b0)
            # W_k <= M_k + bw S_k,  S_k = T_k + sigma_k (+ rho at the first backward step)
            ent = [(big_w + k, 1.0), (big_m + k, -1.0), (sig + k, -w)] + ([(rho, -w)] if k == n else [])
            row(ub, ent, bw * t_before[k] / b0)
        elif not timed and k:
            row(ub, [(big_w + k, 1.0), (big_x + k, 1.0)], produced[k] / b0)
    if last == n:                                       # rho <= sum_p c_p r_p
        row(ub, [(rho, 1.0)] + [(p, -cost[p] / t0) for p in range(n) if cost[p] > 0], 0.0)
    for p, q in pre:                                    # r_p <= r_q
        row(ub, [(p, 1.0), (q, -1.0)], 0.0)
    obj = np.zeros(nv)
    obj[:n] = cost / t0
    obj[sig + last] = 1.0
    bounds = [(0.0, 1.0)] * (n + len(rec)) + [(0.0, None)] * m + [(None, None)] * m \
        + [(0.0, None)] * m + [(None, None)] * (2 * m) + [(0.0, None)]
    a_ub = coo_matrix((ub[2], (ub[0], ub[1])), shape=(len(ub[3]), nv)).tocsr()
    a_eq = coo_matrix((eq[2], (eq[0], eq[1])), shape=(len(eq[3]), nv)).tocsr()
    res = linprog(obj, A_ub=a_ub, b_ub=np.asarray(ub[3]), A_eq=a_eq, b_eq=np.asarray(eq[3]),
                  bounds=bounds, method="highs")
    if res.status != 0:
        return 0.0
    # HiGHS solves to a 1e-7 feasibility tolerance on the scaled rows: shave that much
    return max(0.0, (float(res.fun) - 1e-7) * t0 * (1 - 1e-9))
