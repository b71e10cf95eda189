"""The aggregated relaxation: a small model whose optimum is a certified lower bound for any size.

The exact formulation (``formulation.py``) follows every potential step and copy; it is
exact but grows with tensors x steps and with the recompute trees, so it stops at a few dozen
planning tensors. This model keeps one variable per decision and per op, and replaces the
timeline by **capacities**: what the D2H engine can have copied out by a given time, what the
H2D engine can have copied back before a backward step, and the memory that every step must
free. Every plan (with any issue points and any ``d2h_order``) maps to a feasible point whose
objective is at most the plan's extra time, so:

* its LP optimum is a lower bound (``slackswap.bounds.capacity_bound``, every size, ~1 s);
* with integral decisions (``integral=True``) it is a small MILP whose solver dual bound is a
  tighter lower bound (the MILP planner uses it above ``max_exact_tensors``).

Times are scaled by the forward time ``t0``, bytes by the largest excess ``b0``. With ``T_k`` the
forward time before step ``k``, ``A(s)`` the keep-all accounted memory of step ``s``, ``B`` the
budget, ``bw`` the fastest D2H rate of any swappable tensor, and ``ms(t)`` the highest op id that
saves ``t`` (its first backward use):

Variables (names as in the LP file):

* ``r[p]`` op ``p`` is re-run in the backward pass (its first re-run); ``x[t]`` tensor ``t`` is
  RECOMPUTE; ``s[t]`` tensor ``t`` is SWAP (binary with ``integral``, else in [0, 1]); ``y[t]``,
  ``again[p]``: multi-level recompute (``mem_bwd`` below);
* ``sigma[k]`` stall before forward step ``k`` (cumulative; ``sigma[n]`` also holds the stall of
  the first backward stage); ``beta[j]`` backward stall before the backward step of op ``j``
  (cumulative), plus the time of every repeated re-run before it (hold points); ``rho``
  first-re-run time, ``rho_first`` recompute time run before the first backward step;
* ``C[k]`` swapped bytes produced by ops ``< k``; ``M[k] = min_{j<k} (C[j] - bw E_j)`` (a running
  minimum, ``E_j = T_{j+1} + sigma[j]`` the end of op ``j``); ``W[k]`` / ``Wb[j]`` swapped bytes
  released by forward step ``k`` / backward step ``j``; ``rf[q]``, ``z[...]``: op ``q`` re-run in
  the first backward stage, and why.

Rows:

* ``one_of[t]: x + s <= 1``; ``x_needs_r[t]: x[t] <= r[producer]``; ``prereq[p,q]: r[p] <= r[q]``
  when ``q`` produces an unsaved input of ``p``; ``rho_total: rho <= sum c_p r[p]``;
* ``mem_fwd[k]``: ``sum_{t: forward use over} b_t x[t] + W[k] >= A(k) - B``, with
  ``W_src[k]: W[k] <= sum b_t s[t]`` over the same tensors and ``W_d2h[k]: W[k] <= M[k] + bw S_k``
  (``S_k = T_k + sigma[k]``): the copies of the outputs of ops ``>= j`` start after ``E_j`` on one
  serial engine, whatever their order;
* ``mem_bwd[j]``: the same at the backward step of op ``j`` (``A`` of keep-all's backward step),
  where tensors with ``ms(t) < j`` can be absent (not needed yet), and with hold points
  (multi-level recompute, docs/timeline.md 3) also a RECOMPUTE tensor at a step ``j`` between two
  of its savers that is not one (``y[t]``, gap steps only): a copy regenerated for a stage above
  ``j`` may be freed before ``j``. It is needed again below ``j``, so its producer re-runs at
  least twice: ``again[p] >= y[t]`` and ``again_in_beta: sum c_p again[p] <= beta[0]`` (every
  re-run after an op's first is counted in ``beta``, which holds the backward stall and these
  repeats; the time rows below only get looser, since every backward step starts later by
  them). Without hold points a tensor first needed at a stage ``>= j`` is resident from then to
  its last use (fetched, regenerated or kept). The backward step of op ``j`` starts by
  ``S^b_j = T_n + sigma[n] + rho + sum_{i>j} bwd_i + beta[j]`` (``rho_first`` for ``j = n-1``;
  with ``tight=True``, ``rho_by[j]`` for every ``j``, below);
* ``d2h_back[j]`` / ``h2d_back[j]``: every swapped tensor with ``ms(t) >= j`` has been copied out
  (D2H capacity as above) and copied back (``sum h2d_t s[t]``, on the H2D engine, which starts
  no earlier than the end of the forward pass) by ``S^b_j``;
* ``chain[t]``: a swapped tensor's copy back follows its copy out, which starts when its
  producer ``p`` ends: ``S^b_{ms(t)} >= E_p + (d2h_t + h2d_t) s[t]``, latency included (the
  capacity rows above count D2H bytes at the fastest rate, where kilobyte copies are all but
  free);
* without ``releases``, ``Wb_pend``, ``d2h_first[i]``: at the first backward step (op ``n-1``),
  ``pend[t] <= s[t]`` is the part of SWAP tensor ``t``'s copy out (``ms(t) < n-1``) still pending at
  ``S^b_{n-1}`` (binary with ``integral``: a copy frees its bytes whole): ``Wb[n-1] <= sum
  b_t (s[t] - pend[t])``, and for every op ``i`` that makes a SWAP tensor ``PT[i] = sum d2h_t (s[t] -
  pend[t])`` over the tensors of ops ``>= i`` (a tensor needed in stage ``n-1`` has no ``pend``: its
  copy counts whole) ``<= S^b_{n-1} - E_i``: a source is released only when its copy has ended, and
  the copies of ops ``>= i`` run after ``E_i`` one at a time, whole, in any order. ``Wb_d2h`` counts
  bytes at the fastest rate, and its ``M[n]`` subtracts every copy of the ops ``< i``, also those still
  pending, so a few small early copies left pending let the late ones end early. Not with
  ``releases``: there the ``v``/``o`` rows count copy time per copy, and these rows changed
  HiGHS's search enough that GPT-2 with 3 layers at 0.9 and 4 at 0.95 lost their proofs;
* with ``releases=True`` (the exact path; the rows grow with tensors x steps), per-copy latency in
  the forward memory rows: ``u[t,k]``, swapped tensor ``t`` released (copied out in full) by forward
  step ``k``, ``u[t,k] <= s[t]``; ``mem_rel[k]``: ``RXf[k] + sum b_t u[t,k] >= A(k) - B``;
  ``u_time[t,k]``: ``S_k >= E_p + d2h_t u[t,k]``; ``u_d2h[k]``: ``sum d2h_t u[t,k] <= S_k + MT[k]``,
  ``MT[k] = min_{j<k} (CT[j] - E_j)`` with ``CT[j]`` the D2H time of the tensors swapped from ops
  ``< j`` (the copies of outputs of ops ``>= j`` run after ``E_j`` one at a time, each whole);
  ``d2h_time_back[j]``: ``sum d2h_t s[t]`` over ``ms(t) >= j`` ``<= S^b_j + MT[n]``. The ``W[k]``
  rows let a fraction of a copy free that fraction of its bytes, latency prorated; these do not. The
  same at backward steps: ``v[t,j] <= s[t]``, swapped tensor ``t`` (``ms(t) < j``) absent at the
  backward step of op ``j``: copied out in full by ``S^b_j`` (``v_time``, ``v_d2h`` as above; with
  ``tight=True`` the ``o`` rows instead) and not yet copied back, so its issue stage is below
  ``j`` and its copy back, ``h2d_t`` long, starts after the backward step of op ``j`` ends (the
  ready time of the next stage's first step, docs/timeline.md 3) and ends before
  ``S^b_{ms(t)}``: the backward steps strictly between (``G`` of nominal time) are stretched by
  ``h2d_t - G`` (``v_back[t,j]``: ``(h2d_t - G) v[t,j] <= D(ms(t), j)``, where ``D(i, j)`` is
  ``S^b_i - S^b_j`` less its nominal part: with ``tight``, and at ``j = n-1``, ``beta[i] -
  beta[j]`` plus ``rho_by[i] - rho_by[j]`` (``rho - rho_first``), the stall and the re-runs
  between; else ``extra``, the objective, since ``rho`` there counts every re-run at every
  step). A re-run may also read ``t`` before ``ms(t)`` (``rerun_readers``): a RECOMPUTE ``y``
  regenerated by an op that reads ``t`` (directly or through the unsaved inputs it rebuilds) is
  regenerated in a stage ``>= ms(y)``, so ``t`` is resident at every ``j <= ms(y)`` (``v_held[t,j,y]:
  v[t,j] + x[y] <= 1``), and below, the same window ends at ``S^b_{ms(y)}`` (``v_read[t,j,y]``:
  ``(h2d_t - G_y) (v[t,j] + x[y] - 1) <= D(ms(y), j)``). Without these rows a plan that swaps the
  last layer's output and recomputes the final norm, whose re-run opens the backward pass, was
  charged no stall for the copy back that waits for the loss's backward step to end (GPT-2 with
  4 layers at 0.8: 1.0 ms, benchmarks/README.md). With ``chains=K`` (and ``tight``; the planner's
  third pass) the same along a chain of up to ``K`` RECOMPUTE tensors (``rerun_chains``): ``t``
  read by an op ``q`` that regenerates ``y_m``, read by one that regenerates ``y_{m-1}``, ... up to
  ``y_1``; when all are RECOMPUTE the copy back ends before ``q`` starts, and the ops from ``q`` to
  the end of ``y_1``'s regeneration (``A``) all re-run after that, within the window
  (``v_chain[t,j,k]``: ``(h2d_t + c_A - G)(v[t,j] + sum x[y_l] - m) <= D(ms(y_1), j)``), and
  the copies back that chains read in one stage ``i`` together, on the one H2D engine after step
  ``j``, the fewest re-runs after a read, ``a_i``, following the last (``v_chains[j,i]``: ``sum
  h2d_t w[t,j,i] + a_i z[j,i] - G <= D(i, j)``, ``w[t,j,i] >= v[t,j] + c[t,i] - 1``, ``c[t,i]`` at
  least each inclusion-minimal chain's condition, ``z >= w``: docs/milp.md, "Full-size models: the aggregated relaxation and proven gaps"); ``Wb_rel[j]``: ``Wb[j] <= sum b_t v[t,j]``. A copy
  back issued early holds its memory until the use. With ``tight=True``, ``o[t,j]``: swapped tensor
  ``t`` copied out in full by ``S^b_j``; a copy out once done stays done, so ``o[t,j] >= v[t,j]``,
  ``>= o`` at every earlier backward step (``o_mono``) and ``>=`` every ``u[t,k]`` (``o_fwd``), ``<=
  s[t]``; ``o_time[t,j]``: ``S^b_j >= E_p + d2h_t o[t,j]``; ``o_d2h[j]``: ``sum d2h_t o[t,j] +
  DTb[j] <= S^b_j + MT[n]`` (``DTb[j]``: the D2H time of the swapped tensors with ``ms(t) >= j``,
  all copied out by then). Without ``o`` a tensor released at one step and another at a later one
  were each charged alone, as if the engine had copied only that one;
* with ``tight=True`` (and ``releases``), ``rho_by[j]`` (the recompute before the backward step of
  op ``j``, in ``S^b_j``) ``<= sum c_q rf[j,q]`` over the ops ``q`` that may be first re-run in a
  stage ``>= j`` (the ``rf_*`` rows below for the RECOMPUTE tensors with ``ms(t) >= j``, two rows
  per op without ``z``): the simulator re-runs an op in stage ``i`` only to rebuild what stage ``i``
  needs, and repeated re-runs are in ``beta``. Without it ``S^b_j`` counted every re-run of the
  backward pass, which lets a copy out end "before" a step it really delays;
* with ``tight=True`` (and ``releases``), ``seg[j,t]`` (``segments``): a RECOMPUTE tensor ``t``
  with ``ms(t) < j`` whose producer re-runs in a stage ``>= j`` (to rebuild a tensor needed
  there, directly or through a chain of RECOMPUTE and unsaved inputs: ``g[j,q]``) is resident
  at the backward step of op ``j`` (``hold[j,t]`` takes its bytes out of ``mem_bwd[j]``), unless
  the producer re-runs again (``again[p]``: a transient copy, hold points). Without it a layer
  rebuilt as one segment counted its lower tensors as absent above their own stages;
* ``rf_*``: ``rho_first <= sum c_q rf[q]``, where ``rf[q] <= r[q]`` and ``rf[q] <= sum z`` over the
  reasons ``q`` may be re-run in stage ``n-1``: it produces a RECOMPUTE tensor that op ``n-1``
  saves (``z <= x[y]``) or a non-resident input of an op re-run in that stage (``z <= rf[p]``,
  and ``z <= x[y]`` when that input is a planning tensor).

Objective: ``minimize sigma[n] + beta[0] + sum c_p r[p]`` (the extra time over the ideal step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..core.plan import Decision
from ..timeline import compile_schedule
from .model import Model

#: the most nonzeros of the ``v_chain`` rows (``build(chains=K)``): chains are followed as deep as
#: ``K`` while their rows fit (``chain_depth``). The rows grow with the number of chains times the
#: backward steps a copy back can wait behind: GPT-2 with 4 layers at 0.79 has 32,825 at depth 12,
#: `tiny` with 5 layers at 0.5 (latency-bound copies, short steps) 2,118,278 at 8 and 15,731,858 at 12
CHAIN_NONZEROS = 250_000


@dataclass
class Aggregate:
    """The built model with what is needed to read it: ``t0`` (seconds per time unit: the
    objective times ``t0`` is extra seconds over the ideal step), the column of each decision
    (``rec``, ``swap``: tensor id -> column) and, with release rows, ``released``: ``(column,
    tensor, rank)`` of each release column (``u[t,k]``: released by forward step ``k``;
    ``v[t,j]``, ``o[t,j]``: copied out by the backward step of op ``j``), ``rank`` the step's
    place in time."""

    model: Model
    t0: float
    rec: dict[int, int]
    swap: dict[int, int]
    released: list[tuple[int, int, int]] = field(default_factory=list)


def needs(problem) -> tuple[np.ndarray, np.ndarray]:
    """Keep-all accounted memory minus the budget at every forward step (``[k]``) and at the
    backward step of every op (``[j]``), in bytes."""

    g = problem.graph
    n = len(g.ops)
    mem = compile_schedule(g, {t: Decision.KEEP for t in problem.planning_ids}).static_memory().astype(float)
    budget = float(problem.budget_bytes)
    return mem[:n] - budget, (mem[n:2 * n] - budget)[::-1].copy()


def bandwidth(planning, costs) -> float:
    """Bytes per second the D2H engine can move at best: the largest ``b / d2h_s`` over swappable
    tensors (a copy of ``b`` bytes takes ``latency + b / bw``, so big copies are the fastest)."""
    if any(t.swappable and t.bytes > 0 and costs.d2h_s[t.id] <= 0 for t in planning):
        return math.inf
    return max((t.bytes / costs.d2h_s[t.id] for t in planning if t.swappable and costs.d2h_s[t.id] > 0),
               default=0.0)


def prerequisites(graph, planning: set[int]) -> list[tuple[int, int]]:
    """Pairs (p, q): re-running op p needs op q re-run first (q produces an unsaved input of p,
    which is never resident in the backward pass)."""
    out = []
    for op in graph.ops:
        for x in set(op.inputs):
            q = graph.tensors[x].producer
            if q is not None and x not in planning:
                out.append((op.id, q))
    return out


def rebuilt_inputs(graph, planning: set[int], rec) -> dict[int, list[tuple[int, int]]]:
    """Op -> ``[(producer, input)]`` in input order: the inputs a re-run of that op may have to
    rebuild first, an unsaved intermediate (never resident in the backward pass) or a tensor that
    may be RECOMPUTE (in ``rec``)."""
    out: dict[int, list[tuple[int, int]]] = {}
    for op in graph.ops:
        for inp in dict.fromkeys(op.inputs):
            p = graph.tensors[inp].producer
            if p is not None and (inp not in planning or inp in rec):
                out.setdefault(op.id, []).append((p, inp))
    return out


def _regenerating(graph, planning: set[int]):
    """``ops(y)``: the ops that re-run to regenerate tensor ``y``: its producer and, by the closure
    of ``prerequisites``, the producers of the unsaved inputs (never resident in the backward
    pass) of those; and that relation, op -> the ops it needs re-run first."""
    first: dict[int, set[int]] = {}
    for p, q in prerequisites(graph, planning):
        first.setdefault(p, set()).add(q)

    def ops(y: int) -> set[int]:
        c = graph.tensors[y].producer
        out, stack = {c}, [c]
        while stack:
            for q in first.get(stack.pop(), ()):
                if q not in out:
                    out.add(q)
                    stack.append(q)
        return out

    return ops, first


def rerun_readers(graph, planning: set[int], x) -> dict[int, list[int]]:
    """Tensor ``t`` -> the RECOMPUTE candidates ``y`` (in ``x``) whose regeneration reads ``t``: the
    producer of ``y`` reads ``t``, or an op that rebuilds one of its unsaved inputs (never resident
    in the backward pass, so re-run with it: the closure of ``prerequisites``) does. When ``y`` is
    RECOMPUTE the producer re-runs in a stage ``>= ms(y)``, so ``t`` is needed by then, whatever
    ``ms(t)``. The chains of one tensor of ``rerun_chains``."""
    return {t: list(dict.fromkeys(ch[0] for ch, _ in chains))
            for t, chains in rerun_chains(graph, planning, x, 1).items()}


def rerun_chains(graph, planning: set[int], x, depth: int) -> dict[int, list[tuple[tuple[int, ...], tuple[int, ...]]]]:
    """Tensor ``t`` -> ``[(chain, after)]``: the regeneration of ``chain[0]`` (in ``x``) reads
    ``t`` through the RECOMPUTE tensors of ``chain`` (each ``chain[k+1]`` is read by an op that
    regenerates ``chain[k]``, at most ``depth`` tensors), and ``after`` holds the ops that re-run
    between that read and the end of ``chain[0]``'s regeneration: the reader itself, the
    producers of ``chain[1:]`` and of ``chain[0]``, and the ops between (each once, a set). When
    every tensor of ``chain`` is RECOMPUTE, ``t`` is read by the re-run of an op of ``after``,
    and the others follow it, before the backward step of op ``ms(chain[0])``. The ops that re-run
    to regenerate a tensor are its producer and the producers of its unsaved inputs, by the
    closure of ``prerequisites``; an op downstream of the reader is one that reads its output
    within that closure. ``after`` also holds the ops that rebuild the unsaved inputs a chain's op
    reads after the input on the way down to ``t`` (``siblings``): a re-run first makes its inputs
    available in input order (docs/timeline.md, "Backward: recompute, prefetch, gradients"), so those re-runs follow the read; but
    not the reader's own later inputs, which are there before the reader starts, nor an op that
    something else may have re-run before. A later input ``z`` that may be RECOMPUTE adds an
    entry ``(chain + (z,), after | the ops of z's regeneration)``, where nothing can have needed
    ``z`` before (docs/journal/milp-full-size.md, "The re-runs of later inputs")."""
    regen, first = _regenerating(graph, planning)
    out: dict[int, list[tuple[tuple[int, ...], tuple[int, ...]]]] = {}

    def downstream(ops: set[int], q: int) -> set[int]:
        """``q`` and the ops of ``ops`` that need it, directly or through others of ``ops``."""
        down, grew = {q}, True
        while grew:
            grew = False
            for o in ops:
                if o not in down and first.get(o, set()) & down:
                    down.add(o)
                    grew = True
        return down

    readers = [set(c) for c in graph.consumers]       # per tensor: the ops that read it
    owners: dict[int, set[int]] = {}        # op -> the planning tensors whose regeneration re-runs it
    for z in planning:
        if graph.tensors[z].producer is not None:
            for o in regen(z):
                owners.setdefault(o, set()).add(z)

    def siblings(y: int, chain: tuple[int, ...], ops: set[int], q: int, t: int, top: int):
        """The ops of ``ops`` (``y``'s regeneration, ``y`` the last of ``chain``, in stage ``top``) that re-run after ``q``, not
        downstream of it, in the depth-first order of the backward pass (docs/timeline.md, "Backward: recompute, prefetch, gradients": a re-run first makes its inputs available, in input order): those after ``q``'s own
        re-run (``q`` reads ``t``), and those after ``q`` has made ``t`` available (a deeper op
        reads it, within ``t``'s regeneration). Only ops that nothing else can have re-run
        before (``private``). Third, for a deeper read: the RECOMPUTE candidates ``z`` read after
        ``q`` has made ``t`` available (``q``'s later inputs too) that nothing can have needed
        before, with the ops of their regeneration: when ``z`` is RECOMPUTE those re-run after the
        read too (``fresh``)."""
        seq: list = []
        later_reads: list[int] = []

        def visit(o: int) -> None:
            if o in seq:
                return
            for inp in dict.fromkeys(graph.ops[o].inputs):
                if o == q and inp == t and "read" not in seq:
                    seq.append("read")
                elif "read" in seq and inp in x and inp != t:
                    later_reads.append(inp)
                pr = graph.tensors[inp].producer
                if pr is not None and pr in first.get(o, ()):
                    visit(pr)
            seq.append(o)

        visit(graph.tensors[y].producer)
        if "read" not in seq:
            return set(), set(), []
        down = downstream(ops, q)

        def needed(z: int) -> bool:      # may be needed before the backward step of op top
            return bool(readers[z]) or max(graph.saved_by[z], default=-1) >= top

        def private(o: int, seen: frozenset) -> bool:
            """Op ``o`` re-runs only within ``y``'s regeneration: it regenerates no other planning
            tensor that may be needed by then, and each output is unsaved and read only by ops of
            ``ops`` that are on the way up to ``y`` or private themselves, or saved only below stage
            ``top`` and read by no op."""
            if any(z != y and needed(z) for z in owners.get(o, ())):
                return False
            for w in graph.ops[o].outputs:
                if w in planning:
                    if needed(w):
                        return False
                else:
                    for r in readers[w]:
                        if r not in ops or (r not in down and (r in seen or not private(r, seen | {r}))):
                            return False
            return True

        def after(mark) -> set[int]:
            return {o for o in seq[seq.index(mark) + 1:] if o not in down and private(o, frozenset({o}))}

        deeper = after("read")
        late = deeper | down        # ops that re-run after a read below q's input t (q too)

        def fresh(z: int) -> bool:
            """``z`` is needed first after the read: saved only below stage ``top``, read only by
            ops of ``late``, and the ops of its regeneration make nothing else that may be needed
            before (their other planning outputs likewise, their unsaved ones read only there)."""
            rz = regen(z)
            for w in {z} | {w for o in rz for w in graph.ops[o].outputs}:
                if w in planning:
                    if max(graph.saved_by[w], default=-1) >= top or not readers[w] <= late:
                        return False
                elif not readers[w] <= late | rz:
                    return False
            return True

        return after(q), deeper, [(z, frozenset(regen(z))) for z in dict.fromkeys(later_reads)
                                  if z not in chain and fresh(z)]

    def walk(y: int, chain: tuple[int, ...], tail: frozenset, later: tuple = ()) -> None:
        """``later``: ``(z, ops)`` of the levels above, RECOMPUTE candidates read after the reads
        below (``siblings``): each adds an entry ``(chain + (z,), after | ops)``, so its row holds
        when ``z`` is RECOMPUTE too."""
        ops = regen(y)
        top = max(graph.saved_by[chain[0]])
        for q in sorted(ops):
            after = tail | downstream(ops, q)
            for t in dict.fromkeys(graph.ops[q].inputs):
                if t not in planning or t in chain:
                    continue
                direct, deeper, new = siblings(y, chain, ops, q, t, top)
                out.setdefault(t, []).append((chain, tuple(sorted(after | direct))))
                for z, zops in later:
                    if z != t:
                        out[t].append((chain + (z,), tuple(sorted(after | direct | zops))))
                if t in x and len(chain) < depth:
                    walk(t, chain + (t,), after | deeper, later + tuple(f for f in new if f[0] != t))

    for y in x:
        walk(y, (y,), frozenset())
    return out


def chain_depth(deep: dict, swapped: set[int], ms: dict[int, int], steps: list[int], charged) -> int:
    """The longest chain length whose ``v_chain`` rows (``deep``: ``rerun_chains``; one row per
    swapped tensor ``t``, chain and backward step ``j`` of ``steps`` with ``ms(y_1) < j``, ``ms(t) <
    ms(y_1)`` and ``charged(t, after, ms(y_1), j)``: the row is not void), counted with the
    rows of every shorter chain, have at most ``CHAIN_NONZEROS`` nonzeros."""
    per: dict[int, int] = {}
    seen: dict[tuple, int] = {}
    for t, ents in deep.items():
        if t not in swapped:
            continue
        for ch, after in ents:
            top = ms[ch[0]]
            if top <= ms[t]:
                continue
            key = (t, top, frozenset(after))
            if key not in seen:
                seen[key] = sum(1 for j in steps if j > top and charged(t, after, top, j))
            per[len(ch)] = per.get(len(ch), 0) + seen[key] * (len(ch) + 5)
    total, depth = 0, max(per, default=0)
    for d in sorted(per):
        total += per[d]
        if total > CHAIN_NONZEROS:
            return d - 1
    return depth


def minimal_sets(chains) -> list[tuple[int, ...]]:
    """The inclusion-minimal sets among ``chains`` (iterables of tensor ids), each as a sorted
    tuple: a condition "every tensor of some chain is RECOMPUTE" holds exactly when it holds for
    one of them."""
    kept: list[frozenset] = []
    for ch in sorted({frozenset(ch) for ch in chains}, key=len):
        if not any(k <= ch for k in kept):
            kept.append(ch)
    return [tuple(sorted(k)) for k in kept]


def segments(m: Model, g, pset: set[int], x: dict[int, int], ms: dict[int, int], steps: list[int],
             again: dict[int, int], rebuilt: dict[int, list[tuple[int, int]]]) -> dict[int, dict[int, int]]:
    """The ``seg`` rows (``tight=True``): a RECOMPUTE tensor ``t`` with ``ms(t) < j`` is resident
    at the backward step of op ``j`` when its producer ``p`` re-runs in a stage ``>= j`` (the
    re-run allocates ``t``, which stays until its last use, below ``j``), unless that copy is
    transient (a hold point) and ``p`` re-runs again for stage ``ms(t)`` (``again[p]``, counted in
    ``beta[0]``). ``g[j,q]`` is a lower value of "op ``q`` re-runs in a stage ``>= j``": ``>= x[t']``
    for its RECOMPUTE outputs with ``ms(t') >= j``; ``>= g[j,c]`` when ``q`` produces an unsaved
    input of op ``c`` (never resident: ``c``'s re-run needs ``q``'s); ``>= g[j,c] + x[y] - 1`` when
    it produces a RECOMPUTE input ``y`` of ``c``. ``hold[j,t] >= x[t] + g[j,p] - 1 - again[p]``
    takes ``t``'s bytes back from what ``mem_bwd[j]`` frees. Returns ``{j: {t: hold column}}`` for
    the ``steps`` given (those with a ``mem_bwd`` row); ``rebuilt`` is ``rebuilt_inputs``. Without it
    a chain recomputed as one segment (a layer's ``fc1`` rebuilt to rebuild its ``gelu``) counted
    as absent at the steps between its two savers."""
    succ: dict[int, list[tuple[int, int | None]]] = {}       # op -> [(consumer op, planning input or None)]
    for c, ins in rebuilt.items():
        for q, inp in ins:
            succ.setdefault(q, []).append((c, inp if inp in pset else None))
    roots: dict[int, list[int]] = {}         # op -> its RECOMPUTE outputs
    for t in x:
        roots.setdefault(g.tensors[t].producer, []).append(t)
    order = sorted(succ.keys() | roots.keys(), reverse=True)     # consumers come after producers
    out: dict[int, dict[int, int]] = {}
    for j in steps:
        cands = [t for t in x if ms[t] < j]
        if not cands:
            continue
        useful: set[int] = set()
        for q in order:
            if any(ms[t] >= j for t in roots.get(q, ())) or any(c in useful for c, _ in succ.get(q, ())):
                useful.add(q)
        gv = {q: m.var(f"g[{j},{q}]", 0.0, 1.0) for q in sorted(useful)}
        for q, v in gv.items():
            for t in roots.get(q, ()):
                if ms[t] >= j:
                    m.add_ge(f"g_root[{j},{t}]", [(1, v), (-1, x[t])], 0)
            for c, y in succ.get(q, ()):
                if c in gv:
                    m.add_ge(f"g_why[{j},{q},{c},{y}]", [(1, v), (-1, gv[c])] + ([(-1, x[y])] if y is not None else []),
                             -1 if y is not None else 0)
        for t in cands:
            p = g.tensors[t].producer
            if p not in gv:
                continue
            if p not in again:
                again[p] = m.var(f"again[{p}]", 0.0, 1.0)
            h = out.setdefault(j, {})[t] = m.var(f"hold[{j},{t}]", 0.0, 1.0)
            m.add_ge(f"seg[{j},{t}]", [(1, h), (-1, x[t]), (-1, gv[p]), (1, again[p])], -1)
    return out


def build(problem, integral: bool = False, releases: bool = False, tight: bool = False,
          chains: int = 0) -> Aggregate | None:
    """The aggregated model of ``problem`` (module docstring), or None when no step exceeds the
    budget under keep-all (the bound is then the ideal step). ``releases`` adds the per-copy
    release rows (``u[t,k]``, ``v[t,j]``: one column per swappable tensor and step that needs
    memory): tighter where copies are latency-bound, sized for a few dozen planning tensors.
    ``tight`` (with ``releases``) adds the ``rho_by``, ``o`` and ``seg`` rows: tighter still, but its MILP
    can take many more nodes (`tiny` 4 layers at 0.5: 66 without, 1,264 with; GPT-2 with 3 layers
    at 0.9 stops at 2,000 below the bound it proves without them)."""
    g, c = problem.graph, problem.costs
    n = len(g.ops)
    need_f, need_b = needs(problem)
    if n == 0 or not math.isfinite(problem.budget_bytes) or max(need_f.max(), need_b.max()) <= 0:
        return None
    planning = [g.tensors[t] for t in problem.planning_ids]
    pset = set(problem.planning_ids)
    bw = bandwidth(planning, c)
    timed = math.isfinite(bw)
    cost = np.asarray(c.fwd_s, dtype=float)
    t_before = np.concatenate([[0.0], np.cumsum(cost)])                          # T_k
    b_after = np.concatenate([np.cumsum(np.asarray(c.bwd_s, float)[::-1])[::-1][1:], [0.0]])  # sum_{i>j} bwd_i
    t0 = float(t_before[n]) if t_before[n] > 0 else 1.0
    b0 = float(max(need_f.max(), need_b.max()))
    w = bw * t0 / b0 if timed else 0.0
    saved_by = g.saved_by
    m = Model("slackswap-aggregate")
    r = [m.var(f"r[{p}]", 0.0, 1.0, binary=integral) for p in range(n)]
    x = {t.id: m.var(f"x[{t.id}]", 0.0, 1.0, binary=integral) for t in planning if t.recomputable}
    s = {t.id: m.var(f"s[{t.id}]", 0.0, 1.0, binary=integral) for t in planning if t.swappable}
    sig = [m.var(f"sigma[{k}]") for k in range(n + 1)]
    beta = [m.var(f"beta[{j}]") for j in range(n)]
    rho, rho_first = m.var("rho"), m.var("rho_first")
    size = {t.id: t.bytes / b0 for t in planning}
    released: list[tuple[int, int, int]] = []       # Aggregate.released

    for t in planning:
        if t.id in x and t.id in s:
            m.add_le(f"one_of[{t.id}]", [(1, x[t.id]), (1, s[t.id])], 1)
        if t.id in x:
            m.add_le(f"x_needs_r[{t.id}]", [(1, x[t.id]), (-1, r[t.producer])], 0)
    for p, q in prerequisites(g, pset):
        m.add_le(f"prereq[{p},{q}]", [(1, r[p]), (-1, r[q])], 0)
    m.add_le("rho_total", [(1, rho)] + [(-cost[p] / t0, r[p]) for p in range(n)], 0)
    for k in range(1, n + 1):
        m.add_le(f"sigma_mono[{k}]", [(1, sig[k - 1]), (-1, sig[k])], 0)
    for j in range(n - 1):
        m.add_le(f"beta_mono[{j}]", [(1, beta[j + 1]), (-1, beta[j])], 0)

    # C[k] and the running minimum M[k] (D2H capacity, any copy order)
    by_prod: dict[int, list[int]] = {}
    for t in planning:
        if t.id in s:
            by_prod.setdefault(t.producer, []).append(t.id)
    C = [m.var(f"C[{k}]") for k in range(n + 1)]
    M = [None] + [m.var(f"M[{k}]", -math.inf) for k in range(1, n + 1)]
    m.add_eq("C_def[0]", [(1, C[0])], 0)
    for k in range(1, n + 1):
        m.add_eq(f"C_def[{k}]", [(1, C[k]), (-1, C[k - 1])] + [(-size[t], s[t]) for t in by_prod.get(k - 1, ())], 0)
        if timed:
            if k > 1:
                m.add_le(f"M_mono[{k}]", [(1, M[k]), (-1, M[k - 1])], 0)
            m.add_le(f"M_cap[{k}]", [(1, M[k]), (-1, C[k - 1]), (w, sig[k - 1])], -bw * t_before[k] / b0)

    # freed bytes as running sums: forward (use over by step k) and backward (ms(t) < j)
    e = {t.id: g.last_forward_use(t.id) + 1 for t in planning}
    ms = {t.id: max(saved_by[t.id]) for t in planning}

    def running(prefix: str, key, col, weight, order) -> list[int]:
        """v[i] = sum of weight(t) * col(t) over the planning tensors with key(t) <= i (order 1)
        or key(t) >= i (order -1), for i = 0..n-1, as a chain of equalities."""
        groups: dict[int, list[int]] = {}
        for t in planning:
            if col.get(t.id) is not None and 0 <= key[t.id] <= n - 1:
                groups.setdefault(key[t.id], []).append(t.id)
        vs = [m.var(f"{prefix}[{i}]") for i in range(n)]
        prev = None
        for i in (range(n) if order == 1 else range(n - 1, -1, -1)):
            terms = [(1, vs[i])] + ([(-1, prev)] if prev is not None else [])
            m.add_eq(f"{prefix}_def[{i}]", terms + [(-weight(t), col[t]) for t in groups.get(i, ())], 0)
            prev = vs[i]
        return vs

    h2d = lambda t: c.h2d_s[t] / t0      # noqa: E731
    ms1 = {t: v + 1 for t, v in ms.items()}           # ms(t) < j  <=>  ms(t) + 1 <= j
    rx_f = running("RXf", e, x, size.get, 1)          # RECOMPUTE bytes whose forward use is over
    sx_f = running("SXf", e, s, size.get, 1)
    rx_b = running("RXb", ms1, x, size.get, 1)        # ... not needed before stage j
    sx_b = running("SXb", ms1, s, size.get, 1)
    d_b = running("Db", ms, s, size.get, -1)          # SWAP bytes needed at a stage >= j
    h_b = running("Hb", ms, s, h2d, -1)               # ... and their H2D time

    for k in range(1, n):
        if need_f[k] <= 0:
            continue
        wv = m.var(f"W[{k}]")
        m.add_ge(f"mem_fwd[{k}]", [(1, rx_f[k]), (1, wv)], need_f[k] / b0)
        m.add_le(f"W_src[{k}]", [(1, wv), (-1, sx_f[k])], 0)
        if timed:
            m.add_le(f"W_d2h[{k}]", [(1, wv), (-1, M[k]), (-w, sig[k])], bw * t_before[k] / b0)

    d2h = lambda t: c.d2h_s[t] / t0      # noqa: E731
    rel = releases and timed and bool(s)
    if rel:
        extra = m.var("extra")       # the objective: the plan's extra time (at least)
        m.add_eq("extra_def", [(1, extra), (-1, sig[n]), (-1, beta[0])] + [(-cost[p] / t0, r[p]) for p in range(n)], 0)
        u_all: dict[int, list[int]] = {}     # swapped tensor -> its u columns (forward releases)
        CT = [m.var(f"CT[{k}]") for k in range(n + 1)]
        MT = [None] + [m.var(f"MT[{k}]", -math.inf) for k in range(1, n + 1)]
        m.add_eq("CT_def[0]", [(1, CT[0])], 0)
        for k in range(1, n + 1):
            m.add_eq(f"CT_def[{k}]", [(1, CT[k]), (-1, CT[k - 1])] + [(-d2h(t), s[t]) for t in by_prod.get(k - 1, ())], 0)
            if k > 1:
                m.add_le(f"MT_mono[{k}]", [(1, MT[k]), (-1, MT[k - 1])], 0)
            m.add_le(f"MT_cap[{k}]", [(1, MT[k]), (-1, CT[k - 1]), (1, sig[k - 1])], -t_before[k] / t0)
        for k in range(1, n):
            if need_f[k] <= 0:
                continue
            out = [t for t in planning if t.id in s and e[t.id] <= k]
            u = {t.id: m.var(f"u[{t.id},{k}]", 0.0, 1.0, binary=integral) for t in out}
            for t, v in u.items():
                u_all.setdefault(t, []).append(v)
                released.append((v, t, k))
            m.add_ge(f"mem_rel[{k}]", [(1, rx_f[k])] + [(size[t], v) for t, v in u.items()], need_f[k] / b0)
            m.add_le(f"u_d2h[{k}]", [(d2h(t), v) for t, v in u.items()] + [(-1, MT[k]), (-1, sig[k])],
                     t_before[k] / t0)
            for t in out:
                m.add_le(f"u_src[{t.id},{k}]", [(1, u[t.id]), (-1, s[t.id])], 0)
                late = (t_before[t.producer + 1] - t_before[k]) / t0 + d2h(t.id)
                if late > 0:
                    m.add_le(f"u_time[{t.id},{k}]", [(late, u[t.id]), (-1, sig[k]), (1, sig[t.producer])], 0)
        dt_b = running("DTb", ms, s, d2h, -1)          # D2H time of SWAP tensors needed at a stage >= j

    stage_rho: dict[int, int] = {}

    def rerun(j):       # the recompute counted before the backward step of op j
        if j == n - 1:
            return rho_first
        if not (releases and tight):
            return rho
        if j not in stage_rho:     # with tight: only ops first re-run in stages >= j (rows below)
            stage_rho[j] = m.var(f"rho_by[{j}]")
        return stage_rho[j]

    def s_back(j):      # terms of -bw * S^b_j (scaled) and its constant
        return [(-1, M[n]), (-w, sig[n]), (-w, rerun(j)), (-w, beta[j])], \
            bw * (t_before[n] + b_after[j]) / b0

    # the first backward step's copy windows (Wb_pend, d2h_first: module docstring)
    pend: dict[int, int] = {}
    if timed and s and not releases:
        pend = {t.id: m.var(f"pend[{t.id}]", 0.0, 1.0, binary=integral) for t in planning if t.id in s and ms[t.id] < n - 1}
        for t, v in pend.items():
            m.add_le(f"pend_src[{t}]", [(1, v), (-1, s[t])], 0)
        pt = [m.var(f"PT[{i}]") for i in range(n + 1)]
        m.add_eq(f"PT_def[{n}]", [(1, pt[n])], 0)
        for i in range(n - 1, -1, -1):
            m.add_eq(f"PT_def[{i}]", [(1, pt[i]), (-1, pt[i + 1])] + [(-d2h(t), s[t]) for t in by_prod.get(i, ())]
                     + [(d2h(t), pend[t]) for t in by_prod.get(i, ()) if t in pend], 0)
            if by_prod.get(i):     # PT[i] <= S^b_{n-1} - E_i
                m.add_le(f"d2h_first[{i}]", [(1, pt[i]), (-1, sig[n]), (-1, rerun(n - 1)), (-1, beta[n - 1]),
                                            (1, sig[i])], (t_before[n] - t_before[i + 1]) / t0)

    # multi-level recompute (hold points): a RECOMPUTE tensor may be absent at a backward step
    # between two of its uses (j not a saver, min saver < j < ms); the plan then re-runs its
    # producer again later, which costs at least c_p more (part of beta[0], see the docstring)
    gaps: dict[int, list[int]] = {}
    for t in planning:
        if t.id in x:
            sv = set(saved_by[t.id])
            gap = [j for j in range(min(sv) + 1, ms[t.id]) if j not in sv]
            if gap:
                gaps[t.id] = gap
    y = {t: m.var(f"y[{t}]", 0.0, 1.0, binary=integral) for t in gaps}
    again = {}
    for t in gaps:
        p = g.tensors[t].producer
        if p not in again:
            again[p] = m.var(f"again[{p}]", 0.0, 1.0)
        m.add_le(f"y_needs_x[{t}]", [(1, y[t]), (-1, x[t])], 0)
        m.add_le(f"y_again[{t}]", [(1, y[t]), (-1, again[p])], 0)
    rebuilt = rebuilt_inputs(g, pset, x)
    held = segments(m, g, pset, x, ms, [j for j in range(n) if need_b[j] > 0], again, rebuilt) \
        if rel and tight else {}
    if again:
        m.add_le("again_in_beta", [(cost[p] / t0, v) for p, v in again.items()] + [(-1, beta[0])], 0)
    dropped: dict[int, list[int]] = {}
    for t, gap in gaps.items():
        for j in gap:
            dropped.setdefault(j, []).append(t)

    v_at: dict[int, dict[int, int]] = {}      # swapped tensor -> {j: v[t,j]}

    def window(i: int, j: int) -> list[tuple[float, int]]:
        """Minus the time beyond nominal between the backward steps of ops ``j`` and ``i < j``:
        ``S^b_i - S^b_j`` less their nominal distance. With ``tight`` (and at the first backward
        step ``n-1``, whose ``rho_first`` holds only its own stage's re-runs) the stall and the
        re-runs between; otherwise ``extra``, since ``rho`` counts every re-run in both."""
        if tight or j == n - 1:
            return [(-1, rerun(i)), (-1, beta[i]), (1, rerun(j)), (1, beta[j])]
        return [(-1, extra)]

    def excess(t: int, later: float, i: int, j: int) -> float:
        """What a copy back of ``t`` after step ``j`` and ``later`` re-runs add to the window up to
        ``S^b_i`` beyond the nominal time of the steps strictly between (``back_row``)."""
        return h2d(t) + later - (b_after[i] - b_after[j - 1]) / t0

    def back_row(name: str, t: int, v: int, i: int, j: int, cond: list[int], later: float = 0.0) -> None:
        """Tensor ``t`` absent at the backward step of op ``j`` (``v``) comes back, ``h2d_t`` long,
        after that step ends and before ``S^b_i``, when every column of ``cond`` is 1: the stall
        and re-runs between (``window``) cover what the steps strictly between do not, and
        ``later`` more (re-runs that follow the copy back within the window)."""
        k = excess(t, later, i, j)
        if k > 0:
            m.add_le(name, [(k, v)] + [(k, z) for z in cond] + window(i, j), k * len(cond))

    readers = rerun_readers(g, pset, x) if rel else {}
    deep = rerun_chains(g, pset, x, chains) if rel and tight and chains > 0 else {}
    if deep:       # as deep as the rows fit in CHAIN_NONZEROS
        depth = chain_depth(deep, {t.id for t in planning if t.id in s}, ms,
                            [j for j in range(n) if need_b[j] > 0],
                            lambda t, after, i, j: excess(t, sum(cost[q] for q in after) / t0, i, j) > 0)
        deep = {t: [e for e in ents if len(e[0]) <= depth] for t, ents in deep.items()}
    # v_chains: the copies back of the tensors that chains read in one stage queue on one engine
    chained: dict[tuple[int, int], int] = {}    # (t, top) -> c_chain[t,top]

    def queue_row(j: int, top: int, absent: dict[int, int], fewest: float) -> None:
        """``v_chains[j,top]`` (docs/journal/milp-full-size.md, "The copies back queue on one engine, and chains of 12"):
        ``absent`` the tensors ``t`` with chain rows at step ``j`` that end in stage ``top``
        (``{t: v[t,j]}``), ``fewest`` the least re-runs after a read of their chains."""
        terms = [(fewest, m.var(f"z_chains[{j},{top}]", 0.0, 1.0))]
        for t, v in absent.items():
            if (t, top) not in chained:
                cv = chained[t, top] = m.var(f"c_chain[{t},{top}]", 0.0, 1.0)
                for i, ch in enumerate(minimal_sets(ch for ch, _ in deep[t] if ms[ch[0]] == top)):
                    m.add_ge(f"c_chain_if[{t},{top},{i}]", [(1, cv)] + [(-1, x[y]) for y in ch], 1 - len(ch))
            w = m.var(f"w_chain[{t},{j},{top}]", 0.0, 1.0)
            m.add_ge(f"w_chain_if[{t},{j},{top}]", [(1, w), (-1, v), (-1, chained[t, top])], -1)
            m.add_ge(f"z_chains_if[{j},{top},{t}]", [(1, terms[0][1]), (-1, w)], 0)
            terms.append((h2d(t), w))
        m.add_le(f"v_chains[{j},{top}]", terms + window(top, j), (b_after[top] - b_after[j - 1]) / t0)

    for j in range(n):
        if need_b[j] > 0:
            wv = m.var(f"Wb[{j}]")
            m.add_ge(f"mem_bwd[{j}]", [(1, rx_b[j]), (1, wv)] + [(size[t], y[t]) for t in dropped.get(j, ())]
                     + [(-size[t], hv) for t, hv in held.get(j, {}).items()], need_b[j] / b0)
            m.add_le(f"Wb_src[{j}]", [(1, wv), (-1, sx_b[j])], 0)
            if j == n - 1 and pend:
                m.add_le("Wb_pend", [(1, wv), (-1, sx_b[j])] + [(size[t], v) for t, v in pend.items()], 0)
            if timed:
                terms, rhs = s_back(j)
                m.add_le(f"Wb_d2h[{j}]", [(1, wv)] + terms, rhs)
            if rel:
                vs = {}
                queued: dict[int, dict[int, int]] = {}      # top -> {t: v[t,j]}: chains that end in stage top
                least: dict[int, float] = {}                # top -> the fewest re-runs after a read
                for t in planning:
                    if t.id in s and ms[t.id] < j:
                        v = vs[t.id] = m.var(f"v[{t.id},{j}]", 0.0, 1.0, binary=integral)
                        released.append((v, t.id, 2 * n - 1 - j))
                        m.add_le(f"v_src[{t.id},{j}]", [(1, v), (-1, s[t.id])], 0)
                        # copied out in full by S^b_j (with tight: the o rows below) ...
                        if tight:
                            v_at.setdefault(t.id, {})[j] = v
                        else:
                            late = (t_before[t.producer + 1] - t_before[n] - b_after[j]) / t0 + d2h(t.id)
                            if late > 0:
                                m.add_le(f"v_time[{t.id},{j}]", [(late, v), (-1, sig[n]), (1, sig[t.producer]),
                                                                 (-1, rerun(j)), (-1, beta[j])], 0)
                        # ... and not copied back yet: its issue stage is below j, so its copy back
                        # starts after step j ends and ends h2d_t later, before S^b_{ms(t)}
                        back_row(f"v_back[{t.id},{j}]", t.id, v, ms[t.id], j, [])
                        # ... or before a re-run that reads it: the regeneration of a RECOMPUTE y,
                        # in a stage >= ms(y). At j <= ms(y) t is then resident; below, the copy
                        # back ends before that stage (the v_read rows)
                        for yv in readers.get(t.id, ()):
                            if ms[yv] >= j:
                                m.add_le(f"v_held[{t.id},{j},{yv}]", [(1, v), (1, x[yv])], 1)
                            elif ms[yv] > ms[t.id]:
                                back_row(f"v_read[{t.id},{j},{yv}]", t.id, v, ms[yv], j, [x[yv]])
                        # ... and before the re-runs along a chain of RECOMPUTE tensors that
                        # reads it (v_chain: rerun_chains), less the re-runs after the read
                        for k, (ch, after) in enumerate(deep.get(t.id, ())):
                            top = ms[ch[0]]
                            if j > top > ms[t.id]:
                                later = sum(cost[q] for q in after) / t0
                                back_row(f"v_chain[{t.id},{j},{k}]", t.id, v, top, j, [x[y] for y in ch], later)
                                queued.setdefault(top, {})[t.id] = v
                                least[top] = min(least.get(top, math.inf), later)
                m.add_le(f"Wb_rel[{j}]", [(1, wv)] + [(-size[t], v) for t, v in vs.items()], 0)
                for top, absent in queued.items():     # v_chains: the copies back on one engine
                    if len(absent) > 1:
                        queue_row(j, top, absent, least[top])
                if not tight:
                    m.add_le(f"v_d2h[{j}]", [(d2h(t), v) for t, v in vs.items()] + [(-1, MT[n]), (-1, sig[n]),
                                                                                      (-1, rerun(j)), (-1, beta[j])],
                             (t_before[n] + b_after[j]) / t0)
        if s:
            if timed:
                terms, rhs = s_back(j)
                m.add_le(f"d2h_back[{j}]", [(1, d_b[j])] + terms, rhs)
            if rel:
                m.add_le(f"d2h_time_back[{j}]", [(1, dt_b[j]), (-1, MT[n]), (-1, sig[n]),
                                                 (-1, rerun(j)), (-1, beta[j])],
                         (t_before[n] + b_after[j]) / t0)
            m.add_le(f"h2d_back[{j}]", [(1, h_b[j]), (-1, sig[n]), (1, sig[n - 1]),
                                       (-1, rerun(j)), (-1, beta[j])], b_after[j] / t0)

    if rel and tight:
        # o[t,j]: swapped tensor t copied out in full by S^b_j. A copy out, once done, stays done:
        # absent at an earlier step (v) or released in the forward pass (u) implies o at every later one
        outs: dict[int, list[tuple[int, int]]] = {}
        for t, at in v_at.items():
            prev = None
            for j in sorted(at, reverse=True):       # backward steps in time order
                o = m.var(f"o[{t},{j}]", 0.0, 1.0)
                released.append((o, t, 2 * n - 1 - j))
                m.add_le(f"o_src[{t},{j}]", [(1, o), (-1, s[t])], 0)
                m.add_ge(f"o_abs[{t},{j}]", [(1, o), (-1, at[j])], 0)
                if prev is None:
                    for i, uv in enumerate(u_all.get(t, ())):
                        m.add_ge(f"o_fwd[{t},{j},{i}]", [(1, o), (-1, uv)], 0)
                else:
                    m.add_ge(f"o_mono[{t},{j}]", [(1, o), (-1, prev)], 0)
                prev = o
                outs.setdefault(j, []).append((t, o))
                tt = g.tensors[t]
                late = (t_before[tt.producer + 1] - t_before[n] - b_after[j]) / t0 + d2h(t)
                if late > 0:
                    m.add_le(f"o_time[{t},{j}]", [(late, o), (-1, sig[n]), (1, sig[tt.producer]),
                                                  (-1, rerun(j)), (-1, beta[j])], 0)
        for j, lst in outs.items():
            m.add_le(f"o_d2h[{j}]", [(d2h(t), o) for t, o in lst] + [(1, dt_b[j]), (-1, MT[n]), (-1, sig[n]),
                                                                     (-1, rerun(j)), (-1, beta[j])],
                     (t_before[n] + b_after[j]) / t0)

    for t in planning:      # a copy back follows the copy out, which starts when the producer ends
        if t.id in s:
            j, p = ms[t.id], t.producer
            late = (t_before[p + 1] - t_before[n] - b_after[j]) / t0 + d2h(t.id) + h2d(t.id)
            if late > 0:
                m.add_ge(f"chain[{t.id}]", [(1, sig[n]), (-1, sig[p]), (1, rerun(j)),
                                           (1, beta[j]), (-late, s[t.id])], 0)

    def rerun_rows(rho_var, roots, key: str) -> None:
        """``rho_var`` (the recompute before a backward step) is at most the cost of the ops that
        may be re-run for the ``roots`` (the RECOMPUTE tensors needed at that step or before it):
        their producers and, through RECOMPUTE and unsaved inputs, the ops that rebuild those
        producers' inputs. ``key`` "": stage ``n-1``, one variable per reason (``z[q,i] <= rf[p]``,
        ``<= x[y]``); else (``key`` = j, the rows ``rf[j,q]``) two rows without them, to keep the
        model small: ``rf <=`` the roots plus ``rf[p]`` of every reason, and plus ``x[y]`` (for a
        planning tensor) or ``rf[p]``."""
        at = f"{key}," if key else ""
        edges: dict[int, list[tuple[int | None, int]]] = {}
        stack = [(g.tensors[t].producer, t, None) for t in roots]
        seen: set[int] = set()
        while stack:
            q, y, p = stack.pop()
            edges.setdefault(q, []).append((p, y))
            if q in seen:
                continue
            seen.add(q)
            stack.extend((p, inp, q) for p, inp in rebuilt.get(q, ()))
        rf = {q: m.var(f"rf[{at}{q}]", 0.0, 1.0) for q in sorted(seen)}
        for q in sorted(seen):
            m.add_le(f"rf_needs_r[{at}{q}]", [(1, rf[q]), (-1, r[q])], 0)
            if key:
                roots_q = [(-1, x[y]) for p, y in edges[q] if p is None]
                a1 = [(-1, rf[p]) for p, y in edges[q] if p is not None]
                a2 = [(-1, x[y]) if y in pset else (-1, rf[p]) for p, y in edges[q] if p is not None]
                m.add_le(f"rf_why[{at}{q}]", [(1, rf[q])] + roots_q + a1, 0)
                if any(y in pset for p, y in edges[q] if p is not None):
                    m.add_le(f"rf_why2[{at}{q}]", [(1, rf[q])] + roots_q + a2, 0)
                continue
            why = []
            for i, (p, y) in enumerate(edges[q]):
                zv = m.var(f"z[{at}{q},{i}]", 0.0, 1.0)
                if p is not None:
                    m.add_le(f"z_rerun[{at}{q},{i}]", [(1, zv), (-1, rf[p])], 0)
                if y in pset:
                    m.add_le(f"z_rec[{at}{q},{i}]", [(1, zv), (-1, x[y])], 0)
                why.append((-1, zv))
            m.add_le(f"rf_why[{at}{q}]", [(1, rf[q])] + why, 0)
        name = f"rho_by_def[{key}]" if key else "rho_first_def"
        m.add_le(name, [(1, rho_var)] + [(-cost[q] / t0, rf[q]) for q in sorted(seen)], 0)

    # rho_first: only ops re-run in the first backward stage (stage n-1) run before its step
    rerun_rows(rho_first, [t for t in dict.fromkeys(g.ops[n - 1].saves) if t in x], "")
    # with tight, the same before the backward step of every op j: the simulator re-runs an op
    # in stage i only to rebuild what stage i needs, so only ops first re-run for RECOMPUTE tensors
    # with ms(t) >= j run before it (repeated re-runs are in beta)
    for j in sorted(stage_rho):
        rerun_rows(stage_rho[j], [t for t in x if ms[t] >= j], str(j))

    m.minimize([(1, sig[n]), (1, beta[0])] + [(cost[p] / t0, r[p]) for p in range(n)])
    return Aggregate(m, t0, x, s, released)


def add_to(m: Model, problem, rec: dict[int, int], swap: dict[int, int], step_col: int, tau: float,
           offset: float = 0.0) -> None:
    """Add this relaxation to another model ``m`` of ``problem`` (the exact formulation), as
    valid rows: its columns are copied (continuous, names prefixed ``agg.``), its decisions are
    ``m``'s (``rec`` / ``swap``: tensor id -> column of ``m``; a tensor missing there is never
    RECOMPUTE / SWAP in ``m``, so its term is left out), and the row ``agg.link`` says that the
    step time ``tau * m[step_col] + offset`` (seconds) is at least the ideal step plus the
    relaxation's objective. Every plan maps to a point of the relaxation whose objective is at
    most its extra time (module docstring), so no plan is cut off; what it adds is a stronger LP
    relaxation of ``m`` (docs/milp.md, "Constraints (names as in the LP file)"). Nothing is added when the relaxation is empty
    (no step exceeds the budget under keep-all)."""
    agg = build(problem)
    if agg is None:
        return
    a = agg.model
    shared = {col: rec.get(t) for t, col in agg.rec.items()}
    shared.update({col: swap.get(t) for t, col in agg.swap.items()})
    cmap = [shared[i] if i in shared else m.var(f"agg.{name}", a.lb[i], a.ub[i])
            for i, name in enumerate(a.names)]
    for name, row, lo, hi in zip(a.row_names, a.rows, a.lo, a.hi, strict=True):
        m._row(f"agg.{name}", [(cf, cmap[v]) for v, cf in row.items() if cmap[v] is not None], lo, hi)
    k = agg.t0 / tau
    m.add_ge("agg.link", [(1.0, step_col)] + [(-k * cf, cmap[v]) for v, cf in a.obj.items()],
             (problem.ideal_step_s - offset) / tau + k * a.obj_const)
