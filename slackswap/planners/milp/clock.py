"""How the milp planner spends ``time_limit_s`` (docs/milp.md, "Time limit").

The whole ``plan()`` call is bounded: every phase that cannot be stopped once started (a warm-start
heuristic, the capacity bound's LP) is started only while its share of the limit has time left,
and the solver is stopped at its deadline (``slackswap.mip.highs_process``: a child process killed at it).

* ``MIN_TIME_LIMIT_S``: the smallest limit accepted. Below it the solver's child process would be
  killed before it could start solving (starting it takes 0.8-1.2 s on the 2-core CI machine,
  2026-11-30, ``benchmarks/README.md``), so a smaller limit could only return the warm start.
* ``WARM_SHARE``: heuristics for the warm start are started until this fraction of the limit is
  spent (keep-all and recompute-all are always tried: they take one simulation each; the last
  heuristic started may run past it).
* ``POST_SHARE``: the fraction kept after the solver's deadline for the fixed-integer LP, the
  simulations and the certified bound.
"""

from __future__ import annotations

import math
import sys
import time

MIN_TIME_LIMIT_S = 2.0
WARM_SHARE = 0.5
POST_SHARE = 0.1
SOLVER_START_S = 1.0
"""The solver is not started with less time than this left before its deadline: its child process
takes 0.8-1.2 s to start, and handing it a large model takes longer (the warm start is returned)."""
SCIPY_IMPORT_S = 1.5
"""Importing ``scipy.optimize`` (the capacity bound's LP and the aggregated MILP use it): 1.0-2.0 s
on the 2-core CI machine under load; counted once per process."""


class Deadline:
    """A time to finish by: ``at``, a ``time.perf_counter()`` value, or None (no limit)."""

    __slots__ = ("at",)

    def __init__(self, at: float | None):
        self.at = at

    def left(self) -> float:
        """Seconds left (negative once past; ``math.inf`` without a limit)."""
        return math.inf if self.at is None else self.at - time.perf_counter()

    def passed(self) -> bool:
        """Whether the time is up (never without a limit)."""
        return self.at is not None and time.perf_counter() >= self.at


def import_cost() -> float:
    """Seconds still to spend importing what the bounds need (0 once imported)."""

    return 0.0 if "scipy.optimize" in sys.modules else SCIPY_IMPORT_S


class Clock:
    """The limit of one ``plan()`` call, started at construction (``limit`` None: no limit)."""

    def __init__(self, limit: float | None):
        self.t0, self.limit = time.perf_counter(), limit

    def at(self, share: float) -> float | None:
        """The ``time.perf_counter()`` value when ``share`` of the limit is spent (None: no limit)."""
        return None if self.limit is None else self.t0 + share * self.limit

    @property
    def end(self) -> float | None:
        return self.at(1.0)

    @property
    def solve_deadline(self) -> float | None:
        """Build and solve end here; the rest (``POST_SHARE``) is for the post-processing."""
        return self.at(1.0 - POST_SHARE)

    def before(self, t: float | None, need: float = 0.0) -> bool:
        """True when ``need`` seconds still fit before ``t`` (always True without a limit)."""
        return t is None or time.perf_counter() + need < t

    def wall(self) -> float:
        return time.perf_counter() - self.t0


def bound_fits(clock: Clock, problem) -> bool:
    """Whether the capacity bound (``bounds.capacity_bound``; its LP takes about 2 ms per op on the
    2-core CI machine, 0.4-1.1 s on the presets, plus the import) fits before the limit."""
    return clock.before(clock.end, 2e-3 * len(problem.graph.ops) + import_cost())
