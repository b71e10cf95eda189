"""Planner protocol, tags and registry (docs/planners.md).

A planner is a class with ``name``, ``tags`` and ``plan(problem) -> Plan``; its constructor only
stores parameters. ``get("milp", time_limit_s=60)`` builds a registered planner by name.

>>> from slackswap import planners
>>> "keep-all" in planners.available()
True
"""

from __future__ import annotations

import functools
import importlib
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

from ..core.errors import ParameterError, SlackSwapError, UnknownNameError
from ..core.plan import Decision, Plan, SolveInfo, Status
from ..core.schema import Schema, check_type, parse
from ..timeline import simulate
from ..timeline.problem import Problem

S = TypeVar("S", bound=Schema)


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


def check_params(planner: str, schema: type[S], **params) -> S:
    """A planner's parameters parsed by its declared ``schema`` (strict types: ``"no"`` is not a
    boolean, ``True`` is not a number); a bad one raises ``ParameterError`` naming
    ``<planner>: <parameter>`` and what was expected."""
    return parse(schema, params, planner, exc=ParameterError)


def check_problem(problem, who: str):
    """Refuse anything but a ``Problem`` as the argument of ``plan``."""

    return check_type(problem, Problem, f"{who}.plan(problem)",
                      "a Problem (slackswap.Problem.build(model, hardware, budget))", ParameterError)


def _checked_plan(plan: Callable, name: str) -> Callable:
    @functools.wraps(plan)
    def wrapper(self, problem, *args, **kwargs):
        check_problem(problem, name)
        return plan(self, problem, *args, **kwargs)

    return wrapper


def register(name: str, factory: Callable[..., Planner] | None = None):
    """Register a planner class (or factory) under ``name``; usable as a decorator.
    A second registration of the same name raises."""

    def deco(f):
        if name in _REGISTRY:
            raise SlackSwapError(f"planner name {name!r} is already registered")
        if isinstance(f, type) and callable(vars(f).get("plan")):
            f.plan = _checked_plan(vars(f)["plan"], name)
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
    check_type(name, str, "planner", "a planner name (a string)", ParameterError)
    if name not in _REGISTRY:
        raise UnknownNameError("planner", name, list(_REGISTRY))
    factory = _REGISTRY[name]
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        sig = None
    if sig is not None and not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        allowed = [k for k, p in sig.parameters.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
        bad = [k for k in params if k not in allowed]
        if bad:
            raise ParameterError(f"{name}: {bad[0]}: unknown parameter; allowed: {', '.join(allowed) or 'none'}")
    try:
        return factory(**params)
    except TypeError as e:
        raise ParameterError(f"planner {name!r}: bad parameters {sorted(params)} ({e})") from None


class FunctionPlanner:
    """Wrap ``fn(problem) -> dict[tensor id, Decision] | Plan`` into a planner.

    >>> p = FunctionPlanner("all-keep", lambda pr: {t: Decision.KEEP for t in pr.planning_ids})
    """

    def __init__(self, name: str, fn: Callable, tags: Tags | None = None, **params):
        self.name, self.fn, self.tags, self.params = name, fn, tags or Tags(), params

    def plan(self, problem) -> Plan:
        check_problem(problem, self.name)
        t0 = time.perf_counter()
        out = self.fn(problem, **self.params)
        if isinstance(out, Plan):
            return out
        return Plan(out, planner=self.name, params=self.params, problem_key=problem.key,
                    info=SolveInfo(Status.FEASIBLE, wall_s=time.perf_counter() - t0))


def make_plan(problem, decisions: dict, planner: str, params: dict, t0: float, *,
              issue_points=None, status: Status | None = None, message: str = "",
              judge: bool = True, hold_points=None, result=None) -> Plan:
    """Assemble a ``Plan``; with ``judge`` the simulator sets status FEASIBLE or INFEASIBLE and
    the objective (step seconds). ``result``: the plan's ``simulate(problem, plan, detail=False)``
    when the caller has it already (the plan is then not simulated again)."""

    plan = Plan(decisions, issue_points=issue_points or {}, planner=planner, params=params,
                problem_key=problem.key, hold_points=hold_points or {})
    if judge:
        r = result if result is not None else simulate(problem, plan, detail=False)
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

    for mod in ("baselines", "chen", "dp", "capuchin", "slack", "milp", "brute"):
        try:
            importlib.import_module(f"{__package__}.{mod}")
        except ModuleNotFoundError as e:
            if e.name != f"{__package__}.{mod}":
                raise


__all__ = ["Decision", "FunctionPlanner", "Planner", "Tags", "available", "check_params", "check_problem",
           "get", "make_plan", "register"]
