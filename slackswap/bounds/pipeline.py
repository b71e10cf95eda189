"""A certified lower bound on the step time of one pipeline stage under 1F1B (docs/pipeline.md,
"Pipeline stages: the bound").

A plan of a pipelined problem is SHARED: one decision per planning tensor of the one-micro-batch
stage graph, applied to each of the ``m`` micro-batches (docs/pipeline.md, "Pipeline stages
(1F1B)"). ``pipeline_bound(problem)`` bounds ``simulate(problem, plan).step_time_s`` from
below for every such plan (any issue points, D2H order and hold points) by the larger of:

(i) **the pipeline's ideal step** ``problem.ideal_step_s`` (keep-all, no memory limit, its bubble
    included). Under any plan every step lasts at least as long as under keep-all (a recompute
    step only adds, a forward or backward step lasts its cost), every wait is a maximum of
    nonnegative terms, and every arrival is the ideal arrival (inputs) or the end of our own
    forward of that micro-batch plus a fixed round trip (gradients), which is no earlier than
    under keep-all. By induction along the compute stream (max-plus expressions are monotone in
    their terms) each forward and backward step starts no earlier than in the ideal timeline,
    so the optimizer ends no earlier.

(ii) **an LP over fractions** ``k_t + s_t + r_t = 1`` per planning tensor (keep / swap /
     recompute; ``s_t = 0`` if not swappable, ``r_t = 0`` if not recomputable) and ``r_p`` per op
     (re-run at least once per micro-batch), minimising the step time ``T``:

     * ``r_p >= r_t`` for every recomputable planning tensor ``t`` made by op ``p``: a RECOMPUTE
       tensor is saved by some op, is not resident at that op's backward, so its producer re-runs
       in every micro-batch's backward pass; ``r_q >= r_p`` when op ``p`` reads an unsaved output
       of op ``q`` (``mip.aggregate.prerequisites``: a re-run of ``p`` first rebuilds it).
     * the passes' paths: ``T >= C_j + j rho`` for ``j = 0 .. m``, ``rho = sum_p c_p r_p``
       (``c_p = fwd_s[p]``): ``C_j`` (``path_constants``) is the longest path through the
       stage's passes, at their ideal durations and arrivals, that holds ``j`` backward passes;
       under a plan each backward pass is at least ``rho`` longer and nothing is shorter. With
       one stage it is the compute stream's work, ``m (F + B + rho) + optimizer``; a re-run may
       fill a wait for an arrival, so the ideal step plus every re-run is not a bound.
     * copies: ``T >= m * sum_t s_t d2h_t`` and ``T >= m * sum_t s_t h2d_t`` (``h2d_t`` at the
       faster of the plain and duplex rates): one copy engine per direction carries every
       micro-batch's copies one after another; each SWAP tensor is copied out and, being saved,
       back in before a backward step that precedes the optimizer.
     * memory, at the backward step of every op ``j`` of a micro-batch ``k`` and at every forward
       step ``i`` of one: let ``q`` be the most micro-batches other than ``k`` whose forward pass
       has ended and whose backward pass has not begun there (from ``pipe.order``; at most
       ``w - 1``). Each holds every KEEP tensor (a KEEP tensor stays until its last backward use)
       and its step inputs (resident from its first forward step to its last backward step), so
       the accounted memory is at least

           q * (sum_t k_t b_t + I) + own(k)  <=  budget,

       with ``own(k)`` what micro-batch ``k`` certainly holds there: at backward ``j`` the
       keep-all memory of that step (one micro-batch, ``compile_schedule``) less the planning
       tensors not saved by op ``j`` that a plan may have evicted (``(1 - k_t) b_t``): what op
       ``j`` saves is resident whatever its decision, a KEEP tensor saved at or below ``j`` stays
       until its last use, and gradients, workspace and step inputs do not depend on the plan;
       at forward step ``i``, keep-all's less every evicted tensor whose forward use is over by
       ``i`` (``ForwardBound`` of the slack planner: the bound of ``timeline.memory_bound`` there).
     * release, at every step of every pass: the swapped sources of the micro-batches in flight
       leave memory only as the D2H engine copies them, at most ``bw`` bytes a second
       (``mip.aggregate.bandwidth``: no copy is faster) from the first micro-batch's input on
       (``A0``), so by the step's ready time ``tau``
       ``q (sum_t (1 - r_t) b_t + I) + own - bw (tau - A0) <= budget`` (``own``: the running
       micro-batch's memory less its recomputed dead tensors at a forward step, as in the memory
       rows at a backward step); and ``tau <= T - W - n_B rho`` (``W``: the rest of the pass
       from that step plus a path from the pass's end to the optimizer's, ``tail_constants``,
       with ``n_B`` backward passes on it: the longest, and the one through every later pass).

     Every shared plan maps to an integral point of this LP with ``T`` at most its step time, so
     the LP's optimum (HiGHS, shaved by its primal tolerance) is a bound. When the LP has no
     point (the memory rows fail even with every tensor evicted), no shared plan fits the budget.

With one stage and one micro-batch the problem has no pipeline and ``lower_bound`` is the
one-GPU bound, unchanged.
"""

from __future__ import annotations

import math

import numpy as np

from ..core.errors import ParameterError
from ..core.plan import Decision
from ..core.schema import check_type
from ..mip.aggregate.structure import bandwidth, prerequisites
from ..timeline import compile_schedule
from ..timeline.pipeline import ideal_timeline, pipeline_of
from ..timeline.problem import Problem
from ..timeline.schedule import BWD

#: the LP's primal feasibility tolerance (HiGHS's default), in the LP's units (the step time of
#: one micro-batch, and the budget for memory rows): the bound is shaved by it
PIPE_LP_SHAVE = 1e-7


def in_flight_counts(order) -> tuple[int, int]:
    """``(q_fwd, q_bwd)``: the most micro-batches, other than the one running, whose forward pass
    has ended and whose backward pass has not begun, at any forward pass and at any backward pass
    of the 1F1B ``order`` (``("F", k)`` / ``("B", k)`` in compute order; each pass atomic)."""
    done: set[int] = set()
    q_f = q_b = 0
    for kind, k in order:
        if kind == "F":
            q_f = max(q_f, len(done))
            done.add(k)
        else:
            done.discard(k)
            q_b = max(q_b, len(done))
    return q_f, q_b


def pipeline_bound(problem) -> tuple[float, str]:
    """A certified lower bound (seconds) on the step time of every shared plan of the pipelined
    ``problem`` (one with ``timeline.pipeline.pipeline_of(problem)``), and which row gives it;
    ``(inf, why)`` when no shared plan fits the budget (module docstring). ``lower_bound`` calls
    it for every pipelined problem."""
    check_type(problem, Problem, "pipeline_bound(problem)", "a Problem", ParameterError)
    pipe = pipeline_of(problem)
    if pipe is None:
        raise ParameterError("pipeline_bound(problem): needs a pipeline stage (a problem built with pp > 1 or "
                             "microbatches > 1); got a one-GPU problem: use bounds.lower_bound")
    if getattr(problem, "regions", None) is not None:
        raise ParameterError("pipeline_bound(problem): not proven for a problem with checkpointed regions "
                             "(lower_bound gives the stage's ideal step for it); problem.without_regions() "
                             "is the problem under the default rules")
    best, how = float(problem.ideal_step_s), "pipeline ideal step (keep-all, its bubble, no stall)"
    lp = pipeline_lp(problem, pipe)
    if lp is None:
        return best, how
    if math.isinf(lp):
        return math.inf, "no shared plan fits: the in-flight memory rows fail whatever is evicted"
    if lp > best:
        best, how = lp, "pipeline LP (passes' paths with re-runs, copy engines, in-flight memory and its release)"
    return best, how


def pipeline_lp(problem, pipe) -> float | None:
    """The LP of row (ii) (module docstring): its certified optimum in seconds, ``inf`` when it
    has no point, None when the budget is unlimited (the ideal step is then the bound) or the
    solver ends without a proof."""
    from scipy.optimize import Bounds, LinearConstraint, milp  # lazy: start-up cost (scipy)
    from scipy.sparse import coo_matrix

    g, c = problem.graph, problem.costs
    n, m = len(g.ops), int(pipe.microbatches)
    budget = float(problem.budget_bytes)
    if n == 0 or not math.isfinite(budget):
        return None
    tens = [g.tensors[t] for t in problem.planning_ids]
    nt = len(tens)
    fwd = np.asarray(c.fwd_s, float)
    per_mb = float(fwd.sum() + np.sum(c.bwd_s))           # F + B of one micro-batch
    t0 = per_mb if per_mb > 0 else 1.0                       # the LP's unit of time
    paths = path_constants(c, pipe)                          # C_j, seconds, j = 0 .. m
    # columns: k_t, s_t, r_t (planning order), r_p (ops), T (the step time, in t0),
    # Kb (sum_t k_t b_t), Gf_i (kept bytes whose forward use ends before forward step i),
    # Gb_j (kept bytes whose last backward use is at op j or below); bytes in units of the budget
    # RB (sum_t r_t b_t), RHO (sum_p c_p r_p, in t0), GR_i (recomputed bytes whose forward use
    # ends before forward step i)
    K, S, R, P = 0, nt, 2 * nt, 3 * nt
    E = P + n
    KB, GF, GB = E + 1, E + 2, E + 2 + n
    RB, RHO, GR = GB + n, GB + n + 1, GB + n + 2
    ncol = GR + n
    lb, ub = np.zeros(ncol), np.ones(ncol)
    ub[E:] = np.inf
    ri, ci, vals, lo, hi = [], [], [], [], []

    def row(coefs, low: float, high: float) -> None:
        r = len(lo)
        for col, v in coefs:
            ri.append(r)
            ci.append(col)
            vals.append(v)
        lo.append(low)
        hi.append(high)

    for i, t in enumerate(tens):
        if not t.swappable:
            ub[S + i] = 0.0
        if not t.recomputable:
            ub[R + i] = 0.0
        row([(K + i, 1.0), (S + i, 1.0), (R + i, 1.0)], 1.0, 1.0)
        if t.recomputable:
            row([(P + t.producer, 1.0), (R + i, -1.0)], 0.0, np.inf)
    for p, q in sorted(set(prerequisites(g, {t.id for t in tens}))):
        row([(P + q, 1.0), (P + p, -1.0)], 0.0, np.inf)
    # the passes' paths: T >= C_j + j * (re-run seconds of one backward pass)
    for j, cj in enumerate(paths):
        if math.isfinite(cj):
            row([(E, 1.0)] + [(P + p, -j * fwd[p] / t0) for p in range(n) if j and fwd[p] > 0],
                cj / t0, np.inf)
    # copy engines: T >= m * sum_t s_t x_t
    duplex = float(getattr(c, "duplex_factor", 1.0) or 1.0)
    for times in (c.d2h_s, [h * min(1.0, 1.0 / duplex) for h in c.h2d_s]):
        coefs = [(S + i, -m * float(times[t.id]) / t0) for i, t in enumerate(tens)
                 if t.swappable and times[t.id] > 0]
        if coefs:
            row([(E, 1.0)] + coefs, 0.0, np.inf)
    _memory_rows(problem, pipe, tens, K, KB, GF, GB, row)
    row([(RHO, 1.0)] + [(P + p, -fwd[p] / t0) for p in range(n) if fwd[p] > 0], 0.0, 0.0)
    _release_rows(problem, pipe, tens, t0, (K, R, E, GB, RB, RHO, GR), row)
    a = coo_matrix((vals, (ri, ci)), shape=(len(lo), ncol)).tocsr()
    obj = np.zeros(ncol)
    obj[E] = 1.0
    res = milp(obj, constraints=LinearConstraint(a, lo, hi), bounds=Bounds(lb, ub),
               integrality=np.zeros(ncol, int))
    if res.status == 2:
        return math.inf
    if res.status != 0 or res.fun is None:
        return None     # no proof (a limit or numerical trouble): the ideal step stands
    return max(0.0, float(res.fun) - PIPE_LP_SHAVE) * t0 * (1 - 1e-9)


def path_constants(costs, pipe) -> list[float]:
    """``C_j`` (seconds), j = 0 .. m: the longest path through the stage's passes in 1F1B order
    whose backward passes are ``j`` of the path's pass durations, with every forward pass lasting
    ``F = sum fwd_s``, every backward pass ``B = sum bwd_s``, the optimizer at the end, and the
    arrivals of docs/pipeline.md, "Pipeline stages (1F1B)": forward ``k`` of a stage ``s > 0``
    no earlier than its input's ideal arrival (a constant), backward ``k`` of a stage below the
    last no earlier than the end of our forward ``k`` plus the ideal round trip ``R(k)``;
    ``-inf`` where no path has ``j``. Every plan's step is at least ``C_j + j * rho`` for every
    ``j``, ``rho`` the re-run seconds of one micro-batch's backward pass (each pass lasts at
    least its ideal duration, ``rho`` more for a backward pass, and every wait is a maximum over
    these paths); with ``rho = 0`` the largest ``C_j`` is the ideal step."""
    p, s, m = pipe.stages, pipe.stage, pipe.microbatches
    F, B = float(np.sum(costs.fwd_s)), float(np.sum(costs.bwd_s))
    fend, bend = ideal_timeline(p, m, F, B, pipe.send_s)
    ninf = -math.inf
    end = [0.0] + [ninf] * m            # end[j]: longest path to the end of the last pass
    fwd_end: dict[int, list[float]] = {}
    for kind, k in pipe.order:
        arr = [ninf] * (m + 1)
        if kind == "F" and s > 0:
            arr[0] = float(fend[s - 1, k]) + pipe.send_s
        if kind == "B" and s < p - 1:
            r = float(bend[s + 1, k]) + pipe.send_s - float(fend[s, k])
            arr = [x + r for x in fwd_end[k]]
        start = [max(a, b) for a, b in zip(end, arr, strict=True)]
        if kind == "F":
            end = [x + F for x in start]
            fwd_end[k] = end
        else:
            end = [ninf] + [x + B for x in start[:-1]]
    opt = float(costs.optimizer_s)
    return [x + opt for x in end]


def tail_constants(costs, pipe) -> list[list[float]]:
    """``D[x][j]`` (seconds): the longest path from the end of the stage's pass ``x`` (its
    position in ``pipe.order``) to the end of the optimizer whose backward passes are ``j`` of
    the path's pass durations (``-inf`` where none is), with the passes' ideal durations and the
    arrivals of ``path_constants``: the next pass starts after pass ``x`` ends, and after the
    forward ``k`` of a stage below the last, its backward ``k`` starts no earlier than the
    round trip ``R(k)`` later. Every plan's step is at least the end of pass ``x`` plus
    ``D[x][j] + j * rho`` for every ``j``."""
    p, s, m = pipe.stages, pipe.stage, pipe.microbatches
    F, B = float(np.sum(costs.fwd_s)), float(np.sum(costs.bwd_s))
    fend, bend = ideal_timeline(p, m, F, B, pipe.send_s)
    order = list(pipe.order)
    where = {pk: x for x, pk in enumerate(order)}
    ninf = -math.inf
    tail: list[list[float]] = [[ninf] * (m + 1) for _ in order]
    tail[-1] = [float(costs.optimizer_s)] + [ninf] * m

    def through(x: int) -> list[float]:        # pass x's duration, then its tail
        if order[x][0] == "F":
            return [v + F for v in tail[x]]
        return [ninf] + [v + B for v in tail[x][:-1]]     # the pass itself is one of the j

    for x in range(len(order) - 2, -1, -1):
        best = through(x + 1)
        kind, k = order[x]
        if kind == "F" and s < p - 1:
            r = float(bend[s + 1, k]) + pipe.send_s - float(fend[s, k])
            best = [max(a, v + r) for a, v in zip(best, through(where["B", k]), strict=True)]
        tail[x] = best
    return tail


def _release_rows(problem, pipe, tens, t0: float, cols, row) -> None:
    """The copy-out rows (module docstring, (ii) release): at every step of every pass, the
    swapped sources of the micro-batches in flight are released only as the D2H engine, from the
    first micro-batch's input on (``A0``), copies them, at most ``bw`` bytes a second
    (``mip.aggregate.bandwidth``), so by the step's ready time ``tau``

        q (sum_t (1 - r_t) b_t + I) + own  -  bw (tau - A0)  <=  budget,

    ``own`` the running micro-batch's memory less its evicted tensors' (at a forward step:
    keep-all's less what is recomputed and dead; at a backward step as in the memory rows); and
    ``tau <= T - W - (backward passes after it) rho``, ``W`` the durations of the rest of the
    pass from that step, of every later pass and of the optimizer. Without a finite ``bw`` (a
    copy of no duration) there are none."""
    K, R, E, GB, RB, RHO, GR = cols
    g, c = problem.graph, problem.costs
    n, nt = len(g.ops), len(tens)
    planning = [g.tensors[t] for t in problem.planning_ids]
    bw = bandwidth(planning, c)
    if not math.isfinite(bw) or nt == 0:
        return
    budget = float(problem.budget_bytes)
    unit = max(budget, 1.0)
    slack = 10 * PIPE_LP_SHAVE + 1.0 / unit
    b = np.array([float(t.bytes) for t in tens])
    total = float(b.sum())
    inputs = float(sum(t.bytes for t in g.tensors if t.producer is None))
    sched = compile_schedule(g, {t.id: Decision.KEEP for t in tens})
    keep = sched.static_memory().astype(float)
    bwd_step = {o: s for s, (kind, o) in enumerate(zip(sched.kinds, sched.ops, strict=True)) if kind == BWD}
    fwd, bwd = np.asarray(c.fwd_s, float), np.asarray(c.bwd_s, float)
    F, B = float(fwd.sum()), float(bwd.sum())
    p_, s_, m = pipe.stages, pipe.stage, pipe.microbatches
    a0 = 0.0
    if s_ > 0:
        fend, _ = ideal_timeline(p_, m, F, B, pipe.send_s)
        a0 = float(fend[s_ - 1, 0]) + pipe.send_s
    after = np.array([max(g.last_forward_use(t.id), t.producer) + 1 for t in tens], int)
    low = np.array([min(g.saved_by[t.id]) for t in tens], int)
    pos = {t.id: i for i, t in enumerate(tens)}
    # GR_i: recomputed bytes whose forward use ends before forward step i (prefix sums)
    for i in range(n):
        new = [j for j in np.nonzero(after == i)[0] if b[j] > 0]
        row([(GR + i, 1.0)] + ([(GR + i - 1, -1.0)] if i else []) + [(R + j, -b[j] / unit) for j in new], 0.0, 0.0)
    row([(RB, 1.0)] + [(R + j, -b[j] / unit) for j in range(nt) if b[j] > 0], 0.0, 0.0)
    order = list(pipe.order)
    tail = tail_constants(c, pipe)
    # per pass: the paths after it to use, (seconds, backward passes on them): the longest one
    # when nothing is re-run, and the one through every later pass (which counts the most)
    paths = []
    for x in range(len(order)):
        fin = [(v, j) for j, v in enumerate(tail[x]) if math.isfinite(v)]
        paths.append(sorted({max(fin), max(fin, key=lambda vj: (vj[1], vj[0]))}))
    fwd_rest = np.cumsum(fwd[::-1])[::-1]   # sum_{l >= i} fwd_l
    bwd_upto = np.cumsum(bwd)               # sum_{l <= j} bwd_l
    done: set[int] = set()
    bt = bw * t0 / unit
    for x, (kind, k) in enumerate(order):
        if kind == "F":
            q = len(done)
            for i in range(n):
                for later, nb in paths[x]:
                    const = q * (total + inputs) + keep[i] - budget + bw * (fwd_rest[i] + later + a0)
                    row([(E, bt), (RHO, -bt * nb), (RB, float(q)), (GR + i, 1.0)], const / unit - slack, np.inf)
            done.add(k)
        else:
            done.discard(k)
            q = len(done)
            for j in range(n):
                saved = sorted({pos[y] for y in g.ops[j].saves if y in pos})
                free = float(b[low <= j].sum() - b[saved].sum())
                for later, nb in paths[x]:
                    const = (q * (total + inputs) + keep[bwd_step[j]] - free - budget
                             + bw * (bwd_upto[j] + later + a0))
                    row([(E, bt), (RHO, -bt * nb), (RB, float(q)), (GB + j, -1.0)]
                        + [(K + i, b[i] / unit) for i in saved if b[i] > 0], const / unit - slack, np.inf)


def _memory_rows(problem, pipe, tens, K: int, KB: int, GF: int, GB: int, row) -> None:
    """The in-flight memory rows (module docstring, (ii) memory), in units of the budget, each
    relaxed by more than the LP's tolerance (so a plan on the edge is never cut off): at forward
    step ``i``, ``q_f (Kb + I) + keep[i] - (gone bytes) + Gf_i <= budget``; at the backward step
    of op ``j``, ``q_b (Kb + I) + keep[bwd j] - (free bytes) + Gb_j - (kept bytes op j saves)
    <= budget``, with ``Gf_i``, ``Gb_j`` prefix sums of ``k_t b_t`` (chained rows: the model stays
    linear in the graph's size)."""
    g = problem.graph
    n, nt = len(g.ops), len(tens)
    budget = float(problem.budget_bytes)
    unit = max(budget, 1.0)
    slack = 10 * PIPE_LP_SHAVE + 1.0 / unit
    q_f, q_b = in_flight_counts(pipe.order)
    inputs = float(sum(t.bytes for t in g.tensors if t.producer is None))
    b = np.array([float(t.bytes) for t in tens])
    sched = compile_schedule(g, {t.id: Decision.KEEP for t in tens})
    keep = sched.static_memory().astype(float)
    bwd_step = {o: s for s, (kind, o) in enumerate(zip(sched.kinds, sched.ops, strict=True)) if kind == BWD}
    row([(KB, 1.0)] + [(K + i, -b[i] / unit) for i in range(nt) if b[i] > 0], 0.0, 0.0)
    # forward: a tensor's forward use ends before step ``after``
    after = np.array([max(g.last_forward_use(t.id), t.producer) + 1 for t in tens], int)
    low = np.array([min(g.saved_by[t.id]) for t in tens], int)      # last backward use: op ``low``
    pos = {t.id: i for i, t in enumerate(tens)}
    for i in range(n):
        new = [j for j in np.nonzero(after == i)[0] if b[j] > 0]
        row([(GF + i, 1.0)] + ([(GF + i - 1, -1.0)] if i else []) + [(K + j, -b[j] / unit) for j in new], 0.0, 0.0)
        gone = float(b[after <= i].sum())
        row([(KB, float(q_f)), (GF + i, 1.0)], -np.inf, (budget - keep[i] + gone - q_f * inputs) / unit + slack)
    for j in range(n):
        new = [i for i in np.nonzero(low == j)[0] if b[i] > 0]
        row([(GB + j, 1.0)] + ([(GB + j - 1, -1.0)] if j else []) + [(K + i, -b[i] / unit) for i in new], 0.0, 0.0)
        saved = sorted({pos[x] for x in g.ops[j].saves if x in pos})
        free = float(b[low <= j].sum() - b[saved].sum())
        row([(KB, float(q_b)), (GB + j, 1.0)] + [(K + i, -b[i] / unit) for i in saved if b[i] > 0],
            -np.inf, (budget - keep[bwd_step[j]] + free - q_b * inputs) / unit + slack)


def keep_rows(problem) -> list[tuple[dict[int, float], float]]:
    """The in-flight memory rows of ``pipeline_lp`` over the keep decisions alone, as
    ``[({tensor id: bytes}, rhs)]``, each meaning ``sum_t bytes_t * keep_t <= rhs`` (bytes): one
    per forward step and per backward op. Every shared plan that fits the pipelined ``problem``
    satisfies them (the module docstring's memory rows, with ``keep_t`` 1 for KEEP), so the
    ``milp`` planner adds them to the one-micro-batch exact model of a pipeline stage (docs/pipeline.md,
    "Pipeline stages"). Dense: for the exact model's sizes."""
    check_type(problem, Problem, "keep_rows(problem)", "a Problem", ParameterError)
    pipe = pipeline_of(problem)
    if pipe is None:
        raise ParameterError("keep_rows(problem): needs a pipeline stage (a problem built with pp > 1 or "
                             "microbatches > 1); got a one-GPU problem")
    g = problem.graph
    n = len(g.ops)
    tens = [g.tensors[t] for t in problem.planning_ids]
    budget = float(problem.budget_bytes)
    q_f, q_b = in_flight_counts(pipe.order)
    inputs = float(sum(t.bytes for t in g.tensors if t.producer is None))
    sched = compile_schedule(g, {t.id: Decision.KEEP for t in tens})
    keep = sched.static_memory().astype(float)
    bwd_step = {o: s for s, (kind, o) in enumerate(zip(sched.kinds, sched.ops, strict=True)) if kind == BWD}
    out = []
    for i in range(n):
        gone = [t for t in tens if max(g.last_forward_use(t.id), t.producer) + 1 <= i]
        coefs = {t.id: float(q_f * t.bytes) for t in tens}
        for t in gone:
            coefs[t.id] += t.bytes
        out.append((coefs, budget - keep[i] + sum(t.bytes for t in gone) - q_f * inputs))
    for j in range(n):
        saved = set(g.ops[j].saves)
        free = [t for t in tens if t.id not in saved and min(g.saved_by[t.id]) <= j]
        coefs = {t.id: float(q_b * t.bytes) for t in tens}
        for t in free:
            coefs[t.id] += t.bytes
        out.append((coefs, budget - keep[bwd_step[j]] + sum(t.bytes for t in free) - q_b * inputs))
    return out
