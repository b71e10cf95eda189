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

import bisect
import math
from collections.abc import Iterable

import numpy as np

from ..core.errors import SlackSwapError
from .backends import solve_cbc

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
        import scipy.sparse as sp  # lazy: start-up cost (scipy)

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
        solve_cbc(self, time_limit_s="write-only", write=path)


def prefix(m: Model, name: str, cols: list[int]):
    """Running sums of ``cols`` (docs/milp.md, "Constraints (names as in the LP file)", "prefix sums"): returns ``terms(c)``, the
    sum of ``cols[:c]`` as a list of ``(1.0, column)`` terms: nothing for 0, the column itself for
    1, else a continuous column ``name[c]`` defined by ``name[c] = name[c-1] + cols[c-1]``
    (created on first use). A row that needs the sum of many earlier columns then has one term
    instead of ``c``; the columns are equalities, so the feasible set is the same."""
    made: list[int] = []      # made[i]: column of the sum of cols[:i + 2]

    def terms(c: int) -> list[tuple[float, int]]:
        if c <= 0:
            return []
        if c == 1:
            return [(1.0, cols[0])]
        while len(made) < c - 1:
            i = len(made) + 2                      # the sum of cols[:i]
            col = m.var(f"{name}[{i}]")
            prev = [(-1.0, made[-1])] if made else [(-1.0, cols[0])]
            m.add_eq(f"{name}[{i}]", [(1.0, col)] + prev + [(-1.0, cols[i - 1])], 0.0)
            made.append(col)
        return [(1.0, made[c - 2])]
    return terms


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


def _regenerated_copies(m, steps, y, r, b, em, uses, hold, add):
    """Memory of regenerated tensor ``y`` when copies may be freed between stages (hold points,
    docs/milp.md, "Constraints (names as in the LP file)"): at step s of stage j, y is resident iff a held copy was carried into
    stage j and y is read at or after s, or a copy was made in stage j at or before s (a re-run of
    its producer there, y recompute-type and not carried) and y is read at or after s in stage j,
    or anywhere later if that copy is held. ``live[y,s]`` is at least each of the three products."""
    held, carried = hold
    ev = list(uses) + list(em)
    lo, hi = min(p for p, _ in em), max(p for p, _ in ev)
    # read at or after s: a later re-run of the producer is no read (it does not allocate a
    # carried copy again); the copy's own re-run is counted through its stage's events below
    L = _suffix_or(m, f"regen_used[{y}]", list(uses), lo, hi)
    made: dict[int, list[tuple[int, int]]] = {}
    for p, a in sorted(em):
        made.setdefault(steps[p][2], []).append((p, a))
    in_stage: dict[int, tuple] = {}
    for j, ej in made.items():
        evj = [(p, a) for p, a in ev if steps[p][2] == j]
        first = ej[0][0]
        Lj = _suffix_or(m, f"regen_used_in[{y},{j}]", evj, first, max(p for p, _ in evj))
        in_stage[j] = ([p for p, _ in ej], prefix(m, f"emitted_in[{y},{j}]", [a for _, a in ej]), Lj)
    rt = ([], 1.0) if r == "one" else ([(1.0, r)], 0.0)

    def flag(v):        # a suffix-OR value as a factor: "one", a column, or None (0: no factor)
        return None if v is None else ([], 1.0) if v == "one" else ([(1.0, v)], 0.0)

    for s in range(lo, hi + 1):
        j = steps[s][2]
        car = carried(y, j)
        lows = []      # each a product of 0/1 factors (terms, constant) that live[y,s] is at least
        if car and L[s] is not None:
            lows.append([(car, 0.0), flag(L[s])])
        if j in in_stage:
            pos, run, Lj = in_stage[j]
            e = run(bisect.bisect_right(pos, s))
            if e and Lj.get(s) is not None:     # made in this stage, not carried, read later in it
                lows.append([(e, 0.0), rt, flag(Lj[s]), ([(-cf, col) for cf, col in car], 1.0)])
            if e and j in held.get(y, {}) and L[s] is not None:
                lows.append([(e, 0.0), ([(1.0, held[y][j])], 0.0), flag(L[s])])
        if not lows:
            continue
        live = m.var(f"live[{y},{s}]", 0.0, 1.0)
        for i, factors in enumerate(lows):
            # live >= sum(factors) - (len - 1): 1 when every factor is 1
            row, rhs = [(1.0, live)], 1.0 - len(factors)
            for terms, const in factors:
                row += [(-cf, col) for cf, col in terms]
                rhs += const
            m.add_ge(f"live[{y},{s}]#{i}", row, rhs)
        add(s, b, live, y)


def _memory(m, problem, steps, nodes, x, act, keep, swap, rec, issue, uses, emits, bwd_pos,
            ready, d2h_end, Mt, B, rtype, tick=lambda: None, hold=None):
    g = problem.graph
    T, ops, n = g.tensors, g.ops, len(g.ops)
    S = len(steps)
    const = [0.0] * S
    terms: list[list[tuple[float, int]]] = [[] for _ in range(S)]
    most: list[dict] = [{} for _ in range(S)]   # step -> tensor (None: workspaces) -> largest bytes counted

    def add(s, coef, col, t=None):
        terms[s].append((coef, col))
        most[s][t] = most[s].get(t, 0.0) + max(coef, 0.0)
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
            add(nd["pos"], ws / B, x[v])

    pending: list[list[int]] = [[] for _ in range(S)]   # swapped sources counted at each step
    for t in keep:
        tick()
        b = T[t].bytes / B
        if not b:
            continue
        pl = bwd_pos[min(g.saved_by[t])]
        for s in range(last_fwd[t] + 1, pl + 1):
            add(s, b, keep[t], t)
        late = [(p, a) for p, a in uses.get(t, ()) if p > pl]
        if late:
            hi = max(p for p, _ in late)
            L = _suffix_or(m, f"kept_used[{t}]", late, pl + 1, hi)
            for s in range(pl + 1, hi + 1):
                if L[s] is None:
                    continue
                ke = m.var(f"kept[{t},{s}]", 0.0, 1.0)
                m.add_ge(f"kept[{t},{s}]", [(1.0, ke), (-1.0, keep[t]), (-1.0, L[s])], -1.0)
                add(s, b, ke, t)
        if t in swap:
            lo_issue = max(g.saved_by[t])
            # issued at a stage >= k: a running sum over the issue columns from stage n-1 down
            issued = prefix(m, f"issued_from[{t}]", [issue[(t, k)] for k in range(n - 1, lo_issue - 1, -1)])
            for s in range(n, pl + 1):
                k = max(steps[s][2], lo_issue)
                for cf, col in [(1.0, swap[t])] if k == lo_issue else issued(n - k):
                    add(s, b * cf, col, t)
            if late:
                for s in range(pl + 1, hi + 1):
                    if L[s] is None:
                        continue
                    he = m.var(f"fetched[{t},{s}]", 0.0, 1.0)
                    m.add_ge(f"fetched[{t},{s}]", [(1.0, he), (-1.0, swap[t]), (-1.0, L[s])], -1.0)
                    add(s, b, he, t)
            # pending source: counted unless waited for (below); after the backward step that first
            # uses t its copy has ended (that step waits for the H2D copy, which starts after the
            # D2H copy): not counted there ("Constraints (names as in the LP file)", "pending sources")
            for s in range(last_fwd[t] + 1, bwd_pos[max(g.saved_by[t])] + 1):
                add(s, b, swap[t], t)
                pending[s].append(t)
    # regenerated tensors (re-run outputs that are RECOMPUTE or unsaved)
    for y, em in emits.items():
        tick()
        r = rtype(y)
        if r is None or not T[y].bytes:
            continue
        if hold is not None:
            _regenerated_copies(m, steps, y, r, T[y].bytes / B, em, uses.get(y, ()), hold, add)
            continue
        b = T[y].bytes / B
        ev = list(uses.get(y, ())) + [(p, a) for p, a in em]
        lo, hi = min(p for p, _ in em), max(p for p, _ in ev)
        L = _suffix_or(m, f"regen_used[{y}]", ev, lo, hi)
        em = sorted(em)
        em_pos = [p for p, _ in em]
        em_sum = prefix(m, f"emitted[{y}]", [a for _, a in em])    # re-runs of y's producer so far
        for s in range(lo, hi + 1):
            emitted = [(-cf, col) for cf, col in em_sum(bisect.bisect_right(em_pos, s))]
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
            add(s, b, rg, y)
    big = sum(t.bytes for t in T) * 3 / B + sum(op.workspace_bytes for op in ops) / B + 1.0
    for s in range(S):
        cst = const[s] / B
        # the most step s can hold, at the tightest values of the helper columns (which only appear
        # here with positive coefficients): each tensor twice at most (a pending D2H source and its
        # H2D destination), workspaces as counted. A row that holds even then is left out, with its
        # wait columns (docs/milp.md, "Constraints (names as in the LP file)", "memory rows that cannot bind").
        top = cst + sum(v if t is None else min(v, 2 * T[t].bytes / B) for t, v in most[s].items())
        if top <= 1.0:
            continue
        row = list(terms[s])
        for t in pending[s]:
            b = T[t].bytes / B
            w = m.var(f"wait[{t},{s}]", binary=True)
            m.add_le(f"wait_if_swapped[{t},{s}]", [(1.0, w), (-1.0, swap[t])], 0.0)
            m.add_ge(f"stall[{t},{s}]", [(1.0, ready[s]), (-1.0, d2h_end[t]), (-Mt, w)], -Mt)
            row.append((-b, w))
        if act[s] is not None:
            row = row + [(big, act[s])]
            m.add_le(f"mem[{s}]", row, 1.0 - cst + big)
        else:
            m.add_le(f"mem[{s}]", row, 1.0 - cst)
