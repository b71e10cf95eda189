"""HiGHS in a child process with a hard stop at the time limit (``solve_highs``, docs/milp.md 9).

HiGHS 1.16 does not check ``time_limit`` everywhere in MIP presolve and ``cancelSolve()`` does not
stop it, so ``backends.solve_highs`` runs a limited MIP solve here: a "spawn" child (forking
a process whose HiGHS thread pool runs can deadlock) receives the flattened model, solves it with
a slightly smaller limit and sends the result back; the parent kills it at the limit.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import types
from multiprocessing import parent_process
from multiprocessing.connection import wait

import numpy as np

from .solver_core import Result, _flat, _highs, _left, _run

_GRACE_S, _GRACE_REL = 1.0, 0.05   # HiGHS' own limit: this much before the hard stop (see _soft)


def _soft(limit: float) -> float:
    """The time limit HiGHS gets inside a hard ``limit`` (seconds from the child's start): the
    limit less 5% and 1 s, but at least half of it."""
    return max(0.5 * limit, limit / (1 + _GRACE_REL) - _GRACE_S)


def solve_isolated(model, opts: dict, deadline: float | None) -> Result:
    """``solve_highs`` in a spawned child, killed at the hard limit (see ``solve_highs``)."""

    ctx = mp.get_context("spawn")
    t0 = time.perf_counter()
    limit = _left(opts["time_limit_s"], deadline)
    # the hard stop is the limit itself; HiGHS gets a little less (``_soft``) so that it normally
    # stops on its own, with its incumbent, before it (perf_counter is the system-wide monotonic
    # clock, shared by both processes)
    hard = None if limit is None else t0 + limit
    child_opts = dict(opts, time_limit_s=None, deadline=None if limit is None else t0 + _soft(limit))
    task_r, task_w = ctx.Pipe(duplex=False)
    res_r, res_w = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_child, args=(task_r, res_w), name="slackswap-highs", daemon=True)
    sender = None
    try:
        with _main_hidden():
            p.start()
        task_r.close()
        res_w.close()
        payload = (_flat(model), child_opts)   # flattened while the child imports
        sender = threading.Thread(target=_send, args=(task_w, payload), daemon=True)
        sender.start()
        while True:
            left = None if hard is None else max(0.0, hard - time.perf_counter())
            ready = wait([res_r, p.sentinel], left)
            if res_r in ready or res_r.poll():
                try:
                    st, x, obj, bound, msg = res_r.recv()
                except EOFError:
                    ready = [p.sentinel]
                else:
                    _reap(p)   # its work is done: stop it now rather than wait for its exit
                    return Result(st, None if x is None else np.asarray(x, float).tolist(), obj, bound, msg)
            if p.sentinel in ready:
                p.join(2.0)
                return Result("error", None, None, None,
                              f"the HiGHS process exited with code {p.exitcode} without a result")
            if not ready:
                return Result("time_limit", None, None, None,
                              f"HiGHS gave no result within its time limit ({limit:.3g} s): the solver "
                              f"process was stopped at the hard limit ({hard - t0:.3g} s after its start)")
    finally:
        _reap(p)
        res_r.close()
        if sender is None:
            task_w.close()
        else:
            sender.join(5.0)


@contextlib.contextmanager
def _main_hidden():
    """Hide the main script from spawn while the child starts: spawn would re-run its top level in
    the child (unless guarded by ``if __name__ == "__main__":``) and, for a script that plans at
    import time, fail; the child needs only this module. (Other threads see a bare ``__main__``
    for those few milliseconds.)"""

    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")   # no __file__, no __spec__
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


def _send(conn, payload) -> None:
    try:
        conn.send(payload)
    except (OSError, EOFError, ValueError):   # the child is gone: the parent reports why
        pass
    finally:
        conn.close()


def _reap(p) -> None:
    """Make sure the child ``p`` has exited and is joined (no zombie): terminate it, then kill it."""
    if getattr(p, "_popen", None) is None or p._closed:   # never started, or reaped already
        return
    for stop in (p.terminate, p.kill):
        if p.exitcode is None:
            stop()
            p.join(2.0)
    p.join()
    p.close()


def _child(task, out) -> None:
    """The child process: receive (flattened model, options), solve, send the Result's fields."""

    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the parent's to handle: it stops us
    parent = parent_process()
    if parent is not None:   # do not outlive a parent that died (e.g. SIGKILL)
        threading.Thread(target=lambda: (wait([parent.sentinel]), os._exit(1)), daemon=True).start()
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)   # the HiGHS banner and any solver log
        os.dup2(devnull, 1)
        os.close(devnull)
        f, opts = task.recv()
        task.close()
        res = _run(_highs(f), bool(f["integer"].any()), **opts)
        x = None if res.x is None else np.asarray(res.x, float)
        msg = (res.status, x, res.objective, res.bound, res.message)
    except BaseException as e:   # noqa: BLE001  reported to the parent as an "error" Result
        msg = ("error", None, None, None, f"HiGHS process: {type(e).__name__}: {e}")
    try:
        out.send(msg)
    finally:
        out.close()
