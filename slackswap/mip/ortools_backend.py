"""OR-Tools backends for the backend-neutral ``Model`` (docs/milp.md, "Backends and LP files"); imported lazily,
``pip install slackswap[ortools]``.

* ``"scip"``: SCIP (branch-and-cut, bundled with OR-Tools), the model as it is; SCIP's dual bound.
* ``"cpsat"``: CP-SAT (clause learning with LP relaxations), which has integer variables only:
  every continuous column ``x`` (times, lifetime helpers) becomes an integer column ``y`` with
  ``x = y / grid``. Times then lie on a grid of ``1 / grid`` time units (the model's unit is the
  ideal step), so its optimum is that of a **restricted** model: a plan and an upper value, no
  certified bound. The result's status is "feasible" (the planner re-solves the plan's times
  exactly and returns it as FEASIBLE). Without the grid, OR-Tools hands CP-SAT the continuous
  columns as integers: on ``tiny`` with one layer at 0.7 it returned "optimal" at exactly four
  ideal steps (45.58 us) where the optimum is 12.14 us.
"""

from __future__ import annotations

import math

from ..core.errors import SlackSwapError
from .solver_core import Result, _left

ENGINES = {"scip": "SCIP", "cpsat": "CP_SAT"}
CPSAT_GRID = 1e4
"""Grid of CP-SAT's times: 1e-4 of the ideal step."""


def solve_ortools(model, engine: str, *, time_limit_s=None, mip_rel_gap=1e-9, threads=None, seed=0,
                  start: dict[int, float] | None = None, deadline: float | None = None,
                  grid: float = CPSAT_GRID, node_limit: int | None = None, started=None,
                  scip_params: str = "") -> Result:
    """Solve ``model`` with OR-Tools' ``engine`` ("scip" or "cpsat"; module docstring).
    ``node_limit`` (SCIP only: ``limits/nodes``, a work limit) stops the search after that many
    branch-and-bound nodes; the result then has status "time_limit" with SCIP's dual bound (also
    when SCIP found no solution by then), and ``nodes`` holds the nodes SCIP processed.
    ``started``: called with the OR-Tools solver just before the solve (``mip.aggregate.race.solve_both``
    interrupts it from there). ``scip_params``: more SCIP settings, one ``name = value`` per line,
    after (and over) these (``benchmarks/bench_milp.py log --scip-param``)."""
    try:
        from ortools.linear_solver import pywraplp  # optional dependency (the ortools extra)
    except ImportError:
        raise SlackSwapError(f"milp solver {engine!r} needs ortools: pip install slackswap[ortools]") from None
    if engine not in ENGINES:
        raise SlackSwapError(f"milp solver: OR-Tools engine must be one of {', '.join(ENGINES)}; got {engine!r}")
    s = pywraplp.Solver.CreateSolver(ENGINES[engine])
    if s is None:
        raise SlackSwapError(f"milp solver {engine!r}: this OR-Tools build has no {ENGINES[engine]}")
    inf = s.infinity()
    cpsat = engine == "cpsat"

    def fin(v):
        return inf if v == math.inf else -inf if v == -math.inf else v

    scale = [1.0 if (model.integer[i] or not cpsat) else 1.0 / grid for i in range(len(model.names))]
    xs = []
    for i, (lo, hi, isint) in enumerate(zip(model.lb, model.ub, model.integer, strict=True)):
        if isint or cpsat:
            k = 1.0 / scale[i]
            xs.append(s.IntVar(fin(math.ceil(lo * k - 1e-9)) if lo > -math.inf else -inf,
                               fin(math.floor(hi * k + 1e-9)) if hi < math.inf else inf, ""))
        else:
            xs.append(s.NumVar(fin(lo), fin(hi), ""))
    for row, lo, hi in zip(model.rows, model.lo, model.hi, strict=True):
        ct = s.RowConstraint(fin(lo), fin(hi), "")
        for v, c in row.items():
            ct.SetCoefficient(xs[v], c * scale[v])
    obj = s.Objective()
    for v, c in model.obj.items():
        obj.SetCoefficient(xs[v], c * scale[v])
    obj.SetOffset(model.obj_const)
    obj.SetMinimization()
    limit = _left(time_limit_s, deadline)
    if limit is not None:
        s.SetTimeLimit(max(1, int(limit * 1000)))
    if cpsat:
        # catch_sigint_signal false: CP-SAT would otherwise install a SIGINT handler that outlives
        # the solve and ends the process on Ctrl-C instead of raising KeyboardInterrupt
        s.SetSolverSpecificParametersAsString(
            f"num_workers: {int(threads or 2)} random_seed: {int(seed)} relative_gap_limit: {float(mip_rel_gap)} "
            "catch_sigint_signal: false")
    elif not s.SetSolverSpecificParametersAsString(
            f"numerics/feastol = 1e-9\nrandomization/randomseedshift = {int(seed)}\nlimits/gap = {float(mip_rel_gap)}"
            + (f"\nlimits/nodes = {int(node_limit)}" if node_limit is not None else "")
            + (f"\n{scip_params}" if scip_params else "")):
        raise SlackSwapError(f"SCIP refused its settings {scip_params!r}: each line 'name = value', with a "
                             "parameter name of SCIP's (for example 'heuristics/rens/freq = -1')")
    if start and not cpsat:
        s.SetHint([xs[i] for i in start], [float(v) for v in start.values()])
    if started is not None:
        started(s)
    st = s.Solve()
    if st == pywraplp.Solver.INFEASIBLE:
        return Result("infeasible", None, None, None)
    nodes = None if cpsat else int(s.nodes())
    if st not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        if st == pywraplp.Solver.NOT_SOLVED:      # stopped by a limit before a solution: SCIP's bound
            best = None if cpsat else s.Objective().BestBound()
            return Result("time_limit", None, None, best if best is not None and math.isfinite(best) else None,
                          nodes=nodes)
        return Result("error", None, None, None, f"OR-Tools {ENGINES[engine]} status {st}")
    x = [xs[i].solution_value() * scale[i] for i in range(len(xs))]
    val = model.objective_value(x)
    if cpsat:
        return Result("feasible", x, val, None, f"CP-SAT on a time grid of 1/{grid:g} ideal step: no bound")
    optimal = st == pywraplp.Solver.OPTIMAL
    bound = s.Objective().BestBound() if optimal or math.isfinite(s.Objective().BestBound()) else None
    return Result("optimal" if optimal else "time_limit", x, val, val if optimal else bound, nodes=nodes)
