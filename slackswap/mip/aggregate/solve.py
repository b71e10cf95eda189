"""Solving the aggregated relaxation (``slackswap.mip.aggregate``) with the solver plumbing of
``mip.backends``: HiGHS in this process (``solve_pooled``, its solution pool kept), SCIP through
OR-Tools (``solve_scip``), the LP or a MILP with fixed columns through ``scipy.optimize.milp``
(``scipy_milp``), and what a result certifies (``dual``, ``extra_seconds``). Running two solvers
at once and stopping them: ``race.py``; the bounds built on these: ``slackswap.bounds``."""

from __future__ import annotations

import math
import time

import numpy as np

from .. import backends  # backends._run looked up at call time (tests replace it)
from ..backends import _flat, _highs

#: what ``aggregate_bound`` takes off a solver's bound, in units of the forward time: HiGHS's
#: primal feasibility tolerance for the LP, its integrality tolerance for the MILP
LP_SHAVE, MIP_SHAVE = 1e-7, 1e-6

STATUS = {"optimal": 0, "time_limit": 1, "infeasible": 2}    # scipy.optimize.milp's codes; else 4


def dual(res, mip_rel_gap):
    """A MILP result's certified objective bound (before the shave): the solver's dual bound, or
    when it proved its optimum within ``mip_rel_gap`` without one, that optimum less the gap."""
    val = res.mip_dual_bound
    if res.status == 0 and res.fun is not None:      # proven optimal (within mip_rel_gap)
        val = res.fun - mip_rel_gap * abs(res.fun) if val is None else val
    return val


def extra_seconds(val, agg, integral: bool) -> float:
    """Seconds over the ideal step certified by a solver's bound ``val`` on ``agg``'s model (with
    the objective's constant), shaved by the solver's tolerance (``aggregate_bound``); 0.0 for
    no bound."""
    if val is None or not math.isfinite(val):
        return 0.0
    shave = MIP_SHAVE if integral else LP_SHAVE
    return max(0.0, (float(val) - shave) * agg.t0 * (1 - 1e-9))


def scipy_milp(mdl, options: dict, lb=None, ub=None):
    """``scipy.optimize.milp`` (HiGHS) on the model ``mdl`` with its integrality and the column
    bounds ``lb`` / ``ub`` (the model's by default); its result leaves ``mdl.obj_const`` out."""
    from scipy.optimize import Bounds, LinearConstraint, milp  # lazy: start-up cost (scipy)

    obj = np.zeros(len(mdl.names))
    for v, cf in mdl.obj.items():
        obj[v] = cf
    return milp(obj, constraints=LinearConstraint(mdl.csr(), mdl.lo, mdl.hi), integrality=np.asarray(mdl.integer, int),
                bounds=Bounds(mdl.lb if lb is None else lb, mdl.ub if ub is None else ub), options=options)


def solve_scip(mdl, time_limit_s, mip_rel_gap, node_limit, started=None):
    """The aggregated MILP ``mdl`` solved by SCIP (OR-Tools, ``mip.ortools_backend``: feasibility
    tolerance 1e-9, one thread, deterministic), as ``solve_pooled``'s result: ``node_limit`` is
    SCIP's ``limits/nodes`` (a work limit), ``mip_dual_bound`` SCIP's dual bound (with the
    objective's constant, as HiGHS reports it; None when SCIP proves its optimum within
    ``mip_rel_gap``: ``aggregate_bound`` then takes the optimum less that gap) and ``solutions``
    its last incumbent only."""

    from scipy.optimize import OptimizeResult  # lazy: start-up cost (scipy)

    # without OR-Tools, solve_ortools says "pip install slackswap[ortools]"
    from ..ortools_backend import solve_ortools  # optional dependency (torch)

    # the time limit counts from here: building OR-Tools' model takes seconds on the presets
    deadline = None if time_limit_s is None else time.perf_counter() + float(time_limit_s)
    r = solve_ortools(mdl, "scip", mip_rel_gap=mip_rel_gap, node_limit=node_limit, deadline=deadline,
                      started=started)
    x = None if r.x is None else np.asarray(r.x, float)
    # proven within mip_rel_gap: no dual bound, as on HiGHS's path (``dual`` takes the optimum less the gap)
    bound = None if r.status == "optimal" or r.bound is None else float(r.bound)
    return OptimizeResult(status=STATUS.get(r.status, 4), message=r.message or r.status, x=x,
                          fun=None if x is None else float(r.objective), mip_dual_bound=bound,
                          mip_node_count=r.nodes, solutions=[] if x is None else [x])


def solve_pooled(mdl, time_limit_s, mip_rel_gap, node_limit, symmetry=True, started=None, cutoff=None):
    """The aggregated MILP ``mdl`` solved by HiGHS in this process (``mip.backends._run``, with
    HiGHS's own feasibility tolerances, as ``scipy.optimize.milp`` uses them: the bound is shaved
    for them; with the exact model's 1e-9 the tight MILP at ``tiny`` 4 layers 0.4 stopped at its
    2,000 nodes short of the optimum it proves in 942 without), as a
    ``scipy.optimize.OptimizeResult`` with the fields of ``scipy.optimize.milp``'s (``status``,
    ``x``, ``fun``, ``mip_dual_bound``, ``mip_node_count``) and ``solutions``: every integer
    solution the search found, in the order found. Each is a set of decisions that satisfies the
    relaxation; the planner judges them all by simulation, since the one with the least relaxed
    time need not simulate fastest (docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps", "The solution pool").
    ``symmetry``: HiGHS's symmetry detection; ``aggregate_bound`` turns it off without the
    release rows (the full-size presets): on llama-7b at 0.3 the search then processes 3,631
    nodes in 60 s against 316, and a restart lifts the bound; with them (small models) it stays
    on: without it `tiny` 4 layers at 0.4 is no longer proven (docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps").
    ``cutoff``: HiGHS's ``objective_bound`` (``probe_bound``)."""
    from scipy.optimize import OptimizeResult  # lazy: start-up cost (scipy)


    r = backends._run(_highs(_flat(mdl)), True, time_limit_s=time_limit_s, mip_rel_gap=mip_rel_gap, threads=None,
             seed=0, relax=False, deadline=None, node_limit=node_limit, pool=True, strict=False,
             symmetry=symmetry, started=started, cutoff=cutoff)
    return OptimizeResult(status=STATUS.get(r.status, 4), message=r.message or r.status,
                          x=None if r.x is None else np.asarray(r.x, float),
                          fun=None if r.x is None else r.objective, mip_dual_bound=r.bound,
                          mip_node_count=r.nodes, solutions=r.solutions or [])


