"""Is a plan for this traced graph? (docs/executor.md, "API")"""

from __future__ import annotations

from ..core.errors import ExecutionError, ParameterError, PlanError
from ..core.graph import Graph
from ..core.plan import check_hold_points, problem_key


def check_plan(plan, graph) -> None:
    """Raise unless ``graph`` is a traced graph and ``plan`` decides exactly its planning tensors."""
    if not isinstance(graph, Graph):
        raise ParameterError(f"graph: expected the Graph of slackswap.torch.trace; got "
                             f"{type(graph).__name__}")
    info = graph.spec
    if not hasattr(info, "pack_order") or not hasattr(info, "aten_ops"):
        raise ExecutionError(f"graph: {graph.name!r} is not a traced graph (slackswap.torch.trace); "
                             "apply needs its pack order and aten ops")
    check_decisions(plan, graph)


def check_decisions(plan, graph) -> None:
    """Raise ``PlanError`` unless ``plan`` decides exactly the planning tensors of ``graph`` (and
    its hold points are valid there)."""
    if plan.problem_key is not None and plan.problem_key != problem_key(graph):
        raise PlanError(f"plan: made for another graph (key {plan.problem_key}, {graph.name!r} has "
                        f"{problem_key(graph)})")
    planning = {t.id for t in graph.planning_tensors()}
    if set(plan.decisions) != planning:
        miss, extra = sorted(planning - set(plan.decisions)), sorted(set(plan.decisions) - planning)
        raise PlanError(f"plan.decisions: does not match the planning tensors of {graph.name!r} "
                        f"(missing {miss[:5]}, not planning {extra[:5]})")
    check_hold_points(graph, plan)


def check_device(device, where: str):
    """Return ``torch.device(device)`` once it is known to exist on this machine: ``cuda``,
    ``cuda:N`` and ``mps`` are checked before any work, so a missing driver is one line."""
    import torch

    if isinstance(device, torch.device):
        dev = device
    else:
        if not isinstance(device, str):
            raise ParameterError(f"{where}: device: expected a device name ('cpu', 'cuda', 'cuda:0', "
                                 f"'mps', 'meta'); got {device!r}"[:200])
        try:
            dev = torch.device(device)
        except (RuntimeError, ValueError):
            raise ParameterError(f"{where}: device: expected a device name ('cpu', 'cuda', 'cuda:0', "
                                 f"'mps', 'meta'); got {device!r}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ParameterError(f"{where}: device: CUDA is not available on this machine; got {str(dev)!r}")
        n = torch.cuda.device_count()
        if dev.index is not None and dev.index >= n:
            raise ParameterError(f"{where}: device: must be one of cuda:0..cuda:{n - 1}; got {str(dev)!r}")
    elif dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ParameterError(f"{where}: device: MPS is not available on this machine; got {str(dev)!r}")
    return dev
