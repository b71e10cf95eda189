"""Measure a plan on the current device against the simulator (docs/executor.md, "measure").

``measure(model, inputs)`` traces the model on the device (timing every op), writes those times
as a profile (docs/profile.md), plans the step with any planner, runs keep-all, recompute-all and
the chosen plan ``repeats`` times each, and returns measured vs simulated step time and peak
activation memory. On CUDA the peak is ``torch.cuda.max_memory_allocated`` above what was
allocated before the step, compared with the simulator's peak; on CPU it is the saved-activation
peak the executor's hooks count, compared with the same count on the simulator's schedule.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import math
import statistics
import time
from dataclasses import dataclass, field

import torch

from .. import planners
from ..core import profile
from ..core.costs import CostModel
from ..core.errors import ConfigError, ParameterError
from ..core.plan import Decision, Plan
from ..report import measure_figures  # measure_figures.measurement_figure looked up at call time
from ..timeline import simulate
from ..timeline.problem import Problem
from . import _ledger
from .executor import apply
from .trace import _default_loss, _move, trace


@dataclass
class Row:
    plan: str
    budget_bytes: float
    counts: dict
    sim_step_s: float
    step_s: float
    step_all_s: list
    sim_peak: int
    peak: int
    fits_sim: bool
    fits: bool
    recomputed_ops: int = 0
    swapped_bytes: int = 0
    hold_budget: bool = False          # run with apply(..., hold_budget=True)
    accounted_peak: int | None = None  # hold_budget: the simulator's accounted peak it holds to


@dataclass
class Measurement:
    """Result of ``measure``: one ``Row`` per plan, and how it was measured."""

    model: str
    device: str
    peak_kind: str
    budget_bytes: float
    keep_all_peak: int
    rows: list = field(default_factory=list)
    problem: Problem | None = None
    profile_path: str | None = None
    overhead: OpOverhead | None = None      # the measured per-op overhead (None: not measured)

    def table(self):
        import pandas as pd  # lazy: start-up cost (pandas)

        return pd.DataFrame([{
            "plan": r.plan, "keep/swap/rec": "/".join(str(r.counts[d.value]) for d in Decision),
            "sim step ms": r.sim_step_s * 1e3, "step ms": r.step_s * 1e3,
            "step ratio": r.step_s / r.sim_step_s if r.sim_step_s else math.nan,
            "sim peak MiB": r.sim_peak / 2**20, "peak MiB": r.peak / 2**20,
            "peak ratio": r.peak / r.sim_peak if r.sim_peak else math.nan,
            "budget MiB": r.budget_bytes / 2**20,
            "fits": "yes" if r.fits else "NO (exceeds)"} for r in self.rows])

    def figure(self, path=None):
        """Measured vs simulated step time and peak per plan (``report.measure_figures``)."""
        return measure_figures.measurement_figure(self, path)


def device_costs(graph, device: torch.device, op_times=None) -> CostModel:
    """Per-op times from the trace (or ``op_times``: ``(fwd, bwd)`` seconds per op), transfer
    times from a copy measured on ``device`` (pinned host buffers on CUDA, a host-buffer clone on
    CPU), no optimizer (a step is fwd + bwd)."""
    times = op_times if op_times is not None else graph.spec.op_times_s
    if times is None:
        raise ConfigError("graph: traced on meta, it has no measured op times; trace on cpu or cuda")
    lat_d2h, bw_d2h, lat_h2d, bw_h2d = _link(device)
    sizes = [t.bytes for t in graph.tensors]
    return CostModel("measured", [f for f, _ in times], [b for _, b in times],
                     [lat_d2h + b / bw_d2h if b else 0.0 for b in sizes],
                     [lat_h2d + b / bw_h2d if b else 0.0 for b in sizes])


@dataclass(frozen=True)
class OpOverhead:
    """The fixed cost per op of a step (``op_overhead``): seconds per forward and per backward op
    beyond the traced kernel times, the executor's hooks included (``hooks_*``: their part)."""

    fwd_s: float
    bwd_s: float
    hooks_fwd_s: float
    hooks_bwd_s: float
    n_ops: int
    step_fwd_s: float          # measured forward (+ loss) under the executor, keep-all
    step_bwd_s: float          # measured backward under the executor, keep-all
    kernel_fwd_s: float        # sum of the traced forward op times
    kernel_bwd_s: float        # sum of the traced backward op times

    METHOD = ("(step phase under the executor, keep-all, fastest of repeats - sum of the traced "
              "op times of that phase) / ops; hooks: (executor - plain step) / ops")

    def profile_entry(self) -> dict:
        """The ``per_op_overhead_ms`` entry of a profile (docs/profile.md)."""
        return {"fwd": self.fwd_s * 1e3, "bwd": self.bwd_s * 1e3, "hooks_fwd": self.hooks_fwd_s * 1e3,
                "hooks_bwd": self.hooks_bwd_s * 1e3, "method": self.METHOD}


def op_overhead(model, forward, graph, op_times, plan, *, sync, repeats: int = 3,
                host_lead=None) -> OpOverhead:
    """Measure the fixed cost per op of ``graph``'s step: ``forward()`` runs the forward pass and
    the loss and returns the loss; its ``backward()`` is the backward pass. Each phase is timed
    (fastest of ``repeats``, after a warm-up) plain and under ``apply(model, keep-all plan, graph,
    track=False)`` (``plan``: keep-all of ``graph``), as ``measure`` times a step. The overhead
    of a phase is its time under the executor less the sum of the traced op times of that phase
    (``op_times``: ``(fwd, bwd)`` seconds per op), divided by the number of ops; a phase the
    traced times already cover (a negative difference) has overhead 0. The hooks' part is the
    executor's time less the plain time, per op, within the same bounds (docs/profile.md,
    "Per-op overhead")."""
    n = len(graph.ops)

    def phases(executor: bool):
        best_f = best_b = math.inf
        for k in range(repeats + 1):           # the first run warms up
            if executor:
                ctx = apply(model, plan, graph, track=False, host_lead=host_lead)
            else:
                ctx = contextlib.nullcontext()
            sync()
            t0 = time.perf_counter()             # entering and leaving the executor count, as
            with ctx:                            # in the steps ``measure`` times
                loss = forward()
                sync()
                t1 = time.perf_counter()
                loss.backward()
            sync()
            t2 = time.perf_counter()
            del loss
            if k:
                best_f, best_b = min(best_f, t1 - t0), min(best_b, t2 - t1)
        return best_f, best_b

    plain_f, plain_b = phases(False)
    ex_f, ex_b = phases(True)
    kf = math.fsum(f for f, _ in op_times)
    kb = math.fsum(b for _, b in op_times)
    per = (lambda x: max(x, 0.0) / n) if n else (lambda x: 0.0)
    fwd, bwd = per(ex_f - kf), per(ex_b - kb)
    return OpOverhead(fwd, bwd, min(per(ex_f - plain_f), fwd), min(per(ex_b - plain_b), bwd), n,
                      ex_f, ex_b, kf, kb)


def _timed(fn, sync, repeats=5) -> float:
    fn()
    out = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def _link(device):
    big, small = 64 * 2**20, 4096
    if device.type == "cuda":
        sync = torch.cuda.synchronize
        dev = [torch.empty(n, dtype=torch.uint8, device=device) for n in (small, big)]
        host = [torch.empty(n, dtype=torch.uint8, pin_memory=True) for n in (small, big)]
        d2h = [_timed(lambda h=h, d=d: h.copy_(d, non_blocking=True), sync) for h, d in zip(host, dev, strict=True)]
        h2d = [_timed(lambda h=h, d=d: d.copy_(h, non_blocking=True), sync) for h, d in zip(host, dev, strict=True)]
    else:
        bufs = [torch.empty(n, dtype=torch.uint8) for n in (small, big)]
        d2h = h2d = [_timed(lambda b=b: b.clone(), lambda: None) for b in bufs]
    return (d2h[0], (big - small) / max(d2h[1] - d2h[0], 1e-9),
            h2d[0], (big - small) / max(h2d[1] - h2d[0], 1e-9))


def check_repeats(repeats=3, trace_repeats=3) -> None:
    """``measure``'s step counts: integers >= 1 (checked before any work)."""
    for arg, value in (("repeats", repeats), ("trace_repeats", trace_repeats)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ParameterError(f"measure: {arg}: must be an integer >= 1; got {value!r}")


def measure(model, inputs, *, loss_fn=None, planner: str = "slack", planner_params=None, plan=None,
            budget=0.5, repeats: int = 3, device=None, name: str | None = None,
            profile_path=None, trace_repeats: int = 3, host_lead=None,
            overhead: bool = True, hold_budget=False) -> Measurement:
    """Measure keep-all, recompute-all and a plan of ``model`` on ``device`` (default: CUDA when
    present, else CPU). ``plan``: a ``Plan`` to run instead of planning with ``planner``.
    ``budget``: as ``Problem.with_budget`` (fraction of the keep-all peak, bytes, or None), or a
    list of them: one planned row per budget (``slack@0.5``); the first one judges the baselines.
    A plan over the budget still runs; its row says it exceeds the budget. The profile's per-op
    times are the fastest of ``trace_repeats`` timed traces. ``host_lead``: as in ``apply``.
    ``overhead``: measure the fixed cost per op (``op_overhead``, ``repeats`` runs per phase) and
    charge it on every op (``CostModel.with_op_overhead``); False: kernel times only.
    ``hold_budget``: run each plan that swaps with ``apply(..., hold_budget=True)`` (True; its
    row is labelled ``LABEL hold``), or both without and with it (``"both"``: one row each)."""

    from ._check import check_device
    check_repeats(repeats, trace_repeats)
    if not isinstance(overhead, bool):
        raise ParameterError(f"measure: overhead: must be True or False; got {overhead!r}")
    if not (isinstance(hold_budget, bool) or (isinstance(hold_budget, str) and hold_budget == "both")):
        raise ParameterError(f"measure: hold_budget: must be True, False or 'both'; got {hold_budget!r}"[:200])
    dev = check_device(device or ("cuda" if torch.cuda.is_available() else "cpu"), "measure")
    model = model.to(dev)
    inputs = _move(inputs, dev)
    loss_fn = loss_fn or _default_loss
    args = tuple(inputs.values()) if isinstance(inputs, dict) else tuple(inputs)

    def forward():
        out = model(**inputs) if isinstance(inputs, dict) else model(*inputs)
        return loss_fn(out, *args)

    def step():
        forward().backward()

    step()                                   # warm-up: allocator, kernels, lazy init
    state = copy.deepcopy(model.state_dict())
    graphs = []
    for _ in range(trace_repeats):
        graphs.append(trace(model, inputs, loss_fn, device=dev.type, name=name))
        model.load_state_dict(state)
    graph = graphs[0]
    if any(g.spec.op_signature != graph.spec.op_signature for g in graphs):
        raise ConfigError("model: its traces differ from one step to the next; measure needs a "
                          "model whose ops do not change between steps")
    # per op the fastest of the traces: on a shared machine noise only ever adds time
    op_times = [tuple(min(g.spec.op_times_s[i][j] for g in graphs) for j in (0, 1))
                for i in range(len(graph.ops))]
    costs = device_costs(graph, dev, op_times)
    cuda = dev.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    keep, rec = ({t: d for t in Problem.from_graph(graph, costs).planning_ids}
                 for d in (Decision.KEEP, Decision.RECOMPUTE))
    ov = None
    meta = {}
    if overhead:
        ov = op_overhead(model, forward, graph, op_times, Plan(keep), sync=sync, repeats=repeats,
                         host_lead=host_lead)
        model.load_state_dict(state)
        costs = costs.with_op_overhead(ov.fwd_s, ov.bwd_s)
        meta["per_op_overhead_ms"] = ov.profile_entry()
    if profile_path is not None:
        profile.save(profile_path, graph, costs, description="measured by slackswap measure",
                     device=str(dev), **meta)
    budgets = list(budget) if isinstance(budget, (list, tuple)) else [budget]
    base = Problem.from_graph(graph, costs)
    problem = base.with_budget(budgets[0])
    plans = {"keep-all": (Plan(keep), problem), "recompute-all": (Plan(rec), problem)}
    if plan is not None:
        plans[plan.planner] = (plan, problem)
    else:
        for b in budgets:
            pb = base.with_budget(b)
            label = planner if len(budgets) == 1 else f"{planner}@{b}"
            plans[label] = (planners.get(planner, **dict(planner_params or {})).plan(pb), pb)
    res = Measurement(graph.spec.name or type(model).__name__, str(dev),
                      "max_memory_allocated" if cuda else "saved activations, hooks",
                      problem.budget_bytes, problem.keep_all_peak, problem=problem,
                      profile_path=None if profile_path is None else str(profile_path),
                      overhead=ov)

    def run(p, issue, track, hold=False, pb=None):
        for q in model.parameters():   # gradients allocated before the step: not in its peak
            if q.requires_grad and q.grad is None:
                q.grad = torch.zeros_like(q)
            elif q.grad is not None:
                q.grad.zero_()
        sync()
        base = torch.cuda.memory_allocated(dev) if cuda else 0
        if cuda:
            torch.cuda.reset_peak_memory_stats(dev)
        ex = apply(model, p, graph, issue_points=issue, track=track, host_lead=host_lead,
                   problem=pb if hold else None, hold_budget=hold)
        t0 = time.perf_counter()
        with ex:
            step()
        sync()
        dt = time.perf_counter() - t0
        peak = (torch.cuda.max_memory_allocated(dev) - base) if cuda else ex.stats.peak_saved_bytes
        return dt, peak, ex.stats

    prepared = []
    for label, (p, pb) in plans.items():
        sim, judge = simulate(pb, p, detail=False), pb
        if not sim.feasible:                  # judged without a limit; its row says it exceeds
            judge = pb.with_budget(None)
            sim = simulate(judge, p, detail=False)
        issue = _ledger.resolved_issue_points(judge, p)
        swaps = bool(p.ids(Decision.SWAP))
        modes = [False, True] if hold_budget == "both" and swaps else [hold_budget is True and swaps]
        for hold in modes:
            # tracked, untimed: the hooks' count, and a warm-up
            _, peak, stats = run(p, issue, True, hold, pb)
            acc = _ledger.hold_schedule(pb, p, issue).accounted_peak if hold else None
            prepared.append((label + " hold" * hold, p, pb, sim, judge, issue, peak, stats, [], hold, acc))
    for _ in range(repeats):                  # timed runs, plans interleaved: load drifts evenly
        for item in prepared:
            item[8].append(run(item[1], item[5], False, item[9], item[2])[0])
    for label, p, pb, sim, judge, issue, peak, stats, times, hold, acc in prepared:
        sim_peak = sim.peak_bytes if cuda else _ledger.simulated_saved_peak(graph, p, issue)
        fits_sim = judge is pb and sim.peak_bytes <= pb.budget_bytes
        fits = fits_sim and (not cuda or peak <= pb.budget_bytes)
        res.rows.append(Row(label, pb.budget_bytes, p.counts(), sim.step_time_s, min(times),
                            times, sim_peak, peak, fits_sim, fits, stats.recomputed_ops, stats.swapped_bytes,
                            hold, acc))
    model.load_state_dict(state)
    return res


def load_model(spec: str, batch=None, seq=None, layers=None, vocab=None, device=None):
    """``(model, inputs)`` from a preset name of ``slackswap.torch.hf_models`` or ``module:function``
    (a function returning ``(model, inputs)``). A preset's shape is checked before anything is
    allocated (``hf_models.check_shape``; ``device``: where the step will run)."""

    from . import hf_models as zoo  # optional dependency (torch)

    if ":" not in spec:
        return zoo.build(spec, batch=batch, seq=seq, layers=layers, vocab=vocab, device=device)
    mod, fn = spec.split(":", 1)
    try:
        out = getattr(importlib.import_module(mod), fn)()
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"model: cannot load {spec!r} ({e}); expected module:function") from None
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], torch.nn.Module)):
        raise ConfigError(f"model: {spec} must return (nn.Module, inputs)")
    return out
