"""The HiGHS backend's hard time limit: a MIP with a limit is solved in a spawned child process that
is stopped at the limit (HiGHS 1.16 ignores its own time_limit inside MIP presolve on large models)."""

import multiprocessing
import os
import signal
import threading
import time

import pytest
from test_milp import CASES, _case

from slackswap import Problem, Status, planners, simulate
from slackswap.mip import backends, highs_process
from slackswap.mip.backends import solve_highs
from slackswap.mip.model import Model


def _no_child_left():
    return not [c for c in multiprocessing.active_children() if c.name == "slackswap-highs"]


@pytest.mark.parametrize("name", ["chain6-tight", "residual-tight", "rand63"])
def test_isolated_and_in_process_agree(name, capfd):
    """One child per case (was two: the banner check solved again in a second child): what
    the isolated solve printed is read right after it."""
    args = next(c[1:] for c in CASES if c[0] == name)
    p = _case(*args)
    model = planners.get("milp").build(p).model
    capfd.readouterr()
    a = solve_highs(model, time_limit_s=30, isolate=True)
    assert "HiGHS" not in capfd.readouterr().out   # the child prints no banner or log
    b = solve_highs(model, time_limit_s=30, isolate=False)
    assert (a.status, b.status) == ("optimal", "optimal"), (a.message, b.message)
    assert a.objective == pytest.approx(b.objective, rel=1e-9, abs=1e-12)
    assert a.bound == pytest.approx(b.bound, rel=1e-9, abs=1e-12)
    assert isinstance(a.x, list) and len(a.x) == len(model.names)
    assert model.objective_value(a.x) == pytest.approx(a.objective, rel=1e-9, abs=1e-12)
    assert _no_child_left()


def test_planner_with_a_limit_is_still_exact():
    name, *args = CASES[2]
    p = _case(*args)
    plan = planners.get("milp", time_limit_s=30).plan(p)
    assert plan.info.status is Status.OPTIMAL, plan.info.message
    assert plan.info.objective == pytest.approx(simulate(p, plan).step_time_s, rel=1e-6)
    assert plan.info.objective == pytest.approx(planners.get("milp").plan(p).info.objective, rel=1e-9)


def test_auto_mode_keeps_unlimited_and_relaxed_solves_in_process(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("isolated")

    monkeypatch.setattr(highs_process, "solve_isolated", boom)
    model = planners.get("milp").build(_case(*CASES[0][1:])).model
    assert solve_highs(model).status == "optimal"
    assert solve_highs(model, time_limit_s=30, relax=True).status == "optimal"
    monkeypatch.setattr(backends, "ISOLATE", False)
    assert solve_highs(model, time_limit_s=30).status == "optimal"
    monkeypatch.setattr(backends, "ISOLATE", None)
    with pytest.raises(AssertionError, match="isolated"):
        solve_highs(model, time_limit_s=30)


def test_hard_stop_when_highs_overruns_its_limit():
    """layers=2, budget 0.7 (7.6 M nonzeros): HiGHS 1.16 in this process, given 3 s, runs far past
    it inside presolve (measured 12.2-14.6 s before the hard stop, 2-core machine); the child is
    stopped 3 s after its start (HiGHS itself gets 1.5 s). Measured 3.0-4.7 s with the stop; the
    margin (3 s + 6 s, for spawning the child on a loaded CI machine) stays below the 12.2 s
    that a missing stop takes."""
    p = Problem.build("tiny", "a100-80gb", 0.7, layers=2)
    model = planners.get("milp").build(p).model
    t = time.perf_counter()
    res = solve_highs(model, time_limit_s=3, threads=1)
    wall = time.perf_counter() - t
    assert res.status == "time_limit" and res.x is None, res.message
    assert wall < 3 + 6, f"{wall:.1f} s: {res.message}"
    assert _no_child_left()


def test_error_in_the_child_comes_back_as_an_error_result():
    m = Model("broken")
    x = m.var("x", binary=True)
    m.add_ge("r", [(1.0, x)], 0.5)
    m.minimize([(1.0, x)])
    m.rows[0][7] = 1.0    # column 7 does not exist: only the child looks at the matrix
    res = solve_highs(m, time_limit_s=20)
    # "error", not "time_limit": the parent did not wait the child out (no wall clock needed)
    assert res.status == "error" and res.x is None
    assert "column 7" in res.message
    assert _no_child_left()


def test_keyboard_interrupt_stops_the_child():
    """The layers=1 model keeps HiGHS busy until its limit; Ctrl-C in the parent ends the child.
    The test installs the handler it tests (Python's own): a background job starts with SIGINT
    ignored, and so would this process."""
    p = Problem.build("tiny", "a100-80gb", 0.5, layers=1)
    model = planners.get("milp").build(p).model
    timer = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    t = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            solve_highs(model, time_limit_s=60, threads=1)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    # ignored, the interrupt would surface only at the 60 s limit; half of it is a margin that
    # no loaded machine needs (measured about 2 s on the 2-core machine)
    assert time.perf_counter() - t < 30
    assert _no_child_left()


def _solve_in(model, out):
    out.put(solve_highs(model, isolate=False).status)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork on this platform")
def test_a_process_forked_after_an_in_process_solve_can_still_solve():
    """HiGHS keeps worker threads in a process-wide scheduler; a process forked after HiGHS ran
    here (``ProcessPoolExecutor``'s default on Linux: a sweep after a plan in a notebook) inherits
    that scheduler without its threads, and its first MIP waited forever before ``_run`` stopped
    them after each run (measured: the forked solve never returned)."""
    model = planners.get("milp").build(_case(*CASES[2][1:])).model
    assert solve_highs(model, isolate=False).status == "optimal"
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_solve_in, args=(model, out), daemon=True)
    child.start()
    child.join(60)
    hung = child.is_alive()
    if hung:
        child.kill()
        child.join()
    assert not hung, "the forked process's HiGHS solve did not return within 60 s"
    assert out.get(timeout=5) == "optimal"
