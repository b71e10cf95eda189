"""The saved-activation peak a planned step should reach, by the simulator's schedule
(docs/executor.md, "The saved-activation accounting"). Imports without torch.

>>> from slackswap import Decision, Plan, models
>>> from slackswap.torch import simulated_saved_peak
>>> g = models.build("tiny")
>>> keep = Plan({t.id: Decision.KEEP for t in g.planning_tensors()})
>>> simulated_saved_peak(g, keep) == g.saved_bytes()
True
"""

from __future__ import annotations

from ..core.errors import ParameterError, PlanError
from ..core.graph import Graph
from ..core.plan import Decision, Plan, problem_key
from . import _ledger
from ._check import check_decisions

__all__ = ["simulated_saved_peak"]


def simulated_saved_peak(graph: Graph, plan: Plan, *, problem=None, issue_points=None,
                         regions=None, swap: str | None = None) -> int:
    """The largest number of bytes of planning tensors (tensors some backward op saves) resident
    at one step of ``plan``'s schedule on ``graph``, with the lifetimes ``apply`` tracks: the
    value ``apply(...).stats.peak_saved_bytes`` of the real step is checked against.

    The issue stage of each swapped tensor is taken as ``apply`` takes it: ``issue_points``
    (swapped tensor id -> backward stage) when given, else as ``simulate`` places it on
    ``problem``, else the plan's own issue point or the tensor's first backward use.

    ``regions`` (``"layers"`` or a dict of op id -> region label; default: ``problem``'s, from
    ``Problem.with_regions``) and ``swap`` (``"save"`` or ``"recompute"``): the plan run as
    selective checkpointing of those regions runs it (``policy(plan, graph, swap=swap)``), by the
    region schedule: the value ``CheckpointPlanPolicy.track()``'s ``peak_saved_bytes`` of the
    real step is checked against.
    """
    where = "simulated_saved_peak"
    if not isinstance(graph, Graph):
        raise ParameterError(f"{where}: graph: expected a Graph; got {type(graph).__name__}")
    if not isinstance(plan, Plan):
        raise ParameterError(f"{where}: plan: expected a Plan; got {type(plan).__name__}")
    check_decisions(plan, graph)
    if problem is not None:
        other = getattr(problem, "graph", None)
        if not isinstance(other, Graph) or (other is not graph and problem_key(other) != problem_key(graph)):
            got = f"one of {other.name!r}" if isinstance(other, Graph) else type(problem).__name__
            raise ParameterError(f"{where}: problem: expected a Problem built on this graph "
                                 f"({graph.name!r}); got {got}")
    if regions is None and problem is not None and getattr(problem, "regions", None) is not None:
        regions = problem.regions
        swap = problem.region_swap if swap is None else swap
    if regions is not None:
        return _region_peak(graph, plan, regions, "save" if swap is None else swap,
                            issue_points, where)
    if swap is not None:
        raise ParameterError(f"{where}: swap: only with regions (what a SWAP inside a checkpointed "
                             f"region becomes); got swap={swap!r} and no regions")
    if issue_points is not None:
        _check_issue_points(graph, plan, issue_points, where)
    sched = _ledger.schedule(graph, plan)
    issue = _ledger.issue_stages(graph, plan, problem, issue_points, sched)
    return _ledger.simulated_saved_peak(graph, plan, issue)


def _region_peak(graph, plan, regions, swap, issue_points, where) -> int:
    from ..timeline.regions import check_regions, layer_regions  # the regions option only

    if isinstance(regions, str):
        if regions != "layers":
            raise ParameterError(f"{where}: regions: must be 'layers' or a dict of op id -> region "
                                 f"label; got {regions!r}")
        regions = layer_regions(graph)
    try:
        check_regions(graph, regions, swap)
    except ParameterError as e:
        raise ParameterError(f"{where}: {e}") from None
    if issue_points is not None:
        raise ParameterError(f"{where}: issue_points: not with regions (nothing is copied under "
                             "checkpointed regions)")
    if plan.hold_points:
        raise PlanError(f"{where}: plan: has hold points, which checkpointed regions do not take "
                        "(a region is replayed once per step)")
    return _ledger.region_saved_peak(graph, plan, regions, swap)


def _check_issue_points(graph, plan, points, where) -> None:
    if not isinstance(points, dict):
        raise ParameterError(f"{where}: issue_points: expected a dict of swapped tensor id -> "
                             f"backward stage; got {type(points).__name__}")
    swapped = set(plan.ids(Decision.SWAP))
    n = len(graph.ops)
    for t, k in points.items():
        if t not in swapped:
            raise PlanError(f"{where}: issue_points[{t!r}]: not a tensor the plan swaps; allowed: "
                            f"{sorted(swapped)[:10]}")
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < n:
            raise PlanError(f"{where}: issue_points[{t}]: must be a backward stage, an integer in "
                            f"0..{n - 1}; got {k!r}")
