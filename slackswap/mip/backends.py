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

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ..core.errors import SlackSwapError

BACKENDS = ("highs", "cbc", "cvxpy", "scip", "cpsat")


@dataclass
class Result:
    status: str
    x: list[float] | None
    objective: float | None
    bound: float | None
    message: str = ""
    nodes: int | None = None          # branch-and-bound nodes (HiGHS in this process only)
    solutions: list | None = None     # every integer solution found, in order (``_run(pool=True)``)


ISOLATE: bool | None = None
"""Where ``solve_highs`` runs HiGHS: True, in a child process with a hard stop; False, in this
process; None (auto), in a child when a time limit applies to a MIP (not ``relax``, some integer
column) and this process may start one (not a daemonic ``multiprocessing`` worker). The
``isolate`` keyword of ``solve_highs`` overrides it per call."""
def _flat(model) -> dict:
    """The model as plain numpy arrays (rows flattened, CSR order, not yet checked): cheap to pickle."""
    rows = model.rows
    n, m = len(model.names), len(rows)
    lens = np.fromiter((len(r) for r in rows), np.int64, count=m)
    indptr = np.zeros(m + 1, np.int64)
    np.cumsum(lens, out=indptr[1:])
    nnz = int(indptr[-1])
    cost = np.zeros(n)
    if model.obj:
        cost[np.fromiter(model.obj.keys(), np.int64)] = np.fromiter(model.obj.values(), float)
    return {"n": n, "m": m, "cost": cost, "offset": float(model.obj_const),
            "lb": np.asarray(model.lb, float), "ub": np.asarray(model.ub, float),
            "lo": np.asarray(model.lo, float), "hi": np.asarray(model.hi, float), "indptr": indptr,
            "idx": np.fromiter(itertools.chain.from_iterable(r.keys() for r in rows), np.int64, count=nnz),
            "val": np.fromiter(itertools.chain.from_iterable(r.values() for r in rows), float, count=nnz),
            "integer": np.asarray(model.integer, bool).reshape(-1)}


def _highs(f: dict):
    """A ``highspy.Highs`` holding the flattened model ``f``, passed as arrays (``passModel``
    takes numpy arrays as they are: 0.5 s instead of 2 s through ``HighsLp`` for 7.6 M nonzeros;
    column names are not passed, LP/MPS dumps go through pulp, ``Model.to_lp``)."""
    import highspy
    import scipy.sparse as sp

    n, m, idx = f["n"], f["m"], f["idx"]
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = int(idx.max() if idx.max() >= n else idx.min())
        raise SlackSwapError(f"MILP model: a constraint uses column {bad}, outside 0..{n - 1}")
    if not len(f["integer"]) == len(f["lb"]) == len(f["ub"]) == n:
        raise SlackSwapError(f"MILP model: {n} columns but {len(f['lb'])} lower bounds, "
                             f"{len(f['ub'])} upper bounds and {len(f['integer'])} integrality flags")
    inf = highspy.kHighsInf
    clip = lambda a: np.clip(np.asarray(a, float), -inf, inf)  # noqa: E731
    a = sp.csr_matrix((f["val"], idx, f["indptr"]), shape=(m, n)).tocsc()
    h = _new_highs()
    st = h.passModel(n, m, a.nnz, int(highspy.MatrixFormat.kColwise), int(highspy.ObjSense.kMinimize),
                     f["offset"], f["cost"], clip(f["lb"]), clip(f["ub"]), clip(f["lo"]), clip(f["hi"]),
                     a.indptr.astype(np.int32), a.indices.astype(np.int32), a.data, f["integer"].astype(np.int32))
    if st == highspy.HighsStatus.kError:
        raise SlackSwapError("MILP model: HiGHS rejected it (passModel returned an error)")
    return h


def _new_highs():
    """``highspy.Highs()`` with its output off. HiGHS 1.16 prints its banner from the constructor,
    before ``output_flag`` can be set, so the process's stdout (file descriptor 1, where the C++
    code writes) points to the null device while it is built."""
    import os
    import sys

    import highspy

    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):      # no usable descriptor 1: nothing to hide
        h = highspy.Highs()
    else:
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.close(null)
            h = highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
    h.setOptionValue("output_flag", False)
    return h


def solve_highs(model, *, time_limit_s=None, mip_rel_gap=1e-9, threads=None, seed=0,
                start: dict[int, float] | None = None, relax: bool = False, deadline: float | None = None,
                isolate: bool | None = None, presolve: bool = True, cutoff: float | None = None) -> Result:
    """Solve with HiGHS. ``cutoff`` (a MIP objective value, e.g. the warm start's): HiGHS prunes
    every node whose bound reaches it, so it searches only for plans better than that; status
    "infeasible" then means none is below it. ``deadline`` (a ``time.perf_counter()`` value) caps the solver's time limit
    at what is left once the model is passed. ``start`` is NOT passed to HiGHS: HiGHS 1.16 maps a
    partial MIP start into its presolved space wrongly (it reported "feasible in the reduced space:
    objective -3" for a start of objective 1.21 and then stopped as optimal at a wrong plan), so the
    planner keeps the warm start as a fallback incumbent instead (docs/milp.md, section 5).

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
        import multiprocessing as mp

        iso = limited and not relax and any(model.integer) and not mp.current_process().daemon
    opts = {"time_limit_s": time_limit_s, "mip_rel_gap": mip_rel_gap, "threads": threads,
            "seed": seed, "relax": relax, "presolve": presolve, "cutoff": cutoff}
    if iso:
        from .highs_process import solve_isolated

        return solve_isolated(model, opts, deadline)
    h = _highs(_flat(model))
    return _run(h, any(model.integer), deadline=deadline, **opts)


def _run(h, mip: bool, *, time_limit_s, mip_rel_gap, threads, seed, relax, deadline, presolve=True,
         cutoff=None, node_limit=None, pool=False, strict=True, symmetry=True, started=None) -> Result:
    """Set the options on the loaded ``h``, run it and read the result back. ``cutoff``: HiGHS's
    ``objective_bound`` for a MIP (nodes whose bound reaches it are pruned); ``node_limit``: its
    ``mip_max_nodes``; ``pool``: keep every integer solution the MIP search finds (HiGHS's MIP
    solution callback, in the original columns) as ``Result.solutions``, in the order found;
    ``strict``: primal and MIP feasibility tolerances of 1e-9 (the exact model's; HiGHS's own,
    1e-7 and 1e-6, otherwise); ``symmetry=False``: HiGHS's symmetry detection off
    (``mip_detect_symmetry``; the aggregated MILP's, ``bounds._solve_pooled``); ``started``:
    called with ``h`` just before the run (``bounds._solve_both`` cancels it from there).

    HiGHS's worker threads are stopped after the run (``resetGlobalScheduler``): a process
    forked later (e.g. the workers of ``ProcessPoolExecutor``) would otherwise inherit a
    scheduler whose threads it does not have, and its first HiGHS run would wait forever."""
    import highspy

    time_limit_s = _left(time_limit_s, deadline)
    if time_limit_s is not None:
        h.setOptionValue("time_limit", float(time_limit_s))
    h.setOptionValue("mip_rel_gap", float(mip_rel_gap))
    h.setOptionValue("mip_abs_gap", 0.0)
    h.setOptionValue("random_seed", int(seed))
    if strict:
        h.setOptionValue("primal_feasibility_tolerance", 1e-9)
        h.setOptionValue("mip_feasibility_tolerance", 1e-9)
    if not presolve:
        h.setOptionValue("presolve", "off")
    if threads is not None:
        h.setOptionValue("threads", int(threads))
    if relax:
        h.setOptionValue("solve_relaxation", True)
    elif mip and cutoff is not None:
        h.setOptionValue("objective_bound", float(cutoff))
    if node_limit is not None:
        h.setOptionValue("mip_max_nodes", int(node_limit))
    if not symmetry:
        h.setOptionValue("mip_detect_symmetry", False)
    pooled = pool and mip and not relax
    found = []
    if pooled:
        h.cbMipSolution.subscribe(lambda e: found.append(np.array(e.data_out.mip_solution, float)))
    if started is not None:
        started(h)
    try:
        h.run()
    finally:
        h.resetGlobalScheduler(True)
    st = h.getModelStatus()
    info = h.getInfo()
    S = highspy.HighsModelStatus
    has_x = info.primal_solution_status == 2
    x = list(h.getSolution().col_value) if has_x else None
    obj = info.objective_function_value if has_x else None
    bound = info.mip_dual_bound if not relax and mip else obj
    if bound is not None and not math.isfinite(bound):
        bound = None
    more = {"nodes": int(info.mip_node_count) if mip and not relax else None,
            "solutions": found if pooled else None}
    if st == S.kOptimal:
        return Result("optimal", x, obj, obj if relax else bound, **more)
    if st in (S.kInfeasible,):
        return Result("infeasible", None, None, None, **more)
    if st in (S.kTimeLimit, S.kIterationLimit, S.kSolutionLimit, S.kInterrupt):
        return Result("time_limit", x, obj, bound, **more)
    return Result("error", x, obj, bound, f"HiGHS status {h.modelStatusToString(st)}", **more)


def _left(time_limit_s, deadline):
    """The smaller of ``time_limit_s`` and the time left until ``deadline`` (at least 1 ms)."""
    if deadline is None:
        return time_limit_s
    import time

    left = max(1e-3, deadline - time.perf_counter())
    return left if time_limit_s is None else min(float(time_limit_s), left)


def _pulp_name(name: str, i: int) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name) + f"_{i}"


def solve_cbc(model, *, time_limit_s=None, mip_rel_gap=1e-9, threads=None, seed=0,
              start: dict[int, float] | None = None, write: str | None = None, deadline: float | None = None) -> Result:
    try:
        import pulp
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
        import cvxpy as cp
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
        from .ortools_backend import solve_ortools

        kw.pop("write", None)
        return solve_ortools(model, solver, **kw)
    raise SlackSwapError(f"milp solver: must be one of {', '.join(BACKENDS)}; got {solver!r}")
