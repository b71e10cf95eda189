"""SlackSwap: plan activation memory (keep / swap / recompute) for one transformer training step.

Data flows one way: models -> Graph -> (Hardware) -> CostModel -> Problem -> planner -> Plan ->
simulate -> SimResult -> experiments -> report. See docs/.
"""

from .costs import CostModel
from .errors import (
    BudgetError,
    CapacityWarning,
    ConfigError,
    GraphError,
    PlanError,
    SlackSwapError,
    SlackSwapWarning,
    UnknownNameError,
)
from .graph import Graph, Op, Tensor
from .plan import Decision, Plan, SolveInfo, Status, validate
from .problem import Problem
from .timeline import SimResult, simulate

__version__ = "0.1.0"

__all__ = [
    "BudgetError", "CapacityWarning", "ConfigError", "CostModel", "Decision", "Graph", "GraphError", "Op", "Plan",
    "PlanError", "Problem", "SimResult", "SlackSwapError", "SlackSwapWarning", "SolveInfo", "Status", "Tensor",
    "UnknownNameError", "__version__", "simulate", "validate",
]
