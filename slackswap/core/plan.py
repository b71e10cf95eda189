"""Plans: a decision (KEEP, SWAP, RECOMPUTE) for every planning tensor, plus optional prefetch
issue points, D2H order and hold points (multi-level recompute, docs/timeline.md, "Backward: recompute, prefetch, gradients");
``validate(problem, plan)`` and a versioned JSON round trip.

Issue points are *backward stages*: stage ``j`` is the backward op of forward op ``j`` together
with the recompute steps run just before it. Stages run from ``n_ops - 1`` (the first, at the start
of the backward pass) down to 0. The H2D copy of a swapped tensor may start at the ready time of
the first step of its issue stage (that step reached and done waiting for memory); an issue point
must be at or before (i.e. ``>=``) the stage of the tensor's first backward use. See
docs/timeline.md.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from .errors import PlanError
from .paths import check_output, prepare_output, read_document
from .schema import NonNegFloat, NonNegInt, Schema, check_type, parse
from .schema import _short as _short_value

SCHEMA_VERSION = 1


class Decision(str, enum.Enum):
    KEEP = "keep"
    SWAP = "swap"
    RECOMPUTE = "recompute"

    @classmethod
    def parse(cls, value, field_name: str = "decision") -> Decision:
        if isinstance(value, Decision):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            raise PlanError(f"{field_name}: unknown decision {value!r}; allowed: keep, swap, recompute") from None


class Status(str, enum.Enum):
    """How a planner's plan stands. OPTIMAL: proven best (for exact planners, within the plans
    they search: docs/milp.md, "Status, warm start and what is proven"); FEASIBLE: the plan fits; INFEASIBLE: the plan does not
    fit (exact planners: no plan fits, proven); NO_PLAN_FOUND: an exact planner found no plan that
    fits but did not prove that none exists; TIME_LIMIT: stopped by a time limit with a plan that
    fits; ERROR: the solver failed."""

    OPTIMAL = "OPTIMAL"
    FEASIBLE = "FEASIBLE"
    INFEASIBLE = "INFEASIBLE"
    NO_PLAN_FOUND = "NO_PLAN_FOUND"
    TIME_LIMIT = "TIME_LIMIT"
    ERROR = "ERROR"


@dataclass(frozen=True)
class SolveInfo:
    """How a planner got its plan: status, objective and bound (seconds), gap, wall time."""

    status: Status = Status.FEASIBLE
    objective: float | None = None
    lower_bound: float | None = None
    gap: float | None = None
    wall_s: float = 0.0
    model_size: Mapping[str, int] = field(default_factory=dict)
    message: str = ""


@dataclass(frozen=True)
class Plan:
    """Decisions keyed by tensor id. ``problem_key`` ties the plan to the problem it was made for."""

    decisions: Mapping[int, Decision]
    issue_points: Mapping[int, int] = field(default_factory=dict)
    d2h_order: tuple[int, ...] | None = None
    planner: str = "manual"
    params: Mapping[str, Any] = field(default_factory=dict)
    info: SolveInfo = field(default_factory=SolveInfo)
    problem_key: str | None = None
    hold_points: Mapping[int, int] = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.decisions, Mapping):
            raise PlanError(f"Plan(decisions): expected a dict {{tensor id: Decision}}; got {_short(self.decisions)}")
        if not isinstance(self.issue_points, Mapping):
            raise PlanError(f"Plan(issue_points): expected a dict {{tensor id: stage}}; got {_short(self.issue_points)}")
        for name in ("decisions", "issue_points", "hold_points"):   # 1 and "1": one tensor, two entries
            entries = getattr(self, name)
            if isinstance(entries, Mapping) and not all(type(k) is int for k in entries):
                _once(entries, lambda k, n=name: _int(k, f"Plan.{n}[{k!r}]"), f"Plan.{name}", "expected each tensor once")
        object.__setattr__(self, "decisions", {
            k if type(k) is int else _int(k, f"Plan.decisions[{k!r}]"):
            v if type(v) is Decision else Decision.parse(v, f"Plan.decisions[{k!r}]")
            for k, v in self.decisions.items()})   # ints and Decisions as they are (the common case)
        object.__setattr__(self, "issue_points", {_int(k, f"Plan.issue_points[{k!r}]"): _int(v, f"Plan.issue_points[{k!r}]")
                                                  for k, v in self.issue_points.items()})
        if not isinstance(self.hold_points, Mapping):
            raise PlanError(f"Plan(hold_points): expected a dict {{tensor id: stage}}; got {_short(self.hold_points)}")
        object.__setattr__(self, "hold_points", {
            _int(k, f"Plan.hold_points[{k!r}]", "tensor id as the key"):
            _int(v, f"Plan.hold_points[{k!r}]", "backward stage as the value (docs/timeline.md, \"Backward: recompute, prefetch, gradients\")")
            for k, v in self.hold_points.items()})
        if self.d2h_order is not None:
            if isinstance(self.d2h_order, (str, bytes, Mapping)) or not hasattr(self.d2h_order, "__iter__"):
                raise PlanError(f"Plan(d2h_order): expected a list of tensor ids; got {_short(self.d2h_order)}")
            object.__setattr__(self, "d2h_order", tuple(_int(t, "Plan.d2h_order") for t in self.d2h_order))
        if not isinstance(self.info, SolveInfo):
            raise PlanError(f"Plan(info): expected a SolveInfo; got {_short(self.info)}")

    def ids(self, decision: Decision) -> list[int]:
        return sorted(t for t, d in self.decisions.items() if d is decision)

    def counts(self) -> dict[str, int]:
        return {d.value: sum(1 for v in self.decisions.values() if v is d) for d in Decision}

    def with_info(self, **kw) -> Plan:
        return replace(self, info=replace(self.info, **kw))

    # ---- JSON ----
    def to_dict(self) -> dict:
        info = self.info
        out = {
            "schema_version": SCHEMA_VERSION,
            "problem_key": self.problem_key,
            "planner": self.planner,
            "params": _jsonable(dict(self.params)),
            "decisions": {str(t): d.value for t, d in sorted(self.decisions.items())},
            "issue_points": {str(t): k for t, k in sorted(self.issue_points.items())},
            "d2h_order": list(self.d2h_order) if self.d2h_order is not None else None,
            "info": {"status": info.status.value, "objective": info.objective, "lower_bound": info.lower_bound,
                     "gap": info.gap, "wall_s": info.wall_s, "model_size": dict(info.model_size),
                     "message": info.message},
        }
        if self.hold_points:   # absent from single-level plans: their files are unchanged
            out["hold_points"] = {str(t): k for t, k in sorted(self.hold_points.items())}
        return out

    def save(self, path) -> None:
        """Write the plan as JSON; missing parent folders are created (as for every output)."""
        check_output(path, "Plan.save(path)")
        prepare_output(path).write_text(json.dumps(self.to_dict(), indent=1))

    @classmethod
    def from_dict(cls, d: Mapping, where: str = "plan file") -> Plan:
        """A plan from its JSON document, parsed by ``PlanFile`` (``PlanError`` names the field)."""
        if isinstance(d, Mapping):
            for name in ("decisions", "issue_points", "hold_points"):
                if isinstance(d.get(name), Mapping):
                    _once(d[name], _tensor_id, f"{where}: {name}", "expected each tensor once")
        doc = parse(PlanFile, d, where, exc=PlanError)
        i = doc.info
        info = SolveInfo(status=Status(i.status), objective=i.objective, lower_bound=i.lower_bound, gap=i.gap,
                         wall_s=i.wall_s, model_size=dict(i.model_size), message=i.message)
        return cls(decisions=doc.decisions, issue_points=doc.issue_points, d2h_order=doc.d2h_order,
                   hold_points=doc.hold_points, planner=doc.planner, params=doc.params, info=info,
                   problem_key=doc.problem_key)

    @classmethod
    def load(cls, path) -> Plan:
        p, d = read_document(path, "json", "plan file", PlanError)
        return cls.from_dict(d, p.name)


def _short(x) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def _once(entries: Mapping, as_id, field: str, expected: str) -> None:
    """Raise ``PlanError`` when two keys of ``entries`` name the same tensor (``"1"``, ``"01"``,
    ``1``): a plan file or dict that decides a tensor twice would silently keep one decision."""
    first: dict = {}
    for k in entries:
        t = as_id(k)
        if isinstance(t, int) and t in first:
            raise PlanError(f"{field}[{k!r}]: {expected}; got tensor {t} again (already given as {first[t]!r})")
        first.setdefault(t, k)


def _int(x, field: str, what: str = "tensor id or stage") -> int:
    """A tensor id or stage: an int (numpy ints too) or a string of digits; never a bool or float."""
    if isinstance(x, bool) or isinstance(x, float):
        raise PlanError(f"{field}: expected an integer {what}; got {x!r}")
    try:
        return int(x)
    except (TypeError, ValueError):
        raise PlanError(f"{field}: expected an integer {what}; got {_short(x)}") from None


def _jsonable(x):
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return str(x)


def problem_key(graph) -> str:
    """A fingerprint of a graph's planning tensors: a plan made for another problem is refused."""
    h = hashlib.sha256(graph.name.encode())
    for t in graph.planning_tensors():
        h.update(f"{t.id}:{t.bytes}:{t.producer};".encode())
    return h.hexdigest()[:16]


def validate(problem, plan: Plan) -> None:
    """Raise ``PlanError`` unless ``plan`` decides every planning tensor of ``problem`` exactly
    once, swaps only swappable and recomputes only recomputable tensors, and its issue points,
    hold points and D2H order are in range."""
    if not all(hasattr(problem, a) for a in ("graph", "planning_ids", "key")):
        # a Problem by what validation reads of it (Problem is built above this module: timeline/)
        raise PlanError(f"problem: expected a Problem (slackswap.Problem.build(...)); "
                        f"got {_short_value(problem)} ({type(problem).__name__})")
    check_type(plan, Plan, "plan", "a Plan (from a planner's plan(problem), Plan(...) or Plan.load(path))",
               PlanError)
    g = problem.graph
    if plan.problem_key is not None and plan.problem_key != problem.key:
        raise PlanError(f"plan: made for another problem (key {plan.problem_key}, this problem {problem.key})")
    planning = set(problem.planning_ids)
    got = set(plan.decisions)
    missing, extra = sorted(planning - got), sorted(got - planning)
    if missing:
        names = ", ".join(f"{t} ({g.tensors[t].name})" for t in missing[:5])
        raise PlanError(f"plan.decisions: {len(missing)} planning tensors have no decision: {names}"
                        + (" ..." if len(missing) > 5 else ""))
    if extra:
        raise PlanError(f"plan.decisions: tensors {extra[:5]} are not planning tensors of {g.name!r}")
    for t, d in plan.decisions.items():
        ten = g.tensors[t]
        if d is Decision.SWAP and not ten.swappable:
            raise PlanError(f"plan.decisions[{t}] ({ten.name}): swap of a non-swappable tensor")
        if d is Decision.RECOMPUTE and not ten.recomputable:
            raise PlanError(f"plan.decisions[{t}] ({ten.name}): recompute of a non-recomputable tensor")
    n = len(g.ops)
    for t, k in plan.issue_points.items():
        if plan.decisions.get(t) is not Decision.SWAP:
            raise PlanError(f"plan.issue_points[{t}]: only swapped tensors have an issue point")
        if not 0 <= k <= n - 1:
            raise PlanError(f"plan.issue_points[{t}]: stage {k} out of range 0..{n - 1}")
    check_hold_points(g, plan)
    if plan.d2h_order is not None:
        swaps = set(plan.ids(Decision.SWAP))
        if len(plan.d2h_order) != len(set(plan.d2h_order)) or set(plan.d2h_order) != swaps:
            raise PlanError("plan.d2h_order: must list every swapped tensor exactly once")


def check_hold_points(g, plan: Plan) -> None:
    """Raise ``PlanError`` unless every hold point of ``plan`` names a tensor of graph ``g`` that the
    backward pass regenerates (RECOMPUTE, or saved by no op) and a stage in range."""
    n = len(g.ops)
    for t, k in plan.hold_points.items():
        if not 0 <= t < len(g.tensors):
            raise PlanError(f"plan.hold_points[{t}]: no tensor {t} in {g.name!r} (ids 0..{len(g.tensors) - 1})")
        ten = g.tensors[t]
        if ten.producer is None or plan.decisions.get(t, Decision.RECOMPUTE) is not Decision.RECOMPUTE:
            what = "a step input" if ten.producer is None else f"a {plan.decisions[t].value.upper()} tensor"
            raise PlanError(f"plan.hold_points[{t}] ({ten.name}): {what} is never regenerated; hold points "
                            "are for RECOMPUTE tensors and tensors no op saves (drop this hold point)")
        if not 0 <= k <= n - 1:
            raise PlanError(f"plan.hold_points[{t}] ({ten.name}): stage {k} out of range 0..{n - 1} "
                            f"(the backward stages of {g.name!r}, one per op)")


# ---------------------------------------------------------------- the plan file schema
# (``Plan.save`` / ``Plan.load``, version 1; docs/errors.md)
def _tensor_id(value):
    """JSON object keys are strings: ``"12"`` is tensor 12."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return value


def _lower(value):
    return value.lower() if isinstance(value, str) else value


TensorId = Annotated[NonNegInt, BeforeValidator(_tensor_id)]
DecisionText = Annotated[Literal["keep", "swap", "recompute"], BeforeValidator(_lower)]
StatusText = Literal[tuple(s.value for s in Status)]   # the values of plan.Status, one list


class InfoFile(Schema):
    status: StatusText = "FEASIBLE"
    objective: float | None = None
    lower_bound: float | None = None
    gap: float | None = None
    wall_s: NonNegFloat = 0.0
    model_size: dict[str, NonNegInt] = Field(default_factory=dict)
    message: str = ""


class PlanFile(Schema):
    schema_version: Literal[1]
    problem_key: str | None = None
    planner: str = "manual"
    params: dict[str, Any] = Field(default_factory=dict)
    decisions: dict[TensorId, DecisionText]
    issue_points: dict[TensorId, NonNegInt] = Field(default_factory=dict)
    d2h_order: list[NonNegInt] | None = None
    hold_points: dict[TensorId, NonNegInt] = Field(default_factory=dict)
    info: InfoFile = Field(default_factory=InfoFile)
