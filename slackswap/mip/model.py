"""A tiny backend-neutral MILP model: named variables, named linear constraints, an objective.

The MILP planner (``slackswap/planners/milp/``, docs/milp.md) writes its formulation once against this class; the
backends in ``backends.py`` (HiGHS, pulp-CBC, cvxpy) translate it. Variables are columns
with bounds and an integrality flag; a constraint is ``lo <= sum_i a_i x_i <= hi``; the objective
is minimised.

>>> m = Model("demo")
>>> x = m.var("keep[1]", binary=True); y = m.var("start[0]")
>>> m.add_ge("stall[0]", [(1.0, y), (-2.0, x)], 0.0)
>>> m.minimize([(1.0, y)]); m.size()["binaries"]
1
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..errors import SlackSwapError

INF = math.inf


class Model:
    """Columns (``names``, ``lb``, ``ub``, ``integer``), rows (``row_names``, ``rows``, ``lo``,
    ``hi``) and a linear objective ``obj`` (dict column -> coefficient, plus ``obj_const``)."""

    def __init__(self, name: str):
        self.name = name
        self.names: list[str] = []
        self.lb: list[float] = []
        self.ub: list[float] = []
        self.integer: list[bool] = []
        self.index: dict[str, int] = {}
        self.row_names: list[str] = []
        self.rows: list[dict[int, float]] = []
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.obj: dict[int, float] = {}
        self.obj_const = 0.0
        self.infeasible: list[str] = []
        """Names of constant rows (no column left) that fail their bounds: they hold for every
        plan, so the model has no solution (the backends return status "infeasible")."""

    # ---- building ----
    def var(self, name: str, lb: float = 0.0, ub: float = INF, binary: bool = False) -> int:
        if name in self.index:
            raise SlackSwapError(f"MILP model: duplicate variable name {name!r}")
        i = len(self.names)
        self.names.append(name)
        self.lb.append(0.0 if binary else float(lb))
        self.ub.append(1.0 if binary else float(ub))
        self.integer.append(bool(binary))
        self.index[name] = i
        return i

    def _row(self, name: str, terms: Iterable[tuple[float, int]], lo: float, hi: float) -> None:
        row: dict[int, float] = {}
        for c, v in terms:
            if c:
                row[v] = row.get(v, 0.0) + float(c)
        row = {v: c for v, c in row.items() if c}
        if not row:  # constant constraint: checked now instead of passing an empty row
            if lo > 1e-9 or hi < -1e-9:
                self.infeasible.append(name)
            return
        self.row_names.append(name)
        self.rows.append(row)
        self.lo.append(float(lo))
        self.hi.append(float(hi))

    def add_ge(self, name: str, terms, rhs: float) -> None:
        """``sum terms >= rhs``."""
        self._row(name, terms, rhs, INF)

    def add_le(self, name: str, terms, rhs: float) -> None:
        """``sum terms <= rhs``."""
        self._row(name, terms, -INF, rhs)

    def add_eq(self, name: str, terms, rhs: float) -> None:
        self._row(name, terms, rhs, rhs)

    def minimize(self, terms, const: float = 0.0) -> None:
        self.obj = {}
        for c, v in terms:
            self.obj[v] = self.obj.get(v, 0.0) + float(c)
        self.obj_const = float(const)

    # ---- views ----
    def size(self) -> dict[str, int]:
        return {"vars": len(self.names), "constraints": len(self.rows), "binaries": sum(self.integer),
                "nonzeros": sum(len(r) for r in self.rows)}

    def csr(self):
        """The constraint matrix as ``scipy.sparse.csr_matrix`` (rows x columns)."""
        import numpy as np
        import scipy.sparse as sp

        indptr, idx, val = [0], [], []
        for r in self.rows:
            idx.extend(r.keys())
            val.extend(r.values())
            indptr.append(len(idx))
        return sp.csr_matrix((np.asarray(val, float), np.asarray(idx, np.int64), np.asarray(indptr, np.int64)),
                             shape=(len(self.rows), len(self.names)))

    def objective_value(self, x) -> float:
        return self.obj_const + sum(c * x[v] for v, c in self.obj.items())

    # ---- dumps ----
    def to_lp(self, path) -> None:
        """Write the model in CPLEX LP format (via pulp; names sanitised: ``keep[3]`` -> ``keep_3__<col>``)."""
        self._write(str(path))

    def to_mps(self, path) -> None:
        """Write the model in MPS format (via pulp; same names)."""
        self._write(str(path))

    def _write(self, path: str) -> None:
        from .backends import solve_cbc

        solve_cbc(self, time_limit_s="write-only", write=path)


# ---- memory rows of the formulation (timeline.md 4): accounted memory of every potential step <= budget ----


def _suffix_or(m, name, events, lo, hi):
    """Per position s in [lo, hi]: ("one",) if a constant use lies at or after s, else a column
    L[s] >= every activity at s and >= L[s+1] (0 if nothing follows)."""
    out = {}
    nxt = None
    const_from = max((p for p, a in events if a is None), default=-1)
    at: dict[int, list[int]] = {}
    for p, a in events:
        if a is not None:
            at.setdefault(p, []).append(a)
    for s in range(hi, lo - 1, -1):
        if s <= const_from:
            out[s] = "one"
            continue
        if nxt is None and s not in at:
            out[s] = None
            continue
        col = m.var(f"{name}[{s}]", 0.0, 1.0)
        row_base = []
        if nxt is not None:
            m.add_ge(f"{name}_suffix[{s}]", [(1.0, col), (-1.0, nxt)], 0.0)
        for a in at.get(s, ()):
            m.add_ge(f"{name}_use[{s},{a}]", [(1.0, col), (-1.0, a)] + row_base, 0.0)
        out[s] = col
        nxt = col
    return out


def _memory(m, problem, steps, nodes, x, act, keep, swap, rec, issue, uses, emits, bwd_pos,
            ready, d2h_end, Mt, B, rtype, tick=lambda: None):
    g = problem.graph
    T, ops, n = g.tensors, g.ops, len(g.ops)
    S = len(steps)
    const = [0.0] * S
    terms: list[list[tuple[float, int]]] = [[] for _ in range(S)]
    inputs = sum(t.bytes for t in T if t.producer is None)
    for s in range(S):
        const[s] += inputs
    last_fwd = [max(g.last_forward_use(t.id), t.producer) if t.producer is not None else -1 for t in T]
    for op in ops:
        const[op.id] += op.workspace_bytes
        const[bwd_pos[op.id]] += op.workspace_bytes
    for t in T:
        if t.producer is not None:
            for s in range(t.producer, last_fwd[t.id] + 1):
                const[s] += t.bytes
    grad_from: dict[int, int] = {}
    for j in range(n - 1, -1, -1):
        for xx in dict.fromkeys(ops[j].inputs):
            if T[xx].requires_grad and xx not in grad_from:
                grad_from[xx] = j
        for y in ops[j].outputs:
            if y in grad_from:
                for s in range(bwd_pos[grad_from[y]], bwd_pos[j] + 1):
                    const[s] += T[y].bytes
    for v, nd in enumerate(nodes):
        ws = ops[nd["op"]].workspace_bytes
        if ws:
            terms[nd["pos"]].append((ws / B, x[v]))

    waits: list[list[tuple[float, int]]] = [[] for _ in range(S)]
    for t in keep:
        tick()
        b = T[t].bytes / B
        if not b:
            continue
        pl = bwd_pos[min(g.saved_by[t])]
        for s in range(last_fwd[t] + 1, pl + 1):
            terms[s].append((b, keep[t]))
        late = [(p, a) for p, a in uses.get(t, ()) if p > pl]
        if late:
            hi = max(p for p, _ in late)
            L = _suffix_or(m, f"kept_used[{t}]", late, pl + 1, hi)
            for s in range(pl + 1, hi + 1):
                if L[s] is None:
                    continue
                ke = m.var(f"kept[{t},{s}]", 0.0, 1.0)
                m.add_ge(f"kept[{t},{s}]", [(1.0, ke), (-1.0, keep[t]), (-1.0, L[s])], -1.0)
                terms[s].append((b, ke))
        if t in swap:
            lo_issue = max(g.saved_by[t])
            for s in range(n, pl + 1):
                st = steps[s][2]
                for k in range(max(st, lo_issue), n):
                    terms[s].append((b, issue[(t, k)]))
            if late:
                for s in range(pl + 1, hi + 1):
                    if L[s] is None:
                        continue
                    he = m.var(f"fetched[{t},{s}]", 0.0, 1.0)
                    m.add_ge(f"fetched[{t},{s}]", [(1.0, he), (-1.0, swap[t]), (-1.0, L[s])], -1.0)
                    terms[s].append((b, he))
            for s in range(last_fwd[t] + 1, S):   # pending source: counted unless waited for
                const_b = b
                w = m.var(f"wait[{t},{s}]", binary=True)
                m.add_le(f"wait_if_swapped[{t},{s}]", [(1.0, w), (-1.0, swap[t])], 0.0)
                m.add_ge(f"stall[{t},{s}]", [(1.0, ready[s]), (-1.0, d2h_end[t]), (-Mt, w)], -Mt)
                terms[s].append((const_b, swap[t]))
                waits[s].append((-const_b, w))
    # regenerated tensors (re-run outputs that are RECOMPUTE or unsaved)
    for y, em in emits.items():
        tick()
        r = rtype(y)
        if r is None or not T[y].bytes:
            continue
        b = T[y].bytes / B
        ev = list(uses.get(y, ())) + [(p, a) for p, a in em]
        lo, hi = min(p for p, _ in em), max(p for p, _ in ev)
        L = _suffix_or(m, f"regen_used[{y}]", ev, lo, hi)
        for s in range(lo, hi + 1):
            emitted = [(-1.0, a) for p, a in em if p <= s]
            if not emitted or L[s] is None:
                continue
            rg = m.var(f"regen[{y},{s}]", 0.0, 1.0)
            row = [(1.0, rg)] + emitted      # rg >= emitted + rt + used_later - 2
            rhs = 0.0
            if r != "one":
                row.append((-1.0, r))
                rhs -= 1.0
            if L[s] != "one":
                row.append((-1.0, L[s]))
                rhs -= 1.0
            m.add_ge(f"regen[{y},{s}]", row, rhs)
            terms[s].append((b, rg))
    big = sum(t.bytes for t in T) * 3 / B + sum(op.workspace_bytes for op in ops) / B + 1.0
    for s in range(S):
        row = terms[s] + waits[s]
        cst = const[s] / B
        if act[s] is not None:
            row = row + [(big, act[s])]
            m.add_le(f"mem[{s}]", row, 1.0 - cst + big)
        else:
            m.add_le(f"mem[{s}]", row, 1.0 - cst)
