"""Measured costs of a graph traced on cpu/cuda (no torch import; docs/trace.md).

>>> from slackswap.core.graph import Graph
>>> measured_costs(Graph("g", ops=(), tensors=()))
Traceback (most recent call last):
...
slackswap.core.errors.ConfigError: graph.spec: graph 'g' has no measured op times (trace on cpu or cuda)
"""

from __future__ import annotations

from ..core.costs import CostModel, optimizer_seconds, transfer_seconds
from ..core.errors import ConfigError


def measured_costs(graph, hardware=None) -> CostModel:
    """A ``"measured"`` ``CostModel`` from ``graph.spec.op_times_s`` (fwd, bwd seconds per op).

    Transfers and the optimizer come from ``hardware`` (its link; Adam over ``static_bytes``);
    without hardware they are 0. ``profile.save(path, graph, costs)`` writes the pair in the
    profile format of docs/profile.md.
    """
    times = getattr(graph.spec, "op_times_s", None)
    if times is None:
        raise ConfigError(f"graph.spec: graph {graph.name!r} has no measured op times "
                          "(trace on cpu or cuda)")
    if len(times) != len(graph.ops):
        raise ConfigError(f"graph.spec.op_times_s: {len(times)} entries for {len(graph.ops)} ops")
    n = len(graph.tensors)
    if hardware is not None:
        d2h, h2d = (tuple(x.tolist()) for x in transfer_seconds(graph, hardware.link))
        opt, duplex = optimizer_seconds(graph.static_bytes, hardware), hardware.link.duplex_factor
    else:
        d2h = h2d = (0.0,) * n
        opt, duplex = 0.0, 1.0
    return CostModel("measured", tuple(f for f, _ in times), tuple(b for _, b in times), d2h, h2d,
                     opt, duplex)
