"""The timeline model: ``simulate(problem, plan) -> SimResult`` (docs/timeline.md)."""

from .pipeline import Pipeline, pipeline_of
from .result import Event, SimResult
from .schedule import Schedule, compile_schedule
from .simulate import default_issue_points, issue_points, simulate

__all__ = ["Event", "Pipeline", "SimResult", "Schedule", "pipeline_of", "compile_schedule", "default_issue_points", "issue_points", "simulate"]
