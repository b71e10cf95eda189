"""The plan file schema (``Plan.save`` / ``Plan.load``, version 1; docs/errors.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from .plan import Status
from .schema import NonNegFloat, NonNegInt, Schema


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
