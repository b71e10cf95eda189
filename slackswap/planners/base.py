"""Planner protocol, tags and registry (docs/planners.md).

A planner is a class with ``name``, ``tags`` and ``plan(problem) -> Plan``; its constructor only
stores parameters. ``get("milp", time_limit_s=60)`` builds a registered planner by name.

>>> from slackswap import planners
>>> "keep-all" in planners.available()
True
"""

from __future__ import annotations

import copy
import functools
import importlib
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import UnionType
from typing import (
    Annotated,
    Any,
    ClassVar,
    Literal,
    Protocol,
    TypeVar,
    Union,
    get_args,
    get_origin,
    runtime_checkable,
)

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
    #: (optional, class attribute) True when ``plan`` judges its candidates by the problem's own
    #: ``simulate`` with checkpointed regions (``Problem.with_regions``) and never returns hold
    #: points there; otherwise ``register`` plans such a problem by bisection on the budget
    #: (``planners._regions``; docs/regions.md, "Planning for checkpointed regions")

    def plan(self, problem) -> Plan: ...


_REGISTRY: dict[str, Callable[..., Planner]] = {}


def check_params(planner: str, schema: type[S], **params) -> S:
    """A planner's parameters parsed by its declared ``schema`` (strict types: ``"no"`` is not a
    boolean, ``True`` is not a number); a bad one raises ``ParameterError`` naming
    ``<planner>: <parameter>`` and what was expected."""
    return parse(schema, params, planner, exc=ParameterError)


class NoParams(Schema):
    """A planner without parameters."""


def _type_text(ann) -> str:
    """A field's type as the docs and ``slackswap planners NAME`` write it."""
    origin = get_origin(ann)
    if origin is Literal:
        return " | ".join(repr(a) for a in get_args(ann))
    if origin is Annotated:
        base, *extra = get_args(ann)
        return _type_text(base) + _bounds([m for e in extra for m in getattr(e, "metadata", [e])])
    if origin in (Union, UnionType):
        return " | ".join(_type_text(a) for a in get_args(ann))
    if ann is type(None):
        return "None"
    return getattr(ann, "__name__", str(ann))


_BOUNDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))


def _bounds(metadata) -> str:
    bounds = [f"{op} {getattr(m, k)}" for m in metadata for k, op in _BOUNDS if hasattr(m, k)]
    return (" " + ", ".join(bounds)) if bounds else ""


def param_rows(schema: type[Schema]) -> list[tuple[str, str, str, str]]:
    """``(name, type, default, description)`` of each field of a planner's ``Params``, in
    declaration order: the one source of its constructor, ``params``, ``slackswap planners NAME``
    and the "Parameters" table of docs/planners.md."""
    out = []
    for name, f in schema.model_fields.items():
        ann = f.annotation
        typ = _type_text(ann) + _bounds(f.metadata)
        out.append((name, typ, repr(f.default), f.description or ""))
    return out


def params_signature(schema: type[Schema]) -> inspect.Signature:
    """The constructor's signature derived from ``schema``: one keyword (or positional, in
    declaration order) argument per field, with its default."""
    return inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=f.default,
                                                annotation=_type_text(f.rebuild_annotation()))
                              for n, f in schema.model_fields.items()])


class Parameterised:
    """Base of a planner whose parameters are declared once, in its ``Params`` schema (a
    ``Field(description=...)`` each). The constructor (``__init__``, its signature), ``params``,
    ``slackswap planners NAME`` and the "Parameters" table of docs/planners.md are derived from it.

    The constructor parses the arguments by ``Params`` (``check_params``: a bad one raises
    ``ParameterError`` naming ``<planner>: <parameter>``), stores each as an attribute and then
    calls ``_checked()`` (a planner's further checks, e.g. an output path); ``params`` is every
    field's current value, in declaration order."""

    name: ClassVar[str] = ""
    Params: ClassVar[type[Schema]] = NoParams

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls.__signature__ = params_signature(cls.Params)

    def __init__(self, *args, **kwargs):
        fields = list(self.Params.model_fields)
        if len(args) > len(fields):
            raise ParameterError(f"{self.name}: expected at most {len(fields)} positional parameters "
                                 f"({', '.join(fields) or 'none'}); got {len(args)}")
        given = dict(zip(fields, args, strict=False))
        for k, v in kwargs.items():
            if k not in self.Params.model_fields:
                raise ParameterError(f"{self.name}: {k}: unknown parameter; allowed: {', '.join(fields) or 'none'}")
            if k in given:
                raise ParameterError(f"{self.name}: {k}: given twice (by position and by name); got {v!r}")
            given[k] = v
        self._store(check_params(self.name, self.Params, **given))
        self._checked()

    def _store(self, p: Schema) -> None:
        for k in self.Params.model_fields:
            setattr(self, k, getattr(p, k))

    def _checked(self) -> None:
        """Checks beyond ``Params`` after the parameters are stored (none by default)."""

    @property
    def params(self) -> dict[str, Any]:
        """Every parameter's current value, in declaration order (recorded in each plan)."""
        return {k: getattr(self, k) for k in self.Params.model_fields}


def check_problem(problem, who: str):
    """Refuse anything but a ``Problem`` as the argument of ``plan``."""

    return check_type(problem, Problem, f"{who}.plan(problem)",
                      "a Problem (slackswap.Problem.build(model, hardware, budget))", ParameterError)


def _checked_plan(plan: Callable, name: str) -> Callable:
    @functools.wraps(plan)
    def wrapper(self, problem, *args, **kwargs):
        check_problem(problem, name)
        if problem.regions is not None and not getattr(self, "plans_regions", False):
            from ._regions import plan_for_regions  # a problem with checkpointed regions only

            def run(p, time_limit_s=None):   # the call's share of the planner's time limit
                me = self
                if time_limit_s is not None:
                    me = copy.copy(self)
                    me.time_limit_s = time_limit_s
                return plan(me, p, *args, **kwargs)

            return plan_for_regions(run, problem, name, dict(getattr(self, "params", {}) or {}),
                                    time_limit_s=getattr(self, "time_limit_s", None))
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


def planner_class(name: str):
    """The class (or factory) registered as ``name`` (unknown name lists known ones)."""
    _load_builtin()
    check_type(name, str, "planner", "a planner name (a string)", ParameterError)
    if name not in _REGISTRY:
        raise UnknownNameError("planner", name, list(_REGISTRY))
    return _REGISTRY[name]


def param_names(name: str) -> list[str]:
    """The parameters of the planner registered as ``name``, from its constructor's signature."""
    try:
        sig = inspect.signature(planner_class(name))
    except (TypeError, ValueError):
        return []
    return [k for k, p in sig.parameters.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]


def params_text(name: str) -> str:
    """``slackswap planners NAME``: one line per parameter, ``name: type = default``, then its
    description, indented (from the planner's ``Params``)."""
    cls = planner_class(name)
    schema = getattr(cls, "Params", None)
    lines = [f"{name}: {(cls.__doc__ or '').strip().splitlines()[0] if cls.__doc__ else ''}".rstrip()]
    if schema is None:
        lines += [f"  {k}" for k in param_names(name)] or ["  (parameters not declared)"]
        return "\n".join(lines)
    rows = param_rows(schema)
    if not rows:
        lines.append("  (no parameters)")
    for k, typ, default, desc in rows:
        lines.append(f"  {k}: {typ} = {default}")
        if desc:
            lines.append(f"      {desc}")
    return "\n".join(lines)


class FunctionPlanner:
    """Wrap ``fn(problem) -> dict[tensor id, Decision] | Plan`` into a planner.

    >>> p = FunctionPlanner("all-keep", lambda pr: {t: Decision.KEEP for t in pr.planning_ids})
    """

    def __init__(self, name: str, fn: Callable, tags: Tags | None = None, **params):
        self.name, self.fn, self.tags, self.params = name, fn, tags or Tags(), params

    def plan(self, problem) -> Plan:
        check_problem(problem, self.name)
        if problem.regions is not None:
            from ._regions import plan_for_regions  # a problem with checkpointed regions only

            return plan_for_regions(self._plan, problem, self.name, self.params)
        return self._plan(problem)

    def _plan(self, problem) -> Plan:
        t0 = time.perf_counter()
        out = self.fn(problem, **self.params)
        if isinstance(out, Plan):
            return out
        return Plan(out, planner=self.name, params=self.params, problem_key=problem.key,
                    info=SolveInfo(Status.FEASIBLE, wall_s=time.perf_counter() - t0))


def make_plan(problem, decisions: dict, planner: str, params: dict, t0: float, *,
              issue_points=None, status: Status | None = None, message: str = "",
              judge: bool = True, hold_points=None, result=None, d2h_order=None) -> Plan:
    """Assemble a ``Plan``; with ``judge`` the simulator sets status FEASIBLE or INFEASIBLE and
    the objective (step seconds). ``result``: the plan's ``simulate(problem, plan, detail=False)``
    when the caller has it already (the plan is then not simulated again)."""

    plan = Plan(decisions, issue_points=issue_points or {}, d2h_order=d2h_order, planner=planner, params=params,
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


__all__ = ["Decision", "FunctionPlanner", "NoParams", "Parameterised", "Planner", "Tags", "available", "check_params",
           "check_problem", "get", "make_plan", "param_names", "param_rows", "params_signature", "params_text",
           "planner_class", "register"]
