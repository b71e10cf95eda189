"""Certified lower bounds on the step time of ANY plan, and the gap of a plan to them.

``lower_bound(problem) -> (seconds, how)``:

1. **ideal** (always): every plan runs every forward and backward op once and the optimizer, on one
   compute stream: ``step >= sum fwd_s + sum bwd_s + optimizer_s`` (docs/timeline.md 1).
2. **PCIe capacity** (always, any size; ``capacity_bound``): at the start of every forward step and
   of the first backward step, the accounted memory (docs/timeline.md 4) must fit the budget. Under
   keep-all it is ``A(s)``; a plan can only lower it by recomputing tensors whose forward use is
   over (each re-run op ``p`` costs its forward time ``c_p`` at least once, more often with hold
   points, and frees at most the bytes
   ``B_p`` of its recomputable outputs) or by swapped sources whose D2H copy has ended, and the D2H
   engine moves at most ``bw * t`` bytes by time ``t``. So the extra time ``E = step - ideal`` (stall
   plus recompute) satisfies, for every such step ``s`` reached at ``T_s + sigma`` (forward time
   before it plus stall, plus recompute time for the backward step):

       E >= min  sigma + sum_p c_p r_p   s.t.  sum_p B_p r_p + bw (T_s + sigma [+ sum_p c_p r_p])
                                                 >= A(s) - budget,   0 <= r_p <= 1, sigma >= 0,

   a fractional knapsack solved exactly by sorting (``T_s - T_j`` with ``T_j`` replaced by the end
   ``E_j = T_{j+1} + sigma_j`` of op ``j``, after which the outputs of ops ``>= j`` are copied).

   **2b. Aggregated relaxation** (``slackswap/mip/aggregate/``, every size, about a
   second on the full-size models): the same capacities at every forward *and backward* step at
   once, with one variable per decision (re-run op, RECOMPUTE, SWAP) shared by all steps, the
   recompute that can run before the first backward step (the closure of what the last op saves,
   not all recompute), and the round trip of every swapped tensor (copied out and back before its
   first backward use), and with hold points the tensors a multi-level plan frees between two of
   their uses. Every plan maps to a feasible point of equal or lower objective, so its
   LP optimum is a bound (``aggregate_bound``); with integral decisions it is a small MILP whose
   solver dual bound is one too (the MILP planner uses it above ``max_exact_tensors``). The rows
   and why each holds are in that module's docstring and docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps".

3. **A pipeline stage** (``problem.parallel`` with pp > 1 or more than one micro-batch:
   ``timeline.pipeline.pipeline_of``): ``pipeline_bound`` (``bounds/pipeline.py``): the
   pipeline's ideal step and an LP over shared keep / swap / recompute fractions with the
   compute stream's work, both copy engines' and the memory of the micro-batches in flight.
   ``capacity_bound`` returns it too; ``aggregate_bound`` proves nothing there (0.0: its
   relaxation describes one micro-batch's timeline).

``gap(problem, result) = (step - bound) / step`` (the MIP-gap convention, 0 = proven optimal).
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..core.errors import BudgetError, ConfigError, ParameterError, SlackSwapError
from ..core.limits import parse_time_limit
from ..core.plan import Decision
from ..mip.aggregate import bandwidth, build, needs
from ..mip.aggregate.race import (
    BackgroundBound as BackgroundBound,  # the bound API: beyond the exact model
)
from ..mip.aggregate.race import solve_both
from ..mip.aggregate.solve import LP_SHAVE as LP_SHAVE
from ..mip.aggregate.solve import MIP_SHAVE as MIP_SHAVE
from ..mip.aggregate.solve import dual, extra_seconds, scipy_milp, solve_pooled, solve_scip
from ..mip.backends import _flat, _highs
from ..timeline.pipeline import pipeline_of
from .pipeline import pipeline_bound


def lower_bound(problem, integral_time_limit_s: float | None = None) -> tuple[float, str]:
    """A certified lower bound (seconds) on ``simulate(problem, plan).step_time_s`` for every plan
    (any issue points, D2H order and hold points): the better of the ideal step and the
    PCIe-capacity bound. ``integral_time_limit_s`` (opt-in, slower): also the dual bound of the
    aggregated relaxation with integral decisions, after at most that many seconds. On a problem
    with checkpointed regions (``Problem.with_regions``): the ideal step only, the one bound
    proven there (docs/regions.md, "What is proven").

    On a pipeline stage (``timeline.pipeline.pipeline_of``) the bound is ``pipeline_bound``'s
    (``bounds/pipeline.py``; with regions, the stage's ideal step) and ``integral_time_limit_s``
    is not used.

    The LP relaxation of the exact MILP is not one of them: it describes plans without hold
    points only, and a multi-level plan can be faster
    (``test_the_exact_milps_relaxation_does_not_bound_multi_level_plans``)."""
    integral_time_limit_s = parse_time_limit(integral_time_limit_s, "lower_bound(integral_time_limit_s)",
                                             allow_none=True)
    pipe = pipeline_of(problem)
    if getattr(problem, "regions", None) is not None:   # a pipeline stage's ideal includes its waits
        how = "ideal step (every op once, no stall" + (", the pipeline's waits)" if pipe is not None else ")")
        return float(problem.ideal_step_s), how + ("; under checkpointed regions no other bound is "
                                                   "proven (docs/regions.md, \"What is proven\")")
    if pipe is not None:        # a pipeline stage: its own bound (``bounds.pipeline``)
        return pipeline_bound(problem)
    best, how = float(problem.ideal_step_s), "ideal step (every op once, no stall)"
    cap = capacity_bound(problem)
    if cap > best:
        best, how = cap, "PCIe-capacity bound (recompute or copy out what exceeds the budget)"
    if integral_time_limit_s is not None:
        agg = problem.ideal_step_s + aggregate_bound(problem, integral=True, time_limit_s=integral_time_limit_s)[0]
        if agg > best:
            best, how = agg, "aggregated relaxation, integral decisions (solver dual bound)"
    return best, how


def _no_regions(problem, who: str) -> None:
    """Refuse a problem with checkpointed regions: the bound's argument is about the default rules
    (docs/regions.md, "What is proven")."""
    if getattr(problem, "regions", None) is not None:
        raise ParameterError(f"{who}(problem): not proven for a problem with checkpointed regions "
                             "(lower_bound gives the ideal step for it); problem.without_regions() is "
                             "the problem under the default rules")


def gap(problem, result, bound: float | None = None) -> float:
    """Relative gap of a ``SimResult`` to the lower bound: ``(step - lb) / step`` (inf if it does
    not fit)."""
    if not result.fits or not math.isfinite(result.step_time_s):
        return math.inf
    lb = lower_bound(problem)[0] if bound is None else bound
    return max(0.0, (result.step_time_s - lb) / result.step_time_s) if result.step_time_s > 0 else 0.0


def capacity_bound(problem) -> float:
    """The PCIe-capacity lower bound on the step time (seconds); see the module docstring."""
    _no_regions(problem, "capacity_bound")

    pipe = pipeline_of(problem)
    if pipe is not None:        # a pipeline stage: its own bound (``bounds.pipeline``)
        return pipeline_bound(problem)[0]
    budget = float(problem.budget_bytes)
    g, c = problem.graph, problem.costs
    n = len(g.ops)
    if not math.isfinite(budget) or n == 0:
        return float(problem.ideal_step_s)
    planning = [g.tensors[t] for t in problem.planning_ids]
    need_f, need_b = needs(problem)
    need = np.append(need_f, need_b[n - 1])      # forward steps and the first backward step
    bw = bandwidth(planning, c)
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
    return float(problem.ideal_step_s) + max(extra, aggregate_bound(problem)[0])


def aggregate_bound(problem, integral: bool = False, time_limit_s: float | None = None,
                    mip_rel_gap: float = 1e-6, node_limit: int | None = None, releases: bool = False,
                    tight: bool = False, solver: str = "highs", chains: int = 0):
    """Least extra time (seconds over the ideal step) of the aggregated relaxation
    (``slackswap/mip/aggregate/``; solved by ``mip/aggregate/solve.py``), by HiGHS: its LP optimum (``scipy.optimize.milp``),
    or with ``integral`` (highspy, ``solve_pooled``: its result also holds every integer
    solution found) the dual bound of the MILP reached after ``node_limit``
    branch-and-bound nodes (a work limit: the same result on any machine) or ``time_limit_s``
    seconds, whichever comes first; ``releases`` adds the per-copy release rows (``build``), for
    a few dozen planning tensors, and ``tight`` with them the ``rho_by``, ``o`` and ``seg`` rows
    (without ``releases`` HiGHS's symmetry detection is off: ``solve_pooled``), and ``chains``
    with those the copy-back rows along chains of up to that many RECOMPUTE tensors, as deep as
    their rows fit in ``aggregate.CHAIN_NONZEROS`` (``v_chain``, ``v_chains``: ``build``). ``solver``
    (with ``integral``): ``"highs"``; ``"scip"``, SCIP through OR-Tools (``solve_scip``;
    ``pip install slackswap[ortools]``), whose dual bound rises faster on the full-size presets'
    MILP at low budgets (llama-7b at 0.2: 1798.69 ms after 20 nodes against HiGHS's 1794.04 ms;
    docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps"); or ``"highs+scip"``, both at once, the larger bound
    (``solve_both``). Returns
    ``(seconds, Aggregate or None, scipy result or None)``; 0.0 when nothing is proven (result
    None with a constant row that fails, ``Aggregate.model.infeasible``: no plan fits). Shaved by
    the solver's feasibility tolerance, in units of the forward time: the LP's primal one
    (``LP_SHAVE``, 1e-7), the MILP's integrality one (``MIP_SHAVE``, HiGHS's
    ``mip_feasibility_tolerance``, 1e-6; a MILP bound above the optimum by 1.05e-7 was seen,
    ``test_the_integral_bound_is_shaved_by_the_mip_tolerance``)."""

    _no_regions(problem, "aggregate_bound")
    if solver not in AGGREGATE_SOLVERS:
        raise ConfigError(f"aggregate_bound(solver): one of {', '.join(AGGREGATE_SOLVERS)}; got {solver!r}")
    if isinstance(chains, bool) or not isinstance(chains, int) or chains < 0:
        raise ConfigError("aggregate_bound(chains): the longest chain of RECOMPUTE tensors for the chain rows, "
                          f"an int >= 0 (0: none); got {chains!r}")
    if chains and not (releases and tight):
        raise ConfigError(f"aggregate_bound(chains={chains}): the chain rows need releases=True and tight=True")
    if pipeline_of(problem) is not None:     # the relaxation describes one micro-batch's timeline
        return 0.0, None, None
    agg = build(problem, integral=integral, releases=releases, tight=tight, chains=chains)
    if agg is None:
        return 0.0, None, None
    mdl = agg.model
    if mdl.infeasible:
        return 0.0, agg, None
    if integral and solver == "highs+scip":
        res = solve_both(mdl, time_limit_s, mip_rel_gap, node_limit, releases)
        val = res.mip_dual_bound
    elif integral:
        res = solve_scip(mdl, time_limit_s, mip_rel_gap, node_limit) if solver == "scip" else \
            solve_pooled(mdl, time_limit_s, mip_rel_gap, node_limit, symmetry=releases)
        val = dual(res, mip_rel_gap)
    else:
        opts = {"mip_rel_gap": mip_rel_gap}
        if time_limit_s is not None:
            opts["time_limit"] = float(time_limit_s)
        res = scipy_milp(mdl, opts)
        val = res.fun if res.status == 0 else None
    if val is not None and math.isfinite(val) and not integral:
        val = float(val) + mdl.obj_const    # scipy's milp leaves the objective's constant out; HiGHS and SCIP count it
    return extra_seconds(val, agg, integral), agg, res


def aggregate_point(problem, agg, decisions) -> dict[int, float] | None:
    """The point of ``agg``'s model (``mip.aggregate.build``) with its decisions fixed to
    ``decisions`` (tensor id -> ``Decision``; every planning tensor) and every other column at
    its least objective: that MILP (its ``pend`` binaries free) solved by HiGHS, integers
    rounded, as column -> value; None when HiGHS finds none. Every plan maps to a feasible point
    of the model (``mip/aggregate/``), so this is a solution of the aggregated MILP whose
    objective is at most the plan's extra time (a first solution for a solver:
    ``benchmarks/bench_milp.py log --start``)."""


    mdl = agg.model
    lb, ub = np.array(mdl.lb, float), np.array(mdl.ub, float)
    for t in problem.planning_ids:
        for col, d in ((agg.rec.get(t), Decision.RECOMPUTE), (agg.swap.get(t), Decision.SWAP)):
            if col is not None:
                lb[col] = ub[col] = float(decisions[t] is d)
    # with the decisions fixed, HiGHS's presolve can end in "Solve error" (status 4): then without it
    for presolve in (True, False):
        res = scipy_milp(mdl, {"mip_rel_gap": 1e-9, "presolve": presolve}, lb, ub)
        if res.status != 4:
            break
    if res.x is None:
        return None
    x = np.where(np.asarray(mdl.integer, bool), np.round(res.x), res.x)
    return {i: float(v) for i, v in enumerate(x)}


def binding_rows(problem, releases: bool = False, tol: float = 1e-7):
    """Where the aggregated relaxation's LP bound comes from: ``(extra, rows)``, its LP optimum
    (seconds over the ideal step, unshaved: a diagnostic, not a certified bound; that is
    ``aggregate_bound``) and the rows whose dual value exceeds ``tol`` in magnitude, as
    ``[(row name, |dual|)]`` in the model's row order (None, [] when no step exceeds the budget
    under keep-all). By LP duality the rows with a zero dual can be dropped without changing the
    optimum, so these rows alone carry the bound; when it is above zero a memory row
    (``mem_fwd`` / ``mem_bwd``, or ``mem_rel`` with ``releases``) is among them, since without
    the memory rows every decision at zero is optimal. The families are named in
    ``slackswap/mip/aggregate/`` and docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps"
    (``python benchmarks/bench_milp.py binding``)."""

    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol >= 0:
        raise ConfigError(f"binding_rows(tol): a number >= 0; got {tol!r}")
    agg = build(problem, integral=False, releases=releases)
    if agg is None:
        return None, []
    mdl = agg.model
    if mdl.infeasible:
        raise BudgetError(f"the aggregated relaxation is infeasible (row {mdl.infeasible[0]}): no plan fits the budget")
    h = _highs(_flat(mdl))
    try:
        h.run()
    finally:
        h.resetGlobalScheduler(True)
    import highspy  # lazy: start-up cost (highspy)

    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise SlackSwapError(f"binding_rows: HiGHS ended the LP with {h.modelStatusToString(h.getModelStatus())}")
    duals = h.getSolution().row_dual
    rows = [(name, abs(float(d))) for name, d in zip(mdl.row_names, duals, strict=True) if abs(d) > tol]
    extra = h.getInfo().objective_function_value * agg.t0        # with the objective's constant
    return float(extra), rows


#: the solvers of the aggregated MILP (``aggregate_bound(solver=...)``, the milp planner's
#: ``aggregate_solver``); "highs+scip": both at once (``solve_both``)
AGGREGATE_SOLVERS = ("highs", "scip", "highs+scip")


#: ``probe_bound``: a probe is not started with less than this many seconds left (and the milp
#: planner probes only where a probe may take at least this long: under a 10 s limit, probes
#: of about 0.4 s each proved nothing on the full-size presets, 2026-12-03)
PROBE_MIN_S = 1.0


def probe_bound(problem, agg, low_s: float, high_s: float, time_limit_s: float, probe_s: float,
                rel_gap: float = 1e-6, stop_at_failure: bool = True):
    """Raise a certified bound on the step time by **cutoff probes** of the aggregated MILP
    ``agg`` (``mip.aggregate.build(problem, integral=True)``; docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps", "Cutoff
    probes"). A probe at step time ``c`` solves that MILP with HiGHS told that only solutions
    below ``c`` count (its ``objective_bound``): HiGHS then prunes every node whose bound reaches
    ``c`` and fixes, from the first LP, every binary whose reduced cost would lift the bound past
    it. Where it reports the MILP infeasible, no solution, so no plan (each maps to a solution of
    no greater objective), is faster than ``c``: ``c`` less the MIP shave is a certified bound.
    Below the optimum by a few tenths of a percent that proof often takes one node (llama-7b at
    0.3: the cutoff at 1736.87 ms is proven infeasible at the root in 0.6 s, while without a
    cutoff HiGHS's bound is 1732.67 ms after 60 s).

    Bisection between ``low_s`` (a certified bound, seconds) and ``high_s`` (a plan's simulated
    step time): each probe at the middle, with at most ``probe_s`` seconds, while the interval
    is wider than ``rel_gap`` of ``high_s`` and ``time_limit_s`` (counted from the call) has
    ``PROBE_MIN_S`` left. A proof raises the low end; a probe that finds a solution below its
    cutoff lowers the high end to that solution's objective (nothing above it can be proven) and
    ends the bisection when it also proves that solution optimal; a probe stopped by its limit
    lowers the high end to its cutoff and, with ``stop_at_failure``, ends the bisection (a
    probe that fails costs its whole limit; one that succeeds seldom more than a second).
    Every probe's dual bound holds too, up to its cutoff and never above it: a search that
    prunes at the cutoff proves nothing beyond it. A probe that ends "optimal" at a solution
    at or above its cutoff (HiGHS reports such, with that solution's objective as its dual
    bound) proves the cutoff, no more.

    Returns ``(bound_s, results, proofs, probes)``: the certified bound (at least ``low_s``),
    the probes' results that hold integer solutions (``solve_pooled``'s; candidates for a plan),
    and how many probes proved their cutoff and how many ran."""

    end = time.perf_counter() + float(time_limit_s)
    lo, hi = float(low_s), float(high_s)
    found, proofs, probes = [], 0, 0

    def step(val) -> float:      # a certified step time from a bound ``val`` of the model
        return problem.ideal_step_s + extra_seconds(val, agg, True)

    while hi - lo > rel_gap * hi:
        left = end - time.perf_counter()
        if left < PROBE_MIN_S:
            break
        mid = 0.5 * (lo + hi)
        cut = (mid - problem.ideal_step_s) / agg.t0
        res = solve_pooled(agg.model, min(float(probe_s), left), 1e-6, None, symmetry=False, cutoff=cut)
        probes += 1
        if res.x is not None or res.solutions:
            found.append(res)
        proven, val = probe_reading(res, cut)
        if proven:
            proofs += 1
            lo = max(lo, step(cut))
            continue
        if val is not None:
            lo = max(lo, step(val))
        if res.x is not None and res.fun is not None and float(res.fun) < cut:     # a solution below it
            hi = min(hi, problem.ideal_step_s + float(res.fun) * agg.t0)
        if res.status == 0:         # its optimum is below the cutoff: nothing above it holds
            break
        hi = min(hi, mid)
        if stop_at_failure:
            break
    return lo, found, proofs, probes


def probe_reading(res, cut: float) -> tuple[bool, float | None]:
    """What a probe proves (``probe_bound``; ``benchmarks/bench_milp.py log --probe``): from the
    result ``res`` of the aggregated MILP solved under the cutoff ``cut`` (``status``, ``x``,
    ``fun``, ``mip_dual_bound`` as ``solve_pooled`` gives them), ``(proven, val)``: whether no
    solution lies below ``cut``, and the certified bound in the model's units (``cut`` when
    proven; else the dual bound up to ``cut``, None without one). HiGHS may end "optimal" at a
    solution at or above the cutoff, found on the way, with that objective as its dual bound
    (tiny 2 layers at 0.5, a cutoff 0.1% below the optimum: 0.4033 for an optimum of 0.3883):
    that is the proof of the cutoff, no more, since a search that prunes at ``cut`` proves
    nothing above it."""
    below = res.x is not None and res.fun is not None and float(res.fun) < cut
    if res.status == 2 or (res.status == 0 and not below):
        return True, float(cut)
    val = dual(res, 1e-6)
    return False, (min(float(val), float(cut)) if val is not None and math.isfinite(val) else None)


def _knapsack(need: float, freed, cost, bw: float, backward: bool) -> float:
    """min sigma + sum c_p r_p  s.t.  sum B_p r_p + bw (sigma [+ sum c_p r_p]) >= need (fractional)."""

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
