"""Is a plan for this traced graph? (docs/executor.md, "API")"""

from __future__ import annotations

from ..core.errors import ExecutionError, PlanError
from ..core.plan import check_hold_points, problem_key


def check_plan(plan, graph) -> None:
    """Raise unless ``graph`` is a traced graph and ``plan`` decides exactly its planning tensors."""
    info = graph.spec
    if not hasattr(info, "pack_order") or not hasattr(info, "aten_ops"):
        raise ExecutionError(f"graph: {graph.name!r} is not a traced graph (slackswap.torch.trace); "
                             "apply needs its pack order and aten ops")
    if plan.problem_key is not None and plan.problem_key != problem_key(graph):
        raise PlanError(f"plan: made for another graph (key {plan.problem_key}, {graph.name!r} has "
                        f"{problem_key(graph)})")
    planning = {t.id for t in graph.planning_tensors()}
    if set(plan.decisions) != planning:
        miss, extra = sorted(planning - set(plan.decisions)), sorted(set(plan.decisions) - planning)
        raise PlanError(f"plan.decisions: does not match the planning tensors of {graph.name!r} "
                        f"(missing {miss[:5]}, not planning {extra[:5]})")
    check_hold_points(graph, plan)
