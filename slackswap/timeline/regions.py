"""Checkpointed regions: a plan judged as selective activation checkpointing runs it
(docs/regions.md, "Checkpointed regions"; ``slackswap.torch.policy``).

``simulate(problem, plan, regions=...)`` compiles the schedule with ``region_schedule`` instead of
the default producer-chain recompute, then times it with the same core.
"""

from __future__ import annotations

import numpy as np

from ..core.errors import ParameterError, PlanError
from ..core.graph import Graph
from ..core.plan import Decision
from .schedule import Schedule, compile_schedule

__all__ = ["SWAP_AS", "check_regions", "layer_regions", "region_decisions", "region_memory",
           "region_schedule", "written_in_place"]

#: what a SWAP decision becomes inside a region (selective checkpointing cannot offload eagerly)
SWAP_AS = ("save", "recompute")


def layer_regions(graph: Graph) -> dict[int, int]:
    """One region per layer (``Op.layer``), as per-layer checkpointing wraps a model's blocks;
    ops without a layer (embeddings, head, loss) are in no region."""
    _check_graph(graph)
    return {op.id: op.layer for op in graph.ops if op.layer is not None}


def _check_graph(graph) -> None:
    if not isinstance(graph, Graph):
        raise ParameterError(f"graph: expected a Graph; got {type(graph).__name__}")


def check_regions(graph: Graph, regions, swap: str = "save") -> None:
    """``ParameterError`` unless ``regions`` maps op ids of ``graph`` to region labels."""
    _check_graph(graph)
    if not isinstance(regions, dict):
        raise ParameterError(f"regions: expected a dict of op id -> region label; got "
                             f"{type(regions).__name__}")
    n = len(graph.ops)
    for o, r in regions.items():
        if isinstance(o, bool) or not isinstance(o, int) or not 0 <= o < n:
            raise ParameterError(f"regions: keys must be op ids, integers in 0..{n - 1}; got {o!r}")
        if r is None or isinstance(r, float):
            raise ParameterError(f"regions[{o}]: a region label must be an int or a str; got {r!r}")
    if swap not in SWAP_AS:
        raise ParameterError(f"swap: must be one of {', '.join(SWAP_AS)}; got {swap!r}")


def region_decisions(graph: Graph, decisions: dict, regions: dict, swap: str = "save"):
    """What ``decisions`` become when the regions are checkpointed with ``policy(plan, graph)``:
    ``(effective, cached)``.

    ``effective`` (tensor id -> Decision; non-planning tensors too): KEEP for every tensor made
    outside the regions (autograd keeps what those ops save; checkpointing holds a region's
    inputs), for a tensor a region makes and another region or an op outside reads (the same),
    and for every output of a ``cached`` op; the plan's decision otherwise, a SWAP as ``swap``
    says, a tensor of an op ``written_in_place`` recomputed. ``cached``: the ops whose output the
    policy saves (``MUST_SAVE``): those that made a tensor the plan keeps (or swaps, with
    ``swap="save"``), except those written in place.
    """
    check_regions(graph, regions, swap)
    tensors = graph.tensors
    saved = {Decision.KEEP} | ({Decision.SWAP} if swap == "save" else set())
    written = written_in_place(graph)
    cached = frozenset(t.producer for t in tensors
                       if t.producer is not None and regions.get(t.producer) is not None
                       and t.producer not in written and decisions.get(t.id) in saved)
    eff = {}
    for t in tensors:
        if t.producer is None:
            continue
        r = regions.get(t.producer)
        read_in = {regions.get(o) for o in graph.consumers[t.id]} | {
            regions.get(o) for o in graph.saved_by[t.id]}
        if r is None:
            if t.id in decisions or read_in - {None}:      # saved outside, or a region's input
                eff[t.id] = Decision.KEEP
        elif (t.producer in cached or read_in - {r, None}
              or any(regions.get(o) != r for o in graph.saved_by[t.id])):
            eff[t.id] = Decision.KEEP
        elif t.id in decisions:
            d = decisions[t.id]
            eff[t.id] = Decision.RECOMPUTE if d is Decision.SWAP or t.producer in written else d
    return eff, cached


def written_in_place(graph: Graph) -> frozenset[int]:
    """Ops of a traced graph whose output selective checkpointing cannot cache, so the policy
    recomputes them (docs/policy.md): in-place calls, and ops the trace fused in-place writes
    into. Read from ``graph.spec`` (``aten_ops``, ``call_ops``); empty for other graphs."""
    spec = graph.spec
    names = getattr(spec, "aten_ops", ())
    call_ops = getattr(spec, "call_ops", ())
    if not (names and call_ops):
        return frozenset()
    out = set()
    for name, op in zip(names, call_ops, strict=False):
        parts = name.split(".")
        if op >= 0 and len(parts) >= 2 and parts[1].endswith("_") and not parts[1].startswith("_"):
            out.add(op)    # its own op (a write of its own), or the op it was fused into
    return frozenset(out)


def region_schedule(graph: Graph, decisions: dict, regions: dict, swap: str = "save"):
    """``(effective planning decisions, Schedule)`` of ``decisions`` run under selective
    checkpointing of ``regions``."""
    check_regions(graph, regions, swap)
    eff, cached = region_decisions(graph, decisions, regions, swap)
    planning = {t: eff[t] for t in decisions}
    if any(d is Decision.SWAP for d in planning.values()):  # pragma: no cover - mapped above
        raise PlanError("regions: a swap left in a checkpointed plan")
    sched: Schedule = compile_schedule(graph, eff, regions=regions, cached=cached)
    return planning, sched


def region_memory(problem, decisions: dict):
    """Bytes counted at every step when ``decisions`` run under the checkpointed regions of
    ``problem`` (``Problem.with_regions``): under regions every decision runs as KEEP or
    RECOMPUTE, no copy, so the simulator's accounted memory is the region schedule's static
    memory, whole bytes, exact (``timeline.memory_bound`` returns this for such a problem)."""
    _, sched = region_schedule(problem.graph, decisions, problem.regions, problem.region_swap)
    return sched.static_memory().astype(np.float64)
