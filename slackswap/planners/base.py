"""Planner protocol, tags and registry (DESIGN.md section 5).

A planner is a class with ``name``, ``tags`` and ``plan(problem) -> Plan``; its constructor only
stores parameters. ``get("milp", time_limit_s=60)`` builds a registered planner by name.

>>> from slackswap import planners
>>> "keep-all" in planners.available()
True
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..errors import SlackSwapError, UnknownNameError
from ..plan import Decision, Plan, SolveInfo, Status


@dataclass(frozen=True)
class Tags:
    exact: bool = False
    supports_swap: bool = False
    supports_recompute: bool = False
    chain_only: bool = False
    deterministic: bool = True


@runtime_checkable
class Planner(Protocol):
    name: str
    tags: Tags

    def plan(self, problem) -> Plan: ...


_REGISTRY: dict[str, Callable[..., Planner]] = {}


def int_param(planner: str, name: str, value, minimum: int = 0) -> int:
    """Check an integer planner parameter (bools refused) in a constructor; the error names
    ``planner.name`` and the allowed range."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SlackSwapError(f"{planner}.{name}: must be an int >= {minimum}, got {value!r}")
    return value


def register(name: str, factory: Callable[..., Planner] | None = None):
    """Register a planner class (or factory) under ``name``; usable as a decorator.
    A second registration of the same name raises."""

    def deco(f):
        if name in _REGISTRY:
            raise SlackSwapError(f"planner name {name!r} is already registered")
        _REGISTRY[name] = f
        return f

    return deco(factory) if factory is not None else deco


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def available() -> list[str]:
    """Names of the registered planners, sorted."""
    _load_builtin()
    return sorted(_REGISTRY)


def get(name: str, **params) -> Planner:
    """Build the planner registered as ``name`` with ``params`` (unknown name lists known ones)."""
    _load_builtin()
    if name not in _REGISTRY:
        raise UnknownNameError("planner", name, list(_REGISTRY))
    try:
        return _REGISTRY[name](**params)
    except TypeError as e:
        raise SlackSwapError(f"planner {name!r}: bad parameters {sorted(params)} ({e})") from None


class FunctionPlanner:
    """Wrap ``fn(problem) -> dict[tensor id, Decision] | Plan`` into a planner.

    >>> p = FunctionPlanner("all-keep", lambda pr: {t: Decision.KEEP for t in pr.planning_ids})
    """

    def __init__(self, name: str, fn: Callable, tags: Tags | None = None, **params):
        self.name, self.fn, self.tags, self.params = name, fn, tags or Tags(), params

    def plan(self, problem) -> Plan:
        t0 = time.perf_counter()
        out = self.fn(problem, **self.params)
        if isinstance(out, Plan):
            return out
        return Plan(out, planner=self.name, params=self.params, problem_key=problem.key,
                    info=SolveInfo(Status.FEASIBLE, wall_s=time.perf_counter() - t0))


def make_plan(problem, decisions: dict, planner: str, params: dict, t0: float, *,
              issue_points=None, status: Status | None = None, message: str = "",
              judge: bool = True) -> Plan:
    """Assemble a ``Plan``; with ``judge`` the simulator sets status FEASIBLE or INFEASIBLE and
    the objective (step seconds)."""
    from ..timeline import simulate

    plan = Plan(decisions, issue_points=issue_points or {}, planner=planner, params=params,
                problem_key=problem.key)
    if judge:
        r = simulate(problem, plan, detail=False)
        st = status or (Status.FEASIBLE if r.feasible and r.fits else Status.INFEASIBLE)
        return plan.with_info(status=st, objective=r.step_time_s if r.feasible else None,
                              wall_s=time.perf_counter() - t0, message=message or r.reason)
    return plan.with_info(status=status or Status.FEASIBLE, wall_s=time.perf_counter() - t0, message=message)


_LOADED = False


def _load_builtin() -> None:
    """Import the built-in planner modules (they register themselves) once."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    import importlib

    for mod in ("baselines", "chen", "dp", "capuchin", "slack", "milp", "brute"):
        try:
            importlib.import_module(f"{__package__}.{mod}")
        except ModuleNotFoundError as e:
            if e.name != f"{__package__}.{mod}":
                raise


__all__ = ["Decision", "FunctionPlanner", "Planner", "Tags", "available", "get", "int_param", "make_plan",
           "register"]
