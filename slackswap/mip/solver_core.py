"""What every MILP backend shares: ``Result`` (status, solution, objective, dual bound), the
HiGHS model loader (``_flat``, ``_highs``) and runner (``_run``), and ``_left`` (the time left).
``backends`` (the solvers by name), ``highs_process`` (HiGHS in a child process with a hard
stop) and ``ortools_backend`` build on it."""

from __future__ import annotations

import itertools
import math
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

from ..core.errors import SlackSwapError


@dataclass
class Result:
    status: str
    x: list[float] | None
    objective: float | None
    bound: float | None
    message: str = ""
    nodes: int | None = None          # branch-and-bound nodes (HiGHS in this process only)
    solutions: list | None = None     # every integer solution found, in order (``_run(pool=True)``)


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
    import highspy  # lazy: start-up cost (highspy)
    import scipy.sparse as sp  # lazy: start-up cost (scipy)

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

    import highspy  # lazy: start-up cost (highspy)

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


def _run(h, mip: bool, *, time_limit_s, mip_rel_gap, threads, seed, relax, deadline, presolve=True,
         cutoff=None, node_limit=None, pool=False, strict=True, symmetry=True, started=None) -> Result:
    """Set the options on the loaded ``h``, run it and read the result back. ``cutoff``: HiGHS's
    ``objective_bound`` for a MIP (nodes whose bound reaches it are pruned); ``node_limit``: its
    ``mip_max_nodes``; ``pool``: keep every integer solution the MIP search finds (HiGHS's MIP
    solution callback, in the original columns) as ``Result.solutions``, in the order found;
    ``strict``: primal and MIP feasibility tolerances of 1e-9 (the exact model's; HiGHS's own,
    1e-7 and 1e-6, otherwise); ``symmetry=False``: HiGHS's symmetry detection off
    (``mip_detect_symmetry``; the aggregated MILP's, ``mip.aggregate.solve.solve_pooled``); ``started``:
    called with ``h`` just before the run (``mip.aggregate.race.solve_both`` cancels it from there).

    HiGHS's worker threads are stopped after the run (``resetGlobalScheduler``): a process
    forked later (e.g. the workers of ``ProcessPoolExecutor``) would otherwise inherit a
    scheduler whose threads it does not have, and its first HiGHS run would wait forever."""
    import highspy  # lazy: start-up cost (highspy)

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

    left = max(1e-3, deadline - time.perf_counter())
    return left if time_limit_s is None else min(float(time_limit_s), left)
