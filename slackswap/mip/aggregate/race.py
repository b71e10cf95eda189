"""Racing and stopping the solvers of the aggregated relaxation: HiGHS and SCIP on the same MILP at
once (``solve_both``), SCIP alone in a second thread (``BackgroundBound``), and how a solver in
another thread is told to stop (``Stopper``, ``stop_grace``). The solves themselves:
``solve.py``."""

from __future__ import annotations

import math
import threading
import time

from .rows import build
from .solve import dual, extra_seconds, solve_pooled, solve_scip


def stop_grace(time_limit_s) -> float | None:
    """How long to wait for SCIP once told to stop: it answers an interrupt (and its own time
    limit) only between its steps, 3.5 s late at gpt2-xl 0.2 under a 10 s limit beside the
    planner's work; 5% of the time limit, at least 0.5 s (None without a limit: until it stops)."""
    return max(0.5, 0.05 * float(time_limit_s)) if time_limit_s is not None else None


def solve_both(mdl, time_limit_s, mip_rel_gap, node_limit, releases):
    """The aggregated MILP on HiGHS and on SCIP at the same time, SCIP in a second thread (both
    release the GIL), each with the node and time limits given: one result with the larger of
    the two certified bounds (``dual``; each holds for every plan) as ``mip_dual_bound``, the
    faster of the two incumbents as ``x`` / ``fun``, status 0 when either proved its optimum,
    ``solutions`` HiGHS's pool then SCIP's incumbent, and ``mip_node_count`` the larger count.
    The first to prove the optimum (or that there is none) stops the other (HiGHS ``cancelSolve``, SCIP
    ``InterruptSolve``; one not yet started gets a time limit of a millisecond): a stopped
    solve's bound still holds, and the proof decides the bound. SCIP is also stopped at the time
    limit: next to HiGHS it checked its own too seldom (gpt2-xl 0.2: 9.5 s for a limit of 5.3 s);
    if it has not stopped ``stop_grace`` later, the result is HiGHS's alone.
    """

    from scipy.optimize import OptimizeResult  # lazy: start-up cost (scipy)

    out: dict = {}
    highs, scip = Stopper.highs(), Stopper.scip()

    def run_scip():
        try:
            out["scip"] = solve_scip(mdl, time_limit_s, mip_rel_gap, node_limit, started=scip.started)
            if out["scip"].status in (0, 2):       # proven optimal or infeasible
                highs.stop()
        except BaseException as e:      # re-raised in the caller's thread
            out["error"] = e
            highs.stop()

    end = None if time_limit_s is None else time.perf_counter() + float(time_limit_s)
    th = threading.Thread(target=run_scip, name="slackswap-aggregate-scip", daemon=True)
    th.start()
    try:
        hi = solve_pooled(mdl, time_limit_s, mip_rel_gap, node_limit, symmetry=releases, started=highs.started)
        if hi.status in (0, 2):
            scip.stop()
    finally:
        if end is not None:
            th.join(max(0.0, end - time.perf_counter()))
            if th.is_alive():       # SCIP checks its own limit too seldom next to HiGHS: 9.5 s for 5.3
                scip.stop()
        th.join(stop_grace(time_limit_s))
    if "error" in out:
        raise out["error"]
    if th.is_alive():      # SCIP has not stopped within the grace: HiGHS's result alone
        return hi
    sc = out["scip"]
    duals = [v for v in (dual(hi, mip_rel_gap), dual(sc, mip_rel_gap)) if v is not None and math.isfinite(v)]
    inc = min((r for r in (hi, sc) if r.x is not None), key=lambda r: r.fun, default=hi)
    return OptimizeResult(status=0 if 0 in (hi.status, sc.status) else inc.status,
                          message=f"HiGHS: {hi.message}; SCIP: {sc.message}", x=inc.x, fun=inc.fun,
                          mip_dual_bound=max(duals) if duals else None,
                          mip_node_count=max(r.mip_node_count or 0 for r in (hi, sc)),
                          solutions=list(hi.solutions) + list(sc.solutions))


class Stopper:
    """Stops a solver that runs in another thread: pass ``started`` as the solve's ``started``
    hook (``mip.backends._run``, ``solve_ortools``); ``stop()`` interrupts the solver, or, when
    it has not started yet, makes it start with no time (``BackgroundBound``, ``solve_both``)."""

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


class BackgroundBound:
    """The aggregated MILP of ``problem`` (no release rows) on SCIP in a second thread, without a
    node limit, from construction until ``time_limit_s`` seconds have passed or ``finish()`` is
    called (the ``milp`` planner's ``aggregate_solver="auto"`` under a time limit on the
    full-size presets: SCIP uses the second core while the planner's thread runs HiGHS's
    nodes and the incumbent search; SCIP releases the GIL). Its bound holds however it stops;
    it depends on machine speed. Needs OR-Tools."""

    def __init__(self, problem, time_limit_s: float, mip_rel_gap: float = 1e-6):
        self._end = time.perf_counter() + float(time_limit_s)
        self._grace = stop_grace(time_limit_s)
        self._gap = mip_rel_gap
        self._out: dict = {}
        self._scip = Stopper.scip()
        self._thread = threading.Thread(target=self._run, args=(problem,), name="slackswap-aggregate-scip",
                                        daemon=True)
        self._thread.start()

    def _run(self, problem) -> None:
        try:
            agg = self._out["agg"] = build(problem, integral=True)
            left = self._end - time.perf_counter()
            if agg is None or agg.model.infeasible or left <= 0.5 or self._scip.stopped:
                return
            self._out["res"] = solve_scip(agg.model, left, self._gap, None, started=self._scip.started)
        except BaseException as e:      # re-raised by finish()
            self._out["error"] = e

    def finish(self, wait: bool = False):
        """Stop SCIP (``InterruptSolve``; with ``wait``, at its time limit) and wait for it, at
        most ``stop_grace`` seconds: ``(seconds, Aggregate or None, result or None)`` as
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
        return extra_seconds(dual(res, self._gap), agg, True), agg, res
