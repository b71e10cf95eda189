"""The exact MILP planner ``milp`` (docs/milp.md); its models and solvers are in ``slackswap.mip``."""

from .planner import MilpPlanner

__all__ = ["MilpPlanner"]
