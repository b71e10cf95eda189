"""The rows of the aggregated relaxation (``slackswap.mip.aggregate``, whose docstring names
them), added in named steps by ``_Rows``; ``build`` runs the steps in order."""

from __future__ import annotations

import math

import numpy as np

from ..model import Model
from .structure import (
    Aggregate,
    bandwidth,
    chain_depth,
    minimal_sets,
    needs,
    prerequisites,
    rebuilt_inputs,
    rerun_chains,
    rerun_readers,
)


def segments(m: Model, g, pset: set[int], x: dict[int, int], ms: dict[int, int], steps: list[int],
             again: dict[int, int], rebuilt: dict[int, list[tuple[int, int]]]) -> dict[int, dict[int, int]]:
    """The ``seg`` rows (``tight=True``): a RECOMPUTE tensor ``t`` with ``ms(t) < j`` is resident
    at the backward step of op ``j`` when its producer ``p`` re-runs in a stage ``>= j`` (the
    re-run allocates ``t``, which stays until its last use, below ``j``), unless that copy is
    transient (a hold point) and ``p`` re-runs again for stage ``ms(t)`` (``again[p]``, counted in
    ``beta[0]``). ``g[j,q]`` is a lower value of "op ``q`` re-runs in a stage ``>= j``": ``>= x[t']``
    for its RECOMPUTE outputs with ``ms(t') >= j``; ``>= g[j,c]`` when ``q`` produces an unsaved
    input of op ``c`` (never resident: ``c``'s re-run needs ``q``'s); ``>= g[j,c] + x[y] - 1`` when
    it produces a RECOMPUTE input ``y`` of ``c``. ``hold[j,t] >= x[t] + g[j,p] - 1 - again[p]``
    takes ``t``'s bytes back from what ``mem_bwd[j]`` frees. Returns ``{j: {t: hold column}}`` for
    the ``steps`` given (those with a ``mem_bwd`` row); ``rebuilt`` is ``rebuilt_inputs``. Without it
    a chain recomputed as one segment (a layer's ``fc1`` rebuilt to rebuild its ``gelu``) counted
    as absent at the steps between its two savers."""
    succ: dict[int, list[tuple[int, int | None]]] = {}       # op -> [(consumer op, planning input or None)]
    for c, ins in rebuilt.items():
        for q, inp in ins:
            succ.setdefault(q, []).append((c, inp if inp in pset else None))
    roots: dict[int, list[int]] = {}         # op -> its RECOMPUTE outputs
    for t in x:
        roots.setdefault(g.tensors[t].producer, []).append(t)
    order = sorted(succ.keys() | roots.keys(), reverse=True)     # consumers come after producers
    out: dict[int, dict[int, int]] = {}
    for j in steps:
        cands = [t for t in x if ms[t] < j]
        if not cands:
            continue
        useful: set[int] = set()
        for q in order:
            if any(ms[t] >= j for t in roots.get(q, ())) or any(c in useful for c, _ in succ.get(q, ())):
                useful.add(q)
        gv = {q: m.var(f"g[{j},{q}]", 0.0, 1.0) for q in sorted(useful)}
        for q, v in gv.items():
            for t in roots.get(q, ()):
                if ms[t] >= j:
                    m.add_ge(f"g_root[{j},{t}]", [(1, v), (-1, x[t])], 0)
            for c, y in succ.get(q, ()):
                if c in gv:
                    m.add_ge(f"g_why[{j},{q},{c},{y}]", [(1, v), (-1, gv[c])] + ([(-1, x[y])] if y is not None else []),
                             -1 if y is not None else 0)
        for t in cands:
            p = g.tensors[t].producer
            if p not in gv:
                continue
            if p not in again:
                again[p] = m.var(f"again[{p}]", 0.0, 1.0)
            h = out.setdefault(j, {})[t] = m.var(f"hold[{j},{t}]", 0.0, 1.0)
            m.add_ge(f"seg[{j},{t}]", [(1, h), (-1, x[t]), (-1, gv[p]), (1, again[p])], -1)
    return out


def build(problem, integral: bool = False, releases: bool = False, tight: bool = False,
          chains: int = 0) -> Aggregate | None:
    """The aggregated model of ``problem`` (module docstring), or None when no step exceeds the
    budget under keep-all (the bound is then the ideal step). ``releases`` adds the per-copy
    release rows (``u[t,k]``, ``v[t,j]``: one column per swappable tensor and step that needs
    memory): tighter where copies are latency-bound, sized for a few dozen planning tensors.
    ``tight`` (with ``releases``) adds the ``rho_by``, ``o`` and ``seg`` rows: tighter still, but its MILP
    can take many more nodes (`tiny` 4 layers at 0.5: 66 without, 1,264 with; GPT-2 with 3 layers
    at 0.9 stops at 2,000 below the bound it proves without them)."""
    n = len(problem.graph.ops)
    need_f, need_b = needs(problem)
    if n == 0 or not math.isfinite(problem.budget_bytes) or max(need_f.max(), need_b.max()) <= 0:
        return None
    b = _Rows(problem, need_f, need_b, integral, releases, tight)
    b.decisions()
    b.d2h_capacity()
    b.running_sums()
    b.forward_memory()
    if b.rel:
        b.forward_releases()
    if b.timed and b.s and not releases:
        b.first_copy_windows()
    b.hold_points()
    b.chains(chains)
    for j in range(n):
        b.backward_step(j)
    if b.rel and tight:
        b.copied_out()
    b.copy_chains()
    b.first_reruns()
    m = b.m
    m.minimize([(1, b.sig[n]), (1, b.beta[0])] + [(b.cost[p] / b.t0, b.r[p]) for p in range(n)])
    return Aggregate(m, b.t0, b.x, b.s, b.released)


class _Rows:
    """The model under construction and the steps that add its rows (``build``), in this order:
    the decisions, the D2H capacity, the running sums of freed bytes, the forward memory rows and
    (``releases``) their per-copy release rows, the first backward step's copy windows, the hold
    points, the chains, every backward step, the ``o`` rows, the copy chains and the re-runs."""

    def __init__(self, problem, need_f, need_b, integral: bool, releases: bool, tight: bool):
        g, c = problem.graph, problem.costs
        self.g, self.c = g, c
        self.n = n = len(g.ops)
        self.need_f, self.need_b = need_f, need_b
        self.integral, self.releases, self.tight = integral, releases, tight
        self.planning = planning = [g.tensors[t] for t in problem.planning_ids]
        self.pset = set(problem.planning_ids)
        self.bw = bw = bandwidth(planning, c)
        self.timed = timed = math.isfinite(bw)
        self.cost = cost = np.asarray(c.fwd_s, dtype=float)
        self.t_before = t_before = np.concatenate([[0.0], np.cumsum(cost)])                          # T_k
        self.b_after = np.concatenate([np.cumsum(np.asarray(c.bwd_s, float)[::-1])[::-1][1:], [0.0]])  # sum_{i>j} bwd_i
        self.t0 = t0 = float(t_before[n]) if t_before[n] > 0 else 1.0
        self.b0 = b0 = float(max(need_f.max(), need_b.max()))
        self.w = bw * t0 / b0 if timed else 0.0
        self.saved_by = g.saved_by
        self.m = Model("slackswap-aggregate")
        self.released: list[tuple[int, int, int]] = []       # Aggregate.released
        self.stage_rho: dict[int, int] = {}
        self.extra = self.MT = self.dt_b = None
        self.u_all: dict[int, list[int]] = {}     # swapped tensor -> its u columns (forward releases)
        self.pend: dict[int, int] = {}
        self.v_at: dict[int, dict[int, int]] = {}      # swapped tensor -> {j: v[t,j]}
        self.chained: dict[tuple[int, int], int] = {}    # (t, top) -> c_chain[t,top]

    def h2d(self, t):
        return self.c.h2d_s[t] / self.t0

    def d2h(self, t):
        return self.c.d2h_s[t] / self.t0

    def decisions(self) -> None:
        """The columns of the decisions and the stalls, and the rows between decisions."""
        m, g, n, planning, integral, cost, t0 = self.m, self.g, self.n, self.planning, self.integral, self.cost, self.t0
        self.r = r = [m.var(f"r[{p}]", 0.0, 1.0, binary=integral) for p in range(n)]
        self.x = x = {t.id: m.var(f"x[{t.id}]", 0.0, 1.0, binary=integral) for t in planning if t.recomputable}
        self.s = s = {t.id: m.var(f"s[{t.id}]", 0.0, 1.0, binary=integral) for t in planning if t.swappable}
        self.sig = sig = [m.var(f"sigma[{k}]") for k in range(n + 1)]
        self.beta = beta = [m.var(f"beta[{j}]") for j in range(n)]
        self.rho, self.rho_first = m.var("rho"), m.var("rho_first")
        rho = self.rho
        self.size = {t.id: t.bytes / self.b0 for t in planning}

        for t in planning:
            if t.id in x and t.id in s:
                m.add_le(f"one_of[{t.id}]", [(1, x[t.id]), (1, s[t.id])], 1)
            if t.id in x:
                m.add_le(f"x_needs_r[{t.id}]", [(1, x[t.id]), (-1, r[t.producer])], 0)
        for p, q in prerequisites(g, self.pset):
            m.add_le(f"prereq[{p},{q}]", [(1, r[p]), (-1, r[q])], 0)
        m.add_le("rho_total", [(1, rho)] + [(-cost[p] / t0, r[p]) for p in range(n)], 0)
        for k in range(1, n + 1):
            m.add_le(f"sigma_mono[{k}]", [(1, sig[k - 1]), (-1, sig[k])], 0)
        for j in range(n - 1):
            m.add_le(f"beta_mono[{j}]", [(1, beta[j + 1]), (-1, beta[j])], 0)

    def d2h_capacity(self) -> None:
        """``C[k]`` and the running minimum ``M[k]`` (D2H capacity, any copy order)."""
        m, n, s, size, sig, t_before = self.m, self.n, self.s, self.size, self.sig, self.t_before
        self.by_prod = by_prod = {}
        for t in self.planning:
            if t.id in s:
                by_prod.setdefault(t.producer, []).append(t.id)
        C = [m.var(f"C[{k}]") for k in range(n + 1)]
        self.M = M = [None] + [m.var(f"M[{k}]", -math.inf) for k in range(1, n + 1)]
        m.add_eq("C_def[0]", [(1, C[0])], 0)
        for k in range(1, n + 1):
            m.add_eq(f"C_def[{k}]", [(1, C[k]), (-1, C[k - 1])] + [(-size[t], s[t]) for t in by_prod.get(k - 1, ())], 0)
            if self.timed:
                if k > 1:
                    m.add_le(f"M_mono[{k}]", [(1, M[k]), (-1, M[k - 1])], 0)
                m.add_le(f"M_cap[{k}]", [(1, M[k]), (-1, C[k - 1]), (self.w, sig[k - 1])], -self.bw * t_before[k] / self.b0)

    def running(self, prefix: str, key, col, weight, order) -> list[int]:
        """v[i] = sum of weight(t) * col(t) over the planning tensors with key(t) <= i (order 1)
        or key(t) >= i (order -1), for i = 0..n-1, as a chain of equalities."""
        m, n = self.m, self.n
        groups: dict[int, list[int]] = {}
        for t in self.planning:
            if col.get(t.id) is not None and 0 <= key[t.id] <= n - 1:
                groups.setdefault(key[t.id], []).append(t.id)
        vs = [m.var(f"{prefix}[{i}]") for i in range(n)]
        prev = None
        for i in (range(n) if order == 1 else range(n - 1, -1, -1)):
            terms = [(1, vs[i])] + ([(-1, prev)] if prev is not None else [])
            m.add_eq(f"{prefix}_def[{i}]", terms + [(-weight(t), col[t]) for t in groups.get(i, ())], 0)
            prev = vs[i]
        return vs

    def running_sums(self) -> None:
        """Freed bytes as running sums: forward (use over by step k) and backward (ms(t) < j)."""
        g, planning, x, s, size = self.g, self.planning, self.x, self.s, self.size
        self.e = e = {t.id: g.last_forward_use(t.id) + 1 for t in planning}
        self.ms = ms = {t.id: max(self.saved_by[t.id]) for t in planning}
        ms1 = {t: v + 1 for t, v in ms.items()}           # ms(t) < j  <=>  ms(t) + 1 <= j
        self.rx_f = self.running("RXf", e, x, size.get, 1)          # RECOMPUTE bytes whose forward use is over
        self.sx_f = self.running("SXf", e, s, size.get, 1)
        self.rx_b = self.running("RXb", ms1, x, size.get, 1)        # ... not needed before stage j
        self.sx_b = self.running("SXb", ms1, s, size.get, 1)
        self.d_b = self.running("Db", ms, s, size.get, -1)          # SWAP bytes needed at a stage >= j
        self.h_b = self.running("Hb", ms, s, self.h2d, -1)          # ... and their H2D time
        self.rel = self.releases and self.timed and bool(s)

    def forward_memory(self) -> None:
        """``mem_fwd[k]``, ``W_src[k]``, ``W_d2h[k]`` at every forward step that needs memory."""
        m, b0, need_f = self.m, self.b0, self.need_f
        for k in range(1, self.n):
            if need_f[k] <= 0:
                continue
            wv = m.var(f"W[{k}]")
            m.add_ge(f"mem_fwd[{k}]", [(1, self.rx_f[k]), (1, wv)], need_f[k] / b0)
            m.add_le(f"W_src[{k}]", [(1, wv), (-1, self.sx_f[k])], 0)
            if self.timed:
                m.add_le(f"W_d2h[{k}]", [(1, wv), (-1, self.M[k]), (-self.w, self.sig[k])], self.bw * self.t_before[k] / b0)

    def forward_releases(self) -> None:
        """With ``releases``: ``extra``, ``CT``/``MT`` and the ``u`` rows of the forward steps."""
        m, n, s, sig, t_before, t0, cost = self.m, self.n, self.s, self.sig, self.t_before, self.t0, self.cost
        d2h, by_prod, size, e, u_all = self.d2h, self.by_prod, self.size, self.e, self.u_all
        self.extra = extra = m.var("extra")       # the objective: the plan's extra time (at least)
        m.add_eq("extra_def", [(1, extra), (-1, sig[n]), (-1, self.beta[0])] + [(-cost[p] / t0, self.r[p]) for p in range(n)], 0)
        CT = [m.var(f"CT[{k}]") for k in range(n + 1)]
        self.MT = MT = [None] + [m.var(f"MT[{k}]", -math.inf) for k in range(1, n + 1)]
        m.add_eq("CT_def[0]", [(1, CT[0])], 0)
        for k in range(1, n + 1):
            m.add_eq(f"CT_def[{k}]", [(1, CT[k]), (-1, CT[k - 1])] + [(-d2h(t), s[t]) for t in by_prod.get(k - 1, ())], 0)
            if k > 1:
                m.add_le(f"MT_mono[{k}]", [(1, MT[k]), (-1, MT[k - 1])], 0)
            m.add_le(f"MT_cap[{k}]", [(1, MT[k]), (-1, CT[k - 1]), (1, sig[k - 1])], -t_before[k] / t0)
        for k in range(1, n):
            if self.need_f[k] <= 0:
                continue
            out = [t for t in self.planning if t.id in s and e[t.id] <= k]
            u = {t.id: m.var(f"u[{t.id},{k}]", 0.0, 1.0, binary=self.integral) for t in out}
            for t, v in u.items():
                u_all.setdefault(t, []).append(v)
                self.released.append((v, t, k))
            m.add_ge(f"mem_rel[{k}]", [(1, self.rx_f[k])] + [(size[t], v) for t, v in u.items()], self.need_f[k] / self.b0)
            m.add_le(f"u_d2h[{k}]", [(d2h(t), v) for t, v in u.items()] + [(-1, MT[k]), (-1, sig[k])],
                     t_before[k] / t0)
            for t in out:
                m.add_le(f"u_src[{t.id},{k}]", [(1, u[t.id]), (-1, s[t.id])], 0)
                late = (t_before[t.producer + 1] - t_before[k]) / t0 + d2h(t.id)
                if late > 0:
                    m.add_le(f"u_time[{t.id},{k}]", [(late, u[t.id]), (-1, sig[k]), (1, sig[t.producer])], 0)
        self.dt_b = self.running("DTb", self.ms, s, d2h, -1)          # D2H time of SWAP tensors needed at a stage >= j

    def rerun(self, j):       # the recompute counted before the backward step of op j
        if j == self.n - 1:
            return self.rho_first
        if not (self.releases and self.tight):
            return self.rho
        if j not in self.stage_rho:     # with tight: only ops first re-run in stages >= j (rows below)
            self.stage_rho[j] = self.m.var(f"rho_by[{j}]")
        return self.stage_rho[j]

    def s_back(self, j):      # terms of -bw * S^b_j (scaled) and its constant
        n, w = self.n, self.w
        return [(-1, self.M[n]), (-w, self.sig[n]), (-w, self.rerun(j)), (-w, self.beta[j])], \
            self.bw * (self.t_before[n] + self.b_after[j]) / self.b0

    def first_copy_windows(self) -> None:
        """The first backward step's copy windows (``Wb_pend``, ``d2h_first``: module docstring)."""
        m, n, s, sig, ms, d2h, by_prod, t_before, t0 = (self.m, self.n, self.s, self.sig, self.ms, self.d2h,
                                                        self.by_prod, self.t_before, self.t0)
        self.pend = pend = {t.id: m.var(f"pend[{t.id}]", 0.0, 1.0, binary=self.integral)
                            for t in self.planning if t.id in s and ms[t.id] < n - 1}
        for t, v in pend.items():
            m.add_le(f"pend_src[{t}]", [(1, v), (-1, s[t])], 0)
        pt = [m.var(f"PT[{i}]") for i in range(n + 1)]
        m.add_eq(f"PT_def[{n}]", [(1, pt[n])], 0)
        for i in range(n - 1, -1, -1):
            m.add_eq(f"PT_def[{i}]", [(1, pt[i]), (-1, pt[i + 1])] + [(-d2h(t), s[t]) for t in by_prod.get(i, ())]
                     + [(d2h(t), pend[t]) for t in by_prod.get(i, ()) if t in pend], 0)
            if by_prod.get(i):     # PT[i] <= S^b_{n-1} - E_i
                m.add_le(f"d2h_first[{i}]", [(1, pt[i]), (-1, sig[n]), (-1, self.rerun(n - 1)), (-1, self.beta[n - 1]),
                                            (1, sig[i])], (t_before[n] - t_before[i + 1]) / t0)

    def hold_points(self) -> None:
        """Multi-level recompute (hold points): a RECOMPUTE tensor may be absent at a backward step
        between two of its uses (j not a saver, min saver < j < ms); the plan then re-runs its
        producer again later, which costs at least c_p more (part of beta[0], module docstring)."""
        m, g, n, x, ms = self.m, self.g, self.n, self.x, self.ms
        gaps: dict[int, list[int]] = {}
        for t in self.planning:
            if t.id in x:
                sv = set(self.saved_by[t.id])
                gap = [j for j in range(min(sv) + 1, ms[t.id]) if j not in sv]
                if gap:
                    gaps[t.id] = gap
        self.y = y = {t: m.var(f"y[{t}]", 0.0, 1.0, binary=self.integral) for t in gaps}
        again = {}
        for t in gaps:
            p = g.tensors[t].producer
            if p not in again:
                again[p] = m.var(f"again[{p}]", 0.0, 1.0)
            m.add_le(f"y_needs_x[{t}]", [(1, y[t]), (-1, x[t])], 0)
            m.add_le(f"y_again[{t}]", [(1, y[t]), (-1, again[p])], 0)
        self.rebuilt = rebuilt_inputs(g, self.pset, x)
        self.held = segments(m, g, self.pset, x, ms, [j for j in range(n) if self.need_b[j] > 0], again, self.rebuilt) \
            if self.rel and self.tight else {}
        if again:
            m.add_le("again_in_beta", [(self.cost[p] / self.t0, v) for p, v in again.items()] + [(-1, self.beta[0])], 0)
        self.dropped = dropped = {}
        for t, gap in gaps.items():
            for j in gap:
                dropped.setdefault(j, []).append(t)

    def window(self, i: int, j: int) -> list[tuple[float, int]]:
        """Minus the time beyond nominal between the backward steps of ops ``j`` and ``i < j``:
        ``S^b_i - S^b_j`` less their nominal distance. With ``tight`` (and at the first backward
        step ``n-1``, whose ``rho_first`` holds only its own stage's re-runs) the stall and the
        re-runs between; otherwise ``extra``, since ``rho`` counts every re-run in both."""
        if self.tight or j == self.n - 1:
            return [(-1, self.rerun(i)), (-1, self.beta[i]), (1, self.rerun(j)), (1, self.beta[j])]
        return [(-1, self.extra)]

    def excess(self, t: int, later: float, i: int, j: int) -> float:
        """What a copy back of ``t`` after step ``j`` and ``later`` re-runs add to the window up to
        ``S^b_i`` beyond the nominal time of the steps strictly between (``back_row``)."""
        return self.h2d(t) + later - (self.b_after[i] - self.b_after[j - 1]) / self.t0

    def back_row(self, name: str, t: int, v: int, i: int, j: int, cond: list[int], later: float = 0.0) -> None:
        """Tensor ``t`` absent at the backward step of op ``j`` (``v``) comes back, ``h2d_t`` long,
        after that step ends and before ``S^b_i``, when every column of ``cond`` is 1: the stall
        and re-runs between (``window``) cover what the steps strictly between do not, and
        ``later`` more (re-runs that follow the copy back within the window)."""
        k = self.excess(t, later, i, j)
        if k > 0:
            self.m.add_le(name, [(k, v)] + [(k, z) for z in cond] + self.window(i, j), k * len(cond))

    def chains(self, chains: int) -> None:
        """The readers of each swapped tensor's re-runs and (``chains``) the chains, as deep as the
        rows fit in ``CHAIN_NONZEROS``."""
        n, cost, t0, rel = self.n, self.cost, self.t0, self.rel
        self.readers = rerun_readers(self.g, self.pset, self.x) if rel else {}
        deep = rerun_chains(self.g, self.pset, self.x, chains) if rel and self.tight and chains > 0 else {}
        if deep:       # as deep as the rows fit in CHAIN_NONZEROS
            depth = chain_depth(deep, {t.id for t in self.planning if t.id in self.s}, self.ms,
                                [j for j in range(n) if self.need_b[j] > 0],
                                lambda t, after, i, j: self.excess(t, sum(cost[q] for q in after) / t0, i, j) > 0)
            deep = {t: [e for e in ents if len(e[0]) <= depth] for t, ents in deep.items()}
        self.deep = deep

    def queue_row(self, j: int, top: int, absent: dict[int, int], fewest: float) -> None:
        """``v_chains[j,top]`` (docs/journal/milp-full-size.md, "The copies back queue on one engine, and chains of 12"):
        ``absent`` the tensors ``t`` with chain rows at step ``j`` that end in stage ``top``
        (``{t: v[t,j]}``), ``fewest`` the least re-runs after a read of their chains."""
        m, x, ms, chained = self.m, self.x, self.ms, self.chained
        terms = [(fewest, m.var(f"z_chains[{j},{top}]", 0.0, 1.0))]
        for t, v in absent.items():
            if (t, top) not in chained:
                cv = chained[t, top] = m.var(f"c_chain[{t},{top}]", 0.0, 1.0)
                for i, ch in enumerate(minimal_sets(ch for ch, _ in self.deep[t] if ms[ch[0]] == top)):
                    m.add_ge(f"c_chain_if[{t},{top},{i}]", [(1, cv)] + [(-1, x[y]) for y in ch], 1 - len(ch))
            w = m.var(f"w_chain[{t},{j},{top}]", 0.0, 1.0)
            m.add_ge(f"w_chain_if[{t},{j},{top}]", [(1, w), (-1, v), (-1, chained[t, top])], -1)
            m.add_ge(f"z_chains_if[{j},{top},{t}]", [(1, terms[0][1]), (-1, w)], 0)
            terms.append((self.h2d(t), w))
        m.add_le(f"v_chains[{j},{top}]", terms + self.window(top, j), (self.b_after[top] - self.b_after[j - 1]) / self.t0)

    def backward_step(self, j: int) -> None:
        """The rows of the backward step of op ``j``: its memory (``mem_bwd``, ``Wb_*``), with
        ``releases`` the absent copies (``backward_releases``), and the copies out and back that
        must be done by then (``d2h_back``, ``d2h_time_back``, ``h2d_back``)."""
        m, n, s, sig, b_after, t0 = self.m, self.n, self.s, self.sig, self.b_after, self.t0
        if self.need_b[j] > 0:
            size = self.size
            wv = m.var(f"Wb[{j}]")
            m.add_ge(f"mem_bwd[{j}]", [(1, self.rx_b[j]), (1, wv)] + [(size[t], self.y[t]) for t in self.dropped.get(j, ())]
                     + [(-size[t], hv) for t, hv in self.held.get(j, {}).items()], self.need_b[j] / self.b0)
            m.add_le(f"Wb_src[{j}]", [(1, wv), (-1, self.sx_b[j])], 0)
            if j == n - 1 and self.pend:
                m.add_le("Wb_pend", [(1, wv), (-1, self.sx_b[j])] + [(size[t], v) for t, v in self.pend.items()], 0)
            if self.timed:
                terms, rhs = self.s_back(j)
                m.add_le(f"Wb_d2h[{j}]", [(1, wv)] + terms, rhs)
            if self.rel:
                self.backward_releases(j, wv)
        if s:
            if self.timed:
                terms, rhs = self.s_back(j)
                m.add_le(f"d2h_back[{j}]", [(1, self.d_b[j])] + terms, rhs)
            if self.rel:
                m.add_le(f"d2h_time_back[{j}]", [(1, self.dt_b[j]), (-1, self.MT[n]), (-1, sig[n]),
                                                 (-1, self.rerun(j)), (-1, self.beta[j])],
                         (self.t_before[n] + b_after[j]) / t0)
            m.add_le(f"h2d_back[{j}]", [(1, self.h_b[j]), (-1, sig[n]), (1, sig[n - 1]),
                                       (-1, self.rerun(j)), (-1, self.beta[j])], b_after[j] / t0)

    def backward_releases(self, j: int, wv: int) -> None:
        """With ``releases``: ``v[t,j]`` for every swapped tensor that can be absent at the
        backward step of op ``j``, and the rows that say when its copies ran (module docstring)."""
        m, n, s, x, sig, ms, cost, t0 = self.m, self.n, self.s, self.x, self.sig, self.ms, self.cost, self.t0
        t_before, b_after, d2h, beta, rerun, back_row = self.t_before, self.b_after, self.d2h, self.beta, self.rerun, self.back_row
        vs = {}
        queued: dict[int, dict[int, int]] = {}      # top -> {t: v[t,j]}: chains that end in stage top
        least: dict[int, float] = {}                # top -> the fewest re-runs after a read
        for t in self.planning:
            if t.id in s and ms[t.id] < j:
                v = vs[t.id] = m.var(f"v[{t.id},{j}]", 0.0, 1.0, binary=self.integral)
                self.released.append((v, t.id, 2 * n - 1 - j))
                m.add_le(f"v_src[{t.id},{j}]", [(1, v), (-1, s[t.id])], 0)
                # copied out in full by S^b_j (with tight: the o rows below) ...
                if self.tight:
                    self.v_at.setdefault(t.id, {})[j] = v
                else:
                    late = (t_before[t.producer + 1] - t_before[n] - b_after[j]) / t0 + d2h(t.id)
                    if late > 0:
                        m.add_le(f"v_time[{t.id},{j}]", [(late, v), (-1, sig[n]), (1, sig[t.producer]),
                                                         (-1, rerun(j)), (-1, beta[j])], 0)
                # ... and not copied back yet: its issue stage is below j, so its copy back
                # starts after step j ends and ends h2d_t later, before S^b_{ms(t)}
                back_row(f"v_back[{t.id},{j}]", t.id, v, ms[t.id], j, [])
                # ... or before a re-run that reads it: the regeneration of a RECOMPUTE y,
                # in a stage >= ms(y). At j <= ms(y) t is then resident; below, the copy
                # back ends before that stage (the v_read rows)
                for yv in self.readers.get(t.id, ()):
                    if ms[yv] >= j:
                        m.add_le(f"v_held[{t.id},{j},{yv}]", [(1, v), (1, x[yv])], 1)
                    elif ms[yv] > ms[t.id]:
                        back_row(f"v_read[{t.id},{j},{yv}]", t.id, v, ms[yv], j, [x[yv]])
                # ... and before the re-runs along a chain of RECOMPUTE tensors that
                # reads it (v_chain: rerun_chains), less the re-runs after the read
                for k, (ch, after) in enumerate(self.deep.get(t.id, ())):
                    top = ms[ch[0]]
                    if j > top > ms[t.id]:
                        later = sum(cost[q] for q in after) / t0
                        back_row(f"v_chain[{t.id},{j},{k}]", t.id, v, top, j, [x[y] for y in ch], later)
                        queued.setdefault(top, {})[t.id] = v
                        least[top] = min(least.get(top, math.inf), later)
        m.add_le(f"Wb_rel[{j}]", [(1, wv)] + [(-self.size[t], v) for t, v in vs.items()], 0)
        for top, absent in queued.items():     # v_chains: the copies back on one engine
            if len(absent) > 1:
                self.queue_row(j, top, absent, least[top])
        if not self.tight:
            m.add_le(f"v_d2h[{j}]", [(d2h(t), v) for t, v in vs.items()] + [(-1, self.MT[n]), (-1, sig[n]),
                                                                              (-1, rerun(j)), (-1, beta[j])],
                     (t_before[n] + b_after[j]) / t0)

    def copied_out(self) -> None:
        """With ``tight``: ``o[t,j]``, swapped tensor t copied out in full by S^b_j. A copy out, once
        done, stays done: absent at an earlier step (v) or released in the forward pass (u)
        implies o at every later one."""
        m, g, n, s, sig, t0 = self.m, self.g, self.n, self.s, self.sig, self.t0
        t_before, b_after, d2h, beta, rerun = self.t_before, self.b_after, self.d2h, self.beta, self.rerun
        outs: dict[int, list[tuple[int, int]]] = {}
        for t, at in self.v_at.items():
            prev = None
            for j in sorted(at, reverse=True):       # backward steps in time order
                o = m.var(f"o[{t},{j}]", 0.0, 1.0)
                self.released.append((o, t, 2 * n - 1 - j))
                m.add_le(f"o_src[{t},{j}]", [(1, o), (-1, s[t])], 0)
                m.add_ge(f"o_abs[{t},{j}]", [(1, o), (-1, at[j])], 0)
                if prev is None:
                    for i, uv in enumerate(self.u_all.get(t, ())):
                        m.add_ge(f"o_fwd[{t},{j},{i}]", [(1, o), (-1, uv)], 0)
                else:
                    m.add_ge(f"o_mono[{t},{j}]", [(1, o), (-1, prev)], 0)
                prev = o
                outs.setdefault(j, []).append((t, o))
                tt = g.tensors[t]
                late = (t_before[tt.producer + 1] - t_before[n] - b_after[j]) / t0 + d2h(t)
                if late > 0:
                    m.add_le(f"o_time[{t},{j}]", [(late, o), (-1, sig[n]), (1, sig[tt.producer]),
                                                  (-1, rerun(j)), (-1, beta[j])], 0)
        for j, lst in outs.items():
            m.add_le(f"o_d2h[{j}]", [(d2h(t), o) for t, o in lst] + [(1, self.dt_b[j]), (-1, self.MT[n]), (-1, sig[n]),
                                                                     (-1, rerun(j)), (-1, beta[j])],
                     (t_before[n] + b_after[j]) / t0)

    def copy_chains(self) -> None:
        """``chain[t]``: a copy back follows the copy out, which starts when the producer ends."""
        m, n, sig, t0, t_before = self.m, self.n, self.sig, self.t0, self.t_before
        for t in self.planning:
            if t.id in self.s:
                j, p = self.ms[t.id], t.producer
                late = (t_before[p + 1] - t_before[n] - self.b_after[j]) / t0 + self.d2h(t.id) + self.h2d(t.id)
                if late > 0:
                    m.add_ge(f"chain[{t.id}]", [(1, sig[n]), (-1, sig[p]), (1, self.rerun(j)),
                                               (1, self.beta[j]), (-late, self.s[t.id])], 0)

    def rerun_rows(self, rho_var, roots, key: str) -> None:
        """``rho_var`` (the recompute before a backward step) is at most the cost of the ops that
        may be re-run for the ``roots`` (the RECOMPUTE tensors needed at that step or before it):
        their producers and, through RECOMPUTE and unsaved inputs, the ops that rebuild those
        producers' inputs. ``key`` "": stage ``n-1``, one variable per reason (``z[q,i] <= rf[p]``,
        ``<= x[y]``); else (``key`` = j, the rows ``rf[j,q]``) two rows without them, to keep the
        model small: ``rf <=`` the roots plus ``rf[p]`` of every reason, and plus ``x[y]`` (for a
        planning tensor) or ``rf[p]``."""
        m, g, r, x, pset, rebuilt = self.m, self.g, self.r, self.x, self.pset, self.rebuilt
        at = f"{key}," if key else ""
        edges: dict[int, list[tuple[int | None, int]]] = {}
        stack = [(g.tensors[t].producer, t, None) for t in roots]
        seen: set[int] = set()
        while stack:
            q, y, p = stack.pop()
            edges.setdefault(q, []).append((p, y))
            if q in seen:
                continue
            seen.add(q)
            stack.extend((p, inp, q) for p, inp in rebuilt.get(q, ()))
        rf = {q: m.var(f"rf[{at}{q}]", 0.0, 1.0) for q in sorted(seen)}
        for q in sorted(seen):
            m.add_le(f"rf_needs_r[{at}{q}]", [(1, rf[q]), (-1, r[q])], 0)
            if key:
                roots_q = [(-1, x[y]) for p, y in edges[q] if p is None]
                a1 = [(-1, rf[p]) for p, y in edges[q] if p is not None]
                a2 = [(-1, x[y]) if y in pset else (-1, rf[p]) for p, y in edges[q] if p is not None]
                m.add_le(f"rf_why[{at}{q}]", [(1, rf[q])] + roots_q + a1, 0)
                if any(y in pset for p, y in edges[q] if p is not None):
                    m.add_le(f"rf_why2[{at}{q}]", [(1, rf[q])] + roots_q + a2, 0)
                continue
            why = []
            for i, (p, y) in enumerate(edges[q]):
                zv = m.var(f"z[{at}{q},{i}]", 0.0, 1.0)
                if p is not None:
                    m.add_le(f"z_rerun[{at}{q},{i}]", [(1, zv), (-1, rf[p])], 0)
                if y in pset:
                    m.add_le(f"z_rec[{at}{q},{i}]", [(1, zv), (-1, x[y])], 0)
                why.append((-1, zv))
            m.add_le(f"rf_why[{at}{q}]", [(1, rf[q])] + why, 0)
        name = f"rho_by_def[{key}]" if key else "rho_first_def"
        m.add_le(name, [(1, rho_var)] + [(-self.cost[q] / self.t0, rf[q]) for q in sorted(seen)], 0)

    def first_reruns(self) -> None:
        """``rho_first``: only ops re-run in the first backward stage (stage n-1) run before its
        step; with ``tight``, the same before the backward step of every op j: the simulator re-runs
        an op in stage i only to rebuild what stage i needs, so only ops first re-run for RECOMPUTE
        tensors with ms(t) >= j run before it (repeated re-runs are in beta)."""
        x, ms = self.x, self.ms
        self.rerun_rows(self.rho_first, [t for t in dict.fromkeys(self.g.ops[self.n - 1].saves) if t in x], "")
        for j in sorted(self.stage_rho):
            self.rerun_rows(self.stage_rho[j], [t for t in x if ms[t] >= j], str(j))
