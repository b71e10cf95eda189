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

   **2b. Aggregated relaxation** (``slackswap/mip/aggregate.py``, every size, about a
   second on the full-size models): the same capacities at every forward *and backward* step at
   once, with one variable per decision (re-run op, RECOMPUTE, SWAP) shared by all steps, the
   recompute that can run before the first backward step (the closure of what the last op saves,
   not all recompute), and the round trip of every swapped tensor (copied out and back before its
   first backward use), and with hold points the tensors a multi-level plan frees between two of
   their uses. Every plan maps to a feasible point of equal or lower objective, so its
   LP optimum is a bound (``aggregate_bound``); with integral decisions it is a small MILP whose
   solver dual bound is one too (the MILP planner uses it above ``max_exact_tensors``). The rows
   and why each holds are in that module's docstring and docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps".

``gap(problem, result) = (step - bound) / step`` (the MIP-gap convention, 0 = proven optimal).
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np

from ..core.errors import BudgetError, ConfigError, SlackSwapError
from ..core.plan import Decision
from ..mip import backends  # backends._run looked up at call time (tests replace it)
from ..mip.aggregate import bandwidth, build, needs
from ..mip.backends import _flat, _highs


def lower_bound(problem, integral_time_limit_s: float | None = None) -> tuple[float, str]:
    """A certified lower bound (seconds) on ``simulate(problem, plan).step_time_s`` for every plan
    (any issue points, D2H order and hold points): the better of the ideal step and the
    PCIe-capacity bound. ``integral_time_limit_s`` (opt-in, slower): also the dual bound of the
    aggregated relaxation with integral decisions, after at most that many seconds.

    The LP relaxation of the exact MILP is not one of them: it describes plans without hold
    points only, and a multi-level plan can be faster
    (``test_the_exact_milps_relaxation_does_not_bound_multi_level_plans``)."""
    check_time_limit(integral_time_limit_s, "lower_bound(integral_time_limit_s)")
    best, how = float(problem.ideal_step_s), "ideal step (every op once, no stall)"
    cap = capacity_bound(problem)
    if cap > best:
        best, how = cap, "PCIe-capacity bound (recompute or copy out what exceeds the budget)"
    if integral_time_limit_s is not None:
        agg = problem.ideal_step_s + aggregate_bound(problem, integral=True, time_limit_s=integral_time_limit_s)[0]
        if agg > best:
            best, how = agg, "aggregated relaxation, integral decisions (solver dual bound)"
    return best, how


def check_time_limit(value, field: str) -> None:
    """``ConfigError`` naming ``field`` unless ``value`` is None or seconds > 0 (not a bool)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
        raise ConfigError(f"{field}: seconds > 0 or None; got {value!r}")


def gap(problem, result, bound: float | None = None) -> float:
    """Relative gap of a ``SimResult`` to the lower bound: ``(step - lb) / step`` (inf if it does
    not fit)."""
    if not result.fits or not math.isfinite(result.step_time_s):
        return math.inf
    lb = lower_bound(problem)[0] if bound is None else bound
    return max(0.0, (result.step_time_s - lb) / result.step_time_s) if result.step_time_s > 0 else 0.0


def capacity_bound(problem) -> float:
    """The PCIe-capacity lower bound on the step time (seconds); see the module docstring."""

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
    (``slackswap/mip/aggregate.py``), solved by HiGHS: its LP optimum (``scipy.optimize.milp``),
    or with ``integral`` (highspy, ``_solve_pooled``: its result also holds every integer
    solution found) the dual bound of the MILP reached after ``node_limit``
    branch-and-bound nodes (a work limit: the same result on any machine) or ``time_limit_s``
    seconds, whichever comes first; ``releases`` adds the per-copy release rows (``build``), for
    a few dozen planning tensors, and ``tight`` with them the ``rho_by``, ``o`` and ``seg`` rows
    (without ``releases`` HiGHS's symmetry detection is off: ``_solve_pooled``), and ``chains``
    with those the copy-back rows along chains of up to that many RECOMPUTE tensors, as deep as
    their rows fit in ``aggregate.CHAIN_NONZEROS`` (``v_chain``, ``v_chains``: ``build``). ``solver``
    (with ``integral``): ``"highs"``; ``"scip"``, SCIP through OR-Tools (``_solve_scip``;
    ``pip install slackswap[ortools]``), whose dual bound rises faster on the full-size presets'
    MILP at low budgets (llama-7b at 0.2: 1798.69 ms after 20 nodes against HiGHS's 1794.04 ms;
    docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps"); or ``"highs+scip"``, both at once, the larger bound
    (``_solve_both``). Returns
    ``(seconds, Aggregate or None, scipy result or None)``; 0.0 when nothing is proven (result
    None with a constant row that fails, ``Aggregate.model.infeasible``: no plan fits). Shaved by
    the solver's feasibility tolerance, in units of the forward time: the LP's primal one
    (``LP_SHAVE``, 1e-7), the MILP's integrality one (``MIP_SHAVE``, HiGHS's
    ``mip_feasibility_tolerance``, 1e-6; a MILP bound above the optimum by 1.05e-7 was seen,
    ``test_the_integral_bound_is_shaved_by_the_mip_tolerance``)."""

    if solver not in AGGREGATE_SOLVERS:
        raise ConfigError(f"aggregate_bound(solver): one of {', '.join(AGGREGATE_SOLVERS)}; got {solver!r}")
    if isinstance(chains, bool) or not isinstance(chains, int) or chains < 0:
        raise ConfigError("aggregate_bound(chains): the longest chain of RECOMPUTE tensors for the chain rows, "
                          f"an int >= 0 (0: none); got {chains!r}")
    if chains and not (releases and tight):
        raise ConfigError(f"aggregate_bound(chains={chains}): the chain rows need releases=True and tight=True")
    agg = build(problem, integral=integral, releases=releases, tight=tight, chains=chains)
    if agg is None:
        return 0.0, None, None
    mdl = agg.model
    if mdl.infeasible:
        return 0.0, agg, None
    if integral and solver == "highs+scip":
        res = _solve_both(mdl, time_limit_s, mip_rel_gap, node_limit, releases)
        val = res.mip_dual_bound
    elif integral:
        res = _solve_scip(mdl, time_limit_s, mip_rel_gap, node_limit) if solver == "scip" else \
            _solve_pooled(mdl, time_limit_s, mip_rel_gap, node_limit, symmetry=releases)
        val = _dual(res, mip_rel_gap)
    else:
        opts = {"mip_rel_gap": mip_rel_gap}
        if time_limit_s is not None:
            opts["time_limit"] = float(time_limit_s)
        res = _scipy_milp(mdl, opts)
        val = res.fun if res.status == 0 else None
    if val is not None and math.isfinite(val) and not integral:
        val = float(val) + mdl.obj_const    # scipy's milp leaves the objective's constant out; HiGHS and SCIP count it
    return _extra(val, agg, integral), agg, res


def _extra(val, agg, integral: bool) -> float:
    """Seconds over the ideal step certified by a solver's bound ``val`` on ``agg``'s model (with
    the objective's constant), shaved by the solver's tolerance (``aggregate_bound``); 0.0 for
    no bound."""
    if val is None or not math.isfinite(val):
        return 0.0
    shave = MIP_SHAVE if integral else LP_SHAVE
    return max(0.0, (float(val) - shave) * agg.t0 * (1 - 1e-9))


def aggregate_point(problem, agg, decisions) -> dict[int, float] | None:
    """The point of ``agg``'s model (``mip.aggregate.build``) with its decisions fixed to
    ``decisions`` (tensor id -> ``Decision``; every planning tensor) and every other column at
    its least objective: that MILP (its ``pend`` binaries free) solved by HiGHS, integers
    rounded, as column -> value; None when HiGHS finds none. Every plan maps to a feasible point
    of the model (``mip/aggregate.py``), so this is a solution of the aggregated MILP whose
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
        res = _scipy_milp(mdl, {"mip_rel_gap": 1e-9, "presolve": presolve}, lb, ub)
        if res.status != 4:
            break
    if res.x is None:
        return None
    x = np.where(np.asarray(mdl.integer, bool), np.round(res.x), res.x)
    return {i: float(v) for i, v in enumerate(x)}


def _scipy_milp(mdl, options: dict, lb=None, ub=None):
    """``scipy.optimize.milp`` (HiGHS) on the model ``mdl`` with its integrality and the column
    bounds ``lb`` / ``ub`` (the model's by default); its result leaves ``mdl.obj_const`` out."""
    from scipy.optimize import Bounds, LinearConstraint, milp  # lazy: start-up cost (scipy)

    obj = np.zeros(len(mdl.names))
    for v, cf in mdl.obj.items():
        obj[v] = cf
    return milp(obj, constraints=LinearConstraint(mdl.csr(), mdl.lo, mdl.hi), integrality=np.asarray(mdl.integer, int),
                bounds=Bounds(mdl.lb if lb is None else lb, mdl.ub if ub is None else ub), options=options)


class BackgroundBound:
    """The aggregated MILP of ``problem`` (no release rows) on SCIP in a second thread, without a
    node limit, from construction until ``time_limit_s`` seconds have passed or ``finish()`` is
    called (the ``milp`` planner's ``aggregate_solver="auto"`` under a time limit on the
    full-size presets: SCIP uses the second core while the planner's thread runs HiGHS's
    nodes and the incumbent search; SCIP releases the GIL). Its bound holds however it stops;
    it depends on machine speed. Needs OR-Tools."""

    def __init__(self, problem, time_limit_s: float, mip_rel_gap: float = 1e-6):
        self._end = time.perf_counter() + float(time_limit_s)
        self._grace = _stop_grace(time_limit_s)
        self._gap = mip_rel_gap
        self._out: dict = {}
        self._scip = _Stopper.scip()
        self._thread = threading.Thread(target=self._run, args=(problem,), name="slackswap-aggregate-scip",
                                        daemon=True)
        self._thread.start()

    def _run(self, problem) -> None:
        try:
            agg = self._out["agg"] = build(problem, integral=True)
            left = self._end - time.perf_counter()
            if agg is None or agg.model.infeasible or left <= 0.5 or self._scip.stopped:
                return
            self._out["res"] = _solve_scip(agg.model, left, self._gap, None, started=self._scip.started)
        except BaseException as e:      # re-raised by finish()
            self._out["error"] = e

    def finish(self, wait: bool = False):
        """Stop SCIP (``InterruptSolve``; with ``wait``, at its time limit) and wait for it, at
        most ``_stop_grace`` seconds: ``(seconds, Aggregate or None, result or None)`` as
        ``aggregate_bound`` returns them (0.0 and no result when it had no time, the model is
        trivial, or SCIP did not stop within that grace; its thread then ends on its own)."""

        if wait:
            self._thread.join(max(0.0, self._end - time.perf_counter()))
        self._scip.stop()
        self._thread.join(self._grace)
        if self._thread.is_alive():      # left to stop on its own: its bound is not read
            return 0.0, self._out.get("agg"), None
        if "error" in self._out:
            raise self._out["error"]
        agg, res = self._out.get("agg"), self._out.get("res")
        if agg is None or res is None:
            return 0.0, agg, None
        return _extra(_dual(res, self._gap), agg, True), agg, res


class _Stopper:
    """Stops a solver that runs in another thread: pass ``started`` as the solve's ``started``
    hook (``mip.backends._run``, ``solve_ortools``); ``stop()`` interrupts the solver, or, when
    it has not started yet, makes it start with no time (``BackgroundBound``, ``_solve_both``)."""

    def __init__(self, interrupt, no_time):
        self._interrupt, self._no_time = interrupt, no_time
        self._lock = threading.Lock()
        self._solver = None
        self.stopped = False

    @classmethod
    def highs(cls):
        return cls(lambda h: h.cancelSolve(), lambda h: h.setOptionValue("time_limit", 1e-3))

    @classmethod
    def scip(cls):
        return cls(lambda s: s.InterruptSolve(), lambda s: s.SetTimeLimit(1))

    def started(self, solver) -> None:
        with self._lock:
            self._solver = solver
            late = self.stopped
        if late:
            self._no_time(solver)

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            solver = self._solver
        if solver is not None:
            self._interrupt(solver)


def binding_rows(problem, releases: bool = False, tol: float = 1e-7):
    """Where the aggregated relaxation's LP bound comes from: ``(extra, rows)``, its LP optimum
    (seconds over the ideal step, unshaved: a diagnostic, not a certified bound; that is
    ``aggregate_bound``) and the rows whose dual value exceeds ``tol`` in magnitude, as
    ``[(row name, |dual|)]`` in the model's row order (None, [] when no step exceeds the budget
    under keep-all). By LP duality the rows with a zero dual can be dropped without changing the
    optimum, so these rows alone carry the bound; when it is above zero a memory row
    (``mem_fwd`` / ``mem_bwd``, or ``mem_rel`` with ``releases``) is among them, since without
    the memory rows every decision at zero is optimal. The families are named in
    ``slackswap/mip/aggregate.py`` and docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps"
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


#: what ``aggregate_bound`` takes off a solver's bound, in units of the forward time: HiGHS's
#: primal feasibility tolerance for the LP, its integrality tolerance for the MILP
LP_SHAVE, MIP_SHAVE = 1e-7, 1e-6

_STATUS = {"optimal": 0, "time_limit": 1, "infeasible": 2}    # scipy.optimize.milp's codes; else 4
#: the solvers of the aggregated MILP (``aggregate_bound(solver=...)``, the milp planner's
#: ``aggregate_solver``); "highs+scip": both at once (``_solve_both``)
AGGREGATE_SOLVERS = ("highs", "scip", "highs+scip")


def _dual(res, mip_rel_gap):
    """A MILP result's certified objective bound (before the shave): the solver's dual bound, or
    when it proved its optimum within ``mip_rel_gap`` without one, that optimum less the gap."""
    val = res.mip_dual_bound
    if res.status == 0 and res.fun is not None:      # proven optimal (within mip_rel_gap)
        val = res.fun - mip_rel_gap * abs(res.fun) if val is None else val
    return val


def _stop_grace(time_limit_s) -> float | None:
    """How long to wait for SCIP once told to stop: it answers an interrupt (and its own time
    limit) only between its steps, 3.5 s late at gpt2-xl 0.2 under a 10 s limit beside the
    planner's work; 5% of the time limit, at least 0.5 s (None without a limit: until it stops)."""
    return max(0.5, 0.05 * float(time_limit_s)) if time_limit_s is not None else None


def _solve_both(mdl, time_limit_s, mip_rel_gap, node_limit, releases):
    """The aggregated MILP on HiGHS and on SCIP at the same time, SCIP in a second thread (both
    release the GIL), each with the node and time limits given: one result with the larger of
    the two certified bounds (``_dual``; each holds for every plan) as ``mip_dual_bound``, the
    faster of the two incumbents as ``x`` / ``fun``, status 0 when either proved its optimum,
    ``solutions`` HiGHS's pool then SCIP's incumbent, and ``mip_node_count`` the larger count.
    The first to prove the optimum (or that there is none) stops the other (HiGHS ``cancelSolve``, SCIP
    ``InterruptSolve``; one not yet started gets a time limit of a millisecond): a stopped
    solve's bound still holds, and the proof decides the bound. SCIP is also stopped at the time
    limit: next to HiGHS it checked its own too seldom (gpt2-xl 0.2: 9.5 s for a limit of 5.3 s);
    if it has not stopped ``_stop_grace`` later, the result is HiGHS's alone.
    """

    from scipy.optimize import OptimizeResult  # lazy: start-up cost (scipy)

    out: dict = {}
    highs, scip = _Stopper.highs(), _Stopper.scip()

    def run_scip():
        try:
            out["scip"] = _solve_scip(mdl, time_limit_s, mip_rel_gap, node_limit, started=scip.started)
            if out["scip"].status in (0, 2):       # proven optimal or infeasible
                highs.stop()
        except BaseException as e:      # re-raised in the caller's thread
            out["error"] = e
            highs.stop()

    end = None if time_limit_s is None else time.perf_counter() + float(time_limit_s)
    th = threading.Thread(target=run_scip, name="slackswap-aggregate-scip", daemon=True)
    th.start()
    try:
        hi = _solve_pooled(mdl, time_limit_s, mip_rel_gap, node_limit, symmetry=releases, started=highs.started)
        if hi.status in (0, 2):
            scip.stop()
    finally:
        if end is not None:
            th.join(max(0.0, end - time.perf_counter()))
            if th.is_alive():       # SCIP checks its own limit too seldom next to HiGHS: 9.5 s for 5.3
                scip.stop()
        th.join(_stop_grace(time_limit_s))
    if "error" in out:
        raise out["error"]
    if th.is_alive():      # SCIP has not stopped within the grace: HiGHS's result alone
        return hi
    sc = out["scip"]
    duals = [v for v in (_dual(hi, mip_rel_gap), _dual(sc, mip_rel_gap)) if v is not None and math.isfinite(v)]
    inc = min((r for r in (hi, sc) if r.x is not None), key=lambda r: r.fun, default=hi)
    return OptimizeResult(status=0 if 0 in (hi.status, sc.status) else inc.status,
                          message=f"HiGHS: {hi.message}; SCIP: {sc.message}", x=inc.x, fun=inc.fun,
                          mip_dual_bound=max(duals) if duals else None,
                          mip_node_count=max(r.mip_node_count or 0 for r in (hi, sc)),
                          solutions=list(hi.solutions) + list(sc.solutions))


def _solve_scip(mdl, time_limit_s, mip_rel_gap, node_limit, started=None):
    """The aggregated MILP ``mdl`` solved by SCIP (OR-Tools, ``mip.ortools_backend``: feasibility
    tolerance 1e-9, one thread, deterministic), as ``_solve_pooled``'s result: ``node_limit`` is
    SCIP's ``limits/nodes`` (a work limit), ``mip_dual_bound`` SCIP's dual bound (with the
    objective's constant, as HiGHS reports it; None when SCIP proves its optimum within
    ``mip_rel_gap``: ``aggregate_bound`` then takes the optimum less that gap) and ``solutions``
    its last incumbent only."""

    from scipy.optimize import OptimizeResult  # lazy: start-up cost (scipy)

    # without OR-Tools, solve_ortools says "pip install slackswap[ortools]"
    from ..mip.ortools_backend import solve_ortools  # optional dependency (torch)

    # the time limit counts from here: building OR-Tools' model takes seconds on the presets
    deadline = None if time_limit_s is None else time.perf_counter() + float(time_limit_s)
    r = solve_ortools(mdl, "scip", mip_rel_gap=mip_rel_gap, node_limit=node_limit, deadline=deadline,
                      started=started)
    x = None if r.x is None else np.asarray(r.x, float)
    # proven within mip_rel_gap: no dual bound, as on HiGHS's path (``_dual`` takes the optimum less the gap)
    bound = None if r.status == "optimal" or r.bound is None else float(r.bound)
    return OptimizeResult(status=_STATUS.get(r.status, 4), message=r.message or r.status, x=x,
                          fun=None if x is None else float(r.objective), mip_dual_bound=bound,
                          mip_node_count=r.nodes, solutions=[] if x is None else [x])


def _solve_pooled(mdl, time_limit_s, mip_rel_gap, node_limit, symmetry=True, started=None, cutoff=None):
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
    return OptimizeResult(status=_STATUS.get(r.status, 4), message=r.message or r.status,
                          x=None if r.x is None else np.asarray(r.x, float),
                          fun=None if r.x is None else r.objective, mip_dual_bound=r.bound,
                          mip_node_count=r.nodes, solutions=r.solutions or [])


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
    the probes' results that hold integer solutions (``_solve_pooled``'s; candidates for a plan),
    and how many probes proved their cutoff and how many ran."""

    end = time.perf_counter() + float(time_limit_s)
    lo, hi = float(low_s), float(high_s)
    found, proofs, probes = [], 0, 0

    def step(val) -> float:      # a certified step time from a bound ``val`` of the model
        return problem.ideal_step_s + _extra(val, agg, True)

    while hi - lo > rel_gap * hi:
        left = end - time.perf_counter()
        if left < PROBE_MIN_S:
            break
        mid = 0.5 * (lo + hi)
        cut = (mid - problem.ideal_step_s) / agg.t0
        res = _solve_pooled(agg.model, min(float(probe_s), left), 1e-6, None, symmetry=False, cutoff=cut)
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
    ``fun``, ``mip_dual_bound`` as ``_solve_pooled`` gives them), ``(proven, val)``: whether no
    solution lies below ``cut``, and the certified bound in the model's units (``cut`` when
    proven; else the dual bound up to ``cut``, None without one). HiGHS may end "optimal" at a
    solution at or above the cutoff, found on the way, with that objective as its dual bound
    (tiny 2 layers at 0.5, a cutoff 0.1% below the optimum: 0.4033 for an optimum of 0.3883):
    that is the proof of the cutoff, no more, since a search that prunes at ``cut`` proves
    nothing above it."""
    below = res.x is not None and res.fun is not None and float(res.fun) < cut
    if res.status == 2 or (res.status == 0 and not below):
        return True, float(cut)
    val = _dual(res, 1e-6)
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
