"""The timeline model: ``simulate(problem, plan) -> SimResult`` (docs/timeline.md)."""

from .result import Event, SimResult
from .schedule import Schedule, compile_schedule
from .simulate import default_issue_points, issue_points, simulate

__all__ = ["Event", "SimResult", "Schedule", "compile_schedule", "default_issue_points", "issue_points", "simulate"]
