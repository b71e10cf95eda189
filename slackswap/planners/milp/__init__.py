"""The exact MILP planner ``milp`` (docs/milp.md): ``milp_planner`` (``MilpPlanner``), ``beyond``
(beyond the exact model), ``incumbent`` (the incumbent search), ``solution`` (what both share),
``clock`` (the time limit); its models and solvers are in ``slackswap.mip``."""

from .milp_planner import MilpPlanner

__all__ = ["MilpPlanner"]
