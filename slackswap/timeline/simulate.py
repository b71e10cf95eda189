"""The timeline simulator: the single judge of every plan (docs/timeline.md).

Three engines: the compute stream runs the compiled step sequence; the D2H engine copies swapped
tensors out in FIFO order (production order unless the plan gives another); the H2D engine copies
them back in FIFO order of first backward use. Every compute step, at its start, is checked
against the budget; when over, it waits for pending D2H copies (oldest first) to free their
sources. Nothing here is approximate: the waits and times are max-plus expressions of the plan's
decisions and the cost model, so the MILP can reproduce them exactly.

This module turns a plan into integer arrays and runs the compiled core (``_core.py``: schedule
compilation and timing); ``reference.py`` is the plain-Python statement of the same rules, and
``tests/test_simulate_core.py`` checks that both give the same results.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..core.errors import PlanError
from ..core.plan import Plan, validate
from .host import check_capacity
from .pipeline import PipelineRun, Unlimited, keep_all, pipeline_of
from .reference import default_issue_points, time_tolerance
from .result import Event, SimResult
from .schedule import KINDS as _KINDS  # indexed by _core.K_*
from .schedule import Schedule, core_arrays, default_d2h_order

_NO_ARRIVALS = np.zeros(0, np.float64)           # one GPU: no arrivals (time_core)
_NO_SOURCES = np.zeros(0, np.int64)


@functools.cache
def _compiled():
    """The compiled core, imported at the first simulation: ``import slackswap`` does not load
    numba (about half a second)."""
    from . import _core  # lazy: start-up cost (numba)

    return _core


def _ints(values, count: int) -> np.ndarray:
    return np.fromiter(values, np.int64, count)


class _Run:
    """One plan on one problem as arrays, its schedule compiled (or taken from ``schedule``) and
    timed by the core."""

    def __init__(self, problem, plan: Plan, schedule: Schedule | None):
        _core = _compiled()
        g = problem.graph
        ga = _core.graph_arrays(g)
        ca = _core.cost_arrays(problem.costs, time_tolerance)
        nt = len(ga.producer)
        codes, dec, hold = _core.encode(ga, plan.decisions, plan.hold_points)
        self.codes, self.core = codes, _core
        if schedule is None:
            (self.kind, self.op, self.stage, need_pos, stage_first, iva, ivf, ivb, first_use,
             last_use, self.hq) = _core.compile_plan(ga, dec, hold)
            swapped = dec == _core.D_SWAP
            sw_lf = np.where(swapped, np.maximum(ga.last_fwd, ga.producer), -1)
            default_q = ga.out_idx[swapped[ga.out_idx]]   # production order, then output position
        else:
            (self.kind, self.op, self.stage, need_pos, stage_first, iva, ivf, ivb, first_use,
             last_use, self.hq, sw_lf) = core_arrays(schedule, nt)
            default_q = None
        if plan.d2h_order is not None:
            self.q = np.array(plan.d2h_order, np.int64)
        elif default_q is not None:
            self.q = default_q
        else:
            self.q = np.array(default_d2h_order(g, schedule.swap_fwd), np.int64)
        self.given_t = _ints(plan.issue_points.keys(), len(plan.issue_points))
        self.given_k = _ints(plan.issue_points.values(), len(plan.issue_points))
        self.sw_lf = sw_lf
        (self.code, self.a, self.x, self.S, self.E, self.d2h_start, self.d2h_end, self.h2d_start,
         self.h2d_end, self.issue, self.stall_f, self.stall_b, self.recompute, _, self.times,
         self.curve) = _core.time_core(
            ga.n, self.kind, self.op, self.stage, need_pos, stage_first, iva, ivf, ivb, ga.bytes,
            ga.producer, sw_lf, first_use, last_use, self.hq, self.q, self.given_t, self.given_k,
            ca.fwd, ca.bwd, ca.d2h, ca.h2d, ca.opt, ca.duplex, float(problem.budget_bytes), ca.tol,
            _NO_ARRIVALS, _NO_SOURCES, _NO_ARRIVALS)
        self.ga, self.g, self.ideal = ga, g, ca.ideal

    def raise_bad_issue_point(self) -> None:
        """The reference's ``PlanError`` for an issue point after the first use (code 1)."""
        if self.code == 1:
            t, k, ju = int(self.given_t[self.a]), int(self.given_k[self.a]), int(self.x)
            raise PlanError(f"plan.issue_points[{t}]: stage {k} is after the first backward use "
                            f"(stage {ju}); allowed {ju}..{self.ga.n - 1}")

    def counts(self) -> dict[str, int]:
        """``plan.counts()`` from the decision codes."""
        return self.core.decision_counts(self.codes)


def memory_bound(problem, decisions) -> np.ndarray:
    """Bytes counted at every step of the schedule of ``decisions`` (tensor id -> Decision, no hold
    points) whatever the copy timing: the fixed lives (``Schedule.static_memory``) plus each
    swapped tensor over its forward life and from its first to its last backward use, which its
    issue stage can only extend (docs/timeline.md, "Memory and the budget"). A lower bound of the accounted
    memory at every step: over the budget anywhere, the simulator finds the plan infeasible.
    Computed on the compiled core's schedule, equal to summing ``compile_schedule``'s (whole
    bytes, exact), without building a ``Schedule``.

    On a problem with checkpointed regions (``Problem.with_regions``) the decisions run as
    keep/recompute only (no copies), so the accounted memory is the region schedule's static
    memory, exact: that is returned (``regions.region_memory``)."""
    if getattr(problem, "regions", None) is not None:
        from .regions import region_memory  # the checkpointed-regions option only

        return region_memory(problem, decisions)
    _core = _compiled()
    ga = _core.graph_arrays(problem.graph)
    _, dec, hold = _core.encode(ga, decisions)
    (kind, _, _, _, _, iva, ivf, ivb, first_use, last_use, _) = _core.compile_plan(ga, dec, hold)
    steps = len(kind)
    swapped = np.nonzero(dec == _core.D_SWAP)[0]
    back = swapped[first_use[swapped] >= 0]
    starts = np.concatenate((iva, ga.producer[swapped], first_use[back]))
    ends = np.concatenate((ivf, np.maximum(ga.last_fwd[swapped], ga.producer[swapped]), last_use[back]))
    weights = np.concatenate((ivb, ga.bytes[swapped], ga.bytes[back]))
    diff = np.zeros(steps + 1, np.int64)
    np.add.at(diff, starts, weights)
    np.add.at(diff, ends + 1, -weights)
    return np.cumsum(diff[:-1]).astype(np.float64)


def issue_points(problem, plan: Plan, *, schedule: Schedule | None = None) -> dict[int, int]:
    """The issue point (backward stage) of every swapped tensor of ``plan`` as ``simulate`` uses
    it: the plan's own where it gives one, else the default of docs/timeline.md, "Backward: recompute, prefetch, gradients".
    ``schedule``: as for ``simulate``."""
    validate(problem, plan)
    pipe = pipeline_of(problem)
    if pipe is not None:
        raise PlanError(f"issue_points(problem, plan): not for a pipeline stage ({_pipe_text(pipe)}): "
                        "each micro-batch's copy has its own issue stage; simulate(...).events "
                        "gives the copies' times")
    run = _Run(problem, plan, _schedule(problem.graph, schedule))
    run.raise_bad_issue_point()
    return {t: int(run.issue[t]) for t in run.hq.tolist()}


def _pipe_text(pipe) -> str:
    return f"pp = {pipe.stages}, microbatches = {pipe.microbatches}"


def _schedule(g, schedule: Schedule | None) -> Schedule | None:
    """``schedule`` when it is one of ``g`` (``PlanError`` otherwise), or None."""
    if schedule is not None and schedule.n_fwd != len(g.ops):
        raise PlanError(f"schedule=...: not a schedule of {g.name!r} ({schedule.n_fwd} forward steps, "
                        f"{len(g.ops)} ops)")
    return schedule


def simulate(problem, plan: Plan, *, detail: bool = True, schedule: Schedule | None = None,
             regions: dict | None = None, swap: str | None = None) -> SimResult:
    """Simulate one training step of ``problem`` under ``plan``.

    Returns a ``SimResult``; an impossible allocation is a result with ``feasible=False`` and a
    reason naming the step and bytes, never an exception. Bad plans raise ``PlanError``.
    ``detail=False`` skips the event list (peak and times are still exact). ``schedule``: the
    plan's ``compile_schedule(problem.graph, plan.decisions, plan.hold_points)`` when the caller
    has it already (a search that compiled it to prune by memory), so it is not compiled twice;
    it is trusted to be that one (only its number of forward steps is checked: ``PlanError``).
    ``regions`` (op id -> region label, e.g. ``timeline.regions.layer_regions(graph)``): judge the
    plan as selective activation checkpointing of those regions runs it (``slackswap.torch.policy``;
    docs/regions.md, "Checkpointed regions"), a SWAP inside a region as ``swap`` says
    (``"save"`` or ``"recompute"``); the result's counts are the decisions as they run. A problem
    made with ``Problem.with_regions`` gives both (``regions`` and ``swap`` given here win).
    """
    if regions is None:
        regions = getattr(problem, "regions", None)
        if swap is None and regions is not None:
            swap = problem.region_swap
    pipe = pipeline_of(problem)
    if pipe is not None:
        return _simulate_pipeline(problem, plan, detail, schedule, regions, pipe,
                                  "save" if swap is None else swap)
    if regions is not None:
        return _simulate_regions(problem, plan, detail, schedule, regions, "save" if swap is None else swap)
    if swap is not None:
        from .regions import check_regions  # the checkpointed-regions option only

        check_regions(problem.graph, {}, swap)   # a bad value is an error even without regions
    return _simulate(problem, plan, detail, schedule)


def _simulate(problem, plan: Plan, detail: bool, schedule: Schedule | None, check: bool = True) -> SimResult:
    """``simulate`` under the default rules, or of the region schedule ``schedule`` (``check``
    False: the decisions as the regions run them, derived from a plan validated already)."""
    if check:
        validate(problem, plan)
    run = _Run(problem, plan, _schedule(problem.graph, schedule))
    run.raise_bad_issue_point()
    g, budget = run.g, float(problem.budget_bytes)
    if run.code == 2:
        s = run.a
        o = int(run.op[s])
        name = g.ops[o].name if o >= 0 else "optimizer"
        return _infeasible(problem, run.counts(),
                           f"step {s} ({_KINDS[run.kind[s]]} {name}) needs {int(run.x)} bytes "
                           f"> budget {int(budget)} with no pending copy left to free", int(run.x))
    if run.code == 3:
        raise PlanError(f"plan.d2h_order: tensor {run.a} cannot be copied out before it is needed")
    step_time = float(run.E[-1])
    stall_f, stall_b = float(run.stall_f), float(run.stall_b)
    # the reference's sum over recompute steps: the integer 0 when there are none
    recompute = float(run.recompute) if (run.kind == run.core.K_REC).any() else 0
    events: tuple[Event, ...] = ()
    if detail:
        events = _events(run)
    return check_capacity(problem, SimResult(
        feasible=True, step_time_s=step_time, ideal_step_time_s=run.ideal,
        peak_bytes=int(run.curve.max()) if run.curve.size else 0, budget_bytes=budget,
        compute_s=step_time - stall_f - stall_b - recompute,
        recompute_s=recompute, stall_fwd_s=stall_f, stall_bwd_s=stall_b,
        swapped_bytes=int(run.ga.bytes[run.sw_lf >= 0].sum()), counts=run.counts(), events=events,
        memory_times=run.times if detail else np.zeros(0),
        memory_bytes=run.curve if detail else np.zeros(0), reason="",
        host_copies=(run.ga.bytes, run.q, run.d2h_start, run.hq, run.h2d_end, step_time)))


def _simulate_pipeline(problem, plan, detail, schedule, regions, pipe, swap="save") -> SimResult:
    """One pipeline stage's step under 1F1B (``pipeline.py``; docs/pipeline.md, "Pipeline stages
    (1F1B)")."""
    if schedule is not None:
        raise PlanError(f"schedule=...: not with a pipeline stage ({_pipe_text(pipe)}); the simulator "
                        "unrolls the plan's own schedule over the micro-batches")
    validate(problem, plan)
    sched = None
    if regions is not None:   # every micro-batch replays its own regions (docs/regions.md)
        plan, sched = _as_regions_run(problem, plan, regions, swap)
    run = PipelineRun(problem, plan, pipe, schedule=sched)
    extra = {"microbatches": pipe.microbatches, "in_flight": pipe.in_flight}
    if run.code == 2:
        s = run.a
        o = int(run.op[s])
        name = run.g.ops[o].name if o >= 0 else "optimizer"
        mb = f", micro-batch {int(run.mb_step[s])}" if o >= 0 else ""
        return _infeasible(problem, run.counts(),
                           f"step {s} ({_KINDS[run.kind[s]]} {name}{mb}) needs {int(run.x)} bytes "
                           f"> budget {int(problem.budget_bytes)} with no pending copy left to free",
                           int(run.x), **extra)
    if run.code == 3:
        raise PlanError(f"plan.d2h_order: tensor {run.a % run.nt} cannot be copied out before it is needed")
    step_time = float(run.E[-1])
    stall_f, stall_b, bubble = float(run.stall_f), float(run.stall_b), float(run.bubble)
    recompute = float(run.recompute) if (run.kind == run.core.K_REC).any() else 0
    events: tuple[Event, ...] = ()
    if detail:
        events = _events(run, run.nt, run.mb_step)
    return check_capacity(problem, SimResult(
        feasible=True, step_time_s=step_time, ideal_step_time_s=problem.ideal_step_s,
        peak_bytes=int(run.curve.max()) if run.curve.size else 0,
        budget_bytes=float(problem.budget_bytes),
        compute_s=step_time - stall_f - stall_b - recompute - bubble,
        recompute_s=recompute, stall_fwd_s=stall_f, stall_bwd_s=stall_b,
        swapped_bytes=int(run.ga.bytes[run.sw_lf[:run.nt] >= 0].sum()) * pipe.microbatches,
        counts=run.counts(), events=events,
        memory_times=run.times if detail else np.zeros(0),
        memory_bytes=run.curve if detail else np.zeros(0), reason="", bubble_s=bubble,
        # tensor k * nt + t of the unrolled run is tensor t of micro-batch k
        host_copies=(np.tile(run.ga.bytes, pipe.microbatches), run.q, run.d2h_start, run.hq, run.h2d_end,
                     step_time), **extra))


def _simulate_regions(problem, plan, detail, schedule, regions, swap) -> SimResult:
    validate(problem, plan)
    if schedule is not None:
        raise PlanError("schedule=...: not with regions=...; the regions make the schedule")
    plan, sched = _as_regions_run(problem, plan, regions, swap)
    # not validated again: a SWAP run as RECOMPUTE (swap="recompute") or a tensor written in
    # place is recomputed by the policy even where the graph calls it not recomputable
    return _simulate(problem, plan, detail, sched, check=False)


def _as_regions_run(problem, plan: Plan, regions, swap) -> tuple[Plan, Schedule]:
    """``plan`` as the regions run it (its decisions as they run) and its region schedule."""
    from .regions import region_schedule  # the checkpointed-regions option only

    if plan.hold_points:
        raise PlanError("plan.hold_points: not with regions=...; a checkpointed region is replayed "
                        "once, at its first backward use")
    planning, sched = region_schedule(problem.graph, plan.decisions, regions, swap)
    return Plan(planning, problem_key=plan.problem_key), sched


def keep_all_peak_of(graph, costs, pipeline=None) -> int:
    """The activation peak of keeping every planning tensor of ``graph`` under ``costs``, with no
    budget: the peak of ``simulate`` on the keep-all plan, from the graph and its costs alone
    (``Problem.build`` passes it to ``Problem``; a ``Problem`` given none computes it here).
    ``pipeline`` (a ``pipeline.Pipeline``): that of the stage's 1F1B timeline."""
    if pipeline is not None:
        from .pipeline import keep_all_peak

        return keep_all_peak(graph, costs, pipeline)
    run = _Run(Unlimited(graph, costs), keep_all(graph), _schedule(graph, None))
    return int(run.curve.max()) if run.curve.size else 0


def _events(run, nt: int = 0, mb_step=None) -> tuple[Event, ...]:
    """Compute steps, then D2H copies in queue order, then H2D copies in queue order. On a
    pipeline (``nt``: tensors of one micro-batch, ``mb_step``: each step's micro-batch) every
    event names its micro-batch (``Event.microbatch``, `` mb K`` after the label)."""
    g = run.g
    names = run.ga.op_names
    evs = []
    if not nt:
        for a, e, k, o in zip(run.S.tolist(), run.E.tolist(), run.kind.tolist(), run.op.tolist(), strict=True):
            kind = _KINDS[k]
            evs.append(Event(a, e, "compute", f"{kind}:{names[o] if o >= 0 else 'optimizer'}", kind,
                             o if o >= 0 else None))
        for t, a, e in zip(run.q.tolist(), run.d2h_start.tolist(), run.d2h_end.tolist(), strict=True):
            evs.append(Event(a, e, "d2h", f"d2h:{g.tensors[t].name}", "d2h", None, t))
        for t, a, e in zip(run.hq.tolist(), run.h2d_start.tolist(), run.h2d_end.tolist(), strict=True):
            evs.append(Event(a, e, "h2d", f"h2d:{g.tensors[t].name}", "h2d", None, t))
        return tuple(evs)
    for a, e, k, o, mb in zip(run.S.tolist(), run.E.tolist(), run.kind.tolist(), run.op.tolist(),
                              mb_step.tolist(), strict=True):
        kind = _KINDS[k]
        if o >= 0:
            evs.append(Event(a, e, "compute", f"{kind}:{names[o]} mb {mb}", kind, o, None, mb))
        else:
            evs.append(Event(a, e, "compute", f"{kind}:optimizer", kind, None))
    for stream, ids, starts, ends in (("d2h", run.q, run.d2h_start, run.d2h_end),
                                      ("h2d", run.hq, run.h2d_start, run.h2d_end)):
        for x, a, e in zip(ids.tolist(), starts.tolist(), ends.tolist(), strict=True):
            t, mb = x % nt, x // nt
            evs.append(Event(a, e, stream, f"{stream}:{g.tensors[t].name} mb {mb}", stream, None, t, mb))
    return tuple(evs)


def _infeasible(problem, counts: dict[str, int], reason: str, need: int, **extra) -> SimResult:
    """``peak_bytes``: what the step that cannot fit needs (docs/timeline.md)."""
    return SimResult(feasible=False, step_time_s=math.inf, ideal_step_time_s=problem.ideal_step_s,
                     peak_bytes=need, budget_bytes=float(problem.budget_bytes), counts=counts,
                     reason=reason, **extra)


__all__ = ["simulate", "default_issue_points", "issue_points", "memory_bound", "time_tolerance"]
