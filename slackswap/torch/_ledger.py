"""Saved-activation accounting, step by step, for a run and for the simulator (docs/executor.md).

Both sides count the same thing: the bytes of *planning tensors* (tensors some backward op saves)
resident on the device at each compute step, with the lifetimes of docs/timeline.md, "Forward lifetimes" to "Backward: recompute, prefetch, gradients":
a tensor is counted from its producer's forward step; a KEEP tensor until its last backward use;
a RECOMPUTE or SWAP tensor until its last forward use, then again from its re-run step (RECOMPUTE)
or the first step of its issue stage (SWAP) until its last backward use. Gradients, workspaces,
step inputs and unsaved intermediates are left out; the D2H copy of a SWAP tensor is taken as done
when its forward use ends (on CPU the copy is synchronous, in the pack hook).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..core.plan import Decision
from ..timeline.reference import _EPS, time_tolerance
from ..timeline.schedule import compile_schedule
from ..timeline.simulate import issue_points, simulate


def peak_of(spans, n_steps: int) -> int:
    """Largest sum over steps of ``bytes`` of the ``(first, last, bytes)`` spans alive there."""
    if not spans:
        return 0
    diff = np.zeros(n_steps + 2, dtype=np.int64)
    for a, f, b in spans:
        diff[a] += b
        diff[f + 1] -= b
    return int(np.cumsum(diff).max())


def _planning_spans(graph, sched) -> list[tuple[int, int, int]]:
    """``(first, last, bytes)`` of every fixed life of a planning tensor in ``sched``."""
    planning = {t.id for t in graph.planning_tensors()}
    return [(a, f, graph.tensors[tid].bytes) for tid, lives in sched.tensor_spans.items()
            if tid in planning for a, f in lives]


def simulated_saved_peak(graph, plan, issue_points: dict[int, int]) -> int:
    """The saved-activation peak of ``plan`` on ``graph`` by the simulator's compiled schedule
    (same decisions, same issue stages), counted as described in this module's docstring."""

    sched = compile_schedule(graph, plan.decisions, plan.hold_points)
    spans = _planning_spans(graph, sched)
    for tid, (p, lf) in sched.swap_fwd.items():
        spans.append((p, lf, graph.tensors[tid].bytes))
    for tid, (_, f) in sched.swap_bwd.items():
        spans.append((sched.stage_first_step[issue_points[tid]], f, graph.tensors[tid].bytes))
    return peak_of(spans, sched.n_steps)


def region_saved_peak(graph, plan, regions: dict, swap: str) -> int:
    """The saved-activation peak of ``plan`` run under selective checkpointing of ``regions``:
    the planning tensors' lives in the region schedule (``timeline.regions.region_schedule``),
    counted as described in this module's docstring (nothing is copied there)."""
    from ..timeline.regions import region_schedule  # the checkpointed-regions option only

    _, sched = region_schedule(graph, plan.decisions, regions, swap)
    return peak_of(_planning_spans(graph, sched), sched.n_steps)


def issue_stages(graph, plan, problem=None, issue_points=None, sched=None) -> dict[int, int]:
    """The issue stage of every swapped tensor of ``plan`` as ``apply`` uses it: ``issue_points``
    when given, else as ``simulate`` places them on ``problem``, else the plan's own points and
    first use for the rest."""
    sched = sched or schedule(graph, plan)
    if issue_points is None and problem is not None:
        issue_points = resolved_issue_points(problem, plan, sched if problem.graph is graph else None)
    elif issue_points is None:
        issue_points = dict(plan.issue_points)
    first = first_use_stages(graph, plan, sched)
    return {t: issue_points.get(t, first[t]) for t in plan.ids(Decision.SWAP) if t in first}


def schedule(graph, plan):
    """The simulator's compiled schedule of ``plan`` (``timeline.compile_schedule``), to pass to
    the functions below when several are needed, so it is compiled once."""

    return compile_schedule(graph, plan.decisions, plan.hold_points)


def first_use_stages(graph, plan, sched=None) -> dict[int, int]:
    """Per swapped tensor: the backward stage of its first use (the latest allowed issue point)."""
    sched = sched or schedule(graph, plan)
    return {t: sched.stage[u] for t, (u, _) in sched.swap_bwd.items()}


def h2d_order(graph, plan, sched=None) -> list[int]:
    return (sched or schedule(graph, plan)).h2d_queue()


def last_use_stages(graph, plan, sched=None) -> dict[int, int]:
    """Per tensor read in the backward pass (by a backward op or a re-run): the stage of its last
    read in the simulator's schedule (docs/timeline.md, "Backward: recompute, prefetch, gradients"), hold points included."""
    sched = sched or schedule(graph, plan)
    out = {}
    for s in range(sched.n_fwd, sched.n_steps):
        for t in sched.reads[s]:
            out[t] = sched.stage[s]
    return out


def resolved_issue_points(problem, plan, sched=None) -> dict[int, int]:
    """The issue stage of every swapped tensor as ``simulate`` places it (the plan's own points,
    the others by the budget rule of docs/timeline.md, "Backward: recompute, prefetch, gradients")."""

    return issue_points(problem, plan, schedule=sched)


def pack_ops(graph) -> tuple[int, ...]:
    """Per pack call of the trace: the graph op whose backward needs it (-1 when unknown).

    Pack calls come in forward op order and belong to an op that saves their tensor, so each is
    given the first op at or after the previous call's op that saves it.
    """
    info = graph.spec
    given = getattr(info, "pack_op", None)
    if given:
        return tuple(given)
    saves = [set(op.saves) for op in graph.ops]
    out, cur = [], 0
    for tid in info.pack_order:
        if tid < 0:
            out.append(-1)
            continue
        o = next((i for i in range(cur, len(saves)) if tid in saves[i]), None)
        if o is None:
            o = next((i for i in graph.saved_by[tid]), -1)
        out.append(o)
        cur = max(cur, o)
    return tuple(out)


def count_decisions(plan) -> dict[str, int]:
    return {d.value: len(plan.ids(d)) for d in Decision}


@dataclass(frozen=True)
class HoldSchedule:
    """Per compute step of the simulator's timeline, the swapped sources it releases before that
    step runs (docs/timeline.md, "Memory and the budget"): ``releases[s]``, in D2H-queue order,
    every source released at step ``s`` (its copy had ended when the step was reached, or the
    step waited for it); ``waited[s]``: those the step waited for. ``accounted_peak``: the largest
    accounted memory of any step (pending sources included), which a run that releases each
    source at its step holds at most. ``fits``: the simulation was feasible at the problem's
    budget (else the waits are those of the simulation without a limit)."""

    releases: dict
    waited: dict
    accounted_peak: int
    sim_peak: int
    fits: bool

    def waits(self) -> list[tuple[int, int]]:
        """``(step, tensor id)`` of every release, in step order, then D2H-queue order."""
        return [(s, t) for s in sorted(self.releases) for t in self.releases[s]]


def hold_schedule(problem, plan, issue: dict[int, int]) -> HoldSchedule:
    """The releases of swapped sources per compute step in ``simulate``'s timeline of ``plan`` with
    the issue stages ``issue`` (every swapped tensor's, as ``apply`` uses them). When the plan
    does not fit ``problem``'s budget, the timeline is simulated without a limit (no step waits).
    Follows the simulator's rule step by step: at step ``s``, reached at the end of step ``s-1``,
    the pending sources (forward use over) whose copy ended by then are released in queue order;
    while the accounted memory is over the budget, the next pending source is waited for."""
    planned = replace(plan, issue_points={t: issue[t] for t in sorted(issue)})
    res = simulate(problem, planned)
    fits = res.feasible
    judge = problem
    if not res.feasible:
        judge = problem.with_budget(None)
        res = simulate(judge, planned)
    g = problem.graph
    sched = schedule(g, plan)
    sizes = [t.bytes for t in g.tensors]
    acc = sched.static_memory().astype(np.int64)
    for t, (p, lf) in sched.swap_fwd.items():
        acc[p:lf + 1] += sizes[t]
    for t, k in issue.items():
        acc[sched.stage_first_step[k]:sched.swap_bwd[t][1] + 1] += sizes[t]
    compute = [e for e in res.events if e.stream == "compute"]
    ends = [e.end for e in compute]
    d2h = [(e.tensor, e.end) for e in res.events if e.stream == "d2h"]   # in queue order
    qpos = {t: i for i, (t, _) in enumerate(d2h)}
    pending_from: dict[int, list[int]] = {}
    for t, (_, lf) in sched.swap_fwd.items():
        pending_from.setdefault(lf + 1, []).append(t)
    budget = float(judge.budget_bytes)
    tol = time_tolerance(problem.costs)
    pend: list[int] = []            # queue positions, sorted
    pend_bytes = 0
    releases: dict[int, tuple] = {}
    waited: dict[int, tuple] = {}
    peak = 0
    for s in range(sched.n_steps):
        for t in pending_from.get(s, ()):
            pend.append(qpos[t])
            pend_bytes += sizes[t]
        pend.sort()
        reached = ends[s - 1] if s else 0.0
        out: list[int] = []
        while pend and d2h[pend[0]][1] <= reached + tol:
            out.append(d2h[pend.pop(0)][0])
        pend_bytes -= sum(sizes[t] for t in out)
        n_natural = len(out)
        while acc[s] + pend_bytes > budget + _EPS and pend:
            t = d2h[pend.pop(0)][0]
            out.append(t)
            pend_bytes -= sizes[t]
        if out:
            releases[s] = tuple(out)
        if len(out) > n_natural:
            waited[s] = tuple(out[n_natural:])
        peak = max(peak, int(acc[s]) + pend_bytes)
    return HoldSchedule(releases, waited, peak, res.peak_bytes, fits)
