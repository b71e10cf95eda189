"""One pipeline stage's training step under the 1F1B schedule (docs/pipeline.md, "Pipeline stages
(1F1B)").

With p stages, m micro-batches and the planned stage s, the stage runs ``min(p - s - 1, m)``
forward passes (warm-up), then one forward and one backward pass in turn (steady state), then the
remaining backward passes (cool-down), then one optimizer step (Narayanan et al. 2021,
PipeDream-Flush). With p = 1 and m > 1 this is gradient accumulation (F0 B0 F1 B1 ...).

The plan has one decision per tensor of the stage graph (one micro-batch), applied to every
micro-batch. The one-micro-batch schedule is compiled once (``_core.compile_core``) and unrolled
m times: tensor ``t`` of micro-batch ``k`` becomes ``k * nt + t``, each micro-batch's local steps
are mapped monotonically onto the global steps in 1F1B order, and the per-micro-batch optimizer
steps become one. The unrolled timeline is timed by the same core (``_core.time_core``) with
arrival times: the other stages are balanced and ideal (``ideal_timeline``).

>>> Pipeline(stages=2, stage=0, microbatches=4).order
(('F', 0), ('F', 1), ('B', 0), ('F', 2), ('B', 1), ('F', 3), ('B', 2), ('B', 3))
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..core.errors import ParameterError, PlanError
from ..core.plan import Decision, Plan
from .reference import _REL, time_tolerance
from .schedule import core_arrays


def _ints(values, count: int) -> np.ndarray:
    return np.fromiter(values, np.int64, count)


@dataclass(frozen=True)
class Pipeline:
    """The pipeline a stage's step runs in: ``stages`` p, the planned ``stage`` s (0 .. p - 1),
    ``microbatches`` m, and ``send_s``: seconds of one point-to-point send of the stage boundary
    activation (0 when p == 1). Checked on construction (``ParameterError`` naming the field)."""

    stages: int
    stage: int
    microbatches: int
    send_s: float = 0.0

    def __post_init__(self):
        for name, low in (("stages", 1), ("microbatches", 1), ("stage", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
                raise ParameterError(f"Pipeline({name}): must be a whole number >= {low}; got {v!r}")
        if self.stage >= self.stages:
            raise ParameterError(f"Pipeline(stage): must be in 0 .. stages - 1 = {self.stages - 1}; "
                                 f"got {self.stage}")
        v = self.send_s
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:
            raise ParameterError(f"Pipeline(send_s): must be a finite number of seconds >= 0; got {v!r}")
        if self.stages == 1 and v != 0:
            raise ParameterError(f"Pipeline(send_s): must be 0 with one stage (nothing is sent); got {v!r}")

    @property
    def warmup(self) -> int:
        """Forward passes before the first backward pass: ``min(p - s - 1, m)``."""
        return min(self.stages - self.stage - 1, self.microbatches)

    @property
    def in_flight(self) -> int:
        """The most micro-batches whose forward pass has begun and backward pass not ended:
        ``min(p - s, m)``."""
        return min(self.stages - self.stage, self.microbatches)

    @property
    def order(self) -> tuple[tuple[str, int], ...]:
        """The stage's passes in 1F1B order: ``("F", k)`` and ``("B", k)``."""
        return one_f_one_b(self.stages, self.stage, self.microbatches)


@functools.lru_cache(maxsize=256)
def one_f_one_b(p: int, s: int, m: int) -> tuple[tuple[str, int], ...]:
    """The passes of stage ``s`` of ``p`` over ``m`` micro-batches in 1F1B order."""
    w = min(p - s - 1, m)
    out = [("F", k) for k in range(w)]
    for k in range(m - w):
        out += [("F", w + k), ("B", k)]
    out += [("B", k) for k in range(m - w, m)]
    return tuple(out)


@functools.lru_cache(maxsize=64)
def ideal_timeline(p: int, m: int, fwd_s: float, bwd_s: float, send_s: float):
    """The ideal 1F1B timeline of ``p`` balanced stages: every forward pass takes ``fwd_s``, every
    backward pass ``bwd_s``, a send ``send_s``. Each stage runs its passes in 1F1B order, each as
    soon as the stage is free and its input has arrived: the forward of (i, k) after the end of
    the forward of (i - 1, k) plus a send, the backward of (i, k) after the end of the backward of
    (i + 1, k) plus a send (the last stage's after its own forward of k). Returns the ends
    ``(fwd_end, bwd_end)``, two p x m arrays (cached: read them, do not change them)."""
    orders = [one_f_one_b(p, i, m) for i in range(p)]
    fend = np.full((p, m), np.nan)
    bend = np.full((p, m), np.nan)
    pos = [0] * p
    free = [0.0] * p
    left = 2 * p * m
    while left:
        moved = False
        for i in range(p):
            while pos[i] < len(orders[i]):
                kind, k = orders[i][pos[i]]
                if kind == "F":
                    dep = 0.0 if i == 0 else fend[i - 1, k] + send_s
                else:
                    dep = fend[i, k] if i == p - 1 else bend[i + 1, k] + send_s
                if math.isnan(dep):
                    break
                end = max(free[i], dep) + (fwd_s if kind == "F" else bwd_s)
                (fend if kind == "F" else bend)[i, k] = end
                free[i] = end
                pos[i] += 1
                left -= 1
                moved = True
        if not moved:   # 1F1B never deadlocks; kept as a guard
            raise RuntimeError("ideal_timeline: no pass can start")
    return fend, bend


def boundary_bytes(graph, parallel) -> int:
    """Bytes of the activation a stage sends (and receives) per micro-batch: ``b * s * h`` in the
    activation dtype, divided by t under sequence parallelism (the stage input of a later stage,
    ``models.transformer``); a graph without a model spec: the bytes of its step inputs."""
    spec = getattr(graph, "spec", None)
    if spec is not None and all(hasattr(spec, a) for a in ("tokens", "hidden", "act_bytes")):
        tokens = spec.tokens
        if getattr(parallel, "sp", False):
            tokens //= parallel.tp
        return int(tokens * spec.hidden * spec.act_bytes)
    return int(sum(t.bytes for t in graph.tensors if t.producer is None))


def make_pipeline(graph, parallel, hardware) -> Pipeline | None:
    """The ``Pipeline`` of a graph built under ``parallel`` on ``hardware``, None when there is
    none (no setting, or pp == 1 and one micro-batch). pp > 1 needs the hardware's
    ``gpu.p2p_bandwidth`` (``ParameterError`` without it)."""
    if parallel is None:
        return None
    pp, m = parallel.pp, parallel.microbatches
    if pp == 1 and m == 1:
        return None
    send = 0.0
    if pp > 1:
        bw = getattr(getattr(hardware, "gpu", None), "p2p_bytes_per_s", None)
        if not bw:
            name = getattr(hardware, "name", None)
            which = f"hardware {name} gives none" if hardware is not None else "no hardware given"
            raise ParameterError(f"parallel: pp = {pp} needs a GPU-to-GPU bandwidth to send the stage "
                                 f"boundary activation; {which} (gpu.p2p_bandwidth, docs/hardware.md)")
        send = boundary_bytes(graph, parallel) / float(bw)
    return Pipeline(pp, parallel.stage, m, send)


_NOT_YET = object()


def pipeline_of(problem) -> Pipeline | None:
    """The pipeline of ``problem`` (``problem.parallel`` with pp > 1 or more than one
    micro-batch), None otherwise: then every result is the one-micro-batch step's. Cached on the
    problem."""
    par = getattr(problem, "parallel", None)
    if par is None:
        return None
    d = problem.__dict__
    pipe = d.get("_pipeline", _NOT_YET)
    if pipe is _NOT_YET:
        pipe = d["_pipeline"] = make_pipeline(problem.graph, par, problem.hardware)
    return pipe


def _tiled(arrays, name: str, m: int) -> np.ndarray:
    """``getattr(arrays, name)`` repeated m times (per tensor: one row per micro-batch), kept on
    ``arrays`` (the core's arrays of one graph or cost model, built once per object)."""
    key = f"_tiled_{name}_{m}"
    v = arrays.__dict__.get(key)
    if v is None:
        v = arrays.__dict__[key] = np.tile(getattr(arrays, name), m)
    return v


class PipelineRun:
    """One plan on one pipelined problem: the one-micro-batch schedule compiled (or ``schedule``,
    a region schedule), unrolled over the micro-batches in 1F1B order and timed by the core. Its
    attributes are those of ``simulate._Run`` (global steps, tensors ``k * nt + t``), plus
    ``mb_step`` (the micro-batch of every step; -1 for the optimizer), ``bubble`` and ``pipe``."""

    def __init__(self, problem, plan: Plan, pipe: Pipeline, budget: float | None = None,
                 schedule=None):
        from . import _core as core  # lazy: numba, loaded at the first simulation

        g = problem.graph
        ga = core.graph_arrays(g)
        ca = core.cost_arrays(problem.costs, time_tolerance)
        nt = len(ga.producer)
        codes, dec, hold = core.encode(ga, plan.decisions, plan.hold_points)
        self.codes, self.core, self.pipe = codes, core, pipe
        if schedule is None:
            (kind, op, stage, need_pos, stage_first, iva, ivf, ivb, first_use, last_use,
             hq) = core.compile_plan(ga, dec, hold)
        else:   # a region schedule (docs/regions.md): one micro-batch's, unrolled the same way
            (kind, op, stage, need_pos, stage_first, iva, ivf, ivb, first_use, last_use,
             hq, _) = core_arrays(schedule, nt)
        # the plan's issue points, checked on the one micro-batch (the mapping keeps the order)
        for t, k in plan.issue_points.items():
            ju = int(stage[first_use[t]])
            if k < ju:
                raise PlanError(f"plan.issue_points[{t}]: stage {k} is after the first backward use "
                                f"(stage {ju}); allowed {ju}..{ga.n - 1}")
        n, m = ga.n, pipe.microbatches
        L = len(kind)               # local steps: n forward, nb backward-pass steps, the optimizer
        nb = L - 1 - n
        nh = len(hq)
        order = pipe.order
        first_b = next(i for i, (x, _) in enumerate(order) if x == "B")
        late_f = sum(1 for x, _ in order[first_b:] if x == "F")
        G = m * n + late_f * n      # issue stages: every backward stage, every forward step after B0
        GS = m * (L - 1) + 1
        # where each pass starts (global step) and how many issue stages come before it
        fpos = np.empty(m, np.int64)
        bpos = np.empty(m, np.int64)
        fc = np.full(m, -1, np.int64)           # -1: a forward pass before the first backward
        bc = np.empty(m, np.int64)
        pos = c = 0
        started = False
        for x, k in order:
            if x == "F":
                fpos[k] = pos
                pos += n
                if started:
                    fc[k] = c
                    c += n
            else:
                started = True
                bpos[k] = pos
                pos += nb
                bc[k] = c
                c += n
        ar_n = np.arange(n)
        fidx = fpos[:, None] + ar_n                       # (m, n) global forward steps
        bidx = bpos[:, None] + np.arange(nb)              # (m, nb) global backward-pass steps
        gmap = np.empty((m, L), np.int64)                 # local step -> global step
        gmap[:, :n] = fidx
        gmap[:, n:L - 1] = bidx
        gkind = np.empty(GS, np.int64)
        gop = np.empty(GS, np.int64)
        gstage = np.empty(GS, np.int64)
        gneed = np.full(GS, -1, np.int64)
        gfirst = np.empty(G, np.int64)
        mb_step = np.empty(GS, np.int64)
        gkind[fidx] = core.K_FWD
        gkind[bidx] = kind[n:L - 1]
        gop[fidx] = op[:n]
        gop[bidx] = op[n:L - 1]
        late = fc >= 0                  # a forward step between backward passes: its own stage
        fst = G - 1 - fc[:, None] - ar_n
        gstage[fidx] = np.where(late[:, None], fst, G)
        gfirst[fst[late]] = fidx[late]
        gstage[bidx] = G - n - bc[:, None] + stage[n:L - 1]
        gstage_of = G - n - bc[:, None] + ar_n          # local backward stage -> global
        bneed = need_pos[n:L - 1]
        ks = np.arange(m, dtype=np.int64)[:, None]
        gneed[bidx] = np.where(bneed >= 0, bneed + ks * nh, -1)
        mb_step[fidx] = ks
        mb_step[bidx] = ks
        gmap[:, L - 1] = gmap[:, L - 2] if L >= 2 else 0   # step inputs: until the last backward step
        gmap[m - 1, L - 1] = GS - 1                         # ... the last micro-batch's until the optimizer
        gkind[GS - 1] = core.K_OPT
        gop[GS - 1] = -1
        gstage[GS - 1] = -1
        mb_step[GS - 1] = -1
        gfirst[gstage_of] = gmap[:, stage_first]

        def steps_of(local):   # local steps (-1: none) of every tensor -> global, per micro-batch
            return np.where(local >= 0, gmap[:, np.maximum(local, 0)], -1).ravel()

        swapped = dec == core.D_SWAP
        self.sw_lf = steps_of(np.where(swapped, np.maximum(ga.last_fwd, ga.producer), -1))
        pstep = steps_of(ga.producer)
        fu, lu = steps_of(first_use), steps_of(last_use)
        offs = (np.arange(m, dtype=np.int64) * nt)[:, None]
        self.hq = (hq[None, :] + offs).ravel()         # backward passes run in micro-batch order
        if plan.d2h_order is not None:
            q = np.array(plan.d2h_order, np.int64)
        else:
            q = ga.out_idx[swapped[ga.out_idx]]        # production order, then output position
        self.q = (q[None, :] + offs).ravel()           # forward passes run in micro-batch order
        self.given_t = (_ints(plan.issue_points.keys(), len(plan.issue_points))[None, :] + offs).ravel()
        given_local = _ints(plan.issue_points.values(), len(plan.issue_points))
        self.given_k = gstage_of[:, given_local].ravel()
        giva, givf = gmap[:, iva].ravel(), gmap[:, ivf].ravel()
        givb = np.tile(ivb, m)

        # ---- arrivals from the ideal other stages ----
        p, s = pipe.stages, pipe.stage
        fsum = float(np.sum(ca.fwd))
        bsum = float(np.sum(ca.bwd))
        fend, bend = ideal_timeline(p, m, fsum, bsum, pipe.send_s)
        self.span = float(max(fend.max(), bend.max()))
        if p > 1:
            arr_fix = np.zeros(GS, np.float64)
            arr_from = np.full(GS, -1, np.int64)
            arr_add = np.zeros(GS, np.float64)
            if s > 0:
                arr_fix[gmap[:, 0]] = fend[s - 1] + pipe.send_s
            if s < p - 1:
                arr_from[gmap[:, n]] = gmap[:, n - 1]
                arr_add[gmap[:, n]] = bend[s + 1] + pipe.send_s - fend[s]
        else:
            arr_fix = np.zeros(0, np.float64)
            arr_from = np.zeros(0, np.int64)
            arr_add = arr_fix
        # the time horizon: m one-micro-batch horizons, plus the ideal pipeline's span
        tol = ca.tol * m + (_REL * self.span if p > 1 else 0.0)
        self.tol = tol
        budget = float(problem.budget_bytes) if budget is None else budget
        (self.code, self.a, self.x, self.S, self.E, self.d2h_start, self.d2h_end, self.h2d_start,
         self.h2d_end, self.issue, self.stall_f, self.stall_b, self.recompute, self.bubble,
         self.times, self.curve) = core.time_core(
            G, gkind, gop, gstage, gneed, gfirst, giva, givf, givb, _tiled(ga, "bytes", m), pstep,
            self.sw_lf, fu, lu, self.hq, self.q, self.given_t, self.given_k, ca.fwd, ca.bwd,
            _tiled(ca, "d2h", m), _tiled(ca, "h2d", m), ca.opt, ca.duplex, budget, tol,
            arr_fix, arr_from, arr_add)
        self.kind, self.op, self.stage, self.mb_step = gkind, gop, gstage, mb_step
        self.ga, self.g, self.nt = ga, g, nt

    def counts(self) -> dict[str, int]:
        """``plan.counts()`` from the decision codes."""
        return self.core.decision_counts(self.codes)


def keep_all(graph) -> Plan:
    """Every planning tensor of ``graph`` kept."""
    return Plan({t.id: Decision.KEEP for t in graph.planning_tensors()})


class Unlimited(NamedTuple):
    """What the simulator reads of a problem, without a budget (the keep-all peak's run)."""

    graph: object
    costs: object
    budget_bytes: float = math.inf


def keep_all_run(graph, costs, pipe: Pipeline) -> PipelineRun:
    """The keep-all plan on the pipeline with no memory limit."""
    return PipelineRun(Unlimited(graph, costs), keep_all(graph), pipe)


def keep_all_peak(graph, costs, pipe: Pipeline) -> int:
    """The activation peak of the pipeline timeline under keep-all with no limit."""
    run = keep_all_run(graph, costs, pipe)
    return int(run.curve.max()) if run.curve.size else 0
