"""Backends for the backend-neutral ``Model`` (docs/milp.md, "Backends").

* ``"highs"``: highspy (HiGHS branch-and-cut), with the solver's dual bound and gap;
* ``"cbc"``: pulp's bundled CBC (``PULP_CBC_CMD``); pulp reports no dual bound;
* ``"cvxpy"``: cvxpy with its HIGHS MILP solver (SCIPY as fallback); imported lazily;
* ``"scip"``, ``"cpsat"``: OR-Tools' SCIP and CP-SAT (``ortools_backend.py``); imported lazily.

Every backend returns a ``Result``: ``status`` in {"optimal", "time_limit", "infeasible",
"error", "feasible" (a plan without proof: CP-SAT's time grid)}, the column values ``x`` (None when no solution), ``objective`` and ``bound``. HiGHS
MIP solves with a time limit run in a child process that is stopped at the limit (``solve_highs``).
"""

from __future__ import annotations

import math
import multiprocessing as mp

import numpy as np

from ..core.errors import SlackSwapError
from . import highs_process
from .solver_core import Result, _flat, _highs, _left, _new_highs, _run  # noqa: F401 - re-exported: the backends' API

BACKENDS = ("highs", "cbc", "cvxpy", "scip", "cpsat")


ISOLATE: bool | None = None
"""Where ``solve_highs`` runs HiGHS: True, in a child process with a hard stop; False, in this
process; None (auto), in a child when a time limit applies to a MIP (not ``relax``, some integer
column) and this process may start one (not a daemonic ``multiprocessing`` worker). The
``isolate`` keyword of ``solve_highs`` overrides it per call."""
def solve_highs(model, *, time_limit_s=None, mip_rel_gap=1e-9, threads=None, seed=0,
                start: dict[int, float] | None = None, relax: bool = False, deadline: float | None = None,
                isolate: bool | None = None, presolve: bool = True, cutoff: float | None = None) -> Result:
    """Solve with HiGHS. ``cutoff`` (a MIP objective value, e.g. the warm start's): HiGHS prunes
    every node whose bound reaches it, so it searches only for plans better than that; status
    "infeasible" then means none is below it. ``deadline`` (a ``time.perf_counter()`` value) caps the solver's time limit
    at what is left once the model is passed. ``start`` is NOT passed to HiGHS: HiGHS 1.16 maps a
    partial MIP start into its presolved space wrongly (it reported "feasible in the reduced space:
    objective -3" for a start of objective 1.21 and then stopped as optimal at a wrong plan), so the
    planner keeps the warm start as a fallback incumbent instead (docs/milp.md, "Status, warm start and what is proven").

    Hard stop: HiGHS 1.16 does not check ``time_limit`` everywhere in MIP presolve (a 7.6 M-nonzero
    model given 10.5 s ran 31.6 s) and ``cancelSolve()`` does not stop it either, so a MIP with a
    time limit is solved in a child process (``multiprocessing`` "spawn": forking a process that
    ran HiGHS can deadlock on its thread pool; see ``ISOLATE`` and ``isolate``). Its limit ``L``
    (the smaller of ``time_limit_s`` and what is left until ``deadline``) counts from when the child
    is started, so the spawn start-up (~0.5-2 s of imports) and the model hand-over are part of it;
    HiGHS itself is given ``max(L / 2, L / 1.05 - 1)`` and the child is killed ``L`` s after its
    start, and the call then returns status "time_limit" without a solution. A child that fails returns status "error" with its exception.
    Without a limit, for ``relax`` and for LPs HiGHS runs in this process."""
    early = _constant_infeasible(model)
    if early is not None:
        return early
    limited = time_limit_s is not None or deadline is not None
    iso = ISOLATE if isolate is None else isolate
    if iso is None:
        iso = limited and not relax and any(model.integer) and not mp.current_process().daemon
    opts = {"time_limit_s": time_limit_s, "mip_rel_gap": mip_rel_gap, "threads": threads,
            "seed": seed, "relax": relax, "presolve": presolve, "cutoff": cutoff}
    if iso:
        return highs_process.solve_isolated(model, opts, deadline)
    h = _highs(_flat(model))
    return _run(h, any(model.integer), deadline=deadline, **opts)


def _pulp_name(name: str, i: int) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name) + f"_{i}"


def solve_cbc(model, *, time_limit_s=None, mip_rel_gap=1e-9, threads=None, seed=0,
              start: dict[int, float] | None = None, write: str | None = None, deadline: float | None = None) -> Result:
    try:
        import pulp  # lazy: start-up cost (pulp)
    except ImportError:
        raise SlackSwapError("milp solver 'cbc' needs pulp: pip install pulp") from None
    prob = pulp.LpProblem(_pulp_name(model.name, 0), pulp.LpMinimize)
    xs = []
    for i, nm in enumerate(model.names):
        lb = None if model.lb[i] == -math.inf else model.lb[i]
        ub = None if model.ub[i] == math.inf else model.ub[i]
        cat = pulp.LpInteger if model.integer[i] else pulp.LpContinuous
        xs.append(pulp.LpVariable(_pulp_name(nm, i), lb, ub, cat))
    prob += pulp.LpAffineExpression([(xs[v], c) for v, c in model.obj.items()], constant=model.obj_const)
    for r, (nm, row, lo, hi) in enumerate(zip(model.row_names, model.rows, model.lo, model.hi, strict=False)):
        expr = pulp.LpAffineExpression([(xs[v], c) for v, c in row.items()])
        base = _pulp_name(nm, r)
        if lo == hi:
            prob += pulp.LpConstraint(expr, pulp.LpConstraintEQ, base, lo)
            continue
        if lo > -math.inf:
            prob += pulp.LpConstraint(expr, pulp.LpConstraintGE, base + "_lo", lo)
        if hi < math.inf:
            prob += pulp.LpConstraint(expr, pulp.LpConstraintLE, base + "_hi", hi)
    if start:
        for i, v in start.items():
            xs[i].setInitialValue(v)
    if write:
        (prob.writeMPS if str(write).endswith(".mps") else prob.writeLP)(str(write))
        if start is None and time_limit_s == "write-only":
            return Result("error", None, None, None, "written")
    if time_limit_s != "write-only":
        time_limit_s = _left(time_limit_s, deadline)
    solver = pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit_s, gapRel=mip_rel_gap, threads=threads,
                               warmStart=bool(start), options=[f"randomSeed {int(seed) + 1}"])
    prob.solve(solver)
    sol = prob.sol_status
    if sol == pulp.LpSolutionInfeasible or prob.status == pulp.LpStatusInfeasible:
        return Result("infeasible", None, None, None)
    if sol in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        x = [v.value() if v.value() is not None else 0.0 for v in xs]
        obj = model.objective_value(x)
        optimal = sol == pulp.LpSolutionOptimal
        return Result("optimal" if optimal else "time_limit", x, obj, obj if optimal else None)
    if sol == pulp.LpSolutionNoSolutionFound:
        return Result("time_limit", None, None, None)
    return Result("error", None, None, None, f"CBC status {pulp.LpStatus[prob.status]}")


def solve_cvxpy(model, *, time_limit_s=None, mip_rel_gap=1e-9, threads=None, seed=0,
                start: dict[int, float] | None = None, deadline: float | None = None) -> Result:
    try:
        import cvxpy as cp  # optional dependency (the cvxpy extra)
    except ImportError:
        raise SlackSwapError("milp solver 'cvxpy' needs cvxpy: pip install slackswap[cvxpy]") from None
    n = len(model.names)
    ints = [i for i in range(n) if model.integer[i]]
    conts = [i for i in range(n) if not model.integer[i]]
    parts, order = [], conts + ints
    if conts:
        parts.append(cp.Variable(len(conts)))
    if ints:
        parts.append(cp.Variable(len(ints), integer=True))
    inv = np.empty(n, dtype=np.int64)
    inv[np.asarray(order, dtype=np.int64)] = np.arange(n)
    x = (cp.hstack(parts) if len(parts) > 1 else parts[0])[inv]
    A = model.csr()
    lo, hi = np.asarray(model.lo), np.asarray(model.hi)
    cons = []
    fin_hi, fin_lo = np.isfinite(hi), np.isfinite(lo)
    if fin_hi.any():
        cons.append(A[fin_hi] @ x <= hi[fin_hi])
    if fin_lo.any():
        cons.append(A[fin_lo] @ x >= lo[fin_lo])
    lb, ub = np.asarray(model.lb), np.asarray(model.ub)
    if np.isfinite(lb).any():
        k = np.isfinite(lb)
        cons.append(x[np.nonzero(k)[0]] >= lb[k])
    if np.isfinite(ub).any():
        k = np.isfinite(ub)
        cons.append(x[np.nonzero(k)[0]] <= ub[k])
    c = np.zeros(n)
    for v, w in model.obj.items():
        c[v] = w
    prob = cp.Problem(cp.Minimize(c @ x + model.obj_const), cons)
    installed = cp.installed_solvers()
    solver = "HIGHS" if "HIGHS" in installed else "SCIPY" if "SCIPY" in installed else None
    if solver is None:
        raise SlackSwapError("milp solver 'cvxpy' needs cvxpy's HIGHS or SCIPY MILP solver: "
                             "pip install slackswap[cvxpy]")
    opts = {}
    time_limit_s = _left(time_limit_s, deadline)
    if solver == "HIGHS":
        opts = {"mip_rel_gap": float(mip_rel_gap), "random_seed": int(seed),
                "primal_feasibility_tolerance": 1e-9, "mip_feasibility_tolerance": 1e-9}
        if time_limit_s is not None:
            opts["time_limit"] = float(time_limit_s)
    try:
        prob.solve(solver=solver, **opts)
    except cp.error.SolverError as e:
        return Result("error", None, None, None, f"cvxpy {solver}: {e}")
    if prob.status in ("infeasible", "infeasible_inaccurate"):
        return Result("infeasible", None, None, None)
    if any(v.value is None for v in parts):
        return Result("time_limit" if prob.status == "user_limit" else "error", None, None, None, prob.status)
    xv = [float(v) for v in x.value]  # noqa: PD011
    obj = model.objective_value(xv)
    optimal = prob.status == "optimal"
    return Result("optimal" if optimal else "time_limit", xv, obj, obj if optimal else None)


def _constant_infeasible(model) -> Result | None:
    """Status "infeasible" when a constant row of ``model`` fails (``Model.infeasible``)."""
    bad = getattr(model, "infeasible", None)
    if bad:
        return Result("infeasible", None, None, None, "constant row " + bad[0])
    return None


def solve(model, solver: str, **kw) -> Result:
    early = _constant_infeasible(model)
    if early is not None:
        return early
    if solver == "highs":
        kw.pop("write", None)
        return solve_highs(model, **kw)
    kw.pop("presolve", None)          # a HiGHS option; CBC and cvxpy keep their own presolve
    kw.pop("cutoff", None)            # HiGHS only: the others search without it
    if solver == "cbc":
        return solve_cbc(model, **kw)
    if solver == "cvxpy":
        kw.pop("write", None)
        return solve_cvxpy(model, **kw)
    if solver in ("scip", "cpsat"):
        from .ortools_backend import solve_ortools  # optional dependency (torch)

        kw.pop("write", None)
        return solve_ortools(model, solver, **kw)
    raise SlackSwapError(f"milp solver: must be one of {', '.join(BACKENDS)}; got {solver!r}")
