"""SlackSwap: plan activation memory (keep / swap / recompute) for one transformer training step.

Data flows one way: models -> Graph -> (Hardware) -> CostModel -> Problem -> planner -> Plan ->
simulate -> SimResult -> experiments -> report. See DESIGN.md and docs/.
"""

from .costs import CostModel
from .errors import (
    BudgetError,
    ConfigError,
    GraphError,
    PlanError,
    SlackSwapError,
    UnknownNameError,
)
from .graph import Graph, Op, Tensor
from .plan import Decision, Plan, SolveInfo, Status, validate
from .problem import Problem
from .timeline import SimResult, simulate

__version__ = "0.1.0"

__all__ = [
    "BudgetError", "ConfigError", "CostModel", "Decision", "Graph", "GraphError", "Op", "Plan",
    "PlanError", "Problem", "SimResult", "SlackSwapError", "SolveInfo", "Status", "Tensor",
    "UnknownNameError", "__version__", "simulate", "validate",
]
