"""SlackSwap: plan activation memory (keep / swap / recompute) for one transformer training step.

Data flows one way: models -> Graph -> (Hardware) -> CostModel -> Problem -> planner -> Plan ->
simulate -> SimResult -> experiments -> report. See docs/.
"""

from .core.costs import CostModel
from .core.errors import (
    BudgetError,
    CapacityWarning,
    ConfigError,
    GraphError,
    PlanError,
    SlackSwapError,
    SlackSwapWarning,
    UnknownNameError,
)
from .core.graph import Graph, Op, Tensor
from .core.plan import Decision, Plan, SolveInfo, Status, validate
from .timeline import SimResult, simulate
from .timeline.problem import Problem

__version__ = "0.1.0"

__all__ = [
    "BudgetError", "CapacityWarning", "ConfigError", "CostModel", "Decision", "Graph", "GraphError", "Op", "Plan",
    "PlanError", "Problem", "SimResult", "SlackSwapError", "SlackSwapWarning", "SolveInfo", "Status", "Tensor",
    "UnknownNameError", "__version__", "simulate", "validate",
]
